"""The per-device program as a dataflow graph, with its collectives marked.

`dataflow` reads the entry computation of the optimized HLO (pure, no plotting): one node per
instruction that computes something, one edge per operand. Plumbing (get-tuple-element, bitcast,
tuple, the -done half of an async pair) is collapsed into edges, and constants are dropped, so
the graph shows what feeds what. The layout is a layered (Sugiyama-style) one in pure Python:
longest-path layers from the inputs, then barycenter ordering within each layer. No graphviz.
"""

from __future__ import annotations

import html
import re
import textwrap
from collections import deque
from dataclasses import dataclass, field, replace

import ipywidgets as w
import plotly.graph_objects as go

from explorer.hlo.collectives import CollectiveKind
from explorer.hlo.module import HloModule, Instruction, parse_module
from explorer.report.build import short_path
from explorer.report.report import Report
from explorer.report.summary import human_bytes
from explorer.ui.views import keep_state

# Instructions that only re-label, re-pack or wait for a value: an edge goes through them.
_PASS_THROUGH = {"get-tuple-element", "bitcast", "tuple", "optimization-barrier", "async-update",
                 "async-done", "domain", "add-dependency"}
# Instructions that read nothing: dropped, with their edges.
_DROPPED = {"constant", "after-all"}
# Attributes that name computations an instruction runs.
_CALL_ATTRS = ("calls", "body", "condition", "branch_computations", "true_computation",
               "false_computation", "to_apply")

KIND_COLOURS = {                        # one colour per collective kind, used in the legend
    "all-reduce": "#d62728",
    "all-gather": "#1f77b4",
    "reduce-scatter": "#ff7f0e",
    "all-to-all": "#9467bd",
    "collective-permute": "#2ca02c",
}


@dataclass(frozen=True)
class Node:
    name: str                # the HLO instruction's name
    opcode: str
    role: str                # "input", "op" or "collective"
    kind: str                # collective kind; fusions: the name's stem ("ynn_fusion"); opcode
    label: str               # short: the op_name's tail ("dot_general"), or the input's name
    shape: str               # per-device result shape, e.g. f32[128,1024]
    op_name: str = ""
    source: str = ""         # file:line of the user code, "" if unknown
    hlo: str = ""            # the instruction's HLO text (long lines cut)
    fused: str = ""          # for a fusion: the opcode at the root of the fused computation
    collective: int | None = None        # index into report.collectives
    axes: tuple[str, ...] = ()
    bytes: int = 0           # collective: V per device; otherwise the result's bytes
    parts: int = 1
    inner: tuple[int, ...] = ()          # collectives inside computations this node calls
    is_output: bool = False

    @property
    def text(self) -> str:
        """The node as the graph labels it: collectives by kind, axes and bytes."""
        if self.role == "collective":
            parts = f" ×{self.parts}" if self.parts > 1 else ""
            return f"{self.kind}{parts} {','.join(self.axes) or '?'} {human_bytes(self.bytes)}"
        return f"{self.label} {self.shape}"

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__} | {"text": self.text}


