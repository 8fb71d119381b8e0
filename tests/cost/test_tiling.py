"""libtpu's matmul tiling and the operand windows it reads again, held against a TPU v5e.

The ground truth is what the chip measured (benchmarks/results/tpu-v5e-2026-12-06:
rates.json's float32 sweep, programs.json's mlp_f32, and tiling-check.json, matmuls measured to
test this rule, with the HLO the chip compiled in hlo-tiling.tar.gz) and the bytes counted by
hand from each tiling; never the code's own output.
"""

from __future__ import annotations

import gzip
import json
import tarfile
from pathlib import Path

import pytest

from explorer._src.cost.catalog.tpu import TPU_V5E
from explorer._src.cost.compute import instruction_seconds, measured_read_bandwidth
from explorer._src.cost.tiling import MatmulTiling, matmul_tiling, reread_bytes, window_traffic
from explorer._src.hlo.module import parse_instruction
from explorer._src.hlo.schedule import Step, StepKind, read_schedule, schedule_work

RUN = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "tpu-v5e-2026-12-06"
NOMINAL_HBM = 819e9
F32, BF16 = 4, 2


def _json(name: str) -> dict:
    return json.loads((RUN / name).read_text())


RATES = {(r["dtype"], r["m"], r["k"], r["n"]): r["module_ns"] * 1e-9
         for r in _json("rates.json")["rates"] if r["kind"] == "matmul" and r.get("module_ns")}
PROGRAMS = {p["name"]: p for p in _json("programs.json")["programs"]}
CHECK = _json("tiling-check.json")["rates"]


def _rates():
    peak = TPU_V5E.peak_flops["bfloat16"] * TPU_V5E.matmul_measured.fraction
    copy = NOMINAL_HBM * TPU_V5E.memory_measured.fraction
    return peak, copy, measured_read_bandwidth(TPU_V5E), TPU_V5E.vector_unit


def _kept_steps(program: str) -> dict[str, Step]:
    with gzip.open(RUN / "hlo" / f"{program}.hlo.txt.gz", "rt") as f:
        work = schedule_work(read_schedule(f.read()))
    return {s.instr.name: s for s in work.compute_steps}


def _check_hlo() -> dict[str, str]:
    with tarfile.open(RUN / "hlo-tiling.tar.gz") as tar:
        return {Path(m.name).name.removesuffix(".hlo.txt.gz"):
                gzip.decompress(tar.extractfile(m).read()).decode()
                for m in tar.getmembers() if m.isfile()}


def _seconds(step: Step) -> float:
    peak, copy, read, unit = _rates()
    return instruction_seconds(step, peak, copy, None, read, unit)


# --- The tiling as the HLO writes it ----------------------------------------------------------

def test_mlp_tiling_is_read_from_its_backend_config():
    steps = _kept_steps("mlp_f32")
    # fusion.17's window_config: iteration_bounds ["16","8","11"], input_window_bounds
    # ["128","3"], kernel_window_bounds ["48","8"], output_window_bounds ["128","8"].
    assert matmul_tiling(steps["fusion.17"].instr) == MatmulTiling(16, 8, 11, 384, 384, 1024)
    assert matmul_tiling(steps["fusion.7"].instr) == MatmulTiling(4, 8, 43, 384, 384, 1024)


def test_mlp_rereads_counted_by_hand():
    steps = _kept_steps("mlp_f32")
    # fusion.17: x f32[8192,4096] read once per column window (16), w1 f32[4096,16384] once
    # per row window (8): 15 and 7 more times than once.
    x, w1 = 8192 * 4096 * F32, 4096 * 16384 * F32
    assert reread_bytes(steps["fusion.17"]) == pytest.approx(15 * x + 7 * w1)
    # fusion.7: gelu(h) over h f32[8192,16384] read 4 times, w2 f32[16384,4096] 8 times.
    h, w2 = 8192 * 16384 * F32, 16384 * 4096 * F32
    assert reread_bytes(steps["fusion.7"]) == pytest.approx(3 * h + 7 * w2)


