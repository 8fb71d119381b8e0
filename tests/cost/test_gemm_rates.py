# ruff: noqa: E501 (an HLO line is kept verbatim)
"""XLA's measured GEMM rates: read from the installed CUDA plugin, interpolated between its grid
points, and used by the estimate and the trace for the GPUs XLA measured.

The expected rates are read from the plugin's binary by a separate, plain regex over its bytes
(not by explorer._src.cost.gemm_rates), or come from a table written here by hand."""

import functools
import math
import re

import pytest

import explorer
from explorer import TensorSpec as T
from explorer._src.compile.gpu import gpu_plugin_installed
from explorer._src.cost import gemm_rates
from explorer._src.cost.catalog.names import get_target
from explorer._src.cost.gemm_rates import gemm_table, parse_tables, plugin_binary
from explorer._src.hlo.arithmetic import Dot
from explorer._src.hlo.schedule import read_schedule, schedule_work
from explorer._src.report.predict import with_target

needs_plugin = pytest.mark.skipif(not gpu_plugin_installed(),
                                  reason="jax's CUDA plugin (the gpu extra) is not installed")

# A table in XLA's text form, written by hand: m is the only dimension with two values.
HAND = """
  entries {
    key: "sm_test"
    value {
      entries { b: 1 m: 256 n: 256 k: 256 flops { key: "bf16xbf16->bf16" value: 1000000000000 } }
      entries { b: 1 m: 1024 n: 256 k: 256 flops { key: "bf16xbf16->bf16" value: 16000000000000 } }
    }
  }
"""


def bf16(b, m, n, k):
    return Dot(b, m, n, k, "bf16", "bf16")


@functools.cache
def plugin_table_text() -> str:
    """The NUL-terminated string of the plugin's binary that holds GEMM entries (flops per
    dtype), read from its bytes once: the binary is about 480 MB."""
    with open(plugin_binary(), "rb") as f:
        data = f.read()
    at = data.index(b'flops { key: "bf16xbf16->bf16"')
    return data[data.rfind(b"\0", 0, at) + 1:data.index(b"\0", at)].decode()


def plugin_rate(device: str, b: int, m: int, n: int, k: int) -> float:
    """The bf16 entry at one grid point, found by a plain regex in the device's section."""
    text = plugin_table_text()
    section = text[text.index(f'key: "{device}"'):]
    section = section[:section.find('key: "sm_', 1)] if 'key: "sm_' in section[1:] else section
    found = re.search(rf"b: {b}\s+m: {m}\s+n: {n}\s+k: {k}\s+flops {{ key: \"bf16xbf16->bf16\" "
                      rf"value: (\d+) }}", section)
    return float(found.group(1))


def test_between_grid_points_the_rate_is_log_linear_and_outside_it_the_edges_rate():
    table = parse_tables(HAND, "hand")["sm_test"]
    assert table.rate(bf16(1, 256, 256, 256)) == 1e12
    # m = 512 is halfway between 256 and 1024 in log2: the geometric mean, sqrt(1 x 16) = 4.
    assert table.rate(bf16(1, 512, 256, 256)) == pytest.approx(4e12)
    # Beyond the grid: the edge's rate (m over 1024, b over 1, k under 256).
    assert table.rate(bf16(1, 8192, 256, 256)) == pytest.approx(16e12)
    assert table.rate(bf16(64, 1024, 256, 64)) == pytest.approx(16e12)
    # A dtype the table does not measure has no rate.
    assert table.rate(Dot(1, 256, 256, 256, "f32", "f32")) is None


def test_an_instructions_flops_are_split_over_its_dots_by_their_share_at_each_ones_rate():
    table = parse_tables(HAND, "hand")["sm_test"]
    small, large = bf16(1, 256, 256, 256), bf16(1, 1024, 256, 256)
    flops = small.flops + large.flops
    assert table.seconds(flops, (small, large), 1e15) == pytest.approx(
        small.flops / 1e12 + large.flops / 16e12)
    # Half the FLOPs counted (a causal kernel's skipped half): half the time.
    assert table.seconds(large.flops / 2, (large,), 1e15) == pytest.approx(large.flops / 2 / 16e12)
    # A float32 dot takes the rate given for the others.
    f32 = Dot(1, 256, 256, 256, "f32", "f32")
    assert table.seconds(f32.flops, (f32,), 2e12) == pytest.approx(f32.flops / 2e12)


BATCHED_FUSION = """HloModule jit_bmm, is_scheduled=true, num_partitions=1

%fused (p0: bf16[8,512,4,128], p1: bf16[4,128,256]) -> f32[4,8,512,256] {
  %p0 = bf16[8,512,4,128]{3,2,1,0} parameter(0)
  %p1 = bf16[4,128,256]{2,1,0} parameter(1)
  ROOT %dot.1 = f32[4,8,512,256]{3,2,1,0} dot(%p0, %p1), lhs_batch_dims={2}, lhs_contracting_dims={3}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}

ENTRY %main (a: bf16[8,512,4,128], b: bf16[4,128,256]) -> f32[4,8,512,256] {
  %a = bf16[8,512,4,128]{3,2,1,0} parameter(0)
  %b = bf16[4,128,256]{2,1,0} parameter(1)
  ROOT %gemm = f32[4,8,512,256]{3,2,1,0} fusion(%a, %b), kind=kCustom, calls=%fused
}
"""


