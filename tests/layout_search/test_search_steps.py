"""The steps of a search, each on a small input and without the compiler: the run's state and
stop rules, each candidate's Request, a candidate from a failed compile, the ranking and the Pareto
front, the bound checks, the branch and bound's pruning and order, and the pipeline search's
options and plans. Compiles are answered by a runner that fails them, so that what the steps do
with the outcomes is worked out by hand."""

import json
import threading
import time
from types import SimpleNamespace

import pytest

from explorer._src.api.analysis_request import Request
from explorer._src.errors import CompileError, WorkerError, WorkloadError
from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.layout_search import bounds
from explorer._src.layout_search.branch_and_bound import BranchAndBound
from explorer._src.layout_search.evaluate import Outcome, candidate_request
from explorer._src.layout_search.pipeline_search import PipelineSearch, Profile, options
from explorer._src.layout_search.ranking import candidate_of, groups, pareto, predicted_step, rank
from explorer._src.layout_search.result import (
    Candidate,
    CandidateStatus,
    CollectiveCost,
    CompiledBy,
    SearchPhase,
    SearchSpace,
    SearchStats,
    StopReason,
    TimeSource,
)
from explorer._src.layout_search.search import _check_space
from explorer._src.layout_search.space import (
    FunctionProblem,
    SearchLayout,
    WorkloadProblem,
    enumerate_space,
    mesh_factorisations,
)
from explorer._src.layout_search.state import SearchState
from explorer._src.spec.mesh import MeshSpec, parse_mesh
from explorer._src.spec.tensor import TensorSpec
from explorer._src.workloads.registry import get_workload

TARGET = "h100-4"
H100_MEMORY = 84_942_979_072  # bytes an H100 80GB gives a program (79.11 GiB, as CUDA reports)


class FailingRunner:
    """Compiles nothing: answers each Request, in order, with the error `error_type` raised
    by the compile, and keeps the Requests (made here, as a search's runner makes them)."""

    slots = 1
    address = None
    size = None

    def __init__(self, error_type=CompileError):
        self.error_type = error_type
        self.queue = []
        self.requests = []

    def send(self, key, make):
        self.submit(key, make())

    def submit(self, key, request):
        self.queue.append(key)
        self.requests.append(request)

    def pending(self):
        return len(self.queue)

    def next_done(self, stop=None):
        key = self.queue.pop(0)
        name = self.error_type.__name__
        return [(key, Outcome(None, f"{name}: refused", 0.0, self.error_type))]

    def cancel_all(self):
        keys, self.queue = self.queue, []
        return keys


def _state(**kw) -> SearchState:
    return SearchState(time.perf_counter(), **kw)


def _spent_budget() -> SearchState:
    """A run whose 10 s budget was spent 90 s ago."""
    return SearchState(time.perf_counter() - 100.0, budget_s=10.0)


def _candidate(label, status=CandidateStatus.OK, seconds=None, memory=None, **kw) -> Candidate:
    return Candidate(label, parse_mesh("data=2,model=2"), "", {}, {}, status, seconds=seconds,
                     memory_bytes=memory, **kw)


# ---------------------------------------------------------------------------------------------
# The state of a run.

def test_the_cancel_event_stops_before_a_spent_budget_is_checked():
    state = _spent_budget()
    state.cancel = threading.Event()
    state.cancel.set()
    assert state.should_stop() and state.stopped is StopReason.CANCELLED


def test_a_spent_budget_and_an_exhausted_patience_each_stop_with_their_reason():
    budget = _spent_budget()
    assert budget.should_stop() and budget.stopped is StopReason.BUDGET
    patience = _state(patience=2, since_best=2)
    assert patience.should_stop() and patience.stopped is StopReason.PATIENCE
    running = _state(patience=2, since_best=1)
    assert not running.should_stop() and running.stopped is StopReason.COMPLETE


def test_a_compile_without_a_budget_keeps_the_callers_time_limit():
    assert _state().compile_timeout(30.0) == 30.0
    assert _state().compile_timeout(None) is None