def test_mlp_matmuls_at_their_measured_times():
    steps = _kept_steps("mlp_f32")
    ops = PROGRAMS["mlp_f32"]["op_ns_per_call"]
    peak, copy, _, _ = _rates()
    for name in ("fusion.17", "fusion.7"):
        measured = ops[name][0] * 1e-9
        flops_only = steps[name].flops / peak
        # Their FLOPs alone were 19% and 9% fast; with the windows read again, within 6%.
        assert flops_only < 0.92 * measured
        assert _seconds(steps[name]) == pytest.approx(measured, rel=0.06)


# --- rates.json's float32 sweep, by hand --------------------------------------------------------
# libtpu's tilings of the sweep's matmuls, from an ahead-of-time compile for a v5e chip with the
# libtpu of the run (jax.jit(lambda a, b: a @ b).lower(...).compile() on topology v5e:1x1);
# the same compile gives the chip's own tilings of matmul_bf16_8192 and mlp_f32 (hlo/).

@pytest.mark.parametrize("n, tiling", [
    (8192, MatmulTiling(8, 8, 22, 384, 384, 1024)),
    (16384, MatmulTiling(16, 16, 43, 384, 384, 1024)),
])
def test_f32_cubes_are_their_window_bytes_at_the_copy_rate(n, tiling):
    a = b = c = n * n * F32
    moved = window_traffic(tiling, a, b, c)
    # Contraction innermost: the input read once per column window, the kernel once per row
    # window, the result written once.
    assert moved == pytest.approx(tiling.n * a + tiling.m * b + c)
    peak, copy, _, _ = _rates()
    measured = RATES[("float32", n, n, n)]
    assert 2 * n**3 / peak < 0.92 * measured              # their FLOPs: 14% and 9% fast
    assert moved / copy == pytest.approx(measured, rel=0.06)


def test_a_long_thin_tiling_sums_partials_rather_than_read_the_input_128_times():
    # f32 4096x4096x32768, tiled [128, 3, 2] (windows 1368 x 2048, 2048 x 256, 1368 x 256):
    # with the contraction outermost the input is read once, the kernel 3 times, and each of the
    # 384 result windows is visited twice: 768 writes and 384 reads of f32 partial sums.
    t = MatmulTiling(128, 3, 2, 171 * 16, 256 * 2, 171 * 2)
    a, b, c = 4096 * 4096 * F32, 4096 * 32768 * F32, 4096 * 32768 * F32
    partials = (768 + 384) * 171 * 2 * 1024 * F32
    assert window_traffic(t, a, b, c) == pytest.approx(a + 3 * b + partials)
    assert window_traffic(t, a, b, c) < 128 * a + 3 * b + c
    # ... and it ran at its FLOPs' time (5.733 ms), which those bytes at the copy rate are under.
    peak, copy, _, _ = _rates()
    assert window_traffic(t, a, b, c) / copy < 2 * 4096 * 4096 * 32768 / peak
    assert RATES[("float32", 4096, 4096, 32768)] == pytest.approx(
        2 * 4096 * 4096 * 32768 / peak, rel=0.01)


# --- Held out: matmuls measured to test the rule (tiling-check.json) ----------------------------

def test_tiling_check_matmuls_at_their_measured_times():
    texts = _check_hlo()
    peak = _rates()[0]
    bound_by_windows = []
    for rec in CHECK:
        work = schedule_work(read_schedule(texts[rec["name"]]))
        (step,) = [s for s in work.compute_steps if s.flops]
        measured = rec["module_ns"] * 1e-9
        seconds = sum(r * _seconds(s) for s, (*_, r) in zip(work.compute_steps, work.compute,
                                                              strict=True))
        assert seconds == pytest.approx(measured, rel=0.07), rec["name"]
        flops_only = step.flops / peak
        if _seconds(step) > flops_only:
            bound_by_windows.append(rec["name"])
            t = matmul_tiling(step.instr)
            assert min(t.n, t.m, t.k) >= 2
            # Their FLOPs alone were 9 to 19% fast.
            assert flops_only < 0.92 * measured, rec["name"]
        else:
            # A dimension uncut, or bf16 windows whose bytes stay under the FLOPs' time: they
            # ran at their FLOPs' time.
            assert measured == pytest.approx(flops_only, rel=0.05), rec["name"]
    # The 12 float32 matmuls libtpu tiles in all three dimensions, and no other.
    assert len(bound_by_windows) == 12
    assert all(name.startswith("matmul_float32") for name in bound_by_windows)


