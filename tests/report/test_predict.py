"""Predictions attached to compiled reports: est_seconds per collective and the step estimate.

Expected times are computed here from public formulas and datasheet numbers, not by the model:
NCCL's all-reduce over n GPUs moves 2(n-1)/n·S bytes through each GPU's link (nccl-tests
PERFORMANCE.md, "busBw = algBw * 2(n-1)/n"), and an H100 SXM's NVLink 4 gives 900 GB/s in both
directions, 450 GB/s each way (nvidia.com/en-us/data-center/h100). Predictions are at the rate
measured NCCL rings reach by default: stas00/ml-engineering (network/README.md, at 744d01e)
measures 367.61 GB/s ring busbw on 8x H200 (NVLink 4, as H100) and 234.89 GB/s on 8x A100.
"""

import json

import pytest

import explorer
from explorer import analyze_workload

NVLINK_H100 = 367.61e9   # bytes/s reached, of 450e9 one direction
NVLINK_A100 = 234.89e9   # bytes/s reached, of 300e9: NVLink 3, "600GB/s" both ways (nvidia a100)
NVLINK_STEP = 0.6e-6  # s per ring step: NCCL's hwLat[NVLINK][Ring][LL] (src/graph/tuning.cc)

MEGATRON = {"x": "data,None", "w1": "None,model", "w2": "model,None"}
BIG = {"batch": 4096, "d_model": 1024}


@pytest.mark.slow
def test_megatron_all_reduce_on_h100_nvlink():
    batch, d_model = BIG["batch"], BIG["d_model"]
    r = analyze_workload("mlp", "data=2,model=4", target="h100-8", specs=MEGATRON, params=BIG)
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
    # One CPU compile priced on two targets (each GPU's own compile would be its own program).
    a = analyze_workload("mlp", "data=2,model=4", specs=MEGATRON, params=BIG, target="h100-8",
                         compile_for="cpu")
    b = analyze_workload("mlp", "data=2,model=4", specs=MEGATRON, params=BIG, target="a100-8",
                         compile_for="cpu")
    assert b.timing.cached
    assert a.estimate.target == "h100-8" and b.estimate.target == "a100-8"
    # 8 MiB per device over 4 GPUs: 2·3/4·V/w is 17 us on H100, 27 us on A100, against a
    # latency floor of 2·3 ring steps · 0.6 us = 3.6 us, so both are bandwidth-bound and the
    # ratio of their times is the inverse ratio of the measured NVLink ring rates.
    v = BIG["batch"] // 2 * BIG["d_model"] * 4
    [ta], [tb] = a.estimate.collectives, b.estimate.collectives
    assert ta.bound == tb.bound == "bandwidth"
    assert 2 * 3 * NVLINK_STEP < 2 * 3 / 4 * v / NVLINK_H100
    assert b.collectives[0].est_seconds / a.collectives[0].est_seconds == \
        pytest.approx(NVLINK_H100 / NVLINK_A100, rel=1e-9)
    assert b.collectives[0].est_seconds == pytest.approx(2 * 3 / 4 * v / NVLINK_A100, rel=1e-9)


def test_unknown_target_lists_the_choices_before_compiling():
    with pytest.raises(explorer.ExplorerError) as e:
        analyze_workload("mlp", "data=8", target="h1000-8")
    assert "'h1000-8'" in str(e.value) and "h100-8" in str(e.value)
