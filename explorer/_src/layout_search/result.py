"""What a search returns, as frozen, JSON-able plain data: the ranked candidates, the Pareto
front of time against memory, the comparison of the winner with the runner-up, and the counts
of what was compiled, pruned and skipped."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.layout_search.connect import ClusterSize
from explorer._src.report.report import Report
from explorer._src.spec.mesh import MeshSpec
from explorer._src.units import format_bytes, format_seconds

# A search stopped early (budget, patience, cancel) names no best from fewer compiled candidates
# than this (or than the whole distinct space): a handful says little about thousands.
MIN_EVALUATED = 10

# The closed sets of codes a result holds are StrEnums: each member is its code as a string,
# so that it compares equal to the code and writes to JSON as it.


class SearchSpace(StrEnum):
    """What a search varies."""

    RULES = "rules"                    # logical-axis rule tables (a workload's logical names)
    SPECS = "specs"                    # the PartitionSpecs of chosen input tensors
    PIPELINE = "pipeline"              # the pipeline workload's stages, cuts and microbatches


class StopReason(StrEnum):
    """Why a search ended."""

    COMPLETE = "complete"              # every distinct candidate compiled or pruned
    BUDGET = "budget"                  # its time budget ran out
    PATIENCE = "patience"              # that many compiles in a row did not improve the best
    CANCELLED = "cancelled"            # the cancel event was set or progress returned False


class SearchPhase(StrEnum):
    """What a running search is doing when it calls its progress callback."""

    ENUMERATE = "enumerate"            # listing the space, before any compile
    PROFILE = "profile"                # pipeline: compiling the per-layer cost profiles
    COMPILE = "compile"                # compiling candidates
    ESTIMATE = "estimate"              # screening candidates by their estimate, no compile
    CONFIRM = "confirm"                # compiling the screen's best with the target's compiler
    DONE = "done"                      # finished; the result is being ranked


class TimeSource(StrEnum):
    """Which prediction a candidate's `seconds` is."""

    TRACE = "trace"                                # the step trace of the compiled schedule
    NO_OVERLAP = "no-overlap bound"                # the estimate with nothing overlapped
    FULL_OVERLAP = "full-overlap bound"            # the estimate with communication hidden
    PIPELINE_MODEL = "pipeline model"              # Alpa's stage model over per-layer costs
    ESTIMATE = "estimate, not compiled"            # the program's layout propagated, priced
    UNTIMED = ""                                   # no step time: a failed candidate


class CompiledBy(StrEnum):
    """Which compiler a candidate's numbers come from. On a GPU or TPU target the search screens
    on fake CPU devices (fast; the program priced on the target, an approximation) and compiles
    the best again with the target's own compiler (slow; the program that hardware runs)."""

    CPU_PRICED = "cpu devices, priced on the target"
    # The estimate screen's (estimate_screen.py): the layout carried through the traced program
    # and priced on the target, with no compile.
    ESTIMATE = "not compiled: estimated from the traced program"
    GPU = "XLA's GPU compiler"
    TPU = "libtpu"
    NOT_COMPILED = ""                  # a pipeline plan timed by the stage model only

    @property
    def is_targets_own(self) -> bool:
        return self in (CompiledBy.GPU, CompiledBy.TPU)


class CandidateStatus(StrEnum):
    """What became of one candidate. A StrEnum: it writes to JSON as its code."""

    OK = "ok"                          # compiled, fits the target's memory, timed
    DOES_NOT_FIT = "does-not-fit"      # compiled, but needs more memory than a chip has
    FAILED = "failed"                  # the compile (or the prediction) failed; see `error`
    # Not compiled: a pipeline plan timed by the stage model, or a candidate of the estimate
    # screen (estimate_screen.py) that fits by its memory lower bound.
    ESTIMATED = "estimated"


@dataclass(frozen=True)
class CollectiveCost:
    """One collective a candidate pays: what, over which mesh axes, how big, how long, why."""

    kind: CollectiveKind
    axes: tuple[str, ...]
    bytes: int                  # V per device, in the program's dtype
    seconds: float | None       # predicted on the target, once
    runs: int                   # times one step runs it (inside a loop: its trips)
    reason: str                 # explorer.Reason code, e.g. "partial-sum"; "" when unknown
    text: str                   # the reason as a sentence
    source: str = ""            # file:line of the user code that caused it

    def to_dict(self) -> dict:
        return {**asdict(self), "kind": str(self.kind)}


