"""The model-shaped workloads, logical-axis rules, activation constraints, the CLI flags and the
Flax NNX example. Expected values are worked out by hand in the comments."""

import json
import math
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import explorer
from explorer import analyze_workload, logical_spec, parse_rules
from explorer._src.strategy.plan import plan
from explorer._src.strategy.rules import LOGICAL_NAMES, Rule, Rules
from explorer._src.workloads.models import MOE, TRANSFORMER, TRANSFORMER_TRAIN, expert_capacity

ROOT = Path(__file__).parents[2]
F32 = 4


# --- workload structure (no compile) ---------------------------------------------------------

@pytest.mark.parametrize("name", list(explorer.WORKLOADS))
def test_every_tensor_and_point_has_one_logical_name_per_dimension(name):
    workload = explorer.WORKLOADS[name]
    p = workload.resolve({})
    shapes, logical = workload.shapes(p), workload.logical(p)
    points = workload.points(p) if workload.points is not None else {}
    assert list(logical) == list(shapes)
    for tensor, shape in shapes.items():
        assert len(logical[tensor]) == len(shape), tensor
    for point_name, point in points.items():
        assert len(point.dims) == len(point.shape), point_name
        assert point.kind in ("act", "grad")
    used = {d for dims in logical.values() for d in dims}
    used |= {d for pt in points.values() for d in pt.dims}
    assert used - {None} <= set(LOGICAL_NAMES)


def test_transformer_train_names_params_grads_and_optimizer_state():
    p = TRANSFORMER_TRAIN.resolve({"layers": 1, "scan_layers": False})
    params = ["embed", "l0.ln1", "l0.wq", "l0.wk", "l0.wv", "l0.wo", "l0.ln2", "l0.w1", "l0.w2",
              "final_norm", "unembed"]
    assert list(TRANSFORMER_TRAIN.shapes(p)) == ["tokens", "targets", *params,
                                                 *[f"m.{n}" for n in params],
                                                 *[f"v.{n}" for n in params]]
    kinds = TRANSFORMER_TRAIN.kinds(p)
    assert kinds["tokens"] == "input" and kinds["m.l0.wq"] == "opt" and kinds["v.embed"] == "opt"
    assert "l0.wq" not in kinds          # not named: a param
    # wq[embed, heads, kv] = [64, 4, 16]; the optimizer state has the param's shape and names.
    assert TRANSFORMER_TRAIN.shapes(p)["m.l0.wq"] == (64, 4, 16)
    assert TRANSFORMER_TRAIN.logical(p)["v.l0.wq"] == ("embed", "heads", "kv")
    points = TRANSFORMER_TRAIN.points(p)
    assert list(points)[:5] == ["layer0", "layer0.heads", "layer0.mid", "layer0.hidden", "final"]
    assert points["grad.l0.w2"].kind == "grad" and points["grad.l0.w2"].shape == (256, 64)
    dtypes = {t.name: t.dtype for t in TRANSFORMER_TRAIN.tensors(p)}
    assert dtypes["tokens"] == "int32" and dtypes["l0.wq"] == "float32"


def test_moe_capacity_follows_gshard():
    # ceil(capacity_factor · top_k · seq / experts) = ceil(1.25 · 2 · 64 / 8) = 20
    assert expert_capacity(MOE.resolve({})) == 20
    # ceil(1.0 · 1 · 10 / 4) = ceil(2.5) = 3
    assert expert_capacity({"capacity_factor": 1.0, "top_k": 1, "seq": 10, "experts": 4}) == 3
    with pytest.raises(explorer.WorkloadError, match="top_k=3 of workload 'moe' is more than "
                       "experts=2"):
        analyze_workload("moe", "data=2", params={"top_k": 3, "experts": 2})


# --- param bounds: checked in Workload.resolve, before any work ------------------------------

def _numeric(workload):
    return [k for k, v in workload.defaults.items() if not isinstance(v, str)]


