"""The Memory tab: per-device memory two ways, on one axis in binary units.

- XLA's buffers: arguments, outputs (not aliased) and temporaries, as the compiler's memory
  analysis reports them (libtpu's for a TPU), which add up to the total;
- by kind: parameters, optimizer state, activations (the analysis' temporaries) and other
  inputs and outputs, each as the compiler allocates it (a TPU's tile padding included), and
  what no tensor holds (the output tuple's table of pointers), which add up to the same total
  (explorer/_src/report/memory.py says how each is found);
- gradients on a row of their own: their size as the partitioner laid them out, which XLA may
  hold inside the temporaries or fuse into the update, so they are not stacked on the others.

Every part is labelled where it is wide enough, on hover always, and in the table under the
chart, so the numbers read at any size.

Under it, memory over the program (Report.memory_timeline, where XLA gave live ranges): the
bytes live on one device at each step of the schedule, the held bands (arguments, outputs,
constants) under the temporaries, the peak marked, and the buffers live at the peak by kind.
Where the peak is above the total, a note says by what: the constants, which the memory
analysis counts nowhere, and temporaries it does not count (docs/cost-model.md, "Memory
figures").
"""

from __future__ import annotations

import html

import ipywidgets as w
import plotly.graph_objects as go

from explorer._src.report.memory import (
    kinds_note,
    outside_kinds,
    padding_note,
    peak_note,
    tuple_tables,
)
from explorer._src.report.report import (
    Buffer,
    BufferKind,
    Memory,
    MemoryKind,
    MemoryTimeline,
    Report,
)
from explorer._src.ui.figure import FigureSlot, FigureWidget, keep_state
from explorer._src.ui.views import extrapolated_html, stamped
from explorer._src.units import format_bytes

# A target's memory is drawn to scale only up to this many times the program's total; beyond,
# the bars would be slivers, so the axis stops at the total and says where the limit is.
_CAPACITY_IN_SCALE = 5.0
XLA_ROW, KIND_ROW, GRAD_ROW = "XLA buffers", "by kind", "gradients"
MEMORY_PARTS = (("arguments", "#4c78a8"), ("outputs (not aliased)", "#f58518"),
                ("temporaries", "#54a24b"))
KIND_PARTS = ((MemoryKind.PARAMS, "parameters", "#7c3aed"),
              (MemoryKind.OPTIMIZER, "optimizer state", "#b45309"),
              (MemoryKind.ACTIVATIONS, "activations", "#0d9488"),
              (MemoryKind.OTHER, "other in/outputs", "#9ca3af"))
# The part of the total no tensor holds (the output tuple's table of pointers), on the by-kind
# row after the kinds, so that the row ends where the XLA row does.
OUTSIDE_LABEL, OUTSIDE_COLOUR = "no tensor's", "#e5e7eb"
GRAD_COLOUR = "#dc2626"
# Below this share of the axis a part's label goes to hover only.
_LABEL_SHARE = 0.08
# Memory over the program: the bands bottom to top, and one colour per buffer kind (the XLA
# row's colours, so an argument is the same blue in every chart).
BUFFER_KIND_COLOURS = {BufferKind.ARGUMENT: "#4c78a8", BufferKind.OUTPUT: "#f58518",
                       BufferKind.CONSTANT: "#9ca3af", BufferKind.TEMPORARY: "#54a24b"}
TIMELINE_BANDS = (("arguments", BufferKind.ARGUMENT), ("outputs", BufferKind.OUTPUT),
                  ("constants", BufferKind.CONSTANT), ("temporaries", BufferKind.TEMPORARY))
LIVE_TRACE, PEAK_TRACE = "live bytes", "peak"
# The peak's buffers drawn one bar each, largest first; the rest are counted in the title.
_PEAK_BARS = 15


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


