"""The subreaper a compile worker runs under on Linux: `python -I reaper.py WORKER_ARGV...`.

A user's program runs inside the worker and may start processes that leave the worker's process
group (`setsid`, a daemon's double fork); killing the group misses them, and when their parent
dies Linux hands them to init, out of anyone's reach. This process declares itself a child
subreaper (prctl PR_SET_CHILD_SUBREAPER), starts the worker, and so becomes the parent of every
orphan of the worker's subtree. It ends all of them (SIGKILL, round after round, until it has no
child left) when the worker exits, whatever killed it; when the pool closes the reaper's stdin
(the pool stops the worker, or the pool's process died, even by SIGKILL); and on SIGTERM, SIGHUP
or SIGINT. It then exits as the worker did (the same exit status or signal), so the pool reads the
worker's end from its own child.

Only the standard library, and nothing of explorer: the script starts in a few milliseconds and
stays small (one single-threaded interpreter), and the worker is exec'd from a plain fork.
What it cannot do: outlive a SIGKILL sent to itself (the worker then gets SIGKILL too, from
PR_SET_PDEATHSIG, but its orphans go to init), or catch a process that joins another parent
through ptrace or the like. Elsewhere than Linux there is no subreaper; the pool runs the
worker directly (see pool.py).
"""

from __future__ import annotations

import ctypes
import os
import resource
import select
import signal
import sys
import time

SUPPORTED = sys.platform.startswith("linux")
# The environment variable through which the worker learns its reaper's pid (it then counts the
# reaper's other children, the orphans of its programs, as processes a program left running).
PID_VARIABLE = "EXPLORER_REAPER_PID"

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def command(python: str, worker: list[str]) -> list[str]:
    """The command line that runs the `worker` command line under a reaper. -I: the reaper
    imports nothing of the environment's (PYTHONPATH, user site), only the standard library."""
    return [python, "-I", os.path.abspath(__file__), *worker]


def children(*parents: int) -> dict[int, str]:
    """The children of the processes `parents`, each with its one-letter state ("S", "R", "Z"
    for a zombie, ...), from one pass over /proc. The command name in /proc/PID/stat may hold
    spaces and parentheses, so the fields are read after its last ')'. The worker runs this
    after every compile, before it answers: plain os.read, without a Python file object per
    process, takes 40% less (0.6 ms against 1.0 for 125 processes)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{entry}/stat", os.O_RDONLY)
            try:
                fields = os.read(fd, 4096).rsplit(b")", 1)[1].split()
            finally:
                os.close(fd)
        except (OSError, IndexError):     # the process ended while we read
            continue
        if int(fields[1]) in parents:
            found[int(entry)] = fields[0].decode()
    return found


def _prctl(option: int, value: int) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(option, value, 0, 0, 0) == 0


def _start(argv: list[str]) -> int:
    """Fork and exec the worker; its stdin is /dev/null (ours is the pool's pipe), and it gets
    SIGKILL if this process dies first."""
    me = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:
        for sig in (*_STOP_SIGNALS, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        # Ignored signals stay ignored across exec; Python ignores these two, subprocess
        # restores them for its children, and so does this.
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != me:     # the reaper died before the line above
            os._exit(1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.environ[PID_VARIABLE] = str(me)
        os.execvp(argv[0], argv)
    except BaseException as e:      # the forked child must never return into the reaper
        os.write(2, f"explorer reaper: could not start the worker: {e}\n".encode())
    os._exit(127)


def _reap_exited(worker: int) -> int | None:
    """Reap every child that has exited; the worker's wait status if it was among them."""
    status = None
    while True:
        try:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == worker:
            status = wait_status


def _end_every_child() -> None:
    """SIGKILL every child, reap it, and repeat until there is none. An orphan of the subtree
    comes to this process before its dead parent can be reaped, so when no child is left, no
    descendant is. Only our own unreaped children are signalled: their pids cannot have been
    reused."""
    while True:
        for pid in children(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:            # children left, none ended yet: SIGKILL takes a moment
            time.sleep(0.005)


def _exit_as(wait_status: int) -> None:
    """Exit as the worker did: its exit status, or killed by its signal (without a core file:
    the worker's crash is not the reaper's)."""
    if os.WIFSIGNALED(wait_status):
        sig = os.WTERMSIG(wait_status)
        _prctl(_PR_SET_DUMPABLE, 0)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if sig not in (signal.SIGKILL, signal.SIGSTOP):    # these two have no handler to reset
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)     # a signal whose default is to be ignored
    os._exit(os.WEXITSTATUS(wait_status))


def main(argv: list[str]) -> None:
    if not _prctl(_PR_SET_CHILD_SUBREAPER, 1):
        os.write(2, b"explorer reaper: not a child subreaper (prctl refused); processes that "
                    b"leave the worker's group may outlive it\n")
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    stop = []
    signal.signal(signal.SIGCHLD, lambda *_: None)     # a handler, so that it wakes the loop
    for sig in _STOP_SIGNALS:
        signal.signal(sig, lambda *_: stop.append(True))
    worker = _start(argv)
    for fd in map(int, os.listdir("/proc/self/fd")):    # the worker's socket is not ours to hold
        if fd > 2 and fd not in (wake_r, wake_w):
            try:
                os.close(fd)
            except OSError:    # the folder's own descriptor, closed already
                pass
    status = None
    while status is None and not stop:
        readable, _, _ = select.select([0, wake_r], [], [])
        if 0 in readable and not os.read(0, 4096):   # the pool closed our stdin, or died
            stop.append(True)
        if wake_r in readable:
            os.read(wake_r, 4096)
        status = _reap_exited(worker)
    _end_every_child()
    _exit_as(status if status is not None else signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv[1:])
