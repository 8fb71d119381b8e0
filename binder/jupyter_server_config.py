"""Jupyter server settings on Binder (binder/postBuild copies this file to ~/.jupyter/).

The app at `<server>/explorer-app/`: on the first request to that path, jupyter-server-proxy
starts the standalone Voila that `sharding-explorer app` runs (explorer._src.ui.serve.voila_command:
one preheated kernel with the app notebook already executed, refilled 5 s after a page takes
it, the idle-kernel culler that spares it, no unused JupyterLab extension, the served limits and
the kernels' settings of `voila_environment`), then forwards every request and websocket to it
behind the Jupyter server's own login. The Jupyter server checks each request's Host, Origin
and login before the proxy forwards it, with the public Host (hub.mybinder.org's), so Voila's
own Host check is off here (`behind_proxy`): Voila listens on the container's loopback only.
Later page loads take the preheated kernel instead of starting one and executing the notebook,
as the server extension's `voila/render/notebooks/app.ipynb` does (docs/performance.md, "First
result on a page load").

The first visit therefore starts Voila and waits for its preheated kernel; Voila then lives as
long as the Jupyter server. Starting it earlier, from binder/start, was left out: an entry with
a command starts a process of its own and cannot attach to one already running, and an entry
without one (a fixed port) would leave nothing to restart Voila if it stopped, and would hold a
preheated kernel (memory, of Binder's 2 GB) in every session, also those that open only the
tutorials.
"""

# The path under the Jupyter server's base URL (the app badge's `urlpath=explorer-app/`).
APP_PATH = "explorer-app"

# Voila's own login cookie. By default it is named after the request's host and port, which
# behind the proxy are the Jupyter server's: Voila would then read the Jupyter server's login
# cookie, find it invalid (signed with another secret), clear it and set its own, and the
# Jupyter server would answer the page's next requests (its scripts, its websocket) with a
# redirect to its login page (measured with a token-protected server, as `jupyter lab` runs).
VOILA_COOKIE = "--IdentityProvider.cookie_name=sharding-explorer-app"

# Seconds Voila gets to answer HTTP after it is started (its imports; a fresh Binder container
# reads them from a cold disk). The proxy's default, 5 s, is too short for that.
START_TIMEOUT_S = 60


def voila_app_command(port: int, base_url: str) -> list[str]:
    """The proxy calls this with the port it chose and the Jupyter server's base URL (`/` here,
    `/user/<name>/` on Binder). Voila serves its pages and its websockets under the proxied
    path itself (`absolute_url` below), so that the links in its pages carry the prefix."""
    # Imported on the first request, not at server start: the import (ipywidgets, plotly) costs
    # the server 0.7 s and 30 MB, which a learner who opens only the tutorials need not pay.
    from explorer._src.ui.serve import voila_command

    return [*voila_command(port, base_url=f"{base_url}{APP_PATH}/", behind_proxy=True),
            VOILA_COOKIE]


def voila_app_environment() -> dict[str, str]:
    """What `sharding-explorer app` gives its Voila besides its own environment: the kernels'
    IPython settings (a comm error's traceback stays in the log, off the page) in a folder of
    their own, and the served limits a page or a link is held to (explorer/_src/spec/bounds.py:
    a compile's time limit, the program's size)."""
    import tempfile
    from pathlib import Path

    from explorer._src.ui.serve import kernel_profile, voila_environment

    return voila_environment(kernel_profile(Path(tempfile.mkdtemp(prefix="explorer-app-"))))


def server_proxy_servers() -> dict:
    return {
        APP_PATH: {
            "command": voila_app_command,
            "environment": voila_app_environment,
            # The request's full path goes to Voila (its routes carry the prefix): the proxy's
            # readiness probe, a GET of `/`, then gets Voila's 404 instead of rendering the app
            # notebook in a kernel that no page would ever connect to.
            "absolute_url": True,
            "timeout": START_TIMEOUT_S,
            "launcher_entry": {"title": "Sharding explorer app"},
        },
    }


c = get_config()  # noqa: F821 -- provided by the Jupyter server when it loads this file
c.ServerProxy.servers = server_proxy_servers()