def memory_parts(m: Memory) -> tuple[int, int, int]:
    """(arguments, outputs not aliased, temporaries): they add up to m.total."""
    return (m.arguments, m.outputs - m.aliased, m.temporaries)


def kind_parts(m: Memory) -> tuple[int, int, int, int]:
    """(params, optimizer, activations, other) of m.by_kind; gradients are apart."""
    k = m.by_kind
    return tuple(int(k[key] or 0) for key, _, _ in KIND_PARTS)


def outside_part(m: Memory) -> int:
    """The bytes of the total that no kind holds, as a bar part (never below 0; the note under
    the table says where the kinds add up to more)."""
    return max(outside_kinds(m), 0)


def classified(m: Memory) -> bool:
    """Whether the report says what its tensors are (a workload or a module; not a plain
    function, whose bytes are all `other`)."""
    return m.kinds is not None


class MemoryView:
    """Per-device memory as stacked bars (XLA's buffers, by kind, gradients), the target's
    memory as a line when it is in scale, else named at the axis end, and a table."""

    def __init__(self):
        self.slot = FigureSlot()        # a figure per drawing, made when the tab is shown
        self.text = w.HTML()
        self.timeline_slot, self.peak_slot = FigureSlot(), FigureSlot()
        self.timeline_note = w.HTML()
        self.timeline_note.add_class("explorer-note")
        self.widget = w.VBox([self.slot.box, self.text, self.timeline_note,
                              self.timeline_slot.box, self.peak_slot.box])
        self.widget.add_class("explorer-memory")

    @property
    def fig(self) -> go.FigureWidget | None:
        return self.slot.fig

    @property
    def result(self) -> int | None:
        return self.slot.result

    @staticmethod
    def _new_figure() -> go.FigureWidget:
        fig = FigureWidget()
        for name, colour_ in MEMORY_PARTS:
            fig.add_bar(name=name, x=[0], y=[XLA_ROW], orientation="h", marker_color=colour_,
                        legendgroup="xla", legendgrouptitle_text="XLA buffers",
                        textposition="inside", insidetextanchor="middle", cliponaxis=False,
                        hovertemplate="%{hovertext}<extra>" + name + "</extra>")
        for _, label, colour_ in KIND_PARTS:
            fig.add_bar(name=label, x=[0], y=[KIND_ROW], orientation="h", marker_color=colour_,
                        legendgroup="kind", legendgrouptitle_text="by kind",
                        textposition="inside", insidetextanchor="middle", cliponaxis=False,
                        hovertemplate="%{hovertext}<extra>" + label + "</extra>")
        fig.add_bar(name=OUTSIDE_LABEL, x=[0], y=[KIND_ROW], orientation="h",
                    marker_color=OUTSIDE_COLOUR, legendgroup="kind", textposition="inside",
                    insidetextanchor="middle", cliponaxis=False,
                    hovertemplate="%{hovertext}<extra>no tensor's (the output tuple's table "
                                  "of pointers)</extra>")
        fig.add_bar(name="gradients",
                    x=[0], y=[GRAD_ROW], orientation="h", marker_color=GRAD_COLOUR,
                    legendgroup="grads", legendgrouptitle_text="gradients",
                    textposition="inside", insidetextanchor="middle", cliponaxis=False,
                    hovertemplate="%{hovertext}<extra>gradients</extra>")
        fig.update_layout(barmode="stack", height=330, width=820,
                          margin=dict(l=100, r=20, t=40, b=50),
                          xaxis_title="bytes per device (every device runs the same program)",
                          title="memory per device",
                          yaxis=dict(autorange="reversed", type="category"),
                          legend=dict(orientation="v", x=1.02, y=1, yanchor="top",
                                      traceorder="grouped", font=dict(size=11),
                                      groupclick="toggleitem"))
        keep_state(fig)
        return fig

    def update(self, report: Report, result: int | None = None) -> None:
        """Draw `report` (result `result`) in a new figure."""
        m = report.memory
        fit = report.estimate.memory if report.estimate is not None else None
        xla = memory_parts(m) if m else (0, 0, 0)
        kinds = kind_parts(m) if m and classified(m) else (0, 0, 0, 0)
        outside = outside_part(m) if m and classified(m) else 0
        grads = m.by_kind[MemoryKind.GRADS] if m and classified(m) else 0
        total = sum(xla)
        in_scale = fit is not None and fit.capacity <= _CAPACITY_IN_SCALE * max(total, 1)
        widest = max(total, sum(kinds) + outside, grads or 0, 1)
        top = max(fit.capacity if in_scale else widest, 1) * 1.08
        ticks = binary_ticks(top)
        rows = [XLA_ROW] + ([KIND_ROW] if any(kinds) else []) + ([GRAD_ROW] if grads else [])
        fig = self._new_figure()
        with fig.batch_update():
            values = [*xla, *kinds, outside, grads or 0]
            for bar, v in zip(fig.data, values, strict=True):
                bar.x = [v]
                # A part too thin to hold its label shows it on hover only.
                bar.text = [format_bytes(v) if v >= _LABEL_SHARE * top else ""]
                bar.hovertext = [format_bytes(v)]
                bar.visible = bar.y[0] in rows and (bar.name != OUTSIDE_LABEL or v > 0)
            fig.layout.yaxis.categoryarray = rows
            # Tall enough for the legend's groups beside the bars.
            fig.layout.height = 300 + 40 * (len(rows) - 1)
            fig.layout.xaxis.range = [0, top]
            fig.layout.xaxis.tickvals = ticks
            fig.layout.xaxis.ticktext = [format_bytes(t) if t else "0" for t in ticks]
            shapes, notes = [], []
            if fit and in_scale:
                shapes.append(dict(type="line", x0=fit.capacity, x1=fit.capacity, y0=0, y1=1,
                                   yref="paper", line=dict(color="#b00020", dash="dash")))
                notes.append(dict(x=fit.capacity, y=1, yref="paper", yanchor="bottom",
                                  text=f"HBM {format_bytes(fit.capacity)}", showarrow=False,
                                  font=dict(color="#b00020", size=11)))
            elif fit:
                notes.append(dict(x=1, xref="paper", y=1, yref="paper", yanchor="bottom",
                                  xanchor="right", showarrow=False,
                                  font=dict(color="#b00020", size=11),
                                  text=f"HBM {format_bytes(fit.capacity)}: "
                                       f"{fit.capacity / max(total, 1):,.0f}× this, off scale →"))
            fig.layout.shapes = shapes
            fig.layout.annotations = notes
            fig.layout.title.text = (
                f"memory per device: {format_bytes(total)}"
                + (f" of {format_bytes(fit.capacity)} on {report.estimate.target}" if fit
                   else ""))
        self.slot.show(fig, result)
        text = memory_html(report)
        self.text.value = stamped(text, result) if result is not None else text
        self._draw_timeline(report, result)

    @property
    def timeline(self) -> go.FigureWidget | None:
        """Memory over the program as drawn now; None without live ranges."""
        return self.timeline_slot.fig

    @property
    def peak_buffers(self) -> go.FigureWidget | None:
        """The buffers live at the peak as drawn now; None without live ranges."""
        return self.peak_slot.fig

    def _draw_timeline(self, report: Report, result: int | None) -> None:
        t = report.memory_timeline
        if t is None:
            self.timeline_slot.clear()
            self.peak_slot.clear()
            self.timeline_note.value = ("<p>Memory over the program: this compile gave no live "
                                        "ranges, so the bytes live at each step are unknown.</p>")
            return
        # Why the peak is above the total, where it is: the two are different counts.
        above = peak_note(report)
        self.timeline_note.value = "".join(
            [f"<p>{html.escape(n)}</p>" for n in t.notes]
            + ([f"<p class='explorer-memory-figures'>{html.escape(above)}.</p>"] if above else []))
        self.timeline_slot.show(timeline_figure(t), result)
        self.peak_slot.show(peak_buffers_figure(t), result)


