"""The dataflow graph of the per-device program, drawn with plotly.

The graph itself (nodes, edges, eliding, layers, collapsing) is explorer._src.report.dataflow; this
module decides what it looks like: the caption beside each node, where each node sits in pixels
(chains run straight, captions get room, a layer too wide for the plot wraps onto more rows) and
the plotly figure, whose size follows the drawing (rows × widest row), capped, in a box that
scrolls. A toggle shows every op or one node per model layer. Asked from the Placement tab, the
path a tensor's layout came along (explorer._src.report.origins) is drawn over it: its nodes and
edges in one colour, the rest dimmed.
"""

from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass

import ipywidgets as w
import plotly.graph_objects as go

from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.report.dataflow import (
    Graph,
    Node,
    NodeRole,
    barycenter,
    centred,
    collapsed,
    dataflow,
    neighbours,
    origin_path,
    path_edges,
)
from explorer._src.report.report import Report
from explorer._src.ui.figure import FigureSlot, FigureWidget, keep_state

KIND_COLOURS = {                        # one colour per collective kind, used in the legend
    "all-reduce": "#d62728",
    "all-gather": "#1f77b4",
    "reduce-scatter": "#ff7f0e",
    "all-to-all": "#9467bd",
    "ragged-all-to-all": "#8c564b",
    "collective-permute": "#2ca02c",
}

# x is in pixels of a nominal plot width; the view stretches it to the real width.
_WIDTH = 840.0           # px of plot area the layout aims to fill at most (the pane's width)
_NODE_GAP = 22.0         # px between neighbouring markers in a row
_CHAR = 6.8              # px per caption character (11-12 px sans-serif)
_SMALL_GRAPH = 40        # up to this many nodes every node is captioned
LAYERS_FROM = 60         # from this many ops a program's graph starts one node per layer
_ROW_PX = 28.0           # px per drawn row
_MAX_WIDTH = 1600        # px: the figure's width cap (the box scrolls beyond the pane)
_MAX_HEIGHT = 9000       # px: the figure's height cap (the box scrolls)
_BOX_HEIGHT = "820px"    # the scrolling box the figure sits in
PATH_COLOUR = "#e6550d"  # the origin path drawn over the graph
_DIMMED = 0.25           # the opacity of everything off the path while it is drawn


@dataclass(frozen=True)
class Drawing:
    """Where each node of a Graph is drawn and what is written beside it."""

    graph: Graph
    positions: tuple[tuple[float, float], ...]   # (x in px, row) per node; row 0 on top
    captions: tuple[str, ...]                    # text drawn beside each node ("" for none)
    rows: int = 0                                # drawn rows: layers, wide ones wrapped

    def size(self) -> tuple[int, int]:
        """The figure's (width, height) in px: the drawing's extent and its rows, capped."""
        left, right = self.extent()
        width = min(max(int(right - left) + 60, int(_WIDTH) + 50), _MAX_WIDTH)
        height = min(max(300, int(110 + _ROW_PX * self.rows)), _MAX_HEIGHT)
        return width, height

    def extent(self) -> tuple[float, float]:
        """The leftmost and rightmost x, captions included."""
        if not self.graph.nodes:
            return (-1.0, 1.0)
        lo, hi = [], []
        for (x, _), n, c in zip(self.positions, self.graph.nodes, self.captions, strict=True):
            width = _width(c)
            lo.append(x - (width if n.role == NodeRole.INPUT else 0.0))
            hi.append(x + (0.0 if n.role == NodeRole.INPUT else width))
        return (min(lo), max(hi))


def _width(caption: str) -> float:
    return len(caption) * _CHAR + 4 if caption else 0.0


