"""A Ray cluster of several nodes on this machine's loopback addresses, for the cluster tests and
bench_search.py; also a way to try `explorer.search(..., cluster=...)` by hand:

    .venv/bin/python benchmarks/loopback_cluster.py [--nodes 2] [--cpus 1]

prints the address and the environment a client needs, and stops the cluster on Ctrl-C.

Each node is a `ray start` of its own (the head first, then each other node joins it with
`--address`), in its own process group, with its own temporary folder, CPUs and loopback address:
the head 127.0.0.2, the next nodes 127.0.0.3, 127.0.0.4, ... Ray replaces 127.0.0.1 and
`localhost` by the machine's network address (its nodes are meant to be reached from other
machines), wherever they are given; another address of the loopback network (127.0.0.0/8, all of
it on `lo` on Linux) it keeps, so that every address a node advertises, and so every connection
between the nodes and the client, stays on loopback. Ray's servers still listen on every
interface (they bind the wildcard address).

The cluster authenticates with a token of its own (RAY_AUTH_MODE=token, the token in a file of
the cluster's folder): every node gets it in its environment, and `client_env()` is what a client
process needs in its own.

`close()` stops everything the cluster started: every process of the nodes' process groups and
their descendants (Ray's workers have process groups of their own, and the explorer's compile
workers sessions of their own), then removes the folder. Never `ray stop`, which stops every
Ray process of the machine, other users' included.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

RAY = str(Path(sys.executable).with_name("ray"))
HEAD_IP = "127.0.0.2"
OBJECT_STORE_BYTES = 100 * 2**20         # candidates' Reports are small
START_TIMEOUT_S = 300.0                  # one `ray start`, on a loaded machine
# Ray's raylet gives the node's dashboard agent a fixed 15 s to start (a Python process that
# imports much of Ray), and then aborts the node; on a machine whose cores are busy with other
# work that can take longer, so a node that failed to start is started again.
START_ATTEMPTS = 5
# ...but not at once: a start retried at once meets the same busy cores (CI's test workers and
# their compiles) and fails the same way (the tests' setup errors seen under load). A retry
# waits first, up to QUIET_WAIT_S, for the one-minute load average to fall to
# QUIET_LOAD_PER_CPU per core; a longer wait, never more work at once.
QUIET_WAIT_S = 180.0
QUIET_LOAD_PER_CPU = 1.5
# (Starting the nodes at a raised priority, `nice -n -10` as root, was tried and does not help:
# each node is a session of its own, and with the kernel's autogroups on, a session competes with
# the others as one group whatever its processes' niceness; the agent still got a tenth of a core.)
# Processes a raylet starts that are not workers (they run no task).
AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")


def wait_for_quiet(limit_s: float = QUIET_WAIT_S) -> None:
    """Wait until this machine's one-minute load average is at most QUIET_LOAD_PER_CPU per
    core, or `limit_s` seconds have passed."""
    deadline = time.monotonic() + limit_s
    busy = QUIET_LOAD_PER_CPU * (os.cpu_count() or 1)
    while os.getloadavg()[0] > busy and time.monotonic() < deadline:
        time.sleep(5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Node:
    ip: str
    group: int                            # the process group of its `ray start` daemons
    folder: Path

    def processes(self) -> list[psutil.Process]:
        """Every live process of the node: its daemons and their descendants."""
        found: dict[int, psutil.Process] = {}
        for p in psutil.process_iter():
            try:
                if os.getpgid(p.pid) == self.group:
                    found[p.pid] = p
                    found.update((c.pid, c) for c in p.children(recursive=True))
            except (ProcessLookupError, psutil.Error):
                continue
        return list(found.values())

    def raylet(self) -> psutil.Process | None:
        for p in self.processes():
            try:
                if p.name() == "raylet":
                    return p
            except psutil.Error:
                continue
        return None

    def workers(self, running: str | None = None) -> list[psutil.Process]:
        """The node's Ray worker processes; with `running`, those executing that task now
        (Ray titles a worker `ray::<task>` while it runs one, `ray::IDLE` between)."""
        raylet = self.raylet()
        out = []
        for p in raylet.children() if raylet is not None else []:
            try:
                title = " ".join(p.cmdline())
            except psutil.Error:
                continue
            if title.startswith("ray::") and not title.startswith(AGENTS) \
                    and (running is None or title.startswith(f"ray::{running}")):
                out.append(p)
        return out


class LoopbackCluster:
    """A head on 127.0.0.2 and `nodes - 1` nodes joining it, `cpus` CPUs each."""

    def __init__(self, nodes: int = 2, cpus: int = 1):
        self.folder = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))   # short: socket paths
        self.token_path = self.folder / "auth_token"
        self.token_path.write_text(secrets.token_hex(32))
        self.port = free_port()
        self.nodes: list[Node] = []
        # The last octet of the last address given to a node. A stopped node's address is not
        # given again: the head may list the stopped node as alive for a while, and the two
        # would be one address in what it reports.
        self._octet = int(HEAD_IP.rsplit(".", 1)[1])
        try:
            self.nodes.append(self._start(HEAD_IP, cpus, head=True))
            for _ in range(1, nodes):
                self.add_node(cpus)
        except BaseException:
            self.close()
            raise

    @property
    def address(self) -> str:
        return f"{HEAD_IP}:{self.port}"

    def client_env(self) -> dict[str, str]:
        """The environment a client of this cluster needs: its token."""
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(self.token_path)}

    def add_node(self, cpus: int = 1, env: dict[str, str] | None = None) -> Node:
        """One more node, on the next loopback address not given before; `env` adds to its
        environment (its workers inherit it)."""
        self._octet += 1
        ip = f"127.0.0.{self._octet}"
        node = self._start(ip, cpus, head=False, env=env or {})
        self.nodes.append(node)
        return node

    def _start(self, ip: str, cpus: int, head: bool, env: dict[str, str] | None = None) -> Node:
        """`ray start` the node, again (on fresh ports, once the machine is quieter) when it
        failed (START_ATTEMPTS)."""
        failure = ""
        for attempt in range(START_ATTEMPTS):
            if attempt:
                wait_for_quiet()
            if head:
                self.port = free_port()
            node, failure = self._start_once(ip, cpus, head, env or {})
            if node is not None:
                return node
        raise RuntimeError(f"`ray start` of node {ip} failed {START_ATTEMPTS} times; the "
                           f"last: {failure}")

    def _start_once(self, ip: str, cpus: int, head: bool,
                    env: dict[str, str]) -> tuple[Node | None, str]:
        folder = self.folder / ip
        role = ["--head", f"--port={self.port}", f"--ray-client-server-port={free_port()}",
                f"--dashboard-port={free_port()}", "--include-dashboard=false"] if head \
            else [f"--address={self.address}"]
        ports = [f"--{name}={free_port()}" for name in (
            "node-manager-port", "object-manager-port", "dashboard-agent-listen-port",
            "dashboard-agent-grpc-port", "runtime-env-agent-port", "metrics-export-port")]
        command = [RAY, "start", *role, f"--node-ip-address={ip}", f"--num-cpus={cpus}",
                   f"--temp-dir={folder}", f"--object-store-memory={OBJECT_STORE_BYTES}",
                   "--disable-usage-stats", "--include-log-monitor=false", *ports]
        full_env = {k: v for k, v in os.environ.items()
                    if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN")}
        full_env.update(self.client_env(), **env)
        log_path = self.folder / f"{ip}.log"
        with log_path.open("w") as log:
            proc = subprocess.Popen(command, env=full_env, stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        node = Node(ip, proc.pid, folder)
        try:
            status = proc.wait(START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            status = None
        if status == 0:
            return node, ""
        self._stop(node)
        lines = log_path.read_text(errors="replace").strip().splitlines()
        # The raylet's own reason, when it aborted ("Timed out waiting for file ...").
        fatal = [ln for raylet in folder.glob("session_*/logs/raylet.out")
                 for ln in raylet.read_text(errors="replace").splitlines() if " C " in ln]
        return None, (f"exit status {status}: {lines[-1] if lines else '(no output)'}"
                      + (f"; the raylet: {fatal[-1][-300:]}" if fatal else ""))

    def stop_node(self, node: Node) -> None:
        self._stop(node)
        self.nodes.remove(node)

    @staticmethod
    def _stop(node: Node) -> None:
        """SIGKILL every process of the node, then wait for them to go (they hold its ports)."""
        procs = node.processes()
        for p in procs:
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass
        psutil.wait_procs(procs, timeout=30)

    def close(self) -> None:
        for node in reversed(self.nodes):
            self._stop(node)
        self.nodes.clear()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> LoopbackCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--cpus", type=int, default=1)
    args = ap.parse_args()
    t0 = time.perf_counter()
    with LoopbackCluster(args.nodes, args.cpus) as cluster:
        env = " ".join(f"{k}={v}" for k, v in cluster.client_env().items())
        print(f"{len(cluster.nodes)} nodes up in {time.perf_counter() - t0:.0f} s: "
              f"{', '.join(n.ip for n in cluster.nodes)}\n"
              f"client: {env} python -c \"import explorer; print(explorer.search('mlp', "
              f"mesh='data=2,model=4', target='h100-8', compile_for='cpu', "
              f"cluster='{cluster.address}').text())\"\nCtrl-C stops it.")
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