@pytest.mark.parametrize("name", list(explorer.WORKLOADS))
def test_every_numeric_param_has_bounds_that_hold_at_the_ends(name):
    workload = explorer.WORKLOADS[name]
    for key in _numeric(workload):
        bound = workload.bounds[key]
        assert workload.defaults[key] in bound, key
        # The top of each bound resolves with the other params at their defaults ...
        assert workload.resolve({key: bound.high})[key] == bound.high
        # ... and one step past either end fails with a message that names the bound.
        for bad in (bound.high * 2, bound.low if bound.low_open else bound.low - 1):
            with pytest.raises(explorer.WorkloadError) as e:
                workload.resolve({key: bad})
            assert f"param {key}={bad!r} of workload {name!r} must be " \
                   f"{'>' if bound.low_open else '>='} {bound.low} and <= {bound.high}" \
                   in str(e.value)


def test_a_workload_must_bound_every_numeric_param():
    from explorer._src.workloads.base import Range, Workload

    with pytest.raises(explorer.WorkloadError, match="param 'n' has no bounds"):
        Workload("w", "", {"n": 8}, lambda p: {}, lambda p: abs)
    with pytest.raises(explorer.WorkloadError, match=r"default n=8 is outside its bounds \[1, 4\]"):
        Workload("w", "", {"n": 8}, lambda p: {}, lambda p: abs, bounds={"n": Range(1, 4)})


def test_a_huge_layer_count_fails_at_once():
    # Issue 14: layers=10**6 hung building a quarter-million tensor specs before any compile.
    with pytest.raises(explorer.WorkloadError, match=r"layers=1000000 of workload "
                       r"'transformer_train' must be >= 1 and <= 256"):
        analyze_workload("transformer_train", "data=2", params={"layers": 10 ** 6},
                         cache_only=True)


@pytest.mark.parametrize("params, fragment", [
    ({"batch": float("inf")}, "param batch=inf of workload 'transformer' is not a whole number"),
    ({"batch": float("nan")}, "batch=nan"),
    ({"batch": 2.5}, "batch=2.5 of workload 'transformer' is not a whole number"),
    ({"batch": True}, "batch=True"),
    ({"batch": "1e3"}, "batch='1e3'"),
    ({"batch": [8]}, "batch=[8]"),
    ({"batch": 10 ** 5000}, "batch=<an int of 16610 bits> of workload 'transformer' must be"),
    ({"batch": "9" * 5000}, "is not a whole number"),     # int() refuses 5000 digits
    ({7: 8}, "has no param 7"),
    ({"dtype": 5}, "dtype 5 is not supported"),
])
def test_bad_param_values_are_workload_errors(params, fragment):
    with pytest.raises(explorer.ExplorerError) as e:
        TRANSFORMER.resolve(params)
    assert fragment in str(e.value)


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), "nan", "inf", 0,
                                   -1.0, 5000.0, 10 ** 400])
def test_float_params_must_be_finite_and_within_bounds(value):
    # moe's capacity_factor = inf was an OverflowError in ceil(); lr = nan printed NaN JSON.
    for workload, key in ((MOE, "capacity_factor"), (TRANSFORMER_TRAIN, "lr")):
        with pytest.raises(explorer.WorkloadError, match=f"param {key}="):
            workload.resolve({key: value})


def test_params_that_are_not_a_mapping():
    with pytest.raises(explorer.WorkloadError, match=r"params \[\('batch', 8\)\] of workload "
                       "'mlp' are not a mapping"):
        analyze_workload("mlp", "data=2", params=[("batch", 8)], cache_only=True)


