"""transformer_train's architecture options: grouped-query attention, SwiGLU, a parallel block,
tied embeddings, mixed precision, activation checkpointing and scanned layers.

Expected values are worked out by hand in the comments (parameter counts, matmul FLOPs, collective
bytes) or computed with plain jax in this process (the same weights through another path).
"""

import math
import re

import numpy as np
import pytest

import explorer
from explorer import analyze_workload
from explorer._src.hlo.schedule import read_schedule, schedule_work
from explorer._src.workloads.models import (
    TRANSFORMER_TRAIN,
    attention,
    block,
    feed_forward,
    train_arch,
)

F32 = 4


def _params(p) -> dict[str, tuple[int, ...]]:
    """The parameter tensors (neither inputs nor optimizer state) and their shapes."""
    kinds = TRANSFORMER_TRAIN.kinds(p)
    return {n: s for n, s in TRANSFORMER_TRAIN.shapes(p).items() if n not in kinds}


def _count(p) -> int:
    return sum(math.prod(s) for s in _params(p).values())


# --- parameter counts ------------------------------------------------------------------------

LAYERS = 3
SMALL_GQA = {"vocab": 32, "d_model": 16, "heads": 4, "kv_heads": 2, "d_head": 8, "d_ff": 24,
             "layers": LAYERS, "mlp": "swiglu"}


@pytest.mark.parametrize("scan", [True, False])
def test_gqa_swiglu_parameter_count(scan):
    p = TRANSFORMER_TRAIN.resolve({**SMALL_GQA, "scan_layers": scan})
    # V=32, D=16, H=4 query heads, G=2 key/value heads, K=8, F=24, L=3. Per layer:
    #   ln1 D + wq D·H·K + wk, wv 2·D·G·K + wo H·K·D + ln2 D + w1, w3, w2 3·D·F
    #   = 16 + 512 + 512 + 512 + 16 + 1152 = 2720;
    # total V·D + L·2720 + D + D·V = 512 + 8160 + 16 + 512 = 9200.
    assert _count(p) == 9200
    shapes = _params(p)
    if scan:
        assert shapes["layers.wk"] == (3, 16, 2, 8) and shapes["layers.w3"] == (3, 16, 24)
        assert TRANSFORMER_TRAIN.logical(p)["layers.wk"] == ("layers", "embed", "kv_heads", "kv")
    else:
        assert shapes["l2.wv"] == (16, 2, 8) and shapes["l0.wq"] == (16, 4, 8)
        assert TRANSFORMER_TRAIN.logical(p)["l0.wv"] == ("embed", "kv_heads", "kv")


def test_parallel_block_and_tied_embeddings_drop_their_tensors():
    p = TRANSFORMER_TRAIN.resolve({**SMALL_GQA, "block": "parallel", "tied_embed": True})
    # No ln2 per layer (-3·16) and no unembed (-16·32): 9200 - 48 - 512 = 8640.
    assert _count(p) == 8640
    assert "layers.ln2" not in _params(p) and "unembed" not in _params(p)
    assert "layer.mid" not in TRANSFORMER_TRAIN.points(p)       # one norm, no midpoint


@pytest.mark.parametrize("config, published", [
    # Llama 2 7B (Touvron et al. 2023, arXiv:2307.09288; Hugging Face's meta-llama/Llama-2-7b-hf
    # reports 6,738,415,616 parameters): V=32000, D=4096, 32 heads of 128, F=11008, 32 layers,
    # SwiGLU, RMSNorm scales, no biases, untied embeddings.
    ({"vocab": 32000, "d_model": 4096, "heads": 32, "d_head": 128, "d_ff": 11008,
      "layers": 32, "mlp": "swiglu"}, 6_738_415_616),
    # Llama 3 8B (Dubey et al. 2024, arXiv:2407.21783, Table 3; meta-llama/Meta-Llama-3-8B:
    # 8,030,261,248): V=128256, 8 key/value heads, F=14336.
    ({"vocab": 128256, "d_model": 4096, "heads": 32, "kv_heads": 8, "d_head": 128,
      "d_ff": 14336, "layers": 32, "mlp": "swiglu"}, 8_030_261_248),
])
def test_llama_parameter_counts_match_the_published_ones(config, published):
    assert _count(TRANSFORMER_TRAIN.resolve(config)) == published


def test_kv_heads_must_divide_heads():
    with pytest.raises(explorer.WorkloadError, match="kv_heads=3 must divide heads=4"):
        analyze_workload("transformer_train", "data=2", params={"kv_heads": 3})


