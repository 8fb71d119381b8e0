"""A collective inside a loop runs once per trip: the Report counts it that way.

The program is defined here, and traced in this process, as a notebook's is.
Expected values are worked out by hand from the shapes.
"""

import jax
import jax.numpy as jnp

from explorer import TensorSpec as T
from explorer import analyze

L, B, D = 6, 64, 128


def scanned_layers(ws, x):
    # Each layer contracts x's model-sharded features with a weight sharded the same way, so
    # each layer's product is a partial sum: one all-reduce over `model` per layer.
    def layer(h, w):
        return jnp.tanh(h @ w), None

    h, _ = jax.lax.scan(layer, x, ws)
    return h


def test_a_collective_in_a_scanned_layer_runs_once_per_layer():
    r = analyze(scanned_layers, T("ws", (L, D, D), spec="None,model,None"),
                T("x", (B, D), spec="data,model"), mesh="data=2,model=4")
    looped = [c for c in r.collectives if c.runs != 1]
    assert looped, [(c.kind, c.computation) for c in r.collectives]
    for c in looped:
        assert c.runs == L
    [ar] = [c for c in looped if c.kind == "all-reduce"]
    # [B/2, D] float32 per device: the partial product of one layer, summed over model=4.
    assert ar.axes == ("model",) and ar.bytes == B // 2 * D * 4
    # The step moves each collective's bytes every time it runs.
    assert r.cost.collective_bytes == sum(c.bytes * c.runs for c in r.collectives)
    assert r.cost.collective_bytes >= L * B // 2 * D * 4
    assert r.to_dict()["collectives"][r.collectives.index(ar)]["runs"] == L
