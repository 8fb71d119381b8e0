"""Start Voila on the app notebook: what `sharding-explorer app` runs.

Voila runs in its own process group, so that SIGTERM or Ctrl-C to `sharding-explorer app`
stops Voila and its kernels (each kernel's compile workers exit when their kernel's socket
closes).

Access (docs/reliability.md, "Serving to a room"): bound beyond loopback, the app asks for a
token, printed in its URL; on loopback it serves only requests whose Host is the machine's own
name (served_voila.py: no DNS rebinding), and a websocket only from its own pages' Origin. The
kernels keep their own errors off the pages (KERNEL_CONFIG), and a page or a link is held to
the served limits (explorer/_src/spec/bounds.py) that `voila_environment` sets.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager

from explorer._src.errors import InputError
from explorer._src.spec.bounds import SERVED_DEFAULTS

# Voila's own default port; when it is taken, a free one is used and printed.
DEFAULT_PORT = 8866

# Idle kernels (each holds compile workers) are culled; a cell that hangs is stopped. A kernel
# whose page is open is never culled (cull_connected stays False). A closed page's kernel should
# be shut down by the page, but Voila refuses that request ("'_xsrf' argument missing", voila
# issue 1458), so the culler is what frees it: after 10 idle minutes, which on Binder's 2 GB is
# the difference between one abandoned tab and several.
VOILA_LIMITS = [
    "--MappingKernelManager.cull_idle_timeout=600",    # seconds without activity
    "--MappingKernelManager.cull_interval=120",
    "--VoilaExecutor.timeout=300",                     # seconds per notebook cell
    # Seconds to wait, after a cell's reply, for the outputs it sent. nbclient's default, 4 s,
    # is short on a loaded machine (several pages' kernels starting at once on 2 cores): the
    # app cell's widget output then came late, was skipped, and its page never showed the app.
    "--VoilaExecutor.iopub_timeout=120",
    "--VoilaConfiguration.show_tracebacks=False",
]

# The first result on a page load (docs/performance.md, "First result on a page load"):
# - two preheated kernels wait with the app notebook already executed, so a page load skips
#   the kernel start, the imports and the first result (Voila refills the pool after each use).
#   Two, not one: a reload (or a second visitor) within seconds of a load found the pool empty
#   until its refill had started and run the notebook, and waited for a cold kernel (measured:
#   14.7 s where a warm load took 4.1 s, 3 s after it; docs/performance.md, "Reloads in quick
#   succession"). The spare costs one idle kernel's memory;
# - the culler spares the waiting kernels (they have no page connected, so the stock culler would
#   stop it after cull_idle_timeout and leave the pool empty until the next load);
# - the pool is refilled 5 s after a page takes its kernel, not 1 s: the refill (a kernel start
#   and a run of the notebook) then no longer competes for the CPU with the page drawing its
#   first figures (measured: 1 s of the 4 s to the first heatmap on 2 cores);
# - the page loads no JupyterLab extension it does not use: the app draws plotly figures as
#   widgets (explorer._src.ui.figure), so the 4.8 MB jupyterlab-plotly renderer is left out.
VOILA_PREHEAT = [
    "--preheat_kernel=True",
    "--pool_size=2",
    "--VoilaConfiguration.multi_kernel_manager_class="
    "explorer._src.ui.serve.PoolSparingKernelManager",
    "--VoilaKernelManager.fill_delay=5",      # the class Voila's factory builds on the above
]
# The lab extensions a Voila page of the app never uses, denied item by item (a list): the
# plotly renderer (above); jupyter-server-proxy's launcher (a JupyterLab panel; its module fails
# to load in Voila anyway) and the pygments theme (Voila styles its own code cells).
# Kernels talk to Voila over Unix sockets, not TCP ports: a port jupyter_client picked for a
# kernel could be taken by another process before the kernel bound it (two servers' kernels
# starting at once on one machine: a kernel's heartbeat died with "Address already in use" and
# its page never loaded). zmq has no Unix sockets on Windows: TCP there.
VOILA_KERNELS = [] if os.name == "nt" else ["--KernelManager.transport=ipc"]
VOILA_PAGE = [f"--VoilaConfiguration.extension_denylist={name}" for name in (
    "jupyterlab-plotly", "@jupyterhub/jupyter-server-proxy", "jupyterlab_pygments")]


# The served kernels' IPython settings (kernel_profile). ipykernel logs a comm it could not
# open ("Exception opening comm with target", with the traceback) to the kernel's stderr, which
# it sends to every page on the kernel: a page that forged a comm_open got the kernel's
# traceback. Here that log goes to the kernel's own stderr, Voila's log, and not to the page:
# the comm loggers write to sys.__stderr__, and fd-level output is not captured (had it been,
# sys.__stderr__ too would reach the page). The app's compiles print in their workers, whose
# output the compile pool reads; nothing the app shows comes from the kernel's file descriptors.
_KERNEL_LOG = {"class": "logging.StreamHandler", "stream": "ext://sys.__stderr__"}
KERNEL_CONFIG = {"IPKernelApp": {
    "capture_fd_output": False,
    "logging_config": {
        "handlers": {"served_kernel_log": _KERNEL_LOG},
        "loggers": {name: {"handlers": ["served_kernel_log"], "propagate": False}
                    for name in ("ipykernel.comm", "comm", "ipywidgets")}}}}


def kernel_profile(folder: Path) -> Path:
    """`folder` made the served kernels' IPython directory (their IPYTHONDIR): KERNEL_CONFIG
    as its default profile's ipython_kernel_config.json. Returns `folder`."""
    profile = folder / "profile_default"
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "ipython_kernel_config.json").write_text(json.dumps(KERNEL_CONFIG, indent=1))
    return folder


