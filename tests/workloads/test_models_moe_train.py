"""transformer_train with a routed mixture-of-experts MLP (experts > 0; Mixtral, MaxText's MoE):
its tensors and parameter count worked out by hand, its routing held to a plain numpy loop over
the tokens, and the dense model left as it was.
"""

import math

import numpy as np
import pytest

import explorer
from explorer._src.workloads.models import (
    MOE,
    TRANSFORMER_TRAIN,
    routed_feed_forward,
    train_arch,
)

# V=32, D=16, H=4 query heads, G=2 key/value heads, K=8, F=24, E=4 experts, L=3.
SMALL_MOE = {"vocab": 32, "d_model": 16, "heads": 4, "kv_heads": 2, "d_head": 8, "d_ff": 24,
             "layers": 3, "mlp": "swiglu", "experts": 4, "top_k": 2, "batch": 2, "seq": 8}


def _params(p) -> dict[str, tuple[int, ...]]:
    kinds = TRANSFORMER_TRAIN.kinds(p)
    return {n: s for n, s in TRANSFORMER_TRAIN.shapes(p).items() if n not in kinds}


@pytest.mark.parametrize("scan", [True, False])
def test_moe_swiglu_shapes_and_parameter_count(scan):
    p = TRANSFORMER_TRAIN.resolve({**SMALL_MOE, "scan_layers": scan})
    # Per layer: ln1 D + wq D·H·K + wk, wv 2·D·G·K + wo H·K·D + ln2 D + router D·E
    #   + w1, w3, w2 3·E·D·F = 16 + 512 + 512 + 512 + 16 + 64 + 4608 = 6240;
    # total V·D + L·6240 + D + D·V = 512 + 18720 + 16 + 512 = 19760.
    shapes = _params(p)
    assert sum(math.prod(s) for s in shapes.values()) == 19760
    logical = TRANSFORMER_TRAIN.logical(p)
    if scan:
        assert shapes["layers.router"] == (3, 16, 4)
        assert shapes["layers.w1"] == shapes["layers.w3"] == (3, 4, 16, 24)
        assert shapes["layers.w2"] == (3, 4, 24, 16)
        assert logical["layers.router"] == ("layers", "embed", None)
        assert logical["layers.w1"] == ("layers", "experts", "embed", "mlp")
        assert logical["layers.w2"] == ("layers", "experts", "mlp", "embed")
        # Adam's state has the same shapes and names.
        assert TRANSFORMER_TRAIN.shapes(p)["m.layers.w2"] == (3, 4, 24, 16)
    else:
        assert shapes["l2.router"] == (16, 4) and shapes["l0.w3"] == (4, 16, 24)
        assert logical["l1.w1"] == ("experts", "embed", "mlp")


def test_moe_gelu_has_no_w3_and_its_points_are_the_expert_buffers():
    p = TRANSFORMER_TRAIN.resolve({**SMALL_MOE, "mlp": "gelu", "capacity_factor": 1.0})
    # Per layer: 16 + 3·512 + 16 + 64 + 2·E·D·F (3072) = 4704; total 512 + 3·4704 + 16 + 512.
    assert sum(math.prod(s) for s in _params(p).values()) == 15152
    assert "layers.w3" not in _params(p)
    # capacity = ceil(capacity_factor · top_k · seq / experts) = ceil(1 · 2 · 8 / 4) = 4 tokens
    # per batch row and expert: buffers [E, batch, capacity, D].
    assert train_arch(p).capacity == 4
    points = TRANSFORMER_TRAIN.points(p)
    assert points["layer.dispatch"].shape == (4, 2, 4, 16)
    assert points["layer.dispatch"].dims == ("experts", "batch", "capacity", "embed")
    assert points["layer.dispatch.groups"].dims == (None, "batch", "capacity", "embed")
    assert points["layer.hidden"].shape == (4, 2, 4, 24)
    assert list(points)[:7] == ["layer", "layer.heads", "layer.mid", "layer.dispatch.groups",
                                "layer.dispatch", "layer.hidden", "layer.expert_out"]


def test_the_defaults_stay_the_dense_model():
    p = TRANSFORMER_TRAIN.resolve({})
    assert p["experts"] == 0 and train_arch(p).experts == 0
    assert "layers.router" not in _params(p)
    assert _params(p)["layers.w1"] == (2, 64, 256)
    # The moe workload keeps its own points.
    assert list(MOE.points(MOE.resolve({}))) == ["layer0", "dispatch.groups", "dispatch",
                                                  "expert_out", "expert_out.groups", "final"]


def test_top_k_above_experts_is_refused_naming_both():
    with pytest.raises(explorer.WorkloadError, match="top_k=3 .* more than experts=2"):
        explorer.analyze_workload("transformer_train", "data=2",
                                  params={"experts": 2, "top_k": 3})


def _reference(x, router, w1, w3, w2, top_k, capacity):
    """GShard's routing as a loop: in each group, every token's first choice in token order,
    then every token's second choice, ..., each taking the next free slot of its expert or
    dropped when the expert's `capacity` slots are full; the output is the sum over the kept
    choices of gate · the expert's SwiGLU MLP of the token."""
    groups, seq, _ = x.shape
    out = np.zeros_like(x)
    for g in range(groups):
        logits = x[g] @ router
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        order = np.argsort(-probs, axis=-1)
        used = np.zeros(router.shape[1], int)
        for rank in range(top_k):
            for s in range(seq):
                e = order[s, rank]
                if used[e] == capacity:
                    continue
                used[e] += 1
                a = x[g, s] @ w1[e]
                h = a / (1 + np.exp(-a)) * (x[g, s] @ w3[e])
                out[g, s] += probs[s, e] * (h @ w2[e])
    return out


@pytest.mark.parametrize("capacity", [2, 8])   # tokens dropped, and none dropped
def test_the_routed_mlp_computes_the_token_loop(capacity):
    rng = np.random.default_rng(0)
    groups, seq, d, f, e = 2, 8, 6, 5, 4
    x = rng.normal(size=(groups, seq, d)).astype(np.float32)
    router = rng.normal(size=(d, e)).astype(np.float32)
    w1, w3 = (rng.normal(size=(e, d, f)).astype(np.float32) for _ in range(2))
    w2 = rng.normal(size=(e, f, d)).astype(np.float32)
    got = routed_feed_forward(x, router, w1, w2, {}, "layer.", top_k=2, capacity=capacity,
                              mlp="swiglu", w3=w3)
    want = _reference(x.astype(np.float64), router, w1, w3, w2, 2, capacity)
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-4, atol=2e-4)