@dataclass(frozen=True)
class Graph:
    computation: str
    nodes: tuple[Node, ...]
    edges: tuple[tuple[int, int], ...]           # (producer, consumer) indices into nodes
    elided_edges: tuple[tuple[int, int], ...]    # paths that ran through elided nodes
    layers: tuple[tuple[int, ...], ...]          # node indices per layer, left to right
    positions: tuple[tuple[float, float], ...]   # (x, layer) per node; layer 0 on top
    total: int                                   # nodes before eliding
    elided: int = 0
    notes: tuple[str, ...] = field(default=())
    captions: tuple[str, ...] = field(default=())  # text drawn beside each node ("" for none)

    def index(self, name: str) -> int:
        for i, n in enumerate(self.nodes):
            if n.name == name:
                return i
        raise KeyError(f"no node {name!r} in the graph of {self.computation}")

    def node(self, name: str) -> Node:
        return self.nodes[self.index(name)]

    def preds(self, i: int) -> list[int]:
        return [a for a, b in self.edges + self.elided_edges if b == i]

    def succs(self, i: int) -> list[int]:
        return [b for a, b in self.edges + self.elided_edges if a == i]

    def layer_of(self, i: int) -> int:
        return int(self.positions[i][1])

    def downstream(self, i: int) -> set[int]:
        """Every node reachable from node i."""
        out: set[int] = set()
        todo = [i]
        while todo:
            for s in self.succs(todo.pop()):
                if s not in out:
                    out.add(s)
                    todo.append(s)
        return out

    def extent(self) -> tuple[float, float]:
        """The leftmost and rightmost x, captions included."""
        if not self.nodes:
            return (-1.0, 1.0)
        lo, hi = [], []
        for (x, _), n, c in zip(self.positions, self.nodes, self.captions, strict=True):
            width = _width(c)
            lo.append(x - (width if n.role == "input" else 0.0))
            hi.append(x + (0.0 if n.role == "input" else width))
        return (min(lo), max(hi))

    @property
    def collectives(self) -> list[Node]:
        return [n for n in self.nodes if n.role == "collective"]

    def render_text(self) -> str:
        names = [n.name for n in self.nodes]
        head = (f"dataflow of {self.computation}: {len(self.nodes)} nodes, "
                f"{len(self.edges) + len(self.elided_edges)} edges, {len(self.layers)} layers")
        if self.elided:
            head += f" ({self.elided} of {self.total} nodes elided)"
        lines = [head]
        indirect = set(self.elided_edges)
        for k, layer in enumerate(self.layers):
            lines.append(f"layer {k}:")
            for i in layer:
                n = self.nodes[i]
                ins = ", ".join(names[p] + ("~" if (p, i) in indirect else "")
                                for p in self.preds(i))
                mark = " [output]" if n.is_output else ""
                inner = f" [calls {len(n.inner)} collectives]" if n.inner else ""
                lines.append(f"  {n.name} = {n.text}{mark}{inner}" + (f" <- {ins}" if ins else ""))
        lines += [f"note: {t}" for t in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"computation": self.computation, "nodes": [n.to_dict() for n in self.nodes],
                "edges": [list(e) for e in self.edges],
                "elided_edges": [list(e) for e in self.elided_edges],
                "layers": [list(layer) for layer in self.layers],
                "positions": [list(p) for p in self.positions], "total": self.total,
                "elided": self.elided, "notes": list(self.notes),
                "captions": list(self.captions)}


# ------------------------------------------------------------------------------ reading

def _stem(name: str) -> str:
    return re.sub(r"\.\d+$", "", name)


def _shape_text(instr: Instruction) -> str:
    arrays = instr.arrays
    if len(arrays) == 1 and not instr.shape.startswith("("):
        return arrays[0].text()
    if not arrays:
        return "()"
    shown = ", ".join(a.text() for a in arrays[:2])
    more = f", … {len(arrays)} parts" if len(arrays) > 2 else ""
    return f"({shown}{more})"


def _hlo_line(instr: Instruction, limit: int = 600) -> str:
    line = (f"{'ROOT ' if instr.is_root else ''}%{instr.name} = {instr.shape} "
            f"{instr.opcode}({instr.operand_text})" + (f", {instr.attrs}" if instr.attrs else ""))
    return line if len(line) <= limit else line[:limit] + " …"


def _called(instr: Instruction) -> list[str]:
    out = []
    for key in _CALL_ATTRS:
        value = instr.attr(key)
        if value:
            out += re.findall(r"%?([\w.\-]+)", value)
    return out


def _reachable_computations(module: HloModule, start: list[str]) -> set[str]:
    seen: set[str] = set()
    todo = [c for c in start if c in module.computations]
    while todo:
        comp = todo.pop()
        if comp in seen:
            continue
        seen.add(comp)
        for instr in module.computations[comp]:
            todo += [c for c in _called(instr) if c in module.computations and c not in seen]
    return seen


def _source(module: HloModule, instr: Instruction) -> str:
    src = module.source(instr)
    return f"{short_path(src[0])}:{src[1]}" if src else ""


