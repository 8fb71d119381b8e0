"""A search ends at its budget (or a cancel) without waiting for the work in flight (issue 53):
a compile that blocks, or a trace that blocks, is left behind (layout_search/deadline.py), the
result says which phase was cut short and how much was abandoned, and its counts agree with its
rows.

No test waits on time: the search's clock is a fake one, which the blocked work itself moves
past the budget before it blocks on an Event that only the test's teardown sets. The search
returning at all, with the blocked work still blocked, is what shows that it did not wait."""

from __future__ import annotations

import threading
from collections import Counter

import jax
import pytest

import explorer
from explorer._src.api.analysis_request import Request
from explorer._src.errors import CompileError, WorkerError
from explorer._src.layout_search import estimate_screen as estimate_module
from explorer._src.layout_search import search as search_module
from explorer._src.layout_search import state as state_module
from explorer._src.layout_search.cluster import LocalRunner
from explorer._src.layout_search.confirm import Screening
from explorer._src.layout_search.deadline import Abandoned, Job, in_time
from explorer._src.layout_search.estimate_screen import EstimateScreen
from explorer._src.layout_search.evaluate import Outcome
from explorer._src.layout_search.result import (
    MIN_EVALUATED,
    CandidateStatus,
    CompiledBy,
    SearchPhase,
    StopReason,
)
from explorer._src.spec.mesh import parse_mesh
from explorer._src.spec.tensor import TensorSpec

ARGS = dict(mesh="data=2,model=2", target="h100-4", params={"batch": 512},
            names=["batch", "mlp", "embed"], mesh_shapes=False)
BUDGET_S = 600.0


class FakeClock:
    """The search's clock (time.perf_counter in search.py and state.py): it moves only when a
    test moves it."""

    def __init__(self):
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    @staticmethod
    def sleep(seconds: float) -> None:    # the confirmation's wait for its worker: none here
        pass


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    for module in (search_module, state_module):
        monkeypatch.setattr(module, "time", fake)
    return fake


class Blocker:
    """Blocks the work it is asked to (`block`): first moves the fake clock `advance_s` on
    (past the budget, say), or sets `cancel`, then waits for `release`, which the fixture's
    teardown sets; records the threads it blocked, to join them then."""

    def __init__(self, clock: FakeClock):
        self.clock = clock
        self.advance_s = 2 * BUDGET_S
        self.cancel: threading.Event | None = None
        self.release = threading.Event()
        self.blocked: list[threading.Thread] = []

    def block(self) -> None:
        self.blocked.append(threading.current_thread())
        if self.cancel is not None:
            self.cancel.set()
        else:
            self.clock.now += self.advance_s
        self.release.wait()


@pytest.fixture
def blocker(clock):
    b = Blocker(clock)
    yield b
    b.release.set()
    for thread in b.blocked:
        thread.join(timeout=60)
        assert not thread.is_alive()


class BlockingRunner(LocalRunner):
    """The local runner (its compiles on threads, deadline.py), whose `n_block`-th compile, and
    every compile for the target's compiler, blocks (Blocker); the others fail at once, as a
    compile the compiler refused (what a compile gives is not what these tests are about).
    Starts no worker of its own."""

    def __init__(self, blocker: Blocker, n_block: int | None = None):
        super().__init__()
        self.blocker, self.n_block = blocker, n_block
        self.compiles = 0

    def warm(self, key) -> None:
        pass

    def _compile(self, request: Request) -> Outcome:
        self.compiles += 1
        if self.compiles == self.n_block or request.compile_for == "target":
            self.blocker.block()
            return Outcome(None, "WorkerError: released after the search", 0.0, WorkerError)
        return Outcome(None, "CompileError: refused", 0.0, CompileError)


@pytest.fixture
def runners(blocker, monkeypatch) -> list[BlockingRunner]:
    """The BlockingRunners the searches made (set `.n_block` on the list before searching)."""
    class Made(list):
        n_block: int | None = None

    made = Made()

    def make_runner(cluster, pool, node_timeout):
        made.append(BlockingRunner(blocker, made.n_block))
        return made[-1]

    monkeypatch.setattr(search_module, "make_runner", make_runner)
    return made


@pytest.fixture
def screened(runners, monkeypatch) -> list[BlockingRunner]:
    """As `runners`, with the target's own compiler as the plan (as with the gpu extra), so
    that the search screens by the estimate and confirms with that compiler."""
    monkeypatch.setattr(search_module, "screening_for",
                        lambda request: Screening(CompiledBy.GPU))
    return runners


def _counts_agree(result) -> None:
    """Every distinct candidate counted once, and the counts are the rows': each row was
    evaluated (none the search did not evaluate is said to fit or not), and each evaluated
    candidate is a row."""
    s = result.stats
    assert s.listed_all
    assert (s.compiled + s.failed + s.estimated + s.pruned_bound + s.pruned_memory
            + s.not_evaluated) == s.distinct
    rows = result.candidates
    assert len(rows) == s.evaluated
    kinds = Counter("failed" if c.status is CandidateStatus.FAILED
                    else "estimated" if c.compiled_by is CompiledBy.ESTIMATE else "compiled"
                    for c in rows)
    assert (kinds["compiled"], kinds["estimated"], kinds["failed"]) == (
        s.compiled, s.estimated, s.failed)
    assert s.does_not_fit == sum(c.status is CandidateStatus.DOES_NOT_FIT for c in rows)
    assert len({c.label for c in rows}) == len(rows)


