"""How a search reaches a Ray cluster: the connection (the address, the cluster's token, this
process's explorer shipped to the workers as a runtime_env) and the check, before any
candidate is sent, that every node can compile.

Ray (>= 2.52) authenticates the members of a cluster with a token when RAY_AUTH_MODE=token,
which `ray start` also turns on by itself where ~/.ray/auth_token exists. The token is found,
in order, in RAY_AUTH_TOKEN, in the file RAY_AUTH_TOKEN_PATH names, or in ~/.ray/auth_token.
Ray sends it to an address given explicitly only when RAY_AUTH_MODE=token is set (it never
sends a local token to an arbitrary address by itself); the explorer keeps that rule and says
so when a connection fails.

The check runs one small Ray task on each node with a CPU: a fresh interpreter there, started
as a compile worker is, imports the explorer and jax, and reports jax's version. A node that
cannot, or has another jax (the readers parse the HLO of the caller's jax), fails the search
at once with one message naming it, instead of failing every candidate Ray sends there; a node
that does not answer in time (PROBE_TIMEOUT_S by default) fails it too, instead of the search
waiting on it.

The address is checked before any of this (`check_address`), with the same rule for the API's
`cluster=` and the addresses a served app offers its pages (`configured_clusters`: the
server's configuration, never a page's text); and before Ray is asked to connect to it,
something must accept a TCP connection there (`probe_address`), because Ray's GCS client
retries an address where nothing listens for many minutes, past any `budget_s`, and holds up a
SIGTERM meanwhile.

Ray is imported by the caller (cluster.py) and passed in, only when a cluster is asked for.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from explorer._src.errors import ExplorerError, InputError
from explorer._src.spec.bounds import show

# The explorer package itself: what the runtime_env ships.
EXPLORER_DIR = Path(__file__).resolve().parents[2]

# How long a node may take to answer the check: start a Ray worker, unpack the shipped
# explorer, import jax in a fresh interpreter (seconds each; minutes on a loaded machine).
PROBE_TIMEOUT_S = 120.0

# What the check runs on a node, in an interpreter started as a compile worker is. When the
# check gives up on a node it kills the Ray worker running this; a watchdog then ends this
# interpreter too (its parent gone), so that an import that hangs leaves nothing running there.
_PROBE = """\
import os, threading, time
parent = os.getppid()
def watch():
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(3)
threading.Thread(target=watch, daemon=True).start()
import explorer, jax
print(jax.__version__)
"""

# A Ray cluster's address without a scheme: HOST:PORT (a name, an IPv4 address, or an IPv6
# address in brackets). With a scheme (ray://HOST:PORT, Ray Client; other schemes Ray's plugins
# read) the rest is Ray's to parse.
_HOST_PORT = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9._-]*):(\d{1,5})")
_WITH_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
ADDRESS_FORMS = "'HOST:PORT', 'ray://HOST:PORT', 'auto' or 'local'"

# The check that something listens at the address before Ray connects (probe_address): each try
# of a TCP connection waits up to CONNECT_TIMEOUT_S; tries go on for up to CONNECT_WINDOW_S in
# all, so that a loaded machine or network does not fail a search spuriously. A refusal (nothing
# bound to the port) is the host's own answer, so it is tried again only for REFUSED_WINDOW_S, in
# case the head is still starting.
CONNECT_TIMEOUT_S = 3.0
CONNECT_WINDOW_S = 10.0
REFUSED_WINDOW_S = 2.0

# (Ray job, node) pairs found able to compile, on connections the caller holds (which outlive
# a search, so each node is checked once per connection rather than once per search).
_checked: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class ClusterSize:
    """What the node check found: the alive nodes with a CPU to compile on, and their CPUs."""

    nodes: int
    cpus: int

    def text(self) -> str:
        """'2 nodes, 4 CPUs'."""
        return (f"{self.nodes} node{'s' if self.nodes != 1 else ''}, "
                f"{self.cpus} CPU{'s' if self.cpus != 1 else ''}")


def check_address(value, instead: str = "None for this machine's worker pool") -> str:
    """`value` as a Ray address, stripped: 'HOST:PORT' (what `ray start --head` printed),
    'ray://HOST:PORT' (Ray Client), 'auto' (the cluster this machine belongs to) or 'local'
    (Ray in this process). Anything else is an InputError naming it and these forms, before
    any connection is tried; `instead` says how to ask for no cluster where the value came
    from."""
    text = value.strip() if isinstance(value, str) else None
    if text in ("auto", "local"):
        return text
    if text and _WITH_SCHEME.fullmatch(text) and not text.startswith("ray://"):
        return text                      # another scheme: Ray's plugin for it parses the rest
    # HOST:PORT, alone or after ray:// (Ray Client's address has a port too: 10001 by default).
    found = _HOST_PORT.fullmatch(text.removeprefix("ray://")) if text else None
    if found is None or not 0 < int(found.group(1)) < 65536:
        raise InputError(f"cluster {show(value)} is not a Ray address: give {ADDRESS_FORMS}, "
                         f"or {instead}")
    return text


# The Ray clusters a served app offers its pages (the Suggest tab's cluster choice): set by the
# server's operator, comma-separated, e.g. EXPLORER_CLUSTERS=ray://head:10001,10.0.0.5:6379
# (`sharding-explorer app --cluster ADDR` sets it for the app's kernels). A page never names an
# address: Ray's client unpickles what its server sends, so a page that could point the kernel
# at a server of its own could run code as the server's user.
CLUSTERS_ENV = "EXPLORER_CLUSTERS"


def configured_clusters(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The addresses CLUSTERS_ENV lists, each checked by `check_address`, in order, without
    repeats; () when it is unset or empty. A malformed entry is an InputError naming it."""
    text = (os.environ if environ is None else environ).get(CLUSTERS_ENV, "")
    found = [check_address(item, instead=f"remove it from {CLUSTERS_ENV}")
             for item in text.split(",") if item.strip()]
    return tuple(dict.fromkeys(found))


