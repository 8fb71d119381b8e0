"""The main-area views. Each takes a Report and redraws in place (plotly batch_update), so an
edit never rebuilds a figure. Colours key on device ids the same way in every view."""

from __future__ import annotations

import html
import re
from copy import deepcopy

import ipywidgets as w
import plotly.colors as pc
import plotly.graph_objects as go

from explorer.cost.model import format_seconds
from explorer.report.dataflow import sliced_all_reduces
from explorer.report.report import Report, TensorRole
from explorer.report.summary import human_bytes
from explorer.ui.figure import FigureWidget
from explorer.ui.grids import Grid

# One colour per device id, the same in every view: qualitative palettes concatenated.
PALETTE = pc.qualitative.Plotly + pc.qualitative.D3 + pc.qualitative.Set2 + pc.qualitative.Dark2


def discrete_scale(n: int) -> list:
    """A stepped colorscale giving integer z = k exactly PALETTE[k % len(PALETTE)]."""
    n = max(n, 1)
    if n == 1:
        return [[0, PALETTE[0]], [1, PALETTE[0]]]
    scale = []
    for k in range(n):
        c = PALETTE[k % len(PALETTE)]
        scale += [[k / n, c], [(k + 1) / n, c]]
    return scale


def _heatmap(height: int) -> go.FigureWidget:
    fig = FigureWidget(go.Heatmap(z=[[0]], showscale=False, texttemplate="%{text}",
                                     hovertemplate="%{customdata}<extra></extra>",
                                     xgap=2, ygap=2))
    # The x axis is on top, under the figure title: the title sits at the very top, left, and
    # the margin leaves room for both it and the axis title.
    fig.update_layout(height=height, margin=dict(l=70, r=10, t=88, b=20),
                      yaxis=dict(autorange="reversed", type="category"),
                      xaxis=dict(type="category", side="top"),
                      title=dict(font=dict(size=13), x=0.01, xanchor="left", y=0.98,
                                 yanchor="top", yref="container"))
    keep_state(fig)
    return fig


def keep_state(fig: go.FigureWidget) -> None:
    """Store the figure's current data and layout in its synced widget state.

    add_trace and batch_update send only transient messages, which a view that does not exist
    yet never sees; a view created later (a page reload in Voila, a figure inside a container
    displayed after it was built) renders the synced state instead, which plotly refreshes only
    when a figure is displayed on its own. Call it after building and after every update."""
    fig._widget_data = deepcopy(fig._data)
    fig._widget_layout = deepcopy(fig._layout_obj._props)


def draw_grid(fig: go.FigureWidget, grid: Grid, colours: int) -> None:
    with fig.batch_update():
        t = fig.data[0]
        t.z, t.text, t.customdata = grid.z, grid.text, grid.hover
        t.x, t.y = grid.x_labels, grid.y_labels
        t.colorscale = discrete_scale(colours)
        t.zmin, t.zmax = -0.5, colours - 0.5
        fig.layout.title.text = html.escape(grid.title)
        fig.layout.xaxis.title.text = html.escape(grid.x_title)
        fig.layout.yaxis.title.text = html.escape(grid.y_title)
        fig.layout.yaxis.autorange = "reversed"     # first row on top, as in the sidebar
        # Panel titles sit just above each panel's first cell.
        fig.layout.annotations = [
            dict(x=x, y=y, text=html.escape(text), showarrow=False, xanchor="left",
                 yanchor="bottom", yshift=14, xshift=-30, font=dict(size=11, color="#444"))
            for x, y, text in grid.panels]
    keep_state(fig)


def colour(key: int) -> str:
    """The colour of key `key` in every grid (discrete_scale gives z = key this colour)."""
    return PALETTE[key % len(PALETTE)]


def legend_html(grid: Grid, meaning: str, limit: int = 16) -> str:
    """The colours of `grid` as swatches with what each one means."""
    items = "".join(
        f"<span class='explorer-legend-item'><span class='explorer-swatch' "
        f"style='background:{colour(k)}'></span>{html.escape(text)}</span>"
        for k, text in grid.legend[:limit])
    more = (f"<span class='explorer-legend-item'>… {len(grid.legend) - limit} more (hover a "
            "cell)</span>" if len(grid.legend) > limit else "")
    return (f"<div class='explorer-legend'><b>Colour = {html.escape(meaning)}</b> {items}{more}"
            "</div>")


