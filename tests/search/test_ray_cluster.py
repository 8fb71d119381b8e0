"""explorer.search on a real Ray cluster: a head and a second node, each `ray start`ed as a
process of its own on a loopback address of this machine (127.0.0.2, 127.0.0.3; see
benchmarks/loopback_cluster.py), with their own CPU each and the cluster's own token.

The second node's own `explorer` is broken on purpose (a package on its PYTHONPATH that refuses
to import), so that every candidate it compiles shows that the caller's explorer was shipped to
it. Its compiles of the user function below are slow (it sleeps while traced there), so that a
compile is surely running on it when the fault test kills its workers.

The ranking on the cluster equals the local search's; killing the second node's workers in the
middle of a search loses no candidate; progress and cancel work as they do locally; a client
without the cluster's token, and a node without jax, each get one message saying what to do.
"""

import os
import sys
import threading
import time
from importlib.metadata import version
from pathlib import Path

import pytest

import explorer
from explorer import CandidateStatus, SearchPhase, StopReason, TensorSpec
from explorer._search.connect import reread_auth
from explorer.errors import ExplorerError

ray = pytest.importorskip("ray")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from loopback_cluster import LoopbackCluster  # noqa: E402

# Two `ray start`ed nodes and six searches on them: minutes.
pytestmark = [pytest.mark.cluster, pytest.mark.slow]

MLP = dict(mesh="data=2,model=4", target="h100-8", compile_for="cpu", prune=False)
X, W = TensorSpec("x", (256, 64)), TensorSpec("w", (64, 64))
FUNCTION = dict(mesh="data=2,model=4", target="h100-8", compile_for="cpu", tensors=["x"],
                mesh_shapes=False, prune=False)
SLOW_S = 4.0          # how long each trace of the function sleeps on the second node


def matmul_then_relu(x, w):
    import jax

    time.sleep(float(os.environ.get("SLOW_TRACE_S", "0")))
    return jax.nn.relu(x @ w)


def _broken_package(folder: Path, name: str, why: str) -> Path:
    (folder / name).mkdir(parents=True)
    (folder / name / "__init__.py").write_text(f"raise ImportError({why!r})\n")
    return folder


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    own = _broken_package(tmp_path_factory.mktemp("own"), "explorer",
                          "this node's own explorer: a search must ship the caller's")
    with pytest.MonkeyPatch.context() as env, LoopbackCluster(nodes=1, cpus=1) as c:
        c.add_node(cpus=1, env={"PYTHONPATH": str(own), "SLOW_TRACE_S": str(SLOW_S)})
        for name, value in c.client_env().items():
            env.setenv(name, value)
        env.delenv("RAY_AUTH_TOKEN", raising=False)
        # Ray adds the client's working folder to its workers' import path; this one has no
        # explorer in it (the checkout's would hide whether the explorer was shipped).
        env.chdir(tmp_path_factory.mktemp("client"))
        try:
            yield c
        finally:
            env.undo()
            reread_auth()          # the next Ray of this process reads its own token


@pytest.fixture(scope="module")
def local_mlp():
    return explorer.search("mlp", **MLP)


@pytest.fixture(scope="module")
def local_function():
    return explorer.search(matmul_then_relu, X, W, **FUNCTION)


def _table(result):
    return [(c.label, c.status, c.seconds, c.memory_bytes, c.collective_bytes,
             tuple((x.kind, x.axes, x.bytes, x.reason) for x in c.collectives))
            for c in result.candidates]


def test_the_loopback_cluster_has_two_nodes_of_one_cpu_on_loopback(cluster):
    assert [n.ip for n in cluster.nodes] == ["127.0.0.2", "127.0.0.3"]
    reread_auth()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        nodes = {n["NodeManagerAddress"]: n["Resources"]["CPU"] for n in ray.nodes()
                 if n["Alive"]}
        driver = ray.util.get_node_ip_address()
    finally:
        ray.shutdown()
    assert nodes == {"127.0.0.2": 1.0, "127.0.0.3": 1.0}
    assert driver == "127.0.0.2"


