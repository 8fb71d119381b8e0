"""`partial-sum`: a dot contracts, or a reduce reduces, a dimension that is sharded over the
collective's axes, so each device holds a partial result (the scaling book's sharded-matmul
cases 2 and 3, https://jax-ml.github.io/scaling-book/sharding/). In a backward pass a sum
over the batch dimension is said as the gradient's sum over the batch."""

from __future__ import annotations

from explorer._src.hlo.module import Instruction, ints
from explorer._src.report.why.context import Context
from explorer._src.report.why.evidence import evidence
from explorer._src.report.why.layout import DimAxes
from explorer._src.report.why.metadata import is_backward, primitive
from explorer._src.report.why.ops import conv_contracting
from explorer._src.report.why.reason import Reason, Why
from explorer._src.report.why.rules.base import first_anchor
from explorer._src.report.why.targets import CollectiveToExplain
from explorer._src.report.why.text import axes_phrase, dims_phrase, name, where


def partial_sum(ctx: Context, t: CollectiveToExplain) -> Why | None:
    return first_anchor(t, lambda a: _partial_sum_at(ctx, a, t))


def _partial_sum_at(ctx: Context, a: Instruction, t: CollectiveToExplain) -> Why | None:
    if a.opcode in ("dot", "convolution"):
        return _partial_dot(ctx, a, t)
    if a.opcode == "reduce":
        return _partial_reduce(ctx, a, t)
    return None


def _batch_sentence(ctx: Context, t: CollectiveToExplain, prim: str, place: str, how: str,
                    batch: tuple[Instruction, int], by: str) -> str:
    """A backward-pass reduction over the batch dimension: the gradient's sum over it."""
    return (f"Backward pass: `{prim}` {place} computes a gradient by {how} dimension "
            f"{batch[1]} of {name(ctx, batch[0], t)}, the batch dimension; the gradient is "
            f"summed over the batch dimension, sharded over {by}, so each device holds the sum "
            f"over its own part of the batch and the {t.kind} over {by} adds the parts.")


def _partial_dot(ctx: Context, a: Instruction, t: CollectiveToExplain) -> Why | None:
    lhs, rhs = (ctx.prop_names.get(o) for o in a.operands[:2])
    if lhs is None or rhs is None:
        return None
    la, ra = ctx.axes(lhs), ctx.axes(rhs)
    if a.opcode == "convolution":
        lc, rc = conv_contracting(a)
    else:
        lc, rc = ints(a.attr("lhs_contracting_dims")), ints(a.attr("rhs_contracting_dims"))
    for l_dim, r_dim in zip(lc, rc, strict=False):
        split = set(la[l_dim] if la and l_dim < len(la) else ()) | set(
            ra[r_dim] if ra and r_dim < len(ra) else ())
        axes = [x for x in t.axes if x in split]
        if not axes:
            continue
        place = where(ctx, a, t)
        prim = primitive(a.op_name, with_einsum=True)
        by = axes_phrase(axes)
        batch = ctx.batch_dim((lhs, l_dim), (rhs, r_dim)) if is_backward(a.op_name) else None
        if batch is not None:
            text = _batch_sentence(ctx, t, prim, place, "contracting", batch, by)
            named = [batch[0]]
        else:
            named = [lhs, rhs]
            whose = _whose(ctx, lhs, la, l_dim, rhs, ra, r_dim, axes, t)
            text = (f"{'Backward pass: ' if is_backward(a.op_name) else ''}`{prim}` {place} "
                    f"contracts dimension {l_dim} of {name(ctx, lhs, t)} with dimension {r_dim} "
                    f"of {name(ctx, rhs, t)}, which is sharded over {by}{whose}: each device "
                    f"holds a partial sum, and the {t.kind} over {by} adds them.")
        return Why(Reason.PARTIAL_SUM, text,
                   evidence(ctx, a, (lhs, rhs), ctx.axes(a), named))
    return None


def _whose(ctx: Context, lhs: Instruction, la: DimAxes | None, l_dim: int, rhs: Instruction,
           ra: DimAxes | None, r_dim: int, axes: list[str], t: CollectiveToExplain) -> str:
    """Which operand holds the split contracting dimension: ` in both` or ` in input `w``."""
    in_l = la is not None and l_dim < len(la) and set(axes) <= set(la[l_dim])
    in_r = ra is not None and r_dim < len(ra) and set(axes) <= set(ra[r_dim])
    if in_l and in_r:
        return " in both"
    return f" in {name(ctx, lhs if in_l else rhs, t)}"


def _partial_reduce(ctx: Context, a: Instruction, t: CollectiveToExplain) -> Why | None:
    src = ctx.prop_names.get(a.operands[0]) if a.operands else None
    if src is None:
        return None
    sa = ctx.axes(src)
    if sa is None:
        return None
    reduced = ints(a.attr("dimensions"))
    dims = [d for d in reduced if d < len(sa) and set(t.axes) & set(sa[d])]
    if not dims:
        return None
    op = ctx.reducer(a)
    by = axes_phrase([x for x in t.axes if any(x in sa[d] for d in dims)])
    place = where(ctx, a, t)
    prim = primitive(a.op_name)
    batch = None
    if is_backward(a.op_name) and op == "sum":
        batch = ctx.batch_dim(*((src, d) for d in dims))
    if batch is not None:
        text = _batch_sentence(ctx, t, prim, place, "summing", batch, by)
    else:
        text = (f"{'Backward pass: ' if is_backward(a.op_name) else ''}`{prim}` {place} takes "
                f"the {op} over {dims_phrase(dims)} of {name(ctx, src, t)}, sharded over "
                f"{by}: each device holds a partial {op}, and the {t.kind} over {by} "
                "combines them.")
    named = batch[0] if batch is not None else src
    return Why(Reason.PARTIAL_SUM, text, evidence(ctx, a, (src,), ctx.axes(a), [named]))