def _caption(n: Node, count: int) -> str:
    """Text beside a node: collectives and inputs always; other ops in a small graph, and the
    landmarks (matmuls, nodes running collectives inside) in a big one."""
    if n.role == NodeRole.COLLECTIVE:
        return n.text
    if n.role in (NodeRole.INPUT, NodeRole.GROUP):
        return n.text if n.role == NodeRole.GROUP else n.label
    if count <= _SMALL_GRAPH:
        return n.text if count <= 12 else n.label
    return n.label if n.is_landmark else ""


def _place(rows, preds, succs, room) -> dict[int, float]:
    """x within each row, in pixels of a plot _WIDTH wide: pulled toward the producers so that
    chains run straight, in row order, neighbours at least _NODE_GAP plus their captions
    (`room[v]` = (left, right)) apart, and each row kept inside the plot where it fits."""
    x = {v: xv * _NODE_GAP for row in rows for v, xv in centred(row).items()}
    half = _WIDTH / 2
    for _ in range(2):
        for row in rows:
            want = [barycenter(x, v, preds) if preds[v] else barycenter(x, v, succs)
                    for v in row]
            pos: list[float] = []
            for k, wx in enumerate(want):
                gap = _NODE_GAP + room[row[k - 1]][1] + room[row[k]][0] if k else 0
                pos.append(wx if k == 0 else max(wx, pos[-1] + gap))
            # Centre the row on its ops' wishes; inputs move aside rather than bend a chain.
            ops = [k for k, v in enumerate(row) if preds[v]] or range(len(row))
            shift = sum(want[k] - pos[k] for k in ops) / max(len(ops), 1)
            lo = pos[0] + shift - room[row[0]][0]
            hi = pos[-1] + shift + room[row[-1]][1]
            if hi - lo > 2 * half:                      # too wide to fit: centre it
                shift -= (lo + hi) / 2
            elif lo < -half:
                shift += -half - lo
            elif hi > half:
                shift -= hi - half
            for v, p in zip(row, pos, strict=True):
                x[v] = p + shift
    return x


def _wrap(row: list[int], room) -> list[list[int]]:
    """A layer as rows that each fit the plot's width: a layer of a train step can hold a
    hundred optimizer updates, which in one row would squeeze the whole drawing to a sliver.
    Edges still point down: every wrapped row sits between the layers before and after."""
    out: list[list[int]] = [[]]
    used = 0.0
    for v in row:
        need = _NODE_GAP + room[v][0] + room[v][1]
        if out[-1] and used + need > _WIDTH:
            out.append([])
            used = 0.0
        out[-1].append(v)
        used += need
    return out


def draw(g: Graph) -> Drawing:
    """Captions and pixel positions for graph `g`."""
    nodes = g.nodes
    captions = [_caption(nd, len(nodes)) for nd in nodes]
    # A crowded row keeps its collectives' captions and drops the others' (hover shows them).
    for row in g.layers:
        for role in (NodeRole.OP, NodeRole.INPUT):
            if sum(_NODE_GAP + _width(captions[v]) for v in row) <= _WIDTH:
                break
            for v in row:
                if nodes[v].role == role:
                    captions[v] = ""
    room = [(_width(c), 0.0) if nd.role == NodeRole.INPUT else (0.0, _width(c))
            for nd, c in zip(nodes, captions, strict=True)]
    rows = [part for row in g.layers for part in _wrap(list(row), room)]
    preds, succs = neighbours(len(nodes), g.edges + g.elided_edges)
    x = _place(rows, preds, succs, room)
    positions = [(0.0, 0.0)] * len(nodes)
    for k, row in enumerate(rows):
        for v in row:
            positions[v] = (x[v], float(k))
    return Drawing(g, tuple(positions), tuple(captions), len(rows))


# ------------------------------------------------------------------------------ view

