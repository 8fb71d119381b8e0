"""What one running search keeps: the state of the run (its counts, its best so far, the stop
rules of budget, patience and cancel, and the progress callback it reports to), and which
compiler its candidates get (`compiler_of`). Both searches (branch_and_bound.py,
pipeline_search.py) use them; what every compile shares is the search's Request."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from explorer._src.api.request import MAX_TIMEOUT
from explorer._src.api.targeting import CompileFor, compile_plan
from explorer._src.compile.protocol import Backend
from explorer._src.layout_search.result import (
    Candidate,
    CandidateStatus,
    CompiledBy,
    Progress,
    SearchPhase,
    StopReason,
)
from explorer._src.spec.mesh import MeshSpec

_COMPILED_BY = {Backend.GPU_AOT: CompiledBy.GPU, Backend.TPU_AOT: CompiledBy.TPU}


def compiler_of(mesh: MeshSpec, target: str, compile_for: CompileFor | str) -> CompiledBy:
    """The compiler a candidate on `mesh`, for `target`, compiled for `compile_for`, gets (api/
    targeting.py's plan): the target's own where installed and asked for, else fake CPU
    devices priced on the target. Every candidate of a search has the mesh's device count, so
    every one gets the same."""
    backend = compile_plan(mesh, target, compile_for).worker.backend
    return _COMPILED_BY.get(backend, CompiledBy.CPU_PRICED)


@dataclass
class SearchState:
    """The counts and stop rules of one running search (mutable: the search updates it)."""

    started: float                   # time.perf_counter() when the search began
    budget_s: float | None = None
    cancel: Any = None               # anything with is_set(), e.g. a threading.Event
    progress: Callable[[Progress], Any] | None = None
    prune: bool = True
    patience: int | None = None
    stopped: StopReason = StopReason.COMPLETE
    total: int = 0
    done: int = 0
    compiled: int = 0
    failed: int = 0
    estimated: int = 0               # estimated (estimate_screen.py), not compiled
    pruned: int = 0
    best_seconds: float | None = None
    best_label: str = ""
    since_best: int = 0              # compiles since the best last improved
    # Seconds at the end of the budget kept from the screen for the confirmation (confirm.py);
    # released (0) when the confirmation starts.
    reserved_s: float = 0.0
    user_cancelled: bool = False     # the progress callback returned False
    violations: list[str] = field(default_factory=list)
    # The phase the search is in (begin, report), and each phase a budget or a cancel cut
    # short, in order: what the result says was not finished.
    phase: SearchPhase = SearchPhase.ENUMERATE
    cut_short: list[SearchPhase] = field(default_factory=list)
    # Work in flight when the search stopped that it did not wait for (deadline.py): compiles
    # sent and not answered, a trace not finished.
    abandoned: int = 0

    def begin(self, phase: SearchPhase) -> None:
        """The search enters `phase` (without a progress report: the phase's own reports
        follow as it settles candidates)."""
        self.phase = phase

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def cancelled(self) -> bool:
        return self.user_cancelled or (self.cancel is not None and self.cancel.is_set())

    def out_of_time(self, reserve: bool = True) -> bool:
        """Cancelled, or the budget spent (less the reserve, unless `reserve` is False): what
        bounds a phase that starts no compile (the enumeration of the candidates), and how long
        the search waits for work in flight (deadline.py). It records nothing: should_stop
        does."""
        return self.cancelled() or (self.budget_s is not None
                                    and self.remaining(reserve) <= 0)

    def should_stop(self, patience: bool = True, reserve: bool = True) -> bool:
        """Whether to start no more compiles; records why in `stopped`, and the phase a budget
        or a cancel cut short in `cut_short`. Patience (compiles that do not improve the best)
        applies to the search, not to the confirmation; `reserve` False spends the budget's
        reserve too."""
        if self.cancelled():
            return self._cut(StopReason.CANCELLED)
        if self.budget_s is not None and self.remaining(reserve) <= 0:
            return self._cut(StopReason.BUDGET)
        if patience and self.patience is not None and self.since_best >= self.patience:
            self.stopped = StopReason.PATIENCE
            return True
        return False

    def _cut(self, why: StopReason) -> bool:
        self.stopped = why
        if self.phase not in self.cut_short:
            self.cut_short.append(self.phase)
        return True

    def remaining(self, reserve: bool = True) -> float | None:
        """Seconds left of the budget, less what is reserved (unless `reserve` is False);
        None without a budget."""
        if self.budget_s is None:
            return None
        return self.budget_s - (self.reserved_s if reserve else 0.0) - self.elapsed()

    def compile_timeout(self, limit: float | None) -> float | None:
        """The time limit of the next compile: the caller's `limit`, cut to what is left of the
        budget (at least a second), so that a search keeps to its budget even through a slow
        compile; never over the longest limit a compile takes (MAX_TIMEOUT, a day), which a
        budget of days would otherwise hand every compile and have each refused."""
        left = self.remaining()
        if left is None:
            return limit
        cap = min(max(1.0, left), MAX_TIMEOUT)
        return cap if limit is None else min(limit, cap)

    def count(self, candidate: Candidate) -> None:
        """One more candidate settled: compiled, estimated, or failed."""
        self.done += 1
        self._tally(candidate, 1)

    def recount(self, before: Candidate, after: Candidate) -> None:
        """A settled candidate compiled again (confirm.py): its count moves from what it was
        (`before`: a CPU compile or an estimate) to what the new compile made of it."""
        self._tally(before, -1)
        self._tally(after, 1)

    def _tally(self, candidate: Candidate, n: int) -> None:
        if candidate.status is CandidateStatus.FAILED:
            self.failed += n
        elif candidate.compiled_by is CompiledBy.ESTIMATE:
            self.estimated += n
        else:
            self.compiled += n

    def note_best(self, candidate: Candidate) -> None:
        """Keep the best candidate that fits (compiled, or estimated) so far, and how many
        candidates ago it was found (what patience counts)."""
        if candidate.status in (CandidateStatus.OK, CandidateStatus.ESTIMATED) and (
                self.best_seconds is None or candidate.seconds < self.best_seconds):
            self.best_seconds, self.best_label = candidate.seconds, candidate.label
            self.since_best = 0
        else:
            self.since_best += 1

    def report(self, phase: SearchPhase, current: str = "") -> None:
        """Tell the progress callback where the search is; a False answer cancels it."""
        self.phase = phase
        if self.progress is None:
            return
        answer = self.progress(Progress(phase, self.done, self.total, self.compiled,
                                        self.pruned, self.failed, self.best_seconds,
                                        self.best_label, current, self.elapsed(),
                                        self.estimated))
        if answer is False:
            self.user_cancelled = True
