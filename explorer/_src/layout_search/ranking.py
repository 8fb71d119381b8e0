"""From compiles to a ranked result: a candidate from what its compile gave back, the ranking,
the Pareto front of time against memory, and why the winner beats the runner-up. Pure functions
of Candidates and Reports; nothing here compiles."""

from __future__ import annotations

import math
from collections.abc import Mapping

from explorer._src.cost.estimate import Estimate
from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.layout_search.evaluate import Outcome
from explorer._src.layout_search.result import (
    TIMED_STATUSES,
    Candidate,
    CandidateStatus,
    CollectiveCost,
    CollectiveGroup,
    Comparison,
    CompiledBy,
    TimeSource,
    basis,
    basis_text,
)
from explorer._src.layout_search.space import SearchLayout
from explorer._src.report.report import Report
from explorer._src.spec.tensor import format_spec
from explorer._src.units import format_seconds


def candidate_of(layout: SearchLayout, specs: Mapping, outcome: Outcome, time_lb: float,
                 mem_lb: int, params: Mapping | None = None, label: str | None = None,
                 compiled_by: CompiledBy = CompiledBy.NOT_COMPILED) -> Candidate:
    """The candidate `layout` (its inputs' `specs`, its bounds) as its compile by `compiled_by`
    came out: timed, and whether it fits; or failed, with the error or why no step time could be
    predicted."""
    base = dict(label=label or layout.label(), mesh=layout.mesh, rules=layout.rules_text,
                specs={n: format_spec(s) for n, s in specs.items()}, params=dict(params or {}),
                bound_seconds=time_lb, bound_memory=mem_lb, retries=outcome.retries,
                compiled_by=compiled_by)
    report = outcome.report
    if report is None:
        return Candidate(**base, status=CandidateStatus.FAILED, error=outcome.error)
    est = report.estimate
    seconds, source = predicted_step(est)
    notes = tuple(est.notes) + (tuple(report.trace.notes) if report.trace else ())
    if seconds is None:
        return Candidate(**base, status=CandidateStatus.FAILED, report=report, notes=notes,
                         error="no step time could be predicted on the target: "
                               + "; ".join(est.notes or ("no compute or collective timed",)))
    fits = est.memory.fits if est.memory is not None else None
    collectives = collective_costs(report)
    return Candidate(
        **base, status=CandidateStatus.OK if fits is not False else CandidateStatus.DOES_NOT_FIT,
        seconds=seconds, time_source=source, trace_seconds=est.step_trace_seconds,
        lower_seconds=est.step_lower_seconds, upper_seconds=est.step_upper_seconds,
        compute_seconds=est.compute.seconds, comm_seconds=est.comm_seconds,
        memory_bytes=report.memory.total if report.memory is not None else None, fits=fits,
        collective_bytes=sum(c.bytes * c.runs for c in collectives),
        collectives=collectives, notes=notes, report=report)


def predicted_step(est: Estimate) -> tuple[float | None, TimeSource]:
    """The step time a candidate is ranked by: the step trace, else the no-overlap bound, else
    the full-overlap bound; (None, UNTIMED) when the estimate has none."""
    for value, source in ((est.step_trace_seconds, TimeSource.TRACE),
                          (est.step_upper_seconds, TimeSource.NO_OVERLAP),
                          (est.step_lower_seconds, TimeSource.FULL_OVERLAP)):
        if value is not None:
            return value, source
    return None, TimeSource.UNTIMED


def collective_costs(report: Report) -> tuple[CollectiveCost, ...]:
    """Each collective of the program with its predicted time and the reason it exists."""
    return tuple(
        CollectiveCost(CollectiveKind(c.kind), c.axes, c.program_bytes, t.seconds, t.runs,
                       str(c.why.reason) if c.why else "", c.why.text if c.why else "",
                       c.source)
        for c, t in zip(report.collectives, report.estimate.collectives, strict=True))


_ORDER = {CandidateStatus.OK: 0, CandidateStatus.ESTIMATED: 1, CandidateStatus.DOES_NOT_FIT: 2,
          CandidateStatus.FAILED: 3}


def rank_key(c: Candidate) -> tuple:
    """The ranking's order: candidates that fit, then plans only estimated, then those that do
    not fit, then failures; within each, those the target's own compiler compiled first (a
    screened search's confirmed candidates: confirm.py), then by predicted time, then memory."""
    return (_ORDER[c.status], not c.compiled_by.is_targets_own,
            c.seconds if c.seconds is not None else math.inf,
            c.memory_bytes if c.memory_bytes is not None else math.inf, c.label)


def rank(cands: list[Candidate]) -> list[Candidate]:
    """Best first, by rank_key."""
    return sorted(cands, key=rank_key)


def same_compiler(ranked: list[Candidate]) -> list[Candidate]:
    """Those of `ranked` compiled by the first one's compiler: numbers to compare."""
    return [c for c in ranked if c.compiled_by == ranked[0].compiled_by] if ranked else []


