"""Where each predicted instruction's time comes from, and the step as a range, on hand-written
scheduled modules priced for one TPU v5e chip, every expected time worked out by hand.

The chip's rates (explorer/_src/cost/catalog/tpu.py): matmuls at 0.97 x 197 TFLOP/s =
191.09 TFLOP/s; copies at 0.81 x 819 GB/s = 663.39 GB/s. The rule (docs/cost-model.md,
"Provenance and ranges"): an instruction of a kind never measured on the chip may take
UNMEASURED_SLOWDOWN (34) times its prediction, a scatter (measured slower) 4.25 times; the
step's high end is the step plus what each may add.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from explorer._src.cost.coverage import (
    COVERAGE,
    UNMEASURED_SLOWDOWN,
    coverage_for,
    instruction_kind,
)
from explorer._src.cost.estimate import estimate
from explorer._src.cost.ranges import step_range
from explorer._src.hlo.schedule import read_schedule, schedule_work
from explorer._src.report.trace import step_trace

ROOT = Path(__file__).resolve().parents[2]
MATMUL = 197e12 * 0.97          # FLOP/s
COPY = 819e9 * 0.81             # bytes/s

_ADD = """%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}
"""

KERNEL_AND_SCATTER = """HloModule m, is_scheduled=true

""" + _ADD + """
ENTRY %main (p0: bf16[256,1024], p1: f32[1024,256], p2: s32[64,1], p3: f32[64,256]) -> (bf16[256,1024], f32[1024,256]) {
  %p0 = bf16[256,1024]{1,0} parameter(0)
  %p1 = f32[1024,256]{1,0} parameter(1)
  %p2 = s32[64,1]{1,0} parameter(2)
  %p3 = f32[64,256]{1,0} parameter(3)
  %my_kernel.3 = bf16[256,1024]{1,0} custom-call(bf16[256,1024]{1,0} %p0), custom_call_target="tpu_custom_call", metadata={op_name="jit(step)/jit(my_kernel)/pallas_call" source_file="/src/model.py" source_line=12}, backend_config={"custom_call_config":{"cost_estimate":{"flops":"1910900000000","bytes_accessed":"1048576","transcendentals":"0"}}}
  %scatter.1 = f32[1024,256]{1,0} scatter(f32[1024,256]{1,0} %p1, s32[64,1]{1,0} %p2, f32[64,256]{1,0} %p3), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add, metadata={op_name="jit(step)/scatter-add" source_file="/src/model.py" source_line=20}
  ROOT %t = (bf16[256,1024]{1,0}, f32[1024,256]{1,0}) tuple(%my_kernel.3, %scatter.1)
}
"""  # noqa: E501

MATMUL_ONLY = """HloModule m, is_scheduled=true

