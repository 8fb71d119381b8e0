"""Worker faults: each one gives the caller a WorkerError that says what happened, and the next
request is served by a fresh worker."""

import errno
import os
import resource
import signal
import threading
import time

import pytest

from explorer import TensorSpec, WorkerError, WorkerPool, analyze
from explorer.compile.protocol import Crash, Ping, Pong, Sleep, WorkerKey

# Each fault test starts, breaks and replaces real worker processes: seconds apiece.
pytestmark = pytest.mark.slow

X = TensorSpec("x", (8,), spec="d")


@pytest.fixture
def pool():
    p = WorkerPool(timeout=30)
    yield p
    p.close()


def _sum(x):
    return x.sum()


def _next_request_works(pool, devices=2):
    r = analyze(_sum, X, mesh={"d": devices}, pool=pool, use_cache=False)
    assert [(c.kind, c.group_size) for c in r.collectives] == [("all-reduce", devices)]


def _gone(pid: int, within: float = 5.0) -> bool:
    """Whether process `pid` has ended (a zombie waiting for its reaper counts as ended)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_sigkill_mid_compile_names_the_signal(pool):
    pid = pool.warm(WorkerKey.fake_cpu(2)).pid

    def slow(x):            # still being traced when the signal comes
        time.sleep(30)
        return x

    threading.Timer(1.0, os.kill, (pid, signal.SIGKILL)).start()
    with pytest.raises(WorkerError, match=r"for 2 devices died \(killed by SIGKILL, sent by "
                                          "the kernel's out-of-memory killer"):
        analyze(slow, X, mesh="d=2", pool=pool, use_cache=False)
    _next_request_works(pool)


def test_a_stopped_worker_runs_into_the_time_limit_and_is_killed(pool):
    key = WorkerKey.fake_cpu(2)
    pid = pool.warm(key).pid
    os.kill(pid, signal.SIGSTOP)
    with pytest.raises(WorkerError, match="longer than the 1 s limit on 2 devices"):
        pool.run(key, Ping(), timeout=1)
    assert _gone(pid)
    _next_request_works(pool)


def test_a_program_that_exits_with_a_thread_running_stops_its_worker(pool):
    pid = pool.warm(WorkerKey.fake_cpu(2)).pid

    def quits(x):
        threading.Thread(target=time.sleep, args=(60,)).start()    # not a daemon
        raise SystemExit(5)

    with pytest.raises(WorkerError) as info:
        analyze(quits, X, mesh="d=2", pool=pool, use_cache=False)
    message = str(info.value)
    assert "for 2 devices died (exit status 70)" in message
    assert "the program raised SystemExit(5)" in message        # the cause, from its stderr
    assert _gone(pid)
    _next_request_works(pool)


def test_a_worker_that_closes_its_socket_but_lives_is_stopped_with_its_group(pool, tmp_path):
    pid = pool.warm(WorkerKey.fake_cpu(2)).pid
    child_file = tmp_path / "child.pid"

    def hangs_up(x):
        import subprocess
        import sys

        child = subprocess.Popen(["sleep", "60"])      # in the worker's process group
        child_file.write_text(str(child.pid))
        os.close(int(sys.argv[1]))                     # the worker's end of the socket
        time.sleep(60)
        return x

    with pytest.raises(WorkerError, match="closed its connection but did not exit"):
        analyze(hangs_up, X, mesh="d=2", pool=pool, use_cache=False)
    assert _gone(pid) and _gone(int(child_file.read_text()))
    _next_request_works(pool)


def test_a_missing_interpreter_is_a_worker_error():
    p = WorkerPool(python="/nonexistent/bin/python3")
    with pytest.raises(WorkerError, match="for 2 devices: the Python interpreter "
                                          "'/nonexistent/bin/python3' was not found"):
        p.warm(WorkerKey.fake_cpu(2))
    p.close()


def test_a_worker_that_dies_while_starting_shows_why(pool, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_no_such_flag=1")     # XLA refuses to start
    with pytest.raises(WorkerError) as info:
        pool.warm(WorkerKey.fake_cpu(2))
    assert "for 2 devices died" in str(info.value)
    assert "Unknown flag in XLA_FLAGS: --xla_no_such_flag=1" in str(info.value)
    monkeypatch.undo()
    _next_request_works(pool)


def test_running_out_of_file_descriptors_is_a_worker_error(pool):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    filler = []
    resource.setrlimit(resource.RLIMIT_NOFILE,
                       (max(int(fd) for fd in os.listdir("/proc/self/fd")) + 16, hard))
    try:
        with pytest.raises(OSError) as full:
            while True:
                filler.append(open(os.devnull))
        assert full.value.errno == errno.EMFILE
        with pytest.raises(WorkerError, match="run out of file descriptors"):
            pool.warm(WorkerKey.fake_cpu(2))
    finally:
        for f in filler:
            f.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    _next_request_works(pool)


def test_a_busy_worker_is_never_evicted():
    p = WorkerPool(timeout=30, max_workers=1)
    try:
        busy = WorkerKey.fake_cpu(2)
        p.warm(busy)
        replies = []
        sleeper = threading.Thread(target=lambda: replies.append(p.run(busy, Sleep(4))))
        sleeper.start()
        while True:              # until the sleep holds the worker
            with p._lock:
                if p._workers[busy].users:
                    break
            time.sleep(0.01)
        p.warm(WorkerKey.fake_cpu(3))      # over the limit while the other one is busy
        assert len(p._workers) == 2
        sleeper.join()
        assert isinstance(replies[0], Pong) and replies[0].devices == 2
        assert len(p._workers) == 1        # trimmed back once it was idle
    finally:
        p.close()


def test_a_worker_is_recycled_after_its_share_of_compiles():
    p = WorkerPool(timeout=30, recycle_after=2)
    key = WorkerKey.fake_cpu(2)
    try:
        first = p.warm(key).pid
        _next_request_works(p)
        assert p.warm(key).pid == first           # pings do not count
        _next_request_works(p)                    # the second compile: its worker retires
        assert _gone(first)
        assert p.warm(key).pid != first
    finally:
        p.close()


def test_more_busy_device_counts_than_warm_workers_all_finish():
    # The reported case, scaled down: more threads on distinct device counts than the pool
    # keeps warm. Each thread's worker must live until its request is answered.
    p = WorkerPool(timeout=60, max_workers=2)
    counts = (1, 2, 3)
    replies, errors = {}, []

    def use(n):
        try:
            p.warm(WorkerKey.fake_cpu(n))
            replies[n] = p.run(WorkerKey.fake_cpu(n), Sleep(1))
        except Exception as e:
            errors.append(e)

    try:
        threads = [threading.Thread(target=use, args=(n,)) for n in counts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert {n: r.devices for n, r in replies.items()} == {1: 1, 2: 2, 3: 3}
        assert len(p._workers) == 2
    finally:
        p.close()


def test_a_death_quotes_only_what_its_own_request_printed(pool):
    def reshard(a):     # XLA warns about this one (see test_compile_request.py)
        import jax
        from jax.sharding import PartitionSpec

        return jax.lax.with_sharding_constraint(a * 2, PartitionSpec(None, ("x", "y"), None))

    a = TensorSpec("a", (16, 16, 16), spec="y,None,x")
    assert analyze(reshard, a, mesh="x=2,y=4", pool=pool, use_cache=False).warnings
    with pytest.raises(WorkerError) as info:
        pool.run(WorkerKey.fake_cpu(8), Crash(exit_code=3))
    assert str(info.value) == ("the compile worker for 8 devices died (exit status 3); a fresh "
                               "worker will serve the next request.")
