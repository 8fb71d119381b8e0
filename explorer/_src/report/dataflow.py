"""The per-device program as a dataflow graph, with its collectives marked. Pure: no plotting.

`dataflow` reads the entry computation of a Report's optimized HLO: one node per instruction
that computes something, one edge per operand. Plumbing (get-tuple-element, bitcast, tuple, the
-done half of an async pair) is collapsed into edges and constants are dropped, so the graph
shows what feeds what. A big program is elided around its collectives. The nodes are then
layered (Sugiyama-style, in pure Python): longest-path layers from the inputs, then barycenter
ordering within each layer to reduce crossings. Where each node is drawn, in pixels, is the
view's business (explorer/_src/ui/graph.py).

It lives in `report`, not `hlo`, because a node is matched to the Report's collectives (their
mesh axes, bytes and source lines), which only the Report knows.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from explorer._src.hlo.module import HloModule, Instruction, parse_module
from explorer._src.report.origins import OriginKind
from explorer._src.report.report import Report, TensorRole
from explorer._src.report.source import source_of
from explorer._src.units import format_bytes

# Instructions that only re-label, re-pack or wait for a value: an edge goes through them.
_PASS_THROUGH = {"get-tuple-element", "bitcast", "tuple", "optimization-barrier", "async-update",
                 "async-done", "domain", "add-dependency"}
# Instructions that read nothing: dropped, with their edges.
_DROPPED = {"constant", "after-all"}
# Attributes that name computations an instruction runs.
_CALL_ATTRS = ("calls", "body", "condition", "branch_computations", "true_computation",
               "false_computation", "to_apply")


class NodeRole(StrEnum):
    INPUT = "input"              # a parameter of the entry computation
    OP = "op"                    # anything that computes, collectives excepted
    COLLECTIVE = "collective"    # one of the Report's collectives
    GROUP = "group"              # collapsed: the nodes of one model layer (or one input's)


@dataclass(frozen=True)
class Node:
    name: str                # the HLO instruction's name
    opcode: str
    role: NodeRole
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
    members: int = 0                     # a group: how many nodes it stands for
    counts: tuple[tuple[str, int], ...] = ()   # a group: its collectives, (kind, count)

    @property
    def text(self) -> str:
        """The node in one line: collectives by kind, axes and bytes; groups by their size and
        collectives; others by label and shape."""
        if self.role == NodeRole.COLLECTIVE:
            parts = f" ×{self.parts}" if self.parts > 1 else ""
            return f"{self.kind}{parts} {','.join(self.axes) or '?'} {format_bytes(self.bytes)}"
        if self.role == NodeRole.GROUP:
            coll = ", ".join(f"{n} {k}" for k, n in self.counts)
            return f"{self.label}: {self.members} nodes" + (f" · {coll}" if coll else "")
        return f"{self.label} {self.shape}"

    @property
    def is_landmark(self) -> bool:
        """A node a reader orients by in a big graph: a matmul, or one running collectives."""
        return (self.fused in ("dot", "convolution") or self.opcode in ("dot", "convolution")
                or bool(self.inner))

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__} | {"text": self.text}


@dataclass(frozen=True)
class Graph:
    computation: str
    nodes: tuple[Node, ...]
    edges: tuple[tuple[int, int], ...]           # (producer, consumer) indices into nodes
    elided_edges: tuple[tuple[int, int], ...]    # paths that ran through elided nodes
    layers: tuple[tuple[int, ...], ...]          # node indices per layer, in drawing order
    total: int                                   # nodes before eliding
    elided: int = 0
    notes: tuple[str, ...] = field(default=())
    # Collapsed only: edges drawn against the layering (a layer's backward pass feeding the
    # layer before it), and for each node the names of the nodes it stands for.
    back_edges: tuple[tuple[int, int], ...] = ()
    groups: tuple[tuple[str, ...], ...] = ()

    def index(self, name: str) -> int:
        for i, n in enumerate(self.nodes):
            if n.name == name:
                return i
        raise KeyError(f"no node {name!r} in the graph of {self.computation}")

    def node(self, name: str) -> Node:
        return self.nodes[self.index(name)]

    def preds(self, i: int) -> list[int]:
        return [a for a, b in self.edges + self.elided_edges + self.back_edges if b == i]

    def succs(self, i: int) -> list[int]:
        return [b for a, b in self.edges + self.elided_edges + self.back_edges if a == i]

    def layer_of(self, i: int) -> int:
        for k, layer in enumerate(self.layers):
            if i in layer:
                return k
        raise KeyError(f"node {i} is in no layer of the graph of {self.computation}")

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

    @property
    def collectives(self) -> list[Node]:
        return [n for n in self.nodes if n.role == NodeRole.COLLECTIVE]

    def render_text(self) -> str:
        names = [n.name for n in self.nodes]
        n_edges = len(self.edges) + len(self.elided_edges) + len(self.back_edges)
        head = (f"dataflow of {self.computation}: {len(self.nodes)} nodes, "
                f"{n_edges} edges, {len(self.layers)} layers")
        if self.elided:
            head += f" ({self.elided} of {self.total} nodes elided)"
        lines = [head]
        indirect = set(self.elided_edges) | set(self.back_edges)
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
                "layers": [list(layer) for layer in self.layers], "total": self.total,
                "elided": self.elided, "notes": list(self.notes),
                "back_edges": [list(e) for e in self.back_edges],
                "groups": [list(m) for m in self.groups]}


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


def input_names(report: Report) -> list[str]:
    """The program's input tensors' names in entry parameter order (parameter i is input i, as
    the Report lists its inputs)."""
    return [t.name for t in report.tensors if t.kind == TensorRole.INPUT]


def _nodes_and_edges(report: Report, module: HloModule):
    """All nodes of the entry computation and their direct producers, plumbing collapsed.

    An entry parameter is labelled by its tensor's name (`l3.wq`), not by the path jax gave its
    argument (`state[4]`); so is an op that only re-lays out one input (a copy of `state[4]`, or
    a copy of that copy, as a donated input gets)."""
    entry = module.computations.get(module.entry, [])
    names = input_names(report)
    by_comp = {(c.computation, c.hlo_name): i for i, c in enumerate(report.collectives)}
    producers: dict[str, tuple[int, ...]] = {}     # instruction -> the nodes its value comes from
    nodes: list[Node] = []
    preds: list[list[int]] = []
    root_sources: tuple[int, ...] = ()
    # The input tensor each input node is, or each op re-lays out (a copy of a copy of a
    # donated parameter is still that parameter).
    tensor_of: dict[int, str] = {}
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
            node = _node(report, module, instr, by_comp)
            if node.role == NodeRole.INPUT:
                number = instr.operand_text.strip()
                if number.isdigit() and int(number) < len(names) and \
                        not instr.shape.startswith("("):
                    node = replace(node, label=names[int(number)])
                tensor_of[len(nodes)] = node.label
            elif node.role == NodeRole.OP and "/" not in node.op_name and len(sources) == 1 \
                    and sources[0] in tensor_of:
                # jax names such an op by the argument's path: say which tensor it is.
                node = replace(node, label=f"{node.kind} of {tensor_of[sources[0]]}")
                tensor_of[len(nodes)] = tensor_of[sources[0]]
            nodes.append(node)
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
                  source=source_of(module, instr), hlo=_hlo_line(instr),
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
        return Node(role=NodeRole.COLLECTIVE, kind=c.kind, label=tail or c.kind,
                    collective=index, axes=c.axes, parts=c.parts,
                    **{**common, "bytes": c.bytes, "source": c.source or common["source"]})
    if instr.opcode == "parameter":
        return Node(role=NodeRole.INPUT, kind="parameter", label=op_name or instr.name, **common)
    fused = ""
    if instr.opcode == "fusion" and called:
        body = module.computations.get(called[0], [])
        fused = next((i.opcode for i in body if i.is_root), "")
    kind = _stem(instr.name) if instr.opcode == "fusion" else instr.opcode
    return Node(role=NodeRole.OP, kind=kind, label=tail or kind, fused=fused, inner=inner,
                **common)


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
    seeds = [i for i, nd in enumerate(nodes) if nd.role == NodeRole.COLLECTIVE or nd.inner]
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


# ------------------------------------------------------------------------------ layering

def neighbours(n: int, edges) -> tuple[list[list[int]], list[list[int]]]:
    """(preds, succs) of nodes 0..n-1 from (producer, consumer) pairs."""
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        preds[b].append(a)
        succs[a].append(b)
    return preds, succs


def centred(row) -> dict[int, float]:
    """Each node of a row at its rank, the row centred on 0: the barycenter sweeps' x."""
    return {v: k - (len(row) - 1) / 2 for k, v in enumerate(row)}


