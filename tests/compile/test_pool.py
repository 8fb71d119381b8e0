"""The worker pool: one warm process per device count, replaced after a crash or a timeout."""

import sys
from pathlib import Path

import pytest

from explorer import TensorSpec, WorkerError, WorkerPool, analyze
from explorer._src.compile.protocol import Ping, WorkerKey

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
