"""The worker pool: one warm process per device count, replaced after a crash or a timeout."""

import sys
import threading
from pathlib import Path

import pytest

from explorer import TensorSpec, WorkerError, WorkerPool, analyze
from explorer._src.compile.pool import abandoned_when
from explorer._src.compile.protocol import Ping, Pong, WorkerKey
from explorer._src.errors import CompileAbandoned

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_support"))
from in_worker import analyze_in_worker, run_in_workers  # noqa: E402
from worker_faults import Crash, Sleep, answer_faults  # noqa: E402

cpu = WorkerKey.fake_cpu


@pytest.fixture
def pool():
    p = WorkerPool(timeout=60)
    yield p
    p.close()


def _total(x):
    return x.sum()


@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
def test_several_device_counts_in_one_process(pool):
    for n in (8, 64):
        r = analyze(_total, TensorSpec("x", (n * 4,), spec="d"), mesh={"d": n}, pool=pool,
                    use_cache=False)
        assert r.mesh.device_count == n
        assert [(c.kind, c.group_size) for c in r.collectives] == [("all-reduce", n)]
    assert sorted(k.devices for k in pool._workers) == [8, 64]


@pytest.mark.slow
def test_a_crashed_worker_is_replaced(pool, monkeypatch):
    answer_faults(monkeypatch)
    first = pool.warm(cpu(8)).pid
    with pytest.raises(WorkerError, match=r"died \(exit status 3\)"):
        pool.run(cpu(8), Crash(exit_code=3))
    r = analyze(_total, TensorSpec("x", (8,), spec="d"), mesh="d=8", pool=pool, use_cache=False)
    assert r.collectives[0].kind == "all-reduce"
    assert pool.warm(cpu(8)).pid != first


@pytest.mark.slow
def test_a_killed_worker_is_replaced(pool):
    pool.warm(cpu(4))
    pool._workers[cpu(4)].proc.kill()
    pool._workers[cpu(4)].proc.wait()
    r = analyze(_total, TensorSpec("x", (8,), spec="d"), mesh="d=4", pool=pool, use_cache=False)
    assert r.collectives[0].group_size == 4


@pytest.mark.slow
def test_a_compile_past_the_time_limit_is_stopped(pool, monkeypatch):
    answer_faults(monkeypatch)
    pool.warm(cpu(2))
    with pytest.raises(WorkerError, match="longer than the 1 s limit on 2 devices"):
        pool.run(cpu(2), Sleep(30), timeout=1)
    assert pool.run(cpu(2), Ping()).devices == 2


def _run_on_thread(pool, key, message, gave_up: threading.Event | None, timeout: float = 900):
    """pool.run on a thread of its own (given up once `gave_up` is set); its answer or error
    in the returned list once the thread has ended."""
    out = []

    def run():
        try:
            if gave_up is None:
                out.append(pool.run(key, message, timeout=timeout))
            else:
                with abandoned_when(gave_up.is_set):
                    out.append(pool.run(key, message, timeout=timeout))
        except Exception as e:
            out.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def _until(condition) -> None:
    """Wait for a state, never for a time: `condition()` polled until it holds."""
    done = threading.Event()
    while not condition():
        done.wait(0.01)


@pytest.mark.slow
def test_an_abandoned_compile_stops_its_worker_and_a_fresh_one_serves_the_next(pool, monkeypatch):
    """A compile no one will read (a search that ended) must not hold its worker, and a core,
    until its own time limit: given up, its worker is stopped."""
    answer_faults(monkeypatch)
    first = pool.warm(cpu(2)).pid
    worker = pool._workers[cpu(2)]
    gave_up = threading.Event()
    thread, out = _run_on_thread(pool, cpu(2), Sleep(600), gave_up)
    _until(lambda: worker.lock.locked())             # sent: the worker sleeps on it
    gave_up.set()
    thread.join()
    (error,) = out
    assert isinstance(error, CompileAbandoned) and "was given up" in str(error)
    assert worker.proc.poll() is not None             # its process ended, not left sleeping
    assert pool.run(cpu(2), Ping()).pid != first


@pytest.mark.slow
def test_a_request_abandoned_while_it_waits_its_turn_is_never_sent(pool, monkeypatch):
    answer_faults(monkeypatch)
    first = pool.warm(cpu(2)).pid
    worker = pool._workers[cpu(2)]
    busy, busy_out = _run_on_thread(pool, cpu(2), Sleep(2), None)
    _until(lambda: worker.lock.locked())
    gave_up = threading.Event()
    waiting, waiting_out = _run_on_thread(pool, cpu(2), Ping(), gave_up)
    _until(lambda: worker.users == 2)                 # the second waits for the first's turn
    gave_up.set()
    waiting.join()
    busy.join()
    (error,) = waiting_out
    assert isinstance(error, CompileAbandoned) and "before it was sent" in str(error)
    (answer,) = busy_out                              # the compile in flight was not touched
    assert isinstance(answer, Pong) and answer.pid == first


@pytest.mark.slow
def test_a_worker_without_the_test_hook_answers_no_fault_message(pool, monkeypatch):
    from explorer import CompileError
    from explorer._src.compile.worker import HOOK_VARIABLE

    monkeypatch.delenv(HOOK_VARIABLE, raising=False)
    with pytest.raises(CompileError, match="got a Crash, which is no message it knows"):
        pool.run(cpu(2), Crash(exit_code=3))
    assert pool.run(cpu(2), Ping()).devices == 2


@pytest.mark.slow
def test_an_error_in_the_program_is_reported_and_the_worker_lives(pool, monkeypatch):
    run_in_workers(monkeypatch)

    def broken(x):
        return x @ undefined_name  # noqa: F821

    from explorer import CompileError

    # Traced inside the worker (the tests' hook): the worker reports it and lives on.
    with pytest.raises(CompileError, match="undefined_name"):
        analyze_in_worker(broken, TensorSpec("x", (4, 4)), mesh="d=2", pool=pool)
    assert pool.warm(cpu(2)).devices == 2
    # A user's function is traced here: its error is raised here, naming it.
    with pytest.raises(CompileError,
                       match="'.*broken' raised while it was traced.*undefined_name"):
        analyze(broken, TensorSpec("x", (4, 4)), mesh="d=2", pool=pool, use_cache=False)


@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
def test_least_recently_used_worker_is_closed_beyond_the_limit():
    p = WorkerPool(max_workers=2)
    try:
        for n in (1, 2, 3):
            p.warm(cpu(n))
        assert list(p._workers) == [cpu(2), cpu(3)]
    finally:
        p.close()