def memory_html(report: Report) -> str:
    """The memory numbers in words and in a table, in one unit system, under the note that
    says where they were extrapolated (`extrapolated_html`)."""
    return extrapolated_html(report) + _memory_numbers_html(report)


def _memory_numbers_html(report: Report) -> str:
    m = report.memory
    if m is None:
        return "<p>This backend reported no memory analysis.</p>"
    args, outs, temps = memory_parts(m)
    aliased = (f" (outputs {format_bytes(m.outputs)}, of which {format_bytes(m.aliased)} reuse "
               "argument buffers)" if m.aliased else "")
    out = (f"<p>Per device (SPMD: every device runs the same program), as the compiler's "
           f"memory analysis reports it ({_analysis_of(report)}), in allocated bytes: arguments "
           f"(the inputs' buffers) {format_bytes(args)} + outputs (not aliased) "
           f"{format_bytes(outs)} + temporaries {format_bytes(temps)} = <b>total "
           f"{format_bytes(m.total)}</b>{aliased}.</p>")
    fit = report.estimate.memory if report.estimate is not None else None
    if fit:
        cls = "explorer-fits" if fit.fits else "explorer-oom"
        if fit.checked_by:     # the compiler's own check, not bytes against capacity
            word = "Fits" if fit.fits else "May not fit"
            said = fit.text.removeprefix("fits: ").removeprefix("may not fit: ")  # bold says it
            out += (f"<p class='{cls}'><b>{word}</b> on {html.escape(report.estimate.target)}: "
                    f"{html.escape(said)}.</p>")
        else:
            out += (f"<p class='{cls}'><b>{'Fits' if fit.fits else 'Out of memory'}</b> on "
                    f"{html.escape(report.estimate.target)}: uses {format_bytes(fit.bytes)} "
                    f"of {format_bytes(fit.capacity)} per device ({fit.fraction:.2%}).</p>")
    out += _host_html(report)
    out += _kinds_table(report)
    out += "".join(f"<p class='explorer-note explorer-memory-figures'>{html.escape(n)}.</p>"
                   for n in (padding_note(report), kinds_note(report)) if n)
    return out


