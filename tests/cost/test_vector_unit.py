"""The TPU v5e's read rate and vector unit, held against what the chip measured.

The catalog's figures are recomputed here from the kept run (benchmarks/results/
tpu-v5e-2026-12-06: rates.json, vector.json, programs.json); the counts of the schedule reader
are checked on small hand-written HLO with hand-counted operations and bytes; the priced
instructions are checked against their measured device times, never against the code's own
output.
"""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest

from explorer._src.cost.catalog.tpu import TPU_V5E
from explorer._src.cost.compute import (
    instruction_seconds,
    measured_read_bandwidth,
    memory_seconds,
    vector_seconds,
)
from explorer._src.cost.estimate import estimate
from explorer._src.hlo.arithmetic import vector_work
from explorer._src.hlo.schedule import StepKind, read_schedule, schedule_work

RUN = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "tpu-v5e-2026-12-06"
NOMINAL_HBM = 819e9


def _json(name: str) -> dict:
    return json.loads((RUN / name).read_text())


VECTOR = {v["name"]: v for v in _json("vector.json")["vector"]}
PROGRAMS = {p["name"]: p for p in _json("programs.json")["programs"]}


def _hlo(path: Path) -> str:
    with gzip.open(path, "rt") as f:
        return f.read()


def _steps(text: str) -> dict:
    return {s.instr.name: s for s in read_schedule(text).steps if s.kind is StepKind.COMPUTE}


def _chip_rates():
    bw = NOMINAL_HBM * TPU_V5E.memory_measured.fraction
    peak = TPU_V5E.peak_flops["bfloat16"] * TPU_V5E.matmul_measured.fraction
    return peak, bw, measured_read_bandwidth(TPU_V5E), TPU_V5E.vector_unit


# --- The catalog's figures, recomputed from the run ------------------------------------------

def test_read_fraction_is_the_measured_reads():
    reads = [r["bytes"] / (r["module_ns"] * 1e-9) / NOMINAL_HBM
             for r in _json("rates.json")["rates"]
             if r["kind"] == "read" and r.get("module_ns") and r["bytes"] >= 256 * 2**20]
    assert len(reads) == 6
    assert TPU_V5E.read_measured.fraction == pytest.approx(statistics.median(reads), abs=0.005)


def test_vector_rate_is_the_multiply_add_chain():
    fma = VECTOR["vpu_fma_64"]
    # 64 multiply-adds = 128 operations on each of 8192 x 8192 elements.
    assert fma["elements"] == 8192 * 8192 and fma["ops"] == 128
    rate = fma["elements"] * fma["ops"] / (fma["module_ns"] * 1e-9)
    assert TPU_V5E.vector_unit.ops_per_second == pytest.approx(rate, rel=0.01)


def test_transcendental_cost_puts_the_16_chains_at_their_measured_time():
    unit = TPU_V5E.vector_unit
    for name in ("vpu_exp_16", "vpu_tanh_16"):
        v = VECTOR[name]
        # 16 (transcendental, multiply) pairs per element.
        seconds = (16 * unit.transcendental_ops + 16) * v["elements"] / unit.ops_per_second
        assert seconds == pytest.approx(v["module_ns"] * 1e-9, rel=0.02)


def test_reduction_rate_is_the_fastest_one_hot_reduction():
    unit = TPU_V5E.vector_unit
    llama = PROGRAMS["llama_train"]["op_ns_per_call"]["select_reduce_fusion"][0] * 1e-9
    xent = PROGRAMS["xent_128k_vocab"]["op_ns_per_call"]["select_reduce_fusion"][0] * 1e-9
    # llama_train: 8192 tokens x 32000 vocabulary; xent_128k_vocab: 4096 x 128256.
    fastest = max(8192 * 32000 / llama, 4096 * 128256 / xent)
    assert unit.reduced_per_second == pytest.approx(fastest, rel=0.01)


# --- Counting, on hand-written HLO ----------------------------------------------------------

