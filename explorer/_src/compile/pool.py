"""Compile workers: one warm process per WorkerKey, replaced when it crashes, hangs or has served
its share of compiles.

jax fixes its devices (the number of fake CPU devices) when it starts, so each key needs its own
process. Running compiles out of process also means a compiler crash or a runaway compile can
never take the caller (a notebook kernel, the CLI) down with it.

Requests travel over a socketpair as pickled explorer._src.compile.protocol messages: the program
as the caller lowered it (explorer/_src/compile/lowering.py) and its inputs. Both ends are our own
processes.

Each worker leads its own session (process group): a program that starts threads or processes
cannot keep a stopped worker alive, since the whole group is killed, and a Ctrl-C in the
caller's terminal does not reach the workers. On Linux the worker runs under a reaper
(explorer._src.compile.reaper), which also ends the processes that left the group (`setsid`, a
daemon's double fork) when the worker ends, is stopped, or this process dies; the pool stops a
worker by closing the reaper's stdin. A worker whose program left a thread or a process
running answers once more (`Retiring`) and is replaced.

A worker's end is noticed as it happens (a pidfd of its process is watched beside its
socket), not only when its socket closes, which a process it forked may hold open.

A worker left idle for the pool's `idle_timeout` is closed by the pool's closer thread, so that
a kernel nobody uses (an app page left open) does not hold a jax runtime per device count; the
next request for its key starts a new one, and `activity()` says so meanwhile.

A request's time limit covers the worker's run of the program alone: from the moment the
program is sent to the worker to its answer (the compile, and with `measure` the runs on the
chip too). The worker's start before it (jax loading) has a limit of its own, the larger of
the request's and START_LIMIT_S, so that a limit meant for a compile never stops a start; the
caller's trace before that has none. Where the caller records a request's phases
(`Phases`, `recording`), the pool marks each phase as it starts, and the limited phase's start
is the instant its deadline is counted from: a status that reads the phases counts on the very
clock the limit is enforced on.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import errno
import itertools
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait

from explorer._src.compile import reaper
from explorer._src.compile.protocol import (
    Backend,
    CompileRequest,
    CompileResult,
    Failure,
    Message,
    Ping,
    Pong,
    Reply,
    Retiring,
    WorkerKey,
)
from explorer._src.errors import (
    CompileAbandoned,
    CompileError,
    InputError,
    WorkerError,
    WorkerLost,
)

DEFAULT_TIMEOUT_S = 120.0
# The least time a worker's start (jax loading, seconds on a loaded machine) is given, whatever
# the limit of the compile that waits for it.
START_LIMIT_S = DEFAULT_TIMEOUT_S
MAX_DEVICES = 2048          # the CPU backend fails beyond 2048 fake devices (measured)
MAX_WARM_WORKERS = 4        # each warm worker holds a jax runtime (~0.2-0.5 GB)
# A worker is replaced after this many compiles, so that whatever jax or XLA keep per compile
# beyond the caches the worker clears every few compiles cannot pile up without bound.
RECYCLE_AFTER = 500
# A worker idle this long is closed: each holds a jax runtime (0.2-0.6 GB, docs/reliability.md,
# "Under load"), and a page left open would hold it until its kernel is culled. Starting one again
# costs the next request a few seconds, which after 5 idle minutes is little.
DEFAULT_IDLE_TIMEOUT_S = 300.0
# The environment variable that sets default_pool()'s idle timeout (seconds; 0 or off: never).
IDLE_TIMEOUT_VARIABLE = "EXPLORER_WORKER_IDLE_S"
_EXIT_GRACE_S = 2.0         # how long a worker that closed its socket gets to exit by itself
_STOP_GRACE_S = 5.0         # how long a reaper gets to end its worker's processes when asked
_POLL_S = 0.1               # how often a worker's end is looked for where no pidfd tells it
# Whether workers run under a reaper (Linux only; a module constant so that the tests can run
# the other platforms' way too).
REAPED = reaper.SUPPORTED


# The phases of a request, in the order they come; the pool marks STARTING, COMPILING (or
# MEASURING) and READING, the caller TRACING (the program traced and lowered in its process, and
# the cache looked up, before the pool is asked).
TRACING = "tracing"
STARTING = "starting the worker"
COMPILING = "compiling"
MEASURING = "compiling and running on the chip"   # a measured run: the worker does both at once
READING = "reading the result"
# Each phase's name in the past, for "(worker started in 2.5 s, traced in 0.8 s)".
DONE = {TRACING: "traced in", STARTING: "worker started in", COMPILING: "compiled in",
        MEASURING: "compiled and ran on the chip in", READING: "read in"}


@dataclass(frozen=True)
class PhaseNow:
    """Where a request stands: the phase it is in (`name`) and its seconds so far (`took_s`),
    the phases it finished before (name, seconds, in order), and the time limit of the phase
    it is in (None: that phase has none)."""

    name: str
    took_s: float
    done: tuple[tuple[str, float], ...]
    limit_s: float | None


class Phases:
    """The phases of one request as they start, on one clock (`clock`, time.monotonic unless a
    test gives its own): `enter(name)` ends the phase before it. `limit_s` is the time limit of
    the phase that has one (COMPILING or MEASURING), counted from that phase's start. Written
    by the thread that runs the request, read by another (the status): each mark is one
    append, and a reader copies the list before it looks."""

    def __init__(self, first: str = TRACING, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.marks: list[tuple[str, float]] = [(first, clock())]
        self.limit_s: float | None = None
        self.limited: str | None = None     # the phase the limit covers, once it has begun

    def enter(self, name: str, limit_s: float | None = None, at: float | None = None) -> float:
        """Phase `name` starts now (or at `at`, a reading of `clock`); `limit_s`: its time
        limit. Returns its start."""
        at = self.clock() if at is None else at
        if limit_s is not None:
            self.limit_s, self.limited = limit_s, name
        self.marks.append((name, at))
        return at

    def seconds(self, name: str) -> float:
        """The seconds spent in phase `name` so far (0 where it never began)."""
        marks, now = list(self.marks), self.clock()
        ends = [at for _, at in marks[1:]] + [now]
        return sum(end - at for (n, at), end in zip(marks, ends, strict=True) if n == name)

    def now(self) -> PhaseNow:
        marks, now = list(self.marks), self.clock()
        done = tuple((name, end - at) for (name, at), (_, end) in itertools.pairwise(marks))
        name, at = marks[-1]
        return PhaseNow(name, now - at, done, self.limit_s if name == self.limited else None)


_RECORDING: contextvars.ContextVar[Phases | None] = contextvars.ContextVar(
    "explorer_compile_phases", default=None)


@contextlib.contextmanager
def recording(phases: Phases) -> Iterator[Phases]:
    """Within the block, on this thread, the pool marks its requests' phases in `phases`."""
    token = _RECORDING.set(phases)
    try:
        yield phases
    finally:
        _RECORDING.reset(token)