class PlacementView:
    """A tensor picker, its blocks, the device grid, and one legend for both."""

    def __init__(self, on_pick, on_plumbing):
        self.tensor = w.Dropdown(description="tensor", options=[], layout=w.Layout(width="520px"))
        self.tensor.observe(lambda c: on_pick(c["new"]), "value")
        self.plumbing = w.Checkbox(value=False, indent=False,
                                   description="list plumbing too (scalars, masks, reshapes, "
                                               "copies)")
        self.plumbing.observe(lambda c: on_plumbing(c["new"]), "value")
        self.blocks = _heatmap(300)
        self.mesh = _heatmap(300)
        self.legend = w.HTML()
        self.widget = w.VBox([w.HBox([self.tensor, self.plumbing]), self.legend, self.blocks,
                              self.mesh])
        self.widget.add_class("explorer-placement")


# Intermediates that only move, reshape, convert or index data, by the primitive or HLO opcode
# their name comes from: listed only on request, since a train step or a pipeline has hundreds.
PLUMBING = frozenset({
    "bitcast", "copy", "tuple", "get-tuple-element", "reshape", "squeeze", "broadcast",
    "broadcast_in_dim", "convert_element_type", "convert", "iota", "select_n", "lt", "le", "gt",
    "ge", "eq", "ne", "and", "or", "not", "rem", "clamp", "axis_index", "dynamic_slice",
    "dynamic_update_slice", "add_any", "concatenate", "pad", "slice", "optimization_barrier",
})


def is_plumbing(t) -> bool:
    """An intermediate nobody looks for in a placement view: a scalar, a boolean mask, or the
    result of an op in PLUMBING."""
    if t.kind != TensorRole.INTERMEDIATE:
        return False
    stem = re.sub(r"[.\d]+$", "", t.name)
    return not t.shape or t.dtype == "bool" or stem in PLUMBING


def short_op(op_name: str) -> str:
    """The tail of a jax op name as people read it: `dot_general`. A combined op
    (`jit(f)/(a/dot_general:b/reduce_sum)`) gives its distinct tails: `dot_general+reduce_sum`;
    fused ones (`a;b`) likewise. No stray brackets."""
    body = op_name.strip()
    parts = []
    for piece in re.split(r"[:;]", body):
        tail = piece.strip().rsplit("/", 1)[-1]
        # Unbalanced brackets belong to the combined op's list, not to the op.
        while tail.endswith(")") and tail.count(")") > tail.count("("):
            tail = tail[:-1]
        while tail.startswith("(") and tail.count("(") > tail.count(")"):
            tail = tail[1:]
        if tail and tail not in parts:
            parts.append(tail)
    return "+".join(parts)


def tensor_options(report: Report, plumbing: bool = False) -> list[tuple[str, str]]:
    """Picker entries grouped inputs, outputs, intermediates; plumbing only when asked."""
    groups = {TensorRole.INPUT: [], TensorRole.OUTPUT: [], TensorRole.INTERMEDIATE: []}
    for t in report.tensors:
        if not plumbing and is_plumbing(t):
            continue
        shape = f"{t.dtype}[{','.join(map(str, t.shape))}]"
        # Single spaces: a browser collapses runs of them in option labels.
        label = f"{t.kind}: {t.name} {shape}"
        if t.kind == TensorRole.INTERMEDIATE:
            where = " ".join(x for x in (short_op(t.op_name), t.source) if x)
            label += f" ({where})" if where else ""
        groups[TensorRole(t.kind)].append((label, t.name))
    return [o for g in groups.values() for o in g]


def _short_source(source: str) -> str:
    """`explorer/workloads/models.py:56` as `models.py:56` (the full path goes in a tooltip)."""
    return source.rsplit("/", 1)[-1]