def barycenter(x, v: int, nbrs: list[list[int]]) -> float:
    """The mean x of v's neighbours (v's own x if it has none)."""
    return sum(x[u] for u in nbrs[v]) / len(nbrs[v]) if nbrs[v] else x[v]


def layers(n: int, edges, sweeps: int = 4) -> list[list[int]]:
    """Layers by longest path from the inputs, then barycenter order within each layer.

    Inputs, and what is computed from inputs alone (a weight's all-gather, its slice), sit just
    above their first consumer rather than at the top: a train step has dozens of parameters,
    and most are first read far down the program."""
    preds, succs = neighbours(n, edges)
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
    for row in rows:
        for v, xv in centred(row).items():
            x[v] = xv
    # Barycenter sweeps, down (by producers) then up (by consumers), to reduce crossings.
    for _ in range(sweeps):
        for rng, nbrs in ((range(1, depth), preds), (range(depth - 2, -1, -1), succs)):
            for k in rng:
                rows[k].sort(key=lambda v, nbrs=nbrs: barycenter(x, v, nbrs))
                for v, xv in centred(rows[k]).items():
                    x[v] = xv
    return rows


def dataflow(report: Report, max_nodes: int = 200) -> Graph:
    """The dataflow graph of the per-device program's entry computation, at most `max_nodes`
    nodes (more only where collectives and their neighbours need them)."""
    module = parse_module(report.optimized_hlo)
    nodes, preds = _nodes_and_edges(report, module)
    kept, direct, indirect = _elide(nodes, preds, max_nodes)
    new = {old: k for k, old in enumerate(kept)}
    edges = [(new[a], new[b]) for a, b in direct]
    elided_edges = [(new[a], new[b]) for a, b in indirect]
    shown = [nodes[k] for k in kept]
    rows = layers(len(kept), edges + elided_edges)
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
                 tuple(tuple(r) for r in rows), len(nodes), elided, tuple(notes))



