"""The "why" panel of the Collectives tab: for the collective the user picked, the line of code
that caused it, the reason the partitioner inserted it (explorer._src.report.why), the operand's
layout before and after as two small heatmaps, and what-ifs: single-input spec changes that a
compile confirmed would move fewer bytes on that line, and the same change made across layers
(every input of that role, `layers.*.w_up`, in one compile) where the collective repeats on
them, each applied with one click.

The what-ifs themselves (the candidates read from the reason's evidence, their confirmation,
their widening across layers) are explorer._src.api.what_if's one driver, which explorer.what_if,
the command line's `--what-if` and explorer.Session share; explorer._src.ui.what_ifs runs it for the
app, through the app's session, and this module draws what it finds. Its names for them
(`SpecChange`, `candidates`, `confirm`, ...) are kept importable from here.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import replace

import ipywidgets as w

from explorer._src.api.what_if import (  # noqa: F401 - the app's and the tests' names for them
    MAX_CANDIDATES,
    MAX_PATTERNS,
    Layout,
    Spec,
    SpecChange,
    across_layers,
    candidates,
    confirm,
    evidence_layouts,
    involved_inputs,
    line_bytes,
    repeats,
    report_inputs,
)
from explorer._src.errors import SpecError
from explorer._src.hlo.sharding import tiling_from_hlo
from explorer._src.report.compare import ReportComparison
from explorer._src.report.report import Collective, Report, TensorInfo, TensorRole
from explorer._src.spec.layout import Tiling, shard_shape, spec_from_tiling, tiling_from_spec
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import format_spec, parse_spec
from explorer._src.ui.compare import comparison_html
from explorer._src.ui.figure import FigureSlot
from explorer._src.ui.grids import Grid, tensor_grid
from explorer._src.ui.views import grid_figure
from explorer._src.units import format_bytes

_CELL_SOURCE = re.compile(r"In \[(\d+)\], line (\d+)")


def source_line(c: Collective) -> str:
    """The collective's line of code: its source_text, or for a notebook cell ("In [3], line
    2"), the line from this kernel's input history, which the report cannot read (the cell
    is no file)."""
    if c.source_text:
        return c.source_text
    m = _CELL_SOURCE.fullmatch(c.source)
    if not m:
        return ""
    try:
        from IPython import get_ipython
    except ImportError:
        return ""
    shell = get_ipython()
    cells = shell.user_ns.get("_ih") if shell is not None else None
    n, k = int(m.group(1)), int(m.group(2))
    if not cells or n >= len(cells):
        return ""
    lines = cells[n].splitlines()
    return lines[k - 1].strip() if 0 < k <= len(lines) else ""


# ------------------------------------------------------------------------ the layouts


def layout_tiling(layout: Layout, mesh: MeshSpec) -> tuple[Spec | None, Tiling]:
    """(spec, tiling) of a drawable layout; ValueError or SpecError when its text does not
    fit the mesh and shape."""
    rank = len(layout.shape)
    text = layout.sharding.strip()
    if text.startswith("{"):
        tiling = tiling_from_hlo(text, rank, mesh.device_count)
        return spec_from_tiling(tiling, mesh.names, mesh.sizes), tiling
    spec = () if text == "replicated" else parse_spec(text)
    return spec, tiling_from_spec(spec, mesh.names, mesh.sizes, rank)


def layout_grid(layout: Layout, mesh: MeshSpec) -> Grid:
    spec, tiling = layout_tiling(layout, mesh)
    info = TensorInfo(layout.what, TensorRole.INTERMEDIATE, layout.shape, layout.dtype or "?",
                      layout.sharding, spec, shard_shape(tiling, layout.shape), tiling.replicas,
                      0)
    grid = tensor_grid(info, tiling)
    # Two lines: what it is, then its shape and layout (the pictures are small).
    title = (f"{layout.role}: {layout.what}\n[{','.join(map(str, layout.shape))}] "
             f"{format_spec(spec) if spec is not None else layout.sharding}")
    return replace(grid, title=title)


# ------------------------------------------------------------------------ the panel


def code_spans(text: str) -> str:
    """The reason's text with its `backticked` names as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def why_html(report: Report, index: int) -> str:
    c = report.collectives[index]
    e = html.escape
    head = (f"<b>Why #{index + 1}: {e(c.kind)} over {e(','.join(c.axes) or '?')}</b> "
            f"({format_bytes(c.bytes)} per device)")
    where = (f"<div>at <code>{e(c.source)}</code></div>" if c.source
             else "<div><i>source line unknown</i></div>")
    text = source_line(c)
    code = f"<pre class='explorer-source-text'>{e(text)}</pre>" if text else ""
    if c.why is None:
        reason = "<p><i>No reason was read for this collective.</i></p>"
    else:
        reason = (f"<p><span class='explorer-reason' title='reason code'>{e(c.why.reason)}"
                  f"</span> {code_spans(c.why.text)}</p>")
    return f"<div class='explorer-why'>{head}{where}{code}{reason}</div>"


