"""When the app's compiles run: one at a time, and after it the latest edit only.

An edit the cache cannot answer is submitted here. With nothing compiling or waiting it starts
at once (a single edit pays no delay), unless the app asks for a quiet period first (`quiet`):
an edit whose compile would start a worker process, or whose compiles take long, waits that long
for the edits to pause, so that a burst, or an edit undone at once, does not lock the app into
seconds of an obsolete compile or start a worker nobody needs. Edits that arrive while a
compile runs never queue behind it one by one: each replaces the one waiting, so that when the
compile in flight ends only the newest edit is compiled, once the edits have paused for
`debounce` seconds. A burst of edits therefore compiles at most once per compile time while it
lasts, and then its last edit, where a queue compiled every edit in turn (issue 22: seven edits,
94 s to set up a 12-layer model).

The compile in flight itself is not stopped: it runs in a worker process that other compiles
share (the Suggest tab's search, the what-ifs), and its result still fills the cache. The app
drops it on arrival when a newer edit has been made (`done` is told which edit it answers).

Everything here runs on the kernel's event loop, but the compile, which runs on `executor`.
Each compile's phases (tracing, the worker's start, the compile, reading the result) are
recorded as they start in `phases` (explorer/_src/compile/pool.py's `Phases`), which the status
reads while it runs and the Result's time spent is made from.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Generic, TypeVar

from explorer._src.compile.pool import Phases, recording

RequestT = TypeVar("RequestT")


class CompileScheduler(Generic[RequestT]):
    """Runs `compile(request)` on `executor` for the latest submitted edit.

    `started(edit)` is called as a compile starts and `done(edit, request, result)` when it
    ends; `edit` is the number the app gave the edit (its generation). `compile` must return
    its error rather than raise it, so that it reaches `done` from the executor's thread."""

    def __init__(self, compile: Callable[[RequestT], object],
                 started: Callable[[int], None],
                 done: Callable[[int, RequestT, object], None],
                 executor: Executor, debounce: float = 0.3):
        self._compile, self._started, self._done = compile, started, done
        self._executor, self.debounce = executor, debounce
        self._next: tuple[int, RequestT] | None = None      # the edit waiting to compile
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._next_quiet = 0.0                               # its quiet period (submit)
        self._last_submit = 0.0
        self.busy = False                # a compile is in flight
        self.phases: Phases | None = None    # the phases of the compile in flight (or the last)

    @property
    def waiting(self) -> bool:
        """An edit waits to be compiled (behind the compile in flight, or for quiet)."""
        return self._next is not None

    def submit(self, edit: int, request: RequestT, loop: asyncio.AbstractEventLoop,
               quiet: float = 0.0) -> None:
        """Compile `request` (edit number `edit`) as soon as the rules above allow; it replaces
        any edit still waiting. `quiet`: seconds without a newer edit before it may start,
        even with nothing compiling (0: at once)."""
        self._loop = loop
        self._next = (edit, request)
        self._next_quiet = quiet
        self._last_submit = loop.time()
        if self.busy:
            return                              # started when the compile in flight ends
        if self._timer is not None or quiet > 0:    # the edits have not paused yet
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_later(self._quiet(), self._start)
            return
        self._start()

    def _quiet(self) -> float:
        """How long the edits must pause before the waiting one starts."""
        return max(self.debounce, self._next_quiet)

    def discard(self) -> None:
        """Forget the edit waiting: a newer one needs no compile (the cache had it, it is
        invalid, or live updates are paused)."""
        self._next = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _start(self) -> None:
        self._timer = None
        if self._next is None or self._loop is None:
            return
        (edit, request), self._next = self._next, None
        self.busy = True
        self.phases = phases = Phases()
        self._started(edit)
        future = self._loop.run_in_executor(self._executor, self._recorded, phases, request)
        future.add_done_callback(lambda f: self._finished(edit, request, f))

    def _recorded(self, phases: Phases, request: RequestT) -> object:
        """`compile(request)` on the executor's thread, its phases recorded in `phases`."""
        with recording(phases):
            return self._compile(request)

    def _finished(self, edit: int, request: RequestT, future: asyncio.Future) -> None:
        self.busy = False
        try:
            if not future.cancelled():          # cancelled: the app is closing
                self._done(edit, request, future.result())
        finally:
            if self._next is not None and self._loop is not None:
                quiet_at = self._last_submit + self._quiet()
                self._timer = self._loop.call_later(max(0.0, quiet_at - self._loop.time()),
                                                    self._start)
