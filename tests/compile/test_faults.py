"""Worker faults: each one gives the caller a WorkerError that says what happened, and the next
request is served by a fresh worker. What a program leaves behind (threads, child processes,
processes in sessions of their own) cannot reach the next request, nor outlive the pool.

A program runs in a worker only in these tests (tests/_support/in_worker.py, the worker's test
hook, traces it there): a user's function and a built-in workload's program are traced in the
caller's process, and the worker compiles their module."""

import _thread
import errno
import os
import resource
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from explorer import TensorSpec, WorkerError, WorkerPool
from explorer._src.compile import pool as pool_module
from explorer._src.compile.protocol import Ping, WorkerKey
from explorer._src.errors import WorkerLost

SUPPORT = str(Path(__file__).resolve().parents[1] / "_support")
sys.path.insert(0, SUPPORT)
from in_worker import analyze_in_worker, run_in_workers  # noqa: E402
from worker_faults import Crash, Sleep  # noqa: E402

# Each fault test starts, breaks and replaces real worker processes: seconds apiece.
pytestmark = pytest.mark.slow

X = TensorSpec("x", (8,), spec="d")


@pytest.fixture(autouse=True)
def _hook(monkeypatch):
    """Every worker a test starts runs programs and answers Crash and Sleep (in_worker.py)."""
    run_in_workers(monkeypatch)


@pytest.fixture
def pool():
    p = WorkerPool(timeout=30)
    yield p
    p.close()


def _sum(x):
    return x.sum()


def _sums_over(report, devices=2) -> bool:
    """Whether `report` is that of x.sum() over `devices` devices: one all-reduce over all."""
    return [(c.kind, c.group_size) for c in report.collectives] == [("all-reduce", devices)]


def _next_request_works(pool, devices=2):
    assert _sums_over(analyze_in_worker(_sum, X, mesh={"d": devices}, pool=pool), devices)


def _state(pid: int) -> str | None:
    """The one-letter state of `pid` ("R", "S", "Z", ...), or None if there is no such process.
    The command name in /proc/PID/stat may hold spaces and parentheses, so the fields are read
    after its last ')'."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def _gone(pid: int, within: float = 5.0) -> bool:
    """Whether process `pid` has ended within `within` seconds (a zombie waiting for its reaper
    counts as ended)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if _state(pid) in (None, "Z"):
            return True
        time.sleep(0.05)
    return False


def _running(*argv: str) -> list[int]:
    """The living processes (zombies left out) whose command line is exactly `argv`."""
    wanted = "\0".join(argv) + "\0"
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline") as f:
                if f.read() == wanted and _state(int(entry)) not in (None, "Z"):
                    found.append(int(entry))
        except (OSError, ValueError):      # not a process, or one that just ended
            continue
    return found


def _none_running(*argv: str, within: float = 5.0) -> bool:
    """Whether, within `within` seconds, no living process runs exactly `argv`."""
    deadline = time.monotonic() + within
    while _running(*argv):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _when_written(path, within: float = 120.0) -> list[int]:
    """The whole lines of numbers written to `path` (a program in a worker writes them), once
    there are any; [] if none came within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().endswith("\n"):
            return [int(n) for n in path.read_text().split()]
        time.sleep(0.02)
    return []


def _note_pid(path) -> None:
    """Append this process's pid to `path` (called in a worker, by the program)."""
    with path.open("a") as f:
        f.write(f"{os.getpid()}\n")


def _kill_once_noted(pids) -> None:
    """SIGKILL the worker once its program has noted its pid in `pids` (so that the signal
    comes while the program runs, however long the request took to get there)."""
    def kill():
        for pid in _when_written(pids):
            os.kill(pid, signal.SIGKILL)

    threading.Thread(target=kill, daemon=True).start()


def test_sigkill_mid_compile_names_the_signal(pool, tmp_path):
    pids = tmp_path / "pids"

    def slow(x):            # still being traced when the signal comes
        _note_pid(pids)
        time.sleep(30)
        return x

    _kill_once_noted(pids)
    # A death is WorkerLost (a WorkerError): the same request may go to a fresh worker.
    with pytest.raises(WorkerLost, match=r"for 2 devices died \(killed by SIGKILL, sent by "
                                         "the kernel's out-of-memory killer"):
        analyze_in_worker(slow, X, mesh="d=2", pool=pool)
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
        analyze_in_worker(quits, X, mesh="d=2", pool=pool)
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
        analyze_in_worker(hangs_up, X, mesh="d=2", pool=pool)
    assert _gone(pid) and _gone(int(child_file.read_text()))
    _next_request_works(pool)