def _nodes_and_edges(report: Report, module: HloModule):
    """All nodes of the entry computation and their direct edges, plumbing collapsed."""
    entry = module.computations.get(module.entry, [])
    by_comp = {(c.computation, c.hlo_name): i for i, c in enumerate(report.collectives)}
    producers: dict[str, tuple[int, ...]] = {}     # instruction -> the nodes its value comes from
    nodes: list[Node] = []
    preds: list[list[int]] = []
    root_sources: tuple[int, ...] = ()
    for instr in entry:
        sources: list[int] = []
        for o in instr.operands:
            for p in producers.get(o, ()):
                if p not in sources:
                    sources.append(p)
        if instr.opcode in _DROPPED:
            producers[instr.name] = ()
        elif instr.opcode in _PASS_THROUGH or instr.opcode.endswith("-done"):
            producers[instr.name] = tuple(sources)
        else:
            producers[instr.name] = (len(nodes),)
            nodes.append(_node(report, module, instr, by_comp))
            preds.append(sources)
        if instr.is_root:
            root_sources = producers[instr.name]
    for i in root_sources:
        nodes[i] = replace(nodes[i], is_output=True)
    return nodes, preds


def _node(report: Report, module: HloModule, instr: Instruction, by_comp) -> Node:
    op_name = instr.op_name
    tail = op_name.rsplit("/", 1)[-1]
    common = dict(name=instr.name, opcode=instr.opcode, shape=_shape_text(instr), op_name=op_name,
                  source=_source(module, instr), hlo=_hlo_line(instr),
                  bytes=sum(a.nbytes for a in instr.arrays))
    index = by_comp.get((instr.computation, instr.name))
    called = _called(instr)
    inner: tuple[int, ...] = ()
    if index is None and called:
        comps = _reachable_computations(module, called)
        inner = tuple(i for i, c in enumerate(report.collectives) if c.computation in comps)
        if instr.opcode == "async-start" and len(inner) == 1:
            index, inner = inner[0], ()      # the async wrapper is the collective
    if index is not None:
        c = report.collectives[index]
        return Node(role="collective", kind=c.kind, label=tail or c.kind, collective=index,
                    axes=c.axes, parts=c.parts, **{**common, "bytes": c.bytes,
                                                    "source": c.source or common["source"]})
    if instr.opcode == "parameter":
        return Node(role="input", kind="parameter", label=op_name or instr.name, **common)
    fused = ""
    if instr.opcode == "fusion" and called:
        body = module.computations.get(called[0], [])
        fused = next((i.opcode for i in body if i.is_root), "")
    kind = _stem(instr.name) if instr.opcode == "fusion" else instr.opcode
    return Node(role="op", kind=kind, label=tail or kind, fused=fused, inner=inner, **common)


# ------------------------------------------------------------------------------ eliding

def _elide(nodes: list[Node], preds: list[list[int]], max_nodes: int):
    """Keep collectives, their neighbours and the nodes nearest to them, up to max_nodes.

    Collectives and their neighbours are kept even past max_nodes. A path between kept nodes
    that ran through elided ones becomes one edge, marked as elided."""
    n = len(nodes)
    succs: list[list[int]] = [[] for _ in range(n)]
    for v, ps in enumerate(preds):
        for p in ps:
            succs[p].append(v)
    if n <= max_nodes:
        edges = [(p, v) for v in range(n) for p in preds[v]]
        return list(range(n)), edges, []
    seeds = [i for i, nd in enumerate(nodes) if nd.role == "collective" or nd.inner]
    keep: set[int] = set(seeds)
    for s in seeds:
        keep.update(preds[s])
        keep.update(succs[s])
    # Then the nearest nodes, breadth first from what is kept (or from the outputs).
    start = sorted(keep) or [i for i, nd in enumerate(nodes) if nd.is_output] or [n - 1]
    seen = set(start)
    queue = deque(start)
    while queue and len(keep) < max_nodes:
        v = queue.popleft()
        keep.add(v)
        for u in sorted(preds[v] + succs[v]):
            if u not in seen:
                seen.add(u)
                queue.append(u)
    for v in range(n):            # a disconnected remainder: program order
        if len(keep) >= max_nodes:
            break
        keep.add(v)
    kept = sorted(keep)
    direct: list[tuple[int, int]] = []
    indirect: list[tuple[int, int]] = []
    for u in kept:
        mine = [v for v in succs[u] if v in keep]
        direct += [(u, v) for v in mine]
        # Paths through elided nodes, stopping at the first kept node on each.
        reached: set[int] = set()
        todo = [v for v in succs[u] if v not in keep]
        visited = set(todo)
        while todo:
            x = todo.pop()
            for y in succs[x]:
                if y in keep:
                    reached.add(y)
                elif y not in visited:
                    visited.add(y)
                    todo.append(y)
        indirect += [(u, v) for v in sorted(reached - set(mine))]
    return kept, direct, indirect


