"""Where candidates are compiled: this process's worker pool, or a Ray cluster.

A runner takes requests and gives back outcomes as they finish. The local runner compiles one at
a time on the explorer's own worker pool (one warm worker per device count). The Ray runner
sends each request as a Ray task; the task runs explorer._search.evaluate.run on whichever node
Ray picks, which compiles it on that node's own worker pool (each Ray worker process keeps its
pool warm between tasks), and returns the compiled Report without its program texts. Nothing
else is shared: the nodes need the same explorer and jax as the caller (see docs/search.md).

Ray is the optional `cluster` extra and is imported only here, only when a cluster is asked for.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import replace

from explorer._search.evaluate import Outcome, Request, run
from explorer.compile.sources import pickle_function
from explorer.errors import ExplorerError, InputError
from explorer.spec.bounds import show

INSTALL_HINT = "pip install 'sharding-explorer[cluster]' (or: pip install 'ray[default]>=2.9')"


class LocalRunner:
    """Compiles on this process's worker pool, one request at a time."""

    slots = 1
    address = None

    def __init__(self, pool=None):
        self.pool = pool
        self._queue: OrderedDict[object, Request] = OrderedDict()

    def submit(self, key, request: Request) -> None:
        self._queue[key] = request

    def pending(self) -> int:
        return len(self._queue)

    def next_done(self) -> list[tuple[object, Outcome]]:
        key, request = self._queue.popitem(last=False)
        return [(key, run(request, self.pool))]

    def cancel_all(self) -> list[object]:
        keys = list(self._queue)
        self._queue.clear()
        return keys

    def close(self) -> None:
        pass


def _compile_on_node(request: Request) -> Outcome:
    """The Ray task: run the request on the node's own worker pool."""
    return run(request)


class RayRunner:
    """Compiles each request as a Ray task, `slots` at a time (default: the cluster's CPUs)."""

    def __init__(self, address: str, slots: int | None = None):
        try:
            import ray
        except ImportError:
            raise ExplorerError(f"cluster={address!r} needs Ray, which is not installed; "
                                f"install the cluster extra: {INSTALL_HINT}") from None
        self.ray = ray
        self.address = address
        self._started = False
        if not ray.is_initialized():
            try:
                if address == "local":
                    ray.init(log_to_driver=False, include_dashboard=False)
                else:
                    # Connecting to a running cluster takes no options that shape a cluster.
                    ray.init(address=address, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise ExplorerError(
                    f"cannot connect to the Ray cluster at {show(address)}: {e}. Give the "
                    "address `ray start --head` printed (HOST:6379), a Ray Client address "
                    "ray://HOST:10001, 'auto' for the cluster this machine belongs to, or "
                    "'local' to start one in this process") from None
            self._started = True
        self._task = ray.remote(num_cpus=1, max_retries=0)(_compile_on_node)
        if slots is None:
            slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.slots = slots
        self._refs: dict = {}

    def submit(self, key, request: Request) -> None:
        if request.fn is not None:
            # The explorer's pickler keeps the user's file names in the code (Ray's would not).
            request = replace(request, fn=None, fn_bytes=pickle_function(request.fn))
        self._refs[self._task.remote(request)] = key

    def pending(self) -> int:
        return len(self._refs)

    def next_done(self) -> list[tuple[object, Outcome]]:
        ready, _ = self.ray.wait(list(self._refs), num_returns=1)
        out = []
        for ref in ready:
            key = self._refs.pop(ref)
            t0 = time.perf_counter()
            try:
                outcome = self.ray.get(ref)
            except Exception as e:     # a node that cannot import explorer, a lost node, ...
                outcome = Outcome(None, f"the Ray task failed on the cluster: "
                                  f"{type(e).__name__}: {e}", time.perf_counter() - t0, type(e))
            out.append((key, outcome))
        return out

    def cancel_all(self) -> list[object]:
        keys = list(self._refs.values())
        for ref in self._refs:
            self.ray.cancel(ref, force=True)
        self._refs.clear()
        return keys

    def close(self) -> None:
        if self._refs:
            self.cancel_all()
        if self._started:
            self.ray.shutdown()


def runner(cluster: str | None, pool=None, slots: int | None = None):
    if cluster is None:
        return LocalRunner(pool)
    if not isinstance(cluster, str) or not cluster.strip():
        raise InputError(f"cluster {show(cluster)} is not a Ray address: give 'HOST:PORT', "
                         "'ray://HOST:PORT', 'auto' or 'local', or None for this machine's "
                         "worker pool")
    return RayRunner(cluster.strip(), slots)