def test_tensors_beyond_the_element_bound_name_the_tensor():
    # Scores [batch, heads, seq, seq] = 2**10 · 8 · 2**20 · 2**20 = 2**53 > 2**48, though each
    # param is within its bounds.
    with pytest.raises(explorer.WorkloadError, match=r"intermediate 'scores' would have shape "
                       r"\[1024, 8, 1048576, 1048576\], 9007199254740992 elements; the limit "
                       r"is 2\*\*48"):
        TRANSFORMER.resolve({"batch": 2 ** 10, "seq": 2 ** 20})
    # x [batch, d_model] = 2**24 · 2**16 = 2**40 is fine; the hidden [batch, d_ff] point of
    # 2**24 · 2**18 = 2**42 too; w1 [d_model, d_ff] = 2**34 too. All within: it resolves.
    explorer.WORKLOADS["mlp"].resolve({"batch": 2 ** 24, "d_model": 2 ** 16, "d_ff": 2 ** 18})
    # moe's combine [batch, seq, experts, capacity] with capacity = ceil(4096 · 64 · 2**20 / 64)
    # = 2**32: 8 · 2**20 · 64 · 2**32 = 2**61.
    with pytest.raises(explorer.WorkloadError, match="intermediate 'combine'"):
        MOE.resolve({"capacity_factor": 4096, "top_k": 64, "experts": 64, "seq": 2 ** 20})


def test_real_model_configs_fit_the_bounds():
    # Llama 2/3 70B: 80 layers, d_model 8192, 64 heads of 128, d_ff 28672, vocab 128256,
    # seq 8192, a global batch of 1024 sequences (Touvron et al. 2023; Dubey et al. 2024).
    p = TRANSFORMER_TRAIN.resolve({"layers": 80, "d_model": 8192, "heads": 64, "d_head": 128,
                                   "d_ff": 28672, "vocab": 128256, "seq": 8192, "batch": 1024,
                                   "scan_layers": False})
    # tokens, targets, then params, m, v: 3 · (embed, final_norm, unembed + 8 per layer).
    assert len(TRANSFORMER_TRAIN.shapes(p)) == 2 + 3 * (3 + 8 * 80) == 1931
    # Llama 3 405B: 126 layers, d_model 16384, 128 heads, d_ff 53248; 16M tokens per batch.
    TRANSFORMER_TRAIN.resolve({"layers": 126, "d_model": 16384, "heads": 128, "d_head": 128,
                               "d_ff": 53248, "vocab": 128256, "seq": 8192, "batch": 2048})
    # DeepSeek-V3's MoE layers: 256 experts, top-8, d_model 7168, expert d_ff 2048.
    MOE.resolve({"experts": 256, "top_k": 8, "d_model": 7168, "d_ff": 2048, "seq": 4096,
                 "batch": 1024})
    # GPT-3 175B pipelined: 96 layers over 8 stages, d_model 12288.
    explorer.WORKLOADS["pipeline"].resolve({"layers": 96, "stages": 8, "microbatches": 64,
                                            "batch": 512, "d_model": 12288})


# --- the math, run in this process on tiny arrays ---------------------------------------------

def test_top_k_routing_fills_buffers_in_order_and_drops_overflow():
    from explorer._src.workloads.models import top_k_combine

    # One group of 3 tokens, 2 experts, capacity 1, top-1: tokens 0 and 1 both choose expert 0;
    # token 0 takes its only slot, token 1 is dropped; token 2 takes expert 1's slot.
    probs = np.array([[[0.9, 0.1], [0.8, 0.2], [0.3, 0.7]]], np.float32)
    c = np.asarray(top_k_combine(probs, top_k=1, capacity=1))
    assert c.shape == (1, 3, 2, 1)
    expected = np.zeros((1, 3, 2, 1), np.float32)
    expected[0, 0, 0, 0] = 0.9     # token 0 -> expert 0, slot 0, gate 0.9
    expected[0, 2, 1, 0] = 0.7     # token 2 -> expert 1, slot 0, gate 0.7
    np.testing.assert_allclose(c, expected, rtol=1e-6)
    # Top-2 with capacity 2: second choices queue behind all first choices of that expert.
    # Expert 0 gets tokens 0, 1 (first choices), expert 1 gets token 2 (first), then token 0's
    # second choice (slot 1); token 1's second choice finds expert 1 full; token 2's second
    # choice finds expert 0 full.
    c = np.asarray(top_k_combine(probs, top_k=2, capacity=2))
    nonzero = {tuple(int(i) for i in ix): round(float(c[tuple(ix)]), 6) for ix in np.argwhere(c)}
    assert nonzero == {(0, 0, 0, 0): 0.9, (0, 1, 0, 1): 0.8, (0, 2, 1, 0): 0.7,
                       (0, 0, 1, 1): 0.1}


