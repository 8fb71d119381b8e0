"""explorer.Request: one checked description of one analysis, and the stages it goes through.

A Request names the program (a built-in workload and its params, or a function and its inputs,
pytrees included), the mesh, the specs (per tensor, or partition rules as regular expressions),
logical-axis rules or a preset, the target and axis mapping, and how to compile it. It is
checked when it is made, and nothing more: every field at once, each error an InputError naming
the field, the value and the valid choices (the mesh, the target and mapping, spec text and
patterns, the workload, its params and preset). Then it goes through stages, as jax's own
`jit -> trace -> Lowered -> Compiled` does, each made once, when it is first asked for:

    Request --plan()--> Planned --lower()--> LoweredProgram --worker--> Report
    (checked fields)    (the layout, every   (the module text,         (explorer/_src/api/
                         input's spec, the    explorer/_src/compile/     analyze.py)
                         compile plan, keys)  lowering.py)

`plan()` places every input (a workload's layout plan, a function's inputs named and its spec
patterns applied) and checks what needs that: a spec that does not fit its tensor, a donation
that names no input. `lower()` traces and lowers the program in this process, under the
contexts in force where the Request was made (explorer/_src/compile/lowering.py). The CLI, the
app and the Python API each build a Request at their edge; `explorer._src.api.analyze.run`
plans it (an error there is the same InputError the keyword API always raised), and lowers it
only where no cache holds its Report (a built-in workload's plan names its program without a
trace: `Planned.identity`).

`dataclasses.replace(request, **changes)` makes the edited request, checked the same way. Its
stages are made again only where their inputs changed: the layout (or a function's named
inputs) is kept by what it reads (`_LAYOUTS`), and the lowered program by what its trace reads
(explorer/_src/compile/lowering.py's memo), so an edit of the target, the mapping or the
timeout neither plans the layout nor traces again.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from explorer._src.api.mesh_source import MeshChoice, choose_mesh, is_jax_mesh
from explorer._src.api.output_specs import OutputSpecs, check_out_specs
from explorer._src.api.patterns import apply_spec_patterns, spec_patterns, unmatched
from explorer._src.api.pytrees import named_inputs, tensor_leaves
from explorer._src.api.request import (
    ExtrapolateLike,
    check_donate,
    check_flag,
    check_function,
    check_inputs,
    check_mesh,
    check_partitioner,
    check_target,
    check_timeout,
    extrapolate_option,
    layer_count,
)
from explorer._src.api.targeting import (
    CompileFor,
    CompilePlan,
    check_compile_for,
    compile_plan,
    where_it_runs,
)
from explorer._src.compile.caller_context import CallerContext, bind_context
from explorer._src.compile.lowering import (
    LoweredProgram,
    leave_the_chip_to_the_worker,
    lower_program,
    platform_of,
)
from explorer._src.compile.pool import default_pool
from explorer._src.compile.protocol import Backend, Partitioner, WorkerKey
from explorer._src.cost.mapping import AxisMapping
from explorer._src.errors import InputError, WorkloadError, choices
from explorer._src.lru import Lru
from explorer._src.quiet_jax import accelerator_platform
from explorer._src.report.report import WorkloadInfo
from explorer._src.spec.bounds import show
from explorer._src.spec.mesh import AxisType, MeshSpec
from explorer._src.spec.tensor import Entry, TensorSpec, normalize_spec
from explorer._src.strategy.plan import Plan, _is_free, check_planned, plan
from explorer._src.strategy.presets import get_preset
from explorer._src.strategy.rules import Rules
from explorer._src.workloads.base import Workload, WorkloadProgram
from explorer._src.workloads.registry import get_workload

if TYPE_CHECKING:
    import jax
    from jax.sharding import PartitionSpec

# What a request accepts for the mesh, a target mapping and a spec; a jax.sharding.Mesh (or
# AbstractMesh) too, with its own axis types.
MeshLike: TypeAlias = "str | Mapping[str, int] | MeshSpec | jax.sharding.Mesh"
# Values: a physical axis name, "name:k", (name, k) or a sequence of those.
MappingLike: TypeAlias = str | Mapping[str, Any] | AxisMapping
# Quoted: jax is imported only inside the functions that flatten pytrees.
SpecLike: TypeAlias = "str | Sequence[Entry] | PartitionSpec"
# Partition rules as libraries write them (explorer/_src/api/patterns.py): a mapping or a sequence
# of (regular expression, spec) pairs.
SpecPatterns: TypeAlias = "Mapping[str, SpecLike] | Sequence[tuple[str, SpecLike]]"
# Logical-axis rules: text, a mapping, or (logical name, mesh axes) pairs as flax and MaxText
# write them (explorer/_src/strategy/rules.py).
RulesLike: TypeAlias = str | Mapping[str, Any] | Sequence[tuple[str, Any]] | Rules
# The closed sets, as their enums or the names users write.
PartitionerName: TypeAlias = Partitioner | Literal["shardy", "gspmd"]
AxisTypeName: TypeAlias = AxisType | Literal["auto", "explicit", "manual"] | tuple
CompileForName: TypeAlias = CompileFor | Literal["target", "cpu"]

# The fields that only a workload's request has, and those only a function's has.
_WORKLOAD_ONLY = ("params", "preset", "rules", "activations")
_FUNCTION_ONLY = ("inputs", "out_specs")


@dataclass(frozen=True)
class Planned:
    """A Request's plan (`Request.plan()`): everything a compile and its Report need, so that
    no later step checks or plans again; `lower()` makes the next stage, the program lowered."""

    mesh: MeshSpec
    partitioner: Partitioner
    compile_plan: CompilePlan
    mapping: AxisMapping | None          # the mesh axes on the target's links (None: no target)
    timeout: float | None
    inputs: tuple                        # the arguments, every leaf a named TensorSpec
    leaves: tuple[TensorSpec, ...]       # every input, in HLO parameter order
    donated: tuple[int, ...]             # positions among `leaves` the program may overwrite
    # Traces and lowers the program in the caller's process, under the request's contexts: the
    # module the worker compiles. Called once, by `lower()`, when it is first needed: a Report
    # a cache holds for a workload's `identity` never needs it.
    trace: Callable[[], LoweredProgram] = field(repr=False, compare=False)
    # What a compile reads besides the program: the mesh, the inputs, the compile plan ...
    key_parts: tuple = field(repr=False)
    # A built-in workload's request made in a process that has not imported jax (so under no
    # context and jax's defaults): the workload, its params and constraint table and this
    # environment's JAX_ variables, which name its program as well as the lowered text does.
    identity: bytes | None = field(default=None, repr=False)
    idle_patterns: tuple[str, ...] = ()  # `specs` patterns that found no input
    # A built-in workload's: the workload, its resolved params and its layout plan.
    workload: Workload | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    layout: Plan | None = None

    def lower(self) -> LoweredProgram:
        """The program as traced and lowered in the caller's process, which the worker
        compiles: traced the first time it is asked for, then kept."""
        return self.lowered

    @functools.cached_property
    def lowered(self) -> LoweredProgram:
        # A trace after the user imported jax may be under their own config: it no longer
        # answers for the identity (see `keys`).
        self.__dict__["_traced_pristine"] = "jax" not in sys.modules
        return self.trace()

    @functools.cached_property
    def key(self) -> str:
        """The cache key: the program and everything it reads. A workload's `identity`, where
        it has one, stands for the program, so that a cache hit traces nothing."""
        program = self.identity if self.identity is not None else \
            self.lower().stablehlo.encode()
        return _digest(program, self.key_parts)

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key the Report is stored under: `key`, and once the program is lowered, the
        key of its lowered text, which the same request made where jax is imported looks up.
        A workload whose trace was not under jax's defaults (the user imported jax and maybe
        changed its config after the request was made) drops its identity key."""
        if self.identity is None or "lowered" not in self.__dict__:
            return (self.key,)          # without an identity, `key` is the lowered text's
        by_text = _digest(self.lowered.stablehlo.encode(), self.key_parts)
        if not self.__dict__["_traced_pristine"]:
            return (by_text,)
        return (self.key, by_text)

    def __getstate__(self) -> dict:
        """What pickling keeps (a Request sent to a Ray task): the program lowered here, never
        the tracer, which holds the caller's function."""
        _ = self.lowered, self.key
        return {**self.__dict__, "trace": None}

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.leaves]

    def workload_info(self, name: str, preset: str | None) -> WorkloadInfo | None:
        if self.workload is None or self.layout is None:
            return None
        extra = self.workload.info(self.params) if self.workload.info is not None else {}
        return WorkloadInfo(name=name, params=dict(self.params), preset=preset, extra=extra,
                            **self.layout.info())


