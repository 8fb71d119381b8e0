"""Where candidates are compiled: this process's worker pool, or a Ray cluster.

A runner takes each candidate's explorer Request, made where the search runs (`send`: its
program traced and lowered there, evaluate.py's `candidate_request`), and gives back outcomes as
they finish. The local runner compiles one at a time on the explorer's own worker pool (one warm
worker per device count). The Ray runner sends each Request as a Ray task; the task runs
explorer._src.layout_search.evaluate.compile_candidate on whichever node Ray picks, which compiles
it on that node's own worker pool (each Ray worker process keeps its pool warm between tasks), and
returns the compiled Report without its program texts. The connection, the explorer shipped to
the nodes and the check that each node can compile are connect.py's. A candidate whose Request
could not be made is answered as that candidate's failure, by either runner, without a compile.

A task whose Ray worker or node is lost (killed, crashed, out of memory, the node gone) gave no
verdict on its candidate, so the Ray runner sends it again, up to MAX_ATTEMPTS times in all, and
the outcome counts the retries (the result's Candidate.retries); the local runner does the same
for a compile whose worker died or was killed (WorkerLost), not for one past its time limit.
A task that ran and failed is that candidate's failure, as on the local pool.

Both wait for an answer only while the search's `stop` condition (its budget, a cancel) allows:
`next_done(stop=...)` gives [] once it comes true, and `cancel_all` then gives up what is in
flight: the local runner's compile runs on a thread (deadline.py), left to end by its own time
limit in the background; a Ray task is cancelled.

Ray is the optional `cluster` extra and is imported only here, only when a cluster is asked for.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from functools import partial

from explorer._src.api.analysis_request import Request
from explorer._src.errors import ExplorerError
from explorer._src.layout_search.connect import (
    PROBE_TIMEOUT_S,
    ClusterSize,
    check_nodes,
    connect,
    gist,
)
from explorer._src.layout_search.deadline import POLL_S, Job
from explorer._src.layout_search.evaluate import Outcome, compile_candidate

INSTALL_HINT = "pip install 'sharding-explorer[cluster]' (or: pip install 'ray[default]>=2.9')"

# Sends of one request, the first included, before a lost worker counts as its failure.
MAX_ATTEMPTS = 3


class Runner:
    """What both runners share: `send`, which makes a candidate's Request here and submits it,
    and the candidates whose Request could not be made, which `next_done` answers first, each
    as its failure. A runner's own `submit` takes a Request made already."""

    def __init__(self):
        self._refused: list[tuple[object, Outcome]] = []    # failed here, never submitted

    def send(self, key, make: Callable[[], Request]) -> None:
        """Make the Request of candidate `key` (`make()`: evaluate.candidate_request) in this
        process, where the search runs, and submit it; an ExplorerError making it is the
        candidate's failure, answered by next_done like a compile's."""
        t0 = time.perf_counter()
        try:
            request = make()
        except ExplorerError as e:
            self._refused.append((key, Outcome.failed(e, t0)))
            return
        self.submit(key, request)

    def submit(self, key, request: Request) -> None:
        raise NotImplementedError

    def warm(self, key) -> None:
        """Start the worker for `key` (compile/protocol.py's WorkerKey) in the background, where
        this runner keeps workers of its own; nothing where it does not (a cluster's nodes
        keep theirs)."""

    def warming(self) -> bool:
        """Whether a worker `warm` started is still starting."""
        return False

    def _take_refused(self) -> list[tuple[object, Outcome]]:
        out, self._refused = self._refused, []
        return out


class LocalRunner(Runner):
    """Compiles on this process's worker pool, one Request at a time, each on a thread of its
    own (deadline.py's Job), so that the search can stop waiting for it."""

    slots = 1
    address = None
    size: ClusterSize | None = None

    def __init__(self, pool=None):
        super().__init__()
        self.pool = pool
        self._queue: OrderedDict[object, Request] = OrderedDict()
        self._running: tuple[object, Job[Outcome]] | None = None     # the compile in flight
        self._warm: threading.Thread | None = None

    def submit(self, key, request: Request) -> None:
        self._queue[key] = request

    def warm(self, key) -> None:
        """Start the pool's worker for `key` on a thread of its own: the estimate screen runs
        meanwhile, and the target's compiles that confirm its best then find their worker up
        (on a busy machine its start, jax and the GPU compiler loaded, takes tens of seconds,
        which the compile's own time limit does not count). A start that fails is left to the
        compile that needs it, which says why."""
        from explorer._src.compile.pool import default_pool

        pool = self.pool if self.pool is not None else default_pool()

        def start() -> None:
            try:
                pool.warm(key)
            except ExplorerError:
                pass

        self._warm = threading.Thread(target=start, name="explorer-warm-worker", daemon=True)
        self._warm.start()

    def warming(self) -> bool:
        return self._warm is not None and self._warm.is_alive()

    def pending(self) -> int:
        return len(self._queue) + len(self._refused) + (self._running is not None)

    def next_done(self, stop: Callable[[], bool] | None = None) -> list[tuple[object, Outcome]]:
        """The next Request's outcome (first those refused before they were submitted); []
        where `stop()` came true before it (the compile stays in flight: the next call waits
        for it again, cancel_all gives it up). A worker that died or was killed under it gave
        no verdict, so it is compiled again on a fresh worker, up to MAX_ATTEMPTS times in
        all, as the Ray runner sends a lost task again; the outcome counts the retries."""
        if self._refused:
            return self._take_refused()
        if self._running is None:
            key, request = self._queue.popitem(last=False)
            self._running = (key, Job(partial(self._compile, request),
                                      f"explorer-search-compile-{key}"))
        key, job = self._running
        if not job.wait(stop):
            return []
        self._running = None
        return [(key, job.result())]

    def _compile(self, request: Request) -> Outcome:
        outcome = compile_candidate(request, self.pool)
        retries = 0
        while outcome.worker_lost and retries + 1 < MAX_ATTEMPTS:
            retries += 1
            outcome = compile_candidate(request, self.pool)
        return replace(outcome, retries=retries)

    def cancel_all(self) -> list[object]:
        """Every candidate sent and not answered, given up: the compile in flight is stopped
        with its worker (deadline.Job.abandon), the others never start."""
        running = [self._running[0]] if self._running is not None else []
        if self._running is not None:
            self._running[1].abandon()
        self._running = None
        keys = running + list(self._queue) + [key for key, _ in self._take_refused()]
        self._queue.clear()
        return keys

    def close(self) -> None:
        pass