def _analysis_of(report: Report) -> str:
    """Whose memory analysis the figures are, from the backend that compiled the program."""
    if report.backend.startswith("tpu"):
        return "libtpu's, the TPU compiler's"
    return f"XLA's {html.escape(report.backend.upper())} compiler's"


def _host_html(report: Report) -> str:
    """What lives in host memory (offloaded), apart from the device's, and the compiler's word
    on offload where it could not do what was asked."""
    m = report.memory
    said = [n for n in report.notes if "host memory" in n]
    if not m.host_total and not said:
        return ""
    out = ""
    if m.host_total:
        names = [t.name for t in report.tensors if t.memory_kind != "device"]
        which = (f" ({html.escape(', '.join(names[:4]))}"
                 + (f" and {len(names) - 4} more" if len(names) > 4 else "") + ")"
                 if names else "")
        out += (f"<p class='explorer-host-memory'><b>In host memory</b> (offloaded{which}; not "
                f"counted against the device's): arguments {format_bytes(m.host_arguments)} + "
                f"outputs {format_bytes(m.host_outputs)} + temporaries "
                f"{format_bytes(m.host_temporaries)} = <b>{format_bytes(m.host_total)}</b> per "
                "device. The Timing tab shows the transfers on the host link.</p>")
    out += "".join(f"<p class='explorer-note'>{html.escape(n)}.</p>" for n in said)
    return out


