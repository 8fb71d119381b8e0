"""The intra-operator search (rules or specs spaces): a branch and bound over the distinct
candidates of an enumerated space.

The replicated candidate is compiled first (the reference the bounds need); every other
candidate then gets a lower bound on its step time and on its memory per device from its specs
alone (bounds.py). One whose memory bound exceeds the chip's memory is never compiled; once the
time bound of every candidate left is no better than the best predicted step, none can win and
the search ends. The order of the compiles is the surrogate's (surrogate.py). A compiled result
below its own bound means an assumption of that bound failed: the bound is then switched off
and what it had pruned is searched after all. With `prune=False` every candidate is compiled
(the bounds are still computed and checked).

On a GPU or TPU target whose compiler the search would use, every compile above is a screen on
fake CPU devices, and the best few are then compiled by the target's compiler (confirm.py).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from functools import cached_property, partial

from explorer._src.api.analysis_request import Request
from explorer._src.api.targeting import CompileFor, compile_plan
from explorer._src.cost.catalog.names import get_target
from explorer._src.errors import ExplorerError
from explorer._src.layout_search import bounds
from explorer._src.layout_search.confirm import Screening, screen_skipped, to_confirm
from explorer._src.layout_search.deadline import Abandoned
from explorer._src.layout_search.estimate_screen import EstimateScreen
from explorer._src.layout_search.evaluate import Outcome, candidate_request
from explorer._src.layout_search.ranking import (
    candidate_of,
    pareto,
    rank,
    rank_key,
    winner_comparison,
)
from explorer._src.layout_search.result import (
    MIN_EVALUATED,
    Candidate,
    CandidateStatus,
    CompiledBy,
    SearchPhase,
    SearchResult,
    SearchSpace,
    SearchStats,
)
from explorer._src.layout_search.space import Problem, SearchPoint, Space
from explorer._src.layout_search.state import SearchState, compiler_of
from explorer._src.layout_search.surrogate import Surrogate, fits

# Seconds between two progress reports of the estimate screen, which settles a candidate every
# few milliseconds.
PROGRESS_EVERY_S = 0.25
# Candidates whose bounds are worked out between two looks at the budget.
BOUNDS_CHECK_EVERY = 256
# Seconds between two looks at whether the worker that confirms has started.
WORKER_POLL_S = 0.2

OBJECTIVE = ("the predicted step time on the target: the step trace of the compiled schedule, "
             "else the estimate's no-overlap bound, else its full-overlap bound")


@dataclass
class Pruning:
    """One bound's use in the search: whether it is still trusted, and what it has pruned."""

    trusted: bool
    pruned: list[int] = field(default_factory=list)


