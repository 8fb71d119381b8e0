"""explorer.search: the best shardings of a program on a target, found with the real compiler.

Intra-operator search (rules or specs spaces, explorer._search.space) is a branch and bound over
the distinct candidates: the replicated candidate is compiled first (the reference the bounds
need), every other candidate gets a lower bound on its memory per device and on its step time
from its specs alone (explorer._search.bounds), and candidates are compiled in the order of their
time bound. One whose memory bound exceeds the chip's memory is never compiled; once the next
time bound is no better than the best predicted step, no candidate left can win and the search
ends. With `prune=False` every candidate is compiled (the exhaustive search the tests compare
against).

For the `pipeline` workload the search is inter-operator (explorer._search.pipeline): per-layer
costs are compiled once per microbatch size and stage width, Alpa's dynamic program chooses the
cuts for every (stages, microbatches), and the best plans are compiled to check their memory and
list their collectives.

Candidates compile on this process's worker pool, or as Ray tasks on a cluster
(explorer._search.cluster). A budget bounds the wall time; a threading.Event or a progress
callback that returns False cancels; a candidate that fails is recorded with its error.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from explorer._search import bounds as bounds_
from explorer._search import pipeline as pipe
from explorer._search.cluster import runner as make_runner
from explorer._search.evaluate import Outcome, Request
from explorer._search.result import (
    Candidate,
    CandidateStatus,
    CollectiveCost,
    CollectiveGroup,
    Comparison,
    Progress,
    SearchResult,
    SearchStats,
)
from explorer._search.space import (
    FunctionProblem,
    Layout,
    Problem,
    WorkloadProblem,
    check_names,
    check_replaceable,
    check_tensors,
    enumerate_space,
)
from explorer._search.space import mesh_shapes as factor_meshes
from explorer._search.surrogate import Surrogate, fits
from explorer.api.analyze import tensor_leaves
from explorer.api.request import (
    check_flag,
    check_function,
    check_inputs,
    check_mesh,
    check_partitioner,
    check_target,
    check_timeout,
)
from explorer.cost.hardware import get_target
from explorer.cost.model import format_seconds as fs
from explorer.errors import ExplorerError, WorkerError, WorkloadError, choices
from explorer.spec.bounds import show
from explorer.spec.mesh import MeshSpec
from explorer.spec.tensor import TensorSpec, format_spec
from explorer.workloads.registry import get_workload

SPACES = ("rules", "specs", "pipeline")
OBJECTIVE = ("the predicted step time on the target: the step trace of the compiled schedule, "
             "else the estimate's no-overlap bound, else its full-overlap bound")
PIPELINE_OBJECTIVE = ("the pipeline stage model, sum(t) + (microbatches - 1)·max(t), over "
                      "compiled per-layer costs (Alpa, arXiv:2201.12023, Eq. 2)")


def search(program, *args, mesh, target: str, mapping=None, params: Mapping | None = None,
           space: str | None = None, names=None, tensors=None, mesh_shapes: bool = True,
           budget_s: float | None = None, prune: bool = True,
           progress: Callable[[Progress], Any] | None = None, cancel=None,
           cluster: str | None = None, timeout: float | None = None,
           partitioner: str = "shardy", pool=None, max_microbatches: int | None = None,
           verify: int = 3, patience: int | None = None) -> SearchResult:
    """Search the shardings of `program` on `mesh` for the fastest predicted step on `target`.

    Args:
        program: a built-in workload's name (its params in `params`), or a function followed
            by its arguments, TensorSpecs in lists, tuples and dicts, as explorer.analyze takes
            them.
        mesh: the mesh axes and sizes, e.g. "data=2,model=4".
        target: the hardware to predict on (see explorer.targets()); `mapping` places mesh
            axes on its links.
        space: "rules" (a workload's default: one mesh axis or none per logical name in
            `names`, default every name it uses), "specs" (a function's default: every spec of
            the input tensors in `tensors`, default all; the others keep theirs) or "pipeline"
            (the pipeline workload's default: stages, cuts and microbatches).
        mesh_shapes: also try every other factorisation of the device count into the mesh's
            axes (kept fixed when a `mapping` is given).
        budget_s: stop starting compiles after this many seconds; what is left is counted as
            not evaluated.
        prune: skip candidates that their bounds show cannot win (False: compile every one).
        progress: called with a Progress after each candidate; returning False cancels.
        cancel: a threading.Event that cancels the search when set.
        cluster: compile on a Ray cluster ("HOST:PORT", "ray://HOST:PORT", "auto", "local";
            needs the `cluster` extra) instead of this machine's worker pool.
        timeout: the time limit of one compile, seconds.
        max_microbatches: pipeline: the most microbatches to try (default 32).
        verify: pipeline: how many of the best plans that fit to compile (default 3).
        patience: stop after this many compiles in a row that do not improve the best (a
            heuristic stop: the winner is then the best found, not proven best).

    Returns:
        A SearchResult: candidates ranked best first, the Pareto front of time against memory,
        why the winner beats the runner-up, and the counts (docs/search.md).
    """
    t0 = time.perf_counter()
    if isinstance(program, str):
        workload = get_workload(program)
        if args:
            raise WorkloadError(f"search of workload {program!r} takes no positional "
                                f"arguments (got {len(args)}); give its params as params={{...}}")
        problem: Problem = WorkloadProblem(workload, workload.resolve(params))
    else:
        check_function(program)
        if params is not None:
            raise ExplorerError("params are a built-in workload's; a function's sizes are its "
                                "TensorSpecs' shapes")
        check_replaceable(args)
        problem = FunctionProblem(program, args, tensor_leaves(args))
    mesh_spec = check_mesh(mesh)
    _check_target(target, mapping, mesh_spec)
    check_partitioner(partitioner)
    timeout = check_timeout(timeout)
    prune = check_flag(prune, "prune")
    mesh_shapes = check_flag(mesh_shapes, "mesh_shapes")
    budget_s = _check_budget(budget_s)
    if cancel is not None and not callable(getattr(cancel, "is_set", None)):
        raise ExplorerError(f"cancel {show(cancel)} is not a threading.Event (anything with "
                            "is_set())")
    if progress is not None and not callable(progress):
        raise ExplorerError(f"progress {show(progress)} is not a function of a Progress")
    mode = _check_space(space, problem)
    if isinstance(verify, bool) or not isinstance(verify, int) or not 1 <= verify <= 100:
        raise ExplorerError(f"verify={show(verify)} is not a whole number from 1 to 100")
    if patience is not None and (isinstance(patience, bool) or not isinstance(patience, int)
                                 or patience < 1):
        raise ExplorerError(f"patience={show(patience)} is not a whole number >= 1 (compiles "
                            "without improvement before the search stops), or None")

    run = _Run(t0=t0, budget_s=budget_s, cancel=cancel, progress=progress, prune=prune,
               cluster=cluster, patience=patience)
    common = dict(target=target, mapping=mapping, partitioner=partitioner, timeout=timeout)
    if mode == "pipeline":
        limit = _check_microbatches(max_microbatches)
        for what, value in (("names", names), ("tensors", tensors), ("mapping", mapping)):
            if value is not None:
                raise ExplorerError(f"{what}= does not apply to the pipeline search, which "
                                    "chooses the mesh (stage x data), the stages, the cuts and "
                                    "the microbatches itself")
        runner = make_runner(cluster, pool)
        try:
            return _search_pipeline(problem, mesh_spec, common, run, runner, limit, verify)
        finally:
            runner.close()

    if max_microbatches is not None:
        raise ExplorerError("max_microbatches applies to the pipeline search (space='pipeline')")
    if mode == "rules":
        searched_names = check_names(problem, names)
        searched_tensors: list[TensorSpec] = []
        if tensors is not None:
            raise ExplorerError("tensors= chooses the tensors of a specs search; a rules search "
                                "takes names= (the logical names to map to mesh axes)")
    else:
        if names is not None:
            raise ExplorerError("names= chooses the logical names of a rules search; a specs "
                                "search takes tensors= (the tensors whose specs to search)")
        searched_names = []
        searched_tensors = check_tensors(problem, tensors)
    if isinstance(problem, FunctionProblem):
        check_inputs(problem.inputs, mesh_spec)
    meshes = factor_meshes(mesh_spec, mesh_shapes and mapping is None)
    run.report("enumerate")
    found = enumerate_space(problem, meshes, mode, searched_names, searched_tensors,
                            run.cancelled)
    run.should_stop()       # records a cancel that cut the enumeration short
    runner = make_runner(cluster, pool)
    try:
        return _branch_and_bound(problem, mode, found, common, run, runner, target)
    finally:
        runner.close()


# ---------------------------------------------------------------------------------------------
# Checks.

def _check_target(target, mapping, mesh: MeshSpec) -> None:
    if target is None:
        raise ExplorerError("a search ranks by predicted step time, which needs a target; "
                            "choose one of explorer.targets() (e.g. target='h100-8')")
    check_target(target, mapping, mesh)
    if get_target(target).chip.peak_flops == {} or get_target(target).family == "cpu":
        raise ExplorerError(f"target {target!r} has no sourced speeds, so nothing can be "
                            "ranked on it; choose a GPU or TPU target (see explorer.targets())")


def _check_budget(budget_s) -> float | None:
    if budget_s is None:
        return None
    if isinstance(budget_s, bool) or not isinstance(budget_s, int | float) \
            or not math.isfinite(budget_s) or budget_s <= 0:
        raise ExplorerError(f"budget_s={show(budget_s)} is not a positive number of seconds; "
                            "pass e.g. budget_s=60, or None for no limit")
    return float(budget_s)


def _check_microbatches(limit) -> int:
    if limit is None:
        return pipe.DEFAULT_MAX_MICROBATCHES
    if isinstance(limit, bool) or not isinstance(limit, int) \
            or not 1 <= limit <= pipe.MICROBATCHES.high:
        raise ExplorerError(f"max_microbatches={show(limit)} is not a whole number from 1 to "
                            f"{pipe.MICROBATCHES.high}")
    return limit


def _check_space(space, problem: Problem) -> str:
    is_pipeline = isinstance(problem, WorkloadProblem) and problem.name == "pipeline"
    if space is None:
        if is_pipeline:
            return "pipeline"
        if isinstance(problem, WorkloadProblem) and problem.logical:
            return "rules"
        return "specs"
    if not isinstance(space, str) or space not in SPACES:
        raise ExplorerError(f"space {show(space)} is not one of {choices(SPACES)}")
    if space == "pipeline" and not is_pipeline:
        raise ExplorerError(f"space 'pipeline' chooses the stages of workload 'pipeline', not of "
                            f"{problem.name!r}; use space 'rules' or 'specs'")
    if space == "rules" and not (isinstance(problem, WorkloadProblem) and problem.logical):
        raise ExplorerError(f"{problem.name!r} names no logical dimensions, so it has no rules "
                            "to search; use space 'specs'")
    return space


# ---------------------------------------------------------------------------------------------
# Book-keeping shared by both searches.

@dataclass
class _Run:
    t0: float
    budget_s: float | None
    cancel: Any
    progress: Callable | None
    prune: bool
    cluster: str | None
    stopped: str = "complete"
    total: int = 0
    done: int = 0
    compiled: int = 0
    failed: int = 0
    pruned: int = 0
    best_seconds: float | None = None
    best_label: str = ""
    patience: int | None = None
    since_best: int = 0              # compiles since the best last improved
    user_cancelled: bool = False
    violations: list[str] = field(default_factory=list)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def cancelled(self) -> bool:
        return self.user_cancelled or (self.cancel is not None and self.cancel.is_set())

    def should_stop(self) -> bool:
        if self.cancelled():
            self.stopped = "cancelled"
            return True
        if self.budget_s is not None and self.elapsed() >= self.budget_s:
            self.stopped = "budget"
            return True
        if self.patience is not None and self.since_best >= self.patience:
            self.stopped = "patience"
            return True
        return False

    def remaining(self) -> float | None:
        return None if self.budget_s is None else self.budget_s - self.elapsed()

    def report(self, phase: str, current: str = "") -> None:
        if self.progress is None:
            return
        answer = self.progress(Progress(phase, self.done, self.total, self.compiled,
                                        self.pruned, self.failed, self.best_seconds,
                                        self.best_label, current, self.elapsed()))
        if answer is False:
            self.user_cancelled = True


def _timeout(common: dict, run: _Run) -> float | None:
    """The compile's time limit: the caller's, cut to what is left of the budget (at least a
    second), so that a search keeps to its budget even through a slow compile."""
    left = run.remaining()
    if left is None:
        return common["timeout"]
    cap = max(1.0, left)
    return cap if common["timeout"] is None else min(common["timeout"], cap)


def _request(problem: Problem, layout: Layout, common: dict, run: _Run,
             params: Mapping | None = None, rules: str | None = None) -> Request:
    base = dict(mesh=layout.mesh, target=common["target"], mapping=common["mapping"],
                partitioner=common["partitioner"], timeout=_timeout(common, run))
    if isinstance(problem, WorkloadProblem):
        return Request(**base, workload=problem.name,
                       params=dict(problem.params if params is None else params),
                       rules=layout.rules_text if rules is None else rules,
                       specs={n: s for n, s in layout.specs} or None)
    specs = dict(problem.resolve(layout)[0])
    return Request(**base, fn=problem.fn, args=problem.args_with(specs))


# ---------------------------------------------------------------------------------------------
# Intra-operator: branch and bound.

def _branch_and_bound(problem: Problem, mode: str, found, common: dict, run: _Run, runner,
                      target: str) -> SearchResult:
    points = found.points
    by_index = {p.index: p for p in points}
    run.total = len(points)
    chip = get_target(target).chip
    capacity = chip.memory_bytes
    results: dict[int, Candidate] = {}
    time_lb = {p.index: 0.0 for p in points}
    mem_lb = {p.index: 0 for p in points}
    bounds_on = {"time": run.prune, "memory": run.prune}
    pruned = {"time": [], "memory": []}
    not_evaluated: list[int] = []
    remaining: set[int] = {p.index for p in points}
    surrogate = Surrogate(points) if len(points) > 2 else None
    timed: list[int] = []          # compiled candidates with a predicted step, for the model

    def settle(index: int, outcome: Outcome) -> None:
        if outcome.report is None and _ran_out(outcome, run):
            not_evaluated.append(index)
            return
        point = by_index[index]
        cand = _candidate(point.layout, point.specs, outcome, time_lb[index], mem_lb[index])
        results[index] = cand
        run.done += 1
        if cand.status is CandidateStatus.FAILED:
            run.failed += 1
        else:
            run.compiled += 1
            timed.append(index)
        for which, message in bounds_.violations(cand.label, cand.seconds, cand.memory_bytes,
                                                 time_lb[index], mem_lb[index]):
            # An assumption of that bound failed: stop trusting it, and take back what it cut.
            run.violations.append(message)
            if bounds_on[which]:
                bounds_on[which] = False
                remaining.update(pruned[which])
                run.pruned -= len(pruned[which])
                run.done -= len(pruned[which])
                pruned[which] = []
        if cand.status is CandidateStatus.OK and (run.best_seconds is None
                                                  or cand.seconds < run.best_seconds):
            run.best_seconds, run.best_label = cand.seconds, cand.label
            run.since_best = 0
        else:
            run.since_best += 1
        run.report("compile", cand.label)

    def prune(which: str, indices) -> None:
        indices = list(indices)
        remaining.difference_update(indices)
        pruned[which].extend(indices)
        run.pruned += len(indices)
        run.done += len(indices)

    if points:
        # The reference (every searched tensor replicated, on the given mesh shape) first: the
        # bounds need it. Without pruning the bounds are still computed and checked.
        ref_index = points[0].index
        remaining.discard(ref_index)
        if not run.should_stop():
            runner.submit(ref_index, _request(problem, points[0].layout, common, run))
            for _, outcome in runner.next_done():
                settle(ref_index, outcome)
        else:
            not_evaluated.append(ref_index)
        ref_result = results.get(ref_index)
        ref = bounds_.reference_of(ref_result.report if ref_result else None, problem,
                                   chip.memory_bandwidth)
        for p in points:
            time_lb[p.index] = bounds_.time_bound(p, ref, problem.hidden_shardings)
            mem_lb[p.index] = bounds_.memory_bound(p, ref)
        if ref_result is not None:       # its own bounds, now known, for the record
            results[ref_index] = _with_bounds(ref_result, time_lb[ref_index], mem_lb[ref_index])
        if bounds_on["memory"] and capacity is not None:
            prune("memory", [i for i in remaining if mem_lb[i] > capacity])

    shapes_tried = {points[0].layout.mesh.sizes} if points else set()

    def next_index() -> int:
        """The candidate to compile next (explorer._search.surrogate): first the lowest time
        bound on each mesh shape not tried yet, then the surrogate's lowest predicted step
        among those it predicts to fit; the time bound, then enumeration order, break ties."""
        fresh = [i for i in remaining if by_index[i].layout.mesh.sizes not in shapes_tried]
        if surrogate is None or not timed or fresh:
            pick = min(fresh or remaining, key=lambda i: (time_lb[i], i))
            shapes_tried.add(by_index[pick].layout.mesh.sizes)
            return pick
        seconds = [results[i].seconds for i in timed]
        memory = [results[i].memory_bytes for i in timed]
        t, m = surrogate.predict(timed, seconds,
                                 memory if all(v is not None for v in memory) else ())

        def key(i):
            r = surrogate.row(i)
            return (not fits(m[r] if m is not None else None, capacity), t[r], time_lb[i], i)
        return min(remaining, key=key)

    while remaining or runner.pending():
        while remaining and runner.pending() < runner.slots and not run.should_stop():
            if bounds_on["time"] and run.best_seconds is not None:
                # No candidate whose time bound is at least the best can win.
                prune("time", [i for i in remaining if time_lb[i] >= run.best_seconds])
                if not remaining:
                    break
            index = next_index()
            remaining.discard(index)
            runner.submit(index, _request(problem, by_index[index].layout, common, run))
            run.report("compile", by_index[index].layout.label())
        if run.should_stop():
            not_evaluated.extend(runner.cancel_all())
            not_evaluated.extend(sorted(remaining))
            remaining.clear()
            break
        if not runner.pending():
            continue
        for index, outcome in runner.next_done():
            settle(index, outcome)

    run.report("done")
    ranked = _rank(list(results.values()))
    stats = SearchStats(
        space=found.space, invalid=found.invalid, equivalent=found.equivalent,
        distinct=len(points), compiled=run.compiled, failed=run.failed,
        does_not_fit=sum(c.status is CandidateStatus.DOES_NOT_FIT for c in ranked),
        pruned_bound=len(pruned["time"]), pruned_memory=len(pruned["memory"]),
        not_evaluated=len(not_evaluated), seconds=run.elapsed(), stopped=run.stopped,
        prune=run.prune, cluster=runner.address, bound_violations=tuple(run.violations))
    return SearchResult(problem.name, mode, target, OBJECTIVE, tuple(ranked), _pareto(ranked),
                        _compare(ranked), stats)


def _ran_out(outcome: Outcome, run: _Run) -> bool:
    """A compile stopped by the budget's time limit (not by its own): not a failure of the
    candidate, so it is counted as not evaluated."""
    return outcome.error.startswith(WorkerError.__name__) and run.should_stop()


def _with_bounds(c: Candidate, time_lb: float, mem_lb: int) -> Candidate:
    return replace(c, bound_seconds=time_lb, bound_memory=mem_lb)


def _candidate(layout: Layout, specs: Mapping, outcome: Outcome, time_lb: float, mem_lb: int,
               params: Mapping | None = None, label: str | None = None) -> Candidate:
    base = dict(label=label or layout.label(), mesh=layout.mesh, rules=layout.rules_text,
                specs={n: format_spec(s) for n, s in specs.items()}, params=dict(params or {}),
                bound_seconds=time_lb, bound_memory=mem_lb)
    report = outcome.report
    if report is None:
        return Candidate(**base, status=CandidateStatus.FAILED, error=outcome.error)
    est = report.estimate
    seconds, source = None, ""
    for value, name in ((est.step_trace_seconds, "trace"),
                        (est.step_upper_seconds, "no-overlap bound"),
                        (est.step_lower_seconds, "full-overlap bound")):
        if value is not None:
            seconds, source = value, name
            break
    notes = tuple(est.notes) + (tuple(report.trace.notes) if report.trace else ())
    if seconds is None:
        return Candidate(**base, status=CandidateStatus.FAILED, report=report, notes=notes,
                         error="no step time could be predicted on the target: "
                               + "; ".join(est.notes or ("no compute or collective timed",)))
    fits = est.memory.fits if est.memory is not None else None
    collectives = tuple(
        CollectiveCost(str(c.kind), c.axes, c.program_bytes, t.seconds, t.runs,
                       str(c.why.reason) if c.why else "", c.why.text if c.why else "",
                       c.source)
        for c, t in zip(report.collectives, est.collectives, strict=True))
    return Candidate(
        **base, status=CandidateStatus.OK if fits is not False else CandidateStatus.DOES_NOT_FIT,
        seconds=seconds, time_source=source, trace_seconds=est.step_trace_seconds,
        lower_seconds=est.step_lower_seconds, upper_seconds=est.step_upper_seconds,
        compute_seconds=est.compute.seconds, comm_seconds=est.comm_seconds,
        memory_bytes=report.memory.total if report.memory is not None else None, fits=fits,
        collective_bytes=sum(c.bytes * c.runs for c in collectives),
        collectives=collectives, notes=notes, report=report)


_ORDER = {CandidateStatus.OK: 0, CandidateStatus.ESTIMATED: 1, CandidateStatus.DOES_NOT_FIT: 2,
          CandidateStatus.FAILED: 3}


def _rank(cands: list[Candidate]) -> list[Candidate]:
    """Best first: candidates that fit by predicted time (then memory), then plans only
    estimated, then those that do not fit, then failures."""
    def key(c: Candidate):
        return (_ORDER[c.status], c.seconds if c.seconds is not None else math.inf,
                c.memory_bytes if c.memory_bytes is not None else math.inf, c.label)
    return sorted(cands, key=key)


def _pareto(ranked: list[Candidate]) -> tuple[Candidate, ...]:
    """The compiled candidates that fit and that no other beats on both predicted time and
    memory per device (ties on both: the first)."""
    ok = [c for c in ranked if c.status is CandidateStatus.OK and c.memory_bytes is not None]
    front, smallest = [], math.inf
    for c in sorted(ok, key=lambda c: (c.seconds, c.memory_bytes)):
        if c.memory_bytes < smallest:
            front.append(c)
            smallest = c.memory_bytes
    return tuple(front)


# ---------------------------------------------------------------------------------------------
# Why the winner wins.

def _groups(c: Candidate) -> tuple[CollectiveGroup, ...]:
    groups: dict[tuple, list] = {}
    for x in c.collectives:
        groups.setdefault((x.kind, x.axes, x.reason), []).append(x)
    out = [CollectiveGroup(kind, axes, reason, sum(x.runs for x in xs),
                           sum(x.bytes * x.runs for x in xs),
                           sum((x.seconds or 0.0) * x.runs for x in xs), xs[0].text)
           for (kind, axes, reason), xs in groups.items()]
    return tuple(sorted(out, key=lambda g: -g.seconds))


def _compare(ranked: list[Candidate], pipeline: bool = False) -> Comparison | None:
    ok = [c for c in ranked if c.status in (CandidateStatus.OK, CandidateStatus.ESTIMATED)
          and c.report is not None]
    if len(ok) < 2 or ranked[0] is not ok[0]:
        return None
    win = ok[0]
    # The runner-up is the next slower candidate: one tied with the winner (often the same
    # program on a mirrored mesh shape) has nothing to explain.
    second = next((c for c in ok[1:] if c.seconds > win.seconds), ok[1])
    gw, gr = _groups(win), _groups(second)

    def pays(groups):
        return "; ".join(g.phrase() for g in groups) or "no collective"

    lines = [f"Why {win.label} beats {second.label}: predicted {fs(win.seconds)} against "
             f"{fs(second.seconds)} per step ({fs(second.seconds - win.seconds)} less)."]
    if pipeline:
        def stages(c):
            t = c.extra.get("stage_seconds", [])
            return (f"{len(t)} stage(s) of at most {fs(max(t)) if t else '?'}, bubble "
                    f"{c.extra.get('bubble_fraction', 0):.0%}")
        lines.append(f"  stage model: {stages(win)} against {stages(second)}; the compiled "
                     "programs' collectives (per step of each):")
    else:
        lines.append(f"  compute {fs(win.compute_seconds)} against {fs(second.compute_seconds)}; "
                     f"communication {fs(win.comm_seconds)} against {fs(second.comm_seconds)}.")
    lines += [f"  the winner pays: {pays(gw)}", f"  the runner-up pays: {pays(gr)}"]
    for who, groups in (("winner", gw), ("runner-up", gr)):
        for g in groups[:3]:
            if g.example:
                lines.append(f"  {who}, {g.kind} over {','.join(g.axes) or '-'}: {g.example}")
    return Comparison(win.label, second.label, win.seconds, second.seconds, win.compute_seconds,
                      second.compute_seconds, win.comm_seconds, second.comm_seconds, gw, gr,
                      "\n".join(lines))


# ---------------------------------------------------------------------------------------------
# Inter-operator: the pipeline.

def _search_pipeline(problem: WorkloadProblem, mesh: MeshSpec, common: dict, run: _Run, runner,
                     limit: int, verify: int) -> SearchResult:
    p = problem.params
    devices = mesh.device_count
    layers, batch, d_model, dtype = p["layers"], p["batch"], p["d_model"], p["dtype"]
    target = common["target"]
    options = []                                   # (S, M, data)
    for s in pipe.stage_counts(devices, layers):
        data = devices // s
        options += [(s, m, data) for m in pipe.microbatch_counts(batch, data, limit)]
    if not options:
        raise WorkloadError(f"no pipeline fits {devices} devices with layers={layers} and "
                            f"batch={batch}: a stage count must divide both the devices and "
                            "the layers, and batch/microbatches must split over the devices of "
                            "a stage")
    space = sum(pipe.count_plans(layers, s) for s, _, _ in options)

    # Per-layer costs: one compile per (microbatch rows, stage devices).
    profiles = sorted({(batch // m, data, s) for s, m, data in options})
    run.total = len(profiles) + min(verify, len(options))
    layer_cost: dict[tuple[int, int], float] = {}
    profile_error: dict[tuple[int, int], str] = {}
    keys = {}
    for rows, data, s in profiles:
        params = {**p, "stages": 1, "microbatches": 1, "batch": rows, "cuts": ""}
        layout = Layout(pipe.profile_mesh(devices, s, mesh.axis_type))
        rules = f"batch={pipe.DATA_AXIS}" if data > 1 else ""
        keys[len(keys)] = (rows, data)
        runner.submit(len(keys) - 1, _request(problem, layout, common, run, params, rules))
    profiled = 0
    while runner.pending():
        if run.should_stop():
            runner.cancel_all()
            break
        for key, outcome in runner.next_done():
            rows, data = keys[key]
            profiled += 1
            run.done += 1
            cand = _candidate(Layout(mesh), {}, outcome, 0.0, 0)
            if cand.seconds is None:
                run.failed += 1
                profile_error[(rows, data)] = cand.error
            else:
                run.compiled += 1
                layer_cost[(rows, data)] = cand.seconds / layers
            run.report("profile", f"{rows} rows on {data} device(s)")

    plans: list[pipe.StagePlan] = []
    unplanned = 0           # plans of (stages, microbatches) whose layer cost is not known
    for s, m, data in options:
        rows = batch // m
        if (rows, data) not in layer_cost:
            unplanned += pipe.count_plans(layers, s)
            continue
        send = pipe.send_seconds(rows, d_model, dtype, s, data, target)
        plan = pipe.plan_stages([layer_cost[(rows, data)]] * layers, s, m, send)
        if plan is not None:
            plans.append(plan)
    plans.sort(key=lambda q: (q.seconds, q.stages, q.microbatches))

    cands: list[Candidate] = []
    verified: dict[int, Candidate] = {}
    # The best plans by the model, compiled until `verify` of them fit (or the plans or the
    # budget run out): a plan the model likes may need more memory than a chip has.
    submitted: dict[int, tuple] = {}
    following = iter(enumerate(plans))
    fitting = 0
    while True:
        while runner.pending() + fitting < verify and runner.pending() < runner.slots \
                and not run.should_stop():
            nxt = next(following, None)
            if nxt is None:
                break
            i, plan = nxt
            layout, params, rules = _plan_layout(plan, p, devices, mesh.axis_type)
            submitted[i] = (plan, layout, params)
            runner.submit(i, _request(problem, layout, common, run, params, rules))
        if not runner.pending():
            break
        if run.should_stop():
            runner.cancel_all()
            break
        for i, outcome in runner.next_done():
            plan, layout, params = submitted[i]
            c = _candidate(layout, _plan_specs(problem, layout, params), outcome, 0.0, 0,
                           params=_plan_params(plan), label=_plan_label(plan, layout))
            run.done += 1
            if c.status is CandidateStatus.FAILED:
                run.failed += 1
            else:
                run.compiled += 1
            fitting += c.status is CandidateStatus.OK
            verified[i] = c
            run.report("compile", c.label)
    for i, plan in enumerate(plans):
        layout, params, _ = _plan_layout(plan, p, devices, mesh.axis_type)
        extra = {"stage_seconds": list(plan.stage_seconds),
                 "bubble_fraction": plan.bubble_fraction,
                 "layer_seconds": layer_cost[(batch // plan.microbatches,
                                              devices // plan.stages)]}
        model_note = ("timed by the stage model; the compiled program's own step trace leaves "
                      "out the compute inside its per-tick branches")
        if i in verified:
            c = verified[i]
            c = replace(c, seconds=plan.seconds, time_source="pipeline model",
                        extra=extra, notes=(model_note, *c.notes))
        else:
            c = Candidate(label=_plan_label(plan, layout), mesh=layout.mesh,
                          rules=layout.rules_text, specs=_plan_specs(problem, layout, params),
                          params=_plan_params(plan), status=CandidateStatus.ESTIMATED,
                          seconds=plan.seconds, time_source="pipeline model", extra=extra)
        cands.append(c)
    for key, err in profile_error.items():
        cands.append(Candidate(label=f"profile of {key[0]} rows on {key[1]} device(s)",
                               mesh=mesh, rules="", specs={}, params={},
                               status=CandidateStatus.FAILED, error=err))
    run.report("done")
    ranked = _rank(cands)
    stats = SearchStats(
        space=space, invalid=0, equivalent=0, distinct=space,
        compiled=run.compiled, failed=run.failed,
        does_not_fit=sum(c.status is CandidateStatus.DOES_NOT_FIT for c in ranked),
        pruned_bound=0, pruned_memory=0, not_evaluated=unplanned, seconds=run.elapsed(),
        stopped=run.stopped, prune=run.prune, cluster=runner.address, profiled=profiled,
        dominated=space - unplanned - len(plans), bound_violations=())
    return SearchResult(problem.name, "pipeline", target, PIPELINE_OBJECTIVE, tuple(ranked),
                        _pareto(ranked), _compare(ranked, pipeline=True), stats)


def _plan_layout(plan: pipe.StagePlan, p: Mapping, devices: int, axis_type: str):
    mesh = pipe.plan_mesh(devices, plan.stages, axis_type)
    params = {**p, "stages": plan.stages, "microbatches": plan.microbatches,
              "cuts": plan.cuts_text}
    rules = f"batch={pipe.DATA_AXIS}" if pipe.DATA_AXIS in mesh.names else ""
    return Layout(mesh, (("batch", pipe.DATA_AXIS),) if rules else ()), params, rules


def _plan_params(plan: pipe.StagePlan) -> dict:
    return {"stages": plan.stages, "microbatches": plan.microbatches, "cuts": plan.cuts_text}


def _plan_label(plan: pipe.StagePlan, layout: Layout) -> str:
    cuts = f", cuts {plan.cuts_text}" if plan.cuts else ""
    return (f"{layout.mesh.text()}: {plan.stages} stage(s), {plan.microbatches} "
            f"microbatch(es){cuts}")


def _plan_specs(problem: WorkloadProblem, layout: Layout, params: Mapping) -> dict:
    specs, _ = problem.resolve(layout)
    return specs