# ------------------------------------------------------------------------------ collapsing

_INDEXED = re.compile(r"[A-Za-z_]*[A-Za-z]_?\d+")
_NAME_PART = re.compile(r"[^./\[\]'\"]+")      # a name's parts, between its separators


def _layer(name: str) -> tuple[str, int, int] | None:
    """The model layer a tensor name places its tensor in, and where its index lies in the
    name (start, end), or None (see layer_of_name)."""
    parts = list(_NAME_PART.finditer(name))
    for k, m in enumerate(parts[:-1]):
        part = m.group()
        if part.isdigit() and k > 0:
            return f"{parts[k - 1].group()}.{part}", m.start(), m.end()
        if _INDEXED.fullmatch(part):
            digits = re.search(r"\d+$", part)
            return part, m.start() + digits.start(), m.end()
    return None


def layer_of_name(name: str) -> str | None:
    """The model layer a tensor name places its tensor in, or None.

    A layer is a container of tensors with an index: `l3` in `l3.wq` and `m.l3.wq` (Adam's
    moment of it), `layers.0` in `layers.0.attn.q.kernel`, `block_2` in `block_2.w`. The indexed
    part must have something below it, so a leaf (`w1`, `layers.ln1`) names a tensor, not a
    layer: a stacked weight of a scanned model (`layers.wq`) has no layer of its own."""
    found = _layer(name)
    return found[0] if found is not None else None


def layer_pattern(name: str) -> str | None:
    """The name with its layer index as `*`, which stands for the same tensor in every layer:
    `layers.*.w_up` for `layers.0.w_up`, `l*.w1` for `l3.w1` (the leaf's 1 is no layer),
    `m.l*.wq` for Adam's moment `m.l3.wq`; None for a name with no layer (see layer_of_name)."""
    found = _layer(name)
    if found is None:
        return None
    _, start, end = found
    return f"{name[:start]}*{name[end:]}"


