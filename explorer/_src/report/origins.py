"""Why every tensor is laid out as it is: for each dimension and each mesh axis that splits it,
where Shardy's propagation took the axis from (an input, an output, a sharding constraint, a
shard_map) and the ops it travelled through, each with its line of code; for a dimension left
whole, where an axis that could have split it was dropped; and where two layouts met at an op
and which one won. Pure: text in, frozen data out.

Read from Shardy's after-propagation module (explorer._src.hlo.mlir: `sdy.sharding_origins` and
`sdy.propagation_edges`), whose values are found in the propagated HLO
(explorer._src.hlo.mlir_match)
for the user's names and lines. GSPMD keeps no such record, so under it there are none.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum

from explorer._src.compile.protocol import Partitioner
from explorer._src.hlo.mlir import Function, MlirError, Op, Value, parse_mlir
from explorer._src.hlo.mlir_match import match_values
from explorer._src.hlo.module import HloModule, Instruction, short_path
from explorer._src.report.source import source_of
from explorer._src.report.why.metadata import constraint_point, primitive

GSPMD_NOTE = ("origins are not available under GSPMD: only Shardy records where each axis of "
              "a layout came from (compile with partitioner='shardy')")
NOT_IN_MODULE = "Shardy's module has no value for this tensor, so its origins are not known"
NOT_ASKED = ("origins were not read: analyze with origins=True (the CLI's --why-layout or "
             "--origins) to read why each tensor is laid out so; it costs about a tenth more "
             "of an analysis")


class OriginKind(StrEnum):
    """What set a mesh axis of a layout. A StrEnum: it writes to JSON as its code."""

    INPUT = "input"              # an input's spec
    OUTPUT = "output"            # an output's sharding, or a jit's out_shardings inside it
    CONSTRAINT = "constraint"    # a sharding constraint in the program
    SHARD_MAP = "shard_map"      # a shard_map's in_specs or out_specs
    UNKNOWN = "unknown"          # Shardy named an origin this reader does not know


@dataclass(frozen=True)
class PathStep:
    """One op a mesh axis propagated through on its way to the tensor.

    Attributes:
        op: the jax primitive (``dot_general``), or the HLO opcode where the metadata is silent.
        tensor: the Report's name of the op's result (an intermediate's HLO name).
        source: ``file.py:14`` (``In [3], line 2``) of the op; "" where unknown.
        step: Shardy's propagation step that moved the axis there.
    """

    op: str
    tensor: str
    source: str
    step: int


@dataclass(frozen=True)
class AxisOrigin:
    """Where one mesh axis of one dimension came from.

    Attributes:
        axis: the mesh axis.
        kind: input, output, constraint or shard_map.
        name: the input's or output's name, the constraint's point (or the jax op that made
            it), ``shard_map``.
        source: the line of a constraint or shard_map; "" for an input or output.
        path: the ops the axis went through from there to the tensor, in order.
        shardy: Shardy's own words for the origin (``input: 1``, ``constraint_0``, ``self``).
    """

    axis: str
    kind: OriginKind
    name: str
    source: str = ""
    path: tuple[PathStep, ...] = ()
    shardy: str = ""

    def phrase(self, home: str = "") -> str:
        """Where the axis came from, as a clause: `input `w1``, `the sharding constraint `h`
        at line 15` (`line N` in the file `home`, else `file.py:N`)."""
        if self.kind is OriginKind.INPUT:
            return f"input `{self.name}`"
        line = _source_at(self.source, home)
        if self.kind is OriginKind.OUTPUT:
            return (f"the out_shardings of `{self.name}` {line}".rstrip() if self.source
                    else f"output `{self.name}`'s sharding")
        if self.kind is OriginKind.CONSTRAINT:
            named = f"`{self.name}` " if self.name else ""
            return f"the sharding constraint {named}{line}".rstrip()
        if self.kind is OriginKind.SHARD_MAP:
            return f"the shard_map's {self.name} {line}".rstrip()
        return f"Shardy's origin {self.shardy!r}"


@dataclass(frozen=True)
class LayoutConflict:
    """Two layouts that met on one dimension at an op, and which one the result kept.

    Attributes:
        op: the jax primitive where they met.
        tensor: the Report's name of its result.
        source: its line of code.
        dim: the dimension of the result they disagree on.
        candidates: each operand's split of it and where that came from, as text.
        winner: the mesh axes the result kept ("" when neither: the dimension stays whole).
        text: the sentence.
        origins: where each candidate came from, one per candidate (the why reader names the
            inputs among them without reading the text).
    """

    op: str
    tensor: str
    source: str
    dim: int
    candidates: tuple[str, ...]
    winner: str
    text: str
    origins: tuple[AxisOrigin, ...] = ()


@dataclass(frozen=True)
class DimOrigin:
    """Why one dimension is split as it is (or left whole).

    Attributes:
        dim: the dimension.
        axes: one origin per mesh axis that splits it, major first; () when it is whole.
        dropped: for a whole dimension, where an axis that could have split it was dropped,
            or that none reaches it.
        text: the sentence, e.g. "dim 1 split over `model` because input `w1` is, through
            `dot_general` at line 14".
    """

    dim: int
    axes: tuple[AxisOrigin, ...]
    dropped: str
    text: str


@dataclass(frozen=True)
class Origins:
    """Why a tensor is laid out as it is, one entry per dimension; `note` says why there are
    none (GSPMD, or a tensor Shardy's module does not have).

    Attributes:
        dims: per dimension, its axes' origins or why it is whole.
        conflicts: where layouts met at the op that made the tensor.
        note: why `dims` is empty; "" when it is read.
    """

    dims: tuple[DimOrigin, ...] = ()
    conflicts: tuple[LayoutConflict, ...] = ()
    note: str = ""

    @property
    def text(self) -> str:
        """The sentences, one per dimension (and per conflict), or the note."""
        if not self.dims:
            return self.note
        return "\n".join([d.text for d in self.dims] + [c.text for c in self.conflicts])

    def to_dict(self) -> dict:
        return {**asdict(self), "text": self.text}


def unavailable(note: str) -> Origins:
    return Origins(note=note)


# -- where the lines are -----------------------------------------------------------------------

@dataclass(frozen=True)
class _Site:
    op: str
    tensor: str
    file: str
    line: int
    source: str


def _at(site: _Site | None, home: str) -> str:
    """`at line 12` in the home file (a notebook cell: the same cell), else `at f.py:12`."""
    if site is None or not site.line:
        return ""
    if site.file == home:
        return f"at line {site.line}"
    return f"at {site.source}" if site.source else ""


# -- the reader --------------------------------------------------------------------------------

_INPUT = re.compile(r"input: (\d+)$")
_OUTPUT = re.compile(r"output: (\d+)$")
_SHARD_MAP = re.compile(r"(mc_\d+)_(input|output): (\d+)$")
_SHOWN_GROUPS = 4           # lines of a path a sentence names before it says "and N more"


class _OriginsReader:
    def __init__(self, fn: Function, module: HloModule, inputs: Sequence[str],
                 outputs: Sequence[str]):
        self.fn = fn
        self.module = module
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.values, self.ops = match_values(fn, module)
        self.by_origin_name: dict[str, Op] = {}
        self.users: dict[int, list[tuple[Op | None, int]]] = {}
        self.arrivals: dict[tuple[int, str], tuple[int, Op | None, Value]] = {}
        self.arg_index = {id(a): k for k, a in enumerate(fn.arguments)}
        self.sites: dict[int, _Site | None] = {}
        self.result_index = {id(r): k for k, r in enumerate(fn.results)}
        for op in fn.walk():
            if op.origin_name:
                self.by_origin_name.setdefault(op.origin_name, op)
            for k, operand in enumerate(op.operands):
                self.users.setdefault(id(operand), []).append((op, k))
            for e in op.edges:
                self._arrive(e, op, lambda ref, op=op: _endpoint(op, ref))
            for r, edges in enumerate(op.result_edges):
                for e in edges:
                    self._arrive(e, op, lambda ref, op=op, r=r: _flow_endpoint(op, r, ref))
        for k, edges in enumerate(fn.result_edges):
            for e in edges:
                self._arrive(e, None, lambda ref, k=k: (fn.returned[k] if ref.startswith(
                    "operand") else fn.results[k]))
        for k, v in enumerate(fn.returned):
            self.users.setdefault(id(v), []).append((None, k))
        # Where sentences about inputs and outputs say `line N`: the file most of the
        # program's instructions come from.
        files = Counter(src[0] for h in module.instructions() if (src := module.source(h)))
        self.default_home = files.most_common(1)[0][0] if files else ""
        self._index_factors()

    def _arrive(self, e, op: Op | None, endpoint) -> None:
        source = endpoint(e.source)
        if source is None:
            return
        for t in e.targets:
            target = endpoint(t)
            if target is None or target is source:
                continue
            key = (id(target), e.axis)
            if key not in self.arrivals or self.arrivals[key][0] > e.step:
                self.arrivals[key] = (e.step, op, source)

    # -- names and lines ---------------------------------------------------------------------

    def instr(self, v: Value) -> Instruction | None:
        return self.values.get(id(v))

    def site(self, op: Op | None) -> _Site | None:
        """The op's jax name, Report tensor and line, read once per op."""
        if op is None:
            return None
        if id(op) not in self.sites:
            h = self.ops.get(id(op))
            src = self.module.source(h) if h is not None else None
            self.sites[id(op)] = None if h is None else _Site(
                primitive(h.op_name) or h.opcode, h.name, src[0] if src else "",
                src[1] if src else 0, source_of(self.module, h))
        return self.sites[id(op)]

    def tensor_name(self, v: Value) -> str:
        if id(v) in self.arg_index:
            k = self.arg_index[id(v)]
            return self.inputs[k] if k < len(self.inputs) else v.name
        if id(v) in self.result_index:
            k = self.result_index[id(v)]
            return self.outputs[k] if k < len(self.outputs) else v.name
        h = self.instr(v)
        return h.name if h is not None else ""

    def described(self, v: Value, home: str) -> str:
        """A value as a sentence names it: `input `x``, ``dot_general` at line 3`."""
        if id(v) in self.arg_index:
            return f"input `{self.tensor_name(v)}`"
        if id(v) in self.result_index:
            return f"output `{self.tensor_name(v)}`"
        site = self.site(v.op)
        return f"`{site.op}` {_at(site, home)}".rstrip() if site else "a value"

    # -- origins -----------------------------------------------------------------------------

    def origin(self, v: Value, axis: str) -> AxisOrigin:
        text = v.origins.get(axis, "")
        kind, name, source = self._describe(v, text)
        return AxisOrigin(axis, kind, name, source, self.path(v, axis), text)

    def _describe(self, v: Value, text: str) -> tuple[OriginKind, str, str]:
        if text == "self" or not text:
            if id(v) in self.arg_index:
                return OriginKind.INPUT, self.tensor_name(v), ""
            if id(v) in self.result_index:
                return OriginKind.OUTPUT, self.tensor_name(v), ""
            if v.op is not None and v.op.short == "manual_computation":
                return OriginKind.SHARD_MAP, "out_specs", self._source(v.op)
            if v.op is not None and v.op.origin_name:
                return self._named(v.op.origin_name)
            return OriginKind.UNKNOWN, text, ""
        if m := _INPUT.match(text):
            k = int(m.group(1))
            return OriginKind.INPUT, self.inputs[k] if k < len(self.inputs) else text, ""
        if m := _OUTPUT.match(text):
            k = int(m.group(1))
            return OriginKind.OUTPUT, self.outputs[k] if k < len(self.outputs) else text, ""
        if m := _SHARD_MAP.match(text):
            op = self.by_origin_name.get(m.group(1))
            specs = "in_specs" if m.group(2) == "input" else "out_specs"
            return OriginKind.SHARD_MAP, specs, self._source(op)
        if text in self.by_origin_name:
            return self._named(text)
        return OriginKind.UNKNOWN, text, ""

    def _named(self, origin_name: str) -> tuple[OriginKind, str, str]:
        op = self.by_origin_name.get(origin_name)
        h = self.ops.get(id(op)) if op is not None else None
        if op is not None and op.short == "manual_computation":
            return OriginKind.SHARD_MAP, "shard_map", self._source(op)
        if h is None:
            return OriginKind.CONSTRAINT, origin_name, ""
        point = constraint_point(h.op_name)
        if point is None and op.operands and id(op.operands[0]) in self.arg_index:
            # Not the program's constraint: XLA pins an input it hands to a loop with an open
            # one, which Shardy then names as the input's origin too.
            return OriginKind.INPUT, self.tensor_name(op.operands[0]), ""
        if point is None and primitive(h.op_name).startswith("jit("):
            # A jit inside the program pins its results' layouts (its out_shardings).
            return OriginKind.OUTPUT, primitive(h.op_name), source_of(self.module, h)
        # A named constraint point (`layer0`), else "" for the program's unnamed one, else the
        # jax op that pinned the layout.
        name = point.strip(" `") if point is not None else (primitive(h.op_name) or h.name)
        return OriginKind.CONSTRAINT, name, source_of(self.module, h)

    def _source(self, op: Op | None) -> str:
        h = self.ops.get(id(op)) if op is not None else None
        return source_of(self.module, h) if h is not None else ""

    def path(self, v: Value, axis: str) -> tuple[PathStep, ...]:
        hops = []
        seen = {id(v)}
        cur = v
        while (arrival := self.arrivals.get((id(cur), axis))) is not None and len(hops) < 256:
            step, op, src = arrival
            site = self.site(op)
            # The op that is the origin (a constraint moving the axis off its own result) is
            # not a hop on the way.
            if site is not None and not (src.op is op and op.origin_name) and (
                    site.line or self.ops[id(op)].opcode != "copy"):
                # (a copy with no line of code is XLA's of an input, not the program's op)
                hops.append(PathStep(site.op, site.tensor, site.source, step))
            if id(src) in seen:
                break
            seen.add(id(src))
            cur = src
        return tuple(reversed(hops))

    # -- whole dimensions --------------------------------------------------------------------

    def _index_factors(self) -> None:
        """Per value, the ops that make or use it with the factors of each of its dimensions
        there; per op, each factor's (value, dim) pairs."""
        self.places: dict[int, list[tuple[Op, tuple[frozenset[str], ...]]]] = {}
        self.factors: dict[int, dict[str, list[tuple[Value, int]]]] = {}
        for op in self.fn.walk():
            rule = op.rule
            if rule is None:
                continue
            index: dict[str, list[tuple[Value, int]]] = {}
            for table, values in ((rule.operands, op.operands), (rule.results, op.results)):
                for value, dims in zip(values, table, strict=False):
                    sets = tuple(frozenset(fs) for fs in dims)
                    self.places.setdefault(id(value), []).append((op, sets))
                    for e, fs in enumerate(sets):
                        for f in fs:
                            index.setdefault(f, []).append((value, e))
            self.factors[id(op)] = index
        self.members_of: dict[tuple[int, int], list] = {}
        self.nearest: dict[tuple[int, int], tuple] | None = None

    def _members(self, v: Value, d: int) -> list[tuple[Op, Value, int, tuple[str, ...]]]:
        """The (op, value, dim, factors) that share a factor with dim `d` of `v` at each op
        that makes or uses it."""
        key = (id(v), d)
        if key in self.members_of:
            return self.members_of[key]
        out = []
        for op, sets in self.places.get(id(v), ()):
            if d >= len(sets) or not sets[d]:
                continue
            index = self.factors[id(op)]
            seen = set()
            for f in sorted(sets[d]):
                for other, e in index.get(f, ()):
                    if other is not v and (id(other), e) not in seen:
                        seen.add((id(other), e))
                        out.append((op, other, e, tuple(sorted(sets[d]))))
        self.members_of[key] = out
        return out

    def whole(self, v: Value, d: int) -> str:
        """Why dim `d` of `v` is split by no axis: where the nearest axis that splits a
        matching dimension stops, or that none does."""
        if self.nearest is None:
            self.nearest = self._nearest_splits()
        found = self.nearest.get((id(v), d))
        pinned = self._pinned_whole(v, d)
        if pinned:
            return pinned
        if id(v) in self.arg_index:
            # jax fixes an input's layout to its spec: propagation never changes it.
            reach = f" ({self._dropped(v, *found)})" if found else ""
            return f"its spec leaves it whole{reach}"
        if found is None:
            return "no input, output or sharding constraint splits it"
        return self._dropped(v, *found)

    def _nearest_splits(self) -> dict[tuple[int, int], tuple]:
        """For each whole dimension (value, dim) that a chain of matching whole dimensions
        links to a split one: (the whole dimension next to it, the op between them, the split
        value, its axes there, the shared factors). One search from every split dimension at
        once, outwards through whole ones, so the nearest is found for all."""
        found: dict[tuple[int, int], tuple] = {}
        todo: deque[tuple[Value, int]] = deque()
        values = [*self.fn.arguments]
        for op in self.fn.walk():
            values += op.results
            for args in op.region_args:
                values += args
        for v in values:
            for d in range(len(_split(v))):
                if _axes(v, d):
                    continue
                for op, other, e, factors in self._members(v, d):
                    axes = _axes(other, e)
                    if axes:
                        found[(id(v), d)] = (v, op, other, axes, factors)
                        todo.append((v, d))
                        break
        while todo:
            v, d = todo.popleft()
            for _, other, e, _ in self._members(v, d):
                key = (id(other), e)
                if key not in found and not _axes(other, e) and e < len(_split(other)):
                    found[key] = found[(id(v), d)]
                    todo.append((other, e))
        return found

    def _pinned_whole(self, v: Value, d: int) -> str:
        """"" unless a constraint or a shard_map's in_specs ask dim `d` of `v` whole."""
        home = self.home(v)
        if v.op is not None and v.op.short in ("reshard", "sharding_constraint") and \
                v.op.origin_name:
            kind, name, source = self._named(v.op.origin_name)
            if kind in (OriginKind.CONSTRAINT, OriginKind.OUTPUT):
                o = AxisOrigin("", kind, name, source)
                return f"{o.phrase(home)} {_asks(o)} it whole"
        for op, k in self.users.get(id(v), ()):
            if op is not None and op.short == "manual_computation" and k < len(op.in_splits):
                split = op.in_splits[k]
                if split is not None and d < len(split) and not split[d]:
                    o = AxisOrigin("", OriginKind.SHARD_MAP, "in_specs", self._source(op))
                    return f"{o.phrase(home)} ask it whole"
        return ""

    def _dropped(self, v: Value, cur: Value, op: Op, other: Value, axes: tuple[str, ...],
                 factors: tuple[str, ...]) -> str:
        """`axes` split `other`, which shares a factor with `cur` at `op`, but not `v`."""
        home = self.home(v)
        site = self.site(op)
        at = f"`{site.op}` {_at(site, home)}".rstrip() if site else f"`{op.short}`"
        origin = self.origin(other, axes[0])
        own = origin.kind is OriginKind.INPUT and self.tensor_name(other) == origin.name
        source = "" if own else f" (from {origin.phrase(home)})"
        stop = "there" if other.op is op else f"at {at}"
        text = (f"{_axes_text(axes)} {'split' if len(axes) > 1 else 'splits'} the matching "
                f"dimension of "
                f"{self.described(other, home)}{source} but stops {stop}")
        if id(v) in self.arg_index:
            return text
        rule = op.rule
        blocked = set(factors) & (rule.need_replication | rule.blocked) if rule else set()
        used = [k for k, ax in enumerate(_split(v)) if set(ax) & set(axes)]
        rivals = self._rivals(op, factors, axes)
        if blocked:
            why = "it needs that dimension whole"
        elif used:
            why = (f"{_axes_text(axes)} already splits dim {used[0]} of this tensor, and an "
                   "axis splits one dimension only")
        elif rivals:
            why = f"there it meets {rivals}, and neither wins"
        else:
            why = "Shardy propagated it no further"
        return f"{text}: {why}"

    def _rivals(self, op: Op, factors: tuple[str, ...], axes: tuple[str, ...]) -> str:
        """Other splits of the same factor at `op` than `axes`, with their origins."""
        rule = op.rule
        if rule is None:
            return ""
        out = []
        for table, values in ((rule.operands, op.operands), (rule.results, op.results)):
            for j, value in enumerate(values):
                if j >= len(table):
                    continue
                for e, fs in enumerate(table[j]):
                    other = _axes(value, e)
                    if set(fs) & set(factors) and other and other != axes:
                        o = self.origin(value, other[0])
                        out.append(f"{_axes_text(other)} from {o.phrase('')}")
        return "; ".join(dict.fromkeys(out))

    def home(self, v: Value) -> str:
        h = self.instr(v)
        src = self.module.source(h) if h is not None else None
        return src[0] if src else self.default_home

    # -- conflicts ---------------------------------------------------------------------------

    def conflicts(self, v: Value) -> tuple[LayoutConflict, ...]:
        """Where the operands of the op that made `v` disagree on a dimension of it."""
        op = v.op
        if op is None or op.rule is None or v.index >= len(op.rule.results):
            return ()
        out = []
        site = self.site(op)
        for d, factors in enumerate(op.rule.results[v.index]):
            seen: dict[tuple[str, ...], Value] = {}
            for k, operand in enumerate(op.operands):
                if k >= len(op.rule.operands):
                    break
                for e, fs in enumerate(op.rule.operands[k]):
                    if set(fs) & set(factors) and (axes := _axes(operand, e)):
                        seen.setdefault(axes, operand)
            if len(seen) < 2:
                continue
            kept = _axes(v, d)
            home = self.home(v)
            came = tuple(self.origin(o, axes[0]) for axes, o in seen.items())
            candidates = tuple(f"{_axes_text(axes)} from {origin.phrase(home)}"
                               for axes, origin in zip(seen, came, strict=True))
            text = (f"dim {d}: at `{site.op if site else op.short}` "
                    f"{_at(site, home)} ".replace("  ", " ") +
                    f"its operands disagree ({'; '.join(candidates)}); ")
            if kept and kept in seen:
                mine = self.origin(v, kept[0])
                text += (f"{_axes_text(kept)} won, as {mine.phrase(home)} "
                         f"{'is' if mine.kind is OriginKind.INPUT else _asks(mine)}"
                         f"{self._why_won(v, op, kept, seen)}")
            else:
                text += ("neither won: Shardy leaves a dimension whole where its operands "
                         "disagree, and the partitioner moves the data of both to match")
            out.append(LayoutConflict(site.op if site else op.short, site.tensor if site else "",
                                site.source if site else "", d, candidates,
                                ",".join(kept) if kept else "", text + ".", came))
        return tuple(out)

    def _why_won(self, v: Value, op: Op, kept: tuple[str, ...],
                 seen: Mapping[tuple[str, ...], Value]) -> str:
        """Why the kept split won, as far as the propagation steps show: it reached the op
        first."""
        mine = self.arrivals.get((id(v), kept[0]))
        others = [self.arrivals.get((id(o), axes[0])) for axes, o in seen.items()
                  if axes != kept]
        if mine is not None and all(a is None or a[0] > mine[0] for a in others):
            later = [a[0] for a in others if a is not None]
            return (f" (it reached the op first, at step {mine[0]}" +
                    (f"; the other at step {min(later)}" if later else "") + ")")
        return " (Shardy's propagation order chose it)"

    # -- one tensor --------------------------------------------------------------------------

    def of(self, v: Value) -> Origins:
        if v.dims == () or (v.dims is None and not v.split):
            return Origins(note="a scalar: it has no dimension to split")
        # An output's whole dimensions are looked for from the value the function returns.
        k = self.result_index.get(id(v))
        searched = self.fn.returned[k] if k is not None else v
        split = _split(v)
        home = self.home(v)
        dims = []
        for d, axes in enumerate(split):
            if axes:
                origins = tuple(self.origin(v, a) for a in axes)
                dims.append(DimOrigin(d, origins, "", _split_sentence(d, origins, home, v,
                                                                      self)))
            else:
                dropped = self.whole(searched, d)
                dims.append(DimOrigin(d, (), dropped, f"dim {d} whole: {dropped}"))
        return Origins(tuple(dims), self.conflicts(v))


def _endpoint(op: Op, ref: str) -> Value | None:
    kind, _, k = ref.partition("-")
    values = op.operands if kind == "operand" else op.results
    k = int(k) if k.isdigit() else -1
    return values[k] if 0 <= k < len(values) else None


def _flow_endpoint(op: Op, r: int, ref: str) -> Value | None:
    """An endpoint of a while's data-flow edge for result r: operand-0 is the value it starts
    from, operand-1 the one the body yields, result-0 the result."""
    if ref == "operand-0":
        return op.operands[r] if r < len(op.operands) else None
    if ref == "operand-1":
        ret = op.terminator(len(op.regions) - 1) if op.regions else None
        return ret.operands[r] if ret is not None and r < len(ret.operands) else None
    if ref == "result-0":
        return op.results[r] if r < len(op.results) else None
    return None


def _split(v: Value) -> tuple[tuple[str, ...], ...]:
    rank = len(v.dims) if v.dims is not None else len(v.split or ())
    split = v.split or ()
    return tuple(split[d] if d < len(split) else () for d in range(rank))


def _axes(v: Value, d: int) -> tuple[str, ...]:
    split = v.split or ()
    return split[d] if d < len(split) else ()


def _axes_text(axes: Sequence[str]) -> str:
    return " and ".join(f"`{a}`" for a in axes)


def _source_at(source: str, home: str) -> str:
    """`file.py:12` as a sentence says it: `at line 12` in the home file."""
    if not source:
        return ""
    m = re.match(r"(.*), line (\d+)$", source) or re.match(r"(.*):(\d+)$", source)
    if m and home and (m.group(1) == home or short_path(home) == m.group(1)):
        return f"at line {m.group(2)}"
    return f"at {source}"


def _because(o: AxisOrigin, v: Value, reader: _OriginsReader, home: str) -> str:
    """`because input `w1` is`, `because its spec asks`, `because the sharding constraint
    `h` at line 15 asks`."""
    if o.kind is OriginKind.INPUT:
        if id(v) in reader.arg_index and reader.tensor_name(v) == o.name:
            return "because its spec asks"
        return f"because input `{o.name}` is"
    if o.kind is OriginKind.OUTPUT:
        if id(v) in reader.result_index and reader.tensor_name(v) == o.name:
            return "because its output sharding asks"
        return f"because {o.phrase(home)} {_asks(o)}"
    if o.kind is OriginKind.UNKNOWN:
        return f"where Shardy says {o.shardy!r}" if o.shardy else "(Shardy names no origin)"
    return f"because {o.phrase(home)} {_asks(o)}"


def _asks(o: AxisOrigin) -> str:
    """The verb after an origin's phrase: in_specs and out_shardings are plural."""
    plural = o.kind is OriginKind.SHARD_MAP or (o.kind is OriginKind.OUTPUT and o.source)
    return "ask" if plural else "asks"


def _path_phrase(path: Sequence[PathStep], home: str) -> str:
    """`through `dot_general` at line 14 and `tanh` at line 15`: the ops grouped by line."""
    groups: list[tuple[str, list[str]]] = []
    for hop in path:
        at = _source_at(hop.source, home)
        if groups and groups[-1][0] == at:
            if hop.op not in groups[-1][1]:
                groups[-1][1].append(hop.op)
        else:
            groups.append((at, [hop.op]))
    if not groups:
        return ""
    shown = groups if len(groups) <= _SHOWN_GROUPS else groups[:2] + groups[-2:]
    parts = [", ".join(f"`{op}`" for op in ops) + (f" {at}" if at else "") for at, ops in shown]
    if len(groups) > _SHOWN_GROUPS:
        more = len(groups) - _SHOWN_GROUPS
        parts.insert(2, f"{more} more line{'s' if more > 1 else ''}")
    text = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"through {text}"


def _split_sentence(d: int, origins: Sequence[AxisOrigin], home: str, v: Value,
                    reader: _OriginsReader) -> str:
    clauses = []
    for o in origins:
        path = _path_phrase(o.path, home)
        clauses.append(_because(o, v, reader, home) + (f", {path}" if path else ""))
    head = f"dim {d} split over {_axes_text([o.axis for o in origins])}"
    if len(set(clauses)) == 1:         # one origin, one path for every axis
        return f"{head} {clauses[0]}"
    return f"{head}: " + "; ".join(f"`{o.axis}` {c}" for o, c in zip(origins, clauses,
                                                                     strict=True))


def read_origins(mlir: str, propagated: HloModule, inputs: Sequence[str],
                 outputs: Sequence[str]) -> dict[str, Origins]:
    """Tensor name (an input's, an output's, an intermediate's HLO name) -> its Origins, read
    from Shardy's after-propagation module `mlir` and the propagated HLO. Raises
    explorer._src.hlo.mlir.MlirError when the module cannot be read."""
    fn = parse_mlir(mlir)
    reader = _OriginsReader(fn, propagated, inputs, outputs)
    out: dict[str, Origins] = {}
    for k, arg in enumerate(fn.arguments):
        if k < len(inputs):
            out[inputs[k]] = reader.of(arg)
    for k, result in enumerate(fn.results):
        if k < len(outputs):
            out[outputs[k]] = reader.of(result)
    for op in fn.walk():
        for r in op.results:
            h = reader.instr(r)
            if h is not None and h.name not in out:
                out[h.name] = reader.of(r)
    return out


def origins_by_tensor(mlir: str | None, propagated: HloModule | None,
                      partitioner: Partitioner, inputs: Sequence[str], outputs: Sequence[str]
                      ) -> tuple[dict[str, Origins], Origins, list[str]]:
    """What a Report gives its tensors: name -> Origins, the Origins of a tensor not among
    them (its note says why), and the Report notes (GSPMD's, or an unreadable module's).
    `mlir` is None when the request did not ask for origins."""
    if partitioner == Partitioner.GSPMD:
        return {}, unavailable(GSPMD_NOTE), [GSPMD_NOTE] if mlir is not None else []
    if mlir is None:
        return {}, unavailable(NOT_ASKED), []
    if not mlir or propagated is None:
        note = ("origins are not known: Shardy wrote no module after propagation for this "
                "compile")
        return {}, unavailable(note), [note]
    try:
        return read_origins(mlir, propagated, inputs, outputs), unavailable(NOT_IN_MODULE), []
    except MlirError as e:
        note = f"origins are not known: Shardy's module after propagation was not read ({e})"
        return {}, unavailable(note), [note]