def test_a_fusions_dot_is_read_as_batch_free_and_contracting_sizes_with_its_dtypes():
    [step] = [s for s in read_schedule(BATCHED_FUSION).steps if s.flops]
    # Batch: dim 2 of the lhs (4); free: 8 x 512 of the lhs, 256 of the rhs; contracting: 128.
    assert step.dots == (bf16(4, 8 * 512, 256, 128),)
    assert step.flops == step.dots[0].flops == 2 * 4 * 4096 * 256 * 128
    assert schedule_work(read_schedule(BATCHED_FUSION)).dots == (step.dots,)


@needs_plugin
def test_the_h100_table_is_the_plugins_sm_90_grid_of_375_shapes():
    table = gemm_table(get_target("h100-8").chip.xla_gemm_table)
    assert table.device == "sm_90"
    assert len(table.grids["bf16xbf16->bf16"]) == 3 * 5 * 5 * 5
    for point in [(1, 4096, 4096, 4096), (4, 256, 256, 256), (2, 1024, 512, 2048)]:
        assert table.rate(bf16(*point)) == plugin_rate("sm_90", *point)
    # The H200 shares the H100's die and table; the B200 has its own; XLA measured no A100.
    assert get_target("h200-8").chip.xla_gemm_table == "sm_90"
    assert gemm_table(get_target("b200-8").chip.xla_gemm_table).rate(bf16(1, 4096, 4096, 4096)) \
        == plugin_rate("sm_100_B200", 1, 4096, 4096, 4096)
    assert get_target("a100-8").chip.xla_gemm_table is None


def matmul(x, w):
    return x @ w


@needs_plugin
@pytest.mark.gpu
def test_an_h100_compile_times_its_matmul_at_xlas_rate_for_the_shape_xla_compiled():
    report = explorer.analyze(matmul, T("x", (1024, 1024), "bfloat16"),
                              T("w", (1024, 1024), "bfloat16"), mesh="data=8", target="h100-8")
    assert report.backend == "gpu"
    compute = report.estimate.compute
    assert compute.gemm_table == "sm_90"
    steps = [s for s in read_schedule(report.optimized_hlo).steps if s.flops]
    assert sum(s.flops for s in steps) == 2 * 1024 ** 3
    # Every dot of the program at its grid point's rate, read from the binary here.
    expected = 0.0
    for s in steps:
        for d in s.dots:
            assert (d.lhs_dtype, d.rhs_dtype) == ("bf16", "bf16")
            clamp = [min(max(v, lo), hi) for v, lo, hi in
                     zip((d.b, d.m, d.n, d.k), (1, 256, 256, 256), (4, 4096, 4096, 4096), strict=True)]
            assert all(math.log2(v).is_integer() for v in clamp), "a shape off the grid"
            expected += d.flops / plugin_rate("sm_90", *clamp)
    assert compute.flops_seconds == pytest.approx(expected)
    # A 1024^3 GEMM reaches about a third of the rate of the largest (MAMF, 794.5 TFLOP/s).
    assert compute.flops_seconds > 2 * (2 * 1024 ** 3) / 794.5e12
    # The trace lays the same instructions out for the same time.
    events = [e for e in report.trace.events if e.lane == "compute"]
    assert sum(e.duration for e in events) >= compute.flops_seconds * (1 - 1e-9)


@needs_plugin
@pytest.mark.gpu
def test_without_the_plugins_table_or_at_the_peak_every_matmul_takes_the_flat_rate(monkeypatch):
    report = explorer.analyze(matmul, T("x", (1024, 1024), "bfloat16"),
                              T("w", (1024, 1024), "bfloat16"), mesh="data=8", target="h100-8")
    at_peak = with_target(report, "h100-8", peak=True).estimate.compute
    assert at_peak.gemm_table == ""
    assert at_peak.flops_seconds == pytest.approx(2 * 1024 ** 3 / 989e12)
    monkeypatch.setattr(gemm_rates, "_tables", {})
    flat = with_target(report, "h100-8").estimate
    assert flat.compute.gemm_table == ""
    assert flat.compute.flops_seconds == pytest.approx(2 * 1024 ** 3 / 794.5e12)
    assert any("gpu extra" in n and "not installed" in n for n in flat.notes)


@needs_plugin
@pytest.mark.gpu
def test_the_timing_text_says_bf16_matmuls_took_xlas_measured_rates_by_shape():
    from html import unescape

    from explorer._src.ui.timeline import timing_html

    report = explorer.analyze(matmul, T("x", (1024, 1024), "bfloat16"),
                              T("w", (1024, 1024), "bfloat16"), mesh="data=8", target="h100-8")
    low, high = plugin_rate("sm_90", 1, 256, 256, 256), plugin_rate("sm_90", 1, 4096, 4096, 4096)
    assert (f"bf16 matmuls at XLA's measured rates for their shapes on H100 SXM "
            f"({low / 1e12:.0f} TFLOP/s at 256³ to {high / 1e12:.0f} TFLOP/s at 4096³), other "
            "matmuls at 794 TFLOP/s per device") in unescape(timing_html(report))