ROWS = """HloModule rows, is_scheduled=true

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%max (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}

%chain (p: f32[8,256]) -> f32[8] {
  %p = f32[8,256]{1,0} parameter(0)
  %c = f32[] constant(2)
  %cb = f32[8,256]{1,0} broadcast(%c), dimensions={}
  %m = f32[8,256]{1,0} multiply(%p, %cb)
  %a = f32[8,256]{1,0} add(%m, %p)
  %e = f32[8,256]{1,0} exponential(%a)
  %z = f32[] constant(0)
  ROOT %r = f32[8] reduce(%e, %z), dimensions={1}, to_apply=%add
}

%softmax (q: f32[4,128]) -> f32[4,128] {
  %q = f32[4,128]{1,0} parameter(0)
  %ninf = f32[] constant(-inf)
  %rw = f32[4,128]{1,0} reduce-window(%q, %ninf), window={size=1x255 pad=0_0x127_127}, to_apply=%max
  %d = f32[4,128]{1,0} subtract(%q, %rw)
  ROOT %x = f32[4,128]{1,0} exponential(%d)
}

%pool (v: f32[4,128]) -> f32[4,128] {
  %v = f32[4,128]{1,0} parameter(0)
  %ninf = f32[] constant(-inf)
  ROOT %w = f32[4,128]{1,0} reduce-window(%v, %ninf), window={size=1x3 pad=0_0x1_1}, to_apply=%max
}

ENTRY %main (x: f32[8,256], y: f32[4,128]) -> (f32[8], f32[4,128], f32[4,128]) {
  %x = f32[8,256]{1,0} parameter(0)
  %y = f32[4,128]{1,0} parameter(1)
  %rows = f32[8]{0} fusion(%x), kind=kLoop, calls=%chain
  %soft = f32[4,128]{1,0} fusion(%y), kind=kLoop, calls=%softmax
  %pooled = f32[4,128]{1,0} fusion(%y), kind=kLoop, calls=%pool
  ROOT %t = (f32[8], f32[4,128], f32[4,128]) tuple(%rows, %soft, %pooled)
}
"""


def test_vector_work_counted_by_hand():
    steps = _steps(ROWS)
    rows = steps["rows"]
    # multiply, add, exponential over 8 x 256 = 2048 elements each, and a reduction of 2048;
    # the broadcast and constants count nothing.
    assert (rows.vector_ops, rows.transcendentals, rows.reduced) == (4 * 2048, 2048, 2048)
    # Reads 8 x 256 f32, writes 8 f32.
    assert (rows.bytes, rows.written) == (2048 * 4 + 8 * 4, 8 * 4)
    pooled = steps["pooled"]
    # A window of 3 that does not span the row: 3 taps per output of 512, no reduction.
    assert (pooled.vector_ops, pooled.reduced) == (3 * 512, 0)
    module = read_schedule(ROWS).module
    assert vector_work(module, module.by_name()["x"]) == (0.0, 0.0, 0.0)


def test_whole_row_reduce_window_reads_its_operand_twice():
    steps = _steps(ROWS)
    soft, pooled = steps["soft"], steps["pooled"]
    # f32[4,128] = 2048 bytes: read for the row max, read again for the subtract, written.
    assert soft.bytes == 3 * 2048 and soft.written == 2048
    # The window of 255 over 128 elements spans the row: a reduction of 512 elements, then a
    # subtract and an exponential over 512.
    assert (soft.vector_ops, soft.transcendentals, soft.reduced) == (3 * 512, 512, 512)
    # A pooling window reads its operand once.
    assert pooled.bytes == 2 * 2048


def test_a_matmul_fusion_is_not_priced_on_the_vector_unit():
    text = """HloModule m, is_scheduled=true

%mm (a: f32[8,16], b: f32[16,8]) -> f32[8,8] {
  %a = f32[8,16]{1,0} parameter(0)
  %b = f32[16,8]{1,0} parameter(1)
  %d = f32[8,8]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %e = f32[8,8]{1,0} exponential(%d)
}

ENTRY %main (a: f32[8,16], b: f32[16,8]) -> f32[8,8] {
  %a = f32[8,16]{1,0} parameter(0)
  %b = f32[16,8]{1,0} parameter(1)
  ROOT %f = f32[8,8]{1,0} fusion(%a, %b), kind=kOutput, calls=%mm
}
"""
    f = _steps(text)["f"]
    assert f.flops == 2 * 8 * 8 * 16
    assert (f.vector_ops, f.reduced) == (0, 0)


# --- Pricing ----------------------------------------------------------------------------------

