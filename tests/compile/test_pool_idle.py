"""Idle workers are closed: a pool whose worker has served nothing for its idle_timeout stops it
(and every process under it), and the next request starts a new one, said by activity() while
it starts, with the same Report."""

import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from explorer import InputError, TensorSpec, WorkerPool, analyze
from explorer._src.compile.pool import (
    DEFAULT_IDLE_TIMEOUT_S,
    IDLE_TIMEOUT_VARIABLE,
    idle_timeout_from_environment,
)
from explorer._src.compile.protocol import WorkerKey

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_support"))
from in_worker import analyze_in_worker, run_in_workers  # noqa: E402

# x @ w with the contracted dimension split over d=4: each device holds a partial (16, 8) f32
# product, all-reduced over the 4 devices: 16 * 8 * 4 B = 512 B per device.
X = TensorSpec("x", (16, 32), spec="None,d")
W = TensorSpec("w", (32, 8), spec="d,None")
PARTIAL_SUM = [("all-reduce", ("d",), 4, 512)]
KEY = WorkerKey.fake_cpu(4)
# Bounds on waits for what must happen, never asserted as times: generous for a loaded machine.
PATIENCE_S = 120.0


def project(x, w):
    return x @ w


def _analysis(pool):
    return analyze(project, X, W, mesh="d=4", pool=pool, use_cache=False)


def _collectives(report) -> list[tuple]:
    return [(c.kind, c.axes, c.group_size, c.bytes) for c in report.collectives]


def _worker_pids(pool) -> list[int]:
    """The pids of the worker for KEY and of every process under it (its reaper's child)."""
    top = psutil.Process(pool._workers[KEY].proc.pid)
    return [top.pid, *(p.pid for p in top.children(recursive=True))]


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_until(condition, what: str):
    deadline = time.monotonic() + PATIENCE_S
    while not (value := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {PATIENCE_S:g} s")
        time.sleep(0.05)
    return value


@pytest.mark.slow   # starts a worker twice: seconds apiece
def test_an_idle_worker_is_stopped_and_the_next_analysis_starts_one_with_the_same_report():
    pool = WorkerPool(timeout=120, idle_timeout=1)
    try:
        first = _analysis(pool)
        pids = _worker_pids(pool)
        assert len(pids) >= 1 and all(_running(p) for p in pids)
        _wait_until(lambda: not any(_running(p) for p in pids),
                    "the idle worker's processes did not end")
        assert KEY not in pool._workers
        again = _analysis(pool)
        assert _collectives(first) == _collectives(again) == PARTIAL_SUM
        assert again.memory == first.memory
        assert not set(_worker_pids(pool)) & set(pids)       # a new worker served it
    finally:
        pool.close()


@pytest.mark.slow
def test_a_worker_busy_for_longer_than_the_idle_timeout_is_not_stopped(tmp_path, monkeypatch):
    # The program traces inside the worker (the tests' hook) for as long as the test makes it
    # (a file it waits for), well past the idle timeout; the worker that started it must answer
    # it and stay.
    run_in_workers(monkeypatch)
    release = tmp_path / "release"

    def slow_project(x, w):
        while not release.exists():
            time.sleep(0.01)
        return x @ w

    pool = WorkerPool(timeout=300, idle_timeout=0.2)
    try:
        pool.warm(KEY)
        reports = []
        thread = threading.Thread(target=lambda: reports.append(
            analyze_in_worker(slow_project, X, W, mesh="d=4", pool=pool)))
        thread.start()
        # The warmed worker may itself go idle for longer than 0.2 s before the request
        # arrives (a loaded machine) and be closed, and a new one serve it: the worker under
        # test is the one the request reached.
        busy = _wait_until(lambda: (w := pool._workers.get(KEY)) is not None and w.users and w,
                           "the request did not reach a worker")
        time.sleep(1.0)          # five idle timeouts while the worker is busy
        release.touch()
        thread.join()
        assert _collectives(reports[0]) == PARTIAL_SUM
        assert pool._workers[KEY] is busy and not busy.closed
    finally:
        release.touch()
        pool.close()


def _gated_python(folder, gate) -> str:
    """An interpreter that starts only once `gate` exists, so that a worker's start lasts as
    long as the test wants."""
    script = folder / "gated-python"
    script.write_text(f'#!/bin/sh\nwhile [ ! -e "{gate}" ]; do sleep 0.05; done\n'
                      f'exec "{sys.executable}" "$@"\n')
    script.chmod(0o755)
    return str(script)


@pytest.mark.slow
def test_while_a_worker_starts_again_after_idling_the_pool_says_so(tmp_path):
    gate = tmp_path / "gate"
    gate.touch()
    pool = WorkerPool(timeout=120, idle_timeout=1, python=_gated_python(tmp_path, gate))
    try:
        first = _analysis(pool)
        assert pool.activity() == "compiling"
        pids = _worker_pids(pool)
        gate.unlink()                  # the next worker waits at its start until told
        _wait_until(lambda: not any(_running(p) for p in pids), "the idle worker did not end")
        reports = []
        thread = threading.Thread(target=lambda: reports.append(_analysis(pool)))
        thread.start()
        said = _wait_until(lambda: pool.activity() != "compiling" and pool.activity(),
                           "the pool never said a worker was starting")
        assert said == "starting a compile worker for 4 devices"
        gate.touch()
        thread.join()
        assert _collectives(reports[0]) == _collectives(first) == PARTIAL_SUM
        assert pool.activity() == "compiling"
    finally:
        gate.touch()
        pool.close()


@pytest.mark.parametrize("bad", [0, -5, "300", True, float("nan"), float("inf")])
def test_an_idle_timeout_that_is_not_a_positive_number_of_seconds_is_refused(bad):
    with pytest.raises(InputError, match=rf"idle_timeout={bad!r} is not a number of seconds "
                                         r"above 0; give one \(e.g. 300\) or None"):
        WorkerPool(idle_timeout=bad)


def test_a_pool_built_with_no_idle_timeout_keeps_it_none():
    assert WorkerPool(idle_timeout=None).idle_timeout is None
    assert WorkerPool().idle_timeout == DEFAULT_IDLE_TIMEOUT_S == 300.0


@pytest.mark.parametrize("text, seconds", [("", 300.0), ("45", 45.0), ("2.5", 2.5),
                                           ("0", None), ("off", None), (" OFF ", None)])
def test_the_default_pools_idle_timeout_is_read_from_the_environment(monkeypatch, text,
                                                                     seconds):
    monkeypatch.setenv(IDLE_TIMEOUT_VARIABLE, text)
    assert idle_timeout_from_environment() == seconds


@pytest.mark.parametrize("text", ["soon", "-3", "inf"])
def test_an_environment_idle_timeout_that_is_not_seconds_names_the_variable(monkeypatch, text):
    monkeypatch.setenv(IDLE_TIMEOUT_VARIABLE, text)
    with pytest.raises(InputError, match=rf"EXPLORER_WORKER_IDLE_S='{text}' is not a number "
                                         "of seconds; give one above 0"):
        idle_timeout_from_environment()

