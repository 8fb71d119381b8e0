"""`reshard`: the layout moves between producer and consumer (a sharding constraint, a
shard_map's in_specs, or propagation meeting a conflict; the explorer's jit leaves output
layouts to propagation, so an output spec never is the cause). Read on the anchor's operands
(`reshard_operand`) or on the users of its result (`reshard_result`)."""

from __future__ import annotations

from explorer._src.hlo.module import Instruction
from explorer._src.report.why.context import Context
from explorer._src.report.why.evidence import evidence
from explorer._src.report.why.layout import DimAxes, spec_text
from explorer._src.report.why.metadata import constraint_point, primitive
from explorer._src.report.why.needs import required
from explorer._src.report.why.ops import RENAMING, same_tensor
from explorer._src.report.why.reason import Reason, Why
from explorer._src.report.why.rules.base import first_anchor
from explorer._src.report.why.targets import CollectiveToExplain
from explorer._src.report.why.text import cause, clash, layout_change, moved_by, name, where


def _moved_axes(have: DimAxes, need: DimAxes) -> set[str]:
    """The mesh axes on which two layouts of one tensor differ."""
    return {x for h, n in zip(have, need, strict=True) for x in set(h) ^ set(n)}


def reshard_operand(ctx: Context, t: CollectiveToExplain) -> Why | None:
    """An operand of the anchor laid out, over the collective's axes, unlike what the anchor
    needs of it. For an op that only moves or maps elements, the need is its own result's
    layout, and the change is a reshard (caused by a constraint, or by propagation meeting a
    conflict); for a computation, a need to see more of the operand is gather-operand."""
    return first_anchor(t, lambda a: _operand_at(ctx, a, t))


def _operand_at(ctx: Context, a: Instruction, t: CollectiveToExplain) -> Why | None:
    for operand_name in a.operands:
        o = ctx.prop_names.get(operand_name)
        have = ctx.axes(o) if o is not None else None
        need = required(ctx, a, a.operands.index(operand_name)) if have is not None else None
        if need is None or len(need) != len(have) or need == have:
            continue
        if not _moved_axes(have, need) & set(t.chain_axes):
            continue       # the layouts differ, but not over this collective's axes
        removal = all(set(n) <= set(h) for h, n in zip(have, need, strict=True))
        c = clash(ctx, o, a, have, need, t)
        if same_tensor(a, o):
            return Why(Reason.RESHARD, layout_change(
                ctx, o, have, need, a, t, f"{moved_by(t, 'move')} the data") + c.text,
                evidence(ctx, a, (o,), need, [o], c.inputs, c.before, c.after))
        prim = primitive(a.op_name, with_einsum=True)
        place = where(ctx, a, t)
        if a.opcode == "dot":
            how = ("its batch and free dimensions as the result has them, its contracting "
                   "dimensions as the other operand has them")
        else:
            how = "as its result's layout asks"
        if removal:
            return Why(Reason.GATHER_OPERAND,
                       f"`{prim}` {place} needs {name(ctx, o, t)} less sharded: "
                       f"{spec_text(have)} → {spec_text(need)} ({how}); "
                       f"{moved_by(t, 'gather')} it.",
                       evidence(ctx, a, (o,), need, [o], (), c.before, c.after))
        set_by = cause(ctx, a, t)
        why_so = (f"its result's layout is set {set_by}" if set_by else
                  "propagation left the layouts around it in conflict")
        return Why(Reason.RESHARD,
                   f"`{prim}` {place} needs {name(ctx, o, t)} laid out as "
                   f"{spec_text(need)} ({how}), but it is {spec_text(have)}: {why_so}, and "
                   f"{moved_by(t, 'move')} the data.{c.text}",
                   evidence(ctx, a, (o,), need, [o], c.inputs, c.before, c.after))
    return None


def reshard_result(ctx: Context, t: CollectiveToExplain) -> Why | None:
    """The result of the anchor laid out, over the collective's axes, unlike what an
    instruction using it needs, directly or after ops that only reshape or copy it (the
    partitioner moves it right after the anchor, under the anchor's metadata)."""
    return first_anchor(t, lambda a: _result_at(ctx, a, t))


def _result_at(ctx: Context, a: Instruction, t: CollectiveToExplain) -> Why | None:
    todo, seen = [a], set()
    while todo and len(seen) < 16:
        p = todo.pop(0)
        if p.name in seen:
            continue
        seen.add(p.name)
        have = ctx.axes(p)
        if have is None:
            continue
        for u in ctx.users.get(p.name, ()):
            if u.opcode in ("tuple", "get-tuple-element"):
                continue
            need = required(ctx, u, list(u.operands).index(p.name))
            if need is None or len(need) != len(have):
                continue
            if need == have:
                if u.opcode in RENAMING:
                    todo.append(u)       # the same values, laid out the same: follow
                continue
            if not _moved_axes(have, need) & set(t.chain_axes):
                continue
            return _result_why(ctx, a, p, u, have, need, t)
    return None


def _result_why(ctx: Context, a: Instruction, p: Instruction, u: Instruction, have: DimAxes,
                need: DimAxes, t: CollectiveToExplain) -> Why:
    """`a`'s result, reached as `p`, laid out as `have` where its user `u` needs `need`."""
    prim = primitive(a.op_name, with_einsum=True)
    point = constraint_point(u.op_name)
    user = (f"the sharding constraint {point}" if point is not None
            else f"`{primitive(u.op_name, with_einsum=True) or u.opcode}` ")
    via = "" if p is a else f" (as {name(ctx, p, t)})"
    set_by = cause(ctx, u, t)
    c = clash(ctx, p, u, have, need, t)
    return Why(Reason.RESHARD,
               f"The result of `{prim}` {where(ctx, a, t)} is laid out as "
               f"{spec_text(have)}{via}, but {user}{where(ctx, u, t)} needs it as "
               f"{spec_text(need)}{', ' + set_by if set_by else ''}; "
               f"{moved_by(t, 'move')} it.{c.text}",
               evidence(ctx, u, (p,), need, [] if p is a else [p], c.inputs, c.before,
                        c.after))
