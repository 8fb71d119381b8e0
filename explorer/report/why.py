"""Why each collective exists: a reason code, one sentence, and the evidence it rests on.

Pure: text in, reason out. The reader maps each collective of the optimized module back to the
propagated module (the one the partitioner was given, with `sharding={...}` on its
instructions) through its metadata (op_name and source line), finds the instruction whose
partitioning needed it, and reads the shardings of that instruction and its operands:

- `partial-sum`: a dot contracts, or a reduce reduces, a dimension that is sharded over the
  collective's axes, so each device holds a partial result (the scaling book's sharded-matmul
  cases 2 and 3, https://jax-ml.github.io/scaling-book/sharding/);
- `gather-operand`: an operand is gathered because the computation that uses it needs it less
  sharded (FSDP weights before a matmul; the scaling book's case 4);
- `reshard`: the layout moves between producer and consumer (a sharding constraint, a
  shard_map's in_specs, or propagation meeting a conflict; the explorer's jit leaves output
  layouts to propagation, so an output spec never is the cause);
- `indexing`: a gather, scatter or dynamic slice along a sharded dimension;
- `explicit`: the program asked for it (psum, ppermute, all_to_all inside a shard_map);
- `unknown`: none of these is shown by the modules; the text says what was missing.

Nothing is guessed: a collective whose evidence does not fit a rule is `unknown`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np

from explorer.hlo.collectives import CollectiveKind, collective_kind
from explorer.hlo.groups import axes_of_groups, axes_of_pairs, device_groups, source_target_pairs
from explorer.hlo.module import HloModule, Instruction, close_bracket, ints
from explorer.hlo.sharding import tiling_from_hlo
from explorer.spec.mesh import MeshSpec


class Reason(StrEnum):
    """Why a collective exists. A StrEnum: it writes to JSON as its code."""

    PARTIAL_SUM = "partial-sum"
    GATHER_OPERAND = "gather-operand"
    RESHARD = "reshard"
    INDEXING = "indexing"
    EXPLICIT = "explicit"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Evidence:
    """What a reason rests on, read from the propagated module ("" where it does not apply).

    `consumer` is the instruction whose partitioning needed the collective; `producer` the one
    whose result the collective moves or reduces (for a partial sum, the operands of the
    contraction). Shardings are mesh-axis specs in the spec grammar (`data,None`), one per
    dimension: `sharding_before` is the producer's, `sharding_after` the one the consumer needs
    (for a partial sum, the operands' layout before and the result's after)."""

    consumer: str = ""
    producer: str = ""
    sharding_before: str = ""
    sharding_after: str = ""


@dataclass(frozen=True)
class Why:
    """Why one collective exists: a code, one sentence naming the tensors, lines and mesh
    axes, and the instructions and shardings it was read from."""

    reason: Reason
    text: str
    evidence: Evidence = Evidence()


# Primitives of jax whose lowering is a collective the program itself asked for.
_EXPLICIT_PRIMITIVES = {
    "psum", "psum_invariant", "pmax", "pmin", "pmean", "ppermute", "pshuffle", "pswapaxes",
    "all_to_all", "all_gather", "all_gather_invariant", "psum_scatter", "reduce_scatter",
    "pbroadcast", "ragged_all_to_all",
}
# jax lowers some primitives under another name than the one the program calls.
_AS_WRITTEN = {"psum_invariant": "psum", "all_gather_invariant": "all_gather"}
_COLLECTIVE_OPCODES = {k.value for k in CollectiveKind} | {
    f"{k.value}-start" for k in CollectiveKind}
# Ops whose result element depends only on the same element of each operand, or that only
# move elements around: a layout change across them is a reshard, not a need of the math.
_LAYOUT_OPS = {
    "copy", "convert", "bitcast", "bitcast-convert", "reshape", "transpose", "broadcast",
    "custom-call", "tuple", "get-tuple-element", "parameter", "slice", "concatenate", "pad",
    "reverse", "select", "add", "subtract", "multiply", "divide", "maximum", "minimum",
    "negate", "exponential", "log", "tanh", "logistic", "rsqrt", "sqrt", "compare", "and",
    "or", "not", "xor", "abs", "sign", "power", "clamp", "floor", "ceil", "round-nearest-even",
    "round-nearest-afz", "exponential-minus-one", "log-plus-one", "cosine", "sine", "remainder",
    "atan2", "is-finite", "erf", "cbrt", "shift-left", "shift-right-logical",
    "shift-right-arithmetic", "real", "imag", "optimization-barrier",
}
_INDEXING_OPS = {"gather", "scatter", "dynamic-slice", "dynamic-update-slice"}
_REDUCER = {"add": "sum", "maximum": "maximum", "minimum": "minimum", "multiply": "product",
            "and": "logical and", "or": "logical or"}


def _tuple_parts(sharding: str) -> list[str]:
    """The element shardings of a tuple sharding `{{a}, {b}}`: `["{a}", "{b}"]`; ValueError
    for text cut short."""
    text = re.sub(r"/\*.*?\*/", "", sharding).strip()[1:-1]
    parts, i = [], 0
    while i < len(text):
        if text[i] == "{":
            end = close_bracket(text, i)
            parts.append(text[i:end])
            i = end
        else:
            i += 1
    return parts


# --------------------------------------------------------------------------- layouts


def dim_axes(sharding: str | None, rank: int, mesh: MeshSpec
             ) -> tuple[tuple[str, ...], ...] | None:
    """The mesh axes splitting each dimension of a tensor with this HLO sharding, major first;
    None when the sharding is absent or names no device layout. Manual (shard_map) and partial
    subgroups are not dimensions, so they are left out."""
    if not sharding or sharding.startswith("{{"):
        return None
    try:
        tiling = tiling_from_hlo(sharding, rank, mesh.device_count)
    except ValueError:
        return None
    sizes = mesh.sizes
    coords = np.stack(np.unravel_index(tiling.device_array(), sizes), axis=-1)
    out = []
    for d, k in enumerate(tiling.tiles):
        if k == 1:
            out.append(())
            continue
        # The mesh coordinates that change as one steps along dimension d.
        line = coords[tuple(slice(None) if i == d else 0 for i in range(rank + 1))]
        changed = line != line[0]
        axes = [a for a in range(len(sizes)) if sizes[a] > 1 and changed[:, a].any()]
        if math.prod(sizes[a] for a in axes) != k:
            return None           # not a split over whole mesh axes: say nothing
        axes.sort(key=lambda a: -int(np.argmax(changed[:, a])))
        out.append(tuple(mesh.names[a] for a in axes))
    return tuple(out)


def spec_text(axes: Iterable[tuple[str, ...]] | None) -> str:
    """A layout as the spec grammar writes it: `data,None`, `(data,model),None`, `replicated`."""
    if axes is None:
        return "(no mesh layout)"
    axes = tuple(axes)
    if not any(axes):
        return "replicated"
    return ",".join("None" if not a else a[0] if len(a) == 1 else "(" + ",".join(a) + ")"
                    for a in axes)


def _axes_phrase(axes: Iterable[str]) -> str:
    axes = [f"`{a}`" for a in axes]
    return " and ".join(axes) if axes else "no mesh axis"


def _dims_phrase(dims: Iterable[int]) -> str:
    dims = list(dims)
    return f"dimension {dims[0]}" if len(dims) == 1 else "dimensions " + ", ".join(map(str, dims))


# --------------------------------------------------------------------------- the reader


@dataclass(frozen=True)
class _Target:
    """One collective (or one part of a combined one) to explain."""

    kind: CollectiveKind
    axes: tuple[str, ...]              # the mesh axes its groups span
    op_name: str
    location: tuple[str, int] | None
    operand: Instruction | None        # its operand in the optimized module
    dims: tuple[int, ...]              # result dims of this part
    gather_dim: int | None = None      # all-gather's `dimensions={d}`
    # The axes of every step when XLA moved the data in several collectives (a permute, then
    # an all-gather, for one resharding): the layouts are compared over all of them.
    chain_axes: tuple[str, ...] = ()
    steps: int = 1


_MOVES = (CollectiveKind.ALL_GATHER, CollectiveKind.ALL_TO_ALL,
          CollectiveKind.COLLECTIVE_PERMUTE)
# Optimized-module ops between two steps of one resharding.
_BETWEEN_STEPS = {"fusion", "bitcast", "copy", "reshape", "transpose", "slice", "dynamic-slice",
                  "concatenate", "get-tuple-element", "async-done", "all-gather-done",
                  "collective-permute-done", "all-to-all-done"}


class WhyReader:
    """Explains the collectives of one optimized module from its propagated module.

    `inputs` are the program's input names in HLO parameter order, to name parameters."""

    def __init__(self, optimized: HloModule, propagated: HloModule | None, mesh: MeshSpec,
                 inputs: Sequence[str] = ()):
        self.opt = optimized
        self.prop = propagated
        self.mesh = mesh
        self.inputs = tuple(inputs)
        self.opt_names = optimized.by_name()
        self.names: dict[str, Instruction] = {}
        self.by_op_name: dict[str, list[Instruction]] = {}
        self.users: dict[str, list[Instruction]] = {}
        self._layouts: dict[tuple[str | None, int], tuple | None] = {}
        if propagated is not None:
            self.names = propagated.by_name()
            # Reducer and comparator bodies repeat their caller's op_name; a shard_map body,
            # also called with to_apply, is real code.
            reducers = {i.callee("to_apply", "comparator")
                        for i in propagated.instructions() if i.opcode != "call"}
            for instr in propagated.instructions():
                if instr.op_name and instr.computation not in reducers:
                    self.by_op_name.setdefault(instr.op_name, []).append(instr)
                for o in instr.operands:
                    self.users.setdefault(o, []).append(instr)
        self._chains = self._find_chains()

    # -- public ------------------------------------------------------------------------------

    def explain(self, instr: Instruction) -> Why:
        kind, _ = collective_kind(instr.opcode)
        if kind is None:
            raise ValueError(f"{instr.name} ({instr.opcode}) is not a collective")
        if self.prop is None:
            return Why(Reason.UNKNOWN, "No reason found: the compiler ran no partitioning pass, "
                       "so there is no propagated module to read the shardings from.")
        chain = self._chains.get(instr.name)
        if chain is not None and chain[-1] is not instr:
            # An earlier step of a resharding: it exists for the reason its last step does.
            last = self.explain(chain[-1])
            return replace(last, text=f"Step {chain.index(instr) + 1} of {len(chain)} of one "
                                      f"data movement; {_lower_first(last.text)}")
        targets = self._targets(instr, kind, chain)
        whys = [self._explain_one(t) for t in targets]
        if len(whys) == 1:
            return whys[0]
        return self._combine(kind, whys)

    # -- targets -----------------------------------------------------------------------------

    def _axes_of(self, instr: Instruction, kind: CollectiveKind) -> tuple[str, ...]:
        m = self.mesh
        try:
            if kind is CollectiveKind.COLLECTIVE_PERMUTE:
                return tuple(axes_of_pairs(source_target_pairs(instr.attrs) or [], m.sizes,
                                           m.names))
            groups = device_groups(instr.attrs, m.device_count) or []
            return tuple(axes_of_groups(groups, m.sizes, m.names))
        except ValueError:
            return ()

    def _find_chains(self) -> dict[str, list[Instruction]]:
        """Collectives that move one tensor in several steps: a gather, all-to-all or permute
        whose operand comes (through slicing, copies, fusions) from another with the same
        op_name. Each maps to its chain, first step first."""
        before: dict[str, Instruction] = {}
        for instr in self.opt.instructions():
            kind, _ = collective_kind(instr.opcode)
            if kind not in _MOVES or not instr.op_name:
                continue
            todo = list(instr.operands)
            for _ in range(8):
                if not todo:
                    break
                name = todo.pop(0)
                src = self.opt_names.get(name)
                if src is None:
                    continue
                src_kind, _ = collective_kind(src.opcode)
                if src_kind in _MOVES and src.op_name == instr.op_name and \
                        self.opt.source(src) == self.opt.source(instr) and \
                        _primitive(instr.op_name) not in _EXPLICIT_PRIMITIVES:
                    before[instr.name] = src
                    break
                if src.opcode in _BETWEEN_STEPS:
                    todo += list(src.operands)
        chains: dict[str, list[Instruction]] = {}
        after = {b.name: i for i, b in before.items()}
        for name in before:
            if name in after:
                continue                      # not the last step
            chain = [self.opt_names[name]]
            while chain[0].name in before:
                chain.insert(0, before[chain[0].name])
            for c in chain:
                chains[c.name] = chain
        return chains

    def _location(self, module: HloModule, instr: Instruction) -> tuple[str, int] | None:
        src = module.source(instr)
        return (src[0], src[1]) if src else None

    def _targets(self, instr: Instruction, kind, chain) -> list[_Target]:
        axes = self._axes_of(instr, kind)
        chain_axes = axes
        if chain:
            used = {x for c in chain for x in self._axes_of(c, collective_kind(c.opcode)[0])}
            chain_axes = tuple(x for x in self.mesh.names if x in used)
        operands = [self.opt_names.get(o) for o in instr.operands]
        result = instr.arrays
        if instr.opcode.endswith("-start") and len(result) > len(operands):
            result = result[len(operands):]     # start ops return (operands..., results...)
        gather_dim = None
        if kind is CollectiveKind.ALL_GATHER:
            dims = ints(instr.attr("dimensions"))
            gather_dim = dims[0] if dims else None
        loc = self._location(self.opt, instr)
        steps = len(chain) if chain else 1
        if len(operands) <= 1 or not _combined_op_names(instr.op_name):
            first = chain[0] if chain else instr
            operand = self.opt_names.get(first.operands[0]) if first.operands else None
            return [_Target(kind, axes, instr.op_name, loc, operand,
                            result[0].dims if result else (), gather_dim, chain_axes, steps)]
        # A combined collective: each part is explained from its own operand's metadata.
        out = []
        for i, op in enumerate(operands):
            op_name = op.op_name if op is not None and op.op_name else ""
            op_loc = self._location(self.opt, op) if op is not None else None
            out.append(_Target(kind, axes, op_name, op_loc, op,
                               result[i].dims if i < len(result) else (), gather_dim,
                               chain_axes, steps))
        return out

    def _anchors(self, t: _Target) -> list[Instruction]:
        """The propagated instructions the collective's metadata points at."""
        found = list(self.by_op_name.get(t.op_name, []))
        if not found and t.op_name:
            # Inside a shard_map body the propagated op_name lacks the outer path.
            found = [i for name, instrs in self.by_op_name.items()
                     if t.op_name.endswith("/" + name) for i in instrs]
        if t.location is not None:
            same = [i for i in found if self._location(self.prop, i) == t.location]
            if same or any(self._location(self.prop, i) for i in found):
                found = same
        return found

    # -- one target ----------------------------------------------------------------------------

    def _explain_one(self, t: _Target) -> Why:
        prim = _primitive(t.op_name)
        anchors = self._anchors(t)
        if prim in _EXPLICIT_PRIMITIVES or any(a.opcode in _COLLECTIVE_OPCODES for a in anchors):
            where = next((self._where(a, t) for a in anchors), self._loc_text(t.location, t))
            manual = "inside a shard_map" if "shard_map" in t.op_name else "in the program"
            shown = _AS_WRITTEN.get(prim, prim)
            return Why(Reason.EXPLICIT,
                       f"The program asked for it: `{shown}` {where} {manual} is "
                       f"{_article(t.kind)} {t.kind} over {_axes_phrase(t.axes)}.",
                       Evidence(consumer=self._show(anchors[0]) if anchors else t.op_name))
        if not anchors:
            return Why(Reason.UNKNOWN,
                       f"No reason found: the {t.kind}'s metadata (op_name {t.op_name!r}) "
                       "matches no instruction of the propagated module.")
        if not t.chain_axes:
            return Why(Reason.UNKNOWN,
                       f"No reason found: the {t.kind}'s device groups span no whole mesh axis "
                       f"(part of one, or several crossed), so its layouts cannot be compared "
                       f"over mesh axes.", Evidence(consumer=self._show(anchors[0])))
        ranked = self._rank(anchors, t)
        if t.kind in (CollectiveKind.ALL_REDUCE, CollectiveKind.REDUCE_SCATTER):
            rules = (self._partial_sum, self._indexing, self._reshard)
        elif t.kind is CollectiveKind.ALL_GATHER:
            rules = (self._indexing, self._gather_exact, self._gather, self._reshard,
                     self._reshard_result)
        else:
            rules = (self._reshard, self._reshard_result)
        for rule in rules:
            for anchor in ranked:
                why = rule(anchor, t)
                if why is not None:
                    return why
        for inner in self._fused_reductions(t):
            # XLA fused the reduction into the op that feeds the collective and kept that
            # op's metadata (e.g. a negate after a sum): the fused reduction is the producer.
            why = self._explain_one(inner)
            if why.reason is not Reason.UNKNOWN:
                return why
        a = ranked[0]
        return Why(Reason.UNKNOWN,
                   f"No reason found: `{_primitive(a.op_name)}` {self._where(a, t)} "
                   f"({a.opcode}) shows no layout over {_axes_phrase(t.chain_axes)} that "
                   f"explains {_article(t.kind)} {t.kind}.",
                   Evidence(consumer=self._show(a), sharding_after=spec_text(self._axes(a))))

    def _fused_reductions(self, t: _Target) -> list[_Target]:
        """The reductions (reduce, dot) that feed an all-reduce through a few element-wise
        steps in the optimized module, as targets of their own."""
        if t.operand is None or t.kind not in (CollectiveKind.ALL_REDUCE,
                                               CollectiveKind.REDUCE_SCATTER):
            return []
        out, seen, todo = [], set(), [t.operand]
        while todo and len(seen) < 6:
            i = todo.pop(0)
            if i.name in seen:
                continue
            seen.add(i.name)
            inside = self.opt.called(i) \
                if i.opcode == "fusion" else [i]
            found = [x for x in inside if x.opcode in ("reduce", "dot", "convolution")]
            for x in found:
                if x.op_name and x.op_name != t.op_name:
                    out.append(replace(t, op_name=x.op_name, location=self._location(self.opt, x),
                                       operand=None))
            if not found:
                todo += [self.opt_names[o] for o in i.operands if o in self.opt_names]
        return out

    def _rank(self, anchors: list[Instruction], t: _Target) -> list[Instruction]:
        """The anchors most likely meant first. The layers of a loop, or a forward op and its
        transpose, can share op_name and line; shapes tell them apart: the per-device result
        of the anchor (for a reduction) or of one of its operands (for a data movement) has
        the collective's shape."""
        def fits(i: Instruction | None) -> int:
            if i is None or not i.arrays:
                return 2
            dims = i.arrays[0].dims
            if len(dims) != len(t.dims):
                return 2
            ax = self._axes(i)
            local = self._shard_dims(dims, ax) if ax else dims
            return 0 if tuple(t.dims) in (tuple(dims), local) else 1

        moved = self._input_of(self.opt, self.opt_names, t.operand)
        # The inputs (weights) the reduced value was computed from, next to the collective.
        near = self._inputs_near(self.opt, self.opt_names, t.operand, 2)

        def score(a: Instruction) -> int:
            if t.kind in (CollectiveKind.ALL_REDUCE, CollectiveKind.REDUCE_SCATTER):
                same = not near or bool(near & self._inputs_near(self.prop, self.names, a, 1))
                return (0 if same else 4) + fits(a)
            operands = [self.names.get(o) for o in a.operands]
            # The collective moves a program input (a weight): the anchor that uses that
            # input comes first, whatever the other layers look like.
            same = moved is not None and any(
                self._input_of(self.prop, self.names, o) == moved for o in operands)
            return (0 if same else 4) + min([fits(o) for o in operands], default=2)
        return sorted(anchors, key=score)

    def _input_of(self, module: HloModule, names: dict[str, Instruction],
                  i: Instruction | None) -> int | None:
        """The number of the program input that `i` is, after reshapes, copies, converts and
        broadcasts (the same in both modules: parameter i is the i-th input); None if it is
        not one."""
        for _ in range(8):
            if i is None:
                return None
            if i.opcode == "parameter":
                number = ints(i.operand_text)
                return number[0] if i.computation == module.entry and number else None
            if len(i.operands) != 1 or not (i.opcode in _RENAMING or self._renames(module, i)):
                return None
            i = names.get(i.operands[0])
        return None

    def _inputs_near(self, module: HloModule, names: dict[str, Instruction],
                     i: Instruction | None, depth: int) -> set[int]:
        """The program inputs among `i`'s operands (and theirs, to `depth` levels)."""
        found: set[int] = set()
        level = [i] if i is not None else []
        for _ in range(depth):
            level = [names[o] for x in level for o in x.operands if o in names]
            found |= {n for x in level if (n := self._input_of(module, names, x)) is not None}
        return found

    @staticmethod
    def _renames(module: HloModule, i: Instruction) -> bool:
        """A fusion that only copies, reshapes or converts its one operand (XLA's
        `wrapped_copy` of a weight it relays out before a collective)."""
        if i.opcode != "fusion":
            return False
        body = module.called(i)
        return bool(body) and all(x.opcode in _RENAMING or x.opcode == "parameter"
                                  for x in body)

    # -- partial sums ----------------------------------------------------------------------------

    def _partial_sum(self, a: Instruction, t: _Target) -> Why | None:
        if a.opcode in ("dot", "convolution"):
            return self._partial_dot(a, t)
        if a.opcode == "reduce":
            return self._partial_reduce(a, t)
        return None

    def _partial_dot(self, a: Instruction, t: _Target) -> Why | None:
        lhs, rhs = (self.names.get(o) for o in a.operands[:2])
        if lhs is None or rhs is None:
            return None
        la, ra = self._axes(lhs), self._axes(rhs)
        if a.opcode == "convolution":
            lc, rc = _conv_contracting(a)
        else:
            lc, rc = ints(a.attr("lhs_contracting_dims")), ints(a.attr("rhs_contracting_dims"))
        for l_dim, r_dim in zip(lc, rc, strict=False):
            split = set(la[l_dim] if la and l_dim < len(la) else ()) | set(
                ra[r_dim] if ra and r_dim < len(ra) else ())
            axes = [x for x in t.axes if x in split]
            if not axes:
                continue
            evidence = Evidence(
                consumer=self._show(a),
                producer=f"lhs {self._show(lhs)}; rhs {self._show(rhs)}",
                sharding_before=f"lhs {spec_text(la)}; rhs {spec_text(ra)}",
                sharding_after=spec_text(self._axes(a)))
            where = self._where(a, t)
            prim = _primitive(a.op_name, with_einsum=True)
            by = _axes_phrase(axes)
            batch = self._batch_dim((lhs, l_dim), (rhs, r_dim)) if _backward(a) else None
            if batch is not None:
                text = (f"Backward pass: `{prim}` {where} computes a gradient by contracting "
                        f"dimension {batch[1]} of {self._name(batch[0], t)}, the batch dimension;"
                        f" the gradient is summed over the batch dimension, sharded over {by}, "
                        f"so each device holds the sum over its own part of the batch and the "
                        f"{t.kind} over {by} adds the parts.")
            else:
                whose = self._whose(lhs, la, l_dim, rhs, ra, r_dim, axes, t)
                text = (f"{'Backward pass: ' if _backward(a) else ''}`{prim}` {where} contracts "
                        f"dimension {l_dim} of {self._name(lhs, t)} with dimension {r_dim} of "
                        f"{self._name(rhs, t)}, which is sharded over {by}{whose}: each device "
                        f"holds a partial sum, and the {t.kind} over {by} adds them.")
            return Why(Reason.PARTIAL_SUM, text, evidence)
        return None

    def _whose(self, lhs, la, l_dim, rhs, ra, r_dim, axes, t) -> str:
        in_l = la is not None and l_dim < len(la) and set(axes) <= set(la[l_dim])
        in_r = ra is not None and r_dim < len(ra) and set(axes) <= set(ra[r_dim])
        if in_l and in_r:
            return " in both"
        return f" in {self._name(lhs if in_l else rhs, t)}"

    def _partial_reduce(self, a: Instruction, t: _Target) -> Why | None:
        src = self.names.get(a.operands[0]) if a.operands else None
        if src is None:
            return None
        sa = self._axes(src)
        if sa is None:
            return None
        reduced = ints(a.attr("dimensions"))
        dims = [d for d in reduced if d < len(sa) and set(t.axes) & set(sa[d])]
        if not dims:
            return None
        op = self._reducer(a)
        by = _axes_phrase([x for x in t.axes if any(x in sa[d] for d in dims)])
        where = self._where(a, t)
        prim = _primitive(a.op_name)
        batch = None
        if _backward(a) and op == "sum":
            batch = self._batch_dim(*((src, d) for d in dims))
        if batch is not None:
            text = (f"Backward pass: `{prim}` {where} computes a gradient by summing dimension "
                    f"{batch[1]} of {self._name(batch[0], t)}, the batch dimension; the gradient "
                    f"is summed over the batch dimension, sharded over {by}, so each device "
                    f"holds the sum over its own part of the batch and the {t.kind} over {by} "
                    "adds the parts.")
        else:
            text = (f"{'Backward pass: ' if _backward(a) else ''}`{prim}` {where} takes the "
                    f"{op} over {_dims_phrase(dims)} of {self._name(src, t)}, sharded over "
                    f"{by}: each device holds a partial {op}, and the {t.kind} over {by} "
                    "combines them.")
        return Why(Reason.PARTIAL_SUM, text, Evidence(
            consumer=self._show(a), producer=self._show(src),
            sharding_before=spec_text(sa), sharding_after=spec_text(self._axes(a))))

    def _reducer(self, a: Instruction) -> str:
        called = a.callee("to_apply")
        for instr in self.prop.computations.get(called, []):
            if instr.is_root:
                return _REDUCER.get(instr.opcode, instr.opcode)
        return "sum"

    # -- gathers ---------------------------------------------------------------------------------

    def _gathered_operand(self, a: Instruction, t: _Target, strict: bool
                          ) -> tuple[Instruction, tuple, int] | None:
        """The operand of `a` the all-gather gathers: sharded over the collective's axes on
        its gather dimension, the same producer as in the optimized module when that is
        known, and whole there afterwards in the collective's result shape (required when
        `strict`; XLA may have reshaped it on the way otherwise)."""
        found = []
        for name in a.operands:
            o = self.names.get(name)
            if o is None or not o.arrays:
                continue
            oa = self._axes(o)
            if oa is None:
                continue
            for d, axes in enumerate(oa):
                if not set(t.chain_axes) & set(axes):
                    continue
                after = tuple(tuple(x for x in ax if x not in t.chain_axes) if i == d else ax
                              for i, ax in enumerate(oa))
                score = 0
                if t.gather_dim is not None and d != t.gather_dim:
                    score += 2
                local = self._shard_dims(o.arrays[0].dims, after)
                if local != tuple(t.dims):
                    # XLA may have reshaped it on the way, but not changed its size.
                    if strict or math.prod(local) != math.prod(t.dims):
                        continue
                    score += 1
                moved = self._input_of(self.opt, self.opt_names, t.operand)
                if moved is not None:
                    if self._input_of(self.prop, self.names, o) != moved:
                        score += 4
                elif t.operand is not None and t.operand.op_name and \
                        t.operand.op_name != o.op_name:
                    score += 4
                found.append((score, o, after, d))
        if not found:
            return None
        _, o, after, d = min(found, key=lambda f: f[0])
        return o, after, d

    def _shard_dims(self, dims, axes) -> tuple[int, ...]:
        sizes = dict(zip(self.mesh.names, self.mesh.sizes, strict=True))
        return tuple(-(-n // math.prod(sizes[x] for x in ax)) for n, ax in
                     zip(dims, axes, strict=False))

    def _gather_exact(self, a: Instruction, t: _Target) -> Why | None:
        # Anchors come ranked with the one that uses the moved input first (see _rank).
        return self._gather(a, t, strict=True)

    def _gather(self, a: Instruction, t: _Target, strict: bool = False) -> Why | None:
        found = self._gathered_operand(a, t, strict)
        if found is None:
            return None
        o, after, d = found
        before = self._axes(o)
        evidence = Evidence(consumer=self._show(a), producer=self._show(o),
                            sharding_before=spec_text(before), sharding_after=spec_text(after))
        where = self._where(a, t)
        prim = _primitive(a.op_name, with_einsum=True)
        if _same_tensor(a, o):
            # The consumer only moves or maps elements: the tensor itself changes layout.
            cause = self._cause(a, t) or _CONFLICT
            return Why(Reason.RESHARD,
                       f"The layout of {self._name(o, t)} changes from {spec_text(before)} to "
                       f"{spec_text(after)} for `{prim}` {where}, {cause}; "
                       f"{_moved_by(t, 'gather')} dimension {d}.", evidence)
        need = self._dot_need(a, o, d, t) if a.opcode == "dot" else ""
        if a.opcode == "broadcast":
            need = (f"`{prim}` {where} broadcasts {self._name(o, t)} ({spec_text(before)}) into "
                    f"a result laid out as {spec_text(self._axes(a))}, where the dimensions "
                    f"that come from it are not split that way: it must be "
                    f"{spec_text(after)} there")
        if not need:
            need = (f"`{prim}` {where} needs {self._name(o, t)} less sharded than it is: "
                    f"{spec_text(before)} → {spec_text(after)}")
        return Why(Reason.GATHER_OPERAND,
                   f"{need}; {_moved_by(t, 'gather')} it along dimension {d} before use.",
                   evidence)

    def _dot_need(self, a: Instruction, o: Instruction, d: int, t: _Target) -> str:
        side = 0 if a.operands[0] == o.name else 1
        other = self.names.get(a.operands[1 - side]) if len(a.operands) > 1 else None
        mine, theirs = ("lhs", "rhs") if side == 0 else ("rhs", "lhs")
        contracting = ints(a.attr(f"{mine}_contracting_dims"))
        prim = _primitive(a.op_name, with_einsum=True)
        where = self._where(a, t)
        name = self._name(o, t)
        oa_o = self._axes(o) or ()
        by = _axes_phrase([x for x in t.chain_axes if d < len(oa_o) and x in oa_o[d]])
        before = spec_text(self._axes(o))
        oa = self._axes(other) if other is not None else None
        other_name = self._name(other, t) if other is not None else "its other operand"
        if d in contracting:
            j = contracting.index(d)
            other_dims = ints(a.attr(f"{theirs}_contracting_dims"))
            there = oa[other_dims[j]] if oa and j < len(other_dims) and \
                other_dims[j] < len(oa) else ()
            how = ("is not split there" if not there else
                   f"is split there over {_axes_phrase(there)}")
            return (f"`{prim}` {where} contracts dimension {d} of {name} ({before}), sharded "
                    f"over {by}, while {other_name} {how}: {name} must be whole along it")
        if oa and any(set(t.chain_axes) & set(ax) for ax in oa):
            return (f"`{prim}` {where} has {name} ({before}) and {other_name} "
                    f"({spec_text(oa)}) both sharded over {by} in non-contracting dimensions, "
                    f"which its result cannot keep both of: {name} must be whole along "
                    f"dimension {d}")
        return ""

    def _dot_required(self, a: Instruction, side: int) -> tuple[tuple[str, ...], ...] | None:
        ops = [self.names.get(o) for o in a.operands[:2]]
        if any(o is None or not o.arrays for o in ops):
            return None
        result = self._axes(a)
        other = self._axes(ops[1 - side])
        if result is None or other is None:
            return None
        mine, theirs = ("lhs", "rhs") if side == 0 else ("rhs", "lhs")
        batch, contracting = ints(a.attr(f"{mine}_batch_dims")), ints(
            a.attr(f"{mine}_contracting_dims"))
        their_contracting = ints(a.attr(f"{theirs}_contracting_dims"))
        free = [k for k in range(len(ops[side].arrays[0].dims)) if k not in batch + contracting]
        lhs_rank = len(ops[0].arrays[0].dims)
        lhs_free = lhs_rank - len(ints(a.attr("lhs_batch_dims"))) - len(
            ints(a.attr("lhs_contracting_dims")))
        offset = len(batch) + (0 if side == 0 else lhs_free)
        need = []
        for k in range(len(ops[side].arrays[0].dims)):
            if k in batch:
                need.append(result[batch.index(k)])
            elif k in contracting:
                j = contracting.index(k)
                need.append(other[their_contracting[j]] if j < len(their_contracting) else ())
            else:
                pos = offset + free.index(k)
                need.append(result[pos] if pos < len(result) else ())
        return tuple(need)

    # -- indexing --------------------------------------------------------------------------------

    def _indexing(self, a: Instruction, t: _Target) -> Why | None:
        if a.opcode not in _INDEXING_OPS or not a.operands:
            return None
        src = self.names.get(a.operands[0])
        sa = self._axes(src) if src is not None else None
        if sa is None:
            return None
        dims = [d for d in _indexed_dims(a, self.names) if d < len(sa)
                and set(t.axes) & set(sa[d])]
        if not dims:
            return None
        by = _axes_phrase(t.axes)
        how = (f"each device handles the indices that fall in its own part and the {t.kind} "
               f"over {by} combines the parts" if t.kind in (CollectiveKind.ALL_REDUCE,
                                                            CollectiveKind.REDUCE_SCATTER)
               else f"the {t.kind} over {by} brings the indexed dimension together first")
        return Why(Reason.INDEXING,
                   f"`{_primitive(a.op_name)}` {self._where(a, t)} indexes {_dims_phrase(dims)} "
                   f"of {self._name(src, t)}, which is sharded over {by}: {how}.",
                   Evidence(consumer=self._show(a), producer=self._show(src),
                            sharding_before=spec_text(sa),
                            sharding_after=spec_text(self._axes(a))))

    # -- reshards --------------------------------------------------------------------------------

    def _reshard(self, a: Instruction, t: _Target) -> Why | None:
        """An operand of `a` laid out, over the collective's axes, unlike what `a` needs of
        it. For an op that only moves or maps elements, the need is its own result's layout,
        and the change is a reshard (caused by a constraint, or by propagation meeting a
        conflict); for a computation, a need to see more of the operand is gather-operand."""
        for name in a.operands:
            o = self.names.get(name)
            have = self._axes(o) if o is not None else None
            need = self._required(a, a.operands.index(name)) if have is not None else None
            if need is None or len(need) != len(have) or need == have:
                continue
            moved = {x for h, n in zip(have, need, strict=True) for x in set(h) ^ set(n)}
            if not moved & set(t.chain_axes):
                continue       # the layouts differ, but not over this collective's axes
            removal = all(set(n) <= set(h) for h, n in zip(have, need, strict=True))
            prim = _primitive(a.op_name, with_einsum=True)
            where = self._where(a, t)
            evidence = Evidence(consumer=self._show(a), producer=self._show(o),
                                sharding_before=spec_text(have), sharding_after=spec_text(need))
            if _same_tensor(a, o):
                cause = self._cause(a, t) or _CONFLICT
                return Why(Reason.RESHARD,
                           f"The layout of {self._name(o, t)} changes from {spec_text(have)} "
                           f"to {spec_text(need)} for `{prim}` {where}, {cause}; "
                           f"{_moved_by(t, 'move')} the data.", evidence)
            if a.opcode == "dot":
                how = ("its batch and free dimensions as the result has them, its contracting "
                       "dimensions as the other operand has them")
            else:
                how = "as its result's layout asks"
            if removal:
                return Why(Reason.GATHER_OPERAND,
                           f"`{prim}` {where} needs {self._name(o, t)} less sharded: "
                           f"{spec_text(have)} → {spec_text(need)} ({how}); "
                           f"{_moved_by(t, 'gather')} it.", evidence)
            cause = self._cause(a, t)
            why_so = (f"its result's layout is set {cause}" if cause else
                      "propagation left the layouts around it in conflict")
            return Why(Reason.RESHARD,
                       f"`{prim}` {where} needs {self._name(o, t)} laid out as "
                       f"{spec_text(need)} ({how}), but it is {spec_text(have)}: {why_so}, and "
                       f"{_moved_by(t, 'move')} the data.", evidence)
        return None

    def _reshard_result(self, a: Instruction, t: _Target) -> Why | None:
        """The result of `a` laid out, over the collective's axes, unlike what an instruction
        using it needs, directly or after ops that only reshape or copy it (the partitioner
        moves it right after `a`, under `a`'s metadata)."""
        todo, seen = [a], set()
        while todo and len(seen) < 16:
            p = todo.pop(0)
            if p.name in seen:
                continue
            seen.add(p.name)
            have = self._axes(p)
            if have is None:
                continue
            for u in self.users.get(p.name, []):
                if u.opcode in ("tuple", "get-tuple-element"):
                    continue
                need = self._required(u, list(u.operands).index(p.name))
                if need is None or len(need) != len(have):
                    continue
                if need == have:
                    if u.opcode in _RENAMING:
                        todo.append(u)       # the same values, laid out the same: follow
                    continue
                moved = {x for h, n in zip(have, need, strict=True) for x in set(h) ^ set(n)}
                if not moved & set(t.chain_axes):
                    continue
                return self._result_why(a, p, u, have, need, t)
        return None

    def _result_why(self, a, p, u, have, need, t: _Target) -> Why:
        prim = _primitive(a.op_name, with_einsum=True)
        point = _constraint_point(u.op_name)
        user = (f"the sharding constraint {point}" if point is not None
                else f"`{_primitive(u.op_name, with_einsum=True) or u.opcode}` ")
        via = "" if p is a else f" (as {self._name(p, t)})"
        cause = self._cause(u, t)
        return Why(Reason.RESHARD,
                   f"The result of `{prim}` {self._where(a, t)} is laid out as "
                   f"{spec_text(have)}{via}, but {user}{self._where(u, t)} needs it as "
                   f"{spec_text(need)}{', ' + cause if cause else ''}; "
                   f"{_moved_by(t, 'move')} it.",
                   Evidence(consumer=self._show(u), producer=self._show(p),
                            sharding_before=spec_text(have), sharding_after=spec_text(need)))

    def _required(self, a: Instruction, index: int) -> tuple[tuple[str, ...], ...] | None:
        """The layout `a` needs of its operand `index`, from `a`'s own layout (and for a dot,
        from its other operand): None where that is not a simple reading, or where the reading
        asks for one mesh axis on two dimensions (no layout can be that)."""
        need = self._required_reading(a, index)
        if need is None:
            return None
        used = [x for ax in need for x in ax]
        return need if len(used) == len(set(used)) else None

    def _required_reading(self, a: Instruction, index: int
                          ) -> tuple[tuple[str, ...], ...] | None:
        if a.opcode == "dot":
            return self._dot_required(a, index)
        if a.opcode == "tuple":
            # A tuple holds each operand in the layout its own element of the sharding gives.
            o = self.names.get(a.operands[index])
            try:
                parts = _tuple_parts(a.sharding) if a.sharding else []
            except ValueError:
                return None
            if not a.sharding.startswith("{{"):
                parts = [a.sharding] * len(a.operands)        # one sharding for every element
            if o is None or len(o.arrays) != 1 or index >= len(parts):
                return None
            return dim_axes(parts[index], len(o.arrays[0].dims), self.mesh)
        result = self._axes(a)
        o = self.names.get(a.operands[index])
        if result is None or o is None or not o.arrays or not a.arrays:
            return None
        rank = len(o.arrays[0].dims)
        if a.opcode == "transpose":
            perm = ints(a.attr("dimensions"))
            need = [()] * rank
            for i, j in enumerate(perm):
                need[j] = result[i]
            return tuple(need)
        if a.opcode == "broadcast":
            mapping = ints(a.attr("dimensions"))
            return tuple(result[m] for m in mapping) if len(mapping) == rank else None
        if a.opcode == "reduce" and index == 0:
            # Kept dimensions as the result has them; a reduced one may stay split (that is a
            # partial sum, not a move).
            have = self._axes(o)
            reduced = set(ints(a.attr("dimensions")))
            kept = iter(result)
            need = [(have[k] if have else ()) if k in reduced else next(kept, ())
                    for k in range(rank)]
            return tuple(need)
        if a.opcode == "reshape":
            need = [()] * rank
            for i in range(len(result)):
                for _, j in _dim_sources(a, i, a.arrays[0].dims, [o]):
                    need[j] = result[i]
            return tuple(need)
        if _same_tensor(a, o) and len(result) == rank:
            return result
        return None

    def _cause(self, a: Instruction, t: _Target) -> str | None:
        """What fixed `a`'s layout, when it was not the math: a sharding constraint or a
        shard_map's in_specs, found at `a` or downstream of it through instructions that keep
        its sharding. (The explorer's jit leaves output layouts to propagation, so an output
        is never the cause.)"""
        seen = set()
        todo = [a]
        while todo and len(seen) < 64:
            i = todo.pop(0)
            if i.name in seen:
                continue
            seen.add(i.name)
            if _primitive(i.op_name) == "sharding_constraint" or (
                    i.opcode == "custom-call" and "Sharding" in (i.attr("custom_call_target")
                                                                 or "")
                    and "SPMD" not in (i.attr("custom_call_target") or "")):
                return (f"as the sharding constraint {_constraint_point(i.op_name) or ''}"
                        f"{self._where(i, t)} asks"
                        + ("" if i is a else " (propagated back to it)"))
            if "SPMDFullToShardShape" in (i.attr("custom_call_target") or "") or (
                    "shard_map" == _primitive(i.op_name)):
                return "as the shard_map's in_specs ask"
            if i is not a and i.opcode not in _LAYOUT_OPS:
                continue
            for u in self.users.get(i.name, []):
                if u.sharding == a.sharding or u.opcode == "tuple":
                    todo.append(u)
        return None

    # -- tracing dimensions back to inputs -------------------------------------------------------

    def _batch_dim(self, *operand_dims: tuple[Instruction, int]
                   ) -> tuple[Instruction, int] | None:
        """The input whose dimension 0 (the batch dimension, by the convention of jax models)
        a backward-pass reduction sums over: every program input that each summed dimension
        comes from is one at its dimension 0. A weight's dimension (the `mlp` dimension of w1,
        say) on either side rules it out, however it is sharded."""
        common = None
        for o, d in operand_dims:
            sources = self._trace(o, d)
            if not sources or any(dim != 0 for _, dim in sources):
                return None
            names = {i.name: i for i, _ in sources}
            common = names if common is None else {
                n: i for n, i in common.items() if n in names} or common
        if not common:
            return None
        return common[min(common)], 0

    def _trace(self, start: Instruction, dim: int) -> set[tuple[Instruction, int]]:
        """The program inputs (entry parameters) and dimensions that `dim` of `start` comes
        from, following instructions that keep dimensions apart (element-wise ops, broadcast,
        transpose, dot, reduce, reshapes that keep the dimension); where the trail is lost (a
        merged dimension, a call) it adds nothing."""
        todo = [(start, dim)]
        seen = set()
        found = set()
        while todo and len(seen) < 4096:
            i, d = todo.pop()
            if (i.name, d) in seen or not i.arrays:
                continue
            seen.add((i.name, d))
            if i.opcode == "parameter":
                if i.computation == self.prop.entry:
                    found.add((i, d))
                continue
            dims = i.arrays[0].dims
            ops = [self.names[o] for o in i.operands if o in self.names]
            todo += _dim_sources(i, d, dims, ops)
        return found

    # -- naming ----------------------------------------------------------------------------------

    def _axes(self, i: Instruction) -> tuple[tuple[str, ...], ...] | None:
        arrays = i.arrays
        if len(arrays) != 1:
            return None
        key = (i.sharding, len(arrays[0].dims))
        if key not in self._layouts:
            self._layouts[key] = dim_axes(key[0], key[1], self.mesh)
        return self._layouts[key]

    def _name(self, i: Instruction | None, t: _Target) -> str:
        if i is None:
            return "an operand"
        if i.opcode == "parameter":
            return self._param_name(i)
        constraint = _constraint_point(i.op_name)
        if constraint is not None:
            return f"the sharding constraint {constraint}{self._where(i, t)}".rstrip()
        own = f"the `{_primitive(i.op_name, with_einsum=True) or i.opcode}` " \
              f"{self._where(i, t)}".rstrip()
        # A parameter only reshaped, broadcast or copied on its way here is named as well.
        src = i
        for _ in range(8):
            if src.opcode not in _RENAMING or len(src.operands) != 1 \
                    or src.operands[0] not in self.names:
                break
            src = self.names[src.operands[0]]
        if src is not i and src.opcode == "parameter":
            return f"{self._param_name(src)} ({_RENAMING[i.opcode]} {self._where(i, t)})".replace(
                " )", ")")
        return own

    def _param_name(self, i: Instruction) -> str:
        if i.computation != self.prop.entry:
            return f"a parameter of `{i.computation}`"
        number = ints(i.operand_text)
        if number and number[0] < len(self.inputs):
            return f"input `{self.inputs[number[0]]}`"
        return f"input `{i.op_name}`" if i.op_name else f"parameter {i.operand_text}"

    def _where(self, i: Instruction, t: _Target) -> str:
        return self._loc_text(self._location(self.prop, i), t)

    def _loc_text(self, loc, t: _Target) -> str:
        if loc is None:
            return ""
        if t.location is not None and loc[0] == t.location[0]:
            return f"at line {loc[1]}"
        return f"at {loc[0].replace(chr(92), '/').rsplit('/', 1)[-1]}:{loc[1]}"

    def _show(self, i: Instruction) -> str:
        """One instruction as evidence: `%name = f32[8,64] opcode(operands)`, op_name."""
        shape = " ".join(a.text() for a in i.arrays)
        ops = i.operand_text if i.opcode == "parameter" else ", ".join(
            "%" + o for o in i.operands)
        meta = f" [{i.op_name}]" if i.op_name else ""
        return f"%{i.name} = {shape} {i.opcode}({ops}){meta}"

    # -- combined --------------------------------------------------------------------------------

    def _combine(self, kind: CollectiveKind, whys: list[Why]) -> Why:
        reasons = {w.reason for w in whys}
        n = len(whys)
        if len(reasons) == 1:
            (reason,) = reasons
            first = whys[0]
            text = (f"XLA combined {n} {kind}s into one, each for the same reason; the first: "
                    f"{first.text}") if reason is not Reason.UNKNOWN else first.text
            return Why(reason, text, first.evidence)
        counts = {r: sum(w.reason is r for w in whys) for r in reasons}
        listed = ", ".join(f"{c} {r}" for r, c in sorted(counts.items(), key=lambda x: -x[1]))
        known = [w for w in whys if w.reason is not Reason.UNKNOWN]
        # One code for several reasons would claim too much: the parts are listed instead.
        return Why(Reason.UNKNOWN,
                   f"XLA combined {n} {kind}s with different reasons ({listed}); the first "
                   f"known: {known[0].text}" if known else f"XLA combined {n} {kind}s; "
                   "no reason found for any part.",
                   known[0].evidence if known else Evidence())


# --------------------------------------------------------------------------- helpers


def _combined_op_names(op_name: str) -> list[str]:
    """The op_names XLA joined when it combined collectives: `prefix/(a:b:c)`."""
    m = re.match(r"^(.*?/)?\((.*)\)$", op_name)
    if not m or ":" not in m.group(2):
        return []
    return [(m.group(1) or "") + part for part in m.group(2).split(":")]


def _primitive(op_name: str, with_einsum: bool = False) -> str:
    """The jax primitive of an op_name: `jit(f)/jvp(bsd,df->bsf)/dot_general` -> `dot_general`
    (with its einsum, `dot_general bsd,df->bsf`, when asked)."""
    if not op_name:
        return ""
    first = op_name.split(";")[0]
    parts = re.split(r"/(?![^()]*\))", first)
    prim = parts[-1]
    if with_einsum and len(parts) > 1:
        m = re.search(r"\(([^()]*->[^()]*)\)", parts[-2])
        if m:
            return f"{prim} {m.group(1)}"
    return prim


_CONFLICT = ("where propagation gave it a different layout from its operand (a conflict between "
             "the layouts around it)")


def _same_tensor(a: Instruction, o: Instruction) -> bool:
    """Whether `a` only copies, converts or maps `o` element by element (same shape), or
    transposes or reshapes it: then a layout change at `a` is a change of `o`'s layout."""
    if a.opcode in ("transpose", "reshape", "copy", "custom-call", "bitcast", "tuple"):
        return True
    return (a.opcode in _LAYOUT_OPS and bool(a.arrays) and bool(o.arrays)
            and a.arrays[0].dims == o.arrays[0].dims)


_RENAMING = {"reshape": "reshaped", "broadcast": "broadcast", "copy": "copied",
             "convert": "converted", "bitcast": "reshaped", "transpose": "transposed"}


def _constraint_point(op_name: str) -> str | None:
    """"" or " `name`" for a sharding constraint (the name of its named scope, as the built-in
    workloads give every constraint point); None when the op is not a constraint."""
    if _primitive(op_name) != "sharding_constraint":
        return None
    parts = re.split(r"/(?![^()]*\))", op_name.split(";")[0])
    scope = parts[-2] if len(parts) > 1 else ""
    scope = re.sub(r"^(?:transpose\()?(?:jvp\()?([^()]*)\)*$", r"\1", scope)
    return f"`{scope}` " if scope and not scope.startswith("jit(") else ""


def _moved_by(t: _Target, verb: str) -> str:
    """`the all-gather over `data` gathers`, or for a chain of steps, `the 2 collectives
    ending in this all-gather (over `data` and `model`) gather`."""
    if t.steps > 1:
        return (f"the {t.steps} collectives ending in this {t.kind} (over "
                f"{_axes_phrase(t.chain_axes)}) {verb}")
    return f"the {t.kind} over {_axes_phrase(t.axes)} {verb}s"


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:1].isupper() and text[1:2].islower() else text