# --- What the rule leaves alone ---------------------------------------------------------------

def test_a_tiling_with_a_dimension_uncut_reads_nothing_twice():
    # decode_step's fusion.19 ([1, 1, 56]) and xent_128k_vocab's fusion.2 ([501, 1, 3]).
    assert reread_bytes(_kept_steps("decode_step")["fusion.19"]) == 0
    assert reread_bytes(_kept_steps("xent_128k_vocab")["fusion.2"]) == 0
    # rates.json's float32 1024x8192x8192, tiled [16, 1, 5], ran at its FLOPs' time: its input
    # was not read once per column window (16 x 32 MiB with the kernel and result once would
    # take longer even at the read rate).
    peak, copy, read, _ = _rates()
    flops = 2 * 1024 * 8192 * 8192
    measured = RATES[("float32", 1024, 8192, 8192)]
    assert measured < (16 * 1024 * 8192 + 8192 * 8192 + 1024 * 8192) * F32 / read
    assert measured == pytest.approx(flops / peak, rel=0.03)


def test_bf16_matmul_stays_at_its_flops():
    # matmul_bf16_8192, tiled [8, 8, 16]: 8 reads of each operand, 2.28 GB at the copy rate
    # (3.44 ms), is under its FLOPs' 5.75 ms; it ran 5.88 ms.
    step = _kept_steps("matmul_bf16_8192")["fusion"]
    a = 8192 * 8192 * BF16
    assert reread_bytes(step) == pytest.approx(7 * a + 7 * a)
    peak = _rates()[0]
    assert _seconds(step) == pytest.approx(step.flops / peak)
    assert PROGRAMS["matmul_bf16_8192"]["module_ns"] * 1e-9 == pytest.approx(
        step.flops / peak, rel=0.03)


def _fusion(config: str, shape: str = "f32[1024,1024]{1,0}") -> Step:
    instr = parse_instruction(
        f"  %f = {shape} fusion(%a, %b), kind=kOutput, calls=%c, backend_config={config}",
        "main")
    return Step(instr, StepKind.COMPUTE, flops=2.0 * 1024**3, bytes=3 * 1024 * 1024 * 4.0,
                written=1024 * 1024 * 4.0)


def test_no_tiling_or_another_shape_of_it_is_no_reread():
    assert reread_bytes(_fusion('{"flag_configs":[]}')) == 0
    batched = ('{"window_config":{"iteration_bounds":["2","2","2","2","1"],'
               '"input_window_bounds":["8","1","1"],"kernel_window_bounds":["8","1","1"],'
               '"output_window_bounds":["8","1","1"]}}')
    assert matmul_tiling(_fusion(batched).instr) is None
    assert matmul_tiling(_fusion('{"window_config":{"iteration_bounds":["x"]}}').instr) is None
    # Windows that do not cover the result (64 x 128 x 4 x 2 of 1024 x 1024) are not read.
    off = ('{"window_config":{"iteration_bounds":["2","4","2"],"input_window_bounds":["8","4"],'
           '"kernel_window_bounds":["32","4"],"output_window_bounds":["8","1"]}}')
    assert reread_bytes(_fusion(off)) == 0


def test_a_hand_written_tiling_by_hand():
    # f32 1024^3 cut [2, 2, 2]: windows 512 x 512 (64 x 4 tiles), each operand read twice.
    config = ('{"window_config":{"iteration_bounds":["2","2","2"],"input_window_bounds":["64","4"],'
              '"kernel_window_bounds":["64","4"],"output_window_bounds":["64","4"]}}')
    step = _fusion(config)
    operand = 1024 * 1024 * 4
    assert reread_bytes(step) == pytest.approx(2 * operand)
    peak, copy, read, unit = _rates()
    assert _seconds(step) == pytest.approx(max(
        step.flops / peak, 3 * operand / copy + 2 * operand / copy))