def test_a_budget_of_days_never_hands_a_compile_a_limit_it_refuses():
    # Issue 43: search(budget_s=100000) failed every candidate: the 100,000 s left became each
    # compile's limit, which check_timeout refuses above a day (86,400 s).
    from explorer._src.api.request import check_timeout

    state = _state(budget_s=100_000.0)
    for limit in (None, 30.0):
        timeout = state.compile_timeout(limit)
        assert check_timeout(timeout) == timeout
    assert state.compile_timeout(None) == 24 * 3600 and state.compile_timeout(30.0) == 30.0


def test_a_compile_past_the_budget_still_gets_one_second():
    assert _spent_budget().compile_timeout(30.0) == 1.0
    assert _spent_budget().compile_timeout(None) == 1.0


def test_patience_counts_compiles_since_the_best_that_fits_last_improved():
    state = _state()
    for label, status, seconds in (("a", CandidateStatus.OK, 3.0),
                                   ("b", CandidateStatus.OK, 5.0),          # slower
                                   ("c", CandidateStatus.DOES_NOT_FIT, 1.0),  # faster, too big
                                   ("d", CandidateStatus.FAILED, None)):
        state.note_best(_candidate(label, status, seconds))
    assert (state.best_label, state.best_seconds, state.since_best) == ("a", 3.0, 3)
    state.note_best(_candidate("e", CandidateStatus.OK, 2.0))
    assert (state.best_label, state.best_seconds, state.since_best) == ("e", 2.0, 0)


def test_a_compiled_candidate_that_does_not_fit_counts_as_compiled_not_failed():
    state = _state()
    for status in (CandidateStatus.OK, CandidateStatus.DOES_NOT_FIT, CandidateStatus.FAILED):
        state.count(_candidate("x", status, 1.0))
    assert (state.done, state.compiled, state.failed) == (3, 2, 1)


def test_an_estimate_counts_once_and_moves_to_what_its_confirmation_made_of_it():
    # Every settled candidate is in exactly one of compiled, failed or estimated.
    state = _state()
    est = CompiledBy.ESTIMATE
    fits = _candidate("a", CandidateStatus.ESTIMATED, 1.0, compiled_by=est)
    too_big = _candidate("b", CandidateStatus.DOES_NOT_FIT, 2.0, compiled_by=est)
    unestimated = _candidate("c", CandidateStatus.FAILED, compiled_by=est)
    for c in (fits, too_big, unestimated):
        state.count(c)
    assert (state.done, state.compiled, state.estimated, state.failed) == (3, 0, 2, 1)
    # The target's compiler confirms a: it is compiled now, not estimated; its compile of b
    # fails: failed, not estimated as well.
    state.recount(fits, _candidate("a", CandidateStatus.OK, 1.5, compiled_by=CompiledBy.GPU))
    state.recount(too_big, _candidate("b", CandidateStatus.FAILED, compiled_by=CompiledBy.GPU))
    assert (state.done, state.compiled, state.estimated, state.failed) == (3, 1, 0, 2)
    # An estimate that fits is a best so far, as a compiled one is.
    state.note_best(fits)
    assert (state.best_label, state.best_seconds) == ("a", 1.0)


def test_a_progress_callback_that_answers_false_cancels_the_run():
    seen = []
    state = _state(progress=lambda p: seen.append(p) or False, total=4)
    state.report(SearchPhase.COMPILE, "data=2,model=2: batch=data")
    assert state.cancelled()
    assert (seen[0].phase, seen[0].total, seen[0].current) == (
        "compile", 4, "data=2,model=2: batch=data")


# ---------------------------------------------------------------------------------------------
# What a compile is asked, and what a failed one gives.

def _matmul() -> WorkloadProblem:
    w = get_workload("matmul")
    return WorkloadProblem(w, w.resolve({"m": 4, "k": 8, "n": 2}))


def _searched_request(**kw) -> Request:
    """The Request a search of matmul on 4 devices is of (its layout is what varies)."""
    return Request(workload="matmul", params={"m": 4, "k": 8, "n": 2}, mesh="data=4",
                   target=TARGET, **kw)


