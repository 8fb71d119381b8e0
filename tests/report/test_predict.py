"""Predictions attached to compiled reports: est_seconds per collective and the step estimate.

Expected times are computed here from public formulas and datasheet numbers, not by the model:
NCCL's all-reduce over n GPUs moves 2(n-1)/n·S bytes through each GPU's link (nccl-tests
PERFORMANCE.md, "busBw = algBw * 2(n-1)/n"), and an H100 SXM's NVLink 4 gives 900 GB/s in both
directions, 450 GB/s each way (nvidia.com/en-us/data-center/h100).
"""

import json

import pytest

import explorer
from explorer import analyze_workload

NVLINK_H100 = 450e9   # bytes/s, one direction


def test_megatron_all_reduce_on_h100_nvlink():
    batch, d_model = 4096, 1024
    r = analyze_workload("mlp", "data=2,model=4", target="h100-8",
                         specs={"x": "data,None", "w1": "None,model", "w2": "model,None"},
                         params={"batch": batch, "d_model": d_model})
    [c] = r.collectives
    v = batch // 2 * d_model * 4                    # 8 MiB per device
    expected = 2 * (4 - 1) / 4 * v / NVLINK_H100     # ring all-reduce over the 4 model GPUs
    assert c.est_seconds == pytest.approx(expected, rel=1e-9)
    est = r.estimate
    assert est.comm_seconds == pytest.approx(expected, rel=1e-9)
    assert est.step_lower_seconds == pytest.approx(max(est.compute_seconds, expected))
    assert est.step_upper_seconds == pytest.approx(est.compute_seconds + expected)
    assert est.memory.fits
    d = json.loads(json.dumps(r.to_dict()))
    assert d["collectives"][0]["est_seconds"] == pytest.approx(expected, rel=1e-9)
    assert d["cost"]["estimate"]["target"] == "h100-8"


def test_the_cached_compile_is_re_predicted_for_another_target():
    specs = {"x": "data,None", "w1": "None,model", "w2": "model,None"}
    a = analyze_workload("mlp", "data=2,model=4", specs=specs, target="h100-8")
    b = analyze_workload("mlp", "data=2,model=4", specs=specs, target="a100-8")
    assert b.timing.cached
    # A100 NVLink 3: 600 GB/s both ways, 300 GB/s each way, vs H100's 450: 1.5× slower when
    # bandwidth-bound, never faster.
    assert b.collectives[0].est_seconds >= a.collectives[0].est_seconds


def test_unknown_target_lists_the_choices_before_compiling():
    with pytest.raises(explorer.ExplorerError) as e:
        analyze_workload("mlp", "data=8", target="h1000-8")
    assert "'h1000-8'" in str(e.value) and "h100-8" in str(e.value)
