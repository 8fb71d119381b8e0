"""The layout an instruction needs of its operands, read from its own layout, and what set a
layout that the math did not need (a sharding constraint, a shard_map's in_specs)."""

from __future__ import annotations

from dataclasses import dataclass

from explorer._src.hlo.module import Instruction, ints
from explorer._src.hlo.sharding import tuple_parts
from explorer._src.report.why.context import Context
from explorer._src.report.why.layout import DimAxes, dim_axes
from explorer._src.report.why.metadata import primitive
from explorer._src.report.why.ops import LAYOUT_OPS, dim_sources, same_tensor


def required(ctx: Context, a: Instruction, index: int) -> DimAxes | None:
    """The layout `a` needs of its operand `index`, from `a`'s own layout (and for a dot,
    from its other operand): None where that is not a simple reading, or where the reading
    asks for one mesh axis on two dimensions (no layout can be that)."""
    need = _required_reading(ctx, a, index)
    if need is None:
        return None
    used = [x for ax in need for x in ax]
    return need if len(used) == len(set(used)) else None


def _required_reading(ctx: Context, a: Instruction, index: int) -> DimAxes | None:
    if a.opcode == "dot":
        return _dot_required(ctx, a, index)
    if a.opcode == "tuple":
        # A tuple holds each operand in the layout its own element of the sharding gives.
        o = ctx.prop_names.get(a.operands[index])
        try:
            parts = tuple_parts(a.sharding) if a.sharding else []
        except ValueError:
            return None
        if not a.sharding.startswith("{{"):
            parts = [a.sharding] * len(a.operands)        # one sharding for every element
        if o is None or len(o.arrays) != 1 or index >= len(parts):
            return None
        return dim_axes(parts[index], len(o.arrays[0].dims), ctx.mesh)
    result = ctx.axes(a)
    o = ctx.prop_names.get(a.operands[index])
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
        have = ctx.axes(o)
        reduced = set(ints(a.attr("dimensions")))
        kept = iter(result)
        need = [(have[k] if have else ()) if k in reduced else next(kept, ())
                for k in range(rank)]
        return tuple(need)
    if a.opcode == "reshape":
        need = [()] * rank
        for i in range(len(result)):
            for _, j in dim_sources(a, i, a.arrays[0].dims, [o]):
                need[j] = result[i]
        return tuple(need)
    if same_tensor(a, o) and len(result) == rank:
        return result
    return None


def _dot_required(ctx: Context, a: Instruction, side: int) -> DimAxes | None:
    """A dot's need of operand `side`: its batch and free dimensions as the result has them,
    its contracting dimensions as the other operand has them."""
    ops = [ctx.prop_names.get(o) for o in a.operands[:2]]
    if any(o is None or not o.arrays for o in ops):
        return None
    result = ctx.axes(a)
    other = ctx.axes(ops[1 - side])
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


@dataclass(frozen=True)
class LayoutSource:
    """What fixed a layout the math did not need: a sharding constraint (`instr`), or a
    shard_map's in_specs (`shard_map`)."""

    instr: Instruction
    shard_map: bool = False


def layout_source(ctx: Context, a: Instruction) -> LayoutSource | None:
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
        target = i.custom_call_target
        if primitive(i.op_name) == "sharding_constraint" or (
                i.opcode == "custom-call" and "Sharding" in target and "SPMD" not in target):
            return LayoutSource(i)
        if "SPMDFullToShardShape" in target or primitive(i.op_name) == "shard_map":
            return LayoutSource(i, shard_map=True)
        if i is not a and i.opcode not in LAYOUT_OPS:
            continue
        for u in ctx.users.get(i.name, ()):
            if u.sharding == a.sharding or u.opcode == "tuple":
                todo.append(u)
    return None
