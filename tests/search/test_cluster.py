"""A search on a Ray cluster started inside the test (in this process, 2 CPUs, stopped at the
end) gives the same result as the same search on this machine's worker pool."""

import pytest

import explorer
from explorer import TensorSpec

ray = pytest.importorskip("ray")

# A Ray cluster started and stopped, and two searches on it.
pytestmark = pytest.mark.slow

TARGET = "h100-4"


def matmul_then_relu(x, w):
    import jax

    return jax.nn.relu(x @ w)


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def _table(result):
    return [(c.label, c.status, c.seconds, c.memory_bytes, c.collective_bytes,
             tuple((x.kind, x.axes, x.bytes, x.reason) for x in c.collectives))
            for c in result.candidates]


def test_a_workload_search_on_ray_equals_the_local_one(cluster):
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


def test_a_user_function_is_shipped_to_the_cluster(cluster):
    x, w = TensorSpec("x", (256, 64)), TensorSpec("w", (64, 64))
    args = dict(mesh="data=2,model=2", target=TARGET, tensors=["x"], mesh_shapes=False)
    local = explorer.search(matmul_then_relu, x, w, **args)
    remote = explorer.search(matmul_then_relu, x, w, cluster="local", **args)
    assert remote.best.label == local.best.label
    assert remote.best.seconds == local.best.seconds
    # The collectives' source lines survive the trip: they point into this file.
    lines = {c.source for cand in remote.candidates for c in cand.collectives if c.source}
    assert lines and all("test_cluster.py" in s for s in lines)
