"""float32 matmuls at a raised precision: on a TPU 3 or 6 bfloat16 passes each, on a GPU its
float32 units instead of TF32.

jax.lax.Precision's documentation: "HIGH: ... On TPU: performs float32 computations in 3
bfloat16 passes. HIGHEST: ... On TPU: performs float32 computations in 6 bfloat16 [passes]".
The schedule reader's count of passes is checked on hand-written HLO; the priced program
against what one TPU v5e chip measured (benchmarks/results/tpu-v5e-2026-12-06/caller-context:
a chain of four float32 4096^3 matmuls, at the default precision and inside the caller's
jax.default_matmul_precision("highest")).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import explorer
from explorer._src.hlo.schedule import StepKind, read_schedule

RUN = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "tpu-v5e-2026-12-06"


def _module(dtype: str, *configs: str) -> str:
    """A fusion of one [256,256] x [256,256] matmul per entry of `configs` (each its
    precision attributes), as libtpu writes a matmul: a convolution with dim_labels bf_io->bf."""
    shape = f"{dtype}[256,256]"
    body = "\n".join(
        f"  %c{k} = f32[256,256]{{1,0}} convolution(%p0, %p1), dim_labels=bf_io->bf{c}"
        for k, c in enumerate(configs))
    adds = " ".join(f"%c{k}," for k in range(len(configs)))
    root = f"  ROOT %t = ({', '.join(['f32[256,256]'] * len(configs))}) tuple({adds.rstrip(',')})"
    out = f"({', '.join(['f32[256,256]{1,0}'] * len(configs))})"
    return f"""HloModule m, is_scheduled=true

%fused (p0: {shape}, p1: {shape}) -> {out} {{
  %p0 = {shape}{{1,0}} parameter(0)
  %p1 = {shape}{{1,0}} parameter(1)
{body}
{root}
}}

ENTRY %main (a: {shape}, b: {shape}) -> {out} {{
  %a = {shape}{{1,0}} parameter(0)
  %b = {shape}{{1,0}} parameter(1)
  ROOT %fusion = {out} fusion(%a, %b), kind=kOutput, calls=%fused
}}
"""


def _passes(text: str) -> float:
    steps = [s for s in read_schedule(text).steps if s.kind is StepKind.COMPUTE and s.flops]
    assert len(steps) == 1 and steps[0].flops == 2 * 256 ** 3 * (text.count("convolution("))
    return steps[0].passes


@pytest.mark.parametrize(("dtype", "config", "passes"), [
    ("f32", "", 1),                                          # the default precision
    ("f32", ", operand_precision={default,default}", 1),
    ("f32", ", operand_precision={high,high}", 3),
    ("f32", ", operand_precision={highest,highest}", 6),
    ("f32", ", algorithm=dot_bf16_bf16_f32_x3", 3),         # jax.lax.DotAlgorithmPreset
    ("f32", ", algorithm=dot_bf16_bf16_f32_x6", 6),
    ("bf16", ", operand_precision={highest,highest}", 1),    # bf16 operands: one pass
])
def test_a_matmuls_passes_are_its_precisions(dtype, config, passes):
    assert _passes(_module(dtype, config)) == passes


def test_a_fusions_passes_are_weighted_by_its_matmuls_flops():
    # Two matmuls of equal FLOPs, one at highest (6 passes) and one at the default (1).
    assert _passes(_module("f32", ", operand_precision={highest,highest}", "")) == 3.5


def _highest_share(text: str) -> float:
    (step,) = [s for s in read_schedule(text).steps if s.kind is StepKind.COMPUTE and s.flops]
    return step.highest_share


def test_the_share_of_flops_at_highest_is_of_float32_matmuls_alone():
    highest, high = ", operand_precision={highest,highest}", ", operand_precision={high,high}"
    assert _highest_share(_module("f32", highest)) == 1.0
    assert _highest_share(_module("f32", highest, "")) == 0.5
    assert _highest_share(_module("f32", high)) == 0.0
    assert _highest_share(_module("bf16", highest)) == 0.0


def _chain(x, w):
    for _ in range(4):
        x = jnp.tanh(x @ w)
    return x


def _predicted(precision: str | None, target: str) -> float:
    x = jax.ShapeDtypeStruct((4096, 4096), jnp.float32)
    with jax.default_matmul_precision(precision) if precision else contextlib.nullcontext():
        report = explorer.analyze(_chain, x, x, mesh="data=1", target=target)
    return report.estimate.compute.seconds


@pytest.mark.slow
def test_the_chain_is_priced_as_the_chip_ran_it_at_each_precision():
    measured = {r["precision"]: r["measured_device_s"]
                for name in ("caller_context.json", "caller_context_high.json")
                for r in json.loads((RUN / "caller-context" / name).read_text())["rows"]
                if r["who"] == "explorer"}
    for precision in ("default", "high", "highest"):
        predicted = _predicted(None if precision == "default" else precision, "tpu-v5e-1x1")
        assert predicted == pytest.approx(measured[precision], rel=0.05), precision


# H100 SXM: "FP32 67 teraFLOPS", "TF32 Tensor Core 989 teraFLOPS" with sparsity, 494.5 dense
# (nvidia.com/en-us/data-center/h100); both at the measured share of the bf16 peak, 794.5 of 989
# TFLOP/s (ml-engineering's MAMF table), as every dtype's peak is.
H100_TF32, H100_FP32, H100_MEASURED = 494.5e12, 67e12, 794.5 / 989
CHAIN_FLOPS = 4 * 2 * 4096 ** 3


@pytest.mark.slow
def test_a_gpu_runs_float32_as_tf32_and_highest_on_its_float32_units():
    # "DEFAULT: ... On GPU: uses tensorfloat32 if available (e.g. on A100 and H100 GPUs)";
    # "HIGH: ... On GPU: uses tensorfloat32 where available"; "HIGHEST: ... On GPU: uses
    # float32" (jax.lax.Precision). What is not a matmul is priced the same at each precision,
    # so the differences are the matmuls' FLOPs at the two rates.
    default, high, highest = (_predicted(p, "h100-1") for p in (None, "high", "highest"))
    assert high == pytest.approx(default, rel=1e-9)
    expected = CHAIN_FLOPS * (1 / H100_FP32 - 1 / H100_TF32) / H100_MEASURED
    assert highest - default == pytest.approx(expected, rel=0.02)
    # The matmuls at the default are at the TF32 rate: at most what else the chain does above.
    assert default >= CHAIN_FLOPS / (H100_TF32 * H100_MEASURED)
