"""A dropless MoE's token exchange, jax.lax.ragged_all_to_all: XLA's CPU compiler refuses it,
so the explorer says so and names the targets whose compilers take it; on those it is read as
a collective of its own kind, written by the program (explicit), priced as an upper bound."""

import importlib.util

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

import explorer
from explorer._src.compile.gpu import gpu_plugin_installed
from explorer._src.report.why.reason import Reason

T = explorer.TensorSpec
EXPERTS, TOKENS, D = 8, 64, 16


def exchange(x, input_offsets, send_sizes, output_offsets, recv_sizes):
    def body(x, a, b, c, d):
        return jax.lax.ragged_all_to_all(x, jnp.zeros_like(x), a[0], b[0], c[0], d[0],
                                         axis_name="expert")

    return jax.shard_map(body, mesh=jax.sharding.get_abstract_mesh(),
                         in_specs=(P("expert"),) * 5, out_specs=P("expert"))(
        x, input_offsets, send_sizes, output_offsets, recv_sizes)


def args():
    sizes = [T(n, (EXPERTS, EXPERTS), "int32", spec="expert,None")
             for n in ("input_offsets", "send_sizes", "output_offsets", "recv_sizes")]
    return (T("x", (TOKENS, D), spec="expert,None"), *sizes)


def test_on_cpu_devices_the_refusal_names_the_opcode_and_targets_that_compile_it():
    with pytest.raises(explorer.CompileError) as e:
        explorer.analyze(exchange, *args(), mesh="expert=8")
    text = str(e.value)
    assert text.startswith("this program uses ragged-all-to-all, which XLA's CPU compiler "
                           "cannot compile")
    assert "target='h100-8'" in text and "target='tpu-v5e-2x4'" in text
    assert "is not supported by XLA:CPU" in text           # XLA's own words kept


@pytest.mark.skipif(not gpu_plugin_installed(), reason="the gpu extra is not installed")
@pytest.mark.slow
def test_for_h100s_it_is_a_ragged_all_to_all_of_the_input_block():
    r = explorer.analyze(exchange, *args(), mesh="expert=8", target="h100-8")
    assert r.approximation == ""                           # XLA's GPU compiler's program
    [c] = r.collectives
    # V is each device's input block, the most it can send: 64/8 tokens x 16 f32.
    assert (c.kind, c.axes, c.bytes) == ("ragged-all-to-all", ("expert",), TOKENS // 8 * D * 4)
    assert c.why.reason == Reason.EXPLICIT and "`ragged_all_to_all`" in c.why.text
    assert c.est_seconds is not None and c.est_seconds > 0


@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                    reason="the tpu extra is not installed")
@pytest.mark.slow
def test_for_a_tpu_slice_it_is_read_too():
    r = explorer.analyze(exchange, *args(), mesh="expert=8", target="tpu-v5e-2x4")
    assert [(c.kind, c.axes) for c in r.collectives] == [("ragged-all-to-all", ("expert",))]
