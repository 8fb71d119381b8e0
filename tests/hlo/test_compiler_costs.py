"""What libtpu's compiled modules say about cost, read from programs a TPU v5e chip compiled.

The fixtures are the optimized HLO of user-style programs as the chip's own compile wrote them
(benchmarks/tpu_measure.py, kept in benchmarks/results/tpu-v5e-2026-12-06/hlo); the expected
values come from that run: XLA's cost analysis on the chip, and the chip's profile.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from explorer._src.cost.catalog.tpu import TPU_V5E
from explorer._src.cost.estimate import estimate
from explorer._src.hlo.compiler_costs import UNCOSTABLE_CYCLES, kernel_cost, uncostable
from explorer._src.hlo.module import parse_module
from explorer._src.hlo.schedule import read_schedule, schedule_work
from explorer._src.report.warnings import uncostable_warnings

RUN = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "tpu-v5e-2026-12-06"
PROGRAMS = {p["name"]: p for p in json.loads((RUN / "programs.json").read_text())["programs"]}


def chip_hlo(name: str) -> str:
    with gzip.open(RUN / "hlo" / f"{name}.hlo.txt.gz", "rt") as f:
        return f.read()


def priced(name: str):
    work = schedule_work(read_schedule(chip_hlo(name)))
    return work, estimate([], None, None, None, "bfloat16", ["data"], [1], "tpu-v5e-1x1",
                          work=work)


def test_int64_max_is_the_unknown_cycles_marker():
    assert UNCOSTABLE_CYCLES == 9223372036854775807


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_only_the_f32_softmax_fusion_is_uncostable(name):
    """Of the 16 programs the chip compiled, libtpu gave up costing one fusion: the f32
    softmax's reductions over f32[2,8,8192,8192] (437 of the program's 449 ms on the chip)."""
    module = parse_module(chip_hlo(name))
    marked = [i.name for i in module.instructions() if uncostable(i)]
    assert marked == (["fusion.11"] if name == "causal_attention_float32_softmax" else [])


def test_the_uncostable_fusion_is_the_one_the_chip_spent_its_time_in():
    ops = PROGRAMS["causal_attention_float32_softmax"]["op_ns_per_call"]
    slowest = max(ops, key=lambda k: ops[k][0])
    assert slowest == "fusion.11"
    work, _ = priced("causal_attention_float32_softmax")
    assert [s.instr.name for s in work.uncostable] == [slowest]


def test_uncostable_warning_names_the_line_layout_emitter_and_what_helps():
    (warning,) = uncostable_warnings(parse_module(chip_hlo("causal_attention_float32_softmax")))
    assert warning.instruction == "fusion.11"
    # The line of the softmax in benchmarks/user_programs.py as the chip compiled it.
    assert warning.source.endswith("user_programs.py:301")
    assert "jax.nn.softmax" in warning.source_text
    assert "f32[2,8,8192,8192] in layout {2,3,1,0}" in warning.text
    assert "EmitReduceWindowSublane" in warning.text
    assert "bfloat16" in warning.text and "flash-attention kernel" in warning.text


def test_uncostable_fusion_is_a_caution_on_the_estimate():
    _, est = priced("causal_attention_float32_softmax")
    (caution,) = est.cautions
    assert "fusion.11" in caution and "far slower" in caution
    assert "caution  libtpu could not estimate" in est.text()
    _, plain = priced("causal_attention_bfloat16_softmax")
    assert plain.cautions == ()


def test_pallas_kernel_is_priced_from_its_cost_estimate():
    """The Mosaic kernel's FLOPs and bytes are those XLA's cost analysis counted for the
    program on the chip (the kernel is the whole program), and its time is their roofline at
    the v5e's measured rates, not its bytes alone, over the fraction of that roofline this
    kernel was measured to run at on the chip (2.90 / 21.09 ms, explorer/_src/cost/coverage.py),
    so that it is the chip's 21.09 ms."""
    module = parse_module(chip_hlo("pallas_flash_attention"))
    kernel = kernel_cost(module.by_name()["flash_attention.1"])
    chip_cost = PROGRAMS["pallas_flash_attention"]["cost_analysis"]
    assert kernel.target == "tpu_custom_call"
    assert kernel.flops == chip_cost["flops"]
    assert kernel.bytes_accessed == chip_cost["bytes accessed"]
    work, est = priced("pallas_flash_attention")
    assert [s.instr.name for s in work.kernels] == ["flash_attention.1"]
    flops_s = chip_cost["flops"] / (197e12 * TPU_V5E.matmul_measured.fraction)
    # 819 GB/s: "HBM2 capacity and bandwidth 16 GB, 819 GBps" (cloud.google.com/tpu/docs/v5e)
    bytes_s = chip_cost["bytes accessed"] / (819e9 * TPU_V5E.memory_measured.fraction)
    assert est.compute.seconds == pytest.approx(max(flops_s, bytes_s) / (2.90 / 21.09),
                                                rel=1e-9)
    assert est.compute.seconds == pytest.approx(PROGRAMS["pallas_flash_attention"]["module_ns"]
                                                * 1e-9, rel=0.01)
    assert est.compute.seconds > 5 * bytes_s        # not its bytes alone
    # Measured on this chip: no caution that it cannot be seen into; at the vendors' peak,
    # where nothing measured applies, it is priced at its estimate and cautioned.
    assert est.cautions == ()
    work, _ = priced("pallas_flash_attention")
    peak = estimate([], None, None, None, "bfloat16", ["data"], [1], "tpu-v5e-1x1", work=work,
                    peak=True)
    (caution,) = peak.cautions
    assert "flash_attention.1" in caution and "cannot see inside a kernel" in caution


