"""A Report's layout as plain JAX code (`Report.to_code()`, the CLI's ``--emit-code``).

The snippet builds the mesh with `jax.make_mesh`, a NamedSharding for every input and output,
the activations the exploration pinned, and `jit_with_layout(f, *args)`: `jax.jit` with those
in and out shardings, donating the inputs the analysis donated (`donate_argnums`, so that the
memory is the Report's). Where the tensors have logical dimension names (the built-in workloads),
the same layout is also written as `logical_axis_rules` pairs, the form flax.linen and MaxText
take. A built-in workload's snippet ends by compiling the workload's own program with the same
constraints, reached through the public `explorer.WORKLOADS` (the snippet imports only `jax`,
`functools` and `explorer`, never a private module); a user's function is not in the Report, so
its snippet ends with how to call `jit_with_layout` on it.

Every value written into the code is a Python literal made by `repr` (names come from the
user's pytrees and could hold any text), and comments carry only escaped text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from explorer._src.compile.protocol import Partitioner
from explorer._src.errors import RuleError
from explorer._src.spec.mesh import JAX_AXIS_TYPE_NAMES, MeshSpec
from explorer._src.spec.tensor import Entry, TensorRole, entry_axes, parse_spec
from explorer._src.strategy.rules import LOGICAL_NAMES, Rule, Rules, logical_spec, parse_rules
from explorer._src.workloads.base import STATE_KINDS, Workload, kind_of
from explorer._src.workloads.registry import WORKLOADS


class _Layout(Protocol):
    """What the code is written from: a Report's fields (report/report.py imports this module,
    so it is named by the attributes read rather than imported)."""

    mesh: MeshSpec
    partitioner: Partitioner
    tensors: Sequence[Any]          # TensorInfo: name, kind, shape, dtype, spec
    workload: Any                   # WorkloadInfo or None
    donated: Sequence[str]          # the donated inputs' names


def to_code(report: _Layout) -> str:
    """The plain-JAX snippet of `report`'s layout (see the module docstring)."""
    inputs = [t for t in report.tensors if t.kind == TensorRole.INPUT]
    outputs = [t for t in report.tensors if t.kind == TensorRole.OUTPUT]
    info = report.workload
    workload = WORKLOADS.get(info.name) if info is not None else None
    activations = {n: parse_spec(s, tensor=n) for n, s in info.activations.items()} if info else {}
    lines = [*_header(report, info), "", *_mesh(report.mesh, report.partitioner), "",
             *_shardings("input_shardings", "Each input's sharding, in the order jax flattens "
                         "the arguments.", inputs),
             *_shardings("output_shardings", "Each output's sharding, as the partitioner chose "
                         "it.", outputs)]
    if activations:
        lines += _activations(activations)
    lines += _rules(info, workload, inputs, report.mesh)
    lines += ["", *_JIT_WITH_LAYOUT]
    donated = [i for i, t in enumerate(inputs) if t.name in set(report.donated)]
    if workload is not None:
        lines += ["", *_workload_program(info, workload, inputs, activations, donated)]
    else:
        lines += ["", *_donation(inputs, donated), *_USAGE]
    return "\n".join(lines) + "\n"


def _comment(text: str) -> str:
    """`text` safe inside a comment: newlines and control characters escaped."""
    return repr(str(text))[1:-1]


def _header(report: _Layout, info) -> list[str]:
    what = (f"the built-in workload {info.name!r}" if info is not None and info.name in WORKLOADS
            else "your function")
    return [f"# The layout sharding-explorer found for {_comment(what)} on the mesh "
            f"{_comment(report.mesh.text())}, as plain JAX.",
            f"# Run it on {report.mesh.device_count} devices (on a CPU: XLA_FLAGS="
            f"--xla_force_host_platform_device_count={report.mesh.device_count}).",
            "import jax",
            "from jax.sharding import AxisType, NamedSharding",
            "from jax.sharding import PartitionSpec as P"]


def _mesh(mesh: MeshSpec, partitioner: Partitioner) -> list[str]:
    kinds = [f"AxisType.{JAX_AXIS_TYPE_NAMES[t]}" for t in mesh.axis_types]
    # One type throughout as `(T,) * n`, as before; a mesh of mixed types names each axis's.
    types = (f"({kinds[0]},) * {len(kinds)}" if not mesh.mixed
             else "(" + ", ".join(kinds) + ")")
    return [f"jax.config.update('jax_use_shardy_partitioner', {partitioner == Partitioner.SHARDY})"
            f"  # {_comment(partitioner)}",
            f"mesh = jax.make_mesh({tuple(mesh.sizes)!r}, {tuple(mesh.names)!r},",
            f"                     axis_types={types})"]


