"""Functions that hold jax Meshes and Devices (a config's cached mesh, a NamedSharding in a
closure) are shipped to the compile worker and rebuilt there over the devices it compiles for
(explorer/compile/stand_ins.py). The test process has 8 fake CPU devices (tests/conftest.py),
as a user's kernel would after setting XLA's device count."""

import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import explorer
from explorer.compile.sources import pickle_function

T = explorer.TensorSpec


def test_a_closure_over_a_mesh_and_a_named_sharding_compiles():
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
    hidden = NamedSharding(mesh, P("data", "model"))

    def layer(x, w):
        # The closure's sharding is over the explored mesh: the hidden [256, 512] block is
        # split 2 x 4, and x @ w with w split by columns needs no collective to get there.
        return jax.lax.with_sharding_constraint(x @ w, hidden).sum(axis=1)

    r = explorer.analyze(layer, T("x", (256, 1024), spec="data,None"),
                         T("w", (1024, 512), spec="None,model"), mesh="data=2,model=4")
    # The row sums of a [128, 128] block per device are added up over model: an all-reduce
    # of the 128 f32 partial sums each device holds.
    assert [(c.kind, c.axes, c.bytes) for c in r.collectives] == [
        ("all-reduce", ("model",), 128 * 4)]
    assert not any("Mesh of its own" in n for n in r.notes)


def test_a_mesh_over_other_axes_is_rebuilt_with_its_own_sizes():
    experts = Mesh(np.array(jax.devices()[:8]), ("expert",))

    def moe(w, x):
        return jax.shard_map(lambda w, x: jax.lax.psum(jnp.einsum("td,edf->tf", x, w),
                                                       "expert"),
                             mesh=experts, in_specs=(P("expert"), P()), out_specs=P())(w, x)

    r = explorer.analyze(moe, T("w", (8, 64, 32)), T("x", (16, 64)), mesh="data=2,model=4")
    # Every device's experts summed over the 8 of them: one all-reduce of the [16, 32] f32
    # result, over every device (both axes of the explored mesh).
    assert [(c.kind, c.bytes) for c in r.collectives] == [("all-reduce", 16 * 32 * 4)]
    assert set(r.collectives[0].axes) == {"data", "model"}
    assert any("shard_map in the program runs over a mesh of its own" in n for n in r.notes)


def test_a_mesh_larger_than_the_explored_one_is_refused_with_both_sizes():
    big = Mesh(np.array(jax.devices()[:8]).reshape(8), ("expert",))

    def f(x):
        return jax.lax.with_sharding_constraint(x, NamedSharding(big, P("expert")))

    with pytest.raises(explorer.CompileError,
                       match=r"holds a Mesh expert=8 of 8 devices, more than the 4 of the "
                             r"explored mesh data=2,model=2"):
        explorer.analyze(f, T("x", (64,)), mesh="data=2,model=2")


def test_a_device_is_shipped_by_its_id():
    device = jax.devices()[3]
    data = pickle_function(lambda x: (device, x))
    assert b"_rebuild_device" in data


def test_a_mesh_unpickled_outside_a_compile_pickles_again_as_it_came():
    # A search's Ray task unpickles the function, then sends it to a worker in turn.
    mesh = Mesh(np.array(jax.devices()[:2]), ("data",))
    once = pickle.loads(pickle_function(lambda: mesh))
    again = pickle_function(once)
    assert b"_rebuild_mesh" in again and b"data" in again
