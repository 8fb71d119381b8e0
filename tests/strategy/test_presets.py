"""One test per strategy preset: the collectives the literature predicts, compiled for real.

Expected values come from the shapes by hand (the arithmetic is in the comments), never from the
code under test. Where jax 0.10.2's CPU backend differs from the textbook (no reduce-scatter,
weights gathered once, combined all-reduces), the test pins what really happens and
docs/strategies.md explains it.

Sizes. `transformer` (defaults): B=8, S=16, D=256, H=8 heads, K=32 (d_head), F=1024 (d_ff).
`transformer_train` with layers=1 (defaults otherwise): B=8, S=32, V=256 (vocab), D=64, H=4,
K=16, F=256. Its parameter count Ψ:
    embed V·D 16384 + ln1 64 + wq,wk,wv 3·D·H·K 12288 + wo 4096 + ln2 64 + w1 D·F 16384
    + w2 16384 + final_norm 64 + unembed 16384 = 82112 floats = 328448 bytes.
"""

import inspect
from pathlib import Path

import pytest

import explorer
from explorer import analyze_workload
from explorer._src.spec.tensor import entry_axes
from explorer._src.workloads import models as _models

F32 = 4
PSI = 82112 * F32             # transformer_train(layers=1) parameter bytes, see above
LOSS = F32                    # the scalar loss, all-reduced with the gradients
TRAIN = {"layers": 1, "scan_layers": False}


def line_of(fn, text: str) -> str:
    """`explorer/_src/workloads/models.py:N` of the line of `fn` that contains `text`."""
    lines, start = inspect.getsourcelines(fn)
    [i] = [i for i, line in enumerate(lines) if text in line]
    return f"explorer/_src/workloads/models.py:{start + i}"


def kinds(report, axes=None):
    return [c.kind for c in report.collectives if axes is None or c.axes == axes]


# --- data parallelism and the ZeRO stages ----------------------------------------------------

@pytest.mark.slow
def test_dp_all_reduces_every_gradient_once_over_data():
    r = analyze_workload("transformer_train", "data=8", preset="dp", params=TRAIN)
    # Horovod: one ring all-reduce of the gradients, V = Ψ. XLA combines every gradient (and the
    # loss) into one tuple all-reduce: 11 params + the loss = 12 parts.
    [c] = r.collectives
    assert (c.kind, c.axes, c.group_size, c.parts) == ("all-reduce", ("data",), 8, 12)
    assert c.bytes == PSI + LOSS == 328452
    assert r.tensor("tokens").dtype == "int32" and r.tensor("tokens").spec == ("data", None)
    assert r.tensor("out.l0.w1").spec == (None, None)          # params stay replicated


def _zero_pattern(r):
    return sorted((c.kind, c.axes, c.shape, c.bytes) for c in r.collectives)


