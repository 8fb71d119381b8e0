"""A running compile said phase by phase, on the clock its time limit is enforced on (issue 53,
item 2): the status names each phase (tracing, starting the worker, compiling, or compiling and
running on the chip, reading the result) with its own time, counts only the phase the limit
covers against the limit, warns at 75 % of it, and the pool stops the worker at the limit
counted from that phase's start; the Timing tab's "This answer took" names the same phases with
the same numbers."""

import asyncio
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ipywidgets")

import explorer  # noqa: E402
from explorer import WorkerError  # noqa: E402
from explorer._src.api.session import Session  # noqa: E402
from explorer._src.compile.pool import (  # noqa: E402
    COMPILING,
    MEASURING,
    READING,
    STARTING,
    TRACING,
    Phases,
    WorkerPool,
    recording,
)
from explorer._src.compile.protocol import WorkerKey  # noqa: E402
from explorer._src.ui.status import CompileTicker, phase_text  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_support"))
from worker_faults import Sleep, answer_faults  # noqa: E402


class FakeClock:
    """A clock the test sets: seconds chosen as binary fractions, so that differences are
    exact and the text can be written out by hand."""

    def __init__(self, at: float = 1000.0):
        self.at = at

    def __call__(self) -> float:
        return self.at


def _phases_at(clock: FakeClock, marks: list[tuple[str, float, float | None]]) -> Phases:
    """Phases begun at clock.at in TRACING, then `marks` (name, seconds after the start, limit)."""
    start = clock.at
    phases = Phases(clock=clock)
    for name, after, limit in marks:
        clock.at = start + after
        phases.enter(name, limit)
    return phases


def test_the_compile_is_counted_from_its_own_start_with_the_phases_before_it_named():
    clock = FakeClock()
    # traced 0.75 s, the worker started in 2.5 s, compiling since 3.25 s, under a 90 s limit.
    phases = _phases_at(clock, [(STARTING, 0.75, None), (COMPILING, 3.25, 90.0)])
    clock.at += 41.25
    assert phase_text(phases.now()) == \
        "◌ compiling 41.2 s of its 90 s time limit (worker started in 2.5 s, traced in 0.8 s)"


def test_the_warning_comes_at_three_quarters_of_the_limit_of_the_compile_itself():
    clock = FakeClock()
    phases = _phases_at(clock, [(STARTING, 0.5, None), (COMPILING, 20.5, 90.0)])
    # 20 s of worker start are not counted: 67 s into the compile (0.744 of 90 s) is no
    # warning, though 87.5 s have passed since the compile began, 97 % of the limit.
    clock.at += 67.0
    assert phase_text(phases.now()).startswith("◌ compiling 67.0 s of its 90 s time limit")
    clock.at += 0.5                         # 67.5 s = 0.75 × 90 s
    text = phase_text(phases.now())
    assert text == ("⚠ compiling 67.5 s of its 90 s time limit (worker started in 20.0 s, "
                    "traced in 0.5 s): it is stopped at 90 s. To let a compile this long "
                    "finish, raise the time limit in the sidebar (the edit then compiles again "
                    "with it)")


def test_phases_without_a_limit_are_counted_on_their_own():
    clock = FakeClock()
    phases = _phases_at(clock, [])
    clock.at += 0.25
    assert phase_text(phases.now()) == "◌ tracing… 0.2 s"        # 0.25 rounds to even
    phases.enter(STARTING)
    clock.at += 2.0
    assert phase_text(phases.now(), "starting a compile worker for 8 devices") == \
        "◌ starting a compile worker for 8 devices… 2.0 s (traced in 0.2 s)"
    phases.enter(COMPILING, 120.0)
    clock.at += 4.5
    phases.enter(READING)
    clock.at += 1.5
    # The limit is the compile's: reading is said without it.
    assert phase_text(phases.now()) == ("◌ reading the result… 1.5 s (compiled in 4.5 s, "
                                        "worker started in 2.0 s, traced in 0.2 s)")
    assert phases.seconds(COMPILING) == 4.5 and phases.seconds(STARTING) == 2.0


def test_a_measured_run_is_named_as_such():
    clock = FakeClock()
    phases = _phases_at(clock, [(MEASURING, 0.5, 120.0)])
    clock.at += 10.0
    assert phase_text(phases.now()) == \
        "◌ compiling and running on the chip 10.0 s of its 120 s time limit (traced in 0.5 s)"


def test_a_phase_under_fifty_milliseconds_is_left_out():
    clock = FakeClock()
    phases = _phases_at(clock, [(COMPILING, 0.03125, 90.0)])
    clock.at += 1.0
    assert phase_text(phases.now()) == "◌ compiling 1.0 s of its 90 s time limit"


