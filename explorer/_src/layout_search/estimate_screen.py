"""The estimate screen of a search on a GPU or TPU target: every candidate estimated from the
program itself, with no compile, and the best then compiled by the target's own compiler.

A compile by the target's compiler (XLA's GPU compiler, libtpu) takes seconds a candidate on a
small machine, and a CPU compile of a transformer step takes as long (confirm.py), so a search
that compiles every candidate sees a handful of thousands in a minute. The program is traced
once per mesh shape (explorer/_src/compile/jaxpr_graph.py), and each candidate's layout is carried
through it by sharding propagation (explorer/_src/estimate/propagate.py): the collectives the layout
implies, and the FLOPs and bytes each device works on. Those are priced on the target by the
same cost model as a compiled program's (explorer._src.cost.estimate.estimate), in milliseconds. The
screen ranks the candidates by that estimate; the confirmation (confirm.py's) compiles the best
with the target's compiler, whose numbers then rank them.

An estimate is not the compiler's program: XLA may choose other collectives than the
propagation's rules, and it fuses what the estimate counts one by one. So a candidate only
estimated says so (`CompiledBy.ESTIMATE`), ranks after every candidate compiled, and its memory
is a lower bound (its inputs' shards), not XLA's analysis.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from statistics import median

from explorer._src.compile.caller_context import context_of
from explorer._src.compile.jaxpr_graph import trace_program
from explorer._src.cost.collectives import overlapped_comm_seconds
from explorer._src.cost.estimate import estimate
from explorer._src.errors import ExplorerError
from explorer._src.estimate.propagate import ImpliedCost, Prepared, implied_cost, prepare
from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.layout_search.deadline import in_time
from explorer._src.layout_search.result import (
    Candidate,
    CandidateStatus,
    CollectiveCost,
    CompiledBy,
    TimeSource,
)
from explorer._src.layout_search.space import FunctionProblem, Problem, SearchPoint, WorkloadProblem
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import Entry, format_spec
from explorer._src.workloads.base import STATE_KINDS, kind_of

_SCALE_NOTE = "compute scaled by"
MEMORY_NOTE = ("memory: the inputs' shards per device, a lower bound (not compiled, so no "
               "memory analysis)")


class EstimateScreen:
    """Candidates of one problem estimated on `target`, the program traced once per mesh
    shape."""

    def __init__(self, problem: Problem, target: str, mapping=None,
                 stop: Callable[[], bool] | None = None):
        self.problem, self.target, self.mapping = problem, target, mapping
        # The search's stop condition: a trace runs on a thread, waited for until it comes
        # true (deadline.py); None: traced here, in this thread, to the end.
        self.stop = stop
        self.own_constraints = isinstance(problem, FunctionProblem)
        # The matmul dtype whose peak applies: the largest input's, as for a compiled Report.
        largest = max(problem.inputs, key=lambda t: t.nbytes, default=None)
        self.dtype = largest.dtype if largest is not None else "float32"
        self._programs: dict[tuple, Prepared] = {}
        # The target compiler's compute time over the estimate's, of the candidates it
        # confirmed (recalibrate, `confirmed` of them); 1 until then.
        self.compute_scale = 1.0
        self.confirmed = 0
        # Each estimated candidate's communication with everything overlapped, by label: its
        # lower bound once its compute is scaled again.
        self._overlapped: dict[str, float] = {}

    def trace(self, mesh: MeshSpec) -> Prepared:
        """The program on `mesh`'s shape, traced (and prepared for propagation) the first time
        it is asked for; an ExplorerError when it cannot be traced. A built-in workload other
        than the pipeline reads no mesh size as it is traced (its constraints name mesh axes,
        which the propagation sizes), so it is traced once for every shape of the same axes:
        each trace of a transformer step took 6 s on a busy 2-core machine, a quarter of a
        60 s search's estimate over four shapes. A user's function, or the pipeline (a
        shard_map over its stages), is traced on each shape.

        With a `stop`, the trace (5-20 s on a loaded machine) runs on a thread of its own, under
        the contexts the search's function was handed over in (the search's thread may be the
        app's, where they are not in force), and is waited for until `stop()` comes true:
        Abandoned (deadline.py) then, the trace left to finish in the background."""
        key = (mesh.names if _sizes_unread(self.problem) else mesh.sizes)
        if key not in self._programs:
            fn, inputs = _traceable(self.problem)
            context = context_of(fn)

            def traced() -> Prepared:
                with context.entered() if context is not None else nullcontext():
                    return prepare(trace_program(fn, inputs, mesh))

            self._programs[key] = in_time(traced, self.stop, f"explorer-search-trace-{key}")
        return self._programs[key]

    def recalibrate(self, pairs: Sequence[tuple[Candidate, Candidate]]) -> float:
        """Scale the estimates' compute to what the target's compiler made of the candidates
        it confirmed (`pairs`: each as estimated with no scale, `unscaled`, then as compiled):
        the median of their ratios becomes the scale, which stays where no pair has both.
        The estimate puts the whole step's FLOPs and bytes on one roofline; the compiled
        schedule times each kernel on its own, which comes out slower by a factor the
        program's mix of kernels sets and the layout changes little (every candidate runs the
        same ops on other shard shapes); communication is priced alike on both sides. Returns
        the factor from the scale before to the new one, which `rescaled` applies to a
        candidate estimated before (1.0: nothing changed)."""
        ratios = [c.compute_seconds / e.compute_seconds for e, c in pairs
                  if e.compute_seconds and c.compute_seconds]
        if not ratios:
            return 1.0
        scale = median(ratios)
        factor, self.compute_scale = scale / self.compute_scale, scale
        self.confirmed = len(ratios)
        return factor

    def unscaled(self, c: Candidate) -> Candidate:
        """`c` as estimated with no scale (its compute over the scale now)."""
        if c.compute_seconds is None or self.compute_scale == 1.0:
            return c
        return replace(c, compute_seconds=c.compute_seconds / self.compute_scale)

    def rescaled(self, c: Candidate, factor: float) -> Candidate:
        """`c`, estimated before `recalibrate` gave `factor`, with its compute (and so its
        step and bounds) scaled by it and its note saying by what."""
        if factor == 1.0 or c.compute_seconds is None:
            return c
        compute = c.compute_seconds * factor
        upper, lower = _step_bounds(compute, c.comm_seconds or 0.0,
                                    self._overlapped.get(c.label, 0.0))
        notes = (c.notes[0], *self._scale_note(),
                 *(n for n in c.notes[1:] if not n.startswith(_SCALE_NOTE)))
        return replace(c, seconds=upper, lower_seconds=lower, upper_seconds=upper,
                       compute_seconds=compute, notes=notes)

    def _scale_note(self) -> tuple[str, ...]:
        if self.compute_scale == 1:
            return ()
        return (f"{_SCALE_NOTE} {self.compute_scale:.2f}: the target compiler's compute time "
                f"over the estimate's, the median over the {self.confirmed} candidate(s) it "
                "confirmed",)

    def candidate(self, point: SearchPoint) -> Candidate:
        """`point` estimated: its predicted step (nothing overlapped, as a compiled
        candidate's estimate is ranked), the collectives its layout implies, and its inputs'
        shards as its memory."""
        mesh = point.layout.mesh
        specs, points = self.problem.resolve(point.layout)
        base = dict(label=point.layout.label(), mesh=mesh, rules=point.layout.rules_text,
                    specs={n: format_spec(s) for n, s in specs.items()}, params={},
                    compiled_by=CompiledBy.ESTIMATE)
        try:
            cost = implied_cost(self.trace(mesh), mesh, specs,
                                {**points, **_state_constraints(self.problem, specs)},
                                own_constraints=self.own_constraints)
        except ExplorerError as e:
            return Candidate(**base, status=CandidateStatus.FAILED,
                             error=f"could not be estimated: {e}")
        memory = sum(point.shard_bytes.values())
        est = estimate(cost.collectives, cost.flops, cost.bytes_accessed, memory, self.dtype,
                       mesh.names, mesh.sizes, self.target, self.mapping)
        compute = (est.compute.seconds * self.compute_scale
                   if est.compute.seconds is not None else None)
        overlapped = self._overlapped[base["label"]] = overlapped_comm_seconds(est.collectives)
        upper, lower = ((None, est.step_lower_seconds) if compute is None
                        else _step_bounds(compute, est.comm_seconds, overlapped))
        fits = est.memory.fits if est.memory is not None else None
        costs = _collective_costs(cost, est)
        return Candidate(
            **base, status=(CandidateStatus.DOES_NOT_FIT if fits is False
                            else CandidateStatus.ESTIMATED),
            seconds=upper if upper is not None else lower, time_source=TimeSource.ESTIMATE,
            lower_seconds=lower, upper_seconds=upper,
            compute_seconds=compute, comm_seconds=est.comm_seconds,
            memory_bytes=memory, fits=fits,
            collective_bytes=sum(c.bytes * c.runs for c in costs), collectives=costs,
            notes=(MEMORY_NOTE, *self._scale_note(), *cost.notes, *est.notes))


def _step_bounds(compute: float, comm: float, overlapped: float) -> tuple[float, float]:
    """An estimated step's bounds: nothing overlapped (compute then every collective: what it
    is ranked by, as a compiled candidate without a trace is), and every collective overlapped
    with compute."""
    return compute + comm, max(compute, overlapped)


# Built-in workloads whose code reads the mesh's sizes as it is traced.
_READS_MESH_SIZES = frozenset({"pipeline"})


def _sizes_unread(problem: Problem) -> bool:
    """Whether `problem`'s program is the same on every mesh shape of the same axis names."""
    return (isinstance(problem, WorkloadProblem)
            and problem.workload.name not in _READS_MESH_SIZES)


