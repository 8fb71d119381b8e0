"""TPU slices smaller than one host, and shapes libtpu cannot lay out on hosts.

libtpu lays a slice out on hosts of 2x2x1 chips by default and refuses one its hosts do not
divide: `v5e:1x1`, `v6e:1x1` (real one-chip slices: v5litepod-1, v6e-1) and `v5e:2x1` failed
only after the compile had started, with "INVALID_ARGUMENT: Topology layout ... is not divisible
by the given (or default) chips_per_host_bounds". A slice smaller than a host along a dimension
is now a host of that size; a shape that no host divides is refused before any compile."""

import importlib.util
import re

import pytest

import explorer
from explorer._src.compile.tpu import host_bounds
from explorer._src.errors import InputError

needs_libtpu = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                                  reason="needs libtpu (the tpu extra)")


@pytest.mark.parametrize("topology, bounds", [
    ("v5e:1x1", (1, 1, 1)), ("v6e:1x1", (1, 1, 1)), ("v5e:2x1", (2, 1, 1)),
    ("v5e:1x4", (1, 2, 1)), ("v5e:2x2", (2, 2, 1)), ("v5e:16x16", (2, 2, 1)),
    ("v4:1x1x1", (1, 1, 1)), ("v4:4x4x4", (2, 2, 1)), ("v5p:2x2x1", (2, 2, 1))])
def test_host_bounds_by_hand(topology, bounds):
    assert host_bounds(topology) == bounds


@pytest.mark.parametrize("topology, dim", [("v5e:3x3", 0), ("v5e:2x6x", None), ("v6e:4x5", 1)])
def test_a_shape_no_host_divides_is_refused_with_examples(topology, dim):
    with pytest.raises(InputError) as e:
        host_bounds(topology)
    if dim is not None:
        assert f"dimension {dim}" in str(e.value) and topology in str(e.value)
        assert re.search(r"e\.g\. v\de:2x2 or v\de:4x4", str(e.value))


def test_refused_before_any_compile():
    # An InputError from the request's check, not the compiler's error from a worker.
    with pytest.raises(InputError, match="cannot be laid out on TPU hosts"):
        explorer.analyze_workload("mlp", mesh="data=3,model=3", tpu_topology="v5e:3x3")


@pytest.mark.tpu
@needs_libtpu
def test_a_one_chip_target_compiles_with_libtpu():
    r = explorer.analyze_workload("mlp", mesh="data=1", target="tpu-v6e-1x1",
                                  params={"batch": 8, "d_model": 128, "d_ff": 256})
    assert r.ahead_of_time and r.backend == "tpu v6e:1x1" and not r.approximation
    assert r.device_kind == "TPU v6 lite" and r.mesh.device_count == 1
    assert r.collectives == ()


@pytest.mark.tpu
@needs_libtpu
def test_a_two_chip_slice_matches_plain_jax():
    """v5e:1x2 with Megatron specs over model=2: the collectives are those of plain jax's own
    deviceless compile for the same slice (one host of 1x2 chips)."""
    specs = {"x": "None,None", "w1": "None,model", "w2": "model,None"}
    params = {"batch": 8, "d_model": 128, "d_ff": 256}
    r = explorer.analyze_workload("mlp", mesh="model=2", tpu_topology="v5e:1x2", specs=specs,
                                  params=params)
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import topologies
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    devices = topologies.get_topology_desc("v5e:1x2", "tpu", chips_per_host_bounds=(1, 2, 1))
    mesh = Mesh(np.array(devices.devices), ("model",),
                axis_types=(jax.sharding.AxisType.Auto,))

    def spec(shape, p):
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, p))

    def mlp(x, w1, w2):
        return jax.nn.gelu(x @ w1) @ w2

    hlo = jax.jit(mlp).lower(spec((8, 128), P()), spec((128, 256), P(None, "model")),
                             spec((256, 128), P("model", None))).compile().as_text()
    expected = len(re.findall(r"= \S+ all-reduce(?:-start)?\(", hlo))
    assert expected >= 1
    assert [c.kind for c in r.collectives] == ["all-reduce"] * expected
    assert all(c.axes == ("model",) for c in r.collectives)