class BranchAndBound:
    """One search over `found`, the space of `request`'s program; `run()` compiles, prunes and
    ranks, once. Each candidate is compiled as a Request of its own (evaluate.py's
    candidate_request)."""

    def __init__(self, problem: Problem, space: SearchSpace, found: Space, request: Request,
                 state: SearchState, runner, screening: Screening | None = None):
        self.problem, self.space, self.found = problem, space, found
        self.request, self.state, self.runner = request, state, runner
        self.screening = screening
        # The compiles of the search proper: the screen's on CPU devices, else the Request's.
        self.searching = CompileFor.CPU if screening else request.compile_for
        self.compiled_by = (CompiledBy.CPU_PRICED if screening or not found.points
                            else compiler_of(found.points[0].layout.mesh, request.target,
                                             request.compile_for))
        if screening:
            state.reserved_s = screening.reserve(state.budget_s)
        self.screened = self.confirmed = 0
        self.confirmed_steps: list[float | None] = []   # each confirmation's step, in order
        # Each estimated candidate the target's compiler confirmed: as estimated (with no
        # scale), as compiled.
        self.estimates_confirmed: list[tuple[Candidate, Candidate]] = []
        self.estimating: EstimateScreen | None = None   # the screen, where CPU compiles do not pay
        self.screen_skipped = ""       # why the screen was dropped after the reference
        self.not_estimated = ""        # why the estimate could not screen, where it could not
        # The reference as the target's compiler made it, while weighing the screen: used
        # again if the reference is among the best confirmed.
        self.reference_confirmed: dict[int, Candidate] = {}
        self.points = found.points
        self.by_index = {p.index: p for p in self.points}
        chip = get_target(request.target).chip
        self.capacity, self.bandwidth = chip.capacity, chip.memory_bandwidth
        state.total = len(self.points)
        self.results: dict[int, Candidate] = {}
        self.time_lb = {p.index: 0.0 for p in self.points}
        self.mem_lb = {p.index: 0 for p in self.points}
        self.by_time = Pruning(trusted=state.prune)
        self.by_memory = Pruning(trusted=state.prune)
        self.not_evaluated: list[int] = []
        self.remaining: set[int] = {p.index for p in self.points}
        self.timed: list[int] = []     # compiled candidates with a predicted step, for the model
        self.shapes_tried = {self.points[0].layout.mesh.sizes} if self.points else set()

    def run(self) -> SearchResult:
        if self.points:
            self.estimating = self.start_estimate_screen()
            if self.estimating is None:
                self.compile_reference()
            self.set_bounds()
            self.prune_by_memory()
        if self.estimating is not None:
            self.estimate_all(self.estimating)
        while self.remaining or self.runner.pending():
            self.submit_next()
            if self.state.should_stop():
                self.stop()
                break
            if self.runner.pending():
                # Answered, or [] once the budget is spent or the search cancelled: the
                # should_stop above then stops it, without waiting for the compile in flight.
                for index, outcome in self.next_done():
                    self.settle(index, outcome)
        if self.state.cancelled():
            self.state.should_stop()     # records the cancel (after the estimate, say)
        elif self.screening is not None:
            self.confirm(self.screening)
        self.state.report(SearchPhase.DONE)
        return self.result()

    # -- the reference and the bounds ----------------------------------------------------------

    def start_estimate_screen(self) -> EstimateScreen | None:
        """Where the search screens (the target's own compiler would compile), the estimate
        screen, from the start: no compile comes before it, so that on a busy machine, where
        one compile by the target's compiler can take a minute, the budget goes first to
        weighing the candidates (milliseconds each), and the target's compiles confirm the
        best after it, in the budget's reserve. None where the program cannot be traced or
        prune=False asks for every candidate compiled: the reference's compiles then choose
        between a CPU screen and none (compile_reference)."""
        if self.screening is None:
            return None
        # The trace, and the first MIN_EVALUATED estimates, may take the budget's reserve
        # (screen_stopped): only a budget spent whole (by the enumeration, say) leaves nothing
        # to trace for.
        self.state.begin(SearchPhase.ESTIMATE)
        if self.state.out_of_time(reserve=False):
            return None
        screen, why = self.estimate_screen()
        if screen is None and why is None:     # the budget or a cancel stopped the trace
            self.state.should_stop(reserve=False)
            return None
        if screen is None:
            self.not_estimated = why
            return None
        self.state.reserved_s = self.screening.reserve(self.state.budget_s)
        self.runner.warm(compile_plan(self.points[0].layout.mesh, self.request.target,
                                      self.request.compile_for).worker)
        self.screen_skipped = ("no CPU screen: every candidate is screened by its estimate "
                               "from the traced program, with no compile, and the best "
                               f"confirmed by {self.screening.compiler}")
        return screen

    def compile_reference(self) -> None:
        """The reference (every searched tensor replicated, on the given mesh shape) first:
        the bounds need it. Where the search screens (a program the estimate cannot screen),
        the target's compiler compiles it first, and what that took against the CPU's compile
        chooses the screen (weigh_screen)."""
        ref = self.points[0]
        self.remaining.discard(ref.index)
        if self.state.should_stop():
            self.not_evaluated.append(ref.index)
            return
        self.state.begin(SearchPhase.COMPILE)
        own = None
        if self.screening is not None:
            own = self.reference_by_target(ref)
            if own is None:
                return
            self.state.begin(SearchPhase.COMPILE)
        self.submit(ref)
        done = self.next_done()
        for _, outcome in done:
            self.settle(ref.index, outcome)
        if not done:
            self.not_evaluated.append(ref.index)
        if own is not None and ref.index in self.results:
            self.weigh_screen(ref.index, own)

    def reference_by_target(self, ref: SearchPoint) -> Candidate | None:
        """The reference compiled by the target's compiler; None when the budget cut it short
        (the reference is then not evaluated)."""
        self.submit(ref, self.request.compile_for)
        self.state.report(SearchPhase.CONFIRM, ref.layout.label())
        done = self.next_done()
        if not done:
            self.not_evaluated.append(ref.index)
            return None
        [(_, outcome)] = done
        if self.ran_out(outcome):
            self.not_evaluated.append(ref.index)
            return None
        return self.candidate(ref.index, outcome, self.screening.compiler)

    def keep_own_reference(self, index: int, own: Candidate, screened: Candidate) -> None:
        """The target's compile of the reference as its result in place of the CPU's
        (`screened`): the best so far, and the surrogate's first point."""
        self.results[index] = own
        self.state.recount(screened, own)
        self.timed = [index] if own.status is not CandidateStatus.FAILED else []
        self.state.best_seconds, self.state.best_label = None, ""
        self.state.note_best(own)

    def weigh_screen(self, index: int, own: Candidate) -> None:
        """Keep the CPU screen where it pays against the target's compile of the reference
        (`own`; confirm.py's screen_skipped); else compile with the target's compiler from the
        reference on, as without a screen (the estimate screen, which would come first, could
        not screen this program: `not_estimated` says why)."""
        screened = self.results[index]
        why = screen_skipped(screened, own)
        if not why:
            self.reference_confirmed[index] = own
            return
        self.keep_own_reference(index, own, screened)
        self.screen_skipped = (f"{why}{self.not_estimated}, so every candidate compiles with "
                               f"{own.compiled_by}")
        self.screening, self.compiled_by = None, own.compiled_by
        self.searching = self.request.compile_for
        self.state.reserved_s = 0.0

    def estimate_screen(self) -> tuple[EstimateScreen | None, str | None]:
        """The estimate screen of this search, and ""; or None and why there is none: the
        search was asked to compile every candidate (prune=False), or the program could not
        be traced; or None and None where the budget or a cancel came before the trace ended
        (the trace is not waited for: deadline.py)."""
        if not self.state.prune:
            return None, " and prune=False asks for every candidate compiled"
        screen = EstimateScreen(self.problem, self.request.target, self.request.mapping,
                                stop=self.screen_stopped)
        try:
            screen.trace(self.points[0].layout.mesh)
        except ExplorerError as e:
            return None, f" and the program could not be traced for an estimate ({e})"
        except Abandoned:
            self.state.abandoned += 1
            return None, None
        return screen, ""

    def screen_stopped(self) -> bool:
        """Whether the estimate screen stops: a cancel, or its share of the budget spent. The
        share gives way to the reserve until MIN_EVALUATED candidates are estimated: fewer
        name no best (result.py), and an estimate takes milliseconds where a confirmation
        takes seconds, so on a loaded machine whose trace took the whole share (17-20 s of a
        60 s budget's 36 at load 8) the reserve goes first to the few estimates that let the
        search name a best, and what is left of it to confirming them."""
        return self.state.out_of_time(reserve=self.screened >= MIN_EVALUATED)

    def set_bounds(self) -> None:
        """Every candidate's bounds, from the reference's compile (what it could give)."""
        ref_index = self.points[0].index
        ref_result = self.results.get(ref_index)
        ref = bounds.reference_of(ref_result.report if ref_result else None, self.problem,
                                  self.bandwidth)
        for n, p in enumerate(self.points):
            # 8,620 candidates' bounds took 0.3-1 s on a loaded machine: once the budget is
            # spent whole (or the search cancelled), the rest keep bounds of 0, which nothing
            # reads, since no candidate is evaluated after that.
            if n % BOUNDS_CHECK_EVERY == BOUNDS_CHECK_EVERY - 1 and \
                    self.state.out_of_time(reserve=False):
                break
            self.time_lb[p.index] = bounds.time_bound(p, ref, self.problem.hidden_shardings)
            self.mem_lb[p.index] = bounds.memory_bound(p, ref)
        if ref_result is not None:       # its own bounds, now known, for the record
            self.results[ref_index] = replace(ref_result, bound_seconds=self.time_lb[ref_index],
                                              bound_memory=self.mem_lb[ref_index])

    def prune_by_memory(self) -> None:
        """Every candidate whose memory bound exceeds the chip's memory."""
        if self.by_memory.trusted and self.capacity is not None:
            self.prune(self.by_memory,
                       [i for i in self.remaining if self.mem_lb[i] > self.capacity])

    def prune_by_time(self) -> None:
        """Every candidate whose time bound is no better than the best: it cannot win."""
        best = self.state.best_seconds
        if self.by_time.trusted and best is not None:
            self.prune(self.by_time, [i for i in self.remaining if self.time_lb[i] >= best])

    def prune(self, pruning: Pruning, indices: list[int]) -> None:
        self.remaining.difference_update(indices)
        pruning.pruned.extend(indices)
        self.state.pruned += len(indices)
        self.state.done += len(indices)

    def distrust(self, pruning: Pruning) -> None:
        """Stop using a bound whose assumption failed, and take back what it cut."""
        if not pruning.trusted:
            return
        pruning.trusted = False
        self.remaining.update(pruning.pruned)
        self.state.pruned -= len(pruning.pruned)
        self.state.done -= len(pruning.pruned)
        pruning.pruned = []

    # -- compiling -----------------------------------------------------------------------------

    def submit(self, point: SearchPoint, compile_for: CompileFor | None = None) -> None:
        """Send `point`'s Request to the runner, compiled for the search's compiler (or
        `compile_for`), under what is left of the budget."""
        timeout = self.state.compile_timeout(self.request.planned.timeout)
        self.runner.send(point.index, partial(candidate_request, self.request, self.problem,
                                              point.layout, timeout,
                                              compile_for or self.searching))

    def next_done(self) -> list[tuple[int, Outcome]]:
        """The runner's next answers, waited for while the budget (less its reserve) lasts and
        the search is not cancelled; [] where it ran out first. The compile in flight is then
        the stop's to abandon (`stop`)."""
        return self.runner.next_done(stop=self.state.out_of_time)

    def submit_next(self) -> None:
        """Fill the runner's free slots with the next candidates, pruning by time first."""
        while self.remaining and self.runner.pending() < self.runner.slots \
                and not self.state.should_stop():
            self.prune_by_time()
            if not self.remaining:
                break
            index = self.next_index()
            self.remaining.discard(index)
            self.submit(self.by_index[index])
            self.state.report(SearchPhase.COMPILE, self.by_index[index].layout.label())

    @cached_property
    def surrogate(self) -> Surrogate | None:
        """The surrogate over every candidate, made when the compiles first need their order:
        an estimate screen never does, and its features of 8,620 candidates took 0.9 s at load
        12, before the trace, which the budget needs more."""
        return Surrogate(self.points) if len(self.points) > 2 else None

    def next_index(self) -> int:
        """The candidate to compile next (surrogate.py): first the lowest time bound on each
        mesh shape not tried yet, then the surrogate's lowest predicted step among those it
        predicts to fit; the time bound, then enumeration order, break ties."""
        fresh = [i for i in self.remaining
                 if self.by_index[i].layout.mesh.sizes not in self.shapes_tried]
        if self.surrogate is None or not self.timed or fresh:
            pick = min(fresh or self.remaining, key=lambda i: (self.time_lb[i], i))
            self.shapes_tried.add(self.by_index[pick].layout.mesh.sizes)
            return pick
        seconds = [self.results[i].seconds for i in self.timed]
        memory = [self.results[i].memory_bytes for i in self.timed]
        t, m = self.surrogate.predict(self.timed, seconds,
                                      memory if all(v is not None for v in memory) else ())

        def key(i):
            r = self.surrogate.row(i)
            return (not fits(m[r] if m is not None else None, self.capacity), t[r],
                    self.time_lb[i], i)
        return min(self.remaining, key=key)

    def settle(self, index: int, outcome: Outcome) -> None:
        """Record a finished compile: the candidate, the counts, the bounds it checks, the best
        so far."""
        if self.ran_out(outcome):
            self.not_evaluated.append(index)
            return
        cand = self.candidate(index, outcome, self.compiled_by)
        self.results[index] = cand
        self.state.count(cand)
        if cand.status is not CandidateStatus.FAILED:
            self.timed.append(index)
        self.check_bounds(cand, index)
        self.state.note_best(cand)
        self.state.report(SearchPhase.COMPILE, cand.label)

    def candidate(self, index: int, outcome: Outcome, compiled_by: CompiledBy) -> Candidate:
        point = self.by_index[index]
        return candidate_of(point.layout, point.specs, outcome, self.time_lb[index],
                            self.mem_lb[index], compiled_by=compiled_by)

    def ran_out(self, outcome: Outcome, patience: bool = True) -> bool:
        """A compile stopped by the budget's time limit (not by its own): not a failure of the
        candidate, so it is counted as not evaluated."""
        return (outcome.report is None and outcome.worker_failed
                and self.state.should_stop(patience))

    # -- the estimate screen (estimate_screen.py) ----------------------------------------------

    def estimate_all(self, screen: EstimateScreen) -> None:
        """Estimate the candidates left, lowest time bound first, until the budget's screen
        share or a cancel stops it (what is left is not evaluated)."""
        shown = 0.0
        for index in sorted(self.remaining, key=lambda i: (self.time_lb[i], i)):
            if self.state.should_stop(patience=False,
                                      reserve=self.screened >= MIN_EVALUATED):
                break
            try:
                estimated = screen.candidate(self.by_index[index])
            except Abandoned:       # the trace of a new mesh shape, which the stop cut short
                self.state.abandoned += 1
                self.state.should_stop(patience=False, reserve=False)
                break
            self.remaining.discard(index)
            cand = replace(estimated, bound_seconds=self.time_lb[index],
                           bound_memory=self.mem_lb[index])
            self.results[index] = cand
            self.screened += 1
            self.state.count(cand)
            self.state.note_best(cand)
            if self.state.elapsed() - shown >= PROGRESS_EVERY_S:   # not once a millisecond
                shown = self.state.elapsed()
                self.state.report(SearchPhase.ESTIMATE, cand.label)
        self.state.report(SearchPhase.ESTIMATE)
        if self.remaining:
            self.stop()

    # -- the confirmation (confirm.py) ---------------------------------------------------------

    def confirm(self, screening: Screening) -> None:
        """Compile the screen's best again with the target's compiler, in the budget's reserve,
        and keep what it made of them."""
        self.state.reserved_s = 0.0
        self.state.begin(SearchPhase.CONFIRM)
        if self.estimating is None:
            self.screened = len(self.results)
        ranked = sorted(self.results.items(), key=lambda item: rank_key(item[1]))
        # An estimate screen leaves most of its reserve when its compiles are quick: with a
        # budget, the estimate's next best are confirmed too, until the budget runs out or
        # `screening.best` confirmations in a row do not beat the best confirmed.
        more = self.estimating is not None and self.state.budget_s is not None
        waiting = to_confirm(ranked, len(ranked) if more else screening.best)
        # A compile's time limit does not count its worker's start: wait for the worker started
        # beside the estimate while the budget lasts, rather than start a compile that would
        # wait for it past the budget (and not at all with nothing to confirm).
        while waiting and self.runner.warming() and not self.state.should_stop(patience=False):
            time.sleep(WORKER_POLL_S)
        sent: set[int] = set()
        while waiting or self.runner.pending():
            while waiting and self.runner.pending() < self.runner.slots \
                    and not self.state.should_stop(patience=False) \
                    and not (more and self.no_better_in(screening.best)):
                index = waiting.pop(0)
                sent.add(index)
                if index in self.reference_confirmed:    # compiled so while weighing the screen
                    self.keep_confirmed(index, self.reference_confirmed[index])
                    continue
                self.submit(self.by_index[index], self.request.compile_for)
                self.state.report(SearchPhase.CONFIRM, self.results[index].label)
            if not self.runner.pending():
                break          # the budget or a cancel stopped it: the rest stay screened
            done = self.next_done()
            if not done:       # the budget or a cancel came first: its compile is not waited
                self.state.should_stop(patience=False)        # for, and it stays screened
                self.state.abandoned += len(self.runner.cancel_all())
                break
            for index, outcome in done:
                self.settle_confirmed(index, outcome, screening.compiler)
            if self.estimating is not None and self.rescale_estimates(self.estimating):
                # The estimate's order under its new scale chooses the next to confirm: the
                # first confirmation calibrates the ones after it (uncalibrated, the estimate
                # undervalues compute against the compiled schedule, docs/performance.md).
                ranked = sorted(self.results.items(), key=lambda item: rank_key(item[1]))
                left = len(ranked) if more else screening.best - len(sent)
                waiting = [k for k in to_confirm(ranked, len(ranked)) if k not in sent][:left]

    def rescale_estimates(self, screen: EstimateScreen) -> bool:
        """The candidates left estimated, their compute scaled to what the target's compiler
        made of those it confirmed so far (EstimateScreen.recalibrate), so that their times
        stand beside the confirmed ones'; whether that changed them."""
        factor = screen.recalibrate(self.estimates_confirmed)
        if factor == 1.0:
            return False
        for index, c in self.results.items():
            if c.compiled_by is CompiledBy.ESTIMATE and c.status is not CandidateStatus.FAILED:
                self.results[index] = screen.rescaled(c, factor)
        return True

    def no_better_in(self, n: int) -> bool:
        """Whether the last `n` confirmations (of at least `n`) did not beat the best one
        before them."""
        steps = [s for s in self.confirmed_steps if s is not None]
        return len(steps) >= n and min(steps[-n:]) >= min(steps[:-n], default=math.inf)

    def settle_confirmed(self, index: int, outcome: Outcome, compiler: CompiledBy) -> None:
        """A candidate as the target's compiler made it, the screen's step kept beside; one the
        budget cut short keeps its screen numbers."""
        if self.ran_out(outcome, patience=False):
            return
        self.keep_confirmed(index, self.candidate(index, outcome, compiler))

    def keep_confirmed(self, index: int, cand: Candidate) -> None:
        """`cand`, the target's compile of a screened candidate, in its place (its bounds, and
        the screen's step beside its own)."""
        screened = self.results[index]
        cand = replace(cand, screen_seconds=screened.seconds, bound_seconds=screened.bound_seconds,
                       bound_memory=screened.bound_memory)
        self.results[index] = cand
        if screened.compiled_by is CompiledBy.ESTIMATE and self.estimating is not None:
            self.estimates_confirmed.append((self.estimating.unscaled(screened), cand))
        self.state.recount(screened, cand)
        self.confirmed += cand.status is not CandidateStatus.FAILED
        self.confirmed_steps.append(cand.seconds if cand.status is CandidateStatus.OK else None)
        self.state.report(SearchPhase.CONFIRM, cand.label)

    def check_bounds(self, cand: Candidate, index: int) -> None:
        for pruning, message in (
                (self.by_time, bounds.time_violation(cand.label, cand.seconds,
                                                     self.time_lb[index])),
                (self.by_memory, bounds.memory_violation(cand.label, cand.memory_bytes,
                                                         self.mem_lb[index]))):
            if message is not None:
                self.state.violations.append(message)
                self.distrust(pruning)

    def stop(self) -> None:
        """The budget, patience or a cancel stopped the search: what is left is not
        evaluated."""
        abandoned = self.runner.cancel_all()      # sent, not answered: not waited for
        self.state.abandoned += len(abandoned)
        self.not_evaluated.extend(abandoned)
        self.not_evaluated.extend(sorted(self.remaining))
        self.remaining.clear()

    # -- the result ----------------------------------------------------------------------------

    def result(self) -> SearchResult:
        ranked = rank(list(self.results.values()))
        state, found = self.state, self.found
        stats = SearchStats(
            space=found.space, invalid=found.invalid, equivalent=found.equivalent,
            distinct=len(self.points), compiled=state.compiled, failed=state.failed,
            does_not_fit=sum(c.status is CandidateStatus.DOES_NOT_FIT for c in ranked),
            pruned_bound=len(self.by_time.pruned), pruned_memory=len(self.by_memory.pruned),
            not_evaluated=len(self.not_evaluated), seconds=state.elapsed(),
            budget_s=state.budget_s,
            stopped=state.stopped, prune=state.prune, cluster=self.runner.address,
            cluster_size=self.runner.size,
            bound_violations=tuple(state.violations),
            retried=sum(c.retries > 0 for c in ranked), screened=self.screened,
            confirmed=self.confirmed,
            confirmed_by=self.screening.compiler if self.screening else CompiledBy.NOT_COMPILED,
            screen_skipped=self.screen_skipped,
            screened_by=CompiledBy.ESTIMATE if self.estimating else CompiledBy.CPU_PRICED,
            estimated=state.estimated, cut_short=tuple(state.cut_short),
            abandoned=state.abandoned)
        return SearchResult(self.problem.name, self.space, self.request.target, OBJECTIVE,
                            tuple(ranked), pareto(ranked), winner_comparison(ranked), stats)
