"""`gather-operand`: an operand is gathered because the computation that uses it needs it less
sharded (FSDP weights before a matmul; the scaling book's case 4). When the user only moves
or maps elements, the tensor itself changes layout: a reshard."""

from __future__ import annotations

import math

from explorer._src.hlo.module import Instruction, ints
from explorer._src.report.why.context import Context
from explorer._src.report.why.evidence import evidence
from explorer._src.report.why.layout import DimAxes, spec_text
from explorer._src.report.why.metadata import primitive
from explorer._src.report.why.ops import same_tensor
from explorer._src.report.why.reason import Reason, Why
from explorer._src.report.why.rules.base import first_anchor
from explorer._src.report.why.targets import CollectiveToExplain
from explorer._src.report.why.text import (
    axes_phrase,
    clash,
    layout_change,
    moved_by,
    name,
    where,
)


def gather_exact(ctx: Context, t: CollectiveToExplain) -> Why | None:
    """An operand that is whole after the gather in exactly the collective's result shape.
    Anchors come ranked with the one that uses the moved input first (see targets._rank)."""
    return first_anchor(t, lambda a: _gather_at(ctx, a, t, exact=True))


def gather(ctx: Context, t: CollectiveToExplain) -> Why | None:
    """As `gather_exact`, allowing that XLA reshaped the operand on the way (same size)."""
    return first_anchor(t, lambda a: _gather_at(ctx, a, t, exact=False))


def _gather_at(ctx: Context, a: Instruction, t: CollectiveToExplain, exact: bool) -> Why | None:
    found = _gathered_operand(ctx, a, t, exact)
    if found is None:
        return None
    o, after, d = found
    before = ctx.axes(o)
    if same_tensor(a, o):
        # The consumer only moves or maps elements: the tensor itself changes layout.
        c = clash(ctx, o, a, before, after, t)
        return Why(Reason.RESHARD, layout_change(
            ctx, o, before, after, a, t, f"{moved_by(t, 'gather')} dimension {d}") + c.text,
            evidence(ctx, a, (o,), after, [o], c.inputs, c.before, c.after))
    place = where(ctx, a, t)
    prim = primitive(a.op_name, with_einsum=True)
    need = _dot_need(ctx, a, o, d, t) if a.opcode == "dot" else ""
    # The sentence names the operand, and a dot's need its other operand after it.
    named = [o, _other_operand(ctx, a, o)] if need else [o]
    if a.opcode == "broadcast":
        need = (f"`{prim}` {place} broadcasts {name(ctx, o, t)} ({spec_text(before)}) into "
                f"a result laid out as {spec_text(ctx.axes(a))}, where the dimensions "
                f"that come from it are not split that way: it must be "
                f"{spec_text(after)} there")
    if not need:
        need = (f"`{prim}` {place} needs {name(ctx, o, t)} less sharded than it is: "
                f"{spec_text(before)} → {spec_text(after)}")
    return Why(Reason.GATHER_OPERAND,
               f"{need}; {moved_by(t, 'gather')} it along dimension {d} before use.",
               evidence(ctx, a, (o,), after, named))


def _gathered_operand(ctx: Context, a: Instruction, t: CollectiveToExplain, exact: bool
                      ) -> tuple[Instruction, DimAxes, int] | None:
    """The operand of `a` the all-gather gathers, its layout after and its gathered
    dimension: sharded over the collective's axes on its gather dimension, the same producer
    as in the optimized module when that is known, and whole there afterwards in the
    collective's result shape (required when `exact`; XLA may have reshaped it on the way
    otherwise)."""
    found = []
    for operand_name in a.operands:
        o = ctx.prop_names.get(operand_name)
        if o is None or not o.arrays:
            continue
        oa = ctx.axes(o)
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
            local = ctx.shard_dims(o.arrays[0].dims, after)
            if local != tuple(t.dims):
                # XLA may have reshaped it on the way, but not changed its size.
                if exact or math.prod(local) != math.prod(t.dims):
                    continue
                score += 1
            moved = ctx.input_of(ctx.optimized, t.operand)
            if moved is not None:
                if ctx.input_of(ctx.propagated, o) != moved:
                    score += 4
            elif t.operand is not None and t.operand.op_name and \
                    t.operand.op_name != o.op_name:
                score += 4
            found.append((score, o, after, d))
    if not found:
        return None
    _, o, after, d = min(found, key=lambda f: f[0])
    return o, after, d


def _other_operand(ctx: Context, a: Instruction, o: Instruction) -> Instruction | None:
    """The operand of dot `a` that `o` is not; None where it has one operand."""
    side = 0 if a.operands[0] == o.name else 1
    return ctx.prop_names.get(a.operands[1 - side]) if len(a.operands) > 1 else None


def _dot_need(ctx: Context, a: Instruction, o: Instruction, d: int, t: CollectiveToExplain) -> str:
    """Why a dot needs its operand `o` whole along `d`: its contracting dimension is split
    unlike the other operand's, or both operands are split over the same axes in free
    dimensions; "" when neither."""
    side = 0 if a.operands[0] == o.name else 1
    other = _other_operand(ctx, a, o)
    mine, theirs = ("lhs", "rhs") if side == 0 else ("rhs", "lhs")
    contracting = ints(a.attr(f"{mine}_contracting_dims"))
    prim = primitive(a.op_name, with_einsum=True)
    place = where(ctx, a, t)
    called = name(ctx, o, t)
    oa_o = ctx.axes(o) or ()
    by = axes_phrase([x for x in t.chain_axes if d < len(oa_o) and x in oa_o[d]])
    before = spec_text(ctx.axes(o))
    oa = ctx.axes(other) if other is not None else None
    other_name = name(ctx, other, t) if other is not None else "its other operand"
    if d in contracting:
        j = contracting.index(d)
        other_dims = ints(a.attr(f"{theirs}_contracting_dims"))
        there = oa[other_dims[j]] if oa and j < len(other_dims) and \
            other_dims[j] < len(oa) else ()
        how = ("is not split there" if not there else
               f"is split there over {axes_phrase(there)}")
        return (f"`{prim}` {place} contracts dimension {d} of {called} ({before}), sharded "
                f"over {by}, while {other_name} {how}: {called} must be whole along it")
    if oa and any(set(t.chain_axes) & set(ax) for ax in oa):
        return (f"`{prim}` {place} has {called} ({before}) and {other_name} "
                f"({spec_text(oa)}) both sharded over {by} in non-contracting dimensions, "
                f"which its result cannot keep both of: {called} must be whole along "
                f"dimension {d}")
    return ""