@pytest.mark.slow
def test_transformer_block_is_causal():
    import jax
    import jax.numpy as jnp

    from explorer._src.workloads.models import transformer

    p = TRANSFORMER.resolve({"batch": 1, "seq": 6, "d_model": 8, "heads": 2, "d_head": 4,
                             "d_ff": 16})
    keys = jax.random.split(jax.random.key(0), 9)
    args = [jax.random.normal(k, s) for k, s in zip(keys, TRANSFORMER.shapes(p).values(),
                                                   strict=True)]
    block = jax.jit(transformer)
    y = block(*args)
    x2 = args[0].at[:, 4:].set(100.0)        # change the last two positions only
    y2 = block(x2, *args[1:])
    np.testing.assert_allclose(y[:, :4], y2[:, :4], rtol=1e-5)   # earlier outputs unchanged
    assert not jnp.allclose(y[:, 4:], y2[:, 4:])


@pytest.mark.slow
def test_train_step_loss_and_first_adam_update():
    import jax
    import jax.numpy as jnp

    p = TRANSFORMER_TRAIN.resolve({"batch": 2, "seq": 4, "vocab": 16, "d_model": 8,
                                   "heads": 2, "d_head": 4, "d_ff": 16, "layers": 1, "lr": 0.01,
                                   "scan_layers": False})
    fn = jax.jit(TRANSFORMER_TRAIN.build(p))
    shapes = TRANSFORMER_TRAIN.shapes(p)
    args = []
    for i, (name, shape) in enumerate(shapes.items()):
        if name in ("tokens", "targets"):
            args.append(jnp.arange(math.prod(shape)).reshape(shape) % 16)
        elif name == "unembed" or name.startswith(("m.", "v.")):
            args.append(jnp.zeros(shape))
        else:
            args.append(jax.random.normal(jax.random.key(i), shape))
    out = fn(*args)
    # unembed = 0: every logit is 0, so the loss is log(vocab) = log(16).
    assert float(out["loss"]) == pytest.approx(math.log(16), rel=1e-6)
    # First Adam step from m = v = 0 (no bias correction): m = 0.1·g, v = 0.001·g², so
    # Δp = -lr·m/(√v + ε) = -lr·0.1/√0.001·sign(g) = -0.01·3.16228·sign(g) wherever g ≠ 0.
    step = np.asarray(out["unembed"])
    g_sign = -np.sign(step)
    assert np.count_nonzero(g_sign) > 0
    # (ε = 1e-8 shaves up to ~0.1% where |g| is ~1e-5.)
    np.testing.assert_allclose(np.abs(step[g_sign != 0]), 0.01 * 0.1 / math.sqrt(0.001),
                               rtol=1e-2)
    assert out["m.unembed"].shape == (8, 16) and out["v.l0.wq"].shape == (8, 2, 4)


# --- logical-axis rules ------------------------------------------------------------------------

def test_rule_text_parses_to_rules():
    r = parse_rules("batch=data, mlp=model,embed=None,heads=_")
    assert r.rules == (Rule(None, "batch", "data"), Rule(None, "mlp", "model"),
                       Rule(None, "embed", None), Rule(None, "heads", None))
    r = parse_rules("batch=(data,expert),opt:embed='data',experts=(expert)")
    assert r.rules == (Rule(None, "batch", ("data", "expert")), Rule("opt", "embed", "data"),
                       Rule(None, "experts", "expert"))
    assert r.text() == "batch=(data,expert),opt:embed=data,experts=expert"
    assert parse_rules(r.text()) == r
    assert parse_rules({"batch": "data", "opt:embed": "data", "mlp": ("model",)}).rules == (
        Rule(None, "batch", "data"), Rule("opt", "embed", "data"), Rule(None, "mlp", "model"))
    assert parse_rules("") == parse_rules(None) == Rules()


