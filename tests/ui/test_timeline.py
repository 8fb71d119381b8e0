"""The Timing tab: the predicted step as a two-lane timeline, the top ops, the roofline point."""

import inspect
import math
from html import unescape

import jax.numpy as jnp
import pytest

pytest.importorskip("plotly")

from explorer import TensorSpec, analyze, get_target  # noqa: E402
from explorer._src.report.trace import StepTrace, TraceEvent, TraceLane  # noqa: E402
from explorer._src.ui.app import TAB_TITLES  # noqa: E402
from explorer._src.ui.graph import KIND_COLOURS  # noqa: E402
from explorer._src.ui.timeline import (  # noqa: E402
    COMPUTE_COLOUR,
    TimingView,
    roofline_point,
    short_source,
    si,
    time_unit,
    timing_html,
    top_ops,
)
from explorer.ui import explore  # noqa: E402

T = TensorSpec
C, M = TraceLane.COMPUTE, TraceLane.COMMUNICATION


def test_top_ops_sum_the_events_of_one_op_and_line():
    us = 1e-6
    trace = StepTrace("h100-8", (
        TraceEvent("dot_general", C, 0, 3 * us, "fusion.1", "a.py:1"),
        TraceEvent("all-reduce over model", M, 3 * us, 5 * us, "all-reduce", "a.py:2",
                   {"kind": "all-reduce"}),
        TraceEvent("dot_general", C, 8 * us, 3 * us, "fusion.2", "a.py:1"),
        TraceEvent("tanh", C, 11 * us, 1 * us, "tanh", "a.py:3"),
        TraceEvent("dot_general", C, 12 * us, 2 * us, "fusion.3", "a.py:9"),
    ), 14 * us)
    ops = top_ops(trace)
    assert [(o.name, o.source, o.count, round(o.seconds / us, 9)) for o in ops] == [
        ("dot_general", "a.py:1", 2, 6.0), ("all-reduce over model", "a.py:2", 1, 5.0),
        ("dot_general", "a.py:9", 1, 2.0), ("tanh", "a.py:3", 1, 1.0)]
    assert ops[0].hlo == "fusion.1" and ops[1].cls == "all-reduce" and ops[0].cls == "compute"
    assert len(top_ops(trace, 2)) == 2
    assert time_unit(40e-6) == (1e-6, "µs") and time_unit(0.2) == (1e-3, "ms")
    assert time_unit(3.0) == (1.0, "s") and time_unit(5e-9) == (1e-9, "ns")
    # The trace writes a cell's compute events `In [3]:2`; the app writes `In [3], line 2`.
    assert short_source("In [3]:2") == "In [3], line 2"
    assert short_source("/a/b/models.py:9") == "models.py:9"


def gathered_mlp(x, w1, w2):
    h = jnp.tanh(x @ w1)
    return h @ w2


def test_the_timeline_draws_every_event_on_its_lane_coloured_by_kind():
    app = explore(gathered_mlp, T("x", (256, 1024), spec="data,None"),
                  T("w1", (1024, 4096), spec="data,model"),
                  T("w2", (4096, 1024), spec="model,None"), mesh="data=2,model=4",
                  target="h100-8", debounce=None)
    try:
        app.tabs.selected_index = TAB_TITLES.index("Timing")
        trace = app.report.trace
        fig = app.timing.trace_fig
        scale, unit = time_unit(trace.seconds)
        assert fig.layout.xaxis.title.text == f"time from the start of the step ({unit})"
        bars = {b.name: b for b in fig.data}
        # One trace per colour: compute, and each collective kind of the program.
        assert set(bars) == {"compute", "all-gather", "all-reduce"}
        assert bars["compute"].marker.color == COMPUTE_COLOUR
        assert bars["all-gather"].marker.color == KIND_COLOURS["all-gather"]
        assert set(bars["compute"].y) == {"compute"}
        assert set(bars["all-reduce"].y) == {"communication"}
        # The bars are the trace's events: their widths add up to each lane's busy time.
        for lane, names in ((C, ["compute"]), (M, ["all-gather", "all-reduce"])):
            drawn = sum(x for n in names for x in bars[n].x) * scale
            assert drawn == pytest.approx(trace.lane_seconds(lane), rel=1e-9)
        assert sum(len(b.x) for b in fig.data) == len(trace.events)
        # Hover: name, HLO instruction, source line, duration.
        gather = next(e for e in trace.events if e.lane == M and "all-gather" in e.name)
        lines, first = inspect.getsourcelines(gathered_mlp)
        line = first + next(i for i, t in enumerate(lines) if "jnp.tanh" in t)
        assert list(bars["all-gather"].customdata[0][:3]) == [
            "all-gather over data", gather.hlo, f"test_timeline.py:{line}"]
        top = unescape(app.timing.top.value)
        assert top.count("<tr>") - 1 == min(10, len(top_ops(trace)))
        assert "On the timeline of the compiled schedule" in app.timing.text.value
    finally:
        app.close()


def matmul(x, w):
    return x @ w


