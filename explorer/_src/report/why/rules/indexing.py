"""`indexing`: a gather, scatter or dynamic slice along a sharded dimension: each device
handles its own part of the indexed dimension, or the dimension is brought together first.
A slice, pad or concatenate at fixed offsets along a sharded dimension (`slicing`) puts the
parts of its result on other devices than the elements they hold: a permute moves them."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from explorer._src.hlo.module import Instruction
from explorer._src.report.why.context import Context
from explorer._src.report.why.evidence import evidence
from explorer._src.report.why.layout import DimAxes
from explorer._src.report.why.metadata import primitive
from explorer._src.report.why.ops import INDEXING_OPS, SLICING_OPS, indexed_dims, sliced_dims
from explorer._src.report.why.reason import Reason, Why
from explorer._src.report.why.rules.base import first_anchor
from explorer._src.report.why.targets import CollectiveToExplain
from explorer._src.report.why.text import axes_phrase, dims_phrase, moved_by, name, where


def indexing(ctx: Context, t: CollectiveToExplain) -> Why | None:
    return first_anchor(t, lambda a: _indexing_at(ctx, a, t))


def _split_along(ctx: Context, a: Instruction, opcodes: set[str], dims_of: Callable,
                 axes: Sequence[str]) -> tuple[Instruction, DimAxes, list[int]] | None:
    """`a`'s operand 0, its layout, and the dimensions `dims_of` names that it has split
    over any of `axes`; None when `a` is not one of `opcodes` or no such dimension is."""
    if a.opcode not in opcodes or not a.operands:
        return None
    src = ctx.prop_names.get(a.operands[0])
    sa = ctx.axes(src) if src is not None else None
    if sa is None:
        return None
    dims = [d for d in dims_of(a, ctx.prop_names) if d < len(sa) and set(axes) & set(sa[d])]
    return (src, sa, dims) if dims else None


def _indexing_at(ctx: Context, a: Instruction, t: CollectiveToExplain) -> Why | None:
    found = _split_along(ctx, a, INDEXING_OPS, indexed_dims, t.axes)
    if found is None:
        return None
    src, sa, dims = found
    by = axes_phrase(t.axes)
    how = (f"each device handles the indices that fall in its own part and the {t.kind} "
           f"over {by} combines the parts" if t.is_reduction
           else f"the {t.kind} over {by} brings the indexed dimension together first")
    return Why(Reason.INDEXING,
               f"`{primitive(a.op_name)}` {where(ctx, a, t)} indexes {dims_phrase(dims)} "
               f"of {name(ctx, src, t)}, which is sharded over {by}: {how}.",
               evidence(ctx, a, (src,), ctx.axes(a), [src]))


_SLICING_VERB = {"slice": "cuts", "pad": "pads", "concatenate": "joins along"}


def slicing(ctx: Context, t: CollectiveToExplain) -> Why | None:
    """A data movement next to a slice, pad or concatenate along a dimension its operand has
    split over the collective's axes: at fixed offsets the result's parts start elsewhere
    than the operand's (jax.random.split's halves of a sharded key array, for one)."""
    return first_anchor(t, lambda a: _slicing_at(ctx, a, t))


def _slicing_at(ctx: Context, a: Instruction, t: CollectiveToExplain) -> Why | None:
    found = _split_along(ctx, a, SLICING_OPS, sliced_dims, t.chain_axes)
    if found is None:
        return None
    src, sa, dims = found
    by = axes_phrase(x for x in t.chain_axes if x in sa[dims[0]])
    cut = _cut(a, src, dims)
    return Why(Reason.INDEXING,
               f"`{primitive(a.op_name)}` {where(ctx, a, t)} ({a.opcode}) "
               f"{_SLICING_VERB[a.opcode]} {cut}{dims_phrase(dims)} of {name(ctx, src, t)}, which "
               f"is split over {by}: at fixed offsets the parts of its result lie on other "
               f"devices than the elements they hold, and {moved_by(t, 'move')} them there.",
               evidence(ctx, a, (src,), ctx.axes(a), [src]))


def _cut(a: Instruction, src: Instruction, dims: list[int]) -> str:
    """`elements 0:24 of 48 of ` for a slice of one dimension; "" otherwise."""
    ranges = re.findall(r"\[(\d+):(\d+)", a.attr("slice") or "")
    if a.opcode != "slice" or len(dims) != 1 or dims[0] >= len(ranges) or not src.arrays:
        return ""
    start, limit = ranges[dims[0]]
    return f"elements {start}:{limit} of {src.arrays[0].dims[dims[0]]} of "