def collectives_html(report: Report, selected: int | None = None) -> str:
    """The collectives as a table narrow enough for a notebook cell: what, over which axes,
    how big, the predicted time (marked where latency, not bandwidth, bounds it), and where in
    the user's code. An all-reduce the CPU backend wrote in place of a reduce-scatter says so."""
    if not report.collectives:
        return ("<p class='explorer-no-collectives'>No collectives: every device computes its "
                "part alone.</p>")
    e = html.escape
    est = report.estimate
    sliced = sliced_all_reduces(report) if report.backend == "cpu" else {}
    est_head = f"<th>est. {e(est.target)}</th>" if est else ""
    head = ("<tr><th>#</th><th>kind</th><th>over</th><th>shape</th><th>bytes/dev</th>"
            f"{est_head}<th>source</th></tr>")
    columns = 6 + bool(est)
    rows = []
    for i, c in enumerate(report.collectives):
        cls = " class='explorer-selected'" if i == selected else ""
        kind = c.kind + (f" ×{c.parts}" if c.parts > 1 else "") + (" async" if c.is_async
                                                                    else "")
        over = f"{','.join(c.axes) or '—'} ({c.group_size})"
        time_cell = ""
        if est:
            t = est.collectives[i] if i < len(est.collectives) else None
            bound = (" <span class='explorer-latency'>[latency-bound]</span>"
                     if t is not None and t.bound == "latency" else "")
            time_cell = f"<td>{format_seconds(c.est_seconds)}{bound}</td>"
        op = short_op(c.op_name)
        where = (f"<code title='{e(c.source, quote=True)}'>{e(_short_source(c.source))}</code>"
                 if c.source else "—") + (f" <span class='explorer-op'>{e(op)}</span>"
                                           if op else "")
        rows.append(
            f"<tr{cls} data-kind='{c.kind}' data-axes='{','.join(c.axes)}'><td>{i}</td>"
            f"<td>{e(kind)}</td><td>{e(over)}</td>"
            f"<td>{c.dtype}[{','.join(map(str, c.shape))}]</td><td>{human_bytes(c.bytes)}</td>"
            f"{time_cell}<td class='explorer-where'>{where}</td></tr>")
        if i in sliced:
            n, parts = sliced[i]
            which = "its result is" if parts == 1 else f"{n} of its {parts} parts are"
            rows.append(
                f"<tr class='explorer-note-row' data-note='reduce-scatter'><td></td>"
                f"<td colspan='{columns - 1}'>↳ {which} then sliced per device: a "
                "reduce-scatter, which the CPU backend writes as all-reduce + slice; a TPU or "
                "GPU compile moves about half the bytes"
                + (" (the estimate is for the all-reduce)" if est else "") + ".</td></tr>")
    total = human_bytes(report.cost.collective_bytes)
    predicted = (f" Predicted on {e(est.target)}: {format_seconds(est.comm_seconds)} of "
                 "communication." if est else "")
    return (f"<div class='explorer-table-wrap'><table class='explorer-table'>{head}"
            f"{''.join(rows)}</table></div>"
            f"<p>{len(report.collectives)} collective{'s' if len(report.collectives) > 1 else ''}"
            f", {total} per device in all.{predicted}"
            "</p>")


class CollectivesView:
    def __init__(self, on_select):
        self.table = w.HTML()
        # -1 means none: ipywidgets shows a None value as an empty selection.
        self.pick = w.Dropdown(description="highlight", options=[("—", -1)], value=-1,
                               layout=w.Layout(width="520px"))
        self.pick.observe(lambda c: on_select(None if c["new"] == -1 else c["new"]), "value")
        self.groups = _heatmap(240)
        # Shown only while a collective is highlighted (a FigureWidget's own `layout` is
        # plotly's, so a Box around it carries the display toggle).
        self.legend = w.HTML()
        self.groups_box = w.VBox([self.legend, self.groups], layout=w.Layout(display="none"))
        self.widget = w.VBox([self.table, self.pick, self.groups_box])
        self.widget.add_class("explorer-collectives")

    def options(self, report: Report) -> list:
        return [("—", -1)] + [
            (f"#{i} {c.kind} over {','.join(c.axes) or '?'} {human_bytes(c.bytes)} "
             f"{c.source}", i) for i, c in enumerate(report.collectives)]