def _kinds_table(report: Report) -> str:
    m = report.memory
    if not classified(m):
        return ("<p class='explorer-memory-unclassified'><i>By kind: this report does not say "
                "which inputs are parameters, so every byte counts as other. Built-in workloads, "
                "<code>explorer.ui.explore_module</code> (a Flax model's parameters) and a "
                "function whose inputs are named <code>model</code>/<code>params</code> and "
                "<code>optimizer</code>/<code>opt_state</code> are split by kind.</i></p>")
    k = m.by_kind
    grads = k[MemoryKind.GRADS]
    grads_text = ("not located (the program pins no gradient, so where they are is unknown)"
                  if grads is None else "none in this program" if grads == 0 else
                  format_bytes(grads))
    xla_rows = [(name, v) for (name, _), v in zip(MEMORY_PARTS, memory_parts(m), strict=True)]
    kind_rows = [(label, k[key] or 0) for key, label, _ in KIND_PARTS]
    if outside := outside_kinds(m):
        # The rest of the total, so that the sum is the total: what no tensor holds.
        kind_rows.append(("output tuple table" if outside == tuple_tables(report)
                          else OUTSIDE_LABEL, outside))
    n = max(len(xla_rows), len(kind_rows))
    xla_rows += [("", None)] * (n - len(xla_rows))
    body = "".join(
        f"<tr><td>{html.escape(a)}</td><td class='explorer-num'>"
        f"{format_bytes(va) if va is not None else ''}</td><td class='explorer-gap'></td>"
        f"<td>{html.escape(b)}</td><td class='explorer-num'>{format_bytes(vb)}</td></tr>"
        for (a, va), (b, vb) in zip(xla_rows, kind_rows, strict=True))
    body += (f"<tr><td><b>total</b></td><td class='explorer-num'><b>{format_bytes(m.total)}</b>"
             f"</td><td></td><td><b>sum</b></td><td class='explorer-num'><b>"
             f"{format_bytes(sum(v for _, v in kind_rows))}</b></td></tr>")
    return ("<table class='explorer-table explorer-memory-table'><tr><th>XLA buffer</th>"
            "<th>per device</th><th></th><th>kind</th><th>per device</th></tr>"
            f"{body}</table><p class='explorer-note'>Gradients: {grads_text} (their values' "
            "size, unpadded: intermediates have no allocation of their own to count); XLA may "
            "hold them among the temporaries or fuse them into the update, so they are not "
            "added to the kinds. "
            "Parameters, optimizer state and other in/outputs are the inputs' and outputs' "
            "allocations, as the arguments and outputs count them. Activations are the memory "
            "analysis' temporaries: what the step allocates besides its arguments and "
            "outputs.</p>")