def test_custom_calls_that_are_not_kernels_are_not_priced_as_kernels():
    line = ('%custom-call.1 = s32[4096,2]{1,0} custom-call(%concatenate.2), '
            'custom_call_target="GatherScatterIndicesBitpacked"')
    module = parse_module("HloModule m\n\nENTRY %e (p: s32[4096,2]) -> s32[4096,2] {\n"
                          "  %concatenate.2 = s32[4096,2]{1,0} parameter(0)\n"
                          f"  ROOT {line}\n}}\n")
    assert kernel_cost(module.by_name()["custom-call.1"]) is None


def steps_of(name: str) -> dict:
    out = {}

    def walk(steps):
        for s in steps:
            out[s.instr.name] = s
            walk(s.body)

    walk(read_schedule(chip_hlo(name)).steps)
    return out


def test_a_gather_reads_the_rows_it_takes_not_the_table():
    """take_along_axis over a [8192, 32000] f32 log-softmax (llama_train's loss): 8192 f32
    values read, 8192 int32 indices, 8192 f32 written: 3 x 32 KiB, not the 1 GiB table (which
    priced it at 1.3 ms; the chip ran it in 0.11 ms)."""
    assert steps_of("llama_train")["gather_fusion.1"].bytes == 3 * 8192 * 4


def test_a_scanned_layer_reads_its_own_slice_of_the_stacked_buffers():
    """llama_train_scan's fusion.445 (a backward attention matmul in the layer loop) reads two
    operands stacked over the 4 layers only through a nested fusion's dynamic-slice: one
    layer of each counts. Its operands (shapes from the chip's HLO): bf16[4,16,2048,2048]
    whole; f32[4,1,4,16,2048,2048] and bf16[4,4,2048,16,1,128] one layer of 4; s32[] and two
    f32[4,16,2048] and pred[2048,2048] whole; its result bf16[4,16,2048,128]."""
    expected = (4 * 16 * 2048 * 2048 * 2 + 4 * 16 * 2048 * 2048 * 4 + 4 * 2048 * 16 * 128 * 2
                + 4 + 2 * 4 * 16 * 2048 * 4 + 2048 * 2048 * 1 + 4 * 16 * 2048 * 128 * 2)
    assert steps_of("llama_train_scan")["fusion.445"].bytes == expected


def test_a_convolutions_input_gradient_costs_what_its_forward_does():
    """The input gradient of convnet_train's stride-2 3x3 conv (64 -> 128 channels, 64x64 ->
    32x32, batch 128) is a convolution over the lhs-dilated gradient: 2 * 128*64*64*64 outputs
    * 128 input features * 9/4 taps, which is the forward's 2 * 128*32*32*128 * 9*64; the chip
    ran it in the forward's time (0.109 ms against 0.103)."""
    forward = 2 * 128 * 32 * 32 * 128 * 9 * 64
    steps = steps_of("convnet_train")
    assert steps["fusion.84"].flops == forward
    assert steps["fusion.1"].flops == forward
