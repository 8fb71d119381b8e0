"""The Ray runner: what it does with a task whose worker was lost (sent again, counted, up to
MAX_ATTEMPTS sends) and with a task that failed (that candidate's failure), answered by a stand-in
for Ray; and a search on a Ray cluster started inside the test (in this process, 2 CPUs, stopped
at the end), which gives the same result as the same search on this machine's worker pool. The
cluster of `ray start`ed processes is test_ray_cluster.py's."""

import sys
from types import SimpleNamespace

import pytest

import explorer
from explorer import TensorSpec
from explorer._src.layout_search import cluster as cluster_module
from explorer._src.layout_search.cluster import MAX_ATTEMPTS, RayRunner
from explorer._src.layout_search.connect import ClusterSize, check_address
from explorer._src.layout_search.evaluate import Outcome

ray = pytest.importorskip("ray")

TARGET = "h100-4"


class ScriptedRay:
    """Ray as the runner uses it, with no Ray: each send of a request is answered by the next
    answer scripted for it (an Outcome, or an exception its `get` raises)."""

    exceptions = ray.exceptions

    def __init__(self, answers: dict[str, list]):
        self.answers = answers           # request's workload name -> answers, one per send
        self.sent: list[str] = []

    def remote(self, **options):
        """ray.remote(...)(function): the task, whose .remote(request) sends it."""
        return lambda function: SimpleNamespace(remote=self.send)

    def send(self, request: explorer.Request):
        """A send of the task; its ref is (the request's workload, which send of it). The
        runner sends the explorer Request the search made, not a description of one."""
        assert isinstance(request, explorer.Request)
        name = request.workload
        self.sent.append(name)
        return name, self.sent.count(name) - 1

    def wait(self, refs, num_returns):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        name, send = ref
        answer = self.answers[name][send]
        if isinstance(answer, BaseException):
            raise answer
        return answer


@pytest.fixture
def scripted(monkeypatch):
    """A RayRunner on a ScriptedRay; connecting and the nodes' check are left out."""
    def make(answers):
        fake = ScriptedRay(answers)
        monkeypatch.setitem(sys.modules, "ray", fake)
        monkeypatch.setattr(cluster_module, "connect", lambda ray, address: False)
        monkeypatch.setattr(cluster_module, "check_nodes",
                            lambda ray, address, reuse, timeout: ClusterSize(1, 2))
        return RayRunner("127.0.0.2:6379"), fake
    return make


def _request(name: str) -> explorer.Request:
    return explorer.Request(workload=name, mesh="data=4", target=TARGET)


COMPILED = Outcome(None, "CompileError: refused", 0.5)
LOST = ray.exceptions.WorkerCrashedError()


def test_a_task_lost_with_its_worker_is_sent_again_and_its_retry_counted(scripted):
    runner, fake = scripted({"mlp": [LOST, COMPILED]})
    runner.submit("a", _request("mlp"))
    [(key, outcome)] = runner.next_done()
    assert key == "a" and fake.sent == ["mlp", "mlp"]
    assert outcome.retries == 1 and outcome.error == "CompileError: refused"
    assert runner.pending() == 0


def test_a_task_lost_at_every_send_fails_after_the_last_one(scripted):
    runner, fake = scripted({"mlp": [LOST] * MAX_ATTEMPTS})
    runner.submit("a", _request("mlp"))
    [(_, outcome)] = runner.next_done()
    assert fake.sent == ["mlp"] * MAX_ATTEMPTS == ["mlp"] * 3
    assert outcome.report is None and outcome.retries == 2
    assert outcome.error.startswith("the Ray task was lost 3 times with its worker or node: "
                                    "WorkerCrashedError: ")
    assert outcome.error_type is ray.exceptions.WorkerCrashedError


def test_a_task_that_raised_is_its_candidates_failure_and_is_not_sent_again(scripted):
    runner, fake = scripted({"mlp": [ModuleNotFoundError("No module named 'jax'")],
                             "matmul": [COMPILED]})
    runner.submit("a", _request("mlp"))
    runner.submit("b", _request("matmul"))
    done = dict(runner.next_done())
    done.update(runner.next_done())
    assert fake.sent == ["mlp", "matmul"]
    assert done["a"].error == ("the Ray task failed on the cluster: ModuleNotFoundError: No "
                               "module named 'jax'")
    assert done["a"].retries == done["b"].retries == 0