class WhyPanel:
    """The picked collective's source, reason, layouts before and after, and confirmed
    what-ifs; `on_apply(candidate)` applies one."""

    MAX_LAYOUTS = 3

    def __init__(self, on_apply: Callable[[SpecChange], None]):
        self.on_apply = on_apply
        self.text = w.HTML()
        # Figures are made when drawn: a page loading many figures at once was seen to time out
        # initialising them (anywidget allows each 2 s in the browser).
        self.slots = [FigureSlot() for _ in range(self.MAX_LAYOUTS)]
        self.fig_boxes = [slot.box for slot in self.slots]
        self.layout_note = w.HTML()
        self.layouts_legend = w.HTML()
        self.offers_head = w.HTML()
        self.offers = w.VBox()
        self.comparison = w.HTML()
        self.candidates: list[SpecChange] = []
        self.widget = w.VBox([self.text, self.layouts_legend, w.HBox(self.fig_boxes),
                              self.layout_note, self.offers_head, self.offers, self.comparison],
                             layout=w.Layout(display="none"))
        self.widget.add_class("explorer-why-panel")

    @property
    def figs(self) -> list:
        """The layouts drawn now, before first."""
        return [slot.fig for slot in self.slots if slot.fig is not None]

    def clear(self) -> None:
        self.widget.layout.display = "none" if not self.comparison.value else ""
        self.text.value = self.layout_note.value = self.offers_head.value = ""
        self.layouts_legend.value = ""
        for slot in self.slots:
            slot.clear()
        self.offers.children = ()
        self.candidates = []

    def show(self, report: Report, index: int, result: int | None = None) -> None:
        self.comparison.value = ""
        self.widget.layout.display = ""
        self.text.value = why_html(report, index)
        layouts = evidence_layouts(report, report.collectives[index])
        notes, drawn = [], 0
        for lay in layouts:
            if lay.missing:
                notes.append(lay.missing)
                continue
            if drawn >= self.MAX_LAYOUTS:
                break
            try:
                grid = layout_grid(lay, report.mesh)
            except (ValueError, SpecError) as e:
                notes.append(f"{lay.role}: {lay.sharding!r} cannot be drawn on this mesh ({e})")
                continue
            # Small multiples: one per layout, side by side, axis titles in a smaller font.
            self.slots[drawn].show(grid_figure(grid, max(len(grid.legend), 1), 300, width=360,
                                               margin=dict(l=80, r=10, t=96, b=10),
                                               font=dict(size=10), title_font_size=12),
                                   result)
            drawn += 1
        for slot in self.slots[drawn:]:
            slot.clear()
        self.layouts_legend.value = (
            "<div class='explorer-legend'><b>Layouts</b>: each cell is a block of the tensor, "
            "labelled with the devices holding it; colour = block number within each picture."
            "</div>" if drawn else "")
        self.layout_note.value = "".join(f"<p class='explorer-note'>{html.escape(n)}</p>"
                                         for n in notes)
        self.offers_head.value = ""
        self.offers.children = ()

    def searching(self, count: int) -> None:
        self.offers_head.value = (f"<p class='explorer-offers'><b>What if…</b> compiling "
                                  f"{count} single-input change{'s' if count != 1 else ''} in "
                                  "the background…</p>")

    def offer(self, confirmed: Sequence[SpecChange], none_text: str) -> None:
        """Offer the changes a compile confirmed; `none_text` says why there are none."""
        self.candidates = list(confirmed)
        if not confirmed:
            self.offers_head.value = (f"<p class='explorer-offers'><b>What if…</b> "
                                      f"{html.escape(none_text)}.</p>")
            self.offers.children = ()
            return
        self.offers_head.value = ("<p class='explorer-offers'><b>What if…</b> compiled and "
                                  "confirmed (click to apply; the result is compared with "
                                  "now):</p>")
        rows = []
        for cand in confirmed:
            sets = (f"{cand.pattern} = {format_spec(cand.spec)} ({len(cand.tensors)} inputs)"
                    if cand.pattern else f"{cand.tensor} = {format_spec(cand.spec)}")
            button = w.Button(description="apply", layout=w.Layout(width="64px"), tooltip=sets)
            button.add_class("explorer-what-if")
            button.on_click(lambda _, c=cand: self.on_apply(c))
            rows.append(w.HBox([button, w.HTML(f"<span class='explorer-offers'>"
                                                f"{html.escape(cand.describe())}</span>")]))
        self.offers.children = rows

    def show_applied(self, candidate: SpecChange, comparison: ReportComparison) -> None:
        self.widget.layout.display = ""
        self.comparison.value = (f"<p><b>Applied</b>: {html.escape(candidate.label)}. A is the "
                                 "result before, B after:</p>" + comparison_html(comparison))