@dataclass(frozen=True)
class Checked:
    """What a Request's fields resolved to when it was made, which its plan starts from."""

    mesh: MeshChoice
    mapping: AxisMapping | None
    timeout: float | None
    partitioner: Partitioner
    compile_for: CompileFor
    # A function's pinned output layout (explorer/_src/api/output_specs.py).
    out_specs: OutputSpecs | None = None
    # A built-in workload's: the workload and its params, defaults filled in.
    workload: Workload | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    # Made before this process imported jax: no context nor config of the user's was in force,
    # so a workload's identity names its program without a trace (`Planned.identity`).
    before_jax: bool = False


@dataclass(frozen=True, kw_only=True)
class Request:
    """One analysis, its fields checked when it is made; `plan()` plans it (once).

    Give either `workload` (a name of explorer.WORKLOADS, with `params`, `specs`, `preset`,
    `rules`, `activations`) or `fn` with its `inputs` (TensorSpecs, array-likes or pytrees of
    them; `specs` then are partition rules: regular expression -> spec). The other fields are
    explorer.analyze's keywords, with the same meaning; `donate=None` for a workload is the
    workload's own donation (a training step donates its state). `mesh=None` is the mesh the
    inputs' NamedShardings or the caller's jax.set_mesh name, with its own axis types
    (explorer.analyze's `mesh`), which the Request then holds as its AbstractMesh.

    Raises on construction (InputError and its subclasses), naming the field and the choices:
    a malformed or too large mesh, an unknown workload, param, preset, target, mapping,
    partitioner, compile_for or axis type, spec text or a spec pattern that cannot be read, a
    timeout out of range, an `extrapolate` that is not one of its forms or that asks for the
    layers of a program that counts none (a function's, a workload without a layer param).
    What needs the inputs placed (a spec that does not fit its tensor,
    rules that name no dimension, a donation that names no input) raises at `plan()`, which
    explorer.analyze calls first.

    Example:
        >>> import explorer
        >>> r = explorer.Request(workload="mlp", mesh="data=2,model=4", preset="megatron")
        >>> planned = r.plan()
        >>> planned.mesh.sizes, [t.spec for t in planned.leaves]
        ((2, 4), [('data', None), (None, 'model'), ('model', None)])
        >>> explorer.Request(workload="mlp", mesh="data=2,model=4", partitioner="gpsmd")
        Traceback (most recent call last):
        ...
        explorer.InputError: partitioner 'gpsmd' is not one of 'shardy', 'gspmd'
    """

    #: None: the mesh the inputs' NamedShardings, or the caller's jax.set_mesh, name
    mesh: MeshLike | None = None
    workload: str | None = None
    params: Mapping[str, Any] | None = None
    fn: Callable[..., Any] | None = None
    inputs: tuple = ()
    specs: Mapping[str, SpecLike] | SpecPatterns | None = None
    preset: str | None = None
    rules: RulesLike | None = None
    activations: Mapping[str, SpecLike | None] | None = None
    target: str | None = None
    mapping: MappingLike | None = None
    partitioner: PartitionerName = Partitioner.SHARDY
    axis_type: AxisTypeName = AxisType.AUTO
    compile_for: CompileForName = CompileFor.TARGET
    donate: str | Sequence[str] | None = None
    #: a function's outputs' layout, as jax.jit's out_shardings (explorer/_src/api/output_specs.py)
    out_specs: Any = None
    origins: bool = False
    timeout: float | None = None
    #: explorer.analyze's ``extrapolate``: a workload's stack of layers compiled at two small
    #: counts and carried on linearly (explorer/_src/api/extrapolate.py); held in one written
    #: form, False, True, "auto", "A,B" or "auto:A,B", so that two ways of asking compare equal
    extrapolate: ExtrapolateLike = False
    measure: bool = False
    tpu_topology: str | None = None
    real_devices: bool = False
    peak: bool = False
    #: the contexts the program is traced under (flax's logical axis rules, jax's matmul
    #: precision and config flags, a mesh): by default those in force where the Request is
    #: made, which its edits (dataclasses.replace) keep wherever they are traced
    context: CallerContext | None = field(default=None, repr=False, compare=False)
    #: what the fields resolved to; made on construction
    checked: Checked = field(init=False, repr=False, compare=False)

    def __new__(cls, *args: Any, **kwargs: Any) -> Request:
        """A misspelt or positional field is refused as an InputError naming the fields
        (Python's own TypeError names neither), as Session.edit refuses one; the dataclass's
        __init__ then takes the fields."""
        names = _field_names()
        unknown = [k for k in kwargs if k not in names]
        if args or unknown:
            what = (f"{show(unknown[0])} is not a field of a Request" if unknown
                    else "a Request takes its fields by name, e.g. Request(workload='mlp', "
                         "mesh='data=8')")
            raise InputError(f"{what}; the fields are {choices(names)}")
        return super().__new__(cls)

    def __post_init__(self):
        # Without fn it is a workload's request, and get_workload names the choices of a missing
        # or unknown workload.
        if self.workload is not None and self.fn is not None:
            raise InputError("a Request analyzes a built-in workload or a function, not both: "
                             "give workload= (see explorer.WORKLOADS) or fn= with its inputs=")
        if not isinstance(self.inputs, tuple):
            raise InputError(f"inputs={show(self.inputs)} is not a tuple of the function's "
                             "arguments, e.g. inputs=(x, w)")
        wrong = _WORKLOAD_ONLY if self.fn is not None else _FUNCTION_ONLY
        given = [n for n in wrong if getattr(self, n) not in (None, ())]
        if given:
            kind = "a function's" if self.fn is not None else "a workload's"
            raise InputError(f"{given[0]}= is not part of {kind} request; "
                             + ("a function's inputs carry their specs, or specs= patterns "
                                "place them" if self.fn is not None else
                                "a workload makes its own inputs (set params= instead)"))
        if self.context is None:
            object.__setattr__(self, "context", CallerContext.here())
        # One written form (None is off, as analyze's keyword took it): an edit that asks the
        # same in other words is the same Request, in a session's history and a cache's key.
        object.__setattr__(self, "extrapolate", extrapolate_option(self.extrapolate))
        checked = self._check_workload() if self.fn is None else self._check_function()
        object.__setattr__(self, "checked", checked)

    def plan(self) -> Planned:
        """The Request planned: every input placed and checked, the compile planned and the
        cache key's parts made. Made once per Request (then kept); an edit
        (dataclasses.replace) whose program, mesh and specs are unchanged reuses the layout.

        Raises:
            InputError: what needs the inputs placed: a spec that does not fit its tensor or
                the mesh, rules or activations the workload cannot take, a donation that names
                no input, inputs past the bounds.
        """
        return self.planned

    @functools.cached_property
    def planned(self) -> Planned:
        """`plan()`'s Planned."""
        return self._plan_workload() if self.fn is None else self._plan_function()

    def __getstate__(self) -> dict:
        """What pickling keeps: the plan, with the program lowered here (`Planned`), and
        everything but the function and the contexts it was traced under, which nothing after
        the lowering needs; so that a request can travel to a Ray task, whatever the function
        and the caller's meshes hold. A jax mesh (a device holds no pickle) travels as its
        MeshSpec, and a function's inputs as the TensorSpecs they were read as (their
        NamedShardings hold a jax mesh)."""
        planned = self.plan()
        return {**self.__dict__, "fn": None, "context": None,
                "checked": replace(self.checked, mesh=MeshChoice(planned.mesh)),
                "mesh": planned.mesh if is_jax_mesh(self.mesh) else self.mesh,
                "inputs": planned.inputs if self.fn is not None else self.inputs}

    @property
    def device_count(self) -> int:
        return self.checked.mesh.spec.device_count

    # -- construction: the fields checked ---------------------------------------------------

    def _check_workload(self) -> Checked:
        # In the order the keyword API always checked them, so that bad input is named the
        # same way.
        before_jax = "jax" not in sys.modules
        workload = get_workload(self.workload)
        for what in ("specs", "activations"):
            value = getattr(self, what)
            if value is not None and not isinstance(value, Mapping):
                raise WorkloadError(f"{what} {show(value)} are not a mapping of name to spec, "
                                    "e.g. {'x': 'data,None'}")
        for name, spec in (self.specs or {}).items():
            normalize_spec(spec, tensor=name)
        for name, spec in (self.activations or {}).items():
            if not _is_free(spec):
                normalize_spec(spec, tensor=name)
        timeout = check_timeout(self.timeout)
        params = workload.resolve(self.params)
        if self.extrapolate:
            layer_count(self.workload, params)     # a workload with layers to count
        if self.preset is not None:
            get_preset(self.preset)
        checked = self._check_rest(timeout, workload=workload, params=params,
                                   before_jax=before_jax)
        if workload.check is not None:
            workload.check(params, checked.mesh.spec)
        return checked

    def _check_function(self) -> Checked:
        check_function(self.fn)
        if self.extrapolate:
            layer_count(None, {})                   # refused: a function's cannot be counted
        # An edit (dataclasses.replace) traces the function again, maybe on another thread and
        # after the caller's `with` blocks closed: it keeps the contexts of the first request.
        object.__setattr__(self, "fn", bind_context(self.fn, self.context))
        if self.specs is not None:
            spec_patterns(self.specs)            # the patterns and their specs can be read
        return self._check_rest(check_timeout(self.timeout), functions=True)

    def _check_rest(self, timeout: float | None, functions: bool = False,
                    **checked) -> Checked:
        chosen = self._mesh()
        mesh = chosen.spec
        placed = check_target(self.target, self.mapping, mesh)
        pinned = check_out_specs(self.out_specs, mesh) if functions else None
        return Checked(mesh=chosen, mapping=placed, timeout=timeout,
                       partitioner=check_partitioner(self.partitioner),
                       compile_for=check_compile_for(self.compile_for), out_specs=pinned,
                       **checked)

    def _mesh(self) -> MeshChoice:
        """The mesh: `mesh=`, or where it is None, the one the inputs and the caller's mesh
        context name (explorer/_src/api/mesh_source.py), checked against what compiles it."""
        for name in ("measure", "peak", "origins"):
            check_flag(getattr(self, name), name)
        chosen = choose_mesh(self.mesh, self.axis_type, self.fn, self.inputs, self.context)
        check_mesh(chosen.spec, tpu_topology=self.tpu_topology, real_devices=self.real_devices)
        if self.mesh is None:
            # Kept as the mesh found (its abstract mesh: nothing put in force), so that an edit
            # whose inputs name no mesh (a what-if's TensorSpecs) stays on it.
            object.__setattr__(self, "mesh", chosen.trace)
        return chosen

    # -- the plan: the inputs placed --------------------------------------------------------

    def _plan_workload(self) -> Planned:
        c = self.checked
        workload, params, mesh = c.workload, c.params, c.mesh.spec
        assert workload is not None
        layout, tensors = _remembered(
            _LAYOUTS, (workload.name, params, mesh, self.specs, self.preset, self.rules,
                       self.activations),
            lambda: _layout(workload, params, mesh, self.specs, self.preset, self.rules,
                            self.activations))
        context = self.context

        def program() -> Callable:      # built when traced: building imports jax
            return bind_context(WorkloadProgram.of(workload, params, layout.constraints),
                                context)

        donate = self.donate if self.donate is not None else workload.donation(params)
        # Before this process imported jax, no context nor config of the user's was in force:
        # the workload's identity names its program without a trace.
        identity = (_workload_identity(workload.name, params, layout.constraints)
                    if c.before_jax else None)
        return self._finish(program, tensors, donate, identity=identity, workload=workload,
                            params=params, layout=layout)

    def _plan_function(self) -> Planned:
        fn, specs = self.fn, self.specs
        args, idle = _remembered(_LAYOUTS, (fn, self.inputs, specs),
                                 lambda: _named(fn, self.inputs, specs))
        return self._finish(lambda: fn, args, self.donate, idle_patterns=idle)

    def _finish(self, program: Callable[[], Callable], args: tuple, donate,
                identity: bytes | None = None, **planned) -> Planned:
        """The checks every plan shares, the compile planned, and the program's tracer (made
        by `program()`, traced and lowered here, under the request's contexts:
        explorer/_src/compile/lowering.py), which `Planned.lower()` calls once."""
        c = self.checked
        chosen, mesh, compile_for, partitioner = c.mesh, c.mesh.spec, c.compile_for, \
            c.partitioner
        # measure=True with the target this machine's accelerators are: compiled and run on
        # them, as real_devices=True would, and priced for the target asked.
        here = (where_it_runs(self.target, mesh, lambda: default_pool().warm(WorkerKey.real()))
                if self.measure and self.target is not None and compile_for is CompileFor.TARGET
                and not (self.real_devices or self.tpu_topology) else "")
        compiled = compile_plan(mesh, self.target, compile_for, tpu_topology=self.tpu_topology,
                                real_devices=self.real_devices or bool(here), mapping=c.mapping)
        leaves = tuple(tensor_leaves(args))
        check_inputs(leaves, mesh)
        donated = check_donate(donate, [t.name for t in leaves])
        inputs = tuple(args)
        platform = platform_of(compiled.worker.backend.value, accelerator_platform)
        held = (leave_the_chip_to_the_worker(platform)
                if compiled.worker.backend is Backend.REAL else "")
        notes = tuple(filter(None, (here, held)))
        out_specs = c.out_specs

        def trace() -> LoweredProgram:
            lowered = lower_program(program(), inputs, mesh, platform, partitioner.value,
                                    donated, out_specs, over=chosen.trace,
                                    in_force=chosen.in_force)
            return replace(lowered, notes=(*lowered.notes, *notes)) if notes else lowered

        return Planned(mesh=mesh, partitioner=partitioner, compile_plan=compiled,
                       mapping=c.mapping, timeout=c.timeout, inputs=inputs, leaves=leaves,
                       donated=donated, trace=trace,
                       # the platform it would be lowered for is in the lowered text
                       identity=None if identity is None else identity + platform.encode(),
                       key_parts=_key_parts(mesh, partitioner, leaves, bool(self.measure),
                                            compiled, bool(self.origins), donated),
                       **planned)