# ------------------------------------------------------------------------------ layout

def _layers(n: int, edges: list[tuple[int, int]], sweeps: int = 4):
    """Layers by longest path from the inputs, then barycenter order within each layer.

    Returns the rows (node indices per layer, left to right), provisional x, preds and succs."""
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        preds[b].append(a)
        succs[a].append(b)
    # Kahn's order (HLO text is already topological; this keeps us safe if it were not).
    indeg = [len(p) for p in preds]
    order = [v for v in range(n) if indeg[v] == 0]
    for v in order:
        for s in succs[v]:
            indeg[s] -= 1
            if indeg[s] == 0:
                order.append(s)
    seen = set(order)
    order += [v for v in range(n) if v not in seen]      # cycles cannot occur in HLO
    layer = [0] * n
    for v in order:
        layer[v] = max((layer[p] + 1 for p in preds[v]), default=0)
    # Inputs, and what is computed from inputs alone (a weight's all-gather, its slice), sit
    # just above their first consumer rather than at the top: a train step has dozens of
    # parameters, and most are first read far down the program.
    floating = [False] * n
    for v in order:
        floating[v] = all(floating[p] for p in preds[v])
    for v in reversed(order):
        if floating[v] and succs[v]:
            layer[v] = max(min(layer[s] for s in succs[v]) - 1, 0)
    depth = max(layer, default=-1) + 1
    rows: list[list[int]] = [[] for _ in range(depth)]
    for v in range(n):
        rows[layer[v]].append(v)
    x = [0.0] * n

    def place(row):
        for k, v in enumerate(row):
            x[v] = k - (len(row) - 1) / 2

    for row in rows:
        place(row)
    # Barycenter sweeps, down (by producers) then up (by consumers), to reduce crossings.
    for _ in range(sweeps):
        for rng, nbrs in ((range(1, depth), preds), (range(depth - 2, -1, -1), succs)):
            for k in rng:
                rows[k].sort(key=lambda v, nbrs=nbrs: _bary(x, v, nbrs))
                place(rows[k])
    return rows, layer, x, preds, succs


def _bary(x: list[float], v: int, nbrs: list[list[int]]) -> float:
    return sum(x[u] for u in nbrs[v]) / len(nbrs[v]) if nbrs[v] else x[v]


def _place(rows, layer, x, preds, succs, room) -> list[tuple[float, float]]:
    """x within each row, in pixels of a plot _WIDTH wide: pulled toward the producers so that
    chains run straight, in row order, neighbours at least _NODE_GAP plus their captions
    (`room[v]` = (left, right)) apart, and each row kept inside the plot where it fits."""
    x = [xi * _NODE_GAP for xi in x]
    half = _WIDTH / 2
    for _ in range(2):
        for row in rows:
            want = [_bary(x, v, preds) if preds[v] else _bary(x, v, succs) for v in row]
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
    return [(x[v], float(layer[v])) for v in range(len(x))]


# x is in pixels of a nominal plot width; the view stretches it to the real width.
_WIDTH = 940.0           # px of plot area the layout aims to fill at most
_NODE_GAP = 22.0         # px between neighbouring markers in a row
_CHAR = 6.8              # px per caption character (11-12 px sans-serif)
_SMALL_GRAPH = 40        # up to this many nodes every node is captioned


def _width(caption: str) -> float:
    return len(caption) * _CHAR + 4 if caption else 0.0


def _caption(n: Node, count: int) -> str:
    """Text beside a node: collectives and inputs always; other ops in a small graph, and the
    landmarks (matmuls, nodes running collectives inside) in a big one."""
    if n.role == "collective":
        return n.text
    if n.role == "input":
        return n.label
    if count <= _SMALL_GRAPH:
        return n.text if count <= 12 else n.label
    if n.fused in ("dot", "convolution") or n.opcode in ("dot", "convolution") or n.inner:
        return n.label
    return ""