def voila_environment(ipython_dir: Path, environ: Mapping[str, str] | None = None
                      ) -> dict[str, str]:
    """What the served app's Voila and kernels get in their environment besides this
    process's: the kernels' IPython directory (`kernel_profile`) and the served limits a page
    or a link is held to (spec/bounds.py; SERVED_DEFAULTS for each the operator did not set in
    `environ`). The Ray clusters the Suggest tab offers come from the operator's own
    EXPLORER_CLUSTERS, passed on as it is."""
    environ = os.environ if environ is None else environ
    return {"IPYTHONDIR": str(ipython_dir),
            **{k: v for k, v in SERVED_DEFAULTS.environment().items() if k not in environ}}


class PoolSparingKernelManager(AsyncMappingKernelManager):
    """The stock kernel manager, except that the culler leaves Voila's preheated kernels
    (`_pools`, added by Voila's kernel manager factory on top of this class) alone."""

    async def cull_kernel_if_idle(self, kernel_id):
        for pool in getattr(self, "_pools", {}).values():
            for task in pool:
                if task.done() and not task.cancelled() and task.exception() is None \
                        and task.result().get("kernel_id") == kernel_id:
                    return None
        return await super().cull_kernel_if_idle(kernel_id)


def app_notebook() -> Path:
    """notebooks/app.ipynb of a source checkout, or the copy shipped inside the wheel."""
    here = Path(__file__).resolve()
    for candidate in (here.parents[3] / "notebooks" / "app.ipynb", here.parent / "app.ipynb"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError("the app notebook is missing from this installation")


def one_cell_notebook(source: str, path: Path) -> Path:
    """Write a notebook of one code cell holding `source` to `path`, for Voila to serve (the
    app on a user's own code, in the browser tests, the benchmarks and the screenshots)."""
    path.write_text(json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {},
                   "outputs": [], "source": source.splitlines(keepends=True)}],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                    "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5}))
    return path


def is_loopback(ip: str) -> bool:
    if ip == "localhost":
        return True
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return False


# A host name as RFC 1123 writes one: dot-separated labels of letters, digits and inner hyphens.
_HOST_NAME = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*\.?")

# Seconds a host name gets to resolve. getaddrinfo has no timeout of its own and, for a name
# that is not in /etc/hosts, asks DNS, which on a machine without a network can wait for its
# resolver's full retry schedule (30 s and more); a name that takes longer than this is refused.
RESOLVE_TIMEOUT_S = 2.0