def matching(pattern: str, names: Iterable[str]) -> list[str]:
    """The names `pattern` (from layer_pattern) matches, `*` being any layer index, in order."""
    regex = re.compile(re.escape(pattern).replace(r"\*", "[0-9]+"))
    return [n for n in names if regex.fullmatch(n)]


def _input_key(name: str, names: set[str]) -> str:
    """The group of an input: its layer; else, for a state tensor named after another input
    (Adam's `m.embed` of `embed`), that input's; else the module path above the tensor
    (`layers` for a scanned model's stacked `layers.wq`), or the name itself at top level."""
    layer = layer_of_name(name)
    if layer:
        return layer
    parts = name.split(".")
    for k in range(1, len(parts)):
        if ".".join(parts[k:]) in names:
            parts = parts[k:]
            break
    return ".".join(parts[:-1]) or ".".join(parts)


def _nearest_anchors(n: int, preds: list[list[int]], anchors: dict[int, str],
                     layered: set[str]) -> list[set[str]]:
    """For each node, the keys of the anchors nearest to it along edges taken either way
    (breadth first from every anchor at once). A node as near to two layers passes nothing on:
    a hub (partition-id, a combined all-reduce) would otherwise make every node a tie."""
    nbrs: list[list[int]] = [[] for _ in range(n)]
    for v, ps in enumerate(preds):
        for p in ps:
            nbrs[v].append(p)
            nbrs[p].append(v)
    dist = [-1] * n
    near: list[set[str]] = [set() for _ in range(n)]
    frontier = sorted(anchors)
    for v in frontier:
        dist[v], near[v] = 0, {anchors[v]}
    d = 0
    while frontier:
        nxt: list[int] = []
        for u in frontier:
            if len(near[u] & layered) > 1:
                continue
            for v in nbrs[u]:
                if dist[v] == -1:
                    dist[v] = d + 1
                    nxt.append(v)
                if dist[v] == d + 1:
                    near[v] |= near[u]
        frontier, d = nxt, d + 1
    return near


def _group_keys(nodes: list[Node], preds: list[list[int]]) -> list[str | None]:
    """Each node's group: its layer where one is found, else the input it is nearest to; None
    for a node as near to two layers as to either (the combined gradient all-reduce of a train
    step, which every layer's update reads), which stays a node of its own."""
    inputs = {i: nd.label for i, nd in enumerate(nodes) if nd.role == NodeRole.INPUT}
    anchors = {i: _input_key(name, set(inputs.values())) for i, name in inputs.items()}
    layered = {k for k in anchors.values() if layer_of_name(k + ".x") == k}
    order = {k: i for i, k in enumerate(dict.fromkeys(anchors[i] for i in sorted(anchors)))}
    out: list[str | None] = []
    for i, near in enumerate(_nearest_anchors(len(nodes), preds, anchors, layered)):
        if i in anchors:
            out.append(anchors[i])
            continue
        mine = near & layered
        if len(mine) == 1:
            out.append(next(iter(mine)))
        elif mine or not near:
            out.append(None)
        else:
            out.append(min(near, key=order.__getitem__))
    return out


def _counts(kinds: list[str]) -> tuple[tuple[str, int], ...]:
    seen: dict[str, int] = {}
    for k in kinds:
        seen[k] = seen.get(k, 0) + 1
    return tuple(sorted(seen.items()))


