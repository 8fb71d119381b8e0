"""When the app's compiles run (explorer._src.api.scheduler), with a stand-in compile that waits for
the test to release it, on a real asyncio loop: no widgets and no jax."""

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from explorer._src.api.scheduler import CompileScheduler


class Harness:
    """A scheduler whose compiles block until released; it records what started and ended."""

    def __init__(self, debounce: float = 0.05):
        self.executor = ThreadPoolExecutor(max_workers=1)
        self.gates: dict[str, threading.Event] = {}
        self.started: list[int] = []
        self.done: list[tuple[int, str, str]] = []
        self.scheduler = CompileScheduler(self.compile, self.started.append,
                                          lambda e, r, out: self.done.append((e, r, out)),
                                          self.executor, debounce)

    def compile(self, request: str) -> str:
        self.gates.setdefault(request, threading.Event()).wait(10)
        return f"report of {request}"

    def release(self, request: str) -> None:
        self.gates.setdefault(request, threading.Event()).set()

    async def until(self, condition, timeout: float = 10.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not condition():
            assert loop.time() < deadline, "timed out"
            await asyncio.sleep(0.01)


def run(scenario):
    harness = Harness()
    try:
        asyncio.run(scenario(harness))
    finally:
        for gate in harness.gates.values():
            gate.set()
        harness.executor.shutdown(wait=True)


def test_an_isolated_edit_starts_at_once():
    async def scenario(h: Harness):
        loop = asyncio.get_running_loop()
        h.scheduler.submit(1, "a", loop)
        assert h.started == [1] and h.scheduler.busy        # no debounce before it
        h.release("a")
        await h.until(lambda: h.done)
        assert h.done == [(1, "a", "report of a")] and not h.scheduler.busy

    run(scenario)


def test_edits_made_during_a_compile_become_one_compile_of_the_last():
    async def scenario(h: Harness):
        loop = asyncio.get_running_loop()
        h.scheduler.submit(1, "a", loop)
        for edit, request in ((2, "b"), (3, "c"), (4, "d")):   # while "a" compiles
            h.scheduler.submit(edit, request, loop)
        assert h.started == [1] and h.scheduler.waiting
        h.release("a")
        await h.until(lambda: h.started == [1, 4])
        h.release("d")
        await h.until(lambda: len(h.done) == 2)
        # "b" and "c" never compiled; "a" ended (the app drops it: edit 1 is not the latest).
        assert h.done == [(1, "a", "report of a"), (4, "d", "report of d")]
        assert not h.scheduler.waiting

    run(scenario)


def test_a_discarded_edit_is_not_compiled_after_the_one_in_flight():
    async def scenario(h: Harness):
        loop = asyncio.get_running_loop()
        h.scheduler.submit(1, "a", loop)
        h.scheduler.submit(2, "b", loop)
        h.scheduler.discard()          # edit 3 came from the cache: "b" is not needed
        h.release("a")
        await h.until(lambda: h.done)
        await asyncio.sleep(3 * h.scheduler.debounce)
        assert h.started == [1] and h.done == [(1, "a", "report of a")]

    run(scenario)


@pytest.mark.slow
def test_the_next_compile_waits_for_the_edits_to_pause():
    async def scenario(h: Harness):
        loop = asyncio.get_running_loop()
        h.scheduler.debounce = 2.0       # far longer than the steps below take
        h.scheduler.submit(1, "a", loop)
        h.scheduler.submit(2, "b", loop)
        h.release("a")
        await h.until(lambda: h.done)
        # "a" ended at once, but "b" was submitted less than the debounce ago: a timer waits,
        # and an edit meanwhile replaces "b" and restarts it.
        assert h.started == [1]
        h.scheduler.submit(3, "c", loop)
        h.release("c")
        await h.until(lambda: len(h.done) == 2)
        assert h.started == [1, 3] and [d[1] for d in h.done] == ["a", "c"]

    run(scenario)


def test_an_edit_with_a_quiet_period_waits_and_a_discard_drops_it():
    async def scenario(h: Harness):
        loop = asyncio.get_running_loop()
        h.scheduler.submit(1, "a", loop, quiet=0.5)
        # Nothing compiles, yet it does not start: its quiet period has not passed.
        assert h.started == [] and h.scheduler.waiting and not h.scheduler.busy
        h.scheduler.discard()              # undone: the cache answered the next edit
        await asyncio.sleep(1.0)
        assert h.started == [] and not h.scheduler.waiting
        # Left alone, it starts once its quiet period has passed, and compiles once.
        h.scheduler.submit(2, "b", loop, quiet=0.2)
        h.release("b")
        await h.until(lambda: h.done)
        assert h.started == [2] and h.done == [(2, "b", "report of b")]

    run(scenario)


def test_a_newer_edit_during_a_quiet_period_replaces_the_waiting_one():
    async def scenario(h: Harness):
        loop = asyncio.get_running_loop()
        h.scheduler.submit(1, "a", loop, quiet=0.3)
        h.scheduler.submit(2, "b", loop, quiet=0.3)
        h.release("b")
        await h.until(lambda: h.done)
        assert h.started == [2] and [d[1] for d in h.done] == ["b"]      # "a" never compiled

    run(scenario)
