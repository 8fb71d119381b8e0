"""explorer.largest_batch: the largest global batch that fits, with which activation policy, and
the fastest strategy at that batch, each answer a compile for the target.

This is the question MaxText's ahead-of-time compile answers by hand (compile a config for the
real chips, read its memory, change the batch or the remat policy, compile again): for each
policy (remat, offload) the batch is searched among the multiples of the batch's data-parallel
degree, and a batch "fits" when the target's own compiler says so: its per-device memory within
the chip's (`compiled_memory_fit`), or, on a TPU, a compile that did not run out of HBM.

The target's compiler takes seconds a compile (as long as a CPU one for a transformer step, and a
CPU compile's memory is not the target's: it moves bf16 as f32 and fuses otherwise), so it is
asked as few times as the answer allows, and a line predicts the rest for free. Memory grows
with the batch almost linearly (activations, one-hot tokens and logits scale with it; params and
optimizer state do not): the smallest batch is compiled first, then a far one, where memory
proportional to the batch would need FAR chips' worth (at most `max_batch`, which ends the
search there if it fits; a far batch that fits is the next one's start). The line through
their memory figures predicts the boundary batch, and the compiler confirms it: the batch
predicted and the one next to it. Where it does not confirm, the line through the closest
compiles predicts again, and a bisection step keeps the count bounded when it guesses badly. The
answer is always two compiles apart, never an extrapolation: the batch found fits and one step
above it does not, both by the target's compiler. Each probe says why it was compiled and what
the line had predicted for it. Then `explorer.search` ranks the strategies at the best policy's
batch, within a time budget (SEARCH_BUDGET_S unless `search_kwargs` gives one).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

from explorer._src.api.analysis_request import CompileForName, Request
from explorer._src.api.request import check_flag, check_mesh, check_target, check_timeout
from explorer._src.api.targeting import CompileFor, check_compile_for
from explorer._src.api.workload import analyze_workload
from explorer._src.cost.catalog.names import get_target
from explorer._src.errors import InputError, WorkloadError, choices
from explorer._src.layout_search.result import CompiledBy, Progress, SearchPhase
from explorer._src.layout_search.state import compiler_of
from explorer._src.report.predict import compiled_memory_fit
from explorer._src.report.provenance import compiled_by
from explorer._src.report.report import Report
from explorer._src.spec.bounds import show
from explorer._src.spec.mesh import MeshSpec
from explorer._src.strategy.plan import plan
from explorer._src.units import format_bytes, format_seconds
from explorer._src.workloads.base import Workload
from explorer._src.workloads.models import OFFLOADS, REMATS
from explorer._src.workloads.registry import get_workload

# Probes per policy beyond which the search stops with the bracket it has (a bisection over
# 2**24 batch steps needs 24; the line's guesses need a handful).
MAX_PROBES = 30
# The far batch compiled after the smallest: where memory proportional to the batch (an upper
# bound where params and optimizer state are part of the smallest batch's figure) would need
# FAR chips' worth. Far enough that the line through the two spans the boundary, not so far
# that the compile is of a program many times any chip (at the workload's bound on batch, a
# dimension can overflow XLA's int32 sizes).
FAR = 8
# Compiles in a row that may leave the bracket more than half as wide as it was before the line
# gets no more say and the bracket's middle is compiled.
MAX_SLOW_PROBES = 2
# The time budget of the strategy search at the best batch, seconds, unless search_kwargs give
# one: a transformer's rules space holds thousands of layouts at seconds a compile.
SEARCH_BUDGET_S = 120.0


class ProbeReason(StrEnum):
    """Why a batch was compiled."""

    SMALLEST = "smallest"          # the batch step: does anything fit
    LARGEST = "largest"            # max_batch: does everything fit; the line's far end
    FAR = "far"                    # FAR chips' worth, were memory proportional to the batch
    LINE = "line"                  # where the line predicts the boundary
    ABOVE = "above"                # one step above a batch that fits, the line's boundary
    BELOW = "below"                # one step below one that does not, the line predicting it fits
    BISECT = "bisect"              # the bracket's middle: the line guessed badly

    def phrase(self) -> str:
        return {ProbeReason.SMALLEST: "the smallest batch",
                ProbeReason.LARGEST: "the largest batch considered",
                ProbeReason.FAR: f"far up: {FAR} chips' worth, were memory proportional to the "
                                 "batch",
                ProbeReason.LINE: "where the line meets the chip's memory",
                ProbeReason.ABOVE: "one step above the line's boundary, to confirm it",
                ProbeReason.BELOW: "one step below a batch that does not fit, to confirm it",
                ProbeReason.BISECT: "the middle of the bracket (the line guessed badly)"}[self]


@dataclass(frozen=True)
class BatchProbe:
    """One compile of the search: a global batch under one policy, and the compiler's verdict.

    Attributes:
        batch: the global batch compiled.
        fits: whether it fits one chip's memory, by the target compiler's own figures.
        memory_bytes: bytes per device (Memory.total); None where the compiler stopped for
            want of memory (a TPU compile) and gave no analysis.
        host_bytes: bytes per device in host memory (offloaded), Memory.host_total.
        verdict: the memory verdict in words.
        step_seconds: the predicted step on the target; None where it could not be timed.
        compiled_by: the compiler whose figures these are.
        why: why this batch was compiled (ProbeReason); "" where not recorded.
        predicted_bytes: what the line predicted for this batch before the compile; None where
            the batch was chosen without a line (the smallest, the largest, a bisection).
    """

    batch: int
    fits: bool
    memory_bytes: int | None
    host_bytes: int
    verdict: str
    step_seconds: float | None
    compiled_by: CompiledBy = CompiledBy.NOT_COMPILED
    why: str = ""
    predicted_bytes: int | None = None


@dataclass(frozen=True)
class PolicyCapacity:
    """The largest batch one activation policy fits.

    Attributes:
        remat: the remat policy (transformer_train's ``remat``).
        offload: what lives in host memory (``offload``).
        largest_batch: the largest global batch that fits; None when even the smallest does
            not.
        step_seconds: the predicted step at `largest_batch`.
        tokens_per_second: largest_batch · seq / step_seconds, the whole system's.
        probes: every compile, in the order made.
        error: why the policy could not be searched (its first compile failed), else "".
        predicted_batch: the boundary the first line predicted (through the first batches
            found to fit and not to fit), before any compile near it; None where none was
            drawn (the largest batch fits, the smallest does not, or the bracket had no
            memory figures to draw it through).
    """

    remat: str
    offload: str
    largest_batch: int | None
    step_seconds: float | None
    tokens_per_second: float | None
    probes: tuple[BatchProbe, ...]
    error: str = ""
    predicted_batch: int | None = None

    @property
    def label(self) -> str:
        return f"remat={self.remat}" + (f", offload={self.offload}"
                                        if self.offload != "none" else "")


@dataclass(frozen=True)
class CapacityResult:
    """What explorer.largest_batch found.

    Attributes:
        workload: the workload searched.
        mesh: the mesh text.
        target: the target compiled for and priced on.
        batch_step: the batch granularity, the product of the mesh axes the batch is split
            over (each probe is a multiple of it).
        policies: one entry per policy tried, in the order given.
        best: the policy with the largest batch (the faster one where two tie); None when none
            fits.
        strategy: explorer.search's ranking of the strategies at the best batch and policy, or
            None (not asked for, or nothing fits).
        compiled_by: which compiler wrote the probes' programs, in words.
        notes: what else to know.
        search_budget_s: the time budget the strategy search was given; None without one.
    """

    workload: str
    mesh: str
    target: str
    batch_step: int
    policies: tuple[PolicyCapacity, ...]
    best: PolicyCapacity | None
    strategy: Any = None                 # a SearchResult
    compiled_by: str = ""
    notes: tuple[str, ...] = field(default=())
    search_budget_s: float | None = None

    def compiles(self) -> dict[CompiledBy, int]:
        """The probes' compiles, by the compiler that made each (the strategy search's own
        are in its stats)."""
        return dict(Counter(q.compiled_by for p in self.policies for q in p.probes))

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("strategy",)}
        d["strategy"] = self.strategy.to_dict() if self.strategy is not None else None
        d["compiles"] = {str(k): n for k, n in self.compiles().items()}
        return d

    def text(self, top: int = 5) -> str:
        """The policies as a table, the best one, and the strategies at its batch."""
        lines = [f"largest global batch of {self.workload} on {self.mesh} that fits {self.target}"
                 + (f" ({self.compiled_by})" if self.compiled_by else "")
                 + f"; batches step by {self.batch_step}, the devices the batch is split over",
                 "", f"{'policy':<34} {'batch':>7}  {'memory/device':>14}  {'step':>9}  "
                 f"{'tokens/s':>10}  compiles  line"]
        for p in self.policies:
            at = next((q for q in p.probes if q.batch == p.largest_batch), None)
            memory = format_bytes(at.memory_bytes) if at and at.memory_bytes else "-"
            step = format_seconds(p.step_seconds) if p.step_seconds else "-"
            rate = f"{p.tokens_per_second:,.0f}" if p.tokens_per_second else "-"
            batch = str(p.largest_batch) if p.largest_batch else "none fits"
            line = str(p.predicted_batch) if p.predicted_batch is not None else "-"
            lines.append(f"{p.label:<34} {batch:>7}  {memory:>14}  {step:>9}  {rate:>10}  "
                         f"{len(p.probes):>8}  {line:>4}" + (f"  ({p.error})" if p.error else ""))
        counts = self.compiles()
        if counts:
            lines += ["", "compiles: " + ", ".join(
                f"{n} by {by or 'an unrecorded compiler'}" for by, n in counts.items())
                + "; 'line' is the boundary the line through each policy's smallest and "
                "largest batch predicted, which the compiler then confirmed or corrected"]
        if self.best is not None:
            above = next((q for q in self.best.probes
                          if q.batch == self.best.largest_batch + self.batch_step), None)
            lines += ["", f"best: {self.best.label} fits a global batch of "
                      f"{self.best.largest_batch}"
                      + (f"; {above.batch} does not ({above.verdict})" if above else "")]
        if self.strategy is not None:
            budget = (f" (a search bounded to {self.search_budget_s:g} s)"
                      if self.search_budget_s is not None else "")
            lines += ["", f"strategies at batch {self.best.largest_batch} with "
                      f"{self.best.label}{budget}:", self.strategy.text(top=top)]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def policies_for(remats: Sequence[str], offloads: Sequence[str]) -> list[tuple[str, str]]:
    """The (remat, offload) pairs to try: every pair, where offload=activations goes only with
    remat=minimal (what it offloads is what minimal saves)."""
    for what, given, valid in (("remat", remats, REMATS), ("offload", offloads, OFFLOADS)):
        if isinstance(given, str) or not isinstance(given, Sequence | set) or not given:
            raise InputError(f"{what}s={show(given)} is not a non-empty list; choose from "
                             f"{choices(valid)}")
        bad = [g for g in given if g not in valid]
        if bad:
            raise InputError(f"{what} {show(bad[0])} is not one of {choices(valid)}")
    pairs = [(r, o) for r in dict.fromkeys(remats) for o in dict.fromkeys(offloads)
             if o != "activations" or r == "minimal"]
    if not pairs:
        raise InputError("offload=activations needs remat=minimal among the remats; add it, or "
                         "another offload")
    return pairs


def batch_step(workload: str, params: Mapping, mesh, preset: str | None, rules) -> int:
    """The product of the mesh axes that the planned layout splits the batch (dim 0 of
    `tokens`) over: every probed batch is a multiple of it, so each device gets whole rows."""
    w = get_workload(workload)
    return _batch_step(w, w.resolve(params), check_mesh(mesh), preset, rules)


def _batch_step(w: Workload, resolved: Mapping, mesh_spec: MeshSpec, preset: str | None,
                rules) -> int:
    """batch_step on a workload already resolved and a mesh already checked."""
    if "tokens" not in w.shapes(resolved):
        raise WorkloadError(f"workload {w.name!r} has no token batch to grow; largest_batch "
                            "takes a training workload with `tokens`, e.g. transformer_train")
    layout = plan(w, resolved, mesh_spec, None, preset, rules)
    entry = (layout.specs.get("tokens") or (None,))[0]
    axes = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
    sizes = dict(zip(mesh_spec.names, mesh_spec.sizes, strict=True))
    return math.prod(sizes[a] for a in axes)


def largest_batch(workload: str | Request, mesh=None, target: str | None = None,
                  params: Mapping | None = None, *,
                  preset: str | None = "fsdp", rules=None,
                  remats: Sequence[str] = REMATS, offloads: Sequence[str] = ("none",),
                  max_batch: int | None = None, strategy: bool = True,
                  progress: Callable[[str], Any] | None = None,
                  compile_for: CompileForName | None = None, timeout: float | None = None,
                  pool=None, search_kwargs: Mapping | None = None) -> CapacityResult:
    """The largest global batch of a training workload that fits `target`, for each activation
    policy, and the fastest strategy at the best one's batch; every answer a compile.

    Args:
        workload: a training workload with a token batch (``transformer_train``); or an
            explorer.Request of one, which gives the workload, its params, the mesh, target,
            preset and rules, and the compile_for and timeout that this call does not give
            (its batch is what is searched).
        mesh: the mesh, e.g. ``"data=64"``; its device count must be the target's.
        target: the hardware, e.g. ``"h100-8x8"``: each probe compiles for it (its own
            compiler where installed, see ``compile_for``) and is judged against its memory.
        params: the workload's other params (its ``batch`` is what is searched).
        preset, rules: the layout the probes use (``fsdp`` by default).
        remats: the remat policies to try; offloads: the offload settings to try (``none``,
            ``opt_state``, ``activations``; ``activations`` pairs with remat=minimal only).
        max_batch: the largest batch to consider (default: the workload's bound on batch).
        strategy: after the policies, rank the strategies at the best batch with
            explorer.search (rules space), whose winner is the fastest layout that fits; the
            search is bounded to SEARCH_BUDGET_S seconds unless `search_kwargs` give a
            ``budget_s``.
        progress: called with a line of text before each compile, after each policy, and as
            the strategy search goes.
        compile_for, timeout, pool: as explorer.analyze takes them, for every probe and the
            strategy search (compile_for None: the Request's, else "target"; timeout None:
            the Request's, else the compile pool's own limit); `search_kwargs` go to
            explorer.search.

    Returns:
        A CapacityResult: each policy's largest batch with every probe's memory verdict (and
        why it was compiled, and what the line had predicted for it), the best policy, and the
        strategy ranking at its batch.

    Raises:
        InputError: an unknown workload, remat or offload; a workload with no token batch; a
            mesh that does not fit the target.
        WorkerError: a probe's compile took longer than `timeout` (its worker was stopped).
    """
    if isinstance(workload, Request):
        # What this call gives wins over the Request's: a caller who asks for compile_for="cpu"
        # or a timeout gets them (issue 53: both were replaced by the Request's, silently).
        workload, mesh, target, params, preset, rules, own_for, own_timeout = _request_fields(
            workload, mesh, target, params, preset, rules)
        compile_for = own_for if compile_for is None else compile_for
        timeout = own_timeout if timeout is None else timeout
    if target is None:
        raise InputError("largest_batch needs a target to fit the batch into, e.g. "
                         "target='h100-8' (see explorer.targets())")
    timeout = _check_options(params, max_batch, strategy, progress, timeout, search_kwargs)
    params = dict(params or {})
    pairs = policies_for(remats, offloads)
    w = get_workload(workload)
    resolved = w.resolve(params)
    mesh_spec = check_mesh(mesh)
    check_target(target, None, mesh_spec)
    compile_for = check_compile_for("target" if compile_for is None else compile_for)
    compiler = compiler_of(mesh_spec, target, compile_for)
    step, top = _batch_range(w, params, resolved, mesh_spec, preset, rules, max_batch)
    capacity = get_target(target).chip.capacity
    if capacity is None:
        raise InputError(f"target {target!r} has no sourced memory size to fit a batch into; "
                         "pick a GPU or TPU target")
    say = progress or (lambda line: None)
    probing = _Probing(workload, mesh_spec, params, preset, rules, target, compile_for, timeout,
                       pool, compiler, capacity, step, top, resolved["seq"], say)
    found = [probing.policy(n, len(pairs), remat, offload)
             for n, (remat, offload) in enumerate(pairs, 1)]
    fitting = [p for p in found if p.largest_batch]
    best = max(fitting, key=lambda p: (p.largest_batch, p.tokens_per_second or 0.0),
               default=None)
    ranking, budget = (probing.rank(best, search_kwargs) if best is not None and strategy
                       else (None, None))
    notes = []
    if best is None:
        notes.append(f"no policy fits even a global batch of {step} on {target}; shard more "
                     "(a larger model axis), offload, or pick a chip with more memory")
    return CapacityResult(workload, mesh_spec.text(), target, step, tuple(found), best,
                          ranking, probing.words[0] if probing.words else "", tuple(notes),
                          search_budget_s=budget)


def _check_options(params, max_batch, strategy, progress, timeout, search_kwargs
                   ) -> float | None:
    """largest_batch's own options, each refused with the value and what it takes (before,
    some raised Python's own errors and a negative timeout went through); the checked
    timeout."""
    if params is not None and not isinstance(params, Mapping):
        raise InputError(f"params={show(params)} is not a mapping of the workload's params; "
                         "pass e.g. params={'layers': 4} (the batch is what is searched)")
    if max_batch is not None and (isinstance(max_batch, bool) or not isinstance(max_batch, int)
                                  or max_batch < 1):
        raise InputError(f"max_batch={show(max_batch)} is not a whole number of at least 1; "
                         "pass e.g. max_batch=1024, or None for the workload's own bound")
    check_flag(strategy, "strategy")
    if progress is not None and not callable(progress):
        raise InputError(f"progress={show(progress)} is not callable; pass a function that "
                         "takes a line of text, e.g. progress=print, or None")
    if search_kwargs is not None and not isinstance(search_kwargs, Mapping):
        raise InputError(f"search_kwargs={show(search_kwargs)} is not a mapping of "
                         "explorer.search's keywords; pass e.g. search_kwargs={'budget_s': 60}")
    return check_timeout(timeout)


def _batch_range(w: Workload, params: Mapping, resolved: Mapping, mesh: MeshSpec, preset,
                 rules, max_batch: int | None) -> tuple[int, int]:
    """The batch step (the devices the batch is split over) and the largest batch to consider:
    `max_batch`, else the workload's bound, rounded down to a valid multiple of the step."""
    step = _batch_step(w, resolved, mesh, preset, rules)
    bound = w.bounds["batch"].high if "batch" in w.bounds else 2 ** 24
    top = _largest_valid(w, params, min(int(max_batch), bound) if max_batch is not None
                         else bound, step)
    if top < step:
        raise InputError(f"max_batch={show(max_batch)} is below the batch step {step} (the "
                         f"devices the batch is split over); raise it to at least {step}")
    return step, top


def _request_fields(request: Request, mesh, target, params, preset, rules) -> tuple:
    """What largest_batch takes from a Request in place of its arguments: the workload, its
    params, the mesh, target, preset, rules, compile_for and timeout."""
    if request.workload is None:
        raise InputError("largest_batch searches a built-in training workload's batch; this "
                         "Request is of a function (give Request(workload='transformer_train', "
                         "...))")
    if any(v is not None for v in (mesh, target, params)) or preset != "fsdp" or rules:
        raise InputError("largest_batch(request, ...) takes the workload, mesh, target, params "
                         "and layout from the Request; give only the search's own options")
    r = request
    if r.specs or r.activations:
        raise InputError("largest_batch lays out each probe by the Request's preset and rules; "
                         "its specs= and activations= would not be used: drop them, or put "
                         "the layout in rules=")
    return (r.workload, r.planned.mesh, r.target, dict(r.params or {}), r.preset, r.rules,
            r.compile_for, r.timeout)


@dataclass
class _Probing:
    """One capacity search's probes: what each compiles (the workload at a batch and policy,
    for the target) and the batch search of one policy, with its progress lines."""

    workload: str
    mesh: MeshSpec
    params: dict
    preset: str | None
    rules: Any
    target: str
    compile_for: CompileFor
    timeout: float | None
    pool: Any
    compiler: CompiledBy
    capacity: float
    step: int
    top: int
    seq: int
    say: Callable[[str], Any]
    words: list[str] = field(default_factory=list)   # the compiler in words, from a report

    def probe(self, batch: int, remat: str, offload: str) -> BatchProbe:
        report = analyze_workload(self.workload, self.mesh,
                                  params={**self.params, "batch": batch, "remat": remat,
                                          "offload": offload},
                                  preset=self.preset, rules=self.rules, target=self.target,
                                  compile_for=self.compile_for, timeout=self.timeout,
                                  pool=self.pool)
        if not self.words:
            self.words.append(compiled_by(report))
        return replace(_probe_of(report, batch, self.target), compiled_by=self.compiler)

    def rank(self, best: PolicyCapacity, search_kwargs: Mapping | None) -> tuple[Any, float | None]:
        """explorer.search's ranking of the strategies at `best`'s batch and policy, and the
        time budget it was given (SEARCH_BUDGET_S unless `search_kwargs` give one)."""
        from explorer._src.layout_search.search import search

        kwargs = dict(search_kwargs or {})
        budget = kwargs.setdefault("budget_s", SEARCH_BUDGET_S)
        self.say(f"ranking strategies at batch {best.largest_batch} with {best.label}: "
                 "explorer.search over the layouts"
                 + (f", bounded to {budget:g} s" if budget is not None
                    else ", with no time budget"))
        kwargs.setdefault("progress", _SearchLines(self.say, budget))
        ranking = search(self.workload, mesh=self.mesh.text(), target=self.target,
                         params={**self.params, "batch": best.largest_batch,
                                 "remat": best.remat, "offload": best.offload},
                         compile_for=self.compile_for, timeout=self.timeout, pool=self.pool,
                         **kwargs)
        return ranking, budget

    def policy(self, n: int, of: int, remat: str, offload: str) -> PolicyCapacity:
        """Policy `n` of `of`: its largest batch, every probe, and what the line predicted."""
        probes: list[BatchProbe] = []
        policy = f"remat={remat}, offload={offload}"

        def announce(batch: int, why: ProbeReason, line: _Line | None) -> None:
            predicted = (f", the line predicting {format_bytes(line.at(batch))} of "
                         f"{format_bytes(self.capacity)}" if line is not None else "")
            self.say(f"compiling batch {batch} with {policy} for {self.target} by "
                     f"{self.compiler} (policy {n} of {of}, compile {len(probes) + 1}): "
                     f"{why.phrase()}{predicted}")

        try:
            largest = _search_batch(lambda b: self.probe(b, remat, offload), self.step,
                                    self.top, self.capacity, probes, announce)
        except InputError as e:     # e.g. a combination the workload refuses
            self.say(f"{policy}: not searched ({str(e).splitlines()[0]})")
            return PolicyCapacity(remat, offload, None, None, None, tuple(probes),
                                  error=str(e))
        at = next((p for p in probes if p.batch == largest), None)
        seconds = at.step_seconds if at is not None else None
        predicted = _first_prediction(probes, self.step)
        self.say(_policy_line(policy, largest, self.step, self.top, predicted, len(probes),
                              self.compiler))
        return PolicyCapacity(remat, offload, largest, seconds,
                              largest * self.seq / seconds if largest and seconds else None,
                              tuple(probes), predicted_batch=predicted)


def _policy_line(policy: str, largest: int | None, step: int, top: int,
                 predicted: int | None, compiles: int, compiler: CompiledBy) -> str:
    """The progress line after one policy: its answer, what the line had predicted, the
    compiles."""
    by = f"{compiles} compile{'s' if compiles != 1 else ''} by {compiler}"
    if largest is None:
        return f"{policy}: even batch {step} does not fit ({by})"
    if largest >= top:
        return f"{policy}: the largest batch considered, {top}, fits ({by})"
    line = f"; the line had predicted {predicted}" if predicted is not None else ""
    return f"{policy}: batch {largest} fits, {largest + step} does not ({by}{line})"


class _SearchLines:
    """explorer.search's progress as lines for largest_batch's `progress`: each compile as it
    starts, each confirmation, and the end, with the counts and the budget spent."""

    def __init__(self, say: Callable[[str], Any], budget_s: float | None):
        self.say, self.budget_s = say, budget_s
        self.settled = 0                 # compiles finished when last called
        self.last = ""

    def __call__(self, p: Progress) -> None:
        settled = p.compiled + p.failed
        if p.phase is SearchPhase.ENUMERATE:
            line = "search: listing the layouts"
        elif p.phase is SearchPhase.DONE:
            line = "search: done, ranking what was compiled"
        elif p.phase is SearchPhase.COMPILE and settled == self.settled:
            line = f"search: compiling {p.current}"
        elif p.phase is SearchPhase.CONFIRM:
            line = f"search: confirming {p.current} with the target's compiler"
        elif p.phase is SearchPhase.ESTIMATE:
            line = "search: estimating layouts from the traced program (no compile)"
        else:
            self.settled = settled
            return
        self.settled = settled
        best = format_seconds(p.best_seconds) if p.best_seconds is not None else "none yet"
        budget = f" of {self.budget_s:g} s" if self.budget_s is not None else ""
        estimated = f"{p.estimated} estimated, " if p.estimated else ""
        line += (f" ({p.done:,} of {p.total:,} layouts settled: {p.compiled} compiled, "
                 f"{estimated}{p.pruned} pruned, {p.failed} failed; best {best}; "
                 f"{p.elapsed_s:.0f} s{budget})")
        if line != self.last:
            self.last = line
            self.say(line)


def _largest_valid(w, params: Mapping, top: int, step: int) -> int:
    """The largest multiple of `step` up to `top` that the workload's own bounds accept (its
    one-hot tokens and logits are held to the per-tensor element bound): checked without a
    compile, by bisection."""
    def valid(batch: int) -> bool:
        try:
            w.resolve({**params, "batch": batch})
        except InputError:
            return False
        return True

    lo, hi = 0, top // step        # in steps: lo valid (or 0), hi the candidate
    if valid(hi * step):
        return hi * step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if valid(mid * step) else (lo, mid)
    return lo * step


@dataclass(frozen=True)
class _Line:
    """Memory per device as a line in the batch, through two probes' figures."""

    batch: int
    bytes: float
    slope: float                   # bytes per sequence, > 0

    @classmethod
    def through(cls, a: BatchProbe, b: BatchProbe) -> _Line | None:
        """The line through `a` and `b`; None where either has no figure or memory does not
        grow between them."""
        if a.memory_bytes is None or b.memory_bytes is None or a.batch == b.batch:
            return None
        slope = (b.memory_bytes - a.memory_bytes) / (b.batch - a.batch)
        return cls(a.batch, a.memory_bytes, slope) if slope > 0 else None

    def at(self, batch: int) -> float:
        return self.bytes + self.slope * (batch - self.batch)

    def boundary(self, capacity: float, step: int) -> int:
        """The largest multiple of `step` the line puts within `capacity` (may be 0)."""
        return max(0, math.floor((self.batch + (capacity - self.bytes) / self.slope) / step)
                   * step)


def _search_batch(probe: Callable[[int], BatchProbe], step: int, top: int, capacity: float,
                  probes: list[BatchProbe],
                  announce: Callable[[int, ProbeReason, _Line | None], Any] | None = None
                  ) -> int | None:
    """The largest multiple of `step` up to `top` that `probe` says fits, with `probes` filled
    in (each with why it was compiled and what the line predicted for it); None when `step`
    itself does not. Memory is assumed to grow with the batch (more rows, more activations),
    as it does. `announce(batch, why, line)` is called before each compile."""
    def run(batch: int, why: ProbeReason, line: _Line | None = None) -> BatchProbe:
        if announce is not None:
            announce(batch, why, line)
        p = replace(probe(batch), why=str(why),
                    predicted_bytes=round(line.at(batch)) if line is not None else None)
        probes.append(p)
        return p

    lo = run(step, ProbeReason.SMALLEST)
    if not lo.fits or top <= step:
        return lo.batch if lo.fits else None
    hi = None
    while hi is None:               # each far batch at least FAR times the one before
        far = _far(lo, step, top, capacity)
        p = run(far, ProbeReason.LARGEST if far == top else ProbeReason.FAR)
        if p.fits and far == top:
            return far
        lo, hi = (p, None) if p.fits else (lo, p)
    # The bracket's width when it last halved, and the compiles since that neither halved it
    # nor came within a step of what the line predicted: after MAX_SLOW_PROBES of them the
    # line is off and the bracket's middle is compiled. `missed`: the compiles in a row that
    # the line missed by more than a step, all on one side of the boundary (the line bends
    # the same way each time, as through a curved memory; the next guess leans away).
    wide, slow, missed = hi.batch - lo.batch, 0, []
    while hi.batch - lo.batch > step and len(probes) < MAX_PROBES:
        batch, why, line = _next_probe(probes, lo, hi, step, capacity, slow >= MAX_SLOW_PROBES,
                                       len(missed) if missed else 0)
        p = run(batch, why, line)
        lo, hi = (p, hi) if p.fits else (lo, p)
        on_line = _within_a_step(p, line, step)
        missed = [] if on_line or (missed and missed[-1] != p.fits) else [*missed, p.fits]
        if hi.batch - lo.batch <= wide / 2 or why is ProbeReason.BISECT:
            wide, slow = hi.batch - lo.batch, 0
        elif not on_line:
            slow += 1
    return lo.batch


def _far(lo: BatchProbe, step: int, top: int, capacity: float) -> int:
    """The batch where memory proportional to the batch through `lo` (which fits) would need
    FAR chips' worth, a multiple of `step` above `lo`, at most `top`."""
    if not lo.memory_bytes or lo.memory_bytes <= 0:
        return top
    far = math.ceil(lo.batch * FAR * capacity / lo.memory_bytes / step) * step
    return min(top, max(far, lo.batch + step))


def _within_a_step(p: BatchProbe, line: _Line | None, step: int) -> bool:
    """Whether the line predicted `p`'s memory within what one batch step adds."""
    return (line is not None and p.memory_bytes is not None
            and abs(p.memory_bytes - line.at(p.batch)) <= line.slope * step)


def _next_probe(probes: list[BatchProbe], lo: BatchProbe, hi: BatchProbe, step: int,
                capacity: float, bisect: bool,
                missed: int = 0) -> tuple[int, ProbeReason, _Line | None]:
    """The next batch to compile inside the bracket (lo fits, hi does not, more than a step
    apart), why, and the line it came from: where the line meets the chip's memory, or the
    batch next to the bracket's end the line puts the boundary at (the compile that confirms
    it); the bracket's middle when `bisect` or without a line. After `missed` compiles in a
    row that the line missed on the same side (the end last compiled moving, the other
    staying), the guess goes 1/2**(missed-1) of the way from the staying end instead (the
    Illinois rule of regula falsi), so that a curved memory does not make it crawl.

    The line runs through `lo` (the largest batch that fits) and whichever of `hi` and the
    largest fitting batch below `lo` has the memory figure nearer the chip's (`hi` has none
    where a TPU compile ran out of HBM)."""
    fitting = sorted((p for p in probes if p.fits and p.batch < lo.batch
                      and p.memory_bytes is not None), key=lambda p: p.batch)
    below = fitting[-1] if fitting else None
    # lo and whichever of hi and the largest fitting batch under lo is nearer the chip's memory:
    # a far end (a largest batch far above the boundary) bends the line least that way.
    other = min((q for q in (hi, below) if q is not None and q.memory_bytes is not None),
                key=lambda q: abs(q.memory_bytes - capacity), default=None)
    line = _Line.through(lo, other) if other is not None else None
    if bisect or line is None:
        middle = (lo.batch + hi.batch) // 2 // step * step
        return max(middle, lo.batch + step), ProbeReason.BISECT, line
    boundary = line.boundary(capacity, step)
    if missed >= 2:
        stay = lo if probes[-1].batch == hi.batch else hi
        boundary = round((stay.batch + (boundary - stay.batch) / 2 ** (missed - 1)) / step) * step
    if boundary <= lo.batch:
        return lo.batch + step, ProbeReason.ABOVE, line
    if boundary >= hi.batch - step:
        return hi.batch - step, ProbeReason.BELOW, line
    return boundary, ProbeReason.LINE, line


def _first_prediction(probes: Sequence[BatchProbe], step: int) -> int | None:
    """The boundary the first line predicted: the batch it chose (one step less where it chose
    the batch above the bracket's lower end, the boundary being that end); None where no line
    chose one."""
    for p in probes:
        if p.why in (ProbeReason.LINE, ProbeReason.BELOW):
            return p.batch
        if p.why == ProbeReason.ABOVE:
            return p.batch - step
    return None


def _probe_of(report: Report, batch: int, target: str) -> BatchProbe:
    est = report.estimate
    seconds = None
    if est is not None:
        seconds = est.step_trace_seconds or est.step_upper_seconds
    if report.memory_verdict is not None:
        v = report.memory_verdict
        return BatchProbe(batch, False, None, 0, f"the compiler ran out of {v.memory}: "
                          f"{v.message.strip().splitlines()[0]}", seconds)
    if report.memory is None:
        return BatchProbe(batch, False, None, 0, "the compiler gave no memory analysis", seconds)
    fit = compiled_memory_fit(report, get_target(target))
    return BatchProbe(batch, bool(fit and fit.fits), report.memory.total,
                      report.memory.host_total, fit.text if fit else "no memory figure",
                      seconds)
