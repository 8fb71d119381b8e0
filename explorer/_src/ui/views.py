"""The main-area views. Each draws a Report: its figures are new for every drawing (a
FigureSlot, stamped with the result drawn), its text is set in place. Colours key on device ids
the same way in every view."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import ipywidgets as w
import plotly.colors as pc
import plotly.graph_objects as go

from explorer._src.api.request import check_target
from explorer._src.cost.catalog.names import get_target, targets_with_chips
from explorer._src.errors import ExplorerError
from explorer._src.hlo.groups import spanned_axes
from explorer._src.report.dataflow import sliced_all_reduces
from explorer._src.report.report import Report, TensorRole
from explorer._src.report.summary import collective_shape, dcn_mark, marks_legend, node_mark
from explorer._src.report.why.metadata import short_op
from explorer._src.spec.mesh import MeshSpec
from explorer._src.ui.figure import FigureSlot, FigureWidget, keep_state
from explorer._src.ui.grids import Grid, group_grid
from explorer._src.units import format_bytes, format_seconds

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


_TITLE_PX_PER_CHAR = 7.5       # an axis title's width per character at plotly's 14 px font
_MARGINS_PX = 110              # top (figure and x axis titles) and bottom margins


def _heatmap(height: int) -> go.FigureWidget:
    fig = FigureWidget(go.Heatmap(z=[[0]], showscale=False, texttemplate="%{text}",
                                     hovertemplate="%{customdata}<extra></extra>",
                                     xgap=2, ygap=2))
    # The x axis is on top, under the figure title: the title sits at the very top, left, and
    # the margin leaves room for both it and the axis title.
    fig.update_layout(height=height, margin=dict(l=70, r=10, t=88, b=20),
                      # White behind the cells: a gap between panels reads as a gap, not as a
                      # block of missing data.
                      plot_bgcolor="white",
                      yaxis=dict(autorange="reversed", type="category", showgrid=False,
                                 automargin=True),
                      xaxis=dict(type="category", side="top", showgrid=False,
                                 automargin=True),
                      title=dict(font=dict(size=13), x=0.01, xanchor="left", y=0.98,
                                 yanchor="top", yref="container"))
    keep_state(fig)
    return fig


_TEXT_PX_PER_CHAR = 7.0         # a cell label's width per character at plotly's 12 px font
_PANE_PLOT_PX = 760             # an autosized heatmap's plot width in the app's main pane


def fitted_text(text: list[list[str]], plot_px: float) -> list[list[str]]:
    """Cell labels that fit cells `plot_px` / columns wide: as given, else cut to what comes
    before ':' (`b1: d4…d7 ×4` -> `b1`, the key the colours follow), else none. Plotly draws a
    label wider than its cell across the neighbouring cells; the full text stays in the hover."""
    columns = max((len(row) for row in text), default=0)
    if not columns:
        return text
    cell_px = plot_px / columns

    def fits(rows):
        return max(len(t) for row in rows for t in row) * _TEXT_PX_PER_CHAR <= cell_px

    if fits(text):
        return text
    short = [[t.split(":", 1)[0] for t in row] for row in text]
    return short if fits(short) else [["" for _ in row] for row in text]


_TICK_PX_PER_CHAR = 7.0        # a tick label's width per character at plotly's 12 px font
_TICK_GAP_PX = 8                # between two tick labels side by side
_TICK_ROW_PX = 16               # a tick label's height, with room between rows
_ROW_PX = 22                    # a grid row's height where the figure grows to fit its rows
_MAX_HEIGHT_PX = 900            # ... up to this; past it rows are labelled every few


def tick_labels(labels: list[str], short: list[str], cell_px: float, across: bool
                ) -> tuple[list[str], list[str], bool]:
    """(tick values, their texts, whether the short labels are used) for an axis of cells
    `cell_px` apart: every label where each fits its cell (`across`: side by side, by width;
    else stacked, by height), else the short ones (a block's or a device's index), else every
    k-th short one, k as small as keeps them apart. Never two labels over each other: plotly
    left to itself lets long category labels overlap, or skips rows by its own step."""
    def room(texts) -> float:
        widest = max((len(t.strip("\u200b")) for t in texts), default=0)
        return (widest * _TICK_PX_PER_CHAR + _TICK_GAP_PX) if across else _TICK_ROW_PX

    texts, used_short = labels, False
    if room(labels) > cell_px and len(short) == len(labels):
        texts, used_short = short, True
    step = max(1, int(-(-room(texts) // max(cell_px, 1e-9))))
    keep = [i for i in range(len(labels)) if i % step == 0 and labels[i].strip()]
    return [labels[i] for i in keep], [texts[i].strip("\u200b") for i in keep], used_short


def draw_grid(fig: go.FigureWidget, grid: Grid, colours: int) -> None:
    """Draw `grid` in a new heatmap figure (`_heatmap`; grid_figure does both)."""
    margin = fig.layout.margin
    plot_px = (fig.layout.width - (margin.l or 0) - (margin.r or 0) if fig.layout.width
               else _PANE_PLOT_PX - (margin.l or 0) - (margin.r or 0))
    with fig.batch_update():
        t = fig.data[0]
        t.z, t.customdata = grid.z, grid.hover
        t.text = fitted_text(grid.text, plot_px)
        t.x, t.y = grid.x_labels, grid.y_labels
        t.colorscale = discrete_scale(colours)
        t.zmin, t.zmax = -0.5, colours - 0.5
        fig.layout.title.text = html.escape(grid.title).replace("\n", "<br>")
        if "\n" in grid.title:
            # plotly anchors a title of several lines by its last: move it down by the others.
            fig.layout.title.y = 1 - 16 * (1 + grid.title.count("\n")) / (fig.layout.height or 300)
        fig.layout.yaxis.autorange = "reversed"     # first row on top, as in the sidebar
        # The y axis title runs along the plot's height: never taller than the plot; and
        # each row tall enough for its tick label, up to a page's height.
        # (Read back in a batch_update, a layout property is its value before the batch.)
        rows = max(len(grid.y_labels), 1)
        height = max(fig.layout.height or 300,
                     _MARGINS_PX + int(_TITLE_PX_PER_CHAR * len(grid.y_title)),
                     min(_MAX_HEIGHT_PX, _MARGINS_PX + rows * _ROW_PX))
        x_ticks, x_text, x_short = tick_labels(
            grid.x_labels, grid.x_short, plot_px / max(len(grid.x_labels), 1), across=True)
        y_ticks, y_text, y_short = tick_labels(
            grid.y_labels, grid.y_short, (height - _MARGINS_PX) / rows, across=False)
        fig.layout.xaxis.update(tickmode="array", tickvals=x_ticks, ticktext=x_text,
                                tickangle=0)
        fig.layout.yaxis.update(tickmode="array", tickvals=y_ticks, ticktext=y_text)
        x_title = grid.x_title + (f" · {grid.x_short_note}" if x_short and grid.x_short_note
                                  else "")
        y_title = grid.y_title + (f" · {grid.y_short_note}" if y_short and grid.y_short_note
                                  else "")
        fig.layout.xaxis.title.text = html.escape(x_title)
        fig.layout.yaxis.title.text = html.escape(y_title)
        fig.layout.height = max(height, _MARGINS_PX + int(_TITLE_PX_PER_CHAR * len(y_title)))
        # Panel titles sit above each panel's top edge, from its left edge (category axes
        # place annotations by category index): in the gap row between panels, or for the
        # first row in the top margin, where the column ticks are not (they move below).
        titles = panel_titles(grid, plot_px)
        fig.layout.annotations = [
            dict(x=column - 0.5, y=row - 0.5, text=html.escape(text), showarrow=False,
                 xanchor="left", yanchor="bottom", yshift=1, font=dict(size=11, color="#444"))
            for (column, row, *_), text in zip(grid.panels, titles, strict=True)]
        if grid.panels:
            fig.layout.xaxis.side = "bottom"
            fig.layout.margin.b = max(fig.layout.margin.b or 0, 95)
            # What the panels are, under the columns' title.
            if grid.panel_note:
                fig.layout.xaxis.title.text = (html.escape(x_title) + "<br>"
                                               + html.escape(grid.panel_note))
    keep_state(fig)


_PANEL_PX_PER_CHAR = 6.2       # a panel title's width per character at 11 px


def panel_titles(grid: Grid, plot_px: float) -> list[str]:
    """Each panel's title, or every one's short form (its ranges) when one would run into the
    next panel: panels are as wide as the distance between their first columns."""
    if not grid.panels:
        return []
    column_px = plot_px / max(len(grid.x_labels), 1)
    starts = sorted({column for column, *_ in grid.panels})
    span = (starts[1] - starts[0]) if len(starts) > 1 else len(grid.x_labels)
    room = span * column_px
    if all(len(title) * _PANEL_PX_PER_CHAR <= room for _, _, title, _ in grid.panels):
        return [title for _, _, title, _ in grid.panels]
    return [short for *_, short in grid.panels]


def grid_figure(grid: Grid, colours: int, height: int = 300, **layout) -> go.FigureWidget:
    """A new heatmap figure of `grid` (`layout`: plotly layout properties of this figure, e.g.
    a fixed width), for a FigureSlot to show."""
    fig = _heatmap(height)
    if layout:
        fig.update_layout(**layout)
    draw_grid(fig, grid, colours)
    return fig


# A view (a tab, the Share section) that shows an older result than the status names: hidden.
OUTDATED = "explorer-outdated"


def stamped(text: str, result: int) -> str:
    """HTML `text` marked with the id of the result it shows, which a page can check against
    the status line's."""
    return f"<div class='explorer-drawn' data-result='{result}'>{text}</div>"