@dataclass(frozen=True)
class Candidate:
    """One point of the search space and, when it was compiled, what the compiler made of it.

    `seconds` is what the ranking uses: the predicted step on the target's timeline
    (`time_source` "trace"), else the no-overlap or the full-overlap bound of the estimate; for
    a pipeline plan that was not compiled, the stage model's time ("pipeline model").
    """

    label: str                              # the mesh and the rules or specs, as one line
    mesh: MeshSpec
    rules: str                              # the searched rule table as text ("" for specs)
    specs: Mapping[str, str]                # every input tensor -> its spec text
    params: Mapping[str, Any]               # workload params the search chose (pipeline plans)
    status: CandidateStatus
    seconds: float | None = None
    time_source: TimeSource = TimeSource.UNTIMED
    trace_seconds: float | None = None
    lower_seconds: float | None = None      # communication fully overlapped
    upper_seconds: float | None = None      # nothing overlapped
    compute_seconds: float | None = None
    comm_seconds: float | None = None
    memory_bytes: int | None = None         # per device, XLA's memory analysis
    fits: bool | None = None
    collective_bytes: int | None = None     # per device, summed over the collectives
    collectives: tuple[CollectiveCost, ...] = ()
    bound_seconds: float = 0.0              # the analytical lower bounds it was ordered by
    bound_memory: int = 0
    error: str = ""
    notes: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)   # e.g. a pipeline plan's stages
    # times its compile was sent again because its Ray worker or node was lost (cluster.py)
    retries: int = 0
    compiled_by: CompiledBy = CompiledBy.NOT_COMPILED   # the compiler its numbers come from
    # A candidate the target's compiler confirmed: the screen's predicted step, to set beside
    # `seconds` (how far the CPU screen was off); None for any other.
    screen_seconds: float | None = None
    # The compiled Report (program texts and trace left out); not written to JSON.
    report: Report | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict:
        # Field by field: asdict would deep-copy the whole Report before it is dropped.
        d = {f.name: getattr(self, f.name) for f in fields(self)
             if f.name not in ("report", "mesh", "collectives")}
        d.update(mesh=self.mesh.text(), status=str(self.status),
                 time_source=str(self.time_source), compiled_by=str(self.compiled_by),
                 specs=dict(self.specs),
                 params=dict(self.params), extra=dict(self.extra), notes=list(self.notes),
                 collectives=[c.to_dict() for c in self.collectives])
        return d

    def line(self) -> str:
        """One line for a table: time (source), memory, collective bytes, the layout."""
        if self.status is CandidateStatus.FAILED:
            return f"failed        {self.label}: {self.error.splitlines()[0][:120]}"
        mem = memory_text(self)
        coll = format_bytes(self.collective_bytes) if self.collective_bytes is not None else "?"
        fit = "" if self.fits is not False else " (does not fit)"
        by = (f"  [{self.compiled_by}]" if self.compiled_by.is_targets_own
              else "  [estimated, not compiled]" if self.compiled_by is CompiledBy.ESTIMATE
              else "")
        return (f"{format_seconds(self.seconds):>9}  {mem:>9}{fit}  {coll:>9}  {self.label}{by}")


def memory_text(c: Candidate, missing: str = "?") -> str:
    """A candidate's memory per device; an estimated one's is a lower bound, written '≥ …'."""
    if c.memory_bytes is None:
        return missing
    return ("≥ " if c.compiled_by is CompiledBy.ESTIMATE else "") + format_bytes(c.memory_bytes)


@dataclass(frozen=True)
class CollectiveGroup:
    """The collectives of one kind, over the same mesh axes, for the same reason."""

    kind: CollectiveKind
    axes: tuple[str, ...]
    reason: str
    count: int                  # collectives run per step (a loop's trips counted)
    bytes: int                  # per device, summed over them and their runs
    seconds: float              # predicted, summed (those that could be timed)
    example: str                # the first one's reason as a sentence

    def to_dict(self) -> dict:
        return {**asdict(self), "kind": str(self.kind)}

    def phrase(self) -> str:
        over = ",".join(self.axes) or "no mesh axis"
        n = f"{self.count} " if self.count != 1 else ""
        return (f"{n}{self.kind} over {over} ({self.reason or 'reason unknown'}; "
                f"{format_bytes(self.bytes)}, {format_seconds(self.seconds)})")


