"""Compile workers: one warm process per device count, replaced when it crashes or hangs.

jax fixes the number of fake CPU devices when it starts, so each device count needs its own
process. Running compiles out of process also means a compiler crash or a runaway compile can
never take the caller (a notebook kernel, the CLI) down with it.

Requests travel over a socketpair as pickled messages; the user's function is serialized with
cloudpickle so closures and notebook-defined functions work. Both ends are our own processes.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
from multiprocessing.connection import Connection

from explorer.errors import CompileError, WorkerError

DEFAULT_TIMEOUT_S = 120.0
MAX_DEVICES = 2048          # the CPU backend fails beyond 2048 fake devices (measured)
MAX_WARM_WORKERS = 4        # each warm worker holds a jax runtime (~0.2-0.5 GB)


def _worker_env(key: int | str) -> dict:
    """The environment of the worker for `key`: a fake CPU device count, "tpu" (one CPU device;
    TPU topologies bring their own devices) or "real" (the machine's own accelerators)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    flags = [f for f in env.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    if key != "real":
        flags.append(f"--xla_force_host_platform_device_count={1 if key == 'tpu' else key}")
        env["JAX_PLATFORMS"] = "cpu"
    env["XLA_FLAGS"] = " ".join(flags)
    return env


class Worker:
    """One child process: fake CPU devices (a count), "tpu" (for TPU AOT) or "real" devices."""

    def __init__(self, key: int | str):
        self.key = key
        # How messages name this worker: "8 devices", "the tpu worker", "the real-devices worker".
        self.what = f"{key} devices" if isinstance(key, int) else f"the {key} worker"
        parent_sock, child_sock = socket.socketpair()
        self._log = tempfile.TemporaryFile(mode="w+b")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "explorer.compile.worker", str(child_sock.fileno()),
             str(key)],
            pass_fds=(child_sock.fileno(),), env=_worker_env(key),
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log)
        child_sock.close()
        self.conn = Connection(parent_sock.detach())
        self.lock = threading.Lock()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            self._log.seek(0)
            return b"\n".join(self._log.read().splitlines()[-lines:]).decode(errors="replace")
        except (OSError, ValueError):
            return ""

    def request(self, message: dict, timeout: float) -> dict:
        try:
            self.conn.send(message)
            if not self.conn.poll(timeout):
                self.kill()
                raise WorkerError(
                    f"compile took longer than the {timeout:g} s limit on {self.what} "
                    "and its worker was stopped; simplify the program, shrink the mesh "
                    "or raise the timeout")
            return self.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            code = self.proc.wait(timeout=5) if self.proc.poll() is None else self.proc.poll()
            tail = self.log_tail()
            self.kill()
            raise WorkerError(
                f"the compile worker for {self.what} died (exit status {code}); "
                f"a fresh worker will be started on the next request. Its last output:\n{tail}"
            ) from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.conn.close()
        self._log.close()


class WorkerPool:
    """Warm workers keyed by device count, least recently used first out."""

    def __init__(self, timeout: float = DEFAULT_TIMEOUT_S, max_workers: int = MAX_WARM_WORKERS):
        self.timeout = timeout
        self.max_workers = max_workers
        self._workers: dict[int, Worker] = {}
        self._lock = threading.Lock()

    def _get(self, key: int | str) -> Worker:
        with self._lock:
            worker = self._workers.pop(key, None)
            if worker is None or not worker.alive():
                worker = Worker(key)
            self._workers[key] = worker     # re-insert: most recently used last
            while len(self._workers) > self.max_workers:
                oldest = next(iter(self._workers))
                self._workers.pop(oldest).kill()
            return worker

    def run(self, key: int | str, message: dict, timeout: float | None = None) -> dict:
        """Send `message` to the worker for `key` (a device count, or "tpu")."""
        worker = self._get(key)
        with worker.lock:
            reply = worker.request(message, self.timeout if timeout is None else timeout)
        if not reply["ok"]:
            raise CompileError(reply["error"])
        return reply["result"]

    def warm(self, key: int | str) -> None:
        """Start (or keep) the worker for `key` and wait until jax is loaded in it."""
        self.run(key, {"op": "ping"})

    def close(self) -> None:
        with self._lock:
            for worker in self._workers.values():
                worker.kill()
            self._workers.clear()


_POOL: WorkerPool | None = None


def default_pool() -> WorkerPool:
    global _POOL
    if _POOL is None:
        _POOL = WorkerPool()
    return _POOL