def extrapolated_html(report: Report) -> str:
    """A visible note over a tab's numbers where `report` was extrapolated from two compiles
    of fewer layers (Report.extrapolated, explorer.analyze's extrapolate), not compiled at its
    own layer count: which counts were compiled, which the numbers stand for, why, and the
    method's measured error; "" for a compiled Report."""
    x = report.extrapolated
    if x is None:
        return ""
    a, b = x.from_layers
    e = html.escape
    reason = f" ({e(x.reason)})" if x.reason else ""
    return (f"<p class='explorer-caution explorer-extrapolated'><b>Extrapolated</b> from "
            f"{e(x.param)}={a} and {b} to {e(x.param)}={x.layers}{reason}: the model was "
            f"compiled at {a} and {b} layers, not at {x.layers}, and these numbers carried on "
            f"linearly. Error: {e(x.error)}.</p>")


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


# The views' style sheet, in the Placement view (the first tab: on the page whichever is shown).
# The tab titles whole, the row of them wrapping where the pane is narrow (a JupyterLab cell),
# rather than each cut to "Placeme"; the Collectives table as tall as the window allows, where
# a fixed box showed two or three collectives with their part rows; a figure no wider than its
# box (a flex item keeps its drawn width, 700 px, unless let shrink: then plotly refits it,
# explorer._src.ui.figure's loader); and text no wider than its box, a wide table scrolling in
# its own, where a table's width held the whole HTML view (its sentences too) past the pane;
# and a figure of an earlier result than the app's hidden, "drawing…" in its place, until drawn
# again (explorer._src.ui.figure.DRAWING), its box keeping its size so nothing below it moves;
# the Placement legend, which says what the heatmaps' colours mean, hidden with them.
VIEWS_STYLE = """<style>
.explorer-app .widget-tab > .lm-TabBar, .explorer-app .widget-tab > .p-TabBar {
  height: auto; min-height: var(--jp-widgets-horizontal-tab-height, 24px); overflow: visible; }
.explorer-app .widget-tab > .lm-TabBar .lm-TabBar-content,
.explorer-app .widget-tab > .p-TabBar .p-TabBar-content { flex-wrap: wrap; }
.explorer-app .widget-tab > .lm-TabBar .lm-TabBar-tab,
.explorer-app .widget-tab > .p-TabBar .p-TabBar-tab { flex: 0 0 auto; min-width: max-content;
  max-width: none; }
.explorer-app .widget-tab > .lm-TabBar .lm-TabBar-tabLabel,
.explorer-app .widget-tab > .p-TabBar .p-TabBar-tabLabel { overflow: visible;
  text-overflow: clip; }
.explorer-app .explorer-collectives .explorer-table-wrap {
  max-height: max(430px, calc(100vh - 140px)); }
.explorer-app .widget-box > .js-plotly-plot { flex: 1 1 auto; min-width: 0; max-width: 100%;
  overflow: hidden; }
.explorer-app .widget-html, .explorer-app .widget-html > .widget-html-content { min-width: 0;
  max-width: 100%; }
.explorer-app .explorer-figure-slot.explorer-drawing { position: relative; }
.explorer-app .explorer-figure-slot.explorer-drawing > * { visibility: hidden; opacity: 0; }
.explorer-app .explorer-figure-slot.explorer-drawing::before { content: "drawing…";
  position: absolute; top: 8px; left: 8px; color: #666; font-size: 12px; }
.explorer-app .explorer-placement:has(.explorer-drawing) .explorer-placement-legend {
  visibility: hidden; }
</style>"""