def spec_code(spec: Sequence[Entry]) -> str:
    """``P('data', None)`` for the entries ('data', None); ``P()`` for replicated."""
    return "P(" + ", ".join(repr(e) for e in spec) + ")"


def _shardings(variable: str, what: str, tensors: Sequence[Any]) -> list[str]:
    lines = [f"# {what}", f"{variable} = {{"]
    for t in tensors:
        shape = _comment(f"{t.dtype}[{','.join(map(str, t.shape))}]")
        if t.spec is None:
            # No spec over the mesh axes says it: jit's None leaves it to the partitioner.
            lines.append(f"    {t.name!r}: None,  # {shape}: not a layout over the mesh axes")
        else:
            # An offloaded input or output (memory kind pinned_host) stays in host memory.
            kind = getattr(t, "memory_kind", "device")
            memory = f", memory_kind={kind!r}" if kind != "device" else ""
            lines.append(f"    {t.name!r}: NamedSharding(mesh, {spec_code(t.spec)}{memory}),"
                         f"  # {shape}")
    return lines + ["}"]


def _activations(activations: Mapping[str, tuple[Entry, ...]]) -> list[str]:
    lines = ["# The activations the exploration pinned. Constrain each where your function "
             "computes it:",
             "#     h = jax.lax.with_sharding_constraint(h, activation_shardings['hidden'])",
             "activation_shardings = {"]
    lines += [f"    {n!r}: NamedSharding(mesh, {spec_code(s)})," for n, s in activations.items()]
    return lines + ["}"]


# ------------------------------------------------------------------------ logical-axis rules


def _rules(info, workload: Workload | None, inputs: Sequence[Any], mesh: MeshSpec) -> list[str]:
    """The layout as logical-axis rules, where the tensors have logical names: the rule table
    the exploration applied, else one read off the inputs' specs when they agree."""
    if info is None:
        return []
    params = dict(info.params)
    logical = workload.logical(params) if workload is not None and workload.logical else {}
    kinds = workload.kinds(params) if workload is not None and workload.kinds else {}
    known = tuple(dict.fromkeys(LOGICAL_NAMES + tuple(
        d for dims in logical.values() for d in dims if d is not None)))
    if info.rules:
        try:
            rules = parse_rules(info.rules, known)
        except RuleError:       # a model's own logical names, which this table does not know
            return ["", f"# The exploration's logical-axis rules: {_comment(info.rules)}"]
    elif logical:
        rules = _rules_from_specs(logical, {t.name: t.spec for t in inputs})
        if rules is None:
            return ["", "# No logical-axis rules express this layout: one logical name is "
                        "split differently in two tensors."]
    else:
        return []
    if not rules.rules:
        return []
    lines = ["", "# The same layout as logical-axis rules: (logical name, mesh axes) in priority",
             "# order, as flax.linen.logical_axis_rules and MaxText's logical_axis_rules take "
             "them.", "logical_axis_rules = (",
             *(f"    {(n, e)!r}," for n, e in rules.pairs(None)), ")"]
    absent = [a for r in rules.rules if r.first_fit for a in entry_axes(r.entry)
              if a not in mesh.shape]
    if absent:
        lines += [f"# Mesh axes this mesh lacks, read as axes of size 1 (MaxText's meshes hold "
                  f"them): {_comment(', '.join(map(repr, dict.fromkeys(absent))))}.",
                  "# Give jax.make_mesh those axes with size 1 to use the table as it is."]
    scoped = list(dict.fromkeys(r.kind for r in rules.rules if r.kind is not None))
    if scoped:
        lines += ["# Rules scoped to one kind of tensor, which Flax's rules cannot say: the "
                  "whole table", "# for the tensors of each kind.",
                  "logical_axis_rules_by_kind = {"]
        # Each kind as its text ('opt'), which the snippet's reader writes, not the enum's repr.
        lines += [f"    {str(k)!r}: {rules.pairs(k)!r}," for k in scoped]
        lines.append("}")
    specs = {t.name: t.spec for t in inputs}
    given = [n for n, dims in logical.items() if n in specs
             and logical_spec(dims, rules.pairs(kind_of(kinds, n)), mesh.shape)
             != tuple(specs[n])]
    if given:
        lines.append(f"# Inputs whose spec was given per tensor, not by these rules: "
                     f"{_comment(', '.join(map(repr, given)))}")
    return lines