def binary_ticks(top: float, count: int = 5) -> list[float]:
    """Tick positions from 0 to `top` at a round step in one binary unit (KiB, MiB, GiB): the
    axis then reads 0, 2.0 MiB, 4.0 MiB, ... rather than plotly's decimal '80B'."""
    if top <= 0:
        return [0.0]
    unit = 1.0
    while top / unit >= 1024 and unit < 1024.0 ** 4:
        unit *= 1024
    raw = top / unit / count
    step = next((m * 10 ** e for e in range(-2, 4) for m in (1, 2, 5) if m * 10 ** e >= raw),
                1000.0) * unit
    return [k * step for k in range(int(top // step) + 1)]


# A target's memory is drawn to scale only up to this many times the program's total; beyond,
# the bars would be slivers, so the axis stops at the total and says where the limit is.
_CAPACITY_IN_SCALE = 5.0
MEMORY_PARTS = (("arguments", "#4c78a8"), ("outputs (not aliased)", "#f58518"),
                ("temporaries", "#54a24b"))


def memory_parts(m) -> tuple[int, int, int]:
    """(arguments, outputs not aliased, temporaries): they add up to m.total."""
    return (m.arguments, m.outputs - m.aliased, m.temporaries)


class MemoryView:
    """Per-device memory as one stacked bar, every part labelled, in binary units; the target's
    memory as a line when it is in scale, else named at the axis end."""

    def __init__(self):
        self.fig = self._new_figure()
        self.text = w.HTML()
        self.widget = w.VBox([self.fig, self.text])
        self.widget.add_class("explorer-memory")

    @staticmethod
    def _new_figure() -> go.FigureWidget:
        fig = FigureWidget()
        for name, colour_ in MEMORY_PARTS:
            fig.add_bar(name=name, x=[0], y=["per device"], orientation="h",
                        marker_color=colour_, textposition="inside", insidetextanchor="middle",
                        cliponaxis=False, hovertemplate="%{hovertext}<extra>" + name + "</extra>")
        fig.update_layout(barmode="stack", height=230, margin=dict(l=90, r=20, t=40, b=50),
                          xaxis_title="bytes per device", title="memory per device",
                          legend=dict(orientation="h", y=-0.45, x=0, traceorder="normal"))
        keep_state(fig)
        return fig

    def update(self, report: Report) -> None:
        m = report.memory
        fit = report.estimate.memory if report.estimate is not None else None
        values = memory_parts(m) if m else (0, 0, 0)
        total = sum(values)
        in_scale = fit is not None and fit.capacity <= _CAPACITY_IN_SCALE * max(total, 1)
        top = max(fit.capacity if in_scale else total, 1) * 1.08
        ticks = binary_ticks(top)
        # A new figure per update, as for the dataflow graph: this tab is drawn when it is
        # shown, while the browser creates its view, and a view created then was seen (Voila,
        # plotly 7) to miss the in-place update and keep the empty chart.
        old, self.fig = self.fig, self._new_figure()
        with self.fig.batch_update():
            for bar, v in zip(self.fig.data, values, strict=True):
                bar.x = [v]
                # A part too thin to hold its label shows it on hover only.
                bar.text = [human_bytes(v) if v >= 0.08 * top else ""]
                bar.hovertext = [human_bytes(v)]
            self.fig.layout.xaxis.range = [0, top]
            self.fig.layout.xaxis.tickvals = ticks
            self.fig.layout.xaxis.ticktext = [human_bytes(t) if t else "0" for t in ticks]
            shapes, notes = [], []
            if fit and in_scale:
                shapes.append(dict(type="line", x0=fit.capacity, x1=fit.capacity, y0=0, y1=1,
                                   yref="paper", line=dict(color="#b00020", dash="dash")))
                notes.append(dict(x=fit.capacity, y=1, yref="paper", yanchor="bottom",
                                  text=f"HBM {human_bytes(fit.capacity)}", showarrow=False,
                                  font=dict(color="#b00020", size=11)))
            elif fit:
                notes.append(dict(x=1, xref="paper", y=1, yref="paper", yanchor="bottom",
                                  xanchor="right", showarrow=False,
                                  font=dict(color="#b00020", size=11),
                                  text=f"HBM {human_bytes(fit.capacity)}: "
                                       f"{fit.capacity / max(total, 1):,.0f}× this, off scale →"))
            self.fig.layout.shapes = shapes
            self.fig.layout.annotations = notes
            self.fig.layout.title.text = (
                f"memory per device: {human_bytes(total)}"
                + (f" of {human_bytes(fit.capacity)} on {report.estimate.target}" if fit
                   else ""))
        keep_state(self.fig)
        self.widget.children = (self.fig, self.text)
        old.close()
        self.text.value = memory_html(report)


def memory_html(report: Report) -> str:
    """The memory numbers in words, in one unit system; the parts add up to the total."""
    m = report.memory
    if m is None:
        return "<p>This backend reported no memory analysis.</p>"
    args, outs, temps = memory_parts(m)
    aliased = (f" (outputs {human_bytes(m.outputs)}, of which {human_bytes(m.aliased)} reuse "
               "argument buffers)" if m.aliased else "")
    out = (f"<p>Per device (SPMD: every device runs the same program): arguments "
           f"{human_bytes(args)} + outputs (not aliased) {human_bytes(outs)} + temporaries "
           f"{human_bytes(temps)} = <b>total {human_bytes(m.total)}</b>{aliased}.</p>")
    fit = report.estimate.memory if report.estimate is not None else None
    if fit:
        cls = "explorer-fits" if fit.fits else "explorer-oom"
        out += (f"<p class='{cls}'><b>{'Fits' if fit.fits else 'Out of memory'}</b> on "
                f"{html.escape(report.estimate.target)}: uses {human_bytes(fit.bytes)} of "
                f"{human_bytes(fit.capacity)} per device ({fit.fraction:.2%}).</p>")
    return out


def timing_html(report: Report, unavailable: str | None = None) -> str:
    """Compile times, XLA's cost and the prediction; `unavailable` says why a picked target
    gave no prediction (it does not fit the mesh)."""
    t, c, est = report.timing, report.cost, report.estimate
    flops = "not reported" if c.flops is None else f"{c.flops:.3g}"
    cached = " (answered from the cache)" if t.cached else ""
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in c.notes)
    parts = [f"<p><b>Compile</b> (measured on {report.backend}): lower {t.lower_s * 1e3:.0f} ms, "
             f"compile {t.compile_s * 1e3:.0f} ms{cached}.</p>",
             _measured_html(t),
             f"<p><b>Cost per device</b> (XLA cost_analysis of the {report.backend} program): "
             f"{flops} flops, {human_bytes(c.bytes_accessed)} accessed; collectives move "
             f"{human_bytes(c.collective_bytes)}.</p>"]
    if est is None and unavailable:
        parts.append("<p class='explorer-prediction-unavailable'><b>Prediction unavailable"
                     f"</b>: {html.escape(unavailable)}</p>")
    elif est is None:
        parts.append("<p><i>Pick a target to predict the step time on real hardware.</i></p>")
    else:
        comp = est.compute
        bound = f", <b>{est.bound}-bound</b>" if est.bound else ""
        parts.append(
            f"<p class='explorer-prediction'><b>Predicted on {html.escape(est.target)}</b> "
            f"(analytical model, not a measurement): step "
            f"{format_seconds(est.step_lower_seconds)} with full overlap to "
            f"{format_seconds(est.step_upper_seconds)} with none{bound}. Compute "
            f"{format_seconds(comp.seconds)} ({comp.bound or 'unknown'}-bound, {comp.dtype}), "
            f"communication {format_seconds(est.comm_seconds)}.</p>")
        notes += "".join(f"<li>{html.escape(n)}</li>" for n in est.notes)
    return f"<div class='explorer-timing-body'>{''.join(parts)}<ul>{notes}</ul></div>"


def _measured_html(t) -> str:
    if t.measured_s is not None:
        return (f"<p class='explorer-measured'><b>Measured</b>: {t.measured_s * 1e3:.2f} ms per "
                f"step on {html.escape(t.measured_on)} (median after warm-up; this machine, "
                "not the target).</p>")
    if t.measure_note:
        return f"<p class='explorer-measured'>{html.escape(t.measure_note)}</p>"
    return ""


class TimingView:
    """Compile times, XLA's cost, and with a target the predicted step on a roofline plot."""

    def __init__(self):
        self.text = w.HTML()
        self.roofline = FigureWidget()
        self.roofline.add_scatter(name="roof", mode="lines", line=dict(color="#555"))
        self.roofline.add_scatter(name="this program", mode="markers+text",
                                  marker=dict(size=12, color="#d62728"),
                                  textposition="bottom right")
        self.roofline.update_layout(height=300, margin=dict(l=60, r=10, t=40, b=50),
                                    xaxis=dict(type="log", title="FLOPs per byte of HBM"),
                                    yaxis=dict(type="log", title="FLOP/s per device"),
                                    showlegend=False)
        keep_state(self.roofline)
        self.box = w.Box([self.roofline], layout=w.Layout(display="none"))
        # A pipeline's schedule as a timeline: one row per stage, forward and backward bars.
        self.schedule = FigureWidget()
        for phase, colour in (("F", "#4c78a8"), ("B", "#f58518")):
            self.schedule.add_bar(name="forward" if phase == "F" else "backward",
                                  orientation="h", marker_color=colour, textposition="inside")
        self.schedule.update_layout(barmode="overlay", height=220, bargap=0.2,
                                    margin=dict(l=60, r=10, t=40, b=40),
                                    xaxis_title="time (units of one stage forward)",
                                    yaxis=dict(autorange="reversed", title="stage"))
        keep_state(self.schedule)
        self.schedule_box = w.Box([self.schedule], layout=w.Layout(display="none"))
        self.widget = w.VBox([self.text, self.box, self.schedule_box])
        self.widget.add_class("explorer-timing")

    def update(self, report: Report, unavailable: str | None = None) -> None:
        self.text.value = timing_html(report, unavailable)
        self._draw_schedule(report.workload.to_dict() if report.workload else {})
        point = _roofline_point(report)
        self.box.layout.display = "" if point else "none"
        if not point:
            return
        peak, bandwidth, intensity, achieved, label = point
        xs = [min(intensity, peak / bandwidth) / 100, peak / bandwidth,
              max(intensity, peak / bandwidth) * 100]
        with self.roofline.batch_update():
            self.roofline.data[0].x = xs
            self.roofline.data[0].y = [min(peak, x * bandwidth) for x in xs]
            self.roofline.data[1].x, self.roofline.data[1].y = [intensity], [achieved]
            self.roofline.data[1].text = [label]
            self.roofline.layout.title.text = (
                f"roofline of one {report.estimate.target} device ({report.estimate.dtype})")
        keep_state(self.roofline)


    def _draw_schedule(self, info: dict) -> None:
        entries = info.get("schedule")
        self.schedule_box.layout.display = "" if entries else "none"
        if not entries:
            return
        with self.schedule.batch_update():
            for bar, phase in zip(self.schedule.data, ("F", "B"), strict=True):
                mine = [e for e in entries if e["phase"] == phase]
                bar.base = [e["start"] for e in mine]
                bar.x = [e["end"] - e["start"] for e in mine]
                bar.y = [f"s{e['stage']}" for e in mine]
                bar.text = [str(e["microbatch"]) for e in mine]
            self.schedule.layout.title.text = (
                f"{info['params'].get('schedule', '')} schedule: bubble "
                f"{info['bubble_fraction']:.0%} of stage time")
        keep_state(self.schedule)


def _roofline_point(report: Report):
    """(peak FLOP/s, HBM bytes/s, intensity, attained FLOP/s, label), or None if unknown."""
    est, c = report.estimate, report.cost
    if est is None or not c.flops or not c.bytes_accessed or not est.compute.seconds:
        return None
    from explorer.cost.hardware import get_target

    chip = get_target(est.target).chip
    peak = chip.peak_flops.get(est.compute.dtype)
    if not peak or not chip.memory_bandwidth:
        return None
    attained = c.flops / est.step_lower_seconds
    return (peak, chip.memory_bandwidth, c.flops / c.bytes_accessed, attained,
            f"{est.bound}-bound")


def hlo_html(report: Report, which: str, selected: int | None = None,
             max_lines: int = 4000) -> str:
    text = {"optimized": report.optimized_hlo, "propagated": report.propagated_hlo,
            "stablehlo": report.stablehlo}[which]
    names = {c.hlo_name: i for i, c in enumerate(report.collectives)}
    lines = text.splitlines()
    out = []
    for line in lines[:max_lines]:
        esc = html.escape(line)
        lhs = line.strip().removeprefix("ROOT ").split(" ", 1)[0].lstrip("%")
        if which == "optimized" and lhs in names:
            cls = "explorer-hlo-selected" if names[lhs] == selected else "explorer-hlo-collective"
            esc = f"<mark class='{cls}'>{esc}</mark>"
        out.append(esc)
    more = f"\n… {len(lines) - max_lines} more lines" if len(lines) > max_lines else ""
    return f"<pre class='explorer-hlo-text'>{chr(10).join(out)}{more}</pre>"