@dataclass(frozen=True)
class Comparison:
    """Why the winner beats the runner-up: their times, split into compute and communication,
    and the collectives each one pays, grouped by kind, mesh axes and reason."""

    winner: str
    runner_up: str
    winner_seconds: float
    runner_up_seconds: float
    winner_compute_seconds: float | None
    runner_up_compute_seconds: float | None
    winner_comm_seconds: float | None
    runner_up_comm_seconds: float | None
    winner_collectives: tuple[CollectiveGroup, ...]
    runner_up_collectives: tuple[CollectiveGroup, ...]
    text: str

    def to_dict(self) -> dict:
        d = asdict(self)
        d["winner_collectives"] = [g.to_dict() for g in self.winner_collectives]
        d["runner_up_collectives"] = [g.to_dict() for g in self.runner_up_collectives]
        return d


@dataclass(frozen=True)
class SearchStats:
    """What the search looked at and what it spent.

    `space` counts every combination enumerated (mesh shapes times rule tables, specs or
    pipeline plans); `invalid` of them break divisibility; `equivalent` give the same layout of
    every tensor as one enumerated before (e.g. a rule over a size-1 axis); `distinct` is what
    is left, the candidates proper. Each distinct candidate is then compiled, pruned by a bound
    (`pruned_bound`: its lower bound on the step time is no better than the best found;
    `pruned_memory`: its lower bound on memory per device exceeds the chip's), or left
    `not_evaluated` when the budget ran out or the search was cancelled.

    On a GPU or TPU target (compile_for="target") the candidates are compiled first on fake CPU
    devices, priced on the target (`screened` of them), and the best few of those are compiled
    again by the target's own compiler (`confirmed`: those it compiled; confirm.py).
    """

    space: int
    invalid: int
    equivalent: int
    distinct: int
    compiled: int
    failed: int
    does_not_fit: int
    pruned_bound: int
    pruned_memory: int
    not_evaluated: int
    seconds: float
    stopped: StopReason
    prune: bool
    cluster: str | None = None   # the Ray address the candidates were compiled on
    profiled: int = 0            # pipeline: compiles that measured per-layer costs
    # pipeline: plans (cut choices) the stage DP shows cannot beat the best slicing of the same
    # stages and microbatches, so it never times them one by one
    dominated: int = 0
    bound_violations: tuple[str, ...] = ()   # a compiled result below its own lower bound
    retried: int = 0             # candidates sent again after their worker was lost
    cluster_size: ClusterSize | None = None   # the cluster's nodes with a CPU, and their CPUs
    screened: int = 0            # screened for the target's compiler (by `screened_by`)
    confirmed: int = 0           # of those, compiled again by the target's own compiler
    confirmed_by: CompiledBy = CompiledBy.NOT_COMPILED   # that compiler, when one screened
    screen_skipped: str = ""     # why a search that could screen did not (confirm.py)
    # How the screen weighed its candidates: CPU compiles priced on the target, or the estimate
    # from the traced program (estimate_screen.py), whose candidates are not compiled.
    screened_by: CompiledBy = CompiledBy.CPU_PRICED
    # Candidates the estimate screen weighed and no compile replaced: evaluated, though not
    # compiled. Every distinct candidate is compiled, failed, estimated, pruned or not
    # evaluated.
    estimated: int = 0
    budget_s: float | None = None   # the budget the search was given (None: none)
    # The phases a budget or a cancel cut short, in order (an estimate screen stopped at its
    # share of the budget, then a confirmation stopped at its end: both); () where none was.
    cut_short: tuple[SearchPhase, ...] = ()
    # Work in flight at the stop that the search returned without (layout_search/deadline.py):
    # compiles sent and not answered, a trace not finished. Their candidates are counted as
    # they were before (not evaluated, or screened where a confirmation was cut).
    abandoned: int = 0

    @property
    def evaluated(self) -> int:
        """The candidates the search looked at: compiled, estimated, or failed in either (the
        one count every summary of a search gives as "evaluated")."""
        return self.compiled + self.estimated + self.failed

    @property
    def listed_all(self) -> bool:
        """Whether the enumeration listed the whole space (a budget spent, or a cancel, can
        stop it early)."""
        return self.invalid + self.equivalent + self.distinct >= self.space

    def of_text(self) -> str:
        """'of 8,620 distinct layouts', or, where the enumeration was cut short, of the
        combinations in the space, and that it was."""
        if self.listed_all:
            return f"of {self.distinct:,} distinct layouts"
        return (f"of the {self.space:,} combinations in the space (listed "
                f"{self.invalid + self.equivalent + self.distinct:,} before it stopped)")

    def evaluated_text(self) -> str:
        """'evaluated 1,075 of 8,620 distinct layouts (1,071 estimated, 4 compiled, 0 failed)':
        the counts every summary gives, from these fields alone."""
        parts = [f"{self.estimated:,} estimated"] if self.estimated else []
        parts += [f"{self.compiled:,} compiled", f"{self.failed:,} failed"]
        return f"evaluated {self.evaluated:,} {self.of_text()} ({', '.join(parts)})"

    def to_dict(self) -> dict:
        return {**asdict(self), "stopped": str(self.stopped),
                "confirmed_by": str(self.confirmed_by), "screened_by": str(self.screened_by),
                "cut_short": [str(p) for p in self.cut_short], "evaluated": self.evaluated}

    def stopped_text(self) -> str:
        """'budget (it cut short: estimate, confirm; 1 in flight not waited for)': why the
        search ended, and what that left unfinished."""
        cut = [f"it cut short: {', '.join(map(str, self.cut_short))}"] if self.cut_short else []
        if self.abandoned:
            cut.append(f"{self.abandoned} in flight not waited for")
        return str(self.stopped) + (f" ({'; '.join(cut)})" if cut else "")

    def screen_text(self) -> str:
        """'N screened on CPU devices' or 'N screened by their estimate (not compiled)'."""
        how = ("by their estimate from the traced program (not compiled)"
               if self.screened_by is CompiledBy.ESTIMATE else "on CPU devices")
        return f"{self.screened} screened {how}"

    def text(self) -> str:
        parts = [self.evaluated_text(), f"{self.space} in the space",
                 f"{self.invalid} indivisible",
                 f"{self.equivalent} equivalent", f"{self.distinct} distinct",
                 f"{self.compiled} compiled ({self.failed} failed, {self.does_not_fit} do not "
                 "fit)", f"{self.pruned_bound} pruned by the time bound",
                 f"{self.pruned_memory} by the memory bound"]
        if self.screened:
            parts.insert(6, f"{self.screen_text()}, {self.confirmed} confirmed by "
                            f"{self.confirmed_by}")
        if self.profiled:
            parts.insert(6, f"{self.profiled} profiling compiles")
        if self.dominated:
            parts.insert(7, f"{self.dominated} plans dominated in the stage DP")
        if self.not_evaluated:
            parts.append(f"{self.not_evaluated} not evaluated")
        if self.retried:
            parts.append(f"{self.retried} retried after a lost worker")
        if self.screen_skipped:
            parts.append(self.screen_skipped)
        where = f" on Ray cluster {self.cluster}" if self.cluster else ""
        if self.cluster and self.cluster_size is not None:
            where += f" ({self.cluster_size.text()})"
        return (", ".join(parts) + f"; {self.seconds:.1f} s{where}, {self.stopped_text()}"
                + ("" if self.prune else " (pruning off)"))