# --- the math, run in this process on tiny arrays --------------------------------------------

@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
def test_grouped_query_attention_is_multi_head_attention_with_repeated_kv_heads():
    import jax
    import jax.numpy as jnp

    # Llama's repeat_kv: key/value head j serves query heads j·group ... (j+1)·group - 1, so
    # GQA with wk [D, G, K] equals MHA with each of wk's heads repeated `group` times in place.
    D, H, G, K = 8, 6, 2, 4
    keys = jax.random.split(jax.random.key(1), 5)
    x = jax.random.normal(keys[0], (2, 5, D))
    wq, wo = jax.random.normal(keys[1], (D, H, K)), jax.random.normal(keys[2], (H, K, D))
    wk, wv = jax.random.normal(keys[3], (D, G, K)), jax.random.normal(keys[4], (D, G, K))
    gqa = attention(x, wq, wk, wv, wo)
    mha = attention(x, wq, jnp.repeat(wk, H // G, axis=1), jnp.repeat(wv, H // G, axis=1), wo)
    np.testing.assert_allclose(gqa, mha, rtol=1e-5, atol=1e-5)


def test_swiglu_is_silu_gate_times_linear():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 4)).astype(np.float32)
    w1, w3 = rng.normal(size=(4, 5)).astype(np.float32), rng.normal(size=(4, 5)).astype(np.float32)
    w2 = rng.normal(size=(5, 4)).astype(np.float32)
    a = x @ w1
    expected = (a / (1 + np.exp(-a)) * (x @ w3)) @ w2        # silu(a) = a·sigmoid(a)
    got = feed_forward(x, w1, w2, mlp="swiglu", w3=w3)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
def test_parallel_block_adds_attention_and_mlp_of_one_norm():
    import jax

    from explorer._src.workloads.models import Arch, rms_norm

    D, H, K, F = 8, 2, 4, 16
    keys = jax.random.split(jax.random.key(2), 8)
    shapes = {"ln1": (D,), "wq": (D, H, K), "wk": (D, H, K), "wv": (D, H, K), "wo": (H, K, D),
              "w1": (D, F), "w2": (F, D)}
    w = {n: jax.random.normal(k, s) for k, (n, s) in zip(keys, shapes.items(), strict=False)}
    x = jax.random.normal(keys[-1], (2, 5, D))
    n = rms_norm(x, w["ln1"])
    expected = x + attention(n, w["wq"], w["wk"], w["wv"], w["wo"]) + \
        feed_forward(n, w["w1"], w["w2"])
    got = block(x, w, {}, "layer0", Arch(block="parallel"))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def _random_state(p, seed=0):
    """Inputs for one train step: tokens, targets, random params, m = v = 0."""
    import jax
    import jax.numpy as jnp

    out = {}
    for i, (name, shape) in enumerate(TRANSFORMER_TRAIN.shapes(p).items()):
        if name in ("tokens", "targets"):
            out[name] = (jnp.arange(math.prod(shape)).reshape(shape) * (7 + i)) % p["vocab"]
        elif name.startswith(("m.", "v.")):
            out[name] = jnp.zeros(shape)
        else:
            out[name] = 0.5 * jax.random.normal(jax.random.key(seed + i), shape)
    return out


def _stacked(unrolled: dict) -> dict:
    """The same state with `l{i}.<name>` stacked into `layers.<name>` (m., v. likewise), in the
    scanned workload's argument order."""
    import jax.numpy as jnp

    out = {}
    for name, value in unrolled.items():
        m = re.fullmatch(r"(m\.|v\.)?l(\d+)\.(.+)", name)
        if m is None:
            out[name] = value
        elif m[2] == "0":
            prefix, rest = m[1] or "", m[3]
            out[f"{prefix}layers.{rest}"] = jnp.stack(
                [unrolled[f"{prefix}l{i}.{rest}"] for i in range(LAYERS)])
    return out


@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
@pytest.mark.parametrize("remat", ["none", "full", "minimal"])
def test_scanned_layers_compute_the_unrolled_step(remat):
    import jax

    config = {**SMALL_GQA, "batch": 2, "seq": 6, "lr": 0.01}
    flat = TRANSFORMER_TRAIN.resolve({**config, "scan_layers": False})
    scanned = TRANSFORMER_TRAIN.resolve({**config, "scan_layers": True, "remat": remat})
    state = _random_state(flat)
    want = jax.jit(TRANSFORMER_TRAIN.build(flat))(*state.values())
    inputs = _stacked(state)
    assert list(inputs) == list(TRANSFORMER_TRAIN.shapes(scanned))
    got = jax.jit(TRANSFORMER_TRAIN.build(scanned))(*inputs.values())
    # The loss of a random model on 32 tokens: near log(32) = 3.47, and equal on both paths.
    assert 1 < float(want["loss"]) < 10
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-5)
    for name, value in _stacked({n: v for n, v in want.items() if n != "loss"}).items():
        np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-6, err_msg=name)