def test_a_candidate_whose_request_cannot_be_made_fails_here_and_is_never_sent(scripted):
    runner, fake = scripted({"matmul": [COMPILED]})
    runner.send("a", lambda: explorer.Request(workload="mlp", mesh="data=4", target=TARGET,
                                              partitioner="gpsmd"))
    runner.send("b", lambda: _request("matmul"))
    assert runner.pending() == 2
    [(key, refused)] = runner.next_done()
    assert key == "a" and refused.report is None and refused.error_type is explorer.InputError
    assert refused.error == "InputError: partitioner 'gpsmd' is not one of 'shardy', 'gspmd'"
    [(key, compiled)] = runner.next_done()
    assert key == "b" and compiled.error == "CompileError: refused"
    assert fake.sent == ["matmul"] and runner.pending() == 0


def test_the_runner_keeps_as_many_tasks_in_flight_as_the_nodes_have_cpus(scripted):
    runner, _ = scripted({})
    assert runner.slots == 2 and runner.address == "127.0.0.2:6379"


def matmul_then_relu(x, w):
    import jax

    return jax.nn.relu(x @ w)


@pytest.fixture(scope="module")
def in_process():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def _table(result):
    return [(c.label, c.status, c.seconds, c.memory_bytes, c.collective_bytes,
             tuple((x.kind, x.axes, x.bytes, x.reason) for x in c.collectives))
            for c in result.candidates]


# A Ray cluster started and stopped, and two searches on it.
@pytest.mark.slow
def test_a_workload_search_on_ray_equals_the_local_one(in_process, cpu_screen):
    args = dict(mesh="data=2,model=2", target=TARGET, params={"batch": 512},
                names=["batch", "mlp"], prune=False)
    local = explorer.search("mlp_train", **args)
    remote = explorer.search("mlp_train", cluster="local", **args)
    assert remote.stats.cluster == "local" and local.stats.cluster is None
    assert _table(remote) == _table(local)
    assert remote.stats.compiled == local.stats.compiled == local.stats.distinct
    # With pruning the order of arrivals may differ, the winner may not.
    pruned = explorer.search("mlp_train", cluster="local", **(args | {"prune": True}))
    assert pruned.best.label == local.best.label and pruned.best.seconds == local.best.seconds


@pytest.mark.slow
def test_a_user_function_is_shipped_to_the_cluster(in_process, cpu_screen):
    x, w = TensorSpec("x", (256, 64)), TensorSpec("w", (64, 64))
    args = dict(mesh="data=2,model=2", target=TARGET, tensors=["x"], mesh_shapes=False)
    local = explorer.search(matmul_then_relu, x, w, **args)
    remote = explorer.search(matmul_then_relu, x, w, cluster="local", **args)
    assert remote.best.label == local.best.label
    assert remote.best.seconds == local.best.seconds
    # The collectives' source lines survive the trip: they point into this file.
    lines = {c.source for cand in remote.candidates for c in cand.collectives if c.source}
    assert lines and all("test_cluster.py" in s for s in lines)


@pytest.mark.parametrize("address", ["head", "head:port", "127.0.0.2:0", "ray start",
                                     "ray://127.0.0.2", "ray://head:0", "ray://"])
def test_an_address_that_is_not_ray_s_is_refused_before_any_connection(address):
    with pytest.raises(explorer.InputError) as caught:
        explorer.search("mlp", mesh="data=4", target=TARGET, cluster=address)
    assert str(caught.value) == (
        f"cluster {address!r} is not a Ray address: give 'HOST:PORT', 'ray://HOST:PORT', "
        "'auto' or 'local', or None for this machine's worker pool")


@pytest.mark.parametrize(("given", "address"), [
    (" 127.0.0.2:6390 ", "127.0.0.2:6390"), ("[::1]:6379", "[::1]:6379"),
    ("ray://head.example.com:10001", "ray://head.example.com:10001"), ("auto", "auto"),
    ("local", "local")])
def test_each_form_of_ray_address_is_taken_stripped(given, address):
    assert check_address(given) == address
