"""The why reader's driver: each collective of the optimized module, its targets, the rules
tried on them in the order of the table, and the verdict when none fits.

A rule that raises is a reader bug, not a reason: for users the collective is `unknown` with
the exception in its text, so one unreadable module does not lose the rest of the report;
under EXPLORER_STRICT=1 (the test suite) it is raised, so that a crash cannot pass for "no
rule fits"."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from explorer._src.hlo.collectives import CollectiveKind, collective_kind
from explorer._src.hlo.module import HloModule, Instruction
from explorer._src.report.why.context import Context
from explorer._src.report.why.evidence import at, evidence
from explorer._src.report.why.metadata import primitive
from explorer._src.report.why.reason import Evidence, Reason, Why
from explorer._src.report.why.rules import RULES, explicit

if TYPE_CHECKING:       # at run time origins.py imports this package (its op_name words)
    from explorer._src.report.origins import Origins
from explorer._src.report.why.targets import (
    CollectiveToExplain,
    fused_reductions,
    targets_to_explain,
)
from explorer._src.report.why.text import article, axes_phrase, lower_first, where
from explorer._src.spec.mesh import MeshSpec


def strict_mode() -> bool:
    """Whether a reader's exception is raised rather than reported (EXPLORER_STRICT=1), read
    at each call so that a test can set it."""
    return os.environ.get("EXPLORER_STRICT", "") not in ("", "0")


def explain_collectives(optimized: HloModule, propagated: HloModule | None, mesh: MeshSpec,
                        inputs: Sequence[str] = (),
                        origins: Mapping[str, Origins] | None = None,
                        cuts: Sequence[Sequence[Sequence[int]]] = ()) -> dict[str, Why]:
    """hlo name -> Why for every collective of the optimized module (an async pair once, under
    the name of its -start). `inputs` names the program's inputs in parameter order; `origins`
    (propagated instruction or input name -> Origins, from Shardy's record) lets a reshard
    name where the two layouts it moves between came from. `cuts`: for a multi-slice
    program's module before libtpu split it, the blocks of devices its collectives are cut
    at (Context.cuts)."""
    ctx = Context.of(optimized, propagated, mesh, inputs, origins, cuts)
    out = {}
    for instr in optimized.instructions():
        kind, _ = collective_kind(instr.opcode)
        if kind is None:
            continue
        try:
            out[instr.name] = explain(ctx, instr)
        except Exception as e:  # a module shape the reader does not know: say so, go on
            if strict_mode():
                raise
            out[instr.name] = Why(Reason.UNKNOWN, f"No reason found: the reader could not "
                                  f"follow this {kind} ({type(e).__name__}: {e}).")
    return out


def explain(ctx: Context, instr: Instruction) -> Why:
    """Why one collective of the optimized module exists."""
    kind, _ = collective_kind(instr.opcode)
    if kind is None:
        raise ValueError(f"{instr.name} ({instr.opcode}) is not a collective")
    if ctx.propagated is None:
        return Why(Reason.UNKNOWN, "No reason found: the compiler ran no partitioning pass, "
                   "so there is no propagated module to read the shardings from.")
    chain = ctx.chains.get(instr.name)
    if chain is not None and chain[-1] is not instr:
        # An earlier step of a resharding: it exists for the reason its last step does.
        last = explain(ctx, chain[-1])
        return replace(last, text=f"Step {chain.index(instr) + 1} of {len(chain)} of one "
                                  f"data movement; {lower_first(last.text)}")
    whys = [explain_target(ctx, t) for t in targets_to_explain(ctx, instr)]
    if len(whys) == 1:
        return whys[0]
    return combine(kind, whys)


def explain_target(ctx: Context, t: CollectiveToExplain) -> Why:
    """The first rule that fits the target, else `unknown` with what was missing."""
    why = explicit(ctx, t)
    if why is not None:
        return why
    if not t.anchors:
        return Why(Reason.UNKNOWN,
                   f"No reason found: the {t.kind}'s metadata (op_name {t.op_name!r}) "
                   "matches no instruction of the propagated module.")
    if not t.chain_axes:
        return Why(Reason.UNKNOWN,
                   f"No reason found: the {t.kind}'s device groups span no whole mesh axis "
                   f"(part of one, or several crossed), so its layouts cannot be compared "
                   f"over mesh axes.", at(ctx, t.anchors[0]))
    for rule in RULES[t.kind]:
        why = rule(ctx, t)
        if why is not None:
            return why
    for inner in fused_reductions(ctx, t):
        why = explain_target(ctx, inner)
        if why.reason is not Reason.UNKNOWN:
            return why
    a = t.ranked[0]
    return Why(Reason.UNKNOWN,
               f"No reason found: `{primitive(a.op_name)}` {where(ctx, a, t)} "
               f"({a.opcode}) shows no layout over {axes_phrase(t.chain_axes)} that "
               f"explains {article(t.kind)} {t.kind}.",
               evidence(ctx, a, after=ctx.axes(a)))


def combine(kind: CollectiveKind, whys: list[Why]) -> Why:
    """One Why for a collective XLA combined from several: their reason when they share one,
    else `unknown` listing the parts' reasons (one code for several would claim too much)."""
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
    return Why(Reason.UNKNOWN,
               f"XLA combined {n} {kind}s with different reasons ({listed}); the first "
               f"known: {known[0].text}" if known else f"XLA combined {n} {kind}s; "
               "no reason found for any part.",
               known[0].evidence if known else Evidence())