# --- the compiled programs -------------------------------------------------------------------

def _dot_flops(report) -> float:
    """Dot FLOPs of the compiled per-device program, loop bodies times their trips."""
    work = schedule_work(read_schedule(report.optimized_hlo))
    return sum(flops * runs for flops, _, runs in work.compute)


REMATS = ("none", "full", "minimal")
REMAT = {"batch": 4, "seq": 16, "vocab": 32, "d_model": 16, "heads": 4, "kv_heads": 2,
         "d_head": 8, "d_ff": 32, "layers": 3, "mlp": "swiglu"}


# Scanned and unrolled: three compiles each, 12 s scanned and more unrolled, so both are left
# to the full suite.
@pytest.mark.slow
@pytest.mark.parametrize("scan", [True, False])
def test_remat_recomputes_the_forward_matmuls(scan):
    # Per device on data=2: b = 2 sequences of S=16, T = 32 tokens; D=16, H=4, G=2, K=8, F=32,
    # V=32, L=3. Forward matmul FLOPs (2·m·n·k each) of one layer:
    q_o = 2 * (2 * 32 * 16 * 4 * 8)              # wq and wo: 2·T·D·H·K = 32768 each
    k_v = 2 * (2 * 32 * 16 * 2 * 8)              # wk and wv: 2·T·D·G·K = 16384 each
    scores = 2 * (2 * 2 * 4 * 16 * 16 * 8)       # q·k and probs·v: 2·b·H·S·S·K = 32768 each
    mlp = 3 * (2 * 32 * 16 * 32)                 # w1, w3, w2: 2·T·D·F = 32768 each
    layer = q_o + k_v + scores + mlp             # 262144
    embed = 2 * 32 * 32 * 16                     # one-hot [T,V]·[V,D], and the logits: 32768
    # Backward: two matmuls per forward matmul (the input's and the weight's gradient), except
    # the one-hot embedding, whose input has no gradient: one.
    none = 3 * (3 * layer) + 2 * embed + 3 * embed
    assert none == 2_359_296 + 163_840 == 2_523_136
    # full: the forward pass of each block again in the backward pass, less its last matmul
    # (w2), whose output leaves the block and is not needed for any gradient.
    full = none + 3 * (layer - 2 * 32 * 32 * 16)
    # minimal (checkpoint_dots_with_no_batch_dims): weight matmuls saved; the two attention
    # matmuls, which have batch dimensions, recomputed.
    minimal = none + 3 * scores
    got = {remat: _dot_flops(analyze_workload(
        "transformer_train", "data=2", preset="dp",
        params={**REMAT, "remat": remat, "scan_layers": scan})) for remat in REMATS}
    assert got == {"none": none, "full": full, "minimal": minimal}
    # About the textbook 4/3 (Chen et al. 2016; Korthikanti et al. 2022, §5): the embedding
    # and the logits are not recomputed, and neither is each block's last matmul.
    assert got["full"] / got["none"] == pytest.approx(3_211_264 / 2_523_136)


@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
@pytest.mark.parametrize("preset, mesh", [("dp", "data=8"), ("megatron", "data=2,model=4")])
def test_scanned_collectives_per_step_equal_the_unrolled_ones(preset, mesh):
    params = {"layers": 3}
    unrolled = analyze_workload("transformer_train", mesh, preset=preset,
                                params={**params, "scan_layers": False})
    scanned = analyze_workload("transformer_train", mesh, preset=preset, params=params)
    runs = schedule_work(read_schedule(scanned.optimized_hlo)).collective_runs
    in_loop = [c for c in scanned.collectives if runs[c.hlo_name] > 1]
    assert in_loop and {runs[c.hlo_name] for c in in_loop} == {3}      # once per layer
    per_step = sum(c.bytes * runs[c.hlo_name] for c in scanned.collectives)
    assert per_step == sum(c.bytes for c in unrolled.collectives)
    # The Report lists each collective instruction once, with the times it runs: a collective
    # in the loop body is one entry that runs once per layer, and cost.collective_bytes counts
    # every run, as the unrolled program's does.
    assert all(c.runs == runs[c.hlo_name] for c in scanned.collectives)
    assert scanned.cost.collective_bytes == per_step == unrolled.cost.collective_bytes