@dataclass(frozen=True)
class Progress:
    """Where a running search is; what a progress callback receives."""

    phase: SearchPhase
    done: int                    # distinct candidates settled (compiled, estimated, pruned or
                                 # failed)
    total: int                   # distinct candidates
    compiled: int
    pruned: int
    failed: int
    best_seconds: float | None
    best: str                    # the best candidate's label so far
    current: str                 # the candidate being compiled
    elapsed_s: float
    estimated: int = 0           # estimated (no compile), by the estimate screen

    @property
    def evaluated(self) -> int:
        """Compiled, estimated or failed so far: what SearchStats.evaluated counts at the
        end (`done` also counts the pruned)."""
        return self.compiled + self.estimated + self.failed


@dataclass(frozen=True)
class SearchResult:
    """A finished (or stopped) search: candidates ranked best first, the Pareto front of
    predicted time against memory per device among them, why the winner beats the runner-up,
    and the counts."""

    program: str                 # the workload name or the function's name
    space: SearchSpace
    target: str
    objective: str               # how `seconds` is computed, in words
    candidates: tuple[Candidate, ...]
    pareto: tuple[Candidate, ...]
    comparison: Comparison | None
    stats: SearchStats

    @property
    def best(self) -> Candidate | None:
        """The winner: the fastest candidate that fits, or None when none does."""
        first = self.candidates[0] if self.candidates else None
        ranked = (CandidateStatus.OK, CandidateStatus.ESTIMATED)
        return first if first is not None and first.status in ranked else None

    @property
    def nothing_evaluated(self) -> bool:
        """Whether the search stopped before it evaluated any candidate (a budget spent while
        listing the space, or a cancel): it can then say nothing of any layout."""
        s = self.stats
        return s.evaluated == 0 and (s.distinct > 0 or not s.listed_all)

    @property
    def too_few(self) -> bool:
        """Whether a search stopped early evaluated too few candidates to name a best
        (MIN_EVALUATED, none included); a search that ran to the end (every candidate
        compiled, estimated or pruned by a bound) proves its best however few it compiled."""
        s = self.stats
        return self.nothing_evaluated or (
            self.space is not SearchSpace.PIPELINE and s.stopped is not StopReason.COMPLETE
            and s.evaluated < min(MIN_EVALUATED, s.distinct))

    def headline(self) -> str:
        """The result in one sentence: the best and which compiler its numbers come from; or,
        when too few candidates were evaluated, that, and what to do, instead of a best. It
        never says a layout does not fit unless that layout was evaluated."""
        best, s = self.best, self.stats
        remedy = {StopReason.BUDGET: "widen the budget (budget_s)",
                  StopReason.PATIENCE: "raise patience",
                  StopReason.CANCELLED: "the search was cancelled; let it run longer",
                  StopReason.COMPLETE: "widen the budget (budget_s)"}
        if self.nothing_evaluated:
            within = (f" within the {s.budget_s:g} s budget"
                      if s.stopped is StopReason.BUDGET and s.budget_s is not None else "")
            return (f"Evaluated 0 {s.of_text()}{within}: nothing is known of any; "
                    f"{remedy[s.stopped]}.")
        if self.too_few:
            n = s.evaluated
            return (f"Best of only {n} candidate{'s' if n != 1 else ''} "
                    f"evaluated (of {s.distinct:,}): too few to name a best; "
                    f"{remedy[s.stopped]}.")
        if best is None:
            left = (f"; {s.not_evaluated:,} were not evaluated" if s.not_evaluated else "")
            return (f"None of the {s.evaluated:,} candidates evaluated fits the chip's memory "
                    f"or compiled{left}: the table says why.")
        memory = format_bytes(best.memory_bytes) if best.memory_bytes is not None else "?"
        line = (f"Best: {best.label}, {format_seconds(best.seconds)} per step, {memory} per "
                "device")
        if s.screened and best.compiled_by.is_targets_own:
            return (line + f", confirmed by {best.compiled_by} ({s.confirmed} of the "
                    f"{s.screen_text()} confirmed).")
        if s.screened:
            screen = ("the estimate's numbers" if s.screened_by is CompiledBy.ESTIMATE
                      else "the CPU screen's numbers")
            return line + f" ({screen}: {s.confirmed_by} confirmed none)."
        return line + (f" ({best.compiled_by})." if best.compiled_by else ".")

    def ranking_text(self) -> str:
        """On what basis the rows are ranked, in one sentence: where the target's compiler
        confirmed some and the rest are only screened, the confirmed first, by the compiled
        program's predicted step, then the screened, by the screen's own number (the two are
        not one measure: a screened row faster than a confirmed one was not confirmed)."""
        own = [c for c in self.candidates if c.compiled_by.is_targets_own]
        screened = [c for c in self.candidates if not c.compiled_by.is_targets_own
                    and c.status is not CandidateStatus.FAILED]
        if not own or not screened:
            basis = {c.compiled_by for c in self.candidates
                     if c.status is not CandidateStatus.FAILED}
            by = f" ({', '.join(sorted(map(str, basis)))})" if len(basis) == 1 else ""
            return (f"Ranked by {self.objective}{by}; those that fit first, then those that do "
                    "not, then failures.")
        how = ("their estimate from the traced program (not compiled; compute scaled to the "
               "compiler's)" if any(c.compiled_by is CompiledBy.ESTIMATE for c in screened)
               else "their CPU compile, priced on the target")
        return (f"Ranked in two groups: the {len(own):,} compiled by {own[0].compiled_by} "
                "first, by the compiled program's predicted step; then the "
                f"{len(screened):,} screened only, by {how}. The groups are not one measure: "
                "a screened row faster than a compiled one was not confirmed, and its number "
                "may be optimistic.")

    def to_dict(self, top: int | None = None) -> dict:
        cands = self.candidates if top is None else self.candidates[:top]
        return {"program": self.program, "space": str(self.space), "target": self.target,
                "objective": self.objective,
                "candidates": [c.to_dict() for c in cands],
                "pareto": [c.to_dict() for c in self.pareto],
                "comparison": self.comparison.to_dict() if self.comparison else None,
                "headline": self.headline(), "ranking": self.ranking_text(),
                "stats": self.stats.to_dict()}

    def text(self, top: int = 10) -> str:
        lines = [f"search of {self.program} ({self.space}) on {self.target}; ranked by "
                 f"{self.objective}", self.headline(), self.ranking_text(), "",
                 f"{'rank':>4}  {'time':>9}  {'memory':>9}  {'coll.':>9}  layout"]
        for i, c in enumerate(self.candidates[:top], 1):
            lines.append(f"{i:>4}  {c.line()}")
        if len(self.candidates) > top:
            lines.append(f"      ... {len(self.candidates) - top} more")
        if self.pareto:
            on = basis(list(self.candidates))
            among = f" among {basis_text(list(self.candidates), on)}" if on is not None else ""
            lines += ["", f"Pareto front{among} (of those that fit, no other is both faster and "
                          "smaller):"]
            lines += [f"      {c.line()}" for c in self.pareto]
        if self.comparison is not None:
            lines += ["", self.comparison.text]
        lines += ["", self.stats.text()]
        lines += [f"warning: {v}" for v in self.stats.bound_violations]
        return "\n".join(lines)