def dataflow(report: Report, max_nodes: int = 200) -> Graph:
    """The dataflow graph of the per-device program's entry computation."""
    module = parse_module(report.optimized_hlo)
    nodes, preds = _nodes_and_edges(report, module)
    kept, direct, indirect = _elide(nodes, preds, max_nodes)
    new = {old: k for k, old in enumerate(kept)}
    edges = [(new[a], new[b]) for a, b in direct]
    elided_edges = [(new[a], new[b]) for a, b in indirect]
    shown = [nodes[k] for k in kept]
    captions = [_caption(nd, len(shown)) for nd in shown]
    rows, layer, x, preds_k, succs_k = _layers(len(kept), edges + elided_edges)
    # A crowded row keeps its collectives' captions and drops the others' (hover shows them).
    for row in rows:
        for role in ("op", "input"):
            if sum(_NODE_GAP + _width(captions[v]) for v in row) <= _WIDTH:
                break
            for v in row:
                if shown[v].role == role:
                    captions[v] = ""
    room = [(_width(c), 0.0) if nd.role == "input" else (0.0, _width(c))
            for nd, c in zip(shown, captions, strict=True)]
    positions = _place(rows, layer, x, preds_k, succs_k, room)
    notes = []
    outside = [i for i, c in enumerate(report.collectives) if c.computation != module.entry]
    inner = {i for k in kept for i in nodes[k].inner}
    if outside:
        notes.append(f"{len(outside)} collectives run inside called computations "
                     f"({len(inner)} of them under a node shown here)")
    elided = len(nodes) - len(kept)
    if elided:
        notes.append(f"{elided} of {len(nodes)} nodes elided; every collective and its "
                     "neighbours are kept, dotted edges run through elided nodes")
    return Graph(module.entry, tuple(shown), tuple(edges), tuple(elided_edges),
                 tuple(tuple(r) for r in rows), tuple(positions), len(nodes), elided,
                 tuple(notes), tuple(captions))


# ------------------------------------------------------------------------------ view

def _hover(n: Node) -> str:
    def e(text: str) -> str:      # plotly's hover decodes &lt; &gt; &amp; but not &quot;
        return html.escape(text, quote=False)

    line = "<br>".join(e(s) for s in textwrap.wrap(n.hlo, 110, break_on_hyphens=False)[:6])
    head = f"<b>{e(n.text)}</b>"
    if n.role == "collective":
        head += f"<br>{e(n.name)} · {e(n.shape)}"
    rows = [head]
    if n.op_name:
        rows.append(f"op: {e(n.op_name)}")
    if n.source:
        rows.append(f"source: {e(n.source)}")
    if n.fused:
        rows.append(f"fusion {e(n.kind)}, computes {e(n.fused)}")
    if n.inner:
        rows.append(f"runs {len(n.inner)} collectives inside")
    rows.append(f"<span style='font-size:10px'>{line}</span>")
    return "<br>".join(rows)


def _edge_xy(g: Graph, edges) -> tuple[list, list]:
    xs, ys = [], []
    for a, b in edges:
        (xa, ya), (xb, yb) = g.positions[a], g.positions[b]
        xs += [xa, xb, None]
        ys += [ya, yb, None]
    return xs, ys