def check_listen_address(ip: str) -> str:
    """`ip` if Voila can listen on it: an IPv4 or IPv6 address, `localhost`, or a host name
    this machine resolves within RESOLVE_TIMEOUT_S; else an InputError naming it (tornado's
    own failure is a socket.gaierror traceback from inside Voila's process)."""
    if ip == "localhost":
        return ip
    try:
        ipaddress.ip_address(ip)
        return ip
    except ValueError:
        pass
    if len(ip) <= 253 and _HOST_NAME.fullmatch(ip) and _resolves(ip):
        return ip
    raise InputError(f"--ip {ip!r} is not an IP address or a host name this machine resolves; "
                     "e.g. 127.0.0.1, 0.0.0.0 or ::1")


def _resolves(name: str) -> bool:
    """Whether getaddrinfo finds `name` within RESOLVE_TIMEOUT_S. The lookup runs on a daemon
    thread so that a stuck one is abandoned (it cannot be cancelled) and never delays exit."""
    found: list[bool] = []

    def look_up():
        try:
            found.append(bool(socket.getaddrinfo(name, None)))
        except OSError:                 # socket.gaierror: not found
            found.append(False)

    thread = threading.Thread(target=look_up, name=f"resolve {name}", daemon=True)
    thread.start()
    thread.join(RESOLVE_TIMEOUT_S)
    return bool(found and found[0])