def _compile_on_node(request: Request) -> Outcome:
    """The Ray task: compile the Request (its program lowered where the search runs) on the
    node's own worker pool."""
    return compile_candidate(request)


def _lost_errors(ray) -> tuple[type[Exception], ...]:
    """Ray's errors for a task whose worker or node went away before it answered."""
    x = ray.exceptions
    return (x.WorkerCrashedError, x.NodeDiedError, x.LocalRayletDiedError, x.ObjectLostError,
            x.OutOfMemoryError)


class RayRunner(Runner):
    """Compiles each Request as a Ray task, `slots` at a time (default: the cluster's CPUs).
    `node_timeout`: seconds the check of the nodes waits for their answers (connect.py)."""

    def __init__(self, address: str, slots: int | None = None,
                 node_timeout: float = PROBE_TIMEOUT_S):
        super().__init__()
        try:
            import ray
        except ImportError:
            raise ExplorerError(f"cluster={address!r} needs Ray, which is not installed; "
                                f"install the cluster extra: {INSTALL_HINT}") from None
        self.ray = ray
        self.address = address
        self._started = connect(ray, address)
        try:
            self.size = check_nodes(ray, address, reuse=not self._started,
                                    timeout=node_timeout)
        except BaseException:
            self.close()
            raise
        self._task = ray.remote(num_cpus=1, max_retries=0)(_compile_on_node)
        self._lost = _lost_errors(ray)
        self.slots = slots if slots is not None else max(1, self.size.cpus)
        self._refs: dict = {}                         # task -> key
        self._requests: dict[object, Request] = {}    # key -> what it compiles, to send again
        self._retries: dict[object, int] = {}

    def submit(self, key, request: Request) -> None:
        # Pickled for the task with its program lowered here, where the search was called,
        # under its contexts; the node compiles the module (explorer/_src/compile/lowering.py).
        self._requests[key] = request
        self._refs[self._task.remote(request)] = key

    def pending(self) -> int:
        return len(self._refs) + len(self._refused)

    def next_done(self, stop: Callable[[], bool] | None = None) -> list[tuple[object, Outcome]]:
        """The next outcomes (first those refused before they were sent); a task lost with
        its worker is sent again, and waited for; [] where `stop()` came true before any
        answered (the tasks stay in flight until cancel_all)."""
        if self._refused:
            return self._take_refused()
        out = []
        while not out:
            if stop is not None and stop():
                return []
            # Without a stop, Ray's own wait, for as long as it takes.
            ready, _ = self.ray.wait(list(self._refs), num_returns=1,
                                     **({} if stop is None else {"timeout": POLL_S}))
            for ref in ready:
                key = self._refs.pop(ref)
                outcome = self._outcome(key, ref)
                if outcome is not None:
                    out.append((key, outcome))
        return out

    def _outcome(self, key, ref) -> Outcome | None:
        """What the task `ref` gave back, or None when it was sent again."""
        t0 = time.perf_counter()
        try:
            outcome = self.ray.get(ref)
        except self._lost as e:
            tries = self._retries.get(key, 0) + 1
            if tries < MAX_ATTEMPTS:
                self._retries[key] = tries
                self._refs[self._task.remote(self._requests[key])] = key
                return None
            outcome = Outcome(None, f"the Ray task was lost {tries} times with its worker or "
                              f"node: {gist(e)}", time.perf_counter() - t0, type(e))
        except Exception as e:     # the task raised: a node that cannot import explorer, ...
            outcome = Outcome(None, f"the Ray task failed on the cluster: "
                              f"{type(e).__name__}: {e}", time.perf_counter() - t0, type(e))
        del self._requests[key]
        return replace(outcome, retries=self._retries.pop(key, 0))

    def cancel_all(self) -> list[object]:
        keys = list(self._refs.values()) + [key for key, _ in self._take_refused()]
        for ref in self._refs:
            self.ray.cancel(ref, force=True)
        self._refs.clear()
        self._requests.clear()
        self._retries.clear()
        return keys

    def close(self) -> None:
        if getattr(self, "_refs", None):
            self.cancel_all()
        if self._started:
            self.ray.shutdown()


def make_runner(cluster: str | None, pool=None, slots: int | None = None,
                node_timeout: float = PROBE_TIMEOUT_S):
    """The runner of a search: on `pool` here, or on the Ray cluster at `cluster` (an address
    SearchOptions checked)."""
    if cluster is None:
        return LocalRunner(pool)
    return RayRunner(cluster, slots, node_timeout)