def test_a_workload_candidate_is_its_searchs_request_with_its_rules():
    searched = _searched_request(partitioner="gspmd", timeout=30.0, preset=None)
    mesh = parse_mesh("data=2,model=2")
    request = candidate_request(searched, _matmul(), SearchLayout(mesh, (("batch", "data"),)),
                                12.0, "cpu")
    assert (request.workload, request.rules, request.specs, request.timeout) == (
        "matmul", "batch=data", None, 12.0)
    assert (request.params["m"], request.params["k"], request.params["n"]) == (4, 8, 2)
    assert (request.mesh, request.target, request.partitioner) == (mesh, TARGET, "gspmd")
    assert request.compile_for == "cpu" and request.context is searched.context
    # batch=data on data=2: matmul's x (m=4 rows) split in two rows per device.
    assert [(t.name, t.spec) for t in request.planned.leaves] == [
        ("x", ("data", None)), ("w", ())]          # () is replicated


def test_a_function_candidate_is_asked_for_with_its_arguments_respecified():
    x, w = TensorSpec("x", (8, 4)), TensorSpec("w", (4, 4))
    problem = FunctionProblem(lambda x, w: x @ w, (x, w), [x, w])
    searched = Request(fn=problem.fn, inputs=problem.args, mesh="data=2", target="h100-2")
    layout = SearchLayout(parse_mesh("data=2"), specs=(("x", ("data", None)),))
    request = candidate_request(searched, problem, layout, None, "target")
    new_x, new_w = request.planned.inputs
    assert (new_x.spec, new_w.spec) == (("data", None), w.spec)
    assert request.workload is None and request.timeout is None


def test_a_failed_compile_is_a_failed_candidate_with_its_error_and_bounds():
    layout = SearchLayout(parse_mesh("data=2,model=2"), (("batch", "data"),))
    outcome = Outcome(None, "CompileError: no memory", 0.5, CompileError)
    c = candidate_of(layout, {"x": ("data", None), "w": ()}, outcome, 2e-6, 4096)
    assert c.status is CandidateStatus.FAILED and c.error == "CompileError: no memory"
    assert (c.label, c.rules, c.specs) == ("data=2,model=2: batch=data", "batch=data",
                                           {"x": "data,None", "w": "replicated"})
    assert (c.bound_seconds, c.bound_memory, c.seconds) == (2e-6, 4096, None)
    assert c.time_source is TimeSource.UNTIMED


def test_only_a_lost_worker_is_a_worker_failure():
    assert Outcome(None, "WorkerError: killed", 1.0, WorkerError).worker_failed
    assert not Outcome(None, "CompileError: refused", 1.0, CompileError).worker_failed
    assert not Outcome(None, "the Ray task failed", 1.0, RuntimeError).worker_failed
    assert not Outcome(None, "", 1.0).worker_failed


def test_the_step_time_is_the_trace_else_the_no_overlap_else_the_full_overlap_bound():
    def est(trace, upper, lower):
        return SimpleNamespace(step_trace_seconds=trace, step_upper_seconds=upper,
                               step_lower_seconds=lower)

    assert predicted_step(est(3.0, 5.0, 2.0)) == (3.0, TimeSource.TRACE)
    assert predicted_step(est(None, 5.0, 2.0)) == (5.0, TimeSource.NO_OVERLAP)
    assert predicted_step(est(None, None, 2.0)) == (2.0, TimeSource.FULL_OVERLAP)
    assert predicted_step(est(None, None, None)) == (None, TimeSource.UNTIMED)


# ---------------------------------------------------------------------------------------------
# Ranking.

def test_the_ranking_puts_fitting_candidates_by_time_then_estimated_then_too_big_then_failed():
    cands = [_candidate("failed", CandidateStatus.FAILED),
             _candidate("big", CandidateStatus.DOES_NOT_FIT, 1.0, 10),
             _candidate("plan", CandidateStatus.ESTIMATED, 0.5),
             _candidate("slow", CandidateStatus.OK, 3.0, 10),
             _candidate("fast-large", CandidateStatus.OK, 2.0, 20),
             _candidate("fast-small", CandidateStatus.OK, 2.0, 10)]
    assert [c.label for c in rank(cands)] == ["fast-small", "fast-large", "slow", "plan", "big",
                                              "failed"]