class PlacementView:
    """A tensor picker, its blocks, the device grid, and one legend for both."""

    def __init__(self, on_pick, on_plumbing):
        # At most the pane's width (a notebook cell's is narrower than 520 px and more).
        self.tensor = w.Dropdown(description="tensor", options=[],
                                 layout=w.Layout(width="520px", max_width="100%"))
        self.tensor.observe(lambda c: on_pick(c["new"]), "value")
        # As wide as its label (ipywidgets' fixed 300px cut it to "resha…"); the row wraps
        # rather than shrink it where the pane is narrow.
        self.plumbing = w.Checkbox(value=False, indent=False, layout=w.Layout(width="auto"),
                                   description="list plumbing too (scalars, masks, reshapes, "
                                               "copies)")
        self.plumbing.observe(lambda c: on_plumbing(c["new"]), "value")
        self.legend = w.HTML()
        self.legend.add_class("explorer-placement-legend")      # hidden while they draw
        self.blocks_slot, self.mesh_slot = FigureSlot(), FigureSlot()
        self.widget = w.VBox([w.HTML(VIEWS_STYLE), w.HBox([self.tensor, self.plumbing],
                                     layout=w.Layout(flex_flow="row wrap")),
                              self.legend, self.blocks_slot.box, self.mesh_slot.box])
        self.widget.add_class("explorer-placement")

    @property
    def blocks(self) -> go.FigureWidget | None:
        """The tensor's blocks as drawn now."""
        return self.blocks_slot.fig

    @property
    def mesh(self) -> go.FigureWidget | None:
        """The device grid as drawn now."""
        return self.mesh_slot.fig

    @property
    def result(self) -> int | None:
        """The result both heatmaps draw; None unless they draw the same one."""
        drawn = {self.blocks_slot.result, self.mesh_slot.result}
        return drawn.pop() if len(drawn) == 1 else None

    def draw(self, blocks: Grid, mesh: Grid, legend: str, result: int) -> None:
        """Both heatmaps (one colour per block) and their legend, for result `result`."""
        n_blocks = len(blocks.legend)
        self.legend.value = legend
        self.blocks_slot.show(grid_figure(blocks, n_blocks), result)
        self.mesh_slot.show(grid_figure(mesh, n_blocks), result)


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
    """`explorer/_src/workloads/models.py:56` as `models.py:56` (the full path in a tooltip)."""
    return source.rsplit("/", 1)[-1]