def test_memory_seconds_by_read_share():
    bw, read = 100.0, 200.0
    # A copy reads half and an add two thirds: at the copy rate.
    assert memory_seconds(1000, 500, bw, read) == pytest.approx(10.0)
    assert memory_seconds(900, 300, bw, read) == pytest.approx(9.0)
    # A reduction that writes nothing: at the read rate.
    assert memory_seconds(1000, 0, bw, read) == pytest.approx(5.0)
    # Five sixths read: halfway between two thirds and all, so halfway between the rates.
    assert memory_seconds(600, 100, bw, read) == pytest.approx(600 / 150)
    # No read rate measured: every byte at the copy rate.
    assert memory_seconds(1000, 0, bw, None) == pytest.approx(10.0)


def test_vector_seconds_takes_the_slower_of_arithmetic_and_reduction():
    unit = TPU_V5E.vector_unit
    # 1e12 operations of which 1e11 transcendentals: 1e12 + 1e11 * (c - 1) operations.
    ops = 1e12 + 1e11 * (unit.transcendental_ops - 1)
    assert vector_seconds(1e12, 1e11, 0, unit) == pytest.approx(ops / unit.ops_per_second)
    assert vector_seconds(1e6, 0, 1e12, unit) == pytest.approx(1e12 / unit.reduced_per_second)
    assert vector_seconds(1e12, 1e11, 1e12, None) == 0.0


@pytest.mark.parametrize(("program", "op", "within"), [
    # 25 multiplies, 9 adds, 4 subtracts and 3 tanh per element of f32[16384, 4096], then a
    # sum: bound by the vector unit, 1.44x its bytes.
    ("layernorm_chain", "multiply_reduce_fusion.4", 0.05),
    # A sum that only reads 268 MB: at the read rate.
    ("layernorm_chain", "reduce_sum.112", 0.05),
    # The one-hot reduction that reads 32 KiB and takes 1.6 ms (its reduction rate is the
    # faster one-hot's, hence the wider margin).
    ("xent_128k_vocab", "select_reduce_fusion", 0.15),
    # softmax's exp(x - max) and its row sum, the max as a whole-row reduce-window.
    ("dot_product_attention", "fusion.12", 0.05),
])
def test_priced_instructions_against_their_chip_time(program, op, within):
    peak, bw, read, unit = _chip_rates()
    step = _steps(_hlo(RUN / "hlo" / f"{program}.hlo.txt.gz"))[op]
    measured = PROGRAMS[program]["op_ns_per_call"][op][0] * 1e-9
    assert instruction_seconds(step, peak, bw, None, read, unit) == \
        pytest.approx(measured, rel=within)


@pytest.mark.parametrize("name", ["softmax_minor_float32", "softmax_major_float32",
                                  "softmax_minor_bfloat16", "softmax_major_bfloat16"])
def test_softmax_probes_priced_as_read_twice(name):
    peak, bw, read, unit = _chip_rates()
    steps = _steps(_hlo(RUN / "hlo-vector" / f"{name}.hlo.txt.gz"))
    (step,) = [s for s in steps.values() if s.bytes]
    probe = VECTOR[name]
    assert step.bytes == pytest.approx(1.5 * probe["bytes"])
    assert instruction_seconds(step, peak, bw, None, read, unit) == \
        pytest.approx(probe["module_ns"] * 1e-9, rel=0.05)


def test_peak_pricing_leaves_the_measured_terms_out():
    work = schedule_work(read_schedule(ROWS))
    at_peak = estimate([], None, None, None, "float32", ["data"], [1], "tpu-v5e-1x1",
                       work=work, peak=True)
    measured = estimate([], None, None, None, "float32", ["data"], [1], "tpu-v5e-1x1",
                        work=work)
    assert at_peak.compute.vector_unit is None and at_peak.compute.read_bandwidth is None
    assert measured.compute.vector_unit == TPU_V5E.vector_unit
    assert measured.compute.read_bandwidth == pytest.approx(0.92 * NOMINAL_HBM)
    # A chip with no vector measurement (v6e) prices by FLOPs and bytes alone.
    v6e = estimate([], None, None, None, "float32", ["data"], [1], "tpu-v6e-1x1", work=work)
    assert v6e.compute.vector_unit is None and v6e.compute.read_bandwidth is None