def test_a_missing_interpreter_is_a_worker_error():
    p = WorkerPool(python="/nonexistent/bin/python3")
    with pytest.raises(WorkerError, match="for 2 devices: the Python interpreter "
                                          "'/nonexistent/bin/python3' was not found"):
        p.warm(WorkerKey.fake_cpu(2))
    p.close()


def test_a_worker_that_dies_while_starting_shows_why(pool, monkeypatch):
    with monkeypatch.context() as m:
        m.setenv("XLA_FLAGS", "--xla_no_such_flag=1")     # XLA refuses to start
        with pytest.raises(WorkerError) as info:
            pool.warm(WorkerKey.fake_cpu(2))
    assert "for 2 devices died" in str(info.value)
    assert "Unknown flag in XLA_FLAGS: --xla_no_such_flag=1" in str(info.value)
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


def test_a_busy_worker_is_never_evicted(tmp_path):
    # The busy request holds its worker until the test lets it go (a fixed sleep could end
    # before the second worker has started, on a loaded machine).
    p = WorkerPool(timeout=120, max_workers=1)
    release = tmp_path / "release"

    def holds_until_released(x):
        while not release.exists():
            time.sleep(0.01)
        return x.sum()

    try:
        busy = WorkerKey.fake_cpu(2)
        p.warm(busy)
        reports = []
        holder = threading.Thread(target=lambda: reports.append(
            analyze_in_worker(holds_until_released, X, mesh="d=2", pool=p)))
        holder.start()
        while True:              # until the request holds the worker
            with p._lock:
                if p._workers[busy].users:
                    break
            time.sleep(0.01)
        p.warm(WorkerKey.fake_cpu(3))      # over the limit while the other one is busy
        assert len(p._workers) == 2
        release.touch()
        holder.join()
        assert _sums_over(reports[0])
        assert len(p._workers) == 1        # trimmed back once it was idle
    finally:
        release.touch()
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
    assert analyze_in_worker(reshard, a, mesh="x=2,y=4", pool=pool).warnings
    with pytest.raises(WorkerError) as info:
        pool.run(WorkerKey.fake_cpu(8), Crash(exit_code=3))
    assert str(info.value) == ("the compile worker for 8 devices died (exit status 3); a fresh "
                               "worker will serve the next request.")


@pytest.mark.parametrize("strike", ["os._exit(4)", "_thread.interrupt_main()"])
def test_a_thread_a_program_leaves_running_cannot_fail_the_next_request(pool, tmp_path, strike):
    # The thread strikes once the next request has started (not after a fixed delay), so that
    # it falls inside that request however loaded the machine is.
    started = tmp_path / "the next request started"
    pids = tmp_path / "pids"

    def leaves_a_thread(x):
        def strike_later():
            while not started.exists():
                time.sleep(0.01)
            if strike == "os._exit(4)":
                os._exit(4)
            _thread.interrupt_main()

        threading.Thread(target=strike_later, daemon=True).start()
        _note_pid(pids)
        return x.sum()

    def innocent(x):
        _note_pid(pids)
        started.touch()
        time.sleep(2)          # a thread polling every 10 ms would strike in here
        return x.sum()

    assert _sums_over(analyze_in_worker(leaves_a_thread, X, mesh="d=2", pool=pool))
    assert _sums_over(analyze_in_worker(innocent, X, mesh="d=2", pool=pool))
    left_the_thread, served_next = _when_written(pids)
    assert served_next != left_the_thread and _gone(left_the_thread)


def test_a_thread_that_ends_before_its_program_returns_keeps_the_worker(pool):
    pid = pool.warm(WorkerKey.fake_cpu(2)).pid

    def waits_for_its_thread(x):
        helper = threading.Thread(target=time.sleep, args=(0.1,))
        helper.start()
        helper.join()
        return x.sum()

    assert _sums_over(analyze_in_worker(waits_for_its_thread, X, mesh="d=2", pool=pool))
    assert pool.warm(WorkerKey.fake_cpu(2)).pid == pid