def recorded_phases() -> Phases | None:
    """The phases this thread's requests are recorded in (`recording`), or None."""
    return _RECORDING.get()


_ABANDONED: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar(
    "explorer_compile_abandoned", default=None)


@contextlib.contextmanager
def abandoned_when(abandoned: Callable[[], bool]) -> Iterator[None]:
    """Within the block, on this thread, a request to the pool is given up once `abandoned()`
    comes true: one waiting for its worker is never sent, and the worker of one in flight is
    stopped (a compile cannot be interrupted otherwise), so that it does not hold the worker,
    and a core, until its own time limit for a result no one will read. The request raises
    CompileAbandoned."""
    token = _ABANDONED.set(abandoned)
    try:
        yield
    finally:
        _ABANDONED.reset(token)


def _worker_env(key: WorkerKey) -> dict:
    """The environment of the worker for `key`: its fake CPU device count, or the machine's own
    devices for Backend.REAL."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    flags = [f for f in env.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    if key.backend is not Backend.REAL:
        flags.append(f"--xla_force_host_platform_device_count={key.devices}")
        env["JAX_PLATFORMS"] = "cpu"
    if key.backend is Backend.TPU_AOT:
        # libtpu lets one process hold its lock file; a second TPU worker (another kernel, a
        # test run beside this one) would fail with "ABORTED ... libtpu multi-process
        # lockfile". Compiling ahead of time touches no TPU, so sharing is safe (measured).
        env.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    if key.backend is Backend.GPU_AOT:
        # The CUDA plugin checks its CUDA libraries against the driver's by calling cuInit,
        # which fails (CUDA error 303) on a machine with no GPU; an ahead-of-time compile needs
        # no driver. JAX_PLATFORMS=cpu (above) keeps jax from opening a GPU client at all.
        env["JAX_SKIP_CUDA_CONSTRAINTS_CHECK"] = "1"
    env["XLA_FLAGS"] = " ".join(flags)
    return env


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when process `pid` ends (Linux 5.3 and later), or None
    where there is none: the pool then looks every _POLL_S."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _start_error(key: WorkerKey, python: str, e: OSError) -> WorkerError:
    what = f"could not start the compile worker for {key.describe()}"
    if isinstance(e, FileNotFoundError):
        return WorkerError(f"{what}: the Python interpreter {python!r} was not found "
                           f"({e.strerror}); reinstall the environment or run from a Python "
                           "that exists")
    if e.errno in (errno.EMFILE, errno.ENFILE):
        return WorkerError(f"{what}: this process has run out of file descriptors ({e}); "
                           "close files and sockets it no longer needs, or raise the limit "
                           "(ulimit -n)")
    return WorkerError(f"{what}: {type(e).__name__}: {e}")


# Lines of a worker's output that never explain a death (jax and absl start-up chatter).
_NOISE = ("found in sys.modules after import of package", "warn(RuntimeWarning(msg))",
          "All log messages before absl::InitializeLog()")


# What a signal that ended a worker usually means.
_SIGNAL_HINTS = {
    signal.SIGKILL: "sent by the kernel's out-of-memory killer or by another process; if "
                    "memory ran out, shrink the program or the mesh",
    signal.SIGSEGV: "a crash inside jax or XLA",
    signal.SIGABRT: "jax or XLA aborted (a failed check inside the compiler)",
    signal.SIGBUS: "a crash inside jax or XLA",
}


def _how_it_ended(status: int) -> str:
    """'exit status 3', or 'killed by SIGKILL, ...' with what the signal usually means."""
    if status >= 0:
        return f"exit status {status}"
    try:
        sig = signal.Signals(-status)
    except ValueError:
        return f"killed by signal {-status}"
    hint = _SIGNAL_HINTS.get(sig)
    return f"killed by {sig.name}, {hint}" if hint else f"killed by {sig.name}"


class Worker:
    """One child process serving one WorkerKey."""

    def __init__(self, key: WorkerKey, python: str | None = None):
        self.key = key
        self.what = key.describe()
        self.lock = threading.Lock()     # one request at a time
        self.users = 0                   # requests that hold or wait for it (under pool lock)
        self.compiles = 0
        self.closed = False
        self.retiring = False            # its program left something running: replace it
        self.idle_since: float | None = None   # monotonic time of its last request, while idle
        python = python or sys.executable
        opened = []
        try:
            parent_sock, child_sock = socket.socketpair()
            opened += [parent_sock, child_sock]
            self._log = tempfile.TemporaryFile(mode="w+b")
            opened.append(self._log)
            command = [python, "-m", "explorer._src.compile.worker", str(child_sock.fileno()),
                       key.label()]
            self.proc = subprocess.Popen(
                reaper.command(python, command) if REAPED else command,
                pass_fds=(child_sock.fileno(),), env=_worker_env(key),
                # A reaper's stdin is its stop signal: closed by kill(), or by the kernel when
                # this process dies.
                stdin=subprocess.PIPE if REAPED else subprocess.DEVNULL,
                stdout=self._log, stderr=self._log, start_new_session=True)
        except OSError as e:
            for f in opened:
                f.close()
            raise _start_error(key, python, e) from None
        child_sock.close()
        self._ended = _pidfd(self.proc.pid)
        self.conn = Connection(parent_sock.detach())
        self._request_start = 0     # where the current request's output starts in the log
        self._answered = 0

    def exit_status(self) -> int | None:
        """The exit status (negative: the signal) once the process has ended, else None.
        Peeks without reaping, so that the pid, and with it the process group, stays ours
        until kill() has stopped every process of the group."""
        if self.proc.returncode is not None:
            return self.proc.returncode
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return self.proc.poll()
        if info is None:
            return None
        return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status

    def alive(self) -> bool:
        return not self.closed and self.exit_status() is None

    @property
    def starting(self) -> bool:
        """Whether it has not answered yet: jax is still loading in it."""
        return not self.closed and self._answered == 0

    def _log_size(self) -> int:
        try:
            return self._log.seek(0, os.SEEK_END)
        except (OSError, ValueError):
            return 0

    def log_tail(self, lines: int = 8) -> str:
        """The last lines the worker wrote during the current request that could explain what
        happened to it (not the warnings of earlier compiles, nor start-up chatter)."""
        try:
            self._log.seek(max(self._request_start, self._log_size() - 65536))
            text = self._log.read().decode(errors="replace")
        except (OSError, ValueError):
            return ""
        kept = [ln for ln in text.splitlines()
                if ln.strip() and not any(n in ln for n in _NOISE)]
        return "\n".join(kept[-lines:])

    def request(self, message: Message, timeout: float, since: float | None = None,
                abandoned: Callable[[], bool] | None = None) -> Reply:
        """Send `message` and wait for its answer, at most `timeout` seconds from `since` (a
        time.monotonic() reading; None: now, as it is sent), and only while `abandoned()` is
        false: else the worker is stopped and CompileAbandoned raised."""
        if self._answered:          # what it printed while starting belongs to the first
            self._request_start = self._log_size()
        since = time.monotonic() if since is None else since
        try:
            self.conn.send(message)
            answered = self._answer_or_end(since + timeout, abandoned)
            if answered is None:
                self.kill()
                raise CompileAbandoned(f"the compile on {self.what} was given up (its result "
                                       "was no longer wanted) and its worker was stopped")
            if not answered:
                self.kill()
                if isinstance(message, Ping) and not self._answered:    # its first: starting
                    raise WorkerError(
                        f"the compile worker for {self.what} did not start within "
                        f"{timeout:g} s and was stopped; the machine may be short of memory "
                        "or CPU")
                raise WorkerError(
                    f"compile took longer than the {timeout:g} s limit on {self.what} "
                    "and its worker was stopped; simplify the program, shrink the mesh "
                    "or raise the timeout")
            reply = self.conn.recv()
        except (EOFError, OSError):
            raise self._lost() from None
        self._answered += 1
        if isinstance(reply, Retiring):
            self.retiring = True
            reply = reply.reply
        return reply

    def _answer_or_end(self, deadline: float, abandoned: Callable[[], bool] | None = None
                       ) -> bool | None:
        """Wait until the worker answers (True), time.monotonic() reaches `deadline` (False) or
        `abandoned()` comes true (None, looked at every _POLL_S); raise the WorkerError of its
        end if the worker ends first, though a process it forked may still hold its socket
        open. An answer sent just before the end is read first."""
        watched = [self.conn] if self._ended is None else [self.conn, self._ended]
        polled = self._ended is None or abandoned is not None
        while (left := deadline - time.monotonic()) > 0:
            ready = wait(watched, min(left, _POLL_S) if polled else left)
            if self.conn in ready:
                return True
            if self.exit_status() is not None:
                raise self._lost()
            if abandoned is not None and abandoned():
                return None
        return False

    def _lost(self) -> WorkerError:
        """The error for a worker whose connection broke; stops what is left of it."""
        status = self.exit_status()
        waited = 0.0
        while status is None and waited < _EXIT_GRACE_S:
            time.sleep(0.05)
            waited += 0.05
            status = self.exit_status()
        tail = self.log_tail()
        self.kill()
        said = f" Its last output:\n{tail}" if tail else ""
        if status is None:
            return WorkerLost(
                f"the compile worker for {self.what} closed its connection but did not exit "
                "(a thread or process the program started may have kept it alive); it was "
                "stopped with every process it started, and a fresh worker will serve the next "
                f"request.{said}")
        return WorkerLost(f"the compile worker for {self.what} died ({_how_it_ended(status)}); "
                           f"a fresh worker will serve the next request.{said}")

    def ask_to_stop(self) -> None:
        """Ask the reaper, if there is one, to end the worker and all it started (see kill);
        returns at once, so that several workers can stop at the same time."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def kill(self) -> None:
        """Stop the worker and every process it started, and release its files. A reaper is
        asked first (it also ends the processes that left the worker's group); where there is
        none, or it has not finished within _STOP_GRACE_S, the worker's process group is
        killed."""
        if self.closed:
            return
        self.closed = True
        self.ask_to_stop()
        if self.proc.stdin is not None:
            try:
                self.proc.wait(timeout=_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)   # its session: pgid == pid
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
        if self._ended is not None:
            os.close(self._ended)
        self.conn.close()
        self._log.close()