def _backward(i: Instruction) -> bool:
    return "transpose(" in i.op_name


def _conv_contracting(a: Instruction) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The input-feature dimensions of a convolution's operands, from dim_labels=b01f_01io->b01f."""
    labels = a.attr("dim_labels") or ""
    m = re.match(r"([a-z0-9]+)_([a-z0-9]+)->", labels)
    if not m:
        return (), ()
    return (m.group(1).index("f"),), (m.group(2).index("i"),)


def _indexed_dims(a: Instruction, names: dict[str, Instruction]) -> list[int]:
    """The dimensions of operand 0 that a gather/scatter/dynamic slice indexes into."""
    if a.opcode == "gather":
        return sorted(set(ints(a.attr("start_index_map"))))
    if a.opcode == "scatter":
        return sorted(set(ints(a.attr("scatter_dims_to_operand_dims"))))
    src = names.get(a.operands[0])
    if src is None or not src.arrays or not a.arrays:
        return []
    full = src.arrays[0].dims
    if a.opcode == "dynamic-slice":
        part = ints(a.attr("dynamic_slice_sizes"))
    else:   # dynamic-update-slice: the update is operand 1
        upd = names.get(a.operands[1]) if len(a.operands) > 1 else None
        part = upd.arrays[0].dims if upd is not None and upd.arrays else ()
    return [d for d, (n, p) in enumerate(zip(full, part, strict=False)) if p < n]


