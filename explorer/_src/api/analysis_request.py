"""explorer.Request: one validated, planned description of one analysis.

A Request names the program (a built-in workload and its params, or a function and its inputs,
pytrees included), the mesh, the specs (per tensor, or partition rules as regular expressions),
logical-axis rules or a preset, the target and axis mapping, and how to compile it. It is
checked when it is made: every field at once, each error an InputError naming the field, the
value and the valid choices. The layout is planned and the program traced and lowered once,
then, in the process and under the contexts where the Request is made (a built-in workload's
as a user's function: explorer/_src/compile/lowering.py): the CLI, the app and the Python API each
build a Request at their edge, and nothing below them (`explorer._src.api.analyze.run`, the search,
the app's session) validates, plans or traces again.

`dataclasses.replace(request, **changes)` makes the edited request, checked the same way, so an
edit either gives a valid Request or raises and leaves the old one as it was.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from explorer._src.api.mesh_source import MeshChoice, choose_mesh, is_jax_mesh
from explorer._src.api.output_specs import OutputSpecs, check_out_specs
from explorer._src.api.patterns import apply_spec_patterns, unmatched
from explorer._src.api.pytrees import named_inputs, tensor_leaves
from explorer._src.api.request import (
    check_donate,
    check_flag,
    check_function,
    check_inputs,
    check_mesh,
    check_partitioner,
    check_target,
    check_timeout,
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
from explorer._src.quiet_jax import accelerator_platform
from explorer._src.report.report import WorkloadInfo
from explorer._src.spec.bounds import show
from explorer._src.spec.mesh import AxisType, MeshSpec
from explorer._src.spec.tensor import Entry, TensorSpec
from explorer._src.strategy.plan import Plan, check_planned, plan
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
# of
# (regular expression, spec) pairs.
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
    """What a Request resolved to when it was made: everything a compile and its Report need,
    so that no later step checks or plans again."""

    mesh: MeshSpec
    partitioner: Partitioner
    compile_plan: CompilePlan
    mapping: AxisMapping | None          # the mesh axes on the target's links (None: no target)
    timeout: float | None
    inputs: tuple                        # the arguments, every leaf a named TensorSpec
    leaves: tuple[TensorSpec, ...]       # every input, in HLO parameter order
    donated: tuple[int, ...]             # positions among `leaves` the program may overwrite
    # Traces and lowers the program in the caller's process, under the request's contexts: the
    # module the worker compiles (`lowered`). Called once, when it is first needed: a Report a
    # cache holds for a workload's `identity` never needs it.
    lower: Callable[[], LoweredProgram] = field(repr=False, compare=False)
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

    @functools.cached_property
    def lowered(self) -> LoweredProgram:
        """The program as traced and lowered in the caller's process, which the worker
        compiles."""
        # A trace after the user imported jax may be under their own config: it no longer
        # answers for the identity (see `keys`).
        self.__dict__["_traced_pristine"] = "jax" not in sys.modules
        return self.lower()

    @functools.cached_property
    def key(self) -> str:
        """The cache key: the program and everything it reads. A workload's `identity`, where
        it has one, stands for the program, so that a cache hit traces nothing."""
        program = self.identity if self.identity is not None else \
            self.lowered.stablehlo.encode()
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
        return {**self.__dict__, "lower": None}

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.leaves]

    def workload_info(self, name: str, preset: str | None) -> WorkloadInfo | None:
        if self.workload is None or self.layout is None:
            return None
        extra = self.workload.info(self.params) if self.workload.info is not None else {}
        return WorkloadInfo(name=name, params=dict(self.params), preset=preset, extra=extra,
                            **self.layout.info())


@dataclass(frozen=True, kw_only=True)
class Request:
    """One analysis, validated and planned when it is made.

    Give either `workload` (a name of explorer.WORKLOADS, with `params`, `specs`, `preset`,
    `rules`, `activations`) or `fn` with its `inputs` (TensorSpecs, array-likes or pytrees of
    them; `specs` then are partition rules: regular expression -> spec). The other fields are
    explorer.analyze's keywords, with the same meaning; `donate=None` for a workload is the
    workload's own donation (a training step donates its state). `mesh=None` is the mesh the
    inputs' NamedShardings or the caller's jax.set_mesh name, with its own axis types
    (explorer.analyze's `mesh`), which the Request then holds as its AbstractMesh.

    Raises on construction (InputError and its subclasses), naming the field and the choices:
    a malformed or too large mesh, an unknown workload, param, preset, rule, target, mapping,
    partitioner, compile_for or axis type, a spec that does not fit, a timeout out of range.

    Example:
        >>> import explorer
        >>> r = explorer.Request(workload="mlp", mesh="data=2,model=4", preset="megatron")
        >>> r.planned.mesh.sizes, [t.spec for t in r.planned.leaves]
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
    measure: bool = False
    tpu_topology: str | None = None
    real_devices: bool = False
    peak: bool = False
    #: the contexts the program is traced under (flax's logical axis rules, jax's matmul
    #: precision and config flags, a mesh): by default those in force where the Request is
    #: made, which its edits (dataclasses.replace) keep wherever they are traced
    context: CallerContext | None = field(default=None, repr=False, compare=False)
    #: what the request resolved to; made on construction
    planned: Planned = field(init=False, repr=False, compare=False)

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
        planned = self._plan_workload() if self.fn is None else self._plan_function()
        object.__setattr__(self, "planned", planned)

    def __getstate__(self) -> dict:
        """What pickling keeps: everything but the function and the contexts it was traced
        under, which nothing after the lowering (`planned.lowered`) needs; so that a request
        can travel to a Ray task, whatever the function and the caller's meshes hold. A jax
        mesh (a device holds no pickle) travels as its MeshSpec, and a function's inputs as
        the TensorSpecs they were read as (their NamedShardings hold a jax mesh)."""
        return {**self.__dict__, "fn": None, "context": None,
                "mesh": self.planned.mesh if is_jax_mesh(self.mesh) else self.mesh,
                "inputs": self.planned.inputs if self.fn is not None else self.inputs}

    @property
    def device_count(self) -> int:
        return self.planned.mesh.device_count

    # -- the two kinds of program ---------------------------------------------------------

    def _plan_workload(self) -> Planned:
        # Everything cheap first, in the order the keyword API always checked it, so that bad
        # input never waits for a plan.
        workload = get_workload(self.workload)
        for what in ("specs", "activations"):
            value = getattr(self, what)
            if value is not None and not isinstance(value, Mapping):
                raise WorkloadError(f"{what} {show(value)} are not a mapping of name to spec, "
                                    "e.g. {'x': 'data,None'}")
        timeout = check_timeout(self.timeout)
        params = workload.resolve(self.params)
        chosen = self._mesh()
        mesh = chosen.spec
        placed = check_target(self.target, self.mapping, mesh)
        if workload.check is not None:
            workload.check(params, mesh)
        layout = plan(workload, params, mesh, self.specs, self.preset, self.rules,
                      self.activations)
        tensors = workload.tensors(params, {**dict(self.specs or {}), **layout.specs})
        check_planned(tensors, layout, mesh)
        context = self.context

        def program() -> Callable:      # built when traced: building imports jax
            return bind_context(WorkloadProgram.of(workload, params, layout.constraints),
                                context)

        donate = self.donate if self.donate is not None else workload.donation(params)
        # Before this process imports jax, no context nor config of the user's can be in
        # force: the workload's identity names its program without a trace.
        identity = (_workload_identity(workload.name, params, layout.constraints)
                    if "jax" not in sys.modules else None)
        return self._finish(program, tuple(tensors), chosen, placed, timeout, donate,
                            identity=identity, workload=workload, params=params,
                            layout=layout)

    def _plan_function(self) -> Planned:
        check_function(self.fn)
        # An edit (dataclasses.replace) traces the function again, maybe on another thread and
        # after the caller's `with` blocks closed: it keeps the contexts of the first request.
        object.__setattr__(self, "fn", bind_context(self.fn, self.context))
        args = named_inputs(self.fn, self.inputs)
        idle: list[str] = []
        if self.specs is not None:
            args = apply_spec_patterns(args, self.specs)
            idle = unmatched([t.name for t in tensor_leaves(args)], self.specs)
        timeout = check_timeout(self.timeout)
        chosen = self._mesh()
        mesh = chosen.spec
        placed = check_target(self.target, self.mapping, mesh)
        pinned = check_out_specs(self.out_specs, mesh)
        fn = self.fn
        return self._finish(lambda: fn, args, chosen, placed, timeout, self.donate,
                            out_specs=pinned, idle_patterns=tuple(idle))

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

    def _finish(self, program: Callable[[], Callable], args: tuple, chosen: MeshChoice,
                placed, timeout, donate, identity: bytes | None = None,
                out_specs: OutputSpecs | None = None, **planned) -> Planned:
        """The checks every request shares, then the program (made by `program()`) traced and
        lowered here, under the request's contexts (explorer/_src/compile/lowering.py), and the key
        made; where a workload's `identity` keys it, the trace waits until it is needed."""
        mesh = chosen.spec
        compile_for = check_compile_for(self.compile_for)
        # measure=True with the target this machine's accelerators are: compiled and run on
        # them, as real_devices=True would, and priced for the target asked.
        here = (where_it_runs(self.target, mesh, lambda: default_pool().warm(WorkerKey.real()))
                if self.measure and self.target is not None and compile_for is CompileFor.TARGET
                and not (self.real_devices or self.tpu_topology) else "")
        compiled = compile_plan(mesh, self.target, compile_for, tpu_topology=self.tpu_topology,
                                real_devices=self.real_devices or bool(here), mapping=placed)
        partitioner = check_partitioner(self.partitioner)
        leaves = tuple(tensor_leaves(args))
        check_inputs(leaves, mesh)
        donated = check_donate(donate, [t.name for t in leaves])
        inputs = tuple(args)
        platform = platform_of(compiled.worker.backend.value, accelerator_platform)
        held = (leave_the_chip_to_the_worker(platform)
                if compiled.worker.backend is Backend.REAL else "")
        notes = tuple(filter(None, (here, held)))

        def lower() -> LoweredProgram:
            lowered = lower_program(program(), inputs, mesh, platform, partitioner.value,
                                    donated, out_specs, over=chosen.trace,
                                    in_force=chosen.in_force)
            return replace(lowered, notes=(*lowered.notes, *notes)) if notes else lowered

        made = Planned(mesh=mesh, partitioner=partitioner, compile_plan=compiled,
                       mapping=placed, timeout=timeout, inputs=inputs, leaves=leaves,
                       donated=donated, lower=lower,
                       # the platform it would be lowered for is in the lowered text
                       identity=None if identity is None else identity + platform.encode(),
                       key_parts=_key_parts(mesh, partitioner, leaves, bool(self.measure),
                                            compiled, bool(self.origins), donated),
                       **planned)
        if identity is None:
            _ = made.lowered     # traced now: a program jax refuses fails the Request here
        return made


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


def _known_fields_only(init):
    """Request's generated __init__, with a misspelt or positional argument refused as an
    InputError naming the fields (Python's own TypeError names neither), as Session.edit
    refuses one."""
    names = tuple(f.name for f in fields(Request) if f.init)

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        unknown = [k for k in kwargs if k not in names]
        if args or unknown:
            what = (f"{show(unknown[0])} is not a field of a Request" if unknown
                    else "a Request takes its fields by name, e.g. Request(workload='mlp', "
                         "mesh='data=8')")
            raise InputError(f"{what}; the fields are {choices(names)}")
        init(self, **kwargs)

    return __init__


Request.__init__ = _known_fields_only(Request.__init__)   # type: ignore[method-assign]
