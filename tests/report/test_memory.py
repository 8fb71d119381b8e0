"""Memory per device by tensor kind, against sizes worked out by hand from the workloads' shapes.

transformer_train's defaults (explorer/_src/workloads/models.py): batch 8, seq 32, vocab 256,
d_model 64, heads 4, d_head 16, d_ff 256, 2 layers, float32. Its parameters:
  embed [256,64]                                    16384
  per layer: ln1 [64], ln2 [64]                       128
             wq, wk, wv [64,4,16]                   12288
             wo [4,16,64]                            4096
             w1 [64,256], w2 [256,64]               32768   -> 49280 per layer, 98560 for two
  final_norm [64], unembed [64,256]                 16448
  total                                            131392 elements = 525568 bytes replicated.
Adam keeps two more of the same (m, v). The step returns params, m and v updated; it donates
them (as a training loop does), so each new copy is written into its old one's buffer and held
once; and one gradient per parameter.
"""

import json

import pytest

import explorer
from explorer import TensorSpec as T

PARAM_BYTES = 131392 * 4
# tokens and targets int32 [8,32], split over data by `batch=data`, and the f32 scalar loss.
OTHER_BYTES_ON_DATA_8 = 2 * (8 * 32 * 4) // 8 + 4


@pytest.mark.slow
@pytest.mark.parametrize("preset, split", [("zero3", 8), ("dp", 1)])
def test_transformer_train_params_grads_and_optimizer_state(preset, split):
    # zero3 splits every parameter's embed dimension (64, divisible by 8) over data, and so its
    # gradient and its Adam state; dp replicates them all.
    r = explorer.analyze_workload("transformer_train", "data=8", preset=preset)
    kinds = r.memory.by_kind
    # Donated: the updated params, m and v are the inputs' buffers, counted once.
    assert kinds["params"] == PARAM_BYTES // split
    assert kinds["optimizer"] == 2 * PARAM_BYTES // split     # m and v
    assert r.memory.aliased == 3 * PARAM_BYTES // split
    assert kinds["grads"] == PARAM_BYTES // split
    assert kinds["other"] == OTHER_BYTES_ON_DATA_8
    assert kinds["activations"] == r.memory.temporaries
    # XLA's own argument bytes: params, m, v and the tokens and targets.
    assert r.memory.arguments == 3 * PARAM_BYTES // split + 2 * (8 * 32 * 4) // 8


@pytest.mark.slow
def test_inference_workload_has_no_grads_and_its_temporaries_are_activations():
    # mlp under megatron on model=4: w1 [1024,4096] split on mlp, w2 [4096,1024] split on mlp:
    # 2 · 1024·4096·4 / 4 bytes of params; x [256,1024] replicated and y [256,1024] are other.
    r = explorer.analyze_workload("mlp", "model=4", preset="megatron")
    kinds = r.memory.by_kind
    assert kinds["params"] == 2 * 1024 * 4096 * 4 // 4
    assert kinds["other"] == 2 * 256 * 1024 * 4
    assert (kinds["grads"], kinds["optimizer"]) == (0, 0)
    assert kinds["activations"] == r.memory.temporaries


def test_gradients_without_constraint_points_are_not_located():
    # Specs alone pin no `grad.*` point, so the gradients cannot be told from other
    # intermediates: reported as not located (None), never guessed.
    r = explorer.analyze_workload("mlp_train", "data=8", specs={"x": "data,None"})
    kinds = r.memory.by_kind
    assert kinds["grads"] is None
    assert kinds["activations"] == r.memory.temporaries
    # w1 and w2 replicated. mlp_train returns its new weights as a tuple (out.0, out.1), not
    # under their names; donated, they are written into w1's and w2's buffers, so they count
    # once, as params, and `other` is x [256,1024] split over data.
    assert kinds["params"] == 2 * 1024 * 4096 * 4
    assert kinds["other"] == 256 * 1024 * 4 // 8
    # Undonated, the new weights are outputs of their own, counted as other.
    kept = explorer.analyze_workload("mlp_train", "data=8", specs={"x": "data,None"},
                                     params={"donate_state": "false"}).memory.by_kind
    assert kept["params"] == 2 * 1024 * 4096 * 4
    assert kept["other"] == 256 * 1024 * 4 // 8 + 2 * 1024 * 4096 * 4


def identity_plus_one(x):
    return x + 1


def test_a_user_function_is_all_other_and_in_the_json():
    r = explorer.analyze(identity_plus_one, T("x", (64, 64), "float32", "data,None"),
                         mesh="data=8")
    assert r.memory.by_kind == {"params": 0, "grads": 0, "optimizer": 0, "activations": 0,
                                "other": r.memory.total}
    d = json.loads(json.dumps(r.to_dict()))
    assert d["memory"]["by_kind"]["other"] == r.memory.total
    assert set(d["memory"]["by_kind"]) == {"params", "grads", "optimizer", "activations",
                                           "other"}


def test_the_summary_prints_memory_by_kind():
    from explorer._src.report.summary import summary
    from explorer._src.units import format_bytes

    r = explorer.analyze_workload("mlp_train", "data=8", specs={"x": "data,None"})
    [line] = [x for x in summary(r).splitlines() if x.startswith("memory by kind")]
    assert f"params {format_bytes(2 * 1024 * 4096 * 4)}" in line     # 32.0 MiB
    assert "grads not located" in line