def test_the_pareto_front_keeps_what_no_other_beats_on_both_time_and_memory():
    # (seconds, bytes): C is beaten by B on both; E does not fit.
    cands = [_candidate("A", seconds=1.0, memory=100), _candidate("B", seconds=2.0, memory=50),
             _candidate("C", seconds=3.0, memory=80), _candidate("D", seconds=4.0, memory=10),
             _candidate("E", CandidateStatus.DOES_NOT_FIT, 0.5, 5)]
    assert [c.label for c in pareto(rank(cands))] == ["A", "B", "D"]


def test_collectives_group_by_kind_axes_and_reason_with_their_runs_counted():
    def cost(kind, axes, nbytes, seconds, runs, reason):
        return CollectiveCost(kind, axes, nbytes, seconds, runs, reason, f"{reason} text")

    c = _candidate("x", seconds=1.0, collectives=(
        cost(CollectiveKind.ALL_REDUCE, ("data",), 100, 1e-6, 1, "partial-sum"),
        cost(CollectiveKind.ALL_GATHER, ("model",), 10, 1e-6, 1, "gather-operand"),
        cost(CollectiveKind.ALL_REDUCE, ("data",), 50, 2e-6, 2, "partial-sum")))
    (reduce, gather) = groups(c)
    # 1 + 2 runs; 100·1 + 50·2 bytes; 1 us·1 + 2 us·2.
    assert (reduce.kind, reduce.count, reduce.bytes, reduce.seconds) == (
        "all-reduce", 3, 200, pytest.approx(5e-6))
    assert (gather.kind, gather.count, gather.bytes, gather.example) == (
        "all-gather", 1, 10, "gather-operand text")


def test_the_codes_write_to_json_as_the_words_they_were():
    stats = SearchStats(3, 0, 0, 3, 2, 1, 0, 0, 0, 0, 1.0, StopReason.PATIENCE, True)
    assert json.dumps(stats.to_dict()["stopped"]) == '"patience"'
    c = _candidate("x", seconds=1.0, time_source=TimeSource.NO_OVERLAP, collectives=(
        CollectiveCost(CollectiveKind.ALL_GATHER, ("data",), 8, 1e-6, 1, "", ""),))
    d = json.loads(json.dumps(c.to_dict()))
    assert (d["time_source"], d["status"], d["collectives"][0]["kind"]) == (
        "no-overlap bound", "ok", "all-gather")
    assert [str(s) for s in SearchSpace] == ["rules", "specs", "pipeline"]
    assert [str(p) for p in SearchPhase] == ["enumerate", "profile", "compile", "estimate",
                                             "confirm", "done"]
    assert [str(b) for b in CompiledBy] == ["cpu devices, priced on the target",
                                            "not compiled: estimated from the traced program",
                                            "XLA's GPU compiler", "libtpu", ""]


# ---------------------------------------------------------------------------------------------
# The bounds' checks.

def test_a_result_below_its_bound_is_named_and_one_at_it_is_not():
    assert bounds.time_violation("c", 1.0, 1.0) is None
    assert bounds.time_violation("c", None, 1.0) is None
    assert bounds.time_violation("c", 0.5, 1.0) == (
        "c: predicted 0.5 s is below its time bound 1 s; the time bound is off for the rest of "
        "the search")
    assert bounds.memory_violation("c", 100, 100) is None
    assert bounds.memory_violation("c", 99, 100) == (
        "c: 99 bytes per device is below its memory bound 100; the memory bound is off for the "
        "rest of the search")


# ---------------------------------------------------------------------------------------------
# Branch and bound over matmul's `batch` rules on 4 devices. Its 4 distinct candidates:
#   0 data=2,model=2: replicated    1 data=2,model=2: batch=data
#   2 data=2,model=2: batch=model   3 data=4,model=1: batch=data
# (on 1x4 both rules repeat a 4x1 placement, and replicated is the same everywhere).