# The layouts planned last (a workload's), and the inputs named last (a function's), by what
# they read: an edit that changes none of it (the target, the mapping, the timeout) plans
# nothing again. Plain data both, shared by the Requests that read the same.
LAYOUTS_KEPT = 32
_LAYOUTS: Lru[Hashable, tuple] = Lru(LAYOUTS_KEPT)


def _remembered(memo: Lru, parts: tuple, make: Callable[[], tuple]) -> tuple:
    """`make()`, or what it made before for equal `parts`; made each time where the parts
    cannot be a key (an input that is an array)."""
    key = frozen_key(parts)
    known = memo.get(key) if key is not None else None
    if known is None:
        known = make()
        if key is not None:
            memo.put(key, known)
    return known


def frozen_key(value: Any) -> Hashable | None:
    """`value` as a key: mappings and sequences as tuples (a mapping's items in order), None
    where some part has no hash (an array), which no two Requests can be known to share."""
    def freeze(v):
        if isinstance(v, Mapping):
            return ("{", tuple((k, freeze(x)) for k, x in v.items()))
        if isinstance(v, list | tuple):
            return (type(v).__name__, tuple(freeze(x) for x in v))
        return v
    try:
        key = freeze(value)
        hash(key)
    except (TypeError, ValueError):
        return None
    return key