def runtime_env() -> dict[str, Any]:
    """The runtime_env that ships this process's explorer to every Ray worker: Ray unpacks it
    on each node and puts it first on the workers' PYTHONPATH, ahead of any explorer the node
    has, so that every node compiles with the caller's code."""
    return {"py_modules": [str(EXPLORER_DIR)]}


def connect(ray, address: str) -> bool:
    """Connect this process to the Ray cluster at `address` with the explorer's runtime_env.
    A connection this process already holds (its own `ray.init(...)`, with its options) is
    used as it is. True when this call connected, so that the caller disconnects."""
    if ray.is_initialized():
        return False
    probe_address(address)
    try:
        if address == "local":
            # Ray in this process, on this machine: its workers import this explorer already.
            ray.init(log_to_driver=False, include_dashboard=False)
        else:
            reread_auth()
            # Connecting to a running cluster takes no options that shape a cluster.
            ray.init(address=address, log_to_driver=False, runtime_env=runtime_env())
    # Ray raises ConnectionError, RuntimeError, ValueError, its AuthenticationError and plain
    # Exceptions here; each means the same to the caller.
    except Exception as e:
        raise ExplorerError(f"cannot connect to the Ray cluster at {show(address)}: "
                            f"{gist(e)}. {_what_to_try()}") from None
    return True


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a 'HOST:PORT' or 'ray://HOST:PORT' address (an IPv6 host without its
    brackets); None for 'auto', 'local' and other schemes, whose host Ray finds or parses."""
    found = _HOST_PORT.fullmatch(address.removeprefix("ray://"))
    if found is None:
        return None
    host = found.group(0)[: -len(found.group(1)) - 1]
    return host.removeprefix("[").removesuffix("]"), int(found.group(1))


def probe_address(address: str, window: float = CONNECT_WINDOW_S,
                  refused_window: float = REFUSED_WINDOW_S) -> None:
    """Check that something accepts a TCP connection at the host and port of `address` (the
    GCS of 'HOST:PORT', the Ray Client server of 'ray://HOST:PORT'), trying again for up to
    `window` seconds (`refused_window` after a refusal); else raise one ExplorerError naming
    the address, why (refused, timed out, unreachable, a name that does not resolve) and what to
    start or give instead. 'auto', 'local' and other schemes are Ray's to find: not checked."""
    target = _host_port(address)
    if target is None:
        return
    start, delay = time.monotonic(), 0.2
    while True:
        left = window - (time.monotonic() - start)
        try:
            with socket.create_connection(target, timeout=max(0.5, min(CONNECT_TIMEOUT_S, left))):
                return
        except OSError as e:
            error = e
        limit = refused_window if _definite(error) else window
        if time.monotonic() - start + delay >= limit:
            break
        time.sleep(delay)
        delay = min(2 * delay, 1.0)
    _host, port = target
    if address.startswith("ray://"):
        start_it = (f"start the head with `ray start --head` (its Ray Client server listens on "
                    f"10001; `--ray-client-server-port={port}` for this port)")
    else:
        start_it = f"start the head with `ray start --head --port={port}`"
    raise ExplorerError(
        f"no Ray cluster answers at {show(address)}: nothing accepted a TCP "
        f"connection there ({_why(error, port)}; {gist(error)}). Check the address, or "
        f"{start_it}, or give the address `ray status` prints on a machine of the cluster "
        "(HOST:6379), a Ray Client address ray://HOST:10001, 'auto' for the cluster this "
        "machine belongs to, or 'local' to start one in this process")


def _definite(error: OSError) -> bool:
    """The host's own answer, not a loss or delay on the way: refused, or no such name."""
    return isinstance(error, ConnectionRefusedError) or (
        isinstance(error, socket.gaierror) and error.errno == socket.EAI_NONAME)