def _hover(n: Node) -> str:
    def e(text: str) -> str:      # plotly's hover decodes &lt; &gt; &amp; but not &quot;
        return html.escape(text, quote=False)

    line = "<br>".join(e(s) for s in textwrap.wrap(n.hlo, 110, break_on_hyphens=False)[:6])
    head = f"<b>{e(n.text)}</b>"
    if n.role == NodeRole.COLLECTIVE:
        head += f"<br>{e(n.name)} · {e(n.shape)}"
    rows = [head]
    if n.op_name and n.role != NodeRole.GROUP:
        rows.append(f"op: {e(n.op_name)}")
    if n.source:
        rows.append(f"source: {e(n.source)}")
    if n.fused:
        rows.append(f"fusion {e(n.kind)}, computes {e(n.fused)}")
    if n.role == NodeRole.GROUP:
        rows.append(f"inputs: {e(n.op_name)}" if n.op_name else "no inputs")
        return "<br>".join(rows)
    if n.inner:
        rows.append(f"runs {len(n.inner)} collectives inside")
    rows.append(f"<span style='font-size:10px'>{line}</span>")
    return "<br>".join(rows)


def _edge_xy(d: Drawing, edges) -> tuple[list, list]:
    xs, ys = [], []
    for a, b in edges:
        (xa, ya), (xb, yb) = d.positions[a], d.positions[b]
        xs += [xa, xb, None]
        ys += [ya, yb, None]
    return xs, ys