# ---------------------------------------------------------------------------------------------
# The search returns at the deadline, whatever is in flight.

def test_a_confirmation_in_flight_at_the_budget_is_not_waited_for(screened, blocker):
    result = explorer.search("mlp_train", **ARGS, budget_s=BUDGET_S)
    s = result.stats
    assert blocker.blocked and all(t.is_alive() for t in blocker.blocked)   # still blocked
    assert s.stopped is StopReason.BUDGET
    assert s.cut_short == (SearchPhase.CONFIRM,) and s.abandoned == 1
    # The estimate screen had the time to weigh every candidate; the one sent to the
    # target's compiler keeps its estimate.
    assert s.screened == s.estimated == s.distinct and s.not_evaluated == 0
    assert s.confirmed == 0 and s.compiled == 0
    assert all(c.compiled_by is CompiledBy.ESTIMATE for c in result.candidates)
    _counts_agree(result)
    assert result.best is not None
    assert "budget (it cut short: confirm; 1 in flight not waited for)" in s.text()
    assert s.to_dict()["cut_short"] == ["confirm"] and s.to_dict()["abandoned"] == 1


def test_a_compile_in_flight_at_the_budget_is_not_evaluated(runners, blocker):
    # No screen (compile_for="cpu"): the second compile blocks past the budget.
    runners.n_block = 2
    result = explorer.search("mlp_train", **ARGS, budget_s=BUDGET_S, prune=False,
                             compile_for="cpu")
    s = result.stats
    assert len(blocker.blocked) == 1 and blocker.blocked[0].is_alive()
    assert s.stopped is StopReason.BUDGET
    assert s.cut_short == (SearchPhase.COMPILE,) and s.abandoned == 1
    assert s.failed == 1 and s.compiled == 0            # the reference, before it
    assert s.not_evaluated == s.distinct - 1            # it, and those never sent
    assert runners[0].pending() == 0
    _counts_agree(result)


def test_a_cancel_while_a_compile_blocks_returns_at_once(runners, blocker):
    runners.n_block = 2
    blocker.cancel = threading.Event()
    result = explorer.search("mlp_train", **ARGS, cancel=blocker.cancel, prune=False,
                             compile_for="cpu")
    s = result.stats
    assert blocker.blocked[0].is_alive()
    assert s.stopped is StopReason.CANCELLED
    assert s.cut_short == (SearchPhase.COMPILE,) and s.abandoned == 1
    assert s.failed == 1 and s.not_evaluated == s.distinct - 1
    _counts_agree(result)


def test_a_trace_that_outlasts_the_budget_is_not_waited_for(screened, blocker, monkeypatch):
    def blocked_trace(fn, inputs, mesh):
        blocker.block()
        raise AssertionError("released after the search: nothing reads this")

    monkeypatch.setattr(estimate_module, "trace_program", blocked_trace)
    result = explorer.search("mlp_train", **ARGS, budget_s=BUDGET_S)
    s = result.stats
    assert blocker.blocked[0].is_alive()
    assert s.stopped is StopReason.BUDGET
    assert s.cut_short == (SearchPhase.ESTIMATE,) and s.abandoned == 1
    assert s.evaluated == 0 and s.not_evaluated == s.distinct and s.does_not_fit == 0
    _counts_agree(result)
    assert result.nothing_evaluated
    assert result.headline() == (f"Evaluated 0 of {s.distinct:,} distinct layouts within the "
                                 f"{BUDGET_S:g} s budget: nothing is known of any; widen the "
                                 "budget (budget_s).")


def test_bounds_are_not_worked_out_past_the_budget(screened, clock, monkeypatch):
    # The budget runs out while the bounds are worked out (0.3-1 s for 8,620 candidates on a
    # loaded machine): the rest are left, and nothing is evaluated after.
    from explorer._src.layout_search import bounds
    from explorer._src.layout_search import branch_and_bound as bb

    monkeypatch.setattr(bb, "BOUNDS_CHECK_EVERY", 1)    # a look before each
    worked_out = []
    time_bound = bounds.time_bound

    def spending(*args):
        worked_out.append(args[0])
        clock.now += BUDGET_S / 2          # the first two spend it
        return time_bound(*args)

    monkeypatch.setattr(bounds, "time_bound", spending)
    result = explorer.search("mlp_train", **ARGS, budget_s=BUDGET_S)
    s = result.stats
    assert len(worked_out) == 2 < s.distinct
    assert s.stopped is StopReason.BUDGET and s.evaluated == 0
    assert s.not_evaluated == s.distinct
    _counts_agree(result)