# The statuses of a candidate with a time: compiled and timed, or estimated.
TIMED_STATUSES = (CandidateStatus.OK, CandidateStatus.ESTIMATED)


def basis(ranked: list[Candidate]) -> CompiledBy | None:
    """The one basis (the compiler the numbers come from, or the estimate) that the Pareto
    front and the comparison are taken on: numbers of two bases are not one measure (an
    estimated candidate's memory is a lower bound, its time not a compiled program's). The
    best's, where at least two timed candidates that fit have it; else the one most of them
    have (a screen stopped by its budget after one confirmation: the estimated); None where no
    candidate is timed. Only candidates with both numbers count (a pipeline plan timed by the
    stage model has no memory: it is on no front)."""
    timed = [c for c in ranked if c.status in TIMED_STATUSES and c.seconds is not None
             and c.memory_bytes is not None]
    if not timed:
        return None
    counts = Counter(c.compiled_by for c in timed)
    first = timed[0].compiled_by
    if counts[first] >= 2:
        return first
    # most_common keeps first-seen order among ties: the better ranked basis wins a tie.
    top, n = counts.most_common(1)[0]
    return top if n >= 2 else first


def basis_count(ranked: list[Candidate], by: CompiledBy) -> int:
    """How many candidates of `ranked` (failures aside) have their numbers from `by`: the
    counts the search's summary gives (e.g. SearchStats.estimated)."""
    return sum(c.compiled_by is by and c.status is not CandidateStatus.FAILED for c in ranked)


def basis_text(ranked: list[Candidate], by: CompiledBy) -> str:
    """'the 1,079 estimated from the traced program (not compiled)': the candidates of one
    basis, as the page names them."""
    n = basis_count(ranked, by)
    what = {CompiledBy.ESTIMATE: "estimated from the traced program (not compiled; memory a "
                                 "lower bound)",
            CompiledBy.CPU_PRICED: "compiled on CPU devices, priced on the target",
            CompiledBy.NOT_COMPILED: "timed by the stage model only"}.get(
                by, f"compiled by {by}")
    return f"the {n:,} {what}"
