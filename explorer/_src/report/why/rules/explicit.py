"""`explicit`: the program asked for the collective (psum, ppermute, all_to_all inside a
shard_map), by its primitive or by a collective already in the propagated module."""

from __future__ import annotations

from dataclasses import replace

from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.report.why.context import Context
from explorer._src.report.why.evidence import at
from explorer._src.report.why.metadata import AS_WRITTEN, EXPLICIT_PRIMITIVES, primitive
from explorer._src.report.why.ops import COLLECTIVE_OPCODES
from explorer._src.report.why.reason import Evidence, Reason, Why
from explorer._src.report.why.targets import CollectiveToExplain
from explorer._src.report.why.text import article, axes_phrase, loc_text, where


def explicit(ctx: Context, t: CollectiveToExplain) -> Why | None:
    """Reads the anchors in module order: it needs no layout, so it is tried before the
    layout rules, on every kind of collective."""
    if t.kind is CollectiveKind.RAGGED_ALL_TO_ALL and not any(
            a.opcode == CollectiveKind.RAGGED_ALL_TO_ALL for a in t.anchors):
        t = _own_ragged(ctx, t)
    prim = primitive(t.op_name)
    if prim not in EXPLICIT_PRIMITIVES and not any(
            a.opcode in COLLECTIVE_OPCODES for a in t.anchors):
        return None
    place = next((where(ctx, a, t) for a in t.anchors), loc_text(t.location, t))
    manual = "inside a shard_map" if "shard_map" in t.op_name else "in the program"
    shown = AS_WRITTEN.get(prim, prim)
    return Why(Reason.EXPLICIT,
               f"The program asked for it: `{shown}` {place} {manual} is "
               f"{article(t.kind)} {t.kind} over {axes_phrase(t.axes)}.",
               at(ctx, t.anchors[0]) if t.anchors else Evidence(consumer=t.op_name))


def _own_ragged(ctx: Context, t: CollectiveToExplain) -> CollectiveToExplain:
    """A ragged-all-to-all is only ever the program's (jax.lax.ragged_all_to_all; no
    partitioner writes one), but XLA's GPU compiler drops its metadata: it is anchored to the
    program's own ragged-all-to-all in the propagated module, by opcode."""
    if ctx.propagated is None:
        return t
    own = next((i for i in ctx.propagated.instructions()
                if i.opcode == CollectiveKind.RAGGED_ALL_TO_ALL and i.op_name), None)
    return t if own is None else replace(t, op_name=own.op_name, anchors=(own,), ranked=(own,))