def _traceable(problem: Problem):
    """The problem's program as a function of its inputs, flat and in order, with every
    constraint point of a workload in place (each candidate then says what it pins there, or
    leaves it free)."""
    if isinstance(problem, WorkloadProblem):
        fn = problem.workload.build(problem.params)
        names = [*problem.points, *_state_names(problem)]
        if names:
            fn = functools.partial(fn, constraints={n: () for n in names})
        return fn, list(problem.inputs)
    from explorer._src.api.pytrees import flat_call, tensor_leaves

    assert isinstance(problem, FunctionProblem)
    fn, args = flat_call(problem.fn, problem.args)
    return fn, list(tensor_leaves(tuple(args)))


def _state_names(problem: WorkloadProblem) -> list[str]:
    """The inputs a workload returns in their own layout (params and optimizer state)."""
    if not problem.workload.returns_state:
        return []
    return [t.name for t in problem.inputs
            if kind_of(problem.kinds, t.name) in STATE_KINDS]


def _state_constraints(problem: Problem,
                       specs: Mapping[str, tuple[Entry, ...]]) -> dict[str, tuple[Entry, ...]]:
    """What a workload pins its state outputs to: each input's own spec (as the compile's
    plan does, explorer/_src/strategy/plan.py)."""
    if not isinstance(problem, WorkloadProblem):
        return {}
    return {name: specs.get(name, ()) for name in _state_names(problem)}


def _collective_costs(cost: ImpliedCost, est) -> tuple[CollectiveCost, ...]:
    return tuple(
        CollectiveCost(CollectiveKind(c.kind), c.axes, c.program_bytes, t.seconds, c.runs,
                       "", c.why)
        for c, t in zip(cost.collectives, est.collectives, strict=True))