def _rules_from_specs(logical: Mapping[str, tuple[str | None, ...]],
                      specs: Mapping[str, tuple[Entry, ...] | None]) -> Rules | None:
    """The rule table that gives each input its spec: every logical name the mesh axes its
    tensors split it over; None when two tensors split one name differently."""
    table: dict[str, Entry] = {}
    for name, dims in logical.items():
        spec = specs.get(name)
        if spec is None:
            continue
        for dim, entry in zip(dims, spec, strict=False):
            if dim is None or entry is None:
                continue
            if table.setdefault(dim, entry) != entry:
                return None
    rules = Rules(tuple(Rule(None, n, e) for n, e in table.items()))
    # A name left whole in one tensor and split in another is no rule either.
    if any(logical_spec(dims, rules.table(None)) != tuple(specs[n])
           for n, dims in logical.items() if specs.get(n) is not None):
        return None
    return rules


# ------------------------------------------------------------------------------- the program


_JIT_WITH_LAYOUT = [
    "def jit_with_layout(f, *args, donate_argnums=()):",
    '    """`f` jitted with the shardings above; `args` are its inputs (arrays or',
    "    jax.ShapeDtypeStructs) in the structure given to the explorer, and `donate_argnums`",
    "    the arguments whose buffers the outputs may take. Call it, and lower the result,",
    '    under `with jax.set_mesh(mesh):`."""',
    "    in_shardings = jax.tree.unflatten(jax.tree.structure(args),",
    "                                      list(input_shardings.values()))",
    "    outputs = jax.tree.structure(jax.eval_shape(f, *args))",
    "    out_shardings = jax.tree.unflatten(outputs, list(output_shardings.values()))",
    "    return jax.jit(f, in_shardings=in_shardings, out_shardings=out_shardings,",
    "                   donate_argnums=donate_argnums)",
]

_USAGE = [
    "# Your function `f` and its inputs `args`, as given to the explorer:",
    "#     with jax.set_mesh(mesh):",
    "#         compiled = jit_with_layout(f, *args).lower(*args).compile()",
]


def _positions(donated: Sequence[int]) -> str:
    """`donated` as code: ``tuple(range(2, 29))`` for a run of positions (a train step's
    whole state), else the tuple itself."""
    if len(donated) > 2 and list(donated) == list(range(donated[0], donated[-1] + 1)):
        return f"tuple(range({donated[0]}, {donated[-1] + 1}))"
    return repr(tuple(donated))


def _donation(inputs: Sequence[Any], donated: Sequence[int]) -> list[str]:
    """For a user's function: which inputs the analysis donated. jax donates whole arguments,
    and the snippet does not know which of the function's arguments holds each input."""
    if not donated:
        return []
    names = ", ".join(repr(inputs[i].name) for i in donated)
    return ["# The analysis donated these inputs (explorer.analyze's donate=): "
            f"{_comment(names)}.",
            "# jax donates whole arguments: pass donate_argnums= with the positions of the",
            "# arguments that hold them, to compile with the Report's memory."]


def _workload_program(info, workload: Workload, inputs: Sequence[Any],
                      activations: Mapping[str, tuple[Entry, ...]],
                      donated: Sequence[int]) -> list[str]:
    """The built-in workload's program compiled with the layout: explorer's code, so that the
    snippet compiles what the Report describes."""
    constraints = dict(activations)
    if workload.returns_state:
        # As explorer/_src/strategy/plan.py pins them: the state comes out in its input layout.
        kinds = workload.kinds(dict(info.params)) if workload.kinds else {}
        for t in inputs:
            if kind_of(kinds, t.name) in STATE_KINDS:
                constraints[t.name] = tuple(t.spec or ())
    args = ", ".join(f"jax.ShapeDtypeStruct({tuple(t.shape)!r}, {t.dtype!r})" for t in inputs)
    table = ", ".join(f"({n!r}, {spec_code(s)})" for n, s in constraints.items())
    return [
        "# The built-in workload's program (explorer's own code), with the constraints it",
        "# pinned, compiled with this layout:",
        "import functools",
        "",
        "import explorer",
        "",
        f"workload = explorer.WORKLOADS[{info.name!r}]",
        f"f = workload.build(workload.resolve({dict(info.params)!r}))",
        *([f"f = functools.partial(f, constraints=({table},))"] if constraints else []),
        f"args = ({args},)",
        *(["# The state the step replaces is donated, as a training loop donates it: the new",
            "# params and optimizer state take the old ones' buffers."] if donated else []),
        "with jax.set_mesh(mesh):",
        "    compiled = jit_with_layout(f, *args"
        + (f", donate_argnums={_positions(donated)}" if donated else "")
        + ").lower(*args).compile()",
    ]