@contextlib.contextmanager
def _turn(worker: Worker, abandoned: Callable[[], bool] | None) -> Iterator[None]:
    """Hold `worker`'s lock (its turn: one request at a time), waited for only while
    `abandoned()` is false, looked at every _POLL_S; else CompileAbandoned."""
    if abandoned is None:
        worker.lock.acquire()
    else:
        while not worker.lock.acquire(timeout=_POLL_S):
            if abandoned():
                raise CompileAbandoned(f"a compile waiting for the worker for {worker.what} "
                                       "was given up before it was sent")
    try:
        yield
    finally:
        worker.lock.release()


def _stop_all(workers: list[Worker]) -> None:
    """Stop `workers`: every reaper asked at once, then each waited for (see Worker.kill)."""
    for worker in workers:
        worker.ask_to_stop()
    for worker in workers:
        worker.kill()


def _checked_idle_timeout(value) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise InputError(f"idle_timeout={value!r} is not a number of seconds above 0; give one "
                         "(e.g. 300) or None to keep idle workers until the pool closes")
    return float(value)


class WorkerPool:
    """Warm workers keyed by WorkerKey, at most `max_workers` of them idle at a time.

    Beyond the limit the least recently used idle worker is closed. A busy worker is never
    closed to make room: while all are busy the pool runs over the limit, and trims back when
    they finish. A worker is replaced after `recycle_after` compiles. A worker idle for
    `idle_timeout` seconds is closed (None: kept until the pool closes); the next request for
    its key starts a new one."""

    def __init__(self, timeout: float = DEFAULT_TIMEOUT_S, max_workers: int = MAX_WARM_WORKERS,
                 recycle_after: int = RECYCLE_AFTER, python: str | None = None,
                 idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT_S):
        self.timeout = timeout
        self.max_workers = max_workers
        self.recycle_after = recycle_after
        self.python = python            # the interpreter the workers run; None: this one
        self.idle_timeout = _checked_idle_timeout(idle_timeout)
        self._workers: OrderedDict[WorkerKey, Worker] = OrderedDict()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)   # a worker went idle, or the pool closed
        self._closer: threading.Thread | None = None

    def _checkout(self, key: WorkerKey) -> Worker:
        with self._lock:
            worker = self._workers.pop(key, None)
            if worker is not None and not worker.alive() and worker.users == 0:
                worker.kill()
                worker = None
            elif worker is not None and not worker.alive():
                worker = None     # its current user reports the death; the next gets a new one
            if worker is None:
                worker = Worker(key, self.python)
            worker.users += 1
            worker.idle_since = None
            self._workers[key] = worker     # re-insert: most recently used last
            self._trim()
            return worker

    def _checkin(self, worker: Worker) -> None:
        with self._lock:
            worker.users -= 1
            current = self._workers.get(worker.key) is worker
            worn = worker.compiles >= self.recycle_after
            # A retiring worker has exited already: the requests waiting for it must not get it.
            if worker.retiring or (worker.users == 0 and (worn or worker.closed)):
                worker.kill()
                if current:
                    del self._workers[worker.key]
            elif current:
                self._workers.move_to_end(worker.key)     # most recently used last
                if worker.users == 0:
                    worker.idle_since = time.monotonic()
                    self._watch_idle()
            self._trim(keep=worker)

    def _watch_idle(self) -> None:
        """Make sure the closer thread runs and sees the worker that just went idle (called
        under the pool lock). The thread ends when no worker is left; a fork's child, where it
        does not run, starts its own."""
        if self.idle_timeout is None:
            return
        if self._closer is None or not self._closer.is_alive():
            self._closer = threading.Thread(target=self._close_idle_workers, daemon=True,
                                            name="explorer: close idle compile workers")
            self._closer.start()
        self._changed.notify_all()

    def _close_idle_workers(self) -> None:
        """The closer thread: close each worker once it has been idle for idle_timeout, until
        the pool holds no worker. The workers are stopped outside the lock, so that requests
        for other keys (or a new worker for the same key) do not wait for them."""
        with self._lock:
            while self._workers and self._closer is threading.current_thread():
                now = time.monotonic()
                idle = [w for w in self._workers.values()
                        if w.users == 0 and w.idle_since is not None]
                expired = [w for w in idle if now - w.idle_since >= self.idle_timeout]
                if expired:
                    for worker in expired:
                        del self._workers[worker.key]
                    self._lock.release()
                    try:
                        _stop_all(expired)
                    finally:
                        self._lock.acquire()
                    continue
                due = min((w.idle_since + self.idle_timeout for w in idle), default=None)
                self._changed.wait(None if due is None else due - now)
            if self._closer is threading.current_thread():
                self._closer = None

    def activity(self) -> str:
        """What the pool is doing, for a status line: 'starting a compile worker for 8
        devices' while a worker's jax loads (the first request after its start, or after an
        idle worker was closed), else 'compiling'."""
        with self._lock:
            starting = [w.what for w in self._workers.values() if w.users and w.starting]
        if not starting:
            return "compiling"
        return f"starting a compile worker for {', '.join(starting)}"

    def _trim(self, keep: Worker | None = None) -> None:
        """Close the least recently used idle workers beyond the limit. A busy worker is never
        closed, nor `keep`, the one that just served a request: while the others are busy the
        pool stays over the limit, and trims back as they finish."""
        excess = len(self._workers) - self.max_workers
        idle = [k for k, w in self._workers.items() if w.users == 0 and w is not keep]
        for key in idle[:max(excess, 0)]:
            self._workers.pop(key).kill()

    def run(self, key: WorkerKey, message: Message, timeout: float | None = None
            ) -> CompileResult | Pong:
        """Send `message` to the worker for `key`; raise CompileError if the program failed,
        WorkerError if the worker could not answer."""
        timeout = self.timeout if timeout is None else timeout
        asked = time.monotonic()
        phases = recorded_phases() if not isinstance(message, Ping) else None
        abandoned = _ABANDONED.get()
        while True:
            worker = self._checkout(key)
            started_s = 0.0
            try:
                with _turn(worker, abandoned):
                    if worker.closed:      # stopped while this request waited its turn
                        continue
                    if worker.starting and not isinstance(message, Ping):
                        # Its start (jax loading) apart from the request, so that activity()
                        # can tell a worker starting from a compile running, and the Report
                        # can say how long the compile waited for it; its own limit.
                        if phases is not None:
                            phases.enter(STARTING)
                        worker.request(Ping(), max(timeout, START_LIMIT_S),
                                       abandoned=abandoned)
                        started_s = time.monotonic() - asked
                    # The limit's clock starts here, and the phase's with it: the same reading.
                    since = time.monotonic()
                    if phases is not None:
                        measured = isinstance(message, CompileRequest) and message.measure
                        phases.enter(MEASURING if measured else COMPILING, timeout,
                                     at=since if phases.clock is time.monotonic else None)
                    reply = worker.request(message, timeout, since, abandoned)
                    if not isinstance(message, Ping):    # it ran a program (worker.py)
                        worker.compiles += 1
                    if phases is not None:
                        phases.enter(READING)
            finally:
                self._checkin(worker)
            if isinstance(reply, Failure):
                raise CompileError(reply.error)
            if isinstance(reply, CompileResult) and started_s:
                reply = replace(reply, worker_start_s=started_s)
            return reply

    def ready(self, key: WorkerKey) -> bool:
        """Whether a worker for `key` is up with jax loaded, so that a request for it starts no
        process (the app waits for a burst of edits to end before one that would)."""
        with self._lock:
            worker = self._workers.get(key)
            return worker is not None and not worker.starting and worker.alive()

    def compile(self, key: WorkerKey, request: CompileRequest, timeout: float | None = None
                ) -> CompileResult:
        return self.run(key, request, timeout)

    def warm(self, key: WorkerKey) -> Pong:
        """Start (or keep) the worker for `key` and wait until jax is loaded in it."""
        return self.run(key, Ping())

    def close(self) -> None:
        with self._lock:
            _stop_all(list(self._workers.values()))
            self._workers.clear()
            self._changed.notify_all()      # the closer thread sees no worker left and ends


_POOL: WorkerPool | None = None
_POOL_LOCK = threading.Lock()


def default_pool() -> WorkerPool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = WorkerPool(idle_timeout=idle_timeout_from_environment())
            # Workers lead their own sessions, so nothing else stops them when we exit.
            atexit.register(_POOL.close)
        return _POOL


def idle_timeout_from_environment() -> float | None:
    """default_pool()'s idle timeout: $EXPLORER_WORKER_IDLE_S seconds (0 or off: never), else
    DEFAULT_IDLE_TIMEOUT_S."""
    text = os.environ.get(IDLE_TIMEOUT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_IDLE_TIMEOUT_S
    if text.lower() in ("0", "off", "never", "none"):
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < math.inf:
        raise InputError(f"{IDLE_TIMEOUT_VARIABLE}={text!r} is not a number of seconds; give "
                         "one above 0 (e.g. 300), or 0 or off to keep idle workers")
    return seconds
