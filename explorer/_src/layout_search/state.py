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

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def cancelled(self) -> bool:
        return self.user_cancelled or (self.cancel is not None and self.cancel.is_set())

    def out_of_time(self) -> bool:
        """Cancelled, or the budget spent: what bounds a phase that starts no compile (the
        enumeration of the candidates)."""
        return self.cancelled() or (self.budget_s is not None and self.remaining() <= 0)

    def should_stop(self, patience: bool = True) -> bool:
        """Whether to start no more compiles; records why in `stopped`. Patience (compiles
        that do not improve the best) applies to the search, not to the confirmation."""
        if self.cancelled():
            self.stopped = StopReason.CANCELLED
            return True
        if self.budget_s is not None and self.remaining() <= 0:
            self.stopped = StopReason.BUDGET
            return True
        if patience and self.patience is not None and self.since_best >= self.patience:
            self.stopped = StopReason.PATIENCE
            return True
        return False

    def remaining(self) -> float | None:
        """Seconds left of the budget, less what is reserved; None without a budget."""
        return (None if self.budget_s is None
                else self.budget_s - self.reserved_s - self.elapsed())

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
        if self.progress is None:
            return
        answer = self.progress(Progress(phase, self.done, self.total, self.compiled,
                                        self.pruned, self.failed, self.best_seconds,
                                        self.best_label, current, self.elapsed(),
                                        self.estimated))
        if answer is False:
            self.user_cancelled = True
