"""The compile worker process: `python -m explorer._src.compile.worker FD LABEL`.

It loads jax once, then answers explorer._src.compile.protocol messages from its parent over the
socket FD until the parent closes it. A failing program is reported back (a Failure) and the
worker goes on. A program that tries to end the process (SystemExit, KeyboardInterrupt) ends
it for good: the worker says why on stderr, which the parent shows, and exits at once, so that
no thread the program started can keep it alive.

A program that returns but leaves a thread or a process running ends its worker too, after its
answer: what it left could exit the worker or interrupt its main thread during a later request,
and that request would fail, blamed for it. The worker answers `Retiring(reply)` and exits;
the parent replaces it. Every message but a Ping runs a program: a CompileRequest's (the
compiler, and what the lowered program runs when it is measured), or a test hook's.

One test hook: where $EXPLORER_WORKER_TEST_HOOK (HOOK_VARIABLE) names a module, the worker
imports it as it starts, and that module's `answer(message)` answers the messages the worker
has no answer of its own for (a Reply, or None: not one of its messages); what it raises is a
Failure, as a program's error is. The tests' messages that make a worker crash or hang
(tests/_support/worker_faults.py), and those that run a program inside it, traced there
(tests/_support/in_worker.py), come that way; unset in use.
"""

from __future__ import annotations

import _thread
import importlib
import os
import sys
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection

from explorer._src.compile.protocol import (
    CompileRequest,
    Failure,
    Message,
    Ping,
    Pong,
    Reply,
    Retiring,
)
from explorer._src.compile.reaper import PID_VARIABLE, children

EXIT_PROGRAM_ENDED = 70      # the program raised SystemExit or KeyboardInterrupt
# jax's caches are cleared after every this many compiles (see _serve): at most this many
# compiles' worth of them (a few MB) is held at a time.
CLEAR_CACHES_EVERY = 8
# How long what a program started gets to end by itself after the program returned before the
# worker counts it as left running (a helper thread finishing, a child exiting).
_LEFTOVER_GRACE_S = 0.5
# The environment variable that names the worker's test hook, a module to import as it starts
# (see above); the module must be importable from the worker's sys.path (its PYTHONPATH is the
# parent's sys.path, explorer/_src/compile/pool.py).
HOOK_VARIABLE = "EXPLORER_WORKER_TEST_HOOK"

# A test hook's answer to a message the worker does not know: a Reply, or None.
Hook = Callable[[object], Reply | None]


def _test_hook() -> Hook | None:
    """The `answer` of the module $EXPLORER_WORKER_TEST_HOOK names, if it names one."""
    name = os.environ.get(HOOK_VARIABLE, "").strip()
    return importlib.import_module(name).answer if name else None


def _serve(conn: Connection) -> None:
    import jax

    hook = _test_hook()
    jax.devices()          # load the backend before the first request: "warm" means warm
    compiles = 0
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        threads = _thread._count()
        reply = _answer(message, hook)
        runs_a_program = not isinstance(message, Ping)
        if runs_a_program and _left_running(threads):
            conn.send(Retiring(reply))
            return       # and exit at once (main), before what the program left can strike
        conn.send(reply)
        if not runs_a_program:
            continue
        compiles += 1
        if compiles % CLEAR_CACHES_EVERY == 0:
            # Every request jits a new function, so jax's caches (traces, lowerings,
            # executables) would only grow, by 0.2-0.6 MB a compile (measured, 200 compiles of
            # the transformer workloads); cleared, the worker's RSS stays flat. Not after every
            # compile: the next one then lowers 1.3 ms slower (a small MLP's 10 ms), rebuilding
            # what jax shares between programs. After the reply, so that the caller does not
            # wait for it.
            jax.clear_caches()


def _left_running(threads_before: int) -> bool:
    """Whether the program just run left a thread or a process running, once they have had
    `_LEFTOVER_GRACE_S` to end.

    Threads are those Python started: `_thread._count()` counts threading's and
    `_thread.start_new_thread`'s alike, and jax and XLA start none (measured: their pools are
    native threads, started at their own pace, so a count of the process's OS threads would
    retire every worker). A thread started by native code the program calls is not seen.
    Processes are the worker's living children and, under a reaper, the reaper's other
    children: orphans of the program's processes."""
    deadline = time.monotonic() + _LEFTOVER_GRACE_S
    while True:
        left = _thread._count() > threads_before or bool(_processes_left())
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.01)


def _processes_left() -> list[int]:
    """The living processes the programs run so far left: see _left_running."""
    if not sys.platform.startswith("linux"):
        return []       # no /proc: children are not looked for (see docs/reliability.md)
    reaped = os.environ.get(PID_VARIABLE) == str(os.getppid())
    found = children(os.getpid(), os.getppid()) if reaped else children(os.getpid())
    return [pid for pid, state in found.items() if state != "Z" and pid != os.getpid()]


def _answer(message: Message, hook: Hook | None) -> Reply:
    import jax

    if isinstance(message, Ping):
        return Pong(devices=len(jax.devices()), pid=os.getpid(),
                    device_kind=jax.devices()[0].device_kind)
    try:
        if isinstance(message, CompileRequest):
            return _compile(message)
        if hook is not None and (reply := hook(message)) is not None:
            return reply
    except Exception as e:  # the program, not the worker, failed: report it and go on
        return Failure(_describe(e))
    return Failure(f"the worker got a {type(message).__name__}, which is no message it "
                   "knows; the parent and worker come from different explorer versions?")


def _compile(request: CompileRequest):
    from explorer._src.compile.backend import compile_request

    return compile_request(request.program, request.args, request.mesh, request.partitioner,
                           request.tpu_topology, request.measure, gpu=request.gpu,
                           origins=request.origins, donate=request.donate,
                           slices_per_axis=request.slices_per_axis)


def _describe(e: Exception) -> str:
    text = f"{type(e).__name__}: {e}".strip()
    if isinstance(e, TypeError | NameError | AttributeError | IndexError | KeyError
                  | AssertionError | ValueError):
        # An error in code that is neither a library's nor the explorer's (a program a test
        # hook runs here, tests/_support/in_worker.py): show where it happened.
        frames = traceback.extract_tb(e.__traceback__)
        user = [f for f in frames if "site-packages" not in f.filename
                and "/explorer/" not in f.filename]
        if user:
            f = user[-1]
            text += f" (at {f.filename}:{f.lineno})"
    return text


def main(fd: int) -> None:
    try:
        _serve(Connection(fd))
        code = 0
    except (SystemExit, KeyboardInterrupt) as e:
        where = traceback.extract_tb(e.__traceback__)[-1]
        print(f"explorer worker: the program raised {type(e).__name__}({e}) at "
              f"{where.filename}:{where.lineno} while it ran; a compile worker "
              "cannot go on after that, so it stopped", file=sys.stderr)
        code = EXIT_PROGRAM_ENDED
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(code)        # now: threads the program started must not keep the worker alive


if __name__ == "__main__":
    main(int(sys.argv[1]))
