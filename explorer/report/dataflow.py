"""The per-device program as a dataflow graph, with its collectives marked. Pure: no plotting.

`dataflow` reads the entry computation of a Report's optimized HLO: one node per instruction
that computes something, one edge per operand. Plumbing (get-tuple-element, bitcast, tuple, the
-done half of an async pair) is collapsed into edges and constants are dropped, so the graph
shows what feeds what. A big program is elided around its collectives. The nodes are then
layered (Sugiyama-style, in pure Python): longest-path layers from the inputs, then barycenter
ordering within each layer to reduce crossings. Where each node is drawn, in pixels, is the
view's business (explorer/ui/graph.py).

It lives in `report`, not `hlo`, because a node is matched to the Report's collectives (their
mesh axes, bytes and source lines), which only the Report knows.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field, replace
from enum import StrEnum

from explorer.hlo.module import HloModule, Instruction, parse_module
from explorer.report.report import Report
from explorer.report.source import source_of
from explorer.report.summary import human_bytes

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

    @property
    def text(self) -> str:
        """The node in one line: collectives by kind, axes and bytes; others by label, shape."""
        if self.role == NodeRole.COLLECTIVE:
            parts = f" ×{self.parts}" if self.parts > 1 else ""
            return f"{self.kind}{parts} {','.join(self.axes) or '?'} {human_bytes(self.bytes)}"
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
                "layers": [list(layer) for layer in self.layers], "total": self.total,
                "elided": self.elided, "notes": list(self.notes)}


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


def _nodes_and_edges(report: Report, module: HloModule):
    """All nodes of the entry computation and their direct producers, plumbing collapsed."""
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
