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
"""

from __future__ import annotations

from traitlets import Bool, List, Unicode
from voila.app import Voila


class ServedVoila(Voila):
    """Voila whose Host check is the Jupyter server's (`ServerApp.allow_remote_access` and
    `ServerApp.local_hostnames`), off only when asked for."""

    allow_remote_access = Bool(False, config=True, help=(
        "Serve requests whatever host their Host header names; off: only loopback addresses "
        "and local_hostnames."))
    local_hostnames = List(Unicode(), ["localhost"], config=True, help=(
        "Host names, besides loopback addresses, that a request's Host may name."))

    def init_settings(self) -> dict:
        settings = super().init_settings()
        settings["allow_remote_access"] = self.allow_remote_access
        settings["local_hostnames"] = list(self.local_hostnames)
        return settings


if __name__ == "__main__":
    ServedVoila.launch_instance()