def port_is_free(port: int, ip: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        try:
            s.bind((ip, port))
        except OSError:
            return False
        return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_serving(url: str, proc: subprocess.Popen, timeout: float = 240) -> None:
    """Return once `url` answers over HTTP, with any status (the server is up). RuntimeError
    when `proc`, the server's process, exits first or `timeout` seconds pass (a loaded 2-core
    machine can take minutes to start Voila)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=5)
            return
        except urllib.error.HTTPError:      # any HTTP answer means the server is up
            return
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"the server exited ({proc.returncode}) before {url} "
                                   "answered") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not answer within {timeout:.0f} s") from None
            time.sleep(0.3)


def stop_server(proc: subprocess.Popen, timeout: float = 20) -> None:
    """Stop a server started by a test or a benchmark: SIGTERM, so that it shuts its kernels
    down, and SIGKILL if it has not exited within `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def voila_command(port: int, ip: str = "127.0.0.1", token: str | None = None,
                  notebook: Path | None = None, preheat: bool = True,
                  base_url: str | None = None, behind_proxy: bool = False,
                  ready_file: Path | None = None) -> list[str]:
    """Voila serving `notebook` (the app notebook by default), asking for `token` if given;
    `preheat=False` leaves out the preheated kernel (each page load then starts its own, as
    Voila's server extension on Binder does). `base_url`: the path Voila serves under, for a
    proxy that forwards the full path (binder/jupyter_server_config.py); `/` when None.

    Voila runs as `served_voila.ServedVoila`, which checks each request's Host header: on
    loopback without a token only 127.0.0.1, ::1 and localhost are served (no DNS rebinding).
    The check is off where the app is reached under other names: with a token (bound beyond
    loopback, where serve() always sets one) and `behind_proxy` (jupyter-server-proxy, which
    forwards the public Host; the Jupyter server in front checks Host, Origin and its login).
    `ready_file`: written once Voila listens and its preheated kernels have run the notebook
    (served_voila.ServedVoila.ready_file)."""
    ready = [f"--ServedVoila.ready_file={ready_file}"] if ready_file else []
    access = [f"--Voila.token={token}"] if token else []
    prefix = [f"--Voila.base_url={base_url}"] if base_url else []
    remote = ["--ServedVoila.allow_remote_access=True"] if token or behind_proxy else []
    return [sys.executable, "-m", "explorer._src.ui.served_voila",
            str(notebook or app_notebook()), "--no-browser", f"--port={port}",
            f"--Voila.ip={ip}", *prefix, *access, *remote, *ready, *VOILA_LIMITS, *VOILA_KERNELS,
            *VOILA_PAGE, *(VOILA_PREHEAT if preheat else [])]


def serve(port: int | None = None, ip: str = "127.0.0.1", token: bool | None = None) -> int:
    """Run Voila until it exits, or until this process gets SIGTERM or SIGINT (Ctrl-C), which
    stop Voila's whole process group. Returns Voila's exit status (0 when stopped).

    `port`: None for DEFAULT_PORT, or a free port when that one is taken. `token`: require a
    token in the URL; None means "only when bound beyond loopback". An `ip` Voila cannot
    listen on is an InputError, raised before anything starts.

    The URL is printed (the first line on stdout) once the server answers on its port and its
    preheated kernels have run the app notebook (`wait_for_ready`), so that the page it names
    loads at once; meanwhile stderr says the app is starting."""
    check_listen_address(ip)
    if port is None:
        port = DEFAULT_PORT if port_is_free(DEFAULT_PORT, ip) else free_port()
    secret = secrets.token_urlsafe(24) if (token or (token is None and not is_loopback(ip))) \
        else None
    query = f"?token={secret}" if secret else ""
    print(f"sharding-explorer app: starting on port {port} (the address follows once the "
          "first page is ready)", file=sys.stderr, flush=True)
    kernels = Path(tempfile.mkdtemp(prefix="sharding-explorer-app-"))
    ready = kernels / "ready"
    proc = subprocess.Popen(voila_command(port, ip, secret, ready_file=ready),
                            start_new_session=True, preexec_fn=_die_with_parent,
                            env={**os.environ, **voila_environment(kernel_profile(kernels))})
    stop_requested: list[float] = []
    announced = False
    started = time.monotonic()

    def stop(signum, frame):
        # Only signal here: waiting inside a handler that interrupted proc.wait() would
        # deadlock on Popen's wait lock. The loop below escalates if Voila lingers.
        if not stop_requested:
            stop_requested.append(time.monotonic())
            _signal_group(proc.pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while True:
            try:
                code = proc.wait(timeout=0.5 if announced else READY_POLL_S)
                break
            except subprocess.TimeoutExpired:
                if not announced and not stop_requested and is_ready(
                        ready, ip, port, time.monotonic() - started):
                    announced = True
                    print(f"sharding-explorer app: http://{ip}:{port}/{query}", flush=True)
                if stop_requested and time.monotonic() - stop_requested[0] > STOP_GRACE_S:
                    _signal_group(proc.pid, signal.SIGKILL)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        # Kernels Voila left behind share its process group: stop them too.
        _signal_group(proc.pid, signal.SIGKILL)
        shutil.rmtree(kernels, ignore_errors=True)
    return 0 if stop_requested or code in (-signal.SIGTERM, -signal.SIGINT) else code


# How often `serve` looks whether the server is ready, until it prints the URL.
READY_POLL_S = 0.1
# A server whose preheated kernels have not run the notebook after this long (a kernel that
# died, a machine under heavy load) has its URL printed anyway once it answers on its port: a
# page then starts its own kernel, slowly, which beats no address at all.
PREHEAT_WAIT_S = 300.0


def is_ready(ready_file: Path, ip: str, port: int, waited_s: float) -> bool:
    """Whether the app's URL may be printed: the server accepts a connection on `port`, and it
    has written `ready_file` (its preheated kernels have run the notebook) or `waited_s` is
    past PREHEAT_WAIT_S."""
    return (ready_file.exists() or waited_s > PREHEAT_WAIT_S) and accepts(ip, port)


def accepts(ip: str, port: int) -> bool:
    """Whether a server listening on `ip` takes a TCP connection on `port` (an unspecified
    address, 0.0.0.0 or ::, is reached on loopback)."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(ip, ip)
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


# Seconds Voila gets to stop its kernels after SIGTERM before its group is killed.
STOP_GRACE_S = 10.0


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _die_with_parent() -> None:
    """In the Voila child, before exec: SIGTERM when `sharding-explorer app` dies, even by
    SIGKILL, so that no Voila outlives the command that started it (Linux only)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)          # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass
