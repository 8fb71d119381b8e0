"""The Timing tab: compile times, XLA's cost, the predicted step on a target, its timeline
(explorer._src.report.trace: the compiled schedule on a compute and a communication lane), the ops
that take the most time, a roofline point, and a pipeline's schedule."""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass

import ipywidgets as w
import plotly.graph_objects as go

from explorer._src.compile.device_profile import MeasuredEvent
from explorer._src.cost.catalog.names import get_target
from explorer._src.cost.gemm_rates import gemm_table
from explorer._src.errors import ExplorerError
from explorer._src.report.op_comparison import (
    SHOWN,
    compare_ops,
    kernel_lines,
    measured_rows,
    predicted_ops,
    signed_seconds,
    unmeasured_mark,
    worth_listing,
)
from explorer._src.report.provenance import compiled_by
from explorer._src.report.report import Report
from explorer._src.report.trace import StepTrace, TraceEvent, TraceLane
from explorer._src.report.warnings import UNCOSTABLE_WARNING
from explorer._src.ui.figure import FigureSlot, FigureWidget, keep_state
from explorer._src.ui.graph import KIND_COLOURS  # one colour per kind in every view
from explorer._src.ui.views import extrapolated_html, stamped
from explorer._src.units import format_bytes, format_seconds, time_unit

COMPUTE_COLOUR = "#64748b"
MEASURED_COLOUR = "#0f766e"     # the run on the device, apart from every predicted colour
OTHER_COLOUR = "#a16207"
MAX_BARS = 4000          # bars drawn; the rest are the shortest and are only counted
TOP_OPS = 10


_CELL_LINE = re.compile(r"(In \[\d+\]):(\d+)")


def short_source(source: str) -> str:
    """A source as the rest of the app writes it: a notebook cell's `In [3]:2` as
    `In [3], line 2` (the trace names compute events the first way), a path as its file."""
    m = _CELL_LINE.fullmatch(source)
    if m:
        return f"{m.group(1)}, line {m.group(2)}"
    return source.rsplit("/", 1)[-1]


def event_class(e: TraceEvent) -> str:
    """What colours an event: `compute`, or its collective's kind."""
    if e.lane == TraceLane.COMPUTE:
        return "compute"
    return str(e.args.get("kind") or "collective")


def class_colour(cls: str) -> str:
    return COMPUTE_COLOUR if cls == "compute" else KIND_COLOURS.get(cls, OTHER_COLOUR)


@dataclass(frozen=True)
class TimelineOp:
    """One op of the timeline, its events summed: what it is, where, how often, how long."""

    name: str
    lane: TraceLane
    source: str
    count: int
    seconds: float
    hlo: str                  # the first event's instruction
    cls: str                  # what colours it (event_class)


def top_ops(trace: StepTrace, n: int = TOP_OPS) -> list[TimelineOp]:
    """The `n` ops with the most time on the timeline, events of the same name, lane and source
    line summed (a layer's matmul run in each of 12 layers is one op run 12 times)."""
    ops: dict[tuple, list[TraceEvent]] = {}
    for e in trace.events:
        ops.setdefault((e.name, e.lane, e.source), []).append(e)
    out = [TimelineOp(name, lane, source, len(es), sum(e.duration for e in es), es[0].hlo,
                      event_class(es[0]))
           for (name, lane, source), es in ops.items()]
    out.sort(key=lambda o: -o.seconds)
    return out[:n]


def top_ops_html(trace: StepTrace) -> str:
    e = html.escape
    rows = []
    for o in top_ops(trace):
        share = o.seconds / trace.seconds if trace.seconds else 0.0
        swatch = (f"<span class='explorer-swatch' style='background:{class_colour(o.cls)}'>"
                  "</span>")
        rows.append(
            f"<tr><td>{swatch}{e(o.name)}</td><td>{o.lane}</td>"
            f"<td><code title='{e(o.source, quote=True)}'>{e(short_source(o.source)) or '—'}"
            f"</code></td><td class='explorer-num'>{o.count}</td>"
            f"<td class='explorer-num'>{format_seconds(o.seconds)}</td>"
            f"<td class='explorer-num'>{share:.1%}</td><td><code>{e(o.hlo)}</code></td></tr>")
    return ("<p><b>Top ops by predicted time</b> (events of one op, lane and source line "
            "summed)</p><div class='explorer-table-wrap'><table class='explorer-table "
            "explorer-top-ops'><tr><th>op</th><th>lane</th><th>source</th><th>runs</th>"
            f"<th>time</th><th>of step</th><th>HLO (first)</th></tr>{''.join(rows)}</table>"
            "</div>")


def timing_html(report: Report, unavailable: str | None = None) -> str:
    """Compile times, XLA's cost and the prediction; `unavailable` says why a picked target
    gave no prediction (it does not fit the mesh)."""
    t, c, est = report.timing, report.cost, report.estimate
    flops = "not reported" if c.flops is None else f"{c.flops:.3g}"
    cached = " (answered from the cache)" if t.cached else ""
    started = (f", after {format_seconds(t.worker_start_s)} starting the compile worker"
               if t.worker_start_s >= 0.05 and not t.cached else "")
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in c.notes)
    counted = ("summed from the scheduled instructions: XLA's cost_analysis() gave none"
               if c.from_schedule else "XLA's cost_analysis()")
    parts = [extrapolated_html(report),
             f"<p><b>Compile</b> (timed on this machine, {html.escape(compiled_by(report))}): "
             f"lower {format_seconds(t.lower_s)}, compile {format_seconds(t.compile_s)}"
             f"{started}{cached}.</p>",
             _measured_html(t),
             f"<p><b>Cost per device</b> ({counted}): "
             f"{flops} flops, {format_bytes(c.bytes_accessed)} accessed; collectives move "
             f"{format_bytes(c.collective_bytes)}.</p>"]
    if est is None and unavailable:
        parts.append("<p class='explorer-prediction-unavailable'><b>Prediction unavailable"
                     f"</b>: {html.escape(unavailable)}</p>")
    elif est is None:
        parts.append("<p><i>Pick a target to predict the step time on real hardware, with its "
                      "timeline.</i></p>")
    else:
        comp = est.compute
        bound = f", <b>{est.bound}-bound</b>" if est.bound else ""
        on_trace = (f" On the timeline of the compiled schedule (below): "
                    f"<b>{format_seconds(est.step_trace_seconds)}</b>."
                    if est.step_trace_seconds is not None else "")
        parts.append(
            f"<p class='explorer-prediction'><b>Predicted on {html.escape(est.target)}</b> "
            f"(analytical model, not a measurement): step "
            f"{format_seconds(est.step_lower_seconds)} with full overlap to "
            f"{format_seconds(est.step_upper_seconds)} with none{bound}. Compute "
            f"{format_seconds(comp.seconds)} ({comp.bound or 'unknown'}-bound, {comp.dtype}"
            f"{compute_rate_text(report)}), communication {format_seconds(est.comm_seconds)}."
            f"{on_trace}</p>")
        parts.append(range_html(report))
        parts.append(cautions_html(report))
        parts.append(op_comparison_html(report))
        notes += "".join(f"<li>{html.escape(n)}</li>" for n in est.notes)
    return f"<div class='explorer-timing-body'>{''.join(parts)}<ul>{notes}</ul></div>"


# How many of the instructions that widen the range the tab lists.
RANGE_ROWS = 8


def range_html(report: Report) -> str:
    """The predicted step as a range (Estimate.step_range), with the instructions that widen
    it at their lines: each of a kind never measured on the chip, or measured slower than the
    model, and what it may take."""
    est = report.estimate
    rng = est.step_range if est is not None else None
    if rng is None:
        return ""
    if not rng.widened:
        return (f"<p class='explorer-range'><b>Measured kinds only</b>: every instruction of "
                f"the step is of a kind measured on a {html.escape(rng.chip)}, so the step is "
                f"one number, {format_seconds(rng.seconds)}.</p>")
    e = html.escape
    rows = "".join(
        f"<tr><td><code>{e(p.hlo)}</code></td><td>{e(p.kind)}</td>"
        f"<td>{'measured slower' if p.measured else '<b>unmeasured</b>'}</td>"
        f"<td><code title='{e(p.source, quote=True)}'>{e(short_source(p.source)) or '—'}"
        f"</code></td><td class='explorer-num'>{format_seconds(p.predicted_s)}</td>"
        f"<td class='explorer-num'>{format_seconds(p.low_s)} .. {format_seconds(p.high_s)}"
        f"</td></tr>" for p in rng.parts[:RANGE_ROWS])
    more = (f"<p class='explorer-section-note'>… and {len(rng.parts) - RANGE_ROWS} more.</p>"
            if len(rng.parts) > RANGE_ROWS else "")
    return (f"<p class='explorer-range'><b>Step range on {e(est.target)}</b>: "
            f"{e(rng.text())}. What widens it: kinds never measured on the chip, or measured "
            "slower than the model (docs/cost-model.md, \"Provenance and ranges\"):</p>"
            "<div class='explorer-table-wrap'><table "
            "class='explorer-table explorer-range-parts'><tr><th>instruction</th><th>kind</th>"
            "<th>its time</th><th>source</th><th>predicted</th><th>may take</th></tr>"
            f"{rows}</table></div>{more}")


def cautions_html(report: Report) -> str:
    """What may make the step far slower than predicted, under the prediction: each of the
    estimate's cautions, and for a fusion the compiler could not cost, the line of code it
    came from (its compiler warning)."""
    est = report.estimate
    if est is None or not est.cautions:
        return ""
    lines = []
    for warning in report.warnings:
        if warning.instruction and warning.text.startswith(UNCOSTABLE_WARNING):
            code = html.escape(warning.source_text)
            at = f" at {html.escape(warning.source)}: <code>{code}</code>" if warning.source else ""
            lines.append(f"<li>{html.escape(warning.instruction)}{at}</li>")
    listed = f"<ul>{''.join(lines)}</ul>" if lines else ""
    return "".join(f"<p class='explorer-caution'>⚠ <b>May be far slower</b>: "
                   f"{html.escape(c)}.</p>" for c in est.cautions) + listed


def op_comparison_html(report: Report, shown: int = SHOWN) -> str:
    """The predicted step against the measured one, instruction by instruction (largest gaps
    first), where the Report has both: a target's prediction and a run on the device."""
    cmp = compare_ops(report)
    if cmp is None:
        return ""
    err = f" (prediction {cmp.error:+.0%})" if cmp.error is not None else ""
    listed = worth_listing(cmp, shown)
    rows = "".join(
        f"<tr><td>{html.escape(r.instruction)}</td><td>{html.escape(r.what)}</td>"
        f"<td>{format_seconds(r.predicted_s)}</td><td>{format_seconds(r.measured_s)}</td>"
        f"<td>{signed_seconds(r.gap_s)}</td><td>{html.escape(r.source)}"
        f"{html.escape(unmeasured_mark(r))}</td></tr>"
        for r in listed)
    kernels = "".join(f"<li>{html.escape(line)}</li>" for line in kernel_lines(cmp))
    more = (f"<p class='explorer-section-note'>… and {len(cmp.rows) - len(listed)} more "
            "instructions, with smaller gaps.</p>" if len(cmp.rows) > len(listed) else "")
    return (f"<p><b>Predicted against measured</b>: step {format_seconds(cmp.predicted_s)} "
            f"predicted, {format_seconds(cmp.measured_s)} measured on the device "
            f"({html.escape(cmp.measured_on)}){err}. The instructions where they part most "
            "(gap: measured minus predicted):</p>"
            "<table class='explorer-table'><tr><th>instruction</th><th>op</th>"
            "<th>predicted</th><th>measured</th><th>gap</th><th>source</th></tr>"
            f"{rows}</table>{more}"
            + (f"<p><b>Custom-call kernels</b>, predicted beside measured:</p><ul>{kernels}"
               "</ul>" if kernels else ""))


def compute_rate_text(report: Report) -> str:
    """The matmul rate the compute time was priced at, and where it comes from: `, matmuls at
    397 TFLOP/s per device: H100 SXM's tf32 peak, 494 TFLOP/s, × 0.80 measured (it runs float32
    matmuls at that rate)` (the fraction was measured on bf16 matmuls; it is applied to every
    dtype's peak); on a GPU
    whose GEMMs XLA measured, bf16 matmuls at those rates by shape."""
    est = report.estimate
    comp = est.compute
    if not comp.peak_flops:
        return ""
    dtype = comp.peak_dtype or comp.dtype
    rate = si(comp.peak_flops, "FLOP/s")
    try:
        chip = get_target(est.target).chip
    except ExplorerError:
        return f", matmuls at {rate} per device"
    nominal = chip.peak_flops.get(dtype)
    as_other = (f" (it runs {comp.dtype} matmuls at that rate)" if dtype != comp.dtype else "")
    measured = chip.matmul_measured
    table = gemm_table(comp.gemm_table)
    if table is not None:
        return (f", bf16 matmuls at XLA's measured rates for their shapes on {chip.name} "
                f"({table.span()}), other matmuls at {rate} per device")
    if est.peak or measured is None or not nominal:
        return f", matmuls at {rate} per device: {chip.name}'s {dtype} peak{as_other}"
    return (f", matmuls at {rate} per device: {chip.name}'s {dtype} peak, "
            f"{si(nominal, 'FLOP/s')}, × {measured.fraction:.2f} measured{as_other}")


