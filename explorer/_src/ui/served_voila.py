"""The Voila that `sharding-explorer app` runs (`python -m explorer._src.ui.served_voila`):
Voila itself, with the Jupyter server's Host check turned on.

Voila sets its tornado settings' `allow_remote_access` to True, so that a request is served
whatever its `Host` header names. A page of another site can then reach a server bound to
127.0.0.1 through DNS rebinding (its own name, re-pointed at 127.0.0.1, is the Host) and run code
in a kernel. Here, as in a Jupyter server, a request is served only when its Host is a loopback
address or one of `local_hostnames` (`localhost`), unless `allow_remote_access` is set, which
`serve.voila_command` does where the app is reached under other names: bound beyond loopback
(with a token, which it then always has) or behind jupyter-server-proxy on Binder (behind the
Jupyter server, which checks Host, Origin and its own login). The websocket's Origin check is
the Jupyter server's own: an Origin whose host is not the request's Host is refused.

It also says when it is ready (`ready_file`): listening, and every preheated kernel has run the
app notebook (its first result included), so that `sharding-explorer app` prints its URL only
when a page loads at once (explorer/_src/ui/serve.py).
"""

from __future__ import annotations

from pathlib import Path

from tornado.ioloop import PeriodicCallback
from traitlets import Bool, List, Unicode
from voila.app import Voila

READY_CHECK_MS = 100     # how often the preheated kernels are looked at until they are ready


def preheated(kernel_manager) -> bool:
    """Whether every kernel of Voila's preheated pools has run its notebook to the end; True
    where there is no pool (preheat off: a page starts its own kernel). A pool item is a task
    that starts a kernel and returns the task that runs the notebook in it (Voila 0.5's
    VoilaKernelManager `_pools`, the state PoolSparingKernelManager reads too)."""
    pools = getattr(kernel_manager, "_pools", None)
    if pools is None:
        return True
    items = [task for pool in pools.values() for task in pool]
    return bool(items) and all(_ran(task) and _ran(task.result()["task"]) for task in items)


def _ran(task) -> bool:
    return task.done() and not task.cancelled() and task.exception() is None


class ServedVoila(Voila):
    """Voila whose Host check is the Jupyter server's (`ServerApp.allow_remote_access` and
    `ServerApp.local_hostnames`), off only when asked for."""

    allow_remote_access = Bool(False, config=True, help=(
        "Serve requests whatever host their Host header names; off: only loopback addresses "
        "and local_hostnames."))
    local_hostnames = List(Unicode(), ["localhost"], config=True, help=(
        "Host names, besides loopback addresses, that a request's Host may name."))

    ready_file = Unicode("", config=True, help=(
        "A file written once the server listens and its preheated kernels have run the "
        "notebook: a page then loads at once. Empty: none."))

    def start(self) -> None:
        if self.ready_file:
            # Started before Voila's own start (which listens, then runs the loop): the first
            # look comes from the running loop, after the listen.
            self._ready_check = PeriodicCallback(self._say_when_ready, READY_CHECK_MS)
            self._ready_check.start()
        super().start()

    def _say_when_ready(self) -> None:
        if preheated(self.kernel_manager):
            self._ready_check.stop()
            Path(self.ready_file).write_text("ready\n")

    def init_settings(self) -> dict:
        settings = super().init_settings()
        settings["allow_remote_access"] = self.allow_remote_access
        settings["local_hostnames"] = list(self.local_hostnames)
        return settings


if __name__ == "__main__":
    ServedVoila.launch_instance()
