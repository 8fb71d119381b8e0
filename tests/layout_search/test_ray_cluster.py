"""explorer.search on a real Ray cluster: a head and a second node, each `ray start`ed as a
process of its own on a loopback address of this machine (127.0.0.2, 127.0.0.3; see
benchmarks/loopback_cluster.py), with their own CPU each and the cluster's own token.

The second node's own `explorer` is broken on purpose (a package on its PYTHONPATH that refuses
to import), so that every candidate it compiles shows that the caller's explorer was shipped to
it. Its compiles of the user function below are slow (it sleeps while traced there), so that a
compile is surely running on it when the fault test kills its workers.

The ranking on the cluster equals the local search's, through the API and through the Suggest
tab's cluster choice; killing the second node's workers in the middle of a search loses no
candidate; progress and cancel work as they do locally, in the API and in the tab; a client
without the cluster's token, a node without jax and a node whose check never answers each get
one message saying what to do.
"""

import os
import re
import sys
import threading
import time
from html import unescape
from importlib.metadata import version
from pathlib import Path

import psutil
import pytest

import explorer
from explorer import CandidateStatus, SearchPhase, StopReason, TensorSpec
from explorer._src.errors import ExplorerError
from explorer._src.layout_search.connect import reread_auth

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
# The Suggest tab's program: a small MLP (a fraction of a second a compile), on its target.
TAB = dict(mesh="data=2,model=4", target="h100-8", params={"batch": 64, "d_model": 64,
                                                           "d_ff": 256})
TAB_WAIT_S = 900      # the tab's searches end well within this


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
        # The cluster the app's Suggest tab offers, as a server's operator lists it.
        env.setenv("EXPLORER_CLUSTERS", f" {c.address} ")
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


@pytest.fixture
def suggest_tab():
    """The app's Suggest tab on the small MLP, shown."""
    pytest.importorskip("ipywidgets")
    pytest.importorskip("plotly")
    from explorer._src.ui.app import TAB_TITLES
    from explorer.ui import Explorer

    app = Explorer(workload="mlp", debounce=None, **TAB)
    app.tabs.selected_index = TAB_TITLES.index("Suggest")
    yield app.suggest
    app.close()


def _tab_rows(view) -> list[str]:
    """The labels of the tab's results table, top to bottom."""
    return [unescape(label) for label in re.findall(r"<tr class='[^']*' data-label='([^']*)'>",
                                                    view.table.value)]


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
    assert f"{len(retried)} retried after a lost worker" in remote.stats.text()


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


def test_the_suggest_tabs_cluster_box_ranks_as_the_local_search(cluster, suggest_tab,
                                                                cpu_screen):
    # cpu_screen: both searches screen on CPU devices. Left to itself, each search decides from
    # the reference's two compile times, which a loaded machine changes between the two: a
    # search that does not screen ranks its estimated candidates apart from its compiled ones.
    view = suggest_tab
    view.chosen_w.value = ["batch", "mlp"]
    view.budget_w.value = ""
    view.cluster_w.value = cluster.address        # listed with spaces around it
    view.start_w.click()
    assert view.wait(TAB_WAIT_S), "the search did not end"
    assert view.message.value == "", unescape(view.message.value)
    local = explorer.search("mlp", names=["batch", "mlp"], **TAB)
    # The bounds prune none of this space, so that which candidates compile does not depend on
    # how many compile at once (two on the cluster, one here) and the two tables can be equal.
    assert local.stats.pruned_bound == local.stats.pruned_memory == 0
    assert _tab_rows(view) == [c.label for c in local.candidates]
    assert view.result.stats.cluster == cluster.address
    assert view.result.stats.compiled == local.stats.distinct
    table = unescape(view.table.value)
    assert f"Compiled on the Ray cluster at {cluster.address}, 2 nodes, 2 CPUs." in table
    assert f"compiled on the Ray cluster at {cluster.address}" in unescape(view.summary.value)
    n = local.stats.distinct
    assert view.bar.value == view.bar.max == n
    assert view.progress_w.value.startswith(f"complete: evaluated {n} of {n}")


def test_a_cancel_in_the_suggest_tab_stops_its_search_on_the_cluster(cluster, suggest_tab,
                                                                    cpu_screen):
    # cpu_screen: the candidates compile (on CPU devices) on the cluster; the estimate screen
    # would settle three in milliseconds, here, before any compile.
    view = suggest_tab
    view.budget_w.value = ""                   # no budget: only the cancel can stop it
    view.cluster_w.value = cluster.address

    def cancel_after_three(change):
        if change["new"] >= 3:
            view.cancel_w.click()              # as the user does, seeing 3 of N

    view.bar.observe(cancel_after_three, "value")
    view.start_w.click()
    assert view.wait(TAB_WAIT_S), "the search did not end"
    assert view.message.value == "", unescape(view.message.value)
    s = view.result.stats
    assert s.stopped is StopReason.CANCELLED and s.cluster == cluster.address
    assert s.compiled >= 3 and s.not_evaluated > 0
    assert s.compiled + s.failed + s.not_evaluated == s.distinct
    assert len(_tab_rows(view)) == s.compiled
    assert view.progress_w.value.startswith("cancelled: evaluated")
    assert not view.start_w.disabled and view.cancel_w.disabled


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


# After the node without jax: the head may still list that stopped node, which is then named
# too, as not answering or as unschedulable; only the three nodes up now are asserted on.
def test_a_node_whose_check_never_answers_fails_the_search_in_the_time_given(cluster,
                                                                             tmp_path):
    # This node's jax never finishes importing (as on a stalled file system), and says where.
    hangs, marker = tmp_path / "hangs", tmp_path / "hung_pid"
    (hangs / "jax").mkdir(parents=True)
    (hangs / "jax" / "__init__.py").write_text(
        f"import os, time\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(3600)\n")
    node = cluster.add_node(cpus=1, env={"PYTHONPATH": str(hangs)})
    try:
        with pytest.raises(ExplorerError) as caught:
            # Long enough for the two other nodes to answer on a loaded machine (a Ray worker,
            # the explorer unpacked, jax imported: seconds each), far shorter than the default.
            explorer.search("mlp", cluster=cluster.address, node_timeout=60, **MLP)
        # The check's interpreter there was stuck importing jax; it ends with the Ray worker
        # the check killed, rather than sleeping on.
        pid = int(marker.read_text())
        hung = [psutil.Process(pid)] if psutil.pid_exists(pid) else []
        _, alive = psutil.wait_procs(hung, timeout=60)
        for p in alive:
            p.kill()
    finally:
        cluster.stop_node(node)
    message = str(caught.value)
    assert message.startswith(f"cannot compile on the Ray cluster at '{cluster.address}': ")
    assert (f"node {node.ip} did not answer within 60 s (its Ray workers could not start or "
            "unpack the explorer, or importing the explorer and jax there did not finish; see "
            "`ray status` and the node's Ray logs)") in message
    assert "node 127.0.0.2" not in message and "node 127.0.0.3" not in message
    assert f"pip install 'sharding-explorer[cluster]' jax=={version('jax')} on every node" \
        in message
    assert "\n" not in message
    assert alive == []
