"""Work a search waits for only while its budget lasts: a compile in flight, a trace.

A search checks its budget between steps (state.py), but one step can take longer than what is
left: a compile by the target's compiler (its program traced and lowered here first, the worker
stopped after its time limit), or the trace of a transformer step, 5-20 s each on a busy 2-core
machine. Waited for, such a step ran the search seconds past its budget (docs/performance.md).
So each runs on a thread of its own (`Job`), and the search waits for it only until its stop
condition comes true (the budget spent, or a cancel), polled every POLL_S; then it stops waiting
and goes on without the result. The thread cannot be stopped from outside: it runs on in the
background and its result is dropped. A Job given up for good (`abandon`) has its compile's
worker stopped (compile/pool.py's `abandoned_when`), so that it holds neither the worker nor a
core until its own time limit; a trace runs on until it is done. Neither changes anything the
search returned.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from explorer._src.compile.pool import abandoned_when

_Value = TypeVar("_Value")

# Seconds between two looks at the stop condition while a Job runs: how far past its budget a
# search can go by waiting (with the step between two looks, and the ranking after).
POLL_S = 0.05


class Abandoned(Exception):  # noqa: N818 (what happened to the work, not an error of it)
    """The search stopped waiting for a Job: its budget ran out, or it was cancelled."""


class Job(Generic[_Value]):
    """`work()` started at once on a daemon thread (named `name`); `wait` waits for it."""

    def __init__(self, work: Callable[[], _Value], name: str):
        self._done = threading.Event()
        self._abandoned = threading.Event()
        self._value: _Value | None = None
        self._error: BaseException | None = None

        def run() -> None:
            try:
                with abandoned_when(self._abandoned.is_set):
                    self._value = work()
            except BaseException as e:      # handed to the waiter, who raises it
                self._error = e
            finally:
                self._done.set()

        # A daemon: an abandoned job must not keep the interpreter from exiting.
        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def done(self) -> bool:
        return self._done.is_set()

    def abandon(self) -> None:
        """Give the work up: no one will wait for it again. A compile it sent to the pool is
        stopped with its worker (CompileAbandoned, raised on the Job's thread and dropped)."""
        self._abandoned.set()

    def wait(self, stop: Callable[[], bool] | None = None) -> bool:
        """Wait until the work ends (True) or `stop()` comes true first (False); without
        `stop`, until it ends."""
        while not self._done.wait(None if stop is None else POLL_S):
            if stop is not None and stop():
                return self._done.is_set()    # it may have ended as stop() was asked
        return True

    def result(self) -> _Value:
        """What the work returned, or the exception it raised, raised here; only once it
        ended."""
        assert self._done.is_set(), "Job.result() before the work ended"
        if self._error is not None:
            raise self._error
        return self._value   # type: ignore[return-value]


def in_time(work: Callable[[], _Value], stop: Callable[[], bool] | None, name: str) -> _Value:
    """`work()`, waited for until `stop()` comes true (on a thread of its own; without `stop`,
    here, in this thread).

    Raises:
        Abandoned: stop() came true first (the work, if it started, runs on in the
            background).
    """
    if stop is None:
        return work()
    if stop():
        raise Abandoned(name)       # not started: nothing left to wait with
    job = Job(work, name)
    if not job.wait(stop):
        job.abandon()
        raise Abandoned(name)
    return job.result()
