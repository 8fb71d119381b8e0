"""The screen and the confirmation of a search on a GPU or TPU target.

The target's own compiler (XLA's GPU compiler, libtpu) writes the program that hardware runs,
but on a small machine it takes seconds a candidate, so a search of thousands would see a
handful. Where the search would use it, each candidate is screened instead on fake CPU devices,
priced on the target (api/targeting.py says why that program is an approximation), and the best
few the screen found are compiled again by the target's compiler, which then ranks them by its
own numbers: the winner is a confirmed candidate whenever one confirmed fits.

A share of the budget is kept from the screen for the confirmation, so that a search cut short
by its budget still confirms what it found. With compile_for="cpu", or a target whose compiler
is not installed, every compile is already a CPU one and nothing is screened.

Two screens. Where the program can be traced (and prune is on), every candidate is screened by
its estimate from the traced program, with no compile (estimate_screen.py), and that starts at
once: no compile comes before it, since on a busy 2-core machine one compile by the target's
compiler (its worker started first) can take the whole of a minute's budget. Its best are then
confirmed in the budget's reserve. Otherwise a CPU screen pays only where a CPU compile is much
cheaper than the target's: for a small program (mlp: a few tenths of a second against seconds),
not for a transformer step, whose CPU compile takes as long as its GPU one
(docs/performance.md). So the reference is compiled by both, and where the CPU was not
SCREEN_GAIN times faster the search compiles every candidate with the target's compiler, as
without a screen (`screen_skipped` says why).
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer._src.api.analysis_request import Request
from explorer._src.layout_search.result import Candidate, CandidateStatus, CompiledBy
from explorer._src.layout_search.state import compiler_of

# Screened candidates the target's compiler compiles again: the best that fit, by the screen.
CONFIRM_BEST = 3
# How many times faster than the target's compile a CPU compile of the reference must be for the
# screen to pay: at 2, two screen compiles cost one of the target's.
SCREEN_GAIN = 2.0
# Share of a budget kept from the screen for the confirmation. A GPU compile of a transformer
# step takes about as long as 3 CPU ones on a loaded 2-core machine (docs/performance.md).
CONFIRM_SHARE = 0.4


@dataclass(frozen=True)
class Screening:
    """How a search screens and confirms: the compiler that confirms, how many, and the share
    of the budget kept for it."""

    compiler: CompiledBy
    best: int = CONFIRM_BEST
    share: float = CONFIRM_SHARE

    def reserve(self, budget_s: float | None) -> float:
        """Seconds at the end of `budget_s` kept for the confirmation (0 without a budget)."""
        return 0.0 if budget_s is None else self.share * budget_s


def screening_for(request: Request) -> Screening | None:
    """A screen where a search of `request` would compile every candidate with the target's
    own compiler (compile_for="target" on a GPU or TPU target with its compiler installed);
    None where they compile on CPU devices anyway."""
    compiler = compiler_of(request.planned.mesh, request.target, request.compile_for)
    return Screening(compiler) if compiler.is_targets_own else None


def to_confirm(ranked: list[tuple[int, Candidate]], best: int) -> list[int]:
    """The keys of the `best` first candidates of `ranked` (best first) that fit and that the
    target's compiler has not compiled yet: the ones a failed or too large screen result would
    only waste a slow compile on are left out."""
    return [key for key, c in ranked
            if c.status in (CandidateStatus.OK, CandidateStatus.ESTIMATED)
            and not c.compiled_by.is_targets_own][:best]


def screen_skipped(screen: Candidate, target: Candidate) -> str:
    """Why a search should not screen with CPU compiles, from the reference compiled on CPU
    devices (`screen`) and by the target's compiler (`target`): the CPU cannot compile it, or
    is not SCREEN_GAIN times faster; "" where the screen pays. A reference the target's
    compiler fails leaves the screen on: the confirmations then say what that compiler makes of
    the best. The search then screens by the estimate instead (estimate_screen.py), or, where
    the program cannot be traced, compiles every candidate with the target's compiler."""
    if screen.report is None:
        return (f"no CPU screen: the CPU compile of the reference failed "
                f"({screen.error.splitlines()[0][:120] if screen.error else 'no report'})")
    if target.report is None:
        return ""
    cpu_s, own_s = screen.report.timing.compile_s, target.report.timing.compile_s
    if cpu_s * SCREEN_GAIN <= own_s:
        return ""
    return (f"no CPU screen: the reference compiled in {cpu_s:.1f} s on CPU devices against "
            f"{own_s:.1f} s with {target.compiled_by} (a screen pays where the CPU is "
            f"{SCREEN_GAIN:g}x faster)")