def _dim_sources(i: Instruction, d: int, dims, ops: list[Instruction]):
    """(operand, dimension) pairs that dimension d of i's result comes from."""
    op = i.opcode
    if op == "transpose":
        perm = ints(i.attr("dimensions"))
        return [(ops[0], perm[d])] if ops and d < len(perm) else []
    if op == "broadcast":
        mapping = ints(i.attr("dimensions"))
        return [(ops[0], j) for j, r in enumerate(mapping) if r == d][:1] if ops else []
    if op == "dot" and len(ops) == 2:
        lb, rb = ints(i.attr("lhs_batch_dims")), ints(i.attr("rhs_batch_dims"))
        lc, rc = ints(i.attr("lhs_contracting_dims")), ints(i.attr("rhs_contracting_dims"))
        lfree = [k for k in range(len(ops[0].arrays[0].dims)) if k not in lb + lc] \
            if ops[0].arrays else []
        rfree = [k for k in range(len(ops[1].arrays[0].dims)) if k not in rb + rc] \
            if ops[1].arrays else []
        if d < len(lb):
            return [(ops[0], lb[d]), (ops[1], rb[d])]
        d -= len(lb)
        if d < len(lfree):
            return [(ops[0], lfree[d])]
        d -= len(lfree)
        return [(ops[1], rfree[d])] if d < len(rfree) else []
    if op == "reduce" and ops:
        reduced = set(ints(i.attr("dimensions")))
        kept = [k for k in range(len(ops[0].arrays[0].dims)) if k not in reduced] \
            if ops[0].arrays else []
        return [(ops[0], kept[d])] if d < len(kept) else []
    if op == "reshape" and ops and ops[0].arrays:
        src = ops[0].arrays[0].dims
        before = math.prod(dims[:d])
        for j in range(len(src)):
            if math.prod(src[:j]) == before and src[j] == dims[d]:
                return [(ops[0], j)]
        return []
    if op in ("slice", "dynamic-slice", "pad", "concatenate", "reverse", "reduce-window"):
        return [(ops[0], d)] if ops and ops[0].arrays and len(ops[0].arrays[0].dims) == len(
            dims) else []
    if op in _LAYOUT_OPS and op not in ("tuple", "get-tuple-element", "parameter"):
        return [(o, d) for o in ops if o.arrays and o.arrays[0].dims == tuple(dims)]
    return []


def explain_collectives(optimized: HloModule, propagated: HloModule | None, mesh: MeshSpec,
                        inputs: Sequence[str] = ()) -> dict[str, Why]:
    """hlo name -> Why for every collective of the optimized module (an async pair once, under
    the name of its -start). `inputs` names the program's inputs in parameter order."""
    reader = WhyReader(optimized, propagated, mesh, inputs)
    out = {}
    for instr in optimized.instructions():
        kind, _ = collective_kind(instr.opcode)
        if kind is None:
            continue
        try:
            out[instr.name] = reader.explain(instr)
        except Exception as e:  # a module shape the reader does not know: say so, go on
            out[instr.name] = Why(Reason.UNKNOWN, f"No reason found: the reader could not "
                                  f"follow this {kind} ({type(e).__name__}: {e}).")
    return out