class GraphView:
    """The dataflow graph of the per-device program as a plotly FigureWidget, every op or one
    node per model layer (the toggle; a big program starts collapsed)."""

    MODES = (("all ops", "ops"), ("one node per layer", "layers"))

    def __init__(self, max_nodes: int = 200):
        self.max_nodes = max_nodes
        self.graph: Graph | None = None
        self.drawing: Drawing | None = None
        self.report: Report | None = None
        self.selected: int | None = None
        self.path_tensor: str | None = None     # whose origin path to draw over the graph
        self.path: tuple[int, ...] = ()         # its nodes in the graph drawn
        # A figure per drawing, made when first drawn (its tab shown): a page loading many
        # figures at once was seen to time out initialising them (anywidget allows each 2 s in
        # the browser).
        self.slot = FigureSlot("explorer-graph-box")
        self.result: int | None = None          # the result to stamp the next drawing with
        self.note = w.HTML()
        self.mode = w.ToggleButtons(options=self.MODES, value="ops",
                                    style={"button_width": "150px"})
        self.mode.add_class("explorer-graph-mode")
        self.mode.observe(self._mode_changed, "value")
        self._chosen = False          # the user picked a mode: keep it across programs
        self.box = self.slot.box
        self.box.layout = w.Layout(overflow="auto", max_height=_BOX_HEIGHT, width="100%",
                                   display="none")
        self.widget = w.VBox([self.note, self.mode, self.box])
        self.widget.add_class("explorer-graph")

    @staticmethod
    def _new_figure() -> go.FigureWidget:
        fig = FigureWidget()
        fig.add_scatter(name="dataflow", mode="lines", hoverinfo="skip", showlegend=False,
                        line=dict(color="rgba(120,120,120,0.45)", width=1))
        fig.add_scatter(name="through elided nodes", mode="lines", hoverinfo="skip",
                        line=dict(color="rgba(120,120,120,0.3)", width=1, dash="dot"),
                        showlegend=False)
        fig.add_scatter(name="upward (backward pass)", mode="lines", hoverinfo="skip",
                        line=dict(color="rgba(230,140,40,0.45)", width=1, dash="dash"),
                        showlegend=False)
        fig.add_scatter(name="input", mode="markers+text", textposition="middle left",
                        marker=dict(symbol="square", size=9, color="#8fa6b8"),
                        textfont=dict(size=10, color="#557"),
                        hovertemplate="%{customdata}<extra></extra>")
        fig.add_scatter(name="op", mode="markers+text", textposition="middle right",
                        marker=dict(size=8, color="#9a9a9a"), textfont=dict(size=10, color="#666"),
                        hovertemplate="%{customdata}<extra></extra>")
        fig.add_scatter(name="layer", mode="markers+text", textposition="middle right",
                        marker=dict(symbol="square", size=16, color="#6c8ebf",
                                    line=dict(color="white", width=1)),
                        textfont=dict(size=12, color="#234"), showlegend=False,
                        hovertemplate="%{customdata}<extra></extra>")
        for kind in tuple(CollectiveKind):
            fig.add_scatter(name=kind, mode="markers+text", textposition="middle right",
                            marker=dict(size=15, color=KIND_COLOURS[kind], symbol="diamond",
                                        line=dict(color="white", width=1)),
                            textfont=dict(size=12, color=KIND_COLOURS[kind]),
                            hovertemplate="%{customdata}<extra></extra>")
        fig.add_scatter(name="origin path", mode="lines", hoverinfo="skip", showlegend=False,
                        line=dict(color=PATH_COLOUR, width=3))
        fig.add_scatter(name="on the origin path", mode="markers+text",
                        textposition="middle right", showlegend=False,
                        marker=dict(size=13, color="rgba(0,0,0,0)",
                                    line=dict(color=PATH_COLOUR, width=3)),
                        textfont=dict(size=12, color=PATH_COLOUR),
                        hovertemplate="%{customdata}<extra></extra>")
        fig.update_layout(height=400, autosize=False, margin=dict(l=20, r=20, t=50, b=20),
                          plot_bgcolor="white", hoverlabel=dict(align="left", font_size=11),
                          legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0,
                                      xanchor="left"),
                          xaxis=dict(visible=False),
                          yaxis=dict(autorange="reversed", visible=False),
                          title=dict(font=dict(size=13), x=0.01, y=0.995, yanchor="top"))
        keep_state(fig)    # the traces added above, for views created after this
        return fig

    def _mode_changed(self, _change) -> None:
        self._chosen = True
        if self.report is not None:
            self._redraw()

    @property
    def fig(self) -> go.FigureWidget | None:
        return self.slot.fig

    def update(self, report: Report, selected: int | None = None,
               result: int | None = None) -> None:
        """Redraw for `report` (result `result`); `selected` (a collective's index) is drawn
        larger."""
        self.report, self.selected, self.result = report, selected, result
        g = dataflow(report, self.max_nodes)
        if not self._chosen:
            # A program too big to read op by op (a train step) starts one node per layer.
            per_layer = collapsed(report) if g.elided or len(g.nodes) > LAYERS_FROM else None
            mode = "layers" if per_layer is not None and len(per_layer.nodes) < len(g.nodes) \
                else "ops"
            self.mode.unobserve(self._mode_changed, "value")
            self.mode.value = mode
            self.mode.observe(self._mode_changed, "value")
            self._redraw(g if mode == "ops" else per_layer)
            return
        self._redraw(g if self.mode.value == "ops" else None)

    def _redraw(self, g: Graph | None = None) -> None:
        report, selected = self.report, self.selected
        if g is None:
            g = dataflow(report, self.max_nodes) if self.mode.value == "ops" else \
                collapsed(report)
        self.graph = g
        d = self.drawing = draw(g)
        self.path = origin_path(report, g, self.path_tensor) if self.path_tensor else ()
        on_path = set(self.path)
        fig = self._new_figure()
        with fig.batch_update():
            for trace, edges in ((fig.data[0], g.edges), (fig.data[1], g.elided_edges),
                                 (fig.data[2], g.back_edges)):
                trace.x, trace.y = _edge_xy(d, edges)
            groups = [("input", lambda n: n.role == NodeRole.INPUT),
                      ("op", lambda n: n.role == NodeRole.OP),
                      ("layer", lambda n: n.role == NodeRole.GROUP)]
            groups += [(k, lambda n, k=k: n.role == NodeRole.COLLECTIVE and n.kind == k)
                       for k in tuple(CollectiveKind)]
            for trace, (name, test) in zip(fig.data[3:3 + len(groups)], groups, strict=True):
                idx = [i for i, n in enumerate(g.nodes) if test(n)]
                trace.x = [d.positions[i][0] for i in idx]
                trace.y = [d.positions[i][1] for i in idx]
                trace.customdata = [_hover(g.nodes[i]) for i in idx]
                # A node on the origin path is captioned on it, in its colour.
                trace.text = ["" if i in on_path else d.captions[i] for i in idx]
                if name in tuple(CollectiveKind):
                    trace.marker.size = [22 if g.nodes[i].collective == selected else 15
                                         for i in idx]
                    trace.showlegend = bool(idx)
                if name == "layer":
                    trace.showlegend = bool(idx)
                    # Area follows the nodes a group stands for, within readable bounds.
                    trace.marker.size = [min(22, 10 + g.nodes[i].members ** 0.5)
                                         for i in idx]
            self._draw_path(fig, d, 3 + len(groups))
            left, right = d.extent()
            width, height = d.size()
            # At least the nominal width, so that a pixel of layout is a pixel on screen and
            # captions (drawn at a fixed size) keep the room the layout gave them.
            pad = max(0.0, (width - 40) - (right - left)) / 2 + 10
            # autorange off: plotly pads a text trace's range by hundreds of px on a tall figure.
            fig.layout.xaxis.update(autorange=False, range=[left - pad, right + pad])
            fig.layout.yaxis.update(autorange=False, range=[d.rows - 0.5, -0.8])
            fig.layout.width, fig.layout.height = width, height
            # The title on the first line, the legend under it, in px whatever the height.
            fig.layout.margin.t = 75
            fig.layout.title.y = 1 - 8 / height
            n_coll = len(report.collectives)
            what = (f"{len(g.nodes)} nodes for {g.total}, one per layer" if
                    self.mode.value == "layers" else f"{len(g.nodes)} nodes")
            fig.layout.title.text = html.escape(
                f"per-device program ({g.computation}): {what}, "
                f"{n_coll} collective{'s' if n_coll != 1 else ''}"
                + (f", {g.elided} nodes elided" if g.elided else ""))
        self.slot.show(fig, self.result)
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in g.notes + self._path_note())
        self.note.value = (
            "<div class='explorer-graph-note' style='font-size:12px'>Dataflow of the "
            "optimized per-device program, top to bottom; hover a node for its HLO. "
            "Constants and plumbing (get-tuple-element, bitcast, tuple) are folded into edges."
            + (f"<ul>{notes}</ul>" if notes else "") + "</div>")

    def _draw_path(self, fig: go.FigureWidget, d: Drawing, drawn: int) -> None:
        """The origin path (`path`) over the graph: its edges and rings round its nodes
        (captioned), the first `drawn` traces dimmed; nothing when no path is asked."""
        g = d.graph
        edges, nodes = fig.data[drawn], fig.data[drawn + 1]
        edges.x, edges.y = _edge_xy(d, path_edges(g, self.path))
        nodes.x = [d.positions[i][0] for i in self.path]
        nodes.y = [d.positions[i][1] for i in self.path]
        nodes.customdata = [_hover(g.nodes[i]) for i in self.path]
        # A node captioned nowhere else (a crowded row's op) is named on the path.
        nodes.text = [d.captions[i] or g.nodes[i].label for i in self.path]
        nodes.textposition = ["middle left" if g.nodes[i].role == NodeRole.INPUT
                              else "middle right" for i in self.path]
        for trace in fig.data[:drawn]:
            trace.opacity = _DIMMED if self.path else 1.0

    def _path_note(self) -> tuple[str, ...]:
        if not self.path_tensor:
            return ()
        if not self.path:
            return (f"the origin path of {self.path_tensor} is not drawn: its origins were not "
                    "read (tick \"why is it laid out so?\" in the Placement tab) or none of its "
                    "ops is in this graph",)
        return (f"in orange: the path {self.path_tensor}'s layout came along (the Placement "
                f"tab's why), {len(self.path)} node{'s' if len(self.path) != 1 else ''}",)