def collapsed(report: Report) -> Graph:
    """The dataflow graph with the nodes of each model layer collapsed into one node.

    A node belongs to the layer of the inputs nearest to it in the graph (a layer is read off
    its tensors' names, see layer_of_name): a layer's forward ops, its backward ops and its
    optimizer update all read that layer's weights or sit next to ops that do. Nodes nearest to
    an input outside any layer (the embedding, the loss) are grouped under that input's name. A
    node as near to two layers stays itself, so a collective shared by the layers is drawn.
    Edges are aggregated; a group is layered by its first op in program order, and an edge
    against that order (backward into the layer before) is a back edge."""
    module = parse_module(report.optimized_hlo)
    nodes, preds = _nodes_and_edges(report, module)
    keys = _group_keys(nodes, preds)
    members: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        members.setdefault(k if k is not None else f"\0{i}", []).append(i)
    # One drawn node per group, in the program order of their first op (inputs all come first
    # in the entry computation, so an input-only group goes by its input).
    def first(ms: list[int]) -> tuple[int, int]:
        ops = [i for i in ms if nodes[i].role != NodeRole.INPUT]
        return (0, min(ops)) if ops else (1, min(ms))

    groups = sorted(members.values(), key=first)
    new = {i: g for g, ms in enumerate(groups) for i in ms}
    shown: list[Node] = []
    for ms in groups:
        if len(ms) == 1:
            shown.append(nodes[ms[0]])
            continue
        key = keys[ms[0]]
        coll = [nodes[i] for i in ms if nodes[i].role == NodeRole.COLLECTIVE]
        inner = sorted({c for i in ms for c in nodes[i].inner}
                       | {nd.collective for nd in coll if nd.collective is not None})
        kinds = [nd.kind for nd in coll] + [report.collectives[c].kind for i in ms
                                            for c in nodes[i].inner]
        shown.append(Node(
            name=key, opcode="group", role=NodeRole.GROUP, kind="group", label=key,
            shape=f"{len(ms)} nodes", members=len(ms), counts=_counts(kinds),
            inner=tuple(inner), is_output=any(nodes[i].is_output for i in ms),
            bytes=sum(nodes[i].bytes for i in ms if nodes[i].role == NodeRole.COLLECTIVE),
            op_name=", ".join(sorted({nodes[i].label for i in ms
                                      if nodes[i].role == NodeRole.INPUT})[:12])))
    edges: set[tuple[int, int]] = set()
    for v, ps in enumerate(preds):
        for p in ps:
            if new[p] != new[v]:
                edges.add((new[p], new[v]))
    forward = sorted((a, b) for a, b in edges if a < b)
    back = sorted((a, b) for a, b in edges if a > b)
    rows = layers(len(shown), forward)
    n_layers = len({k for k in keys if k is not None and layer_of_name(k + ".x") == k})
    notes = [f"{len(nodes)} nodes collapsed into {len(shown)}: {n_layers} model layers, found "
             "from the tensors' names (l3.wq, layers.0.kernel); ops sit with the inputs nearest "
             "to them; a node as near to two layers stays itself"]
    if back:
        notes.append(f"{len(back)} edges run upward (a layer's gradient into the layer before)")
    if not n_layers:
        notes.append("no tensor name carries a layer index: nodes are grouped by the input "
                     "nearest to them (a scanned model's layers run inside its while node)")
    return Graph(module.entry, tuple(shown), tuple(forward), (), tuple(tuple(r) for r in rows),
                 len(nodes), 0, tuple(notes), tuple(back),
                 tuple(tuple(nodes[i].name for i in ms) for ms in groups))


# ------------------------------------------------------------------------------ slicing

# Instructions a value passes through unchanged on its way to a slice.
_RELABEL = {"get-tuple-element", "bitcast", "copy"}


def sliced_all_reduces(report: Report) -> dict[int, tuple[int, int]]:
    """All-reduces whose result is only ever sliced, as {collective index: (parts sliced,
    parts)}. A part is sliced when each use is a dynamic-slice of it, directly or as the first
    step of a fusion (through bitcasts and copies); a combined (tuple) all-reduce counts its
    parts one by one. Such a pair does the work of a reduce-scatter: the CPU backend never forms
    reduce-scatter and writes it this way, where a TPU or GPU compile would not."""
    module = parse_module(report.optimized_hlo)
    users: dict[tuple[str, str], list[tuple[Instruction, int]]] = {}
    for comp, instrs in module.computations.items():
        for instr in instrs:
            for position, operand in enumerate(instr.operands):
                users.setdefault((comp, operand), []).append((instr, position))

    def parameter(comp: str, index: int) -> str | None:
        return next((i.name for i in module.computations.get(comp, [])
                     if i.opcode == "parameter" and i.operand_text.strip() == str(index)), None)

    def only_sliced(comp: str, name: str, depth: int = 0) -> bool:
        uses = users.get((comp, name), [])
        if not uses or depth > 6:
            return False
        for user, position in uses:
            if user.opcode == "dynamic-slice" and position == 0:
                continue
            if user.opcode in _RELABEL and only_sliced(comp, user.name, depth + 1):
                continue
            called = _called(user) if user.opcode == "fusion" else []
            inner = parameter(called[0], position) if called else None
            if inner is not None and only_sliced(called[0], inner, depth + 1):
                continue
            return False
        return True

    out = {}
    for i, c in enumerate(report.collectives):
        if c.kind != "all-reduce":
            continue
        if c.parts == 1:
            sliced = int(only_sliced(c.computation, c.hlo_name))
        else:
            # Parts are read through get-tuple-elements (`index=k`), perhaps several per part.
            readers: dict[str, list[str]] = {}
            for u, _ in users.get((c.computation, c.hlo_name), []):
                if u.opcode == "get-tuple-element":
                    readers.setdefault(u.attr("index") or "", []).append(u.name)
            sliced = sum(all(only_sliced(c.computation, name) for name in names)
                         for names in readers.values())
        if sliced:
            out[i] = (sliced, c.parts)
    return out