def pareto(ranked: list[Candidate]) -> tuple[Candidate, ...]:
    """The timed candidates that fit and that no other beats on both predicted time and memory
    per device (ties on both: the first), among those of one basis (`basis`: the best's
    compiler, or, where it timed only the best, the basis most were timed on)."""
    on = basis(ranked)
    ok = [c for c in ranked if c.status in TIMED_STATUSES and c.compiled_by is on
          and c.seconds is not None and c.memory_bytes is not None]
    front, smallest = [], math.inf
    for c in sorted(ok, key=lambda c: (c.seconds, c.memory_bytes)):
        if c.memory_bytes < smallest:
            front.append(c)
            smallest = c.memory_bytes
    return tuple(front)


# ---------------------------------------------------------------------------------------------
# Why the winner wins.

def groups(c: Candidate) -> tuple[CollectiveGroup, ...]:
    """The candidate's collectives grouped by kind, mesh axes and reason, costliest first."""
    by_key: dict[tuple, list[CollectiveCost]] = {}
    for x in c.collectives:
        by_key.setdefault((x.kind, x.axes, x.reason), []).append(x)
    out = [CollectiveGroup(kind, axes, reason, sum(x.runs for x in xs),
                           sum(x.bytes * x.runs for x in xs),
                           sum((x.seconds or 0.0) * x.runs for x in xs), xs[0].text)
           for (kind, axes, reason), xs in by_key.items()]
    return tuple(sorted(out, key=lambda g: -g.seconds))


def winner_comparison(ranked: list[Candidate], pipeline: bool = False) -> Comparison | None:
    """Why the first of one basis (`basis`: the winner's, where its compiler timed another)
    beats the runner-up, the next slower candidate of that basis (one tied with it, often the
    same program on a mirrored mesh shape, has nothing to explain): numbers of one measure (a
    screen's are not comparable with a confirmation's). Where the basis is not the winner's
    (the target's compiler confirmed only the winner), the text says so and among which
    candidates it compares. None without two timed candidates of one basis, or when the first
    ranked is not timed."""
    if not ranked or ranked[0].status not in TIMED_STATUSES:
        return None
    on = basis(ranked)
    # A compiled candidate's collectives come from its Report; an estimated one's from the
    # estimate (a pipeline plan timed by the stage model has neither).
    ok = [c for c in ranked if c.compiled_by is on and c.status in TIMED_STATUSES
          and c.seconds is not None
          and (c.report is not None or c.compiled_by is CompiledBy.ESTIMATE)]
    if len(ok) < 2:
        return None
    win = ok[0]
    second = next((c for c in ok[1:] if c.seconds > win.seconds), ok[1])
    gw, gr = groups(win), groups(second)
    lines = _why_lines(win, second, gw, gr, pipeline)
    if win is not ranked[0]:
        lines[0] = (f"Among {basis_text(ranked, on)}, not one measure with the winner's "
                    f"({ranked[0].compiled_by or ranked[0].time_source}): "
                    + lines[0][0].lower() + lines[0][1:])
    return Comparison(win.label, second.label, win.seconds, second.seconds, win.compute_seconds,
                      second.compute_seconds, win.comm_seconds, second.comm_seconds, gw, gr,
                      "\n".join(lines))


def _why_lines(win: Candidate, second: Candidate, gw: tuple[CollectiveGroup, ...],
               gr: tuple[CollectiveGroup, ...], pipeline: bool) -> list[str]:
    def pays(gs):
        return "; ".join(g.phrase() for g in gs) or "no collective"

    lines = [f"Why {win.label} beats {second.label}: predicted {format_seconds(win.seconds)} "
             f"against {format_seconds(second.seconds)} per step "
             f"({format_seconds(second.seconds - win.seconds)} less)."]
    if pipeline:
        lines.append(f"  stage model: {_stages_text(win)} against {_stages_text(second)}; the "
                     "compiled programs' collectives (per step of each):")
    else:
        lines.append(f"  compute {format_seconds(win.compute_seconds)} against "
                     f"{format_seconds(second.compute_seconds)}; communication "
                     f"{format_seconds(win.comm_seconds)} against "
                     f"{format_seconds(second.comm_seconds)}.")
    lines += [f"  the winner pays: {pays(gw)}", f"  the runner-up pays: {pays(gr)}"]
    for who, gs in (("winner", gw), ("runner-up", gr)):
        for g in gs[:3]:
            if g.example:
                lines.append(f"  {who}, {g.kind} over {','.join(g.axes) or '-'}: {g.example}")
    return lines


def _stages_text(c: Candidate) -> str:
    t = c.extra.get("stage_seconds", [])
    return (f"{len(t)} stage(s) of at most {format_seconds(max(t)) if t else '?'}, bubble "
            f"{c.extra.get('bubble_fraction', 0):.0%}")
