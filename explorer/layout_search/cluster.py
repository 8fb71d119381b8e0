"""Where candidates are compiled: this process's worker pool, or a Ray cluster.

A runner takes requests and gives back outcomes as they finish. The local runner compiles one at
a time on the explorer's own worker pool (one warm worker per device count). The Ray runner
sends each request as a Ray task; the task runs explorer.layout_search.evaluate.compile_candidate on
whichever node Ray picks, which compiles it on that node's own worker pool (each Ray worker
process keeps its pool warm between tasks), and returns the compiled Report without its
program texts. The connection, the explorer shipped to the nodes and the check that each node
can compile are connect.py's.

A task whose Ray worker or node is lost (killed, crashed, out of memory, the node gone) gave no
verdict on its candidate, so the Ray runner sends it again, up to MAX_ATTEMPTS times in all, and
the outcome counts the retries (the result's Candidate.retries); the local runner does the same
for a compile whose worker died or was killed (WorkerLost), not for one past its time limit.
A task that ran and failed is that candidate's failure, as on the local pool.

Ray is the optional `cluster` extra and is imported only here, only when a cluster is asked for.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import replace

from explorer.errors import ExplorerError
from explorer.layout_search.connect import (
    PROBE_TIMEOUT_S,
    ClusterSize,
    check_address,
    check_nodes,
    connect,
    gist,
)
from explorer.layout_search.evaluate import CompileJob, Outcome, compile_candidate, planned_here

INSTALL_HINT = "pip install 'sharding-explorer[cluster]' (or: pip install 'ray[default]>=2.9')"

# Sends of one request, the first included, before a lost worker counts as its failure.
MAX_ATTEMPTS = 3


class LocalRunner:
    """Compiles on this process's worker pool, one request at a time."""

    slots = 1
    address = None
    size: ClusterSize | None = None

    def __init__(self, pool=None):
        self.pool = pool
        self._queue: OrderedDict[object, CompileJob] = OrderedDict()

    def submit(self, key, request: CompileJob) -> None:
        self._queue[key] = request

    def pending(self) -> int:
        return len(self._queue)

    def next_done(self) -> list[tuple[object, Outcome]]:
        """The next request's outcome. A worker that died or was killed under it gave no
        verdict, so it is compiled again on a fresh worker, up to MAX_ATTEMPTS times in all,
        as the Ray runner sends a lost task again; the outcome counts the retries."""
        key, request = self._queue.popitem(last=False)
        outcome = compile_candidate(request, self.pool)
        retries = 0
        while outcome.worker_lost and retries + 1 < MAX_ATTEMPTS:
            retries += 1
            outcome = compile_candidate(request, self.pool)
        return [(key, replace(outcome, retries=retries))]

    def cancel_all(self) -> list[object]:
        keys = list(self._queue)
        self._queue.clear()
        return keys

    def close(self) -> None:
        pass


def _compile_on_node(request: CompileJob) -> Outcome:
    """The Ray task: run the request on the node's own worker pool."""
    return compile_candidate(request)


def _lost_errors(ray) -> tuple[type[Exception], ...]:
    """Ray's errors for a task whose worker or node went away before it answered."""
    x = ray.exceptions
    return (x.WorkerCrashedError, x.NodeDiedError, x.LocalRayletDiedError, x.ObjectLostError,
            x.OutOfMemoryError)


class RayRunner:
    """Compiles each request as a Ray task, `slots` at a time (default: the cluster's CPUs).
    `node_timeout`: seconds the check of the nodes waits for their answers (connect.py)."""

    def __init__(self, address: str, slots: int | None = None,
                 node_timeout: float = PROBE_TIMEOUT_S):
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
        self._requests: dict[object, CompileJob] = {}    # key -> what it compiles, to send again
        self._retries: dict[object, int] = {}
        self._refused: list[tuple[object, Outcome]] = []  # failed here, never sent

    def submit(self, key, request: CompileJob) -> None:
        t0 = time.perf_counter()
        try:
            # The program is traced and lowered here, where the search was called, under its
            # contexts; the node compiles the module (explorer/compile/lowering.py).
            request = planned_here(request)
        except ExplorerError as e:
            self._refused.append((key, Outcome(None, f"{type(e).__name__}: {e}",
                                               time.perf_counter() - t0, type(e))))
            return
        self._requests[key] = request
        self._refs[self._task.remote(request)] = key

    def pending(self) -> int:
        return len(self._refs) + len(self._refused)

    def next_done(self) -> list[tuple[object, Outcome]]:
        """The next outcomes (first those refused before they were sent); a task lost with
        its worker is sent again, and waited for."""
        if self._refused:
            out, self._refused = self._refused, []
            return out
        out = []
        while not out:
            ready, _ = self.ray.wait(list(self._refs), num_returns=1)
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
        keys = list(self._refs.values()) + [key for key, _ in self._refused]
        self._refused.clear()
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
    if cluster is None:
        return LocalRunner(pool)
    return RayRunner(check_address(cluster), slots, node_timeout)