@pytest.mark.parametrize("slow", ["enumerate_space", "trace_program"])
def test_a_screen_that_starts_in_the_reserve_still_estimates_enough_to_name_a_best(
        screened, blocker, clock, monkeypatch, slow):
    # Listing the space, or the trace, takes 70% of the budget, past the estimate screen's 60%
    # share (as on a loaded machine: 42 s of a 60 s budget listing, or 17-20 s tracing after
    # 20 s listing): the screen still estimates MIN_EVALUATED candidates in the reserve
    # (milliseconds each), so that the search names a best, and then confirms with what is
    # left (blocked here: abandoned at the end).
    module = search_module if slow == "enumerate_space" else estimate_module
    work = getattr(module, slow)

    def slow_work(*args, **kwargs):
        clock.now += 0.7 * BUDGET_S
        return work(*args, **kwargs)

    monkeypatch.setattr(module, slow, slow_work)
    result = explorer.search("mlp_train", **ARGS, budget_s=BUDGET_S)
    s = result.stats
    assert s.distinct > MIN_EVALUATED          # (else the screen would have weighed them all)
    assert s.screened == s.estimated == MIN_EVALUATED
    assert s.stopped is StopReason.BUDGET
    assert s.cut_short == (SearchPhase.ESTIMATE, SearchPhase.CONFIRM) and s.abandoned == 1
    _counts_agree(result)
    assert not result.too_few and result.best is not None


# ---------------------------------------------------------------------------------------------
# The pieces: a Job, in_time, the local runner's wait.

def test_a_job_not_waited_for_runs_on_and_its_result_is_there_after():
    release = threading.Event()
    job = Job(lambda: release.wait() and 42, "test-job")
    assert job.wait(stop=lambda: True) is False and not job.done()
    release.set()
    assert job.wait() is True and job.result() == 42


def test_in_time_raises_abandoned_and_passes_on_the_works_own_error():
    release = threading.Event()
    with pytest.raises(Abandoned):
        in_time(release.wait, lambda: True, "test-wait")
    release.set()

    def fails():
        raise ValueError("its own")

    with pytest.raises(ValueError, match="its own"):
        in_time(fails, lambda: False, "test-fails")
    # Without a stop, the work runs here, in this thread.
    assert in_time(threading.current_thread, None, "test-here") is threading.current_thread()


def test_in_time_starts_nothing_once_stopped():
    started = []
    with pytest.raises(Abandoned):
        in_time(lambda: started.append(1), lambda: True, "test-never")
    assert started == []


def test_the_local_runner_gives_up_a_compile_only_when_cancelled(blocker):
    runner = BlockingRunner(blocker, n_block=1)
    runner.submit("a", object())
    runner.submit("b", object())
    assert runner.next_done(stop=lambda: True) == []
    assert runner.pending() == 2                       # "a" still in flight, "b" queued
    assert runner.next_done(stop=lambda: True) == []   # the same compile, not a second one
    assert runner.compiles == 1
    assert runner.cancel_all() == ["a", "b"] and runner.pending() == 0
    assert blocker.blocked[0].is_alive()


@pytest.mark.slow
def test_the_local_runner_stops_the_worker_of_a_compile_it_gives_up(monkeypatch):
    """A compile cancelled at the budget must not hold its worker (and a core) until its own
    time limit: a search started right after would wait for it."""
    import sys
    from pathlib import Path

    from explorer import WorkerPool
    from explorer._src.compile.protocol import WorkerKey

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_support"))
    from worker_faults import Sleep, answer_faults

    answer_faults(monkeypatch)
    pool = WorkerPool(timeout=900)
    key = WorkerKey.fake_cpu(2)

    class SleepingRunner(LocalRunner):      # each compile: the worker sleeps 10 minutes
        def _compile(self, request):
            return self.pool.run(key, Sleep(600), timeout=900)

    try:
        first = pool.warm(key).pid
        worker = pool._workers[key]
        runner = SleepingRunner(pool)
        runner.submit("a", object())
        assert runner.next_done(stop=worker.lock.locked) == []    # sent, and not waited for
        assert runner.cancel_all() == ["a"]
        stopped = threading.Event()
        while worker.proc.poll() is None:                         # a state, not a time
            stopped.wait(0.01)
        assert pool.warm(key).pid != first                        # a fresh worker is started
    finally:
        pool.close()


# ---------------------------------------------------------------------------------------------
# The trace on its own thread keeps the contexts the function was handed over in.

def test_the_trace_thread_sees_the_contexts_of_the_search_call():
    seen = []

    def f(x):
        seen.append((jax.config.jax_default_matmul_precision, threading.current_thread()))
        return x * 2

    with jax.default_matmul_precision("highest"):
        request = Request(fn=f, inputs=(TensorSpec("x", (8, 4), "float32"),), mesh="data=2")
    problem = search_module._problem(request)
    screen = EstimateScreen(problem, "h100-8", stop=lambda: False)
    screen.trace(parse_mesh("data=2"))
    assert seen and all(p == "highest" for p, _ in seen)
    assert all(t is not threading.current_thread() for _, t in seen)