@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
def test_scanned_fsdp_gathers_the_weights_again_for_the_backward_pass():
    # fsdp on data=8, defaults (D=64, H=4, K=16, F=256), 3 layers. Unrolled, XLA keeps each
    # gathered weight from the forward pass for the backward pass; scanned, the backward loop
    # gathers every layer's matrices again, as ZeRO-3 does (Rajbhandari et al. 2020, §5:
    # parameters are gathered for the forward and again for the backward pass). The extra bytes
    # are one all-gather result per layer matrix: L·(4·D·H·K + 2·D·F)·4 = 3·49152·4 = 589824.
    unrolled = analyze_workload("transformer_train", "data=8", preset="fsdp",
                                params={"layers": 3, "scan_layers": False})
    scanned = analyze_workload("transformer_train", "data=8", preset="fsdp",
                               params={"layers": 3})
    runs = schedule_work(read_schedule(scanned.optimized_hlo)).collective_runs
    per_step = sum(c.bytes * runs[c.hlo_name] for c in scanned.collectives)
    assert per_step - sum(c.bytes for c in unrolled.collectives) == 3 * (4 * 64 * 4 * 16
                                                                          + 2 * 64 * 256) * F32


@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
def test_a_point_inside_the_scan_applies_to_every_layer():
    # layer.mid pinned seq-split over model inside the scanned block: the per-layer residual
    # [B, S, D] = [8, 32, 64] is split 4 ways on seq in the loop body, and the loop runs 3 times.
    r = analyze_workload("transformer_train", "data=2,model=4", preset="megatron",
                         params={"layers": 3}, activations={"layer.mid": "None,model,None"})
    [mid] = {t.shard_shape for t in r.tensors if t.op_name.endswith("layer.mid/sharding_constraint")
             and t.shape == (8, 32, 64)}
    assert mid == (8, 8, 64)
    assert r.workload.activations["layer.mid"] == "None,model,None"


# --- dtypes ----------------------------------------------------------------------------------

@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
def test_bfloat16_params_with_float32_adam_state():
    r = analyze_workload("transformer_train", "data=2", preset="zero1",
                         params={"dtype": "bfloat16", "opt_dtype": "float32"})
    assert r.tensor("layers.wq").dtype == "bfloat16" and r.tensor("embed").dtype == "bfloat16"
    assert r.tensor("m.layers.wq").dtype == "float32" and r.tensor("v.unembed").dtype == "float32"
    assert r.tensor("out.layers.wq").dtype == "bfloat16"
    assert r.tensor("out.m.layers.wq").dtype == "float32"
    assert r.tensor("tokens").dtype == "int32"
    # zero1 splits the optimizer state over data on embed: m.layers.wq [2, 64, 4, 16] in float32
    # is 2·32·4·16·4 = 16384 bytes per device; the bfloat16 param, whole, 2·64·4·16·2 = 16384.
    assert r.tensor("m.layers.wq").bytes_per_device == 16384
    assert r.tensor("layers.wq").bytes_per_device == 16384


@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
def test_compute_dtype_casts_float32_params_before_the_matmuls_and_the_fsdp_gathers():
    # MaxText's weight_dtype=float32 with dtype=bfloat16: float32 params, bfloat16 matmuls.
    r = analyze_workload("transformer_train", "data=2", preset="fsdp",
                         params={"compute_dtype": "bfloat16"})
    assert r.tensor("layers.w1").dtype == "float32"
    dots = [ln for ln in r.stablehlo.splitlines() if "stablehlo.dot_general" in ln]
    assert dots and all(ln.rstrip().endswith("bf16>") for ln in dots)
    gathers = [c for c in r.collectives if c.kind == "all-gather"]
    # The shards are cast before they are gathered, so the gathers move bfloat16 (the CPU
    # backend widens them to float32 around the collective; operand_dtype records that).
    assert gathers and all(c.operand_dtype == "bfloat16" for c in gathers)