def _measured_html(t) -> str:
    if t.measured_s is not None:
        # On fake CPU devices a run times this machine's CPU, never the target; on the
        # machine's own accelerators it is the hardware the prediction below is priced for.
        whose = ("this machine's devices" if t.measured_device_s is not None
                 else "this machine, not the target")
        return (f"<p class='explorer-measured'><b>Measured</b>: {format_seconds(t.measured_s)} per "
                f"step on {html.escape(t.measured_on)} (median after warm-up; {whose}).</p>")
    if t.measure_note:
        return f"<p class='explorer-measured'>{html.escape(t.measure_note)}</p>"
    return ""


def drawn_events(trace: StepTrace, limit: int = MAX_BARS) -> list[TraceEvent]:
    """The events drawn: all of them, or the `limit` longest (in time order)."""
    events = list(trace.events)
    if len(events) <= limit:
        return events
    keep = set(sorted(range(len(events)), key=lambda i: -events[i].duration)[:limit])
    return [e for i, e in enumerate(events) if i in keep]


def trace_figure(trace: StepTrace,
                 measured: tuple[MeasuredEvent, ...] = ()) -> go.FigureWidget:
    """The predicted step as bars on two lanes, coloured compute or by collective kind; with
    `measured` (the device's run of the program, its median call), that run's instructions on
    lanes of their own under them, on the same time axis."""
    end = max([trace.seconds] + [e.start + e.duration for e in measured])
    scale, unit = time_unit(max(end, 1e-12))
    events = drawn_events(trace)
    by_class: dict[str, list[TraceEvent]] = {}
    for e in events:
        by_class.setdefault(event_class(e), []).append(e)
    order = ["compute"] + sorted(c for c in by_class if c != "compute")
    fig = FigureWidget()
    for cls in order:
        es = by_class.get(cls, [])
        if not es:
            continue
        fig.add_bar(
            name=cls, orientation="h", marker_color=class_colour(cls),
            # A thin white edge tells adjacent events apart, where there are few enough.
            marker_line=dict(color="white", width=1 if len(events) <= 400 else 0),
            y=[e.row for e in es],
            base=[e.start / scale for e in es], x=[e.duration / scale for e in es],
            customdata=[[e.name, e.hlo, short_source(e.source) or "(source unknown)",
                         format_seconds(e.duration), format_seconds(e.start),
                         e.basis.text if e.basis else "the collective's formula"]
                        for e in es],
            hovertemplate=("<b>%{customdata[0]}</b><br>HLO: %{customdata[1]}<br>"
                           "source: %{customdata[2]}<br>%{customdata[3]} from "
                           "%{customdata[4]}<br>time: %{customdata[5]}<extra></extra>"))
    rows = trace.rows()
    if measured:
        rows += _add_measured(fig, trace, measured, scale)
    dropped = len(trace.events) - len(events)
    title = (f"predicted step on {trace.target}: {format_seconds(trace.seconds)} "
             f"(busy: compute {format_seconds(trace.lane_seconds(TraceLane.COMPUTE))}, "
             f"communication {format_seconds(trace.lane_seconds(TraceLane.COMMUNICATION))})")
    if measured:
        title += (f"<br>measured on the device: {format_seconds(_span(measured))} (its median "
                  "call, on the lanes below)")
    if dropped:
        title += f" · {dropped} shortest events not drawn"
    fig.update_layout(
        barmode="overlay", height=250 + 30 * max(0, len(rows) - 2), width=820, bargap=0.35,
        title=dict(text=title, font=dict(size=13)),
        margin=dict(l=150 if len(rows) > 2 else 110, r=20, t=60 if measured else 40, b=50),
        xaxis=dict(title=f"time from the start of the step ({unit})", rangemode="tozero",
                   range=[0, end / scale * 1.02]),
        yaxis=dict(type="category", categoryorder="array",
                   categoryarray=rows, autorange="reversed", title="lane"),
        legend=dict(orientation="h", y=-0.35, x=0, title_text="colour:"))
    keep_state(fig)
    return fig


def _span(measured: tuple[MeasuredEvent, ...]) -> float:
    return max(e.start + e.duration for e in measured)