def _branch_and_bound(state=None, runner=None) -> BranchAndBound:
    problem = _matmul()
    found = enumerate_space(problem, mesh_factorisations(parse_mesh("data=2,model=2")),
                            SearchSpace.RULES, ["batch"])
    return BranchAndBound(problem, SearchSpace.RULES, found, _searched_request(),
                          state or _state(), runner or FailingRunner())


def test_the_matmul_space_has_the_four_candidates_worked_out_above():
    b = _branch_and_bound()
    assert [p.layout.label() for p in b.points] == [
        "data=2,model=2: replicated", "data=2,model=2: batch=data",
        "data=2,model=2: batch=model", "data=4,model=1: batch=data"]
    assert (b.found.space, b.found.equivalent) == (3 + 2 + 2, 3)


def test_the_reference_goes_first_then_each_new_mesh_shape_then_enumeration_order():
    runner = FailingRunner()
    result = _branch_and_bound(runner=runner).run()
    # A failed reference gives bounds of 0: ties, broken by the new shape, then the index.
    assert [r.rules for r in runner.requests] == [None, "batch=data", "batch=data", "batch=model"]
    assert [r.mesh.sizes for r in runner.requests] == [(2, 2), (4, 1), (2, 2), (2, 2)]
    s = result.stats
    assert (s.distinct, s.compiled, s.failed, s.pruned_bound, s.not_evaluated) == (4, 0, 4, 0, 0)
    assert s.stopped is StopReason.COMPLETE and result.space is SearchSpace.RULES
    assert all(c.status is CandidateStatus.FAILED for c in result.candidates)
    assert result.best is None and result.comparison is None


def test_a_search_cancelled_before_its_first_compile_evaluates_nothing():
    cancel = threading.Event()
    cancel.set()
    runner = FailingRunner()
    result = _branch_and_bound(_state(cancel=cancel), runner).run()
    assert runner.requests == [] and result.candidates == ()
    assert (result.stats.not_evaluated, result.stats.stopped) == (4, StopReason.CANCELLED)


def test_a_worker_lost_to_a_spent_budget_is_not_evaluated_but_a_refused_compile_fails():
    b = _branch_and_bound(_spent_budget())
    b.settle(1, Outcome(None, "WorkerError: timed out", 1.0, WorkerError))
    assert b.not_evaluated == [1] and b.results == {} and b.state.failed == 0
    b.settle(2, Outcome(None, "CompileError: refused", 1.0, CompileError))
    assert b.results[2].status is CandidateStatus.FAILED and b.state.failed == 1


def test_a_lost_worker_within_the_budget_is_a_failed_candidate():
    b = _branch_and_bound()
    b.settle(1, Outcome(None, "WorkerError: crashed", 1.0, WorkerError))
    assert b.results[1].error == "WorkerError: crashed" and b.state.failed == 1


def test_the_time_bound_prunes_the_candidates_bounded_at_or_above_the_best():
    b = _branch_and_bound()
    b.remaining = {1, 2, 3}
    b.time_lb.update({1: 1.0, 2: 2.0, 3: 3.0})
    b.state.best_seconds = 2.0
    b.prune_by_time()
    assert b.remaining == {1} and sorted(b.by_time.pruned) == [2, 3]
    assert (b.state.pruned, b.state.done) == (2, 2)


def test_the_memory_bound_prunes_only_what_exceeds_the_chip():
    b = _branch_and_bound()
    b.remaining = {1, 2, 3}
    b.mem_lb.update({1: H100_MEMORY + 1, 2: H100_MEMORY, 3: 0})
    b.prune_by_memory()
    assert b.remaining == {2, 3} and b.by_memory.pruned == [1]


def test_without_pruning_no_bound_prunes():
    b = _branch_and_bound(_state(prune=False))
    b.remaining = {1, 2}
    b.time_lb.update({1: 5.0, 2: 5.0})
    b.mem_lb.update({1: 10 * H100_MEMORY})
    b.state.best_seconds = 1.0
    b.prune_by_time()
    b.prune_by_memory()
    assert b.remaining == {1, 2} and b.state.pruned == 0