def collectives_html(report: Report, selected: int | None = None,
                     unavailable: str | None = None) -> str:
    """The collectives as a table narrow enough for a notebook cell: what, over which axes,
    how big, the predicted time (marked where latency, not bandwidth, bounds it), and where in
    the user's code. An all-reduce the CPU backend wrote in place of a reduce-scatter says so;
    `unavailable` (why a picked target gave no prediction) is said where the times would be.
    An extrapolated Report says so above the table (`extrapolated_html`)."""
    return extrapolated_html(report) + _collectives_table(report, selected, unavailable)


def _collectives_table(report: Report, selected: int | None,
                       unavailable: str | None) -> str:
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
    # Numbered from 1, as the CLI's table and its --what-if N number them.
    number = {c.hlo_name: i for i, c in enumerate(report.collectives, 1)}
    for i, c in enumerate(report.collectives):
        cls = " class='explorer-selected'" if i == selected else ""
        kind = c.kind + (f" ×{c.parts}" if c.parts > 1 else "") + (" async" if c.is_async
                                                                    else "")
        kind += dcn_mark(c, number) + node_mark(c)
        if c.runs != 1:
            kind += f", runs {c.runs}× a step (in a loop)"
        over = f"{','.join(c.axes) or _part_of(report, c)} ({c.group_size})"
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
            f"<tr{cls} data-kind='{c.kind}' data-axes='{','.join(c.axes)}'><td>{i + 1}</td>"
            f"<td class='explorer-kind'>{e(kind)}</td><td>{e(over)}</td>"
            f"<td>{e(collective_shape(c))}</td><td>{format_bytes(c.bytes)}</td>"
            f"{time_cell}<td class='explorer-where'>{where}</td></tr>")
        rows += _part_rows(c, columns)
        if i in sliced:
            n, parts = sliced[i]
            which = "its result is" if parts == 1 else f"{n} of its {parts} parts are"
            rows.append(
                f"<tr class='explorer-note-row' data-note='reduce-scatter'><td></td>"
                f"<td colspan='{columns - 1}'>↳ {which} then sliced per device: a "
                "reduce-scatter, which the CPU backend writes as all-reduce + slice; a TPU or "
                "GPU compile moves about half the bytes"
                + (" (the estimate is for the all-reduce)" if est else "") + ".</td></tr>")
    total = format_bytes(report.cost.collective_bytes)
    predicted = (f" Predicted on {e(est.target)}: {format_seconds(est.comm_seconds)} of "
                 "communication." if est else "")
    if est is None and unavailable:
        # The reason only: the targets that would fit are offered by a button beside it.
        reason = unavailable.split(";")[0].rstrip(".")
        predicted = (f" <span class='explorer-prediction-unavailable'>No predicted times: "
                     f"{e(reason)}.</span>")
    marks = "".join(f" {m}" for m in marks_legend(report))
    # The summary first: with many collectives the table scrolls, and its end is below the fold.
    return (f"<p class='explorer-collectives-summary'>{len(report.collectives)} collective"
            f"{'s' if len(report.collectives) > 1 else ''}, {total} per device in a step (each "
            f"counted every time it runs).{predicted}{e(marks)}</p>"
            f"<div class='explorer-table-wrap'><table class='explorer-table'>{head}"
            f"{''.join(rows)}</table></div>")