def _add_measured(fig: go.FigureWidget, trace: StepTrace,
                  measured: tuple[MeasuredEvent, ...], scale: float) -> list[str]:
    """The device's run as bars on the measured lanes (the longest MAX_BARS), each hovering
    with its predicted time; the lanes' names, in order."""
    every = measured_rows(measured)
    placed = every
    if len(placed) > MAX_BARS:
        keep = sorted(placed, key=lambda p: -p[1].duration)[:MAX_BARS]
        placed = sorted(keep, key=lambda p: p[1].start)
    predicted = predicted_ops(trace)
    fig.add_bar(
        name="measured on the device", orientation="h", marker_color=MEASURED_COLOUR,
        marker_line=dict(color="white", width=1 if len(placed) <= 400 else 0),
        y=[row for row, _ in placed],
        base=[e.start / scale for _, e in placed], x=[e.duration / scale for _, e in placed],
        customdata=[[p.what if p else e.instruction, e.instruction,
                     format_seconds(e.duration), format_seconds(e.start),
                     format_seconds(p.seconds) if p else "not on the predicted timeline"]
                    for _, e in placed for p in [predicted.get(e.instruction)]],
        hovertemplate=("<b>%{customdata[0]}</b> (measured)<br>HLO: %{customdata[1]}<br>"
                       "%{customdata[2]} from %{customdata[3]}<br>predicted: "
                       "%{customdata[4]}<extra></extra>"))
    return list(dict.fromkeys(row for row, _ in every))


class TimingView:
    """Compile times, XLA's cost, and with a target the predicted step: its timeline, the top
    ops and a roofline point; a pipeline's schedule when the workload has one. Each figure is
    new per drawing (made when the tab is shown: a page loading many figures at once was seen
    to time out initialising them, anywidget allowing each 2 s)."""

    def __init__(self):
        self.text = w.HTML()
        self.trace_slot = FigureSlot()
        self.trace_note = w.HTML()
        self.trace_box = w.VBox([self.trace_slot.box, self.trace_note],
                                layout=w.Layout(display="none"))
        self.trace_box.add_class("explorer-trace")
        self.top = w.HTML()
        self.roofline_slot = FigureSlot()
        self.box = self.roofline_slot.box
        self.box.layout.display = "none"
        self.schedule_slot = FigureSlot()
        self.schedule_box = self.schedule_slot.box
        self.schedule_box.layout.display = "none"
        self.result: int | None = None          # the result the text and figures show
        self.widget = w.VBox([self.text, self.trace_box, self.top, self.box, self.schedule_box])
        self.widget.add_class("explorer-timing")

    @property
    def trace_fig(self) -> go.FigureWidget | None:
        return self.trace_slot.fig

    @property
    def roofline(self) -> go.FigureWidget | None:
        return self.roofline_slot.fig

    @property
    def schedule(self) -> go.FigureWidget | None:
        return self.schedule_slot.fig

    def update(self, report: Report, unavailable: str | None = None,
               result: int | None = None, after: str = "") -> None:
        """Draw `report` (result `result`): the text (with the HTML `after` under it), the
        timeline, the roofline, a schedule."""
        text = timing_html(report, unavailable) + after
        self.text.value = stamped(text, result) if result is not None else text
        self._draw_trace(report.trace, result, report.timing.measured_events)
        self._draw_schedule(report.workload.to_dict() if report.workload else {}, result)
        point = roofline_point(report)
        self.box.layout.display = "" if point else "none"
        if point:
            self.roofline_slot.show(roofline_figure(report, point), result)
        else:
            self.roofline_slot.clear()
        self.result = result

    def _draw_trace(self, trace: StepTrace | None, result: int | None,
                    measured: tuple[MeasuredEvent, ...] = ()) -> None:
        if trace is None or not trace.events:
            self.trace_slot.clear()
            self.trace_box.layout.display = "none"
            self.top.value = ""
            return
        self.trace_slot.show(trace_figure(trace, measured), result)
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in trace.notes)
        self.trace_note.value = (
            "<p class='explorer-note'>Each bar is one instruction of the compiled program, timed "
            "by the cost model (compute: its roofline time; communication: the collective's "
            "predicted time). Hover a bar for its HLO instruction and source line."
            + (" The measured lanes are the program's run on the device (the median of the "
               "profiled calls): each instruction as the chip ran it, asynchronous ones from "
               "start to done." if measured else "") + "</p>"
            f"<ul>{notes}</ul>")
        self.trace_box.layout.display = ""
        self.top.value = top_ops_html(trace)

    def _draw_schedule(self, info: dict, result: int | None) -> None:
        entries = info.get("schedule")
        self.schedule_box.layout.display = "" if entries else "none"
        if entries:
            self.schedule_slot.show(schedule_figure(info), result)
        else:
            self.schedule_slot.clear()