def test_a_candidate_below_its_time_bound_gives_back_what_the_bound_pruned():
    b = _branch_and_bound()
    b.remaining = {2, 3}
    b.time_lb.update({1: 1.0, 2: 2.0, 3: 3.0})
    b.state.best_seconds = 2.0
    b.prune_by_time()
    b.check_bounds(_candidate("data=2,model=2: batch=data", seconds=0.5), 1)
    assert b.remaining == {2, 3} and not b.by_time.trusted and b.by_time.pruned == []
    assert (b.state.pruned, b.state.done) == (0, 0)
    assert b.state.violations == [bounds.time_violation("data=2,model=2: batch=data", 0.5, 1.0)]
    assert b.by_memory.trusted


def test_a_new_mesh_shape_is_tried_at_its_lowest_time_bound():
    b = _branch_and_bound()
    b.remaining = {1, 2, 3}
    b.time_lb.update({1: 0.5, 2: 0.1, 3: 9.0})
    assert b.next_index() == 3                  # the only candidate on 4x1, however slow
    b.remaining.discard(3)
    assert b.next_index() == 2                  # then the lowest bound on the tried shapes


# ---------------------------------------------------------------------------------------------
# The pipeline search.

def test_pipeline_options_are_the_stage_and_microbatch_counts_that_divide():
    # 4 devices, 4 layers: 1, 2 or 4 stages of 4, 2 or 1 devices; 16 rows split into 1, 2 or 4
    # microbatches (3 does not divide 16), each divisible by a stage's devices.
    assert options(4, 4, 16, 4) == [(s, m, 4 // s) for s in (1, 2, 4) for m in (1, 2, 4)]
    # 2 devices: batch 4 makes microbatches of 4 or 2 rows over 2 devices, not of 1.
    assert options(2, 3, 4, 32) == [(1, 1, 2), (1, 2, 2)]


def test_no_pipeline_on_devices_that_split_no_microbatch_is_an_error():
    with pytest.raises(WorkloadError, match="no pipeline fits 3 devices with layers=4"):
        options(3, 4, 16, 4)


def _pipeline(runner=None) -> PipelineSearch:
    # 2 devices, 3 layers: one stage only (2 does not divide 3), 1 or 2 microbatches.
    request = Request(workload="pipeline", mesh="stage=1,data=2", target="h100-2",
                      params={"layers": 3, "stages": 1, "microbatches": 1, "batch": 4,
                              "d_model": 8})
    problem = WorkloadProblem(request.planned.workload, dict(request.planned.params))
    return PipelineSearch(problem, request, _state(), runner or FailingRunner(), limit=32,
                          verify=3)


def test_one_profile_compile_per_microbatch_size_on_the_stages_devices():
    runner = FailingRunner()
    result = _pipeline(runner).run()
    assert [(r.params["batch"], r.params["stages"], r.rules) for r in runner.requests] == [
        (2, 1, "batch=data"), (4, 1, "batch=data")]
    assert runner.requests[0].mesh == MeshSpec(("stage", "data"), (1, 2))
    # Both profiles failed: no plan is known, each (stages, microbatches) not evaluated.
    assert [c.label for c in result.candidates] == ["profile of 2 rows on 2 device(s)",
                                                    "profile of 4 rows on 2 device(s)"]
    s = result.stats
    assert (s.profiled, s.failed, s.space, s.not_evaluated, s.dominated) == (2, 2, 2, 2, 0)
    assert result.space is SearchSpace.PIPELINE


def test_a_plan_is_made_where_its_layer_cost_is_known_and_timed_by_the_stage_model():
    p = _pipeline()
    p.layer_cost = {Profile(rows=4, data=2): 0.5}     # one microbatch of 4 rows
    p.plan()
    assert p.unplanned == 1                           # 2 microbatches of 2 rows: unknown cost
    (program,) = p.plans
    # One stage of 3 layers at 0.5 s, one microbatch: T = 1.5 s, no bubble.
    assert (program.plan.stages, program.plan.microbatches, program.plan.seconds) == (1, 1, 1.5)
    assert program.label == "stage=1,data=2: 1 stage(s), 1 microbatch(es)"
    assert (program.rules, program.params["cuts"]) == ("batch=data", "")
    (estimated,) = p.candidates()
    assert (estimated.status, estimated.seconds, estimated.time_source) == (
        CandidateStatus.ESTIMATED, 1.5, TimeSource.PIPELINE_MODEL)
    assert estimated.extra == {"stage_seconds": [1.5], "bubble_fraction": 0.0,
                               "layer_seconds": 0.5}


# ---------------------------------------------------------------------------------------------
# The space a search runs in.

def test_the_default_space_is_the_pipeline_then_rules_where_names_exist_then_specs():
    pipeline = get_workload("pipeline")
    assert _check_space(None, WorkloadProblem(pipeline, pipeline.resolve({}))) \
        is SearchSpace.PIPELINE
    assert _check_space(None, _matmul()) is SearchSpace.RULES
    x = TensorSpec("x", (4, 4))
    assert _check_space(None, FunctionProblem(abs, (x,), [x])) is SearchSpace.SPECS
    assert _check_space("specs", _matmul()) is SearchSpace.SPECS


def test_the_enumeration_looks_for_a_cancel_within_a_mesh_shape():
    """Issue 43: a cancel at 2 s took effect at 27.8 s, and budget_s=1 took 62 s on a 3-axis
    mesh: the enumeration looked for a stop only between mesh shapes. One shape of
    transformer_train on data=2,model=2,pipe=2 holds thousands of rules layouts; a stop that
    comes after the third look ends it there."""
    w = get_workload("transformer_train")
    problem = WorkloadProblem(w, w.resolve({}))
    mesh = parse_mesh("data=2,model=2,pipe=2")
    looks = []

    def cancelled():
        looks.append(1)
        return len(looks) > 3

    names = problem.names()
    partial = enumerate_space(problem, [mesh], SearchSpace.RULES, names, (), cancelled)
    assert len(looks) == 4                    # polled inside the one shape, then stopped
    from explorer._src.layout_search.space import STOP_CHECK_EVERY
    assert len(partial.points) <= 3 * STOP_CHECK_EVERY
    assert partial.space > 1000               # the shape held far more


def test_a_spent_budget_or_a_cancel_is_out_of_time():
    assert _spent_budget().out_of_time()
    assert not _state(budget_s=100.0).out_of_time() and not _state().out_of_time()
    state = _state()
    state.cancel = threading.Event()
    state.cancel.set()
    assert state.out_of_time()


def test_the_local_runner_compiles_again_when_its_worker_was_lost(monkeypatch):
    """Issue 43: a compile worker killed during a local search left its candidate failed for
    good, where a Ray runner sends a lost task again. A death (WorkerLost) is compiled again on
    a fresh worker, up to MAX_ATTEMPTS in all; a time limit (WorkerError) is not."""
    from explorer._src.errors import WorkerLost
    from explorer._src.layout_search import cluster

    answers = []

    def fake_run(request, pool):
        return answers.pop(0)

    monkeypatch.setattr(cluster, "compile_candidate", fake_run)
    done = Outcome(None, "", 1.0)
    lost = Outcome(None, "WorkerLost: died (killed by SIGKILL)", 1.0, WorkerLost)
    answers[:] = [lost, done]
    runner = cluster.LocalRunner()
    runner.submit("a", None)
    [(key, outcome)] = runner.next_done()
    assert key == "a" and outcome.error == "" and outcome.retries == 1 and not answers

    answers[:] = [lost] * cluster.MAX_ATTEMPTS
    runner.submit("b", None)
    [(_, outcome)] = runner.next_done()
    assert outcome.worker_lost and outcome.retries == cluster.MAX_ATTEMPTS - 1 and not answers

    timed_out = Outcome(None, "WorkerError: past the 120 s limit", 1.0, WorkerError)
    answers[:] = [timed_out, done]
    runner.submit("c", None)
    [(_, outcome)] = runner.next_done()
    assert outcome is not done and outcome.retries == 0 and answers == [done]