def test_a_search_on_two_nodes_ranks_as_the_local_search_and_reports_progress(cluster,
                                                                                local_mlp):
    seen = []
    remote = explorer.search("mlp", cluster=cluster.address, progress=seen.append, **MLP)
    assert remote.stats.cluster == cluster.address and local_mlp.stats.cluster is None
    assert _table(remote) == _table(local_mlp)
    assert remote.stats.compiled == local_mlp.stats.distinct
    assert remote.stats.retried == 0
    # Progress as locally: settled counts that only grow, up to every candidate, then done.
    done = [p.done for p in seen if p.phase is SearchPhase.COMPILE]
    assert done == sorted(done) and done[0] < done[-1] == local_mlp.stats.distinct
    assert seen[-1].phase is SearchPhase.DONE


def test_a_user_function_is_shipped_by_value_with_its_source_lines(cluster, local_function):
    remote = explorer.search(matmul_then_relu, X, W, cluster=cluster.address, **FUNCTION)
    assert _table(remote) == _table(local_function)
    lines = {c.source for cand in remote.candidates for c in cand.collectives if c.source}
    assert lines and all("test_ray_cluster.py" in s for s in lines)


def test_killing_the_second_nodes_workers_mid_search_loses_no_candidate(cluster,
                                                                        local_function):
    second = cluster.nodes[1]
    killed: list[int] = []
    stop = threading.Event()

    def kill_its_workers_while_one_compiles():
        while not stop.is_set() and not killed:
            if second.workers(running="_compile_on_node"):
                for worker in second.workers():
                    worker.kill()
                    killed.append(worker.pid)
            stop.wait(0.1)

    killer = threading.Thread(target=kill_its_workers_while_one_compiles, daemon=True)
    killer.start()
    try:
        remote = explorer.search(matmul_then_relu, X, W, cluster=cluster.address, **FUNCTION)
    finally:
        stop.set()
        killer.join()
    assert killed
    # Every candidate, none failed, ranked as locally; the lost ones were sent again.
    assert _table(remote) == _table(local_function)
    assert all(c.status is not CandidateStatus.FAILED for c in remote.candidates)
    retried = [c.label for c in remote.candidates if c.retries]
    assert retried and remote.stats.retried == len(retried)
    assert f"{len(retried)} retried after a lost Ray worker" in remote.stats.text()


def test_a_cancel_stops_a_search_on_the_cluster(cluster):
    cancel = threading.Event()

    def cancel_after_three(p):
        if p.compiled >= 3:
            cancel.set()

    s = explorer.search("mlp", cluster=cluster.address, cancel=cancel,
                        progress=cancel_after_three, **MLP).stats
    assert s.stopped is StopReason.CANCELLED
    assert s.compiled >= 3 and s.not_evaluated > 0
    assert s.compiled + s.failed + s.not_evaluated == s.distinct


def test_a_client_without_the_clusters_token_is_told_how_to_give_it(cluster, monkeypatch):
    monkeypatch.delenv("RAY_AUTH_MODE")
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH")
    with pytest.raises(ExplorerError) as caught:
        explorer.search("mlp", cluster=cluster.address, **MLP)
    message = str(caught.value)
    assert message.startswith(f"cannot connect to the Ray cluster at '{cluster.address}': ")
    assert "set RAY_AUTH_MODE=token" in message and "`ray get-auth-token`" in message
    assert "\n" not in message


# Last: the node it adds is stopped at its end, but the cluster's head may list it as alive
# for a while after.
def test_a_node_without_jax_stops_the_search_before_any_compile(cluster, tmp_path):
    no_jax = _broken_package(tmp_path, "jax", "no jax on this node")
    node = cluster.add_node(cpus=1, env={"PYTHONPATH": str(no_jax)})
    phases = []
    try:
        with pytest.raises(ExplorerError) as caught:
            explorer.search("mlp", cluster=cluster.address, progress=lambda p:
                            phases.append(p.phase), **MLP)
    finally:
        cluster.stop_node(node)
    message = str(caught.value)
    assert message.startswith(
        f"cannot compile on the Ray cluster at '{cluster.address}': node 127.0.0.4: cannot "
        "import the explorer and jax: ImportError: no jax on this node. ")
    assert f"jax=={version('jax')}" in message
    assert message.count("node 127.0.0.") == 1        # the two others can compile
    assert SearchPhase.COMPILE not in phases