def _layout(workload: Workload, params: Mapping[str, Any], mesh: MeshSpec, specs, preset,
            rules, activations) -> tuple[Plan, tuple[TensorSpec, ...]]:
    """A workload's layout plan and its tensors, every one's spec checked."""
    layout = plan(workload, params, mesh, specs, preset, rules, activations)
    tensors = workload.tensors(params, {**dict(specs or {}), **layout.specs})
    check_planned(tensors, layout, mesh)
    return layout, tuple(tensors)


def _named(fn: Callable[..., Any], inputs: tuple, specs) -> tuple[tuple, tuple[str, ...]]:
    """A function's arguments, every array-like leaf a named TensorSpec placed by the `specs`
    patterns, and the patterns that found no input."""
    args = named_inputs(fn, inputs)
    if specs is None:
        return args, ()
    args = apply_spec_patterns(args, specs)
    return args, tuple(unmatched([t.name for t in tensor_leaves(args)], specs))


def _key_parts(mesh: MeshSpec, partitioner: Partitioner, args: tuple, measure: bool,
               compiled: CompilePlan, origins: bool, donated: tuple[int, ...]) -> tuple:
    """Everything a compile reads besides the program. Earlier keys stay as they were (the
    cache on disk outlives versions): what a request adds is appended only when it is asked."""
    real_devices = compiled.worker.backend is Backend.REAL
    return (mesh, partitioner, args, measure, compiled.tpu_topology, real_devices,
            compiled.gpu) + ((True,) if origins else ()) \
        + ((("donate", donated),) if donated else ()) \
        + ((("slices", compiled.slices_per_axis),) if compiled.slices_per_axis else ())


def _digest(the_program: bytes, parts: tuple) -> str:
    return hashlib.sha256(the_program + pickle.dumps(parts)).hexdigest()


def _workload_identity(name: str, params: Mapping[str, Any], constraints: tuple) -> bytes:
    """What names a built-in workload's program as its lowered text would, in a process whose
    jax is not imported yet (so under jax's defaults, which the JAX_ environment variables set
    and the disk cache's key holds jax's version beside): the workload, its resolved params and
    its constraint table."""
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("JAX_")))
    return b"workload\0" + pickle.dumps((name, tuple(sorted(params.items())),
                                         tuple(constraints), env))


@functools.cache
def _field_names() -> tuple[str, ...]:
    """The fields a Request is made with."""
    return tuple(f.name for f in fields(Request) if f.init)