@pytest.mark.slow
def test_zero1_all_reduces_grads_then_all_gathers_updated_params():
    r = analyze_workload("transformer_train", "data=8", preset="zero1", params=TRAIN)
    assert {c.axes for c in r.collectives} == {("data",)}
    # ZeRO-1 (Rajbhandari et al. §5): each rank updates its 1/8 of the params with its 1/8 of
    # the optimizer state, then the updated params are all-gathered: V = Ψ in total, one
    # all-gather per param, each the full param.
    gathers = [c for c in r.collectives if c.kind == "all-gather"]
    assert len(gathers) == 11 and sum(c.bytes for c in gathers) == PSI
    assert sorted(c.shape for c in gathers) == sorted(
        [(256, 64), (64,), (64, 4, 16), (64, 4, 16), (64, 4, 16), (4, 16, 64), (64,),
         (64, 256), (256, 64), (64,), (64, 256)])
    # Pinned: the gradients are all-reduced whole (V = Ψ, plus the loss), as in plain DP; the
    # textbook reduce-scatter (V = Ψ too) does not appear on the CPU backend.
    [ar] = [c for c in r.collectives if c.kind == "all-reduce"]
    assert ar.bytes == PSI + LOSS
    # m and v are split over data on their embed dim; params come out replicated.
    assert r.tensor("m.l0.w1").spec == ("data", None)
    assert r.tensor("m.l0.w1").shard_shape == (64 // 8, 256)
    assert r.tensor("out.m.l0.w1").spec == ("data", None)
    assert r.tensor("out.l0.w1").spec == (None, None)


@pytest.mark.slow
def test_zero2_compiles_to_the_same_collectives_as_zero1_on_cpu():
    z1 = analyze_workload("transformer_train", "data=8", preset="zero1", params=TRAIN)
    z2 = analyze_workload("transformer_train", "data=8", preset="zero2", params=TRAIN)
    # ZeRO-2 also shards the gradients: each gradient is pinned to [embed over data] ...
    assert z2.workload.activations["grad.l0.w1"] == "data,None"
    assert z1.workload.activations["grad.l0.w1"] == "replicated"
    # ... which the textbook turns into a reduce-scatter. Pinned: the CPU backend all-reduces
    # the whole gradient and slices it, so ZeRO-1 and ZeRO-2 move the same bytes here.
    assert _zero_pattern(z2) == _zero_pattern(z1)
    assert "reduce-scatter" not in kinds(z2)


@pytest.mark.slow
def test_zero3_gathers_params_once_and_all_reduces_grads():
    r = analyze_workload("transformer_train", "data=8", preset="zero3", params=TRAIN)
    assert {c.axes for c in r.collectives} == {("data",)}
    assert r.tensor("l0.w1").spec == ("data", None) and r.tensor("l0.w1").shard_shape == (8, 256)
    assert r.tensor("out.l0.w1").spec == ("data", None)       # params stay sharded
    gathers = [c for c in r.collectives if c.kind == "all-gather"]
    # Textbook ZeRO-3: every param gathered before the forward and again before the backward
    # (2Ψ), gradients reduce-scattered (Ψ): 3Ψ in all. Pinned: XLA keeps each gathered weight
    # matrix alive from the forward to the backward, so it gathers each matrix once; only the
    # three norm scales (ln1, ln2, final_norm, 64 floats each) are gathered twice:
    # Ψ + 3·64·4 = 328448 + 768 = 329216.
    assert sum(c.bytes for c in gathers) == PSI + 3 * 64 * F32 == 329216
    assert sorted(c.shape for c in gathers if c.shape == (64,)) == [(64,)] * 6
    # Pinned: the gradients are all-reduced whole (V = Ψ, combined with the loss), then
    # sliced to each rank's shard; no reduce-scatter on CPU.
    [ar] = [c for c in r.collectives if c.kind == "all-reduce"]
    assert ar.bytes == PSI + LOSS
    assert "reduce-scatter" not in kinds(r)


@pytest.mark.slow
@pytest.mark.parametrize("preset, state_bytes", [
    # Per device: params + Adam's m and v. DP keeps all three whole (3Ψ); ZeRO-1/2 split m and
    # v over data=8 (Ψ + 2Ψ/8); ZeRO-3 splits all three (3Ψ/8). Every tensor has an embed dim
    # of 64, divisible by 8, so the splits are exact. Plus tokens and targets, int32 [8, 32]
    # split over data: 2·(1·32·4) = 256 bytes.
    ("dp", 3 * PSI), ("zero1", PSI + 2 * PSI // 8), ("zero2", PSI + 2 * PSI // 8),
    ("zero3", 3 * PSI // 8)])
def test_zero_stages_shrink_the_per_device_state(preset, state_bytes):
    r = analyze_workload("transformer_train", "data=8", preset=preset, params=TRAIN)
    assert r.memory.arguments == state_bytes + 256


def test_fsdp_is_zero3():
    a = analyze_workload("transformer_train", "data=8", preset="fsdp", params=TRAIN)
    b = analyze_workload("transformer_train", "data=8", preset="zero3", params=TRAIN)
    assert explorer.PRESETS["fsdp"].rules == explorer.PRESETS["zero3"].rules
    assert _zero_pattern(a) == _zero_pattern(b)


# --- tensor parallelism ----------------------------------------------------------------------

@pytest.mark.slow
def test_megatron_one_all_reduce_per_attention_and_per_mlp():
    B, S, D = 8, 16, 256
    r = analyze_workload("transformer", "model=4", preset="megatron")
    # Shoeybi et al. §3: the operator g all-reduces the output of the row-parallel
    # matmul of the attention (wo) and of the MLP (w2): 2 per block, each V = B·S·D·4.
    assert [(c.kind, c.axes, c.group_size, c.bytes) for c in r.collectives] == \
        [("all-reduce", ("model",), 4, B * S * D * F32)] * 2 == \
        [("all-reduce", ("model",), 4, 131072)] * 2
    assert [c.source for c in r.collectives] == [
        line_of(_models.attention, 'einsum("bshk,hkd->bsd"'),
        line_of(_models.feed_forward, 'einsum("bsf,fd->bsd"')]
    # Column-parallel wq (heads over model), row-parallel wo, column w1, row w2.
    assert r.tensor("wq").spec == (None, "model", None)
    assert r.tensor("wo").spec == ("model", None, None)
    assert r.tensor("w1").spec == (None, "model") and r.tensor("w2").spec == ("model", None)


def test_megatron_with_data_axis_halves_the_all_reduce():
    r = analyze_workload("transformer", "data=2,model=4", preset="megatron")
    # batch over data: V = (B/2)·S·D·4 = 4·16·256·4 = 65536, still over model only.
    assert [(c.kind, c.axes, c.bytes) for c in r.collectives] == \
        [("all-reduce", ("model",), 65536)] * 2
    assert r.tensor("x").spec == ("data", None, None)


@pytest.mark.slow
def test_megatron_train_step_vocab_parallel_loss_and_data_parallel_grads():
    r = analyze_workload("transformer_train", "data=2,model=4", preset="megatron",
                         params=TRAIN)
    assert {c.kind for c in r.collectives} == {"all-reduce"}
    # Megatron §3: the vocab-parallel cross entropy all-reduces only the per-token max and sum
    # of the logits, [B/2, S] = [4, 32] floats, not the [B, S, V] logits.
    loss_line = line_of(_models.lm_loss, "log_softmax")
    small = [(c.shape, c.op_name.rsplit("/", 1)[-1]) for c in r.collectives
             if c.source == loss_line]
    assert sorted(small) == [((4, 32), "reduce_max"), ((4, 32), "reduce_sum")]
    # Data parallelism over the model-sharded grads: per device, each matrix is 1/4 (heads,
    # mlp or vocab over model), the norm scales are whole:
    # V·D/4 4096 + 64 + 3·(D·H·K)/4 3072 + 1024 + 64 + 4096 + 4096 + 64 + 4096 = 20672 floats,
    # ·4 = 82688 bytes, + the loss = 82692.
    [dp] = [c for c in r.collectives if c.axes == ("data",)]
    assert dp.bytes == 20672 * F32 + LOSS == 82692


def test_megatron_sp_turns_each_all_reduce_into_gather_and_reduce():
    B, S, D = 8, 16, 256
    r = analyze_workload("transformer", "model=4", preset="megatron_sp")
    # Korthikanti et al. §4.2.2: the residual stream is split over seq; an all-gather [B,S,D]
    # enters each tensor-parallel region and a reduce-scatter leaves it: V = B·S·D·4 each.
    # Pinned: the CPU backend all-reduces and slices instead of reduce-scattering.
    assert [(c.kind, c.axes, c.shape, c.bytes) for c in r.collectives] == [
        ("all-gather", ("model",), (B, S, D), 131072),
        ("all-reduce", ("model",), (B, S, D), 131072),
        ("all-gather", ("model",), (B, S, D), 131072),
        ("all-reduce", ("model",), (B, S, D), 131072)]
    assert r.collectives[1].source == line_of(_models.attention, 'einsum("bshk,hkd->bsd"')
    assert r.collectives[2].source == line_of(_models.feed_forward, 'einsum("bsd,df->bsf"')
    # The sequence-parallel region: input and output split over seq.
    assert r.tensor("x").spec == (None, "model", None)
    assert r.tensor("out").spec == (None, "model", None)
    assert r.workload.activations["layer0.hidden"] == "None,None,model"


def test_megatron_sp_gathers_weights_when_they_are_smaller_than_the_activation():
    # Pinned partitioner choice: with B·S·D = 8·32·256 = 65536 floats, as large as one
    # attention weight D·H·K = 256·8·32 = 65536, Shardy all-gathers the three q/k/v weights
    # (V = D·H·K·4 = 262144 each) instead of the activation, and moves heads with all-to-alls.
    r = analyze_workload("transformer", "model=4", preset="megatron_sp", params={"seq": 32})
    weight_gathers = [c for c in r.collectives if c.kind == "all-gather"
                      and c.shape == (256, 8, 32)]
    assert len(weight_gathers) == 3 and {c.bytes for c in weight_gathers} == {262144}
    assert "all-to-all" in kinds(r)


def test_2d_gathers_weights_over_data_and_activations_over_model():
    r = analyze_workload("transformer", "data=2,model=4", preset="2d")
    # GSPMD's 2-D sharding (praxis set_sharding_params_v1): weights [embed over data, heads/mlp over
    # model], activations [batch over data, ..., embed over model].
    assert r.tensor("wq").spec == ("data", "model", None)
    assert r.tensor("w1").spec == ("data", "model") and r.tensor("w2").spec == ("model", "data")
    assert r.tensor("x").spec == ("data", None, "model")
    data = sorted((c.kind, c.shape, c.bytes) for c in r.collectives if c.axes == ("data",))
    # Each weight's model shard is all-gathered over data before use:
    # q/k/v [D, H/4, K] = 256·2·32·4 = 65536; wo [H/4, K, D] 65536; w1 [D, F/4], w2 [F/4, D]
    # = 256·256·4 = 262144.
    assert data == sorted([("all-gather", (256, 2, 32), 65536)] * 3
                          + [("all-gather", (2, 32, 256), 65536)]
                          + [("all-gather", (256, 256), 262144)] * 2)
    model = [(c.kind, c.shape, c.bytes) for c in r.collectives if c.axes == ("model",)]
    act = (4, 16, 256)   # [B/2, S, D]: 4·16·256·4 = 65536 bytes
    # Around each matmul block: all-gather the activation's embed over model, then reduce the
    # partial sums (textbook reduce-scatter; pinned: all-reduce on CPU). RMS norm over a
    # model-split embed all-reduces its [B/2, S] statistic (4·16·4 = 256 bytes).
    assert [m for m in model if m[1] == act] == [
        ("all-gather", act, 65536), ("all-reduce", act, 65536),
        ("all-gather", act, 65536), ("all-reduce", act, 65536)]
    assert [m for m in model if m[1] != act] == [("all-reduce", (4, 16), 256)] * 2
    # The norm scales live [embed over data] (a param) but are used [embed over model]:
    # two small collective-permutes of D/4 = 64 floats = 256 bytes.
    rest = [(c.kind, c.axes, c.bytes) for c in r.collectives
            if c.axes not in (("data",), ("model",))]
    assert rest == [("collective-permute", ("data", "model"), 256)] * 2


def test_fsdp_tp_gathers_weights_over_data_and_all_reduces_over_model():
    r = analyze_workload("transformer", "data=2,model=4", preset="fsdp_tp")
    data = sorted((c.kind, c.shape, c.bytes) for c in r.collectives if c.axes == ("data",))
    # FSDP part: every weight's model shard all-gathered over data (as in 2d), plus the two
    # norm scales [D] = 256·4 = 1024 bytes.
    assert data == sorted([("all-gather", (256,), 1024)] * 2
                          + [("all-gather", (256, 2, 32), 65536)] * 3
                          + [("all-gather", (2, 32, 256), 65536)]
                          + [("all-gather", (256, 256), 262144)] * 2)
    # TP part: Megatron's two all-reduces, V = (B/2)·S·D·4 = 65536. Activations are not split
    # over model (the difference from 2d), so nothing else crosses model.
    assert [(c.kind, c.bytes) for c in r.collectives if c.axes == ("model",)] == \
        [("all-reduce", 65536)] * 2
    assert len(r.collectives) == len(data) + 2


# --- expert and pipeline parallelism ---------------------------------------------------------

def test_ep_dispatches_and_returns_tokens_with_all_to_all():
    r = analyze_workload("moe", "expert=8", preset="ep")
    # GShard: groups and experts split over the same axis; the dispatched buffers
    # [E, G, C, M] move from group-split to expert-split and back: two all-to-alls, each
    # V = E·G·C·M·4/8 with C = ceil(1.25·2·64/8) = 20: 8·8·20·128·4/8 = 81920.
    assert r.workload.extra["capacity"] == 20
    assert [(c.kind, c.axes, c.group_size, c.bytes) for c in r.collectives] == \
        [("all-to-all", ("expert",), 8, 81920)] * 2
    ops = [c.op_name for c in r.collectives]
    assert "/dispatch/" in ops[0] and "/expert_out.groups/" in ops[1]
    assert r.tensor("wi").spec == ("expert", None, None)
    assert r.tensor("x").spec == ("expert", None, None)


def test_ep_with_only_the_expert_view_pinned_gathers_instead():
    # Pinned partitioner choice: leave the group-split views free and Shardy computes the
    # dispatch einsum from tokens all-gathered over expert ([G, S, D] = 8·64·128·4 = 262144),
    # and sums the combine over expert with an all-reduce of the output (as big), instead of
    # the two all-to-alls.
    r = analyze_workload("moe", "expert=8", preset="ep",
                         activations={"dispatch.groups": "free", "expert_out.groups": None})
    big = [(c.kind, c.shape, c.bytes) for c in r.collectives if c.bytes >= 262144]
    assert big == [("all-gather", (8, 64, 128), 262144), ("all-reduce", (8, 64, 128), 262144)]
    assert {c.axes for c in r.collectives} == {("expert",)}


@pytest.mark.slow
def test_pp_moves_activations_between_stages():
    if "pipeline" not in explorer.WORKLOADS:
        pytest.skip("the pipeline workload (explorer/_src/workloads/pipeline.py) is not available")
    r = analyze_workload("pipeline", "stage=4", preset="pp")
    assert r.tensor("w").spec == ("stage", None, None)
    # GPipe, S=4 stages, M=8 microbatches of batch/M = 64/8 = 8 rows: a forward send at each of
    # the M+S-2 = 10 ticks where some stage passes activations on, and as many backward sends:
    # 20 collective-permutes over stage, each V = 8·256·4 = 8192.
    assert [(c.kind, c.axes, c.bytes) for c in r.collectives] == \
        [("collective-permute", ("stage",), 8192)] * 20


# --- bad input --------------------------------------------------------------------------------

def test_preset_needing_an_axis_the_mesh_lacks():
    with pytest.raises(explorer.PresetError) as e:
        analyze_workload("transformer", "model=8", preset="dp")
    # Each axis is named once: the ones it needs, then the optional ones, if any.
    assert str(e.value) == ("preset 'dp' places tensors over mesh axes 'data', but mesh "
                            "'model=8' has no axis 'data'; name a mesh axis 'data', e.g. mesh "
                            "'data=8'")
    assert e.value.axis == "data"
    with pytest.raises(explorer.PresetError, match="'megatron' places tensors over mesh axes "
                       r"'model' \(and optionally 'data'\), but mesh 'data=8' has no axis"):
        analyze_workload("transformer", "data=8", preset="megatron")
    with pytest.raises(explorer.PresetError, match="has no axis 'expert'"):
        analyze_workload("moe", "data=8", preset="ep")


def test_unknown_preset_lists_choices():
    with pytest.raises(explorer.PresetError, match="preset 'zero4' is unknown; choose one of "
                       "'dp', 'zero1'.*'megatron_sp'.*'pp'"):
        analyze_workload("transformer", "data=8", preset="zero4")


def test_pp_is_bound_to_the_pipeline_workload(monkeypatch):
    from explorer._src.workloads import registry as _workloads

    if "pipeline" in _workloads.WORKLOADS:
        with pytest.raises(explorer.PresetError, match="applies only to workload.*'pipeline', "
                           "not 'transformer'"):
            analyze_workload("transformer", "stage=4", preset="pp")
    monkeypatch.delitem(_workloads.WORKLOADS, "pipeline", raising=False)
    with pytest.raises(explorer.PresetError, match="needs workload 'pipeline', which is not "
                       "available"):
        analyze_workload("transformer", "stage=4", preset="pp")


def test_a_rule_that_does_not_divide_says_where_it_came_from():
    # heads=8 over model=3 does not divide; the spec came from the preset, not the user.
    with pytest.raises(explorer.DivisibilityError, match="not divisible by model=3") as e:
        analyze_workload("transformer", "model=3", preset="megatron")
    assert "from preset 'megatron'" in str(e.value) and "a spec for tensor 'wq'" in str(e.value)
    assert e.value.tensor == "wq"


def test_every_preset_is_documented_and_uses_only_its_axes():
    assert set(explorer.PRESETS) == {"dp", "zero1", "zero2", "zero3", "fsdp", "megatron",
                                     "megatron_sp", "2d", "fsdp_tp", "ep", "pp"}
    for p in explorer.PRESETS.values():
        assert p.source and p.title and p.expects
        named = {a for r in explorer.parse_rules(p.rules).rules for a in entry_axes(r.entry)}
        assert named <= set(p.requires + p.optional), p.name
        assert set(p.requires + p.optional) <= {"data", "model", "expert", "stage"}
    doc = (Path(__file__).parents[2] / "docs" / "strategies.md").read_text()
    for name in explorer.PRESETS:
        assert f"`{name}`" in doc and f"--preset {name}" in doc, name
