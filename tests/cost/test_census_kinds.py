"""The kinds the census found unmeasured, priced against what one TPU v5e chip measured.

benchmarks/results/tpu-v5e-2026-12-07/census-kinds holds, for 18 programs run on the chip
(`tpu_unmeasured.py --census`), the optimized HLO the chip ran and each instruction's measured
time: the ground truth here. The sorting rates were fitted on earlier runs and the vector unit's
rate on other programs, so every number below is held out.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from explorer._src.cost.estimate import estimate
from explorer._src.cost.ranges import step_range
from explorer._src.hlo.arithmetic import Sorting, sorting_work
from explorer._src.hlo.schedule import read_schedule, schedule_work
from explorer._src.report.trace import step_trace

KEPT = Path(__file__).parents[2] / "benchmarks/results/tpu-v5e-2026-12-07/census-kinds"
RUNS = {r["name"]: r for r in json.loads((KEPT / "unmeasured.json").read_text())}
# The programs whose largest input is their uint32 key: analyze prices them with that dtype.
KEYED = ("bits_16m", "bits_64m", "uniform_32m", "normal_bf16_32m", "dropout_bf16")


def priced(name: str):
    with gzip.open(KEPT / f"{name}.hlo.txt.gz", "rt") as f:
        schedule = read_schedule(f.read())
    est = estimate([], None, None, None, "uint32" if name in KEYED else "bfloat16", ["data"],
                   [1], "tpu-v5e-1x1", work=schedule_work(schedule))
    trace = step_trace(schedule, [], est)
    rng = step_range(trace, schedule, "TPU v5e", est.compute)
    return schedule, trace, rng


@pytest.mark.parametrize("name, within", [
    *[(n, 1.03) for n in KEYED],                                    # threefry, on the vector unit
    ("sort_1m", 1.16), ("sort_4m_bf16", 1.16), ("sort_rows", 1.16), ("sort_rows_long", 1.16),
    ("top_k_decode", 1.38), ("top_k_128k_vocab", 1.38), ("top_k_8_rows", 1.38),
    ("top_k_64_rows", 1.38),
])
def test_the_heaviest_instruction_is_priced_as_the_chip_ran_it(name, within):
    _, trace, _ = priced(name)
    measured = RUNS[name]["measured_ops"]
    heaviest = max(measured, key=measured.get)
    predicted = sum(e.duration for e in trace.events if e.hlo == heaviest)
    assert 1 / within <= measured[heaviest] / predicted <= within, (heaviest, predicted)


def test_no_program_is_2x_off_with_no_word():
    """Each program's measured step lies within 2x of the prediction, or inside its range with
    a caution saying which way it could be off."""
    for name, run in RUNS.items():
        _, trace, rng = priced(name)
        measured = run["measured_device_s"]
        if 0.5 <= measured / trace.seconds <= 2.0:
            continue
        assert rng.low_seconds <= measured <= rng.high_seconds and rng.cautions, name


def test_a_cnn_whose_results_stay_on_chip_is_said_to_maybe_run_faster():
    # census_cnn_train ran 114 us against 292 predicted: its fusions' results lie in on-chip
    # memory (S(1)), whose bytes the model charges at HBM speed.
    _, trace, rng = priced("census_cnn_train")
    assert RUNS["census_cnn_train"]["measured_device_s"] < trace.seconds / 2
    (caution,) = [c for c in rng.cautions if c.startswith("the step could take as little as")]
    assert "writes to on-chip memory (S(1))" in caution


def test_sorting_work_reads_a_sort_and_a_top_k_by_hand():
    schedule, _, _ = priced("sort_rows")                 # sort(f32[4096,1024], axis=-1)
    (sort,) = [s for s in schedule.steps if s.instr.opcode == "sort"]
    assert sorting_work(schedule.module, sort.instr) == Sorting(4096 * 1024, 1024)
    assert sort.sorting.network_passes == 10 * 11 // 2
    schedule, _, _ = priced("top_k_64_rows")             # top_k(f32[2048,32000], 64)
    (top,) = [s for s in schedule.steps if s.instr.custom_call_target == "TopK"]
    assert top.sorting == Sorting(2048 * 32000, 32000, 64)