@pytest.mark.parametrize("text, fragment", [
    ("mpl=model", "names logical dimension 'mpl', which is unknown; logical names: 'batch'"),
    ("optim:embed=data", "tensor kind 'optim', which is unknown; kinds: 'param', 'grad'"),
    ("batch", "expected '=' after 'batch'"),
    ("batch=(data", "a '(' is not closed"),
    ("batch=data;mlp=model", "at ';mlp=model'"),
    ("batch=data mlp=model", "expected ',' between rules, found 'mlp'"),
    ("=data", "expected a logical dimension name, found '='"),
])
def test_bad_rule_text_names_the_value(text, fragment):
    with pytest.raises(explorer.RuleError, match=None) as e:
        parse_rules(text)
    assert fragment in str(e.value)


def test_a_later_rule_replaces_the_value_but_keeps_its_priority():
    r = parse_rules("embed=data,mlp=model,param:embed=None,embed=model")
    assert list(r.table("param").items()) == [("embed", "model"), ("mlp", "model")]
    assert r.table("opt") == {"embed": "model", "mlp": "model"}
    assert parse_rules("opt:embed=data").table("param") == {}


def test_logical_spec_takes_rules_in_priority_order():
    # Megatron-SP: heads/mlp rules come before seq, so the MLP hidden [batch, seq, mlp] keeps
    # seq whole (model is taken by mlp), while the residual [batch, seq, embed] splits seq.
    table = {"batch": "data", "mlp": "model", "seq": "model"}
    assert logical_spec(("batch", "seq", "mlp"), table) == ("data", None, "model")
    assert logical_spec(("batch", "seq", "embed"), table) == ("data", "model", None)
    # A tuple is all or nothing (flax): batch over (data, model) blocks mlp over model.
    assert logical_spec(("batch", "mlp"), {"batch": ("data", "model"), "mlp": "model"}) == \
        (("data", "model"), None)
    # Names without a rule, and None names, are not split.
    assert logical_spec((None, "kv"), table) == (None, None)


def test_plan_for_zero1_splits_only_optimizer_state():
    p = TRANSFORMER_TRAIN.resolve({"layers": 1, "scan_layers": False})
    mesh = explorer.parse_mesh("data=8")
    layout = plan(TRANSFORMER_TRAIN, p, mesh, preset="zero1")
    assert layout.specs["tokens"] == ("data", None)
    assert layout.specs["m.l0.wq"] == ("data", None, None)
    assert layout.specs["v.unembed"] == ("data", None)
    assert layout.specs["m.embed"] == (None, "data")        # [vocab, embed]
    assert "l0.wq" not in layout.specs                        # params replicated
    assert layout.origin["m.l0.wq"] == "preset 'zero1'"
    cons = dict(layout.constraints)
    # The new state keeps its input layout; gradients and activations follow the rules.
    assert cons["l0.wq"] == () and cons["m.l0.wq"] == ("data", None, None)
    assert cons["grad.l0.wq"] == (None, None, None)
    assert cons["layer0"] == ("data", None, None)


@pytest.mark.slow
def test_rules_reshard_every_tensor_and_specs_win():
    # One rule table gives the Megatron MLP of tests/test_patterns.py: one all-reduce over model
    # of (256/2)·1024·4 = 524288 bytes.
    r = analyze_workload("mlp", "data=2,model=4", rules="batch=data,mlp=model")
    assert (r.tensor("x").spec, r.tensor("w1").spec, r.tensor("w2").spec) == \
        (("data", None), (None, "model"), ("model", None))
    assert [(c.kind, c.axes, c.bytes) for c in r.collectives] == \
        [("all-reduce", ("model",), 524288)]
    # User rules come after the preset's; a per-tensor spec wins over both.
    layout = plan(explorer.WORKLOADS["mlp"], explorer.WORKLOADS["mlp"].resolve({}),
                  explorer.parse_mesh("data=2,model=4"), specs={"w2": "None,model"},
                  preset="megatron", rules="mlp=None")
    assert layout.specs == {"x": ("data", None), "w2": (None, "model")}
    assert layout.origin == {"x": "preset 'megatron' + rules", "w2": "spec",
                             "hidden": "preset 'megatron' + rules"}