def _part_of(report: Report, c) -> str:
    """The "over" of a collective whose device groups are no whole mesh axes: "part of data"
    where they lie along part of an axis (a split the compiler made itself), else "—"."""
    held = spanned_axes([list(g) for g in c.groups], report.mesh.sizes, report.mesh.names)
    return f"part of {','.join(held)}" if held and c.group_size > 1 else "—"


MAX_PART_ROWS = 8


def _part_rows(c, columns: int) -> list[str]:
    """A combined collective (XLA joined several into one tuple-shaped op) expanded: one row per
    part, with its shape, the program's dtype and V, under the combined row."""
    if c.parts <= 1 or len(c.part_shapes) != c.parts:
        return []
    dtypes = c.program_dtypes or (c.dtype,) * c.parts
    sizes = c.program_part_bytes or (None,) * c.parts
    rows = []
    for k, (shape, dtype, size) in enumerate(zip(c.part_shapes, dtypes, sizes, strict=True)):
        if k == MAX_PART_ROWS:
            rows.append(f"<tr class='explorer-part-row'><td></td><td colspan='{columns - 1}'>"
                        f"↳ … and {c.parts - k} more parts</td></tr>")
            break
        moved = format_bytes(size) if size is not None else "—"
        rows.append(f"<tr class='explorer-part-row'><td></td><td>↳ part {k + 1}</td><td></td>"
                    f"<td>{dtype}[{','.join(map(str, shape))}]</td><td>{moved}</td>"
                    f"<td colspan='{columns - 5}'></td></tr>")
    return rows