def timeline_figure(t: MemoryTimeline) -> go.FigureWidget:
    """The bytes live on one device at each step of the schedule: the held bands stacked under
    the temporaries (their top is the live bytes), the peak marked with its instruction."""
    x = [p.position for p in t.points]
    flat = {BufferKind.ARGUMENT: t.arguments, BufferKind.OUTPUT: t.outputs,
            BufferKind.CONSTANT: t.constants}
    fig = FigureWidget()
    for name, kind in TIMELINE_BANDS:
        y = ([p.temporaries for p in t.points] if kind is BufferKind.TEMPORARY
             else [flat[kind]] * len(x))
        if not any(y):
            continue                                  # a band of zeros only crowds the legend
        fig.add_scatter(x=x, y=y, name=name, stackgroup="held", mode="lines",
                        line=dict(width=0.5, color=BUFFER_KIND_COLOURS[kind], shape="hv"),
                        hovertext=[format_bytes(v) for v in y],
                        hovertemplate="%{hovertext}<extra>" + name + "</extra>")
    fig.add_scatter(x=x, y=[p.bytes for p in t.points], name=LIVE_TRACE, mode="lines",
                    line=dict(color="#111827", width=1.5, shape="hv"),
                    customdata=[p.instruction for p in t.points],
                    hovertext=[format_bytes(p.bytes) for p in t.points],
                    hovertemplate="step %{x}: %{customdata}<br>%{hovertext} live"
                                  "<extra></extra>")
    peak = t.peak
    fig.add_scatter(x=[peak.position], y=[peak.bytes], name=PEAK_TRACE, mode="markers",
                    marker=dict(color="#b00020", size=10, symbol="diamond"),
                    hovertemplate=f"peak {format_bytes(peak.bytes)} at "
                                  f"{html.escape(peak.instruction)}<extra></extra>")
    top = max(peak.bytes, 1) * 1.15
    ticks = binary_ticks(top)
    fig.update_layout(
        height=340, width=820, margin=dict(l=80, r=20, t=40, b=50),
        title=f"memory over the program: peak {format_bytes(peak.bytes)} at step "
              f"{peak.position} ({peak.instruction})",
        xaxis_title="program order (step of XLA's schedule)",
        yaxis=dict(title="bytes per device", range=[0, top], tickvals=ticks,
                   ticktext=[format_bytes(v) if v else "0" for v in ticks]),
        legend=dict(orientation="v", x=1.02, y=1, yanchor="top", font=dict(size=11)),
        annotations=[dict(x=peak.position, y=peak.bytes, text=f"peak {format_bytes(peak.bytes)}",
                          showarrow=True, arrowhead=2, ax=0, ay=-28,
                          font=dict(color="#b00020", size=11))])
    keep_state(fig)
    return fig


def buffer_label(b: Buffer) -> str:
    """A peak buffer's bar label: what it holds (dtype and shape), then the HLO value, then
    the line of code that made it where known: 'float32[12,256,1024] while.85{2}
    (models.py:142)'. The HLO name alone ('while.85{2}') says nothing to a newcomer; the
    shape shows e.g. a scanned model's stacked layers."""
    held = f"{b.dtype}[{','.join(map(str, b.shape))}] {b.name}"
    return f"{held} ({b.source.rsplit('/', 1)[-1]})" if b.source else held


def peak_buffers_figure(t: MemoryTimeline) -> go.FigureWidget:
    """The buffers live at the peak, largest first, one bar each, coloured by kind (one legend
    entry per kind, shown even for one kind); past `_PEAK_BARS` the rest are counted in the
    title."""
    shown = t.peak_buffers[:_PEAK_BARS]
    fig = FigureWidget()
    for kind in (*BufferKind, None):
        of_kind = [b for b in shown if b.kind == kind]
        if not of_kind:
            continue
        name = str(kind) if kind is not None else "not in the assignment"
        fig.add_bar(name=name, orientation="h", y=[buffer_label(b) for b in of_kind],
                    x=[b.bytes for b in of_kind],
                    marker_color=BUFFER_KIND_COLOURS.get(kind, "#6b7280"),
                    customdata=[b.instruction for b in of_kind],
                    hovertext=[format_bytes(b.bytes) for b in of_kind],
                    hovertemplate="%{y}: %{hovertext}<br>%{customdata}<extra>" + name
                                  + "</extra>")
    rest = len(t.peak_buffers) - len(shown)
    top = max((b.bytes for b in shown), default=1) * 1.08
    ticks = binary_ticks(top)
    fig.update_layout(
        height=120 + 22 * len(shown), width=980, margin=dict(l=320, r=20, t=40, b=50),
        title="buffers live at the peak" + (f" (the {len(shown)} largest; {rest} more)"
                                            if rest else "") + ", coloured by kind",
        showlegend=True,
        xaxis=dict(title="bytes per device", range=[0, top], tickvals=ticks,
                   ticktext=[format_bytes(v) if v else "0" for v in ticks]),
        yaxis=dict(type="category", autorange="reversed",
                   categoryorder="array", categoryarray=[buffer_label(b) for b in shown]),
        legend=dict(orientation="v", x=1.02, y=1, yanchor="top", font=dict(size=11)))
    keep_state(fig)
    return fig