class ScheduledSession:
    """What the ticker reads of a Session whose compile is in flight: its request's limit, its
    busy and waiting flags and the phases its scheduler records."""

    def __init__(self, phases: Phases, timeout: float):
        self.phases, self.busy, self.waiting = phases, True, False
        self.request = type("Request", (), {"timeout": timeout})()


def test_the_app_status_ticks_the_recorded_phases():
    clock = FakeClock()
    phases = _phases_at(clock, [(STARTING, 1.5, None), (COMPILING, 20.0, 90.0)])
    # 80 s since the compile began, past 75 % of the limit; 60 s of it compiling, short of it.
    clock.at += 60.0
    said = []
    pool = WorkerPool(idle_timeout=None)          # no worker starting: its activity is plain
    try:
        ticker = CompileTicker(said.append, latest=lambda: 7, pool=pool)
        ticker.start(7, ScheduledSession(phases, timeout=90.0))   # no loop: one tick, now
    finally:
        pool.close()
    assert said == ["◌ compiling 60.0 s of its 90 s time limit (worker started in 18.5 s, "
                    "traced in 1.5 s)"]


@pytest.mark.slow
def test_a_slow_compile_is_stopped_at_the_limit_counted_from_the_compile(monkeypatch):
    """A real worker, started cold (jax loading: seconds), is sent a program that runs 60 s
    under a 2 s limit. Its start is not counted: the stop comes at least 2 s after the
    compile's start as the phases say it, and the status at the stop reads the limit reached,
    counted from that same start."""
    answer_faults(monkeypatch)
    pool = WorkerPool(idle_timeout=None)
    phases = Phases()
    try:
        with recording(phases), pytest.raises(WorkerError, match="longer than the 2 s limit"):
            pool.run(WorkerKey.fake_cpu(2), Sleep(60), timeout=2.0)
        stopped = time.monotonic()
    finally:
        pool.close()
    names = [name for name, _ in phases.marks]
    assert names == [TRACING, STARTING, COMPILING]       # stopped while compiling
    compile_start = phases.marks[2][1]
    assert phases.limit_s == 2.0 and phases.limited == COMPILING
    assert stopped - compile_start >= 2.0                # never before the limit
    at_stop = phases.now()
    assert at_stop.name == COMPILING and at_stop.limit_s == 2.0 and at_stop.took_s >= 2.0
    assert phase_text(at_stop).startswith("⚠ compiling ")
    # The worker's start took place before the compile's clock: it was not counted.
    assert dict(at_stop.done)[STARTING] > 0


@pytest.mark.slow
def test_the_time_spent_names_the_phases_the_status_named_with_their_numbers():
    """A measured run scheduled as the app schedules it: its Result's time spent is the
    recorded phases' seconds, and the runs are told as running on the chip, not reading."""
    pool = WorkerPool(idle_timeout=None)
    bias = time.time_ns() % 7          # a program no cache has seen: it compiles

    def step(x, w):
        return x @ w + bias

    session = Session(fn=step, inputs=(explorer.TensorSpec("x", (64, 128)),
                                       explorer.TensorSpec("w", (128, 32))),
                      mesh="data=2", measure=True, pool=pool, debounce=0.0)
    loop = asyncio.new_event_loop()
    try:
        done = loop.create_future()
        session.schedule(loop, lambda result: done.set_result(result))
        result = loop.run_until_complete(asyncio.wait_for(done, 600))
    finally:
        loop.close()
        session.close()
        pool.close()
    assert not isinstance(result, Exception), result
    phases = session.phases
    assert [name for name, _ in phases.marks] == [TRACING, STARTING, MEASURING, READING]
    spent = result.spent
    assert result.report.timing.measured_s is not None
    assert spent.trace_s == phases.seconds(TRACING)
    assert spent.worker_start_s == phases.seconds(STARTING)
    assert spent.compile_s + spent.run_s == pytest.approx(phases.seconds(MEASURING))
    assert spent.run_s > 0 and spent.lower_s == 0
    # The runs are the median's MEASURE_RUNS calls at least; none of them is "reading".
    timing = result.report.timing
    assert spent.run_s >= timing.measured_s
    assert spent.read_s + spent.price_s <= phases.seconds(READING) + 1e-9
    assert "running on the chip" in spent.text()
    # The text leaves out parts under 5 ms (TimeSpent.text): a trace jax found in its own
    # cache can take 4 ms.
    assert ("tracing" in spent.text()) == (spent.trace_s >= 0.005)
