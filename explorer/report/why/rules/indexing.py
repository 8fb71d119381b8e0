"""`indexing`: a gather, scatter or dynamic slice along a sharded dimension: each device
handles its own part of the indexed dimension, or the dimension is brought together first."""

from __future__ import annotations

from explorer.hlo.module import Instruction
from explorer.report.why.context import Context
from explorer.report.why.layout import spec_text
from explorer.report.why.metadata import primitive
from explorer.report.why.ops import INDEXING_OPS, indexed_dims
from explorer.report.why.reason import Evidence, Reason, Why
from explorer.report.why.rules.base import first_anchor
from explorer.report.why.targets import Target
from explorer.report.why.text import axes_phrase, dims_phrase, name, show, where


def indexing(ctx: Context, t: Target) -> Why | None:
    return first_anchor(t, lambda a: _indexing_at(ctx, a, t))


def _indexing_at(ctx: Context, a: Instruction, t: Target) -> Why | None:
    if a.opcode not in INDEXING_OPS or not a.operands:
        return None
    src = ctx.prop_names.get(a.operands[0])
    sa = ctx.axes(src) if src is not None else None
    if sa is None:
        return None
    dims = [d for d in indexed_dims(a, ctx.prop_names) if d < len(sa)
            and set(t.axes) & set(sa[d])]
    if not dims:
        return None
    by = axes_phrase(t.axes)
    how = (f"each device handles the indices that fall in its own part and the {t.kind} "
           f"over {by} combines the parts" if t.is_reduction
           else f"the {t.kind} over {by} brings the indexed dimension together first")
    return Why(Reason.INDEXING,
               f"`{primitive(a.op_name)}` {where(ctx, a, t)} indexes {dims_phrase(dims)} "
               f"of {name(ctx, src, t)}, which is sharded over {by}: {how}.",
               Evidence(consumer=show(a), producer=show(src),
                        sharding_before=spec_text(sa),
                        sharding_after=spec_text(ctx.axes(a))))