NONE_PICKED = "— pick a collective: its device groups, why it is there, what removes it —"


def matching_target(picked: str, devices: int) -> str | None:
    """The catalog target with `devices` devices and the chip of `picked` (else its family),
    for a `picked` whose device count does not match the mesh's; None when none is."""
    target = get_target(picked)
    if target.chips is None or target.chips == devices:
        return None          # the mismatch is not the device count: no other size helps
    fitting = [get_target(name) for name in targets_with_chips(devices)]
    for same in (lambda t: t.chip.name == target.chip.name,
                 lambda t: t.family == target.family):
        names = [t.name for t in fitting if same(t)]
        if names:
            return names[0]
    return None


_DEVICE_WORDS = {"gpu": "GPUs", "tpu": "chips"}


class TargetOffer:
    """A button that picks a target which fits the mesh, shown while the picked one does not
    (`offer(name)`; `offer(None)` hides it). `on_pick` gets the name when it is clicked."""

    def __init__(self, on_pick: Callable[[str], None]):
        self.target: str | None = None
        # Sized to its label (a box would stretch it to its width, or squeeze it to "use h…").
        self.button = w.Button(layout=w.Layout(width="auto", align_self="flex-start",
                                               flex="0 0 auto", display="none"),
                               tooltip="pick this target, which has the mesh's device count")
        self.button.add_class("explorer-target-offer")
        self.button.on_click(lambda _: self.target and on_pick(self.target))

    def offer(self, name: str | None) -> None:
        self.target = name
        if name is None:
            self.button.layout.display = "none"
            return
        t = get_target(name)
        self.button.description = (f"use {name} ({t.chips} "
                                   f"{_DEVICE_WORDS.get(t.family, 'devices')})")
        self.button.layout.display = None


class CollectivesView:
    """The collectives table, a target offer beside it, the picker of a collective and its
    device groups (the why panel is added under them by the app)."""

    def __init__(self, on_select, on_pick_target: Callable[[str], None]):
        self.table = w.HTML()
        self.result: int | None = None        # the result the table shows
        # Beside the table's last sentence, which says why there are no predicted times.
        self.target_offer = TargetOffer(on_pick_target)
        # -1 means none: ipywidgets shows a None value as an empty selection.
        self.pick = w.Dropdown(description="why?", options=[(NONE_PICKED, -1)], value=-1,
                               layout=w.Layout(width="520px", max_width="100%"))
        self.pick.observe(lambda c: on_select(None if c["new"] == -1 else c["new"]), "value")
        # Shown only while a collective is highlighted (a FigureWidget's own `layout` is
        # plotly's, so a Box around it carries the display toggle), and made then: a page
        # loading many figures at once was seen to time out initialising them (anywidget
        # allows each 2 s in the browser).
        self.groups_slot = FigureSlot()
        self.legend = w.HTML()
        self.groups_box = w.VBox([self.legend, self.groups_slot.box],
                                 layout=w.Layout(display="none"))
        self.widget = w.VBox([self.table, self.target_offer.button, self.pick,
                              self.groups_box])
        self.widget.add_class("explorer-collectives")

    @property
    def groups(self) -> go.FigureWidget | None:
        """The picked collective's device groups as drawn now."""
        return self.groups_slot.fig

    def draw(self, report: Report, selected: int | None, unavailable: str | None,
             result: int) -> None:
        """The table (the picked collective marked) and its device groups, for `result`."""
        self.table.value = stamped(collectives_html(report, selected, unavailable), result)
        self.result = result
        grid = group_grid(report, selected) if selected is not None else None
        self.draw_groups(grid, len(report.collectives[selected].groups) if grid else 0, result)

    def draw_groups(self, grid: Grid | None, groups: int, result: int) -> None:
        """The device groups of the picked collective (`grid`), or none."""
        self.groups_box.layout.display = "" if grid is not None else "none"
        if grid is None:
            self.groups_slot.clear()
            return
        self.groups_slot.show(grid_figure(grid, max(groups, 1), 240), result)
        self.legend.value = legend_html(grid, "device group")

    def options(self, report: Report) -> list:
        return [(NONE_PICKED, -1)] + [
            (f"#{i + 1} {c.kind} over {','.join(c.axes) or '?'} {format_bytes(c.bytes)} "
             f"{c.source}", i) for i, c in enumerate(report.collectives)]