class GraphView:
    """The dataflow graph of the per-device program as a plotly FigureWidget."""

    def __init__(self, max_nodes: int = 200):
        self.max_nodes = max_nodes
        self.graph: Graph | None = None
        self.fig = self._new_figure()
        self.note = w.HTML()
        self.widget = w.VBox([self.note, self.fig])
        self.widget.add_class("explorer-graph")

    @staticmethod
    def _new_figure() -> go.FigureWidget:
        fig = go.FigureWidget()
        fig.add_scatter(name="dataflow", mode="lines", hoverinfo="skip", showlegend=False,
                        line=dict(color="rgba(120,120,120,0.45)", width=1))
        fig.add_scatter(name="through elided nodes", mode="lines", hoverinfo="skip",
                        line=dict(color="rgba(120,120,120,0.3)", width=1, dash="dot"),
                        showlegend=False)
        fig.add_scatter(name="input", mode="markers+text", textposition="middle left",
                        marker=dict(symbol="square", size=9, color="#8fa6b8"),
                        textfont=dict(size=10, color="#557"),
                        hovertemplate="%{customdata}<extra></extra>")
        fig.add_scatter(name="op", mode="markers+text", textposition="middle right",
                        marker=dict(size=8, color="#9a9a9a"), textfont=dict(size=10, color="#666"),
                        hovertemplate="%{customdata}<extra></extra>")
        for kind in tuple(CollectiveKind):
            fig.add_scatter(name=kind, mode="markers+text", textposition="middle right",
                            marker=dict(size=15, color=KIND_COLOURS[kind], symbol="diamond",
                                        line=dict(color="white", width=1)),
                            textfont=dict(size=12, color=KIND_COLOURS[kind]),
                            hovertemplate="%{customdata}<extra></extra>")
        fig.update_layout(height=400, margin=dict(l=20, r=20, t=50, b=20),
                          plot_bgcolor="white", hoverlabel=dict(align="left", font_size=11),
                          legend=dict(orientation="h", y=1.0, yanchor="bottom", x=1,
                                      xanchor="right"),
                          xaxis=dict(visible=False),
                          yaxis=dict(autorange="reversed", visible=False),
                          title=dict(font=dict(size=13), x=0.01, y=0.995, yanchor="top"))
        keep_state(fig)    # the traces added above, for views created after this
        return fig

    def update(self, report: Report, selected: int | None = None) -> None:
        """Redraw for `report`; `selected` (a collective's index) is drawn larger."""
        g = self.graph = dataflow(report, self.max_nodes)
        # A new figure per program: the graph's nodes change wholesale with the program, and a
        # browser view of the old figure was seen to keep stale data in Voila when redrawn in
        # place (plotly 7); the other views stay in place.
        old, fig = self.fig, self._new_figure()
        with fig.batch_update():
            for trace, edges in ((fig.data[0], g.edges), (fig.data[1], g.elided_edges)):
                trace.x, trace.y = _edge_xy(g, edges)
            groups = [("input", lambda n: n.role == "input"), ("op", lambda n: n.role == "op")]
            groups += [(k, lambda n, k=k: n.role == "collective" and n.kind == k)
                       for k in tuple(CollectiveKind)]
            for trace, (name, test) in zip(fig.data[2:], groups, strict=True):
                idx = [i for i, n in enumerate(g.nodes) if test(n)]
                trace.x = [g.positions[i][0] for i in idx]
                trace.y = [g.positions[i][1] for i in idx]
                trace.customdata = [_hover(g.nodes[i]) for i in idx]
                trace.text = [g.captions[i] for i in idx]
                if name in tuple(CollectiveKind):
                    trace.marker.size = [22 if g.nodes[i].collective == selected else 15
                                         for i in idx]
                    trace.showlegend = bool(idx)
            left, right = g.extent()
            # At least the nominal width, so that a pixel of layout is a pixel on screen and
            # captions (drawn at a fixed size) keep the room the layout gave them.
            pad = max(0.0, _WIDTH - (right - left)) / 2 + 10
            fig.layout.xaxis.range = [left - pad, right + pad]
            fig.layout.yaxis.range = [len(g.layers) - 0.5, -0.8]
            fig.layout.height = min(max(300, 90 + 26 * len(g.layers)), 2400)
            n_coll = len(g.collectives)
            fig.layout.title.text = html.escape(
                f"per-device program ({g.computation}): {len(g.nodes)} nodes, "
                f"{n_coll} collective{'s' if n_coll != 1 else ''}"
                + (f", {g.elided} nodes elided" if g.elided else ""))
        keep_state(fig)
        self.fig = fig
        self.widget.children = (self.note, fig)
        old.close()
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in g.notes)
        self.note.value = (
            "<div class='explorer-graph-note' style='font-size:12px'>Dataflow of the "
            "optimized per-device program, top to bottom; hover a node for its HLO. "
            "Constants and plumbing (get-tuple-element, bitcast, tuple) are folded into edges."
            + (f"<ul>{notes}</ul>" if notes else "") + "</div>")