def test_a_child_in_its_own_session_ends_with_its_worker_and_the_pool(pool, tmp_path):
    pids = tmp_path / "pids"

    def starts_a_session(x):
        subprocess.Popen(["setsid", "sleep", "302"])
        _note_pid(pids)
        return x.sum()

    assert _sums_over(analyze_in_worker(starts_a_session, X, mesh="d=2", pool=pool))
    pool.close()
    (worker,) = _when_written(pids)
    assert _none_running("sleep", "302") and _gone(worker)


def test_a_child_in_its_own_session_ends_when_its_worker_crashes(pool):
    def starts_a_session_then_crashes(x):
        subprocess.Popen(["setsid", "sleep", "303"])
        os._exit(3)

    with pytest.raises(WorkerError, match=r"for 2 devices died \(exit status 3\)"):
        analyze_in_worker(starts_a_session_then_crashes, X, mesh="d=2", pool=pool)
    assert _none_running("sleep", "303")
    _next_request_works(pool)


def test_a_child_in_its_own_session_ends_when_its_worker_is_killed(pool, tmp_path):
    pids = tmp_path / "pids"

    def starts_a_session_then_waits(x):
        subprocess.Popen(["setsid", "sleep", "304"])
        _note_pid(pids)
        time.sleep(60)
        return x

    _kill_once_noted(pids)
    with pytest.raises(WorkerError, match=r"for 2 devices died \(killed by SIGKILL"):
        analyze_in_worker(starts_a_session_then_waits, X, mesh="d=2", pool=pool)
    assert _none_running("sleep", "304")
    _next_request_works(pool)


def test_an_orphan_of_the_program_ends_when_its_program_returns(pool):
    def orphans_a_child(x):
        # sh exits at once; its background sleep, in a session of its own, is orphaned.
        subprocess.run(["sh", "-c", "setsid sleep 305 &"], check=True)
        return x.sum()

    assert _sums_over(analyze_in_worker(orphans_a_child, X, mesh="d=2", pool=pool))
    assert _none_running("sleep", "305")
    _next_request_works(pool)


@pytest.mark.parametrize("reaped", [True, False], ids=["under a reaper", "without one"])
def test_a_worker_death_is_noticed_while_a_forked_child_holds_its_socket(
        tmp_path, monkeypatch, reaped):
    # Without a reaper (as on macOS) the pool notices the worker's exit itself; the limit is
    # far above what noticing takes, so a pool that waited for the socket to close would fail
    # with the time limit's message instead.
    monkeypatch.setattr(pool_module, "REAPED", reaped)
    pool = WorkerPool(timeout=60)
    pids = tmp_path / "pids"

    def forks_then_exits(x):
        child = os.fork()
        if child == 0:          # holds the worker's socket, and lives on
            time.sleep(600)
            os._exit(0)
        with pids.open("w") as f:
            f.write(f"{child}\n")
        os._exit(4)

    try:
        with pytest.raises(WorkerError, match=r"for 2 devices died \(exit status 4\)"):
            analyze_in_worker(forks_then_exits, X, mesh="d=2", pool=pool)
        (child,) = _when_written(pids)
        assert _gone(child)
        _next_request_works(pool)
    finally:
        pool.close()


OWNER = textwrap.dedent("""
    import os, subprocess, sys, time
    from explorer import TensorSpec, WorkerPool

    PIDS = sys.argv[1]      # a global of __main__: it travels with the function
    sys.path.insert(0, sys.argv[2])
    from in_worker import analyze_in_worker     # its hook is set: the test's environment

    def hangs(x):
        subprocess.Popen(["setsid", "sleep", "306"])
        with open(PIDS, "w") as f:
            f.write(f"{os.getpid()} {os.getppid()}\\n")
        time.sleep(600)
        return x

    analyze_in_worker(hangs, TensorSpec("x", (8,), spec="d"), mesh="d=2",
                      pool=WorkerPool(timeout=900))
""")


def test_a_process_killed_while_its_pool_compiles_leaves_no_process_behind(tmp_path):
    # A notebook kernel killed mid-compile: no atexit runs, nothing closes the pool.
    script, pids = tmp_path / "owner.py", tmp_path / "pids"
    script.write_text(OWNER)
    owner = subprocess.Popen([sys.executable, str(script), str(pids), SUPPORT])
    try:
        (worker, worker_parent) = _when_written(pids)
    finally:
        owner.kill()
        owner.wait()
    assert _gone(worker, within=10) and _gone(worker_parent)
    assert _none_running("sleep", "306")