def split_header(lines: list[str]) -> tuple[list[str], list[str]]:
    """HLO module text as (header, computations): the `HloModule` line and the metadata tables
    that follow it (FileNames, FunctionNames, FileLocations, StackFrames: hundreds of lines for
    a big program, of use only to resolve a stack frame) before the first computation."""
    if not lines or not lines[0].startswith("HloModule"):
        return [], lines
    for k, line in enumerate(lines[1:], start=1):
        if line.rstrip().endswith("{"):        # a computation's signature line
            return lines[:k], lines[k:]
    return lines, []


def hlo_html(report: Report, which: str, selected: int | None = None,
             max_lines: int = 4000) -> str:
    """The module's text, starting at its computations (the entry last, collectives marked);
    the module header and metadata tables are folded into a <details> above them."""
    text = {"optimized": report.optimized_hlo, "propagated": report.propagated_hlo,
            "stablehlo": report.stablehlo}[which]
    names = {c.hlo_name: i for i, c in enumerate(report.collectives)}
    head, lines = split_header(text.splitlines())
    out = []
    for line in lines[:max_lines]:
        esc = html.escape(line)
        lhs = line.strip().removeprefix("ROOT ").split(" ", 1)[0].lstrip("%")
        if which == "optimized" and lhs in names:
            cls = "explorer-hlo-selected" if names[lhs] == selected else "explorer-hlo-collective"
            esc = f"<mark class='{cls}'>{esc}</mark>"
        out.append(esc)
    more = f"\n… {len(lines) - max_lines} more lines" if len(lines) > max_lines else ""
    intro = ("The per-device program's computations, entry last"
             + ("; collectives highlighted" if which == "optimized" else "") + ".")
    folded = ""
    if head:
        intro += " Its header and metadata tables are folded below."
        folded = (f"<details class='explorer-hlo-header'><summary>module header and metadata "
                  f"tables ({len(head)} lines)</summary><pre class='explorer-hlo-text'>"
                  f"{html.escape(chr(10).join(head))}</pre></details>")
    return (f"<div class='explorer-hlo-intro' style='font-size:12px'>{html.escape(intro)}</div>"
            f"{folded}<pre class='explorer-hlo-text'>{chr(10).join(out)}{more}</pre>")


def mapping_placeholder(target: str | None, mesh: MeshSpec) -> str:
    """The mapping box's grey hint: the mapping an empty box means on this target and mesh,
    written as the box takes it, so that the example is one the target accepts."""
    if not target:
        return "choose a target first"
    try:
        default = check_target(target, None, mesh)
    except ExplorerError:
        return "the mesh does not fit this target"
    return f"default, e.g. {default.text()}"