@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
def test_kv_heads_are_placed_by_the_tensor_parallel_presets_and_rules():
    params = {"heads": 8, "kv_heads": 4, "d_head": 8}
    r = analyze_workload("transformer_train", "data=2,model=4", preset="megatron", params=params)
    assert r.tensor("layers.wk").spec == (None, None, "model", None)
    assert r.tensor("layers.wq").spec == (None, None, "model", None)
    # Two key/value heads cannot be split 4 ways: the preset's rule fails, naming the fix ...
    with pytest.raises(explorer.SpecError, match="spec for tensor 'layers.wk' or change the rule"):
        analyze_workload("transformer_train", "data=2,model=4", preset="megatron",
                         params={**params, "kv_heads": 2})
    # ... and a user rule keeps them whole.
    r = analyze_workload("transformer_train", "data=2,model=4", preset="megatron",
                         params={**params, "kv_heads": 2}, rules="kv_heads=None")
    assert r.tensor("layers.wk").spec == (None, None, None, None)


def test_train_arch_reads_the_params():
    arch = train_arch(TRANSFORMER_TRAIN.resolve({"scan_layers": False, "remat": "full",
                                                 "compute_dtype": "bfloat16", "mlp": "relu"}))
    assert (arch.scan, arch.remat, arch.compute_dtype, arch.mlp) == \
        (False, "full", "bfloat16", "relu")
    assert train_arch(TRANSFORMER_TRAIN.resolve({})).scan is True      # MaxText's default


@pytest.mark.parametrize("extra", [
    {"scan_layers": "false"},
    # In a scanned, rematerialised loop body XLA forms fusions, copies and converts with no
    # metadata of their own; they are found through what they fuse or read.
    pytest.param({"scan_layers": "true", "remat": "full", "kv_heads": 2,
                  "compute_dtype": "bfloat16"}, marks=pytest.mark.slow)])
@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
def test_fused_attention_is_computed_and_timed_as_a_flash_kernel(extra):
    # attention=fused computes the attention core as a flash kernel does (key blocks of 512,
    # an online softmax, a custom backward that recomputes each block's probabilities): the
    # compiled program never holds the [seq, seq] scores, found here by shape (seq 1024 is no
    # other dimension of the model), where the plain program does. It moves the same
    # collectives, and its arithmetic, timed as one causal kernel, is counted by hand below.
    from explorer._src.hlo.schedule import StepKind, read_schedule
    seq = 1024
    base = {**extra, "seq": seq, "batch": 4}
    # Both on the CPU, whose compiler combines the same collectives for both programs (the
    # GPU's combiner groups the small data-parallel gradients by its own schedule).
    runs = {a: analyze_workload("transformer_train", "data=2,model=2", preset="megatron",
                                params={**base, "attention": a}, target="h100-4",
                                compile_for="cpu")
            for a in ("plain", "fused")}
    plain, fused = runs["plain"], runs["fused"]
    assert [(c.kind, c.axes, c.bytes) for c in fused.collectives] == \
        [(c.kind, c.axes, c.bytes) for c in plain.collectives]
    assert fused.estimate.compute.seconds < plain.estimate.compute.seconds

    def steps(report):
        def walk(ss, times):
            for s in ss:
                if s.kind is StepKind.LOOP:
                    yield from walk(s.body, times * s.trips)
                else:
                    yield s, times
        schedule = read_schedule(report.optimized_hlo)
        by_name = schedule.module.by_name()
        return [(s, n, [*s.instr.arrays, *(x for o in s.instr.operands if o in by_name
                                          for x in by_name[o].arrays)])
                for s, n in walk(schedule.steps, 1)]

    def holds_scores(arrays):
        return any(len(a.dims) >= 4 and tuple(a.dims[-2:]) == (seq, seq) for a in arrays)
    assert any(holds_scores(arrays) for _, _, arrays in steps(plain))
    assert not any(holds_scores(arrays) for _, _, arrays in steps(fused))
    # Per layer and device (megatron on data=2,model=2: batch and heads halved), with
    # F = 2·b·h·s²·d the FLOPs of one [s, s] matmul: the forward does q·kᵀ and p·v (2F); the
    # backward recomputes q·kᵀ and does dv, dp, dq and dk (5F; FlashAttention-2, Algorithm 2);
    # full remat runs the forward once more (2F). The causal kernel counts half.
    p = TRANSFORMER_TRAIN.resolve(base)
    b, h, d = p["batch"] / 2, p["heads"] / 2, p["d_head"]
    f = 2 * b * h * seq * seq * d
    matmuls = 2 + 5 + (2 if p["remat"] == "full" else 0)
    kernel = sum(s.flops * n for s, n, _ in steps(fused) if s.causal_kernel)
    assert kernel == pytest.approx(0.5 * matmuls * f * p["layers"], rel=0.01)