def _why(error: OSError, port: int) -> str:
    if isinstance(error, ConnectionRefusedError):
        return f"connection refused: nothing is listening on port {port}"
    if isinstance(error, TimeoutError):
        return "timed out: no answer from the host (down, or a firewall drops the connection)"
    if isinstance(error, socket.gaierror):
        return "the host name does not resolve"
    return "the host cannot be reached"


def reread_auth() -> None:
    """Ray reads RAY_AUTH_MODE and the token once per process and keeps them. Read them again,
    so that the connection sends what the environment says now (a notebook that set the token
    after an earlier connection; a test's cluster after another's)."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config
    except ImportError:        # a Ray without token authentication (before 2.52)
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _what_to_try() -> str:
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
        token = ("This process sends a token (RAY_AUTH_MODE=token): check that it is the "
                 "cluster's (`ray get-auth-token` on the head prints it). ")
    else:
        token = ("If the cluster authenticates with a token (`ray start` turns this on where "
                 "~/.ray/auth_token exists), set RAY_AUTH_MODE=token and give this process the "
                 "cluster's token in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token "
                 "(`ray get-auth-token` on the head prints it). ")
    return (token + "Give the address `ray start --head` printed (HOST:6379) from a machine of "
            "the cluster, a Ray Client address ray://HOST:10001, 'auto' for the cluster this "
            "machine belongs to, or 'local' to start one in this process")


def check_nodes(ray, address: str, reuse: bool,
                timeout: float = PROBE_TIMEOUT_S) -> ClusterSize:
    """Check that every alive node with a CPU can compile (see the module's docstring) and
    return how many there are and their CPUs. `reuse`: the connection outlives this search, so
    a node found able once is not checked again. `timeout`: seconds to wait for every node's
    answer. Raises one ExplorerError naming each node that cannot, or did not answer."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n for n in ray.nodes()
             if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
    job = ray.get_runtime_context().get_job_id()
    todo = [n for n in nodes if not (reuse and (job, n["NodeID"]) in _checked)]
    problems = [] if nodes else ["no node has a CPU to compile on (`ray status` lists them)"]
    # No CPU asked for: the check never waits behind another job's tasks for a free one.
    probe = ray.remote(num_cpus=0, max_retries=0)(node_environment)
    refs = {probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        n["NodeID"], soft=False)).remote(timeout): n for n in todo}
    ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=timeout) if refs \
        else ([], [])
    want = _jax_version()
    for ref in ready:
        node = refs[ref]
        problem = _unfit(ray, ref, want)
        if problem:
            problems.append(f"node {node['NodeManagerAddress']}: {problem}")
        elif reuse:
            _checked.add((job, node["NodeID"]))
    for ref in late:
        ray.cancel(ref, force=True)
        problems.append(f"node {refs[ref]['NodeManagerAddress']} did not answer within "
                        f"{timeout:g} s (its Ray workers could not start or unpack the "
                        "explorer, or importing the explorer and jax there did not finish; see "
                        "`ray status` and the node's Ray logs)")
    if problems:
        raise ExplorerError(
            f"cannot compile on the Ray cluster at {show(address)}: {'; '.join(problems)}. "
            f"Each node needs jax {want or '(the version this process has)'} and the "
            "explorer's dependencies (this process ships the explorer itself): "
            f"pip install 'sharding-explorer[cluster]'{f' jax=={want}' if want else ''} on "
            "every node, or start the nodes from an image that has them (docs/search.md)")
    return ClusterSize(len(nodes), int(sum(n["Resources"]["CPU"] for n in nodes)))


def _unfit(ray, ref, want: str) -> str:
    """Why the node that answered `ref` cannot compile for this process, or ''."""
    try:
        found, error = ray.get(ref)
    except Exception as e:      # the runtime_env could not be set up, the explorer imported
        return gist(getattr(e, "cause", None) or e)
    if error:
        return f"cannot import the explorer and jax: {error}"
    if want and found != want:
        return (f"has jax {found}, this process jax {want} (the explorer reads the HLO of the "
                "caller's jax)")
    return ""


def node_environment(timeout: float) -> tuple[str, str]:
    """On a node, as a Ray task: (jax's version, '') when a fresh interpreter, started as a
    compile worker is (this Python, this PYTHONPATH), imports the explorer and jax; else
    ('', why not)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "", f"{type(e).__name__}: {e}"
    if done.returncode != 0:
        lines = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
        return "", lines[-1] if lines else f"exit status {done.returncode}"
    return done.stdout.split()[-1], ""


def _jax_version() -> str:
    try:
        return importlib.metadata.version("jax")
    except importlib.metadata.PackageNotFoundError:
        return ""


def gist(e: BaseException) -> str:
    """An exception in one line: its type and the first line of its message (Ray's carry
    tracebacks and help text after it)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else '(no message)'}"[:400]
