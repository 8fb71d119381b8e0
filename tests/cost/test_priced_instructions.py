"""The compute sum prices a typed sequence: each scheduled instruction that computes, with the
times one step runs it (`PricedInstruction`), built from a compiled schedule's Work.

The program is defined here and compiled on fake CPU devices; the expected values are worked out
by hand from the shapes.
"""

import jax
import jax.numpy as jnp
import pytest

from explorer import TensorSpec as T
from explorer import analyze
from explorer._src.cost.compute import PricedInstruction, priced_instructions
from explorer._src.hlo.schedule import read_schedule, schedule_work

L, B, D = 6, 64, 128


def scanned_layers(ws, x):
    def layer(h, w):
        return jnp.tanh(h @ w), None

    h, _ = jax.lax.scan(layer, x, ws)
    return h


@pytest.mark.slow
def test_an_instruction_in_a_scanned_layer_is_priced_once_per_layer():
    r = analyze(scanned_layers, T("ws", (L, D, D), spec="None,model,None"),
                T("x", (B, D), spec="data,model"), mesh="data=2,model=4")
    work = schedule_work(read_schedule(r.optimized_hlo))
    instructions = priced_instructions(work)
    assert all(isinstance(i, PricedInstruction) for i in instructions)
    # One entry per instruction that computes, in schedule order, nothing dropped or added.
    assert [i.step for i in instructions] == list(work.compute_steps)
    # Each layer multiplies x's [B/2, D/4] block on a device by its [D/4, D] rows of w (the
    # contraction split over model=4): 2 * 32 * 32 * 128 FLOPs, once per layer.
    [layer] = [i for i in instructions if i.step.dots]
    assert layer.runs == L
    assert layer.step.flops == 2 * (B // 2) * (D // 4) * D