@pytest.mark.slow
def test_a_tpu_float32_program_gets_its_roofline_point_at_the_peak_used():
    # TPUs run float32 matmuls as bfloat16 passes: the estimate uses the bfloat16 peak, and the
    # roofline point must too (a lookup of a float32 peak finds none).
    r = analyze(matmul, T("x", (1024, 1024), spec="data,None"), T("w", (1024, 1024)),
                mesh="data=8", target="tpu-v5e-2x4")
    chip = get_target("tpu-v5e-2x4").chip
    assert "float32" not in chip.peak_flops and r.estimate.compute.peak_dtype == "bfloat16"
    peak, bandwidth, intensity, _, _ = roofline_point(r)
    # At the rates measured on a v5e chip (benchmarks/results/tpu-v5e-2026-12-06): matmuls at
    # 0.97 of the peak (median of 187 to 194 of 197 TFLOP/s), HBM at 0.81 of 819 GB/s.
    assert peak == pytest.approx(chip.peak_flops["bfloat16"] * 0.97)
    assert bandwidth == pytest.approx(chip.memory_bandwidth * 0.81)
    assert intensity == pytest.approx(r.cost.flops / r.cost.bytes_accessed)


def test_the_roof_is_labelled_with_its_two_rates_and_has_room_above_it():
    r = analyze(matmul, T("x", (1024, 1024), spec="data,None"), T("w", (1024, 1024)),
                mesh="data=8", target="h100-8")
    view = TimingView()
    view.update(r)
    roof, point = view.roofline.data
    # jax runs an H100's float32 matmuls as TF32 (jax.lax.Precision): 989 TFLOP/s with
    # sparsity, 494.5 dense (NV_H100), at the measured matmul fraction 794.5/989 (ml-engineering
    # MAMF) = 397 TFLOP/s; HBM at its nominal 3.35 TB/s (NV_H100).
    labels = [t for t in roof.text if t]
    assert labels == ["HBM 3.35 TB/s", "compute 397 TFLOP/s"]
    # Each label sits on its part of the roof: HBM on the slope (y = x * bandwidth), compute
    # on the flat part (y = peak).
    slope = roof.text.index("HBM 3.35 TB/s")
    flat = roof.text.index("compute 397 TFLOP/s")
    assert roof.y[slope] == pytest.approx(roof.x[slope] * 3.35e12)
    assert roof.y[flat] == pytest.approx(494.5e12 * 794.5 / 989)
    # The y range (log10) reaches above the roof, so its label is inside the frame, and below
    # both the roof's start and the program's point.
    low, high = view.roofline.layout.yaxis.range
    assert high > math.log10(494.5e12 * 794.5 / 989) + 0.3
    assert low < math.log10(min(roof.y[0], point.y[0]))


def test_the_timing_text_names_the_matmul_rate_the_time_was_priced_at():
    # Issue 22: a float32 program's text quoted the bf16 measurement only. The rate used is
    # H100 SXM's TF32 peak (jax runs float32 matmuls as TF32 there), 494.5 TFLOP/s dense,
    # x 794.5/989 measured = 397 TFLOP/s.
    r = analyze(matmul, T("x", (1024, 1024), spec="data,None"), T("w", (1024, 1024)),
                mesh="data=8", target="h100-8")
    text = unescape(timing_html(r))
    assert ("float32, matmuls at 397 TFLOP/s per device: H100 SXM's tf32 peak, 494 TFLOP/s, "
            "× 0.80 measured (it runs float32 matmuls at that rate)") in text
    # A TPU has no float32 peak: it runs float32 matmuls at its bfloat16 rate, 197 TFLOP/s x
    # 0.97 as measured on a v5e chip = 191 TFLOP/s, and says so.
    r = analyze(matmul, T("x", (1024, 1024), spec="data,None"), T("w", (1024, 1024)),
                mesh="data=8", target="tpu-v5e-2x4")
    assert ("matmuls at 191 TFLOP/s per device: TPU v5e's bfloat16 peak, 197 TFLOP/s, × 0.97 "
            "measured (it runs float32 matmuls at that rate)") in unescape(timing_html(r))


def test_the_compile_breakdown_writes_each_time_in_one_unit_as_the_status_does():
    # A 51.3 s compile after a 2.5 s worker start was "compile 51313 ms ... after 2.5 s".
    from dataclasses import replace

    r = analyze(matmul, T("x", (64, 64), spec="data,None"), T("w", (64, 64)), mesh="data=8")
    slow = replace(r, timing=replace(r.timing, lower_s=0.0123, compile_s=51.313,
                                     worker_start_s=2.5, cached=False))
    text = unescape(timing_html(slow))
    assert ("lower 12.3 ms, compile 51.3 s, after 2.5 s starting the compile worker"
            in text), text


def test_si_prefixes():
    assert si(53.82e12, "FLOP/s") == "53.8 TFLOP/s"
    assert si(3.35e12, "B/s") == "3.35 TB/s"
    assert si(900e9, "B/s") == "900 GB/s"
    assert si(12.0, "B/s") == "12 B/s"