ENTRY %main (a: bf16[4096,4096], b: bf16[4096,4096]) -> bf16[4096,4096] {
  %a = bf16[4096,4096]{1,0} parameter(0)
  %b = bf16[4096,4096]{1,0} parameter(1)
  ROOT %dot.1 = bf16[4096,4096]{1,0} dot(bf16[4096,4096]{1,0} %a, bf16[4096,4096]{1,0} %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(mm)/dot_general" source_file="/src/mm.py" source_line=3}
}
"""  # noqa: E501

FLASH = """HloModule m, is_scheduled=true

ENTRY %main (q: bf16[4,16,4096,128]) -> bf16[4,16,4096,128] {
  %q = bf16[4,16,4096,128]{3,2,1,0} parameter(0)
  ROOT %flash_attention.1 = bf16[4,16,4096,128]{3,2,1,0} custom-call(bf16[4,16,4096,128]{3,2,1,0} %q), custom_call_target="tpu_custom_call", metadata={op_name="jit(attention)/jit(flash_attention)/pallas_call" source_file="/src/attn.py" source_line=7}, backend_config={"custom_call_config":{"cost_estimate":{"flops":"554050781184","bytes_accessed":"268435456","transcendentals":"0"}}}
}
"""  # noqa: E501

SORT = """HloModule m, is_scheduled=true

%less (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %lt = pred[] compare(f32[] %a, f32[] %b), direction=LT
}

ENTRY %main (x: f32[1048576]) -> f32[1048576] {
  %x = f32[1048576]{0} parameter(0)
  ROOT %sort.2 = f32[1048576]{0} sort(f32[1048576]{0} %x), dimensions={0}, to_apply=%less, metadata={op_name="jit(s)/sort" source_file="/src/s.py" source_line=5}
}
"""  # noqa: E501


def priced(text: str):
    schedule = read_schedule(text)
    est = estimate([], None, None, None, "bfloat16", ["data"], [1], "tpu-v5e-1x1",
                   work=schedule_work(schedule))
    trace = step_trace(schedule, [], est)
    return schedule, est, trace, step_range(trace, schedule, "TPU v5e", est.compute)


def test_a_kernel_and_a_scatter_are_unmeasured_and_widen_the_step_by_hand():
    schedule, est, trace, rng = priced(KERNEL_AND_SCATTER)
    by = {e.hlo: e for e in trace.events}
    kernel, scatter = by["my_kernel.3"], by["scatter.1"]
    # The kernel: 1.9109e12 FLOPs of its cost estimate at 191.09 TFLOP/s = 10 ms (its 1 MiB
    # is microseconds). The scatter: operand 1 MiB + indices 256 B + updates 64 KiB + result
    # 1 MiB = 2,162,944 bytes, about half of them read, at the copy rate.
    assert kernel.duration == pytest.approx(1.9109e12 / MATMUL)
    assert kernel.duration == pytest.approx(0.010)
    p_scatter = 2_162_944 / COPY
    assert scatter.duration == pytest.approx(p_scatter)
    assert not kernel.basis.measured and kernel.basis.kind == "kernel tpu_custom_call my_kernel"
    assert scatter.basis.measured and scatter.basis.kind == "scatter"
    step = 0.010 + p_scatter                     # one after the other on the compute lane
    assert rng.seconds == pytest.approx(step)
    # High end: the kernel at 34x, the scatter at 4.25x (its worst measured), added to the step.
    assert UNMEASURED_SLOWDOWN == 34
    high = step + (34 - 1) * 0.010 + (4.25 - 1) * p_scatter
    assert rng.high_seconds == pytest.approx(high)
    assert rng.low_seconds == pytest.approx(step)
    assert rng.unmeasured_seconds == pytest.approx(0.010)
    assert [p.hlo for p in rng.parts] == ["my_kernel.3", "scatter.1"]
    # 34x the step: a caution naming both instructions at their lines.
    (caution,) = rng.cautions
    assert "my_kernel.3 (unmeasured: kernel tpu_custom_call my_kernel) at /src/model.py:12" \
        in caution
    assert "scatter.1 (measured slower: scatter) at /src/model.py:20" in caution
    assert "340 ms" in caution


def test_a_matmul_of_a_measured_kind_is_one_number():
    _, est, trace, rng = priced(MATMUL_ONLY)
    (event,) = trace.events
    # 2 * 4096^3 FLOPs at 191.09 TFLOP/s.
    assert event.duration == pytest.approx(2 * 4096 ** 3 / MATMUL)
    assert event.basis.measured and event.basis.kind == "matmul bf16"
    assert event.basis.slowdown == 1.0
    assert rng.low_seconds == rng.seconds == rng.high_seconds
    assert not rng.widened and rng.parts == () and rng.cautions == ()


def test_a_measured_kernel_runs_at_its_measured_efficiency_within_its_measured_spread():
    _, est, trace, rng = priced(FLASH)
    (event,) = trace.events
    roofline = 554050781184 / MATMUL           # 2.99 ms: its estimate at the matmul rate
    efficiency = 2.90 / 21.09                  # as measured for this kernel on the chip
    assert event.basis.measured and event.basis.efficiency == pytest.approx(efficiency)
    assert event.duration == pytest.approx(roofline / efficiency)
    assert est.compute.seconds == pytest.approx(roofline / efficiency)
    # Its range: from the fastest it ran against its estimate (7.0x) to the slowest (11.1x).
    assert rng.low_seconds == pytest.approx(roofline * 7.0)
    assert rng.high_seconds == pytest.approx(roofline * 11.1)
    assert rng.cautions == ()                  # 11.1 / (21.09 / 2.90) = 1.53x: under 2x


def test_at_the_vendors_peak_no_measured_efficiency_applies():
    schedule = read_schedule(FLASH)
    est = estimate([], None, None, None, "bfloat16", ["data"], [1], "tpu-v5e-1x1",
                   work=schedule_work(schedule), peak=True)
    (event,) = step_trace(schedule, [], est).events
    assert event.duration == pytest.approx(554050781184 / 197e12)
    assert est.compute.seconds == pytest.approx(554050781184 / 197e12)


def test_a_sort_on_a_v5e_is_priced_at_its_measured_network_rate():
    _, est, trace, rng = priced(SORT)
    (event,) = trace.events
    assert event.basis.measured and event.basis.kind == "sort"
    # n = 2^20 keys, L = 20: a bitonic network's 20 * 21 / 2 = 210 passes over them, each key
    # and pass at 0.917 + 0.316 * 20 ps (fitted on a sort of 2^24 floats and an argsort of
    # 2^22, catalog/tpu.py).
    by_hand = 1048576 * 210 * (0.917e-12 + 0.316e-12 * 20)
    assert event.duration == pytest.approx(by_hand)
    # Independently: the chip sorted 2^20 floats (with their iota) in 1.612 ms
    # (tpu-v5e-2026-12-07/census-kinds, sort_1m, measured after the fit).
    assert event.duration == pytest.approx(1.6122e-3, rel=0.05)
    assert rng.low_seconds == rng.high_seconds == rng.seconds      # measured within 2x


def test_a_sort_where_none_was_measured_is_bounded_by_its_passes():
    schedule = read_schedule(SORT)
    est = estimate([], None, None, None, "bfloat16", ["data"], [4], "tpu-v5p-2x2x1",
                   work=schedule_work(schedule))
    trace = step_trace(schedule, [], est)
    rng = step_range(trace, schedule, "TPU v5p", est.compute)
    (event,) = trace.events
    assert not event.basis.measured and event.basis.kind == "sort"
    # 8 MiB moved (4 MiB in, 4 MiB out) at v5p's 2765 GB/s (CLOUD; no measured fraction).
    nbytes = 2 * 4 * 1048576
    assert event.duration == pytest.approx(nbytes / 2765e9)
    # n = 2^20, L = 20: 210 passes over its bytes, more than 34x its prediction.
    assert rng.high_seconds == pytest.approx(210 * nbytes / 2765e9)
    assert rng.high_seconds > 34 * rng.seconds


def test_kinds():
    schedule = read_schedule(KERNEL_AND_SCATTER)
    kinds = [instruction_kind(s, schedule.module) for s in schedule.steps
             if s.kind.value == "compute"]
    assert kinds == ["kernel tpu_custom_call my_kernel", "scatter"]


def test_every_coverage_entry_cites_a_kept_result():
    assert len({(c.chip, c.kind) for c in COVERAGE}) == len(COVERAGE)
    for c in COVERAGE:
        # A kept result of the project's, or (the GPUs' largest matmuls) a published table.
        assert (ROOT / c.source).is_file() or c.source.startswith("https://"), c.source
        assert c.worst >= 0 and c.what
    assert coverage_for("TPU v5e", "fft") is None
    assert coverage_for("TPU v5p", "sort") is None
    assert coverage_for("H100 SXM", "matmul bf16").source.startswith("https://github.com/")
    assert coverage_for("H100 SXM", "elementwise") is None


def test_the_estimate_text_and_the_timeline_name_the_line():
    from dataclasses import replace

    from explorer._src.ui.timeline import range_html

    _, est, trace, rng = priced(KERNEL_AND_SCATTER)
    est = replace(est, step_trace_seconds=trace.seconds, step_range=rng,
                  cautions=est.cautions + rng.cautions)
    text = est.text()
    assert "range    10 ms .. 340 ms around 10 ms (up to 34x" in text
    assert "caution  the step could take up to 340 ms" in text and "/src/model.py:12" in text
    html = range_html(SimpleNamespace(estimate=est))
    assert "model.py" in html and "my_kernel.3" in html and "<b>unmeasured</b>" in html
    assert "measured slower" in html
    assert est.to_dict()["step_range"]["high_seconds"] == pytest.approx(rng.high_seconds)
    assert math.isclose(rng.high_seconds / rng.seconds, 34, rel_tol=1e-3)


# ---------------------------------------------------------------------------------------------
# Held against the chip: every kept program's HLO as the chip compiled it, priced here, and
# its measured device time (benchmarks/results/tpu-v5e-2026-12-06 and -07).

RUN_06 = ROOT / "benchmarks" / "results" / "tpu-v5e-2026-12-06"
RUN_07 = ROOT / "benchmarks" / "results" / "tpu-v5e-2026-12-07" / "unmeasured"
MORE = ROOT / "benchmarks" / "results" / "tpu-v5e-2026-12-07" / "more-kinds"


def _kept_hlo(name: str, path: Path) -> str:
    """A kept program's HLO: a gzipped file of its own, or its member of a tar of several."""
    import gzip
    import tarfile

    if path.name.endswith(".tar.gz"):
        with tarfile.open(path) as tar:
            return tar.extractfile(f"{name}.hlo.txt").read().decode()
    with gzip.open(path, "rt") as f:
        return f.read()


def _kept_runs():
    import json

    runs = [(p["name"], RUN_06 / "hlo" / f"{p['name']}.hlo.txt.gz", p["module_ns"] * 1e-9)
            for p in json.loads((RUN_06 / "programs.json").read_text())["programs"]]
    runs += [(r["name"], RUN_07 / f"{r['name']}.hlo.txt.gz", r["measured_device_s"])
             for r in json.loads((RUN_07 / "unmeasured.json").read_text())]
    runs += [(name, MORE / r["log"].replace("log", "hlo").replace(".txt", ".tar.gz"),
              r["measured_device_s"])
             for name, r in json.loads((MORE / "measured.json").read_text()).items()]
    return runs


@pytest.mark.parametrize("name,path,measured", _kept_runs(), ids=lambda v: str(v)[-40:])
def test_no_program_the_chip_ran_is_off_by_2x_with_no_word(name, path, measured):
    """Wherever the chip's time is 2x the prediction or more (or half or less), it lies inside
    the predicted range, and the range carries a caution where it could be 2x off."""
    _, est, trace, rng = priced(_kept_hlo(name, path))
    ratio = measured / rng.seconds
    if 0.5 < ratio < 2:
        return
    assert rng.low_seconds <= measured <= rng.high_seconds, (name, ratio, rng.text())
    assert rng.cautions, (name, ratio)


GATHER = """HloModule m, is_scheduled=true

ENTRY %main (t: f32[4096,1], i: s32[1048576,1]) -> f32[1048576,1] {
  %t = f32[4096,1]{1,0} parameter(0)
  %i = s32[1048576,1]{1,0} parameter(1)
  ROOT %gather.1 = f32[1048576,1]{1,0} gather(f32[4096,1]{1,0} %t, s32[1048576,1]{1,0} %i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,1}, metadata={op_name="jit(g)/gather" source_file="/src/g.py" source_line=9}
}
"""  # noqa: E501

FFT = """HloModule m, is_scheduled=true

ENTRY %main (p: c64[4096,4096]) -> c64[4096,4096] {
  %p = c64[4096,4096]{1,0} parameter(0)
  ROOT %fft.1 = c64[4096,4096]{1,0} fft(c64[4096,4096]{1,0} %p), fft_type=FFT, fft_length={4096}, metadata={op_name="jit(f)/fft" source_file="/src/f.py" source_line=3}
}
"""  # noqa: E501

BITS = """HloModule m, is_scheduled=true

%bits (p: u32[4096,4096]) -> u32[4096,4096] {
  %p = u32[4096,4096]{1,0} parameter(0)
  %c = u32[] constant(13)
  %b = u32[4096,4096]{1,0} broadcast(u32[] %c), dimensions={}
  %s = u32[4096,4096]{1,0} shift-left(u32[4096,4096]{1,0} %p, u32[4096,4096]{1,0} %b)
  ROOT %x = u32[4096,4096]{1,0} xor(u32[4096,4096]{1,0} %s, u32[4096,4096]{1,0} %p)
}

ENTRY %main (k: u32[4096,4096]) -> u32[4096,4096] {
  %k = u32[4096,4096]{1,0} parameter(0)
  ROOT %fusion.1 = u32[4096,4096]{1,0} fusion(u32[4096,4096]{1,0} %k), kind=kLoop, calls=%bits, metadata={op_name="jit(r)/xor" source_file="/src/r.py" source_line=4}
}
"""  # noqa: E501

ON_CHIP = """HloModule m, is_scheduled=true

ENTRY %main (c: f32[1024,256], u: f32[1,256], i: s32[]) -> f32[1024,256] {
  %c = f32[1024,256]{1,0} parameter(0)
  %u = f32[1,256]{1,0} parameter(1)
  %i = s32[] parameter(2)
  %z = s32[] constant(0)
  ROOT %dynamic-update-slice.1 = f32[1024,256]{1,0:T(8,128)S(1)} dynamic-update-slice(f32[1024,256]{1,0} %c, f32[1,256]{1,0} %u, s32[] %i, s32[] %z), metadata={op_name="jit(l)/dynamic_update_slice" source_file="/src/l.py" source_line=6}
}
"""  # noqa: E501


def test_a_gather_may_take_10_ns_an_index():
    _, _, trace, rng = priced(GATHER)
    (event,) = trace.events
    assert event.basis.measured and event.basis.kind == "gather"
    # 2^20 indices at 10 ns each: 10.5 ms, far more than 2.92x its bytes' time.
    assert 2.92 * event.duration < 1048576 * 10e-9
    assert rng.high_seconds == pytest.approx(1048576 * 10e-9)
    assert rng.cautions and "gather.1 (measured slower: gather) at /src/g.py:9" in rng.cautions[0]


def test_bit_operations_are_measured_on_a_v5e_and_priced_on_its_vector_unit():
    _, _, trace, rng = priced(BITS)
    (event,) = trace.events
    assert event.basis.kind == "bitwise" and event.basis.measured
    # A shift and a xor per element (2 x 4096^2 operations, 5.7 us on the vector unit) are
    # hidden under the 128 MiB moved, half of it read, at the copy rate.
    assert event.duration == pytest.approx(2 * 4 * 4096 * 4096 / COPY)
    assert rng.low_seconds == rng.high_seconds == rng.seconds


def test_a_kind_no_chip_measured_may_take_34x():
    _, _, trace, rng = priced(FFT)
    (event,) = trace.events
    assert event.basis.kind == "fft" and not event.basis.measured
    assert rng.high_seconds == pytest.approx(34 * event.duration)


def test_an_in_place_update_of_an_on_chip_buffer_may_take_nothing():
    _, _, trace, rng = priced(ON_CHIP)
    (event,) = trace.events
    assert event.basis.kind == "in-place update" and event.basis.measured
    assert rng.low_seconds == 0.0 and rng.high_seconds == pytest.approx(event.duration)
    (caution,) = rng.cautions
    assert caution.startswith("the step could take as little as 0 s")
    assert "dynamic-update-slice.1 (in-place update) at /src/l.py:6" in caution


def test_a_kind_held_against_another_chip_takes_that_chips_bound_not_the_unseen_one():
    """On an H100, only bf16 matmuls were held against the chip. A scatter was held against a
    TPU v5e (4.25x there): on the H100 it may take that, at least MEASURED_WITHIN (2) times,
    not the 34 of a kind no chip ever ran; an FFT, measured nowhere, takes the 34."""
    from explorer._src.cost.coverage import MEASURED_WITHIN, time_basis

    schedule = read_schedule(KERNEL_AND_SCATTER)
    scatter = next(s for s in schedule.steps if s.instr.opcode == "scatter")
    basis = time_basis(scatter, "H100 SXM", schedule.module)
    assert (basis.kind, basis.measured, basis.slowdown) == ("scatter", False, 4.25)
    assert "measured on a TPU v5e, never on a H100 SXM" in basis.text
    fft = read_schedule(FFT)
    (op,) = [s for s in fft.steps if s.kind.value == "compute"]
    assert time_basis(op, "H100 SXM", fft.module).slowdown == UNMEASURED_SLOWDOWN
    assert MEASURED_WITHIN == 2.0
    assert coverage_for("TPU v5e", "elementwise").slowdown == 1.0