def test_rules_naming_a_missing_axis_or_a_workload_without_names():
    with pytest.raises(explorer.RuleError, match="rule 'batch=fsdp' names mesh axis 'fsdp', "
                       "which mesh 'data=8' lacks; mesh axes: 'data'"):
        analyze_workload("mlp", "data=8", rules="batch=fsdp")
    from explorer._src.workloads.base import Range, Workload

    bare = Workload("bare", "no logical names", {"n": 8}, lambda p: {"x": (p["n"],)},
                    lambda p: abs, bounds={"n": Range(1, 64)})
    with pytest.raises(explorer.RuleError, match="workload 'bare' declares no logical "
                       "dimension names"):
        plan(bare, {"n": 8}, explorer.parse_mesh("data=8"), preset="dp")


# --- activation constraints --------------------------------------------------------------------

@pytest.mark.slow
def test_switching_strategy_between_layers_costs_an_all_to_all():
    B, S, D = 8, 16, 256
    free = analyze_workload("transformer", "data=8", specs={"x": "data,None,None"})
    assert free.collectives == ()          # data parallel forward: no communication
    r = analyze_workload("transformer", "data=8", specs={"x": "data,None,None"},
                         activations={"layer0.mid": "None,data,None"})
    # The MLP runs split over seq instead of batch: the residual stream moves from batch-split
    # to seq-split, an all-to-all of B·S·D·4/8 = 16384 bytes per device; Shardy moves the
    # attention's per-head output [B, S, H, K] (as big) the same way rather than the sum.
    assert [(c.kind, c.axes, c.bytes) for c in r.collectives] == \
        [("all-to-all", ("data",), B * S * D * F32 // 8)] * 2
    assert r.tensor("out").spec == (None, "data", None)
    assert r.workload.activations == {"layer0.mid": "None,data,None"}


def test_bad_activation_input_names_the_point():
    with pytest.raises(explorer.WorkloadError, match="no constraint point 'layer9'; its points "
                       "are 'layer0', 'layer0.heads', 'layer0.mid'"):
        analyze_workload("transformer", "data=8", activations={"layer9": "data,None,None"})
    with pytest.raises(explorer.WorkloadError, match="'matmul' has no constraint points"):
        analyze_workload("matmul", "data=8", activations={"hidden": "data,None"})
    with pytest.raises(explorer.UnknownAxisError, match="axis 'modle'") as e:
        analyze_workload("transformer", "model=4", activations={"layer0": "None,modle,None"})
    assert "constraint point 'layer0'" in str(e.value)
    with pytest.raises(explorer.RankError, match="has rank 3"):
        analyze_workload("transformer", "model=4", activations={"final": "model,None,None,None"})


# --- the command line --------------------------------------------------------------------------

def run(*args):
    return subprocess.run([sys.executable, "-m", "explorer._src.cli", *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
def test_cli_preset_rules_and_activation():
    p = run("analyze", "--workload", "transformer", "--mesh", "data=2,model=4", "--preset",
            "megatron", "--rules", "batch=None", "--activation", "final=None,None,model",
            "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    w = d["workload"]
    assert w["preset"] == "megatron" and w["rules"].endswith(",batch=None")
    assert w["specs"]["wq"] == "None,model,None" and "x" not in w["specs"]
    assert w["activations"]["final"] == "None,None,model"
    # batch=None: x is whole on every device, so each all-reduce moves B·S·D·4 = 131072.
    assert [(c["kind"], c["axes"], c["bytes"]) for c in d["collectives"]][:2] == \
        [("all-reduce", ["model"], 131072)] * 2
    p = run("analyze", "--workload", "moe", "--mesh", "expert=8", "--preset", "ep")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("preset ep\nrules experts=expert,batch=expert\n")
    assert "all-to-all" in p.stdout


def test_cli_rules_as_pairs_the_first_that_fits_wins(cli):
    # embed takes model first, so batch and mlp fall back to their second pair, data.
    code, out, err = cli(["analyze", "--workload", "mlp", "--mesh", "data=2,model=4", "--rules",
                          "(embed,model),(batch,model),(batch,data),[mlp,model],(mlp,data)",
                          "--json"])
    assert code == 0, err
    w = json.loads(out)["workload"]
    assert w["rules"] == "(embed,model),(batch,model),(batch,data),(mlp,model),(mlp,data)"
    assert w["specs"] == {"x": "data,model", "w1": "model,data", "w2": "data,model"}


def test_cli_lists_presets_and_points():
    p = run("presets")
    assert p.returncode == 0
    assert "zero3: ZeRO stage 3" in p.stdout and "mesh axes: model (optional: data)" in p.stdout
    p = run("workloads")
    assert "transformer_train:" in p.stdout and "m.layers.wq[2,64,4,16]" in p.stdout
    assert "points: layer0[batch,seq,embed]" in p.stdout


@pytest.mark.parametrize("args, fragment", [
    (["--preset", "zero4"], "preset 'zero4' is unknown; choose one of 'dp'"),
    (["--preset", "dp", "--mesh", "model=8"], "has no axis 'data'"),
    (["--rules", "mpl=model"], "logical dimension 'mpl'"),
    (["--rules", "(mpl,model)"], "pairs name no logical dimension the tensors have ('mpl')"),
    (["--rules", "(batch,data"], "expected ')' closing the pair for 'batch' at the end"),
    (["--activation", "layer0"], "--activation 'layer0' is not written as NAME=VALUE"),
    (["--activation", "lyr0=data,None,None"], "no constraint point 'lyr0'"),
])
@pytest.mark.slow
def test_cli_bad_layout_input_exits_2(args, fragment):
    if "--mesh" not in args:
        args = [*args, "--mesh", "data=8"]
    p = run("analyze", "--workload", "transformer", *args)
    assert p.returncode == 2, p.stdout
    assert fragment in p.stderr and "Traceback" not in p.stderr


# --- bring your own model: Flax NNX -------------------------------------------------------------

def test_flax_nnx_example_names_params_by_path(capsys):
    pytest.importorskip("flax")
    example = runpy.run_path(str(ROOT / "examples" / "flax_nnx.py"))
    r = example["main"](["--mesh", "data=2,model=4"])
    assert "all-reduce" in capsys.readouterr().out
    # Parameters are named by their path in the model; rules batch=data,mlp=model split the
    # MLP Megatron-style.
    assert r.tensor("blocks.0.up.kernel").spec == (None, "model")
    assert r.tensor("blocks.1.down.kernel").spec == ("model", None)
    assert r.tensor("blocks.0.norm.scale").spec == (None,)
    assert r.tensor("x").spec == ("data", None)
    # Per block, one all-reduce over model in the forward (after down) and one in the backward
    # (the gradient of up's input), each (64/2)·256·4 = 32768 bytes.
    model = [(c.kind, c.bytes) for c in r.collectives if c.axes == ("model",)]
    assert model == [("all-reduce", 32768)] * 4
    # Gradients all-reduced over data, per device: norm scale+bias 2·256, up.kernel 256·1024/4,
    # up.bias 1024/4, down.kernel 1024/4·256, down.bias 256 = 132096 floats per block;
    # two blocks: 264192 floats = 1056768 bytes.
    assert sum(c.bytes for c in r.collectives if c.axes == ("data",)) == 264192 * F32
