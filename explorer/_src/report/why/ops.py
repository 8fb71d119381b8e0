"""What HLO opcodes do to layouts and dimensions: which only move or map elements, which
index, and which operand dimension each result dimension comes from."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.hlo.module import Instruction, ints

COLLECTIVE_OPCODES = {k.value for k in CollectiveKind} | {
    f"{k.value}-start" for k in CollectiveKind}
# Ops whose result element depends only on the same element of each operand, or that only
# move elements around: a layout change across them is a reshard, not a need of the math.
LAYOUT_OPS = {
    "copy", "convert", "bitcast", "bitcast-convert", "reshape", "transpose", "broadcast",
    "custom-call", "tuple", "get-tuple-element", "parameter", "slice", "concatenate", "pad",
    "reverse", "select", "add", "subtract", "multiply", "divide", "maximum", "minimum",
    "negate", "exponential", "log", "tanh", "logistic", "rsqrt", "sqrt", "compare", "and",
    "or", "not", "xor", "abs", "sign", "power", "clamp", "floor", "ceil", "round-nearest-even",
    "round-nearest-afz", "exponential-minus-one", "log-plus-one", "cosine", "sine", "remainder",
    "atan2", "is-finite", "erf", "cbrt", "shift-left", "shift-right-logical",
    "shift-right-arithmetic", "real", "imag", "optimization-barrier",
}
INDEXING_OPS = {"gather", "scatter", "dynamic-slice", "dynamic-update-slice"}
# Ops that cut, pad or join along dimensions at fixed offsets: along a sharded dimension the
# parts of the result lie on other devices than the elements they come from.
SLICING_OPS = {"slice", "pad", "concatenate"}
# The reduction a reducer computation's root computes, as a sentence names it.
REDUCER = {"add": "sum", "maximum": "maximum", "minimum": "minimum", "multiply": "product",
           "and": "logical and", "or": "logical or"}
# Ops that keep a tensor's values (only its shape or type changes), with the word for it.
RENAMING = {"reshape": "reshaped", "broadcast": "broadcast", "copy": "copied",
            "convert": "converted", "bitcast": "reshaped", "transpose": "transposed"}


def same_tensor(a: Instruction, o: Instruction) -> bool:
    """Whether `a` only copies, converts or maps `o` element by element (same shape), or
    transposes or reshapes it: then a layout change at `a` is a change of `o`'s layout."""
    if a.opcode in ("transpose", "reshape", "copy", "custom-call", "bitcast", "tuple"):
        return True
    return (a.opcode in LAYOUT_OPS and bool(a.arrays) and bool(o.arrays)
            and a.arrays[0].dims == o.arrays[0].dims)


def conv_contracting(a: Instruction) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The input-feature dimensions of a convolution's operands, from dim_labels=b01f_01io->b01f."""
    labels = a.attr("dim_labels") or ""
    m = re.match(r"([a-z0-9]+)_([a-z0-9]+)->", labels)
    if not m:
        return (), ()
    return (m.group(1).index("f"),), (m.group(2).index("i"),)


def indexed_dims(a: Instruction, names: Mapping[str, Instruction]) -> list[int]:
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


def sliced_dims(a: Instruction, names: Mapping[str, Instruction]) -> list[int]:
    """The dimensions of operand 0 that a slice cuts (not start 0, full length, stride 1), a
    pad pads, or a concatenate joins along."""
    if a.opcode == "concatenate":
        return sorted(set(ints(a.attr("dimensions"))))
    if a.opcode == "pad":
        pads = (a.attr("padding") or "").split("x")
        return [d for d, p in enumerate(pads) if any(int(n) for n in re.findall(r"-?\d+", p))]
    src = names.get(a.operands[0]) if a.operands else None
    if a.opcode != "slice" or src is None or not src.arrays:
        return []
    ranges = re.findall(r"\[(\d+):(\d+)(?::(\d+))?\]", a.attr("slice") or "")
    full = src.arrays[0].dims
    return [d for d, (start, limit, stride) in enumerate(ranges) if d < len(full) and (
        int(start) != 0 or int(limit) != full[d] or (stride and int(stride) != 1))]


def dim_sources(i: Instruction, d: int, dims: Sequence[int], ops: list[Instruction]
                ) -> list[tuple[Instruction, int]]:
    """(operand, dimension) pairs that dimension d of i's result (of shape `dims`) comes from;
    `ops` are i's operands."""
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
    if op in LAYOUT_OPS and op not in ("tuple", "get-tuple-element", "parameter"):
        return [(o, d) for o in ops if o.arrays and o.arrays[0].dims == tuple(dims)]
    return []