def roofline_figure(report: Report, point) -> go.FigureWidget:
    """The roof of one device of the target (the rates the estimate used) and the program's
    point under it; `point` is roofline_point(report)."""
    peak, bandwidth, intensity, achieved, label = point
    ridge = peak / bandwidth
    # The roof's two rates are written on it, a decade either side of the ridge.
    xs = [min(intensity, ridge) / 100, ridge / 10, ridge, ridge * 10,
          max(intensity, ridge) * 100]
    ys = [min(peak, x * bandwidth) for x in xs]
    fig = FigureWidget()
    fig.add_scatter(name="roof", mode="lines+text", line=dict(color="#555"), x=xs, y=ys,
                    text=roof_labels(peak, bandwidth),
                    textposition=["top left", "top left", "top center", "top center",
                                  "top center"], textfont=dict(color="#555"))
    fig.add_scatter(name="this program", mode="markers+text", x=[intensity], y=[achieved],
                    text=[label], marker=dict(size=12, color="#d62728"),
                    textposition="bottom right")
    est = report.estimate
    fig.update_layout(
        height=300, margin=dict(l=60, r=10, t=40, b=50), showlegend=False,
        xaxis=dict(type="log", title="FLOPs per byte of HBM"),
        # Room above the roof for its label (autorange put the roof on the frame's edge); SI
        # prefixes (100G, not plotly's default 100B for a hundred billion).
        yaxis=dict(type="log", title="FLOP/s per device", exponentformat="SI",
                   range=[math.log10(min(ys[0], achieved)) - 0.2, math.log10(peak) + 0.45]),
        title=dict(text=f"roofline of one {est.target} device ("
                        + ("vendor's peak" if est.peak else "measured achievable rate")
                        + f" for {est.compute.peak_dtype or est.dtype})"))
    return fig


def schedule_figure(info: dict) -> go.FigureWidget:
    """A pipeline's schedule as a timeline: one row per stage, forward and backward bars."""
    entries = info["schedule"]
    fig = FigureWidget()
    for phase, colour in (("F", "#4c78a8"), ("B", "#f58518")):
        mine = [e for e in entries if e["phase"] == phase]
        fig.add_bar(name="forward" if phase == "F" else "backward", orientation="h",
                    marker_color=colour, textposition="inside",
                    base=[e["start"] for e in mine], x=[e["end"] - e["start"] for e in mine],
                    y=[f"s{e['stage']}" for e in mine], text=[str(e["microbatch"]) for e in mine])
    fig.update_layout(barmode="overlay", height=220, bargap=0.2,
                      margin=dict(l=60, r=10, t=40, b=40),
                      xaxis_title="time (units of one stage forward)",
                      yaxis=dict(autorange="reversed", title="stage"),
                      title=dict(text=f"{info['params'].get('schedule', '')} schedule: bubble "
                                      f"{info['bubble_fraction']:.0%} of stage time"))
    return fig


def si(value: float, unit: str) -> str:
    """`value` with an SI prefix, three significant digits: 53.8 TFLOP/s, 3.35 TB/s."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def roof_labels(peak: float, bandwidth: float) -> list[str]:
    """Text of the roof's five points (TimingView.update): HBM on the slope, compute on the flat."""
    return ["", f"HBM {si(bandwidth, 'B/s')}", "", f"compute {si(peak, 'FLOP/s')}", ""]


def roofline_point(report: Report):
    """(peak FLOP/s, HBM bytes/s, intensity, attained FLOP/s, label), or None if unknown.

    The peak is the one the estimate used (ComputeTime.peak_flops): a TPU runs float32 matmuls
    at its bfloat16 peak, which a lookup by the program's dtype would miss."""
    est, c = report.estimate, report.cost
    if est is None or not c.flops or not c.bytes_accessed or not est.compute.seconds:
        return None
    peak = est.compute.peak_flops
    bandwidth = est.compute.memory_bandwidth
    if not peak or not bandwidth or not est.step_lower_seconds:
        return None
    attained = c.flops / est.step_lower_seconds
    return (peak, bandwidth, c.flops / c.bytes_accessed, attained, f"{est.bound}-bound")