# ------------------------------------------------------------------------------ origin paths

def _path_keys(report: Report, tensor: str) -> list[tuple[str, str]]:
    """What `tensor`'s origins name, in the order its paths go, as keys a node of the
    per-device program is found by: ("input", name) for an input an axis came from, and
    (op_name, line) for each op an axis propagated through and for the op that made the tensor
    (an op is named by its propagated-HLO instruction, whose metadata the optimized module's
    instructions keep where they compute the same)."""
    origins = report.tensor(tensor).origins
    propagated = parse_module(report.propagated_hlo) if report.propagated_hlo else None
    by_name = {h.name: h for h in propagated.instructions()} if propagated else {}

    def op_key(name: str) -> tuple[str, str] | None:
        h = by_name.get(name)
        return (h.op_name, source_of(propagated, h)) if h is not None and h.op_name else None

    keys: list[tuple[str, str] | None] = []
    for dim in origins.dims:
        for axis in dim.axes:
            if axis.kind == OriginKind.INPUT:
                keys.append(("input", axis.name))
            keys += [op_key(step.tensor) for step in axis.path]
    if origins.dims:
        keys.append(("input", tensor) if tensor in input_names(report) else op_key(tensor))
    return [k for k in dict.fromkeys(keys) if k is not None]


def _instruction_keys(report: Report, module: HloModule) -> dict[str, set[tuple[str, str]]]:
    """Each entry instruction of the per-device program -> the keys of _path_keys it holds:
    its own op_name and line and those of every instruction it calls (a fusion's, a loop's
    body), and for a parameter its input's name."""
    names = input_names(report)
    out: dict[str, set[tuple[str, str]]] = {}
    for instr in module.computations.get(module.entry, []):
        keys: set[tuple[str, str]] = set()
        number = instr.operand_text.strip()
        if instr.opcode == "parameter" and number.isdigit() and int(number) < len(names):
            keys.add(("input", names[int(number)]))
        called = _reachable_computations(module, _called(instr))
        for h in [instr, *(h for c in sorted(called) for h in module.computations[c])]:
            if h.op_name:
                keys.add((h.op_name, source_of(module, h)))
        out[instr.name] = keys
    return out


def origin_path(report: Report, graph: Graph, tensor: str) -> tuple[int, ...]:
    """The nodes of `graph` (every op, or one per layer) on the path `tensor`'s layout came
    along, in the order it goes: the inputs its mesh axes came from, the ops they propagated
    through (explorer._src.report.origins; a fusion or loop holding such an op is on the path, a
    layer's group holding one is) and the op that made the tensor. () where the report read no
    origins for it (asked without origins=True, or under GSPMD)."""
    keys = _path_keys(report, tensor)
    if not keys:
        return ()
    held = _instruction_keys(report, parse_module(report.optimized_hlo))
    members = graph.groups or tuple((n.name,) for n in graph.nodes)
    node_keys = [set().union(*(held.get(m, set()) for m in ms)) for ms in members]
    out: list[int] = []
    for key in keys:
        out += [i for i, ks in enumerate(node_keys) if key in ks and i not in out]
    return tuple(out)


def path_edges(graph: Graph, path: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """The edges of `graph` between two nodes of `path` (drawn, elided and backward ones)."""
    on = set(path)
    return tuple(e for e in graph.edges + graph.elided_edges + graph.back_edges
                 if e[0] in on and e[1] in on)
