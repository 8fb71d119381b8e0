"""explorer.largest_batch: the largest global batch that fits, with which activation policy, and
the fastest strategy at that batch, each answer a compile for the target.

This is the question MaxText's ahead-of-time compile answers by hand (compile a config for the
real chips, read its memory, change the batch or the remat policy, compile again): for each
policy (remat, offload) the batch is searched among the multiples of the batch's data-parallel
degree, and every probe is compiled for the target, so a batch "fits" when the target's own
compiler says so: its per-device memory within the chip's (`compiled_memory_fit`), or, on a TPU, a
compile that did not run out of HBM.

Memory grows with the batch almost linearly (activations, one-hot tokens and logits scale with
it; params and optimizer state do not), so the search fits a line through the last two probes
to guess the boundary, then brackets it with compiles until a batch that fits sits next to one
that does not; a bisection step keeps it finite when the line guesses badly. The answer is
always two compiles apart, never an extrapolation. Then `explorer.search` ranks the strategies
at the best policy's batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from explorer.api.request import check_mesh, check_target
from explorer.api.workload import analyze_workload
from explorer.cost.hardware import format_bytes, get_target
from explorer.cost.model import format_seconds
from explorer.errors import InputError, WorkloadError, choices
from explorer.report.predict import compiled_memory_fit
from explorer.report.provenance import compiled_by
from explorer.report.report import Report
from explorer.spec.bounds import show
from explorer.spec.mesh import MeshSpec
from explorer.strategy.plan import plan
from explorer.workloads.base import Workload
from explorer.workloads.models import OFFLOADS, REMATS
from explorer.workloads.registry import get_workload

# Probes per policy beyond which the search stops with the bracket it has (a bisection over
# 2**24 batch steps needs 24; the line's guesses need a handful).
MAX_PROBES = 30


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
    """

    batch: int
    fits: bool
    memory_bytes: int | None
    host_bytes: int
    verdict: str
    step_seconds: float | None


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
    """

    remat: str
    offload: str
    largest_batch: int | None
    step_seconds: float | None
    tokens_per_second: float | None
    probes: tuple[BatchProbe, ...]
    error: str = ""

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

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("strategy",)}
        d["strategy"] = self.strategy.to_dict() if self.strategy is not None else None
        return d

    def text(self, top: int = 5) -> str:
        """The policies as a table, the best one, and the strategies at its batch."""
        lines = [f"largest global batch of {self.workload} on {self.mesh} that fits {self.target}"
                 + (f" ({self.compiled_by})" if self.compiled_by else "")
                 + f"; batches step by {self.batch_step}, the devices the batch is split over",
                 "", f"{'policy':<34} {'batch':>7}  {'memory/device':>14}  {'step':>9}  "
                 f"{'tokens/s':>10}  compiles"]
        for p in self.policies:
            at = next((q for q in p.probes if q.batch == p.largest_batch), None)
            memory = format_bytes(at.memory_bytes) if at and at.memory_bytes else "-"
            step = format_seconds(p.step_seconds) if p.step_seconds else "-"
            rate = f"{p.tokens_per_second:,.0f}" if p.tokens_per_second else "-"
            batch = str(p.largest_batch) if p.largest_batch else "none fits"
            lines.append(f"{p.label:<34} {batch:>7}  {memory:>14}  {step:>9}  {rate:>10}  "
                         f"{len(p.probes)}" + (f"  ({p.error})" if p.error else ""))
        if self.best is not None:
            above = next((q for q in self.best.probes
                          if q.batch == self.best.largest_batch + self.batch_step), None)
            lines += ["", f"best: {self.best.label} fits a global batch of "
                      f"{self.best.largest_batch}"
                      + (f"; {above.batch} does not ({above.verdict})" if above else "")]
        if self.strategy is not None:
            lines += ["", f"strategies at batch {self.best.largest_batch} with "
                      f"{self.best.label}:", self.strategy.text(top=top)]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def policies_for(remats: Sequence[str], offloads: Sequence[str]) -> list[tuple[str, str]]:
    """The (remat, offload) pairs to try: every pair, where offload=activations goes only with
    remat=minimal (what it offloads is what minimal saves)."""
    for what, given, valid in (("remat", remats, REMATS), ("offload", offloads, OFFLOADS)):
        if isinstance(given, str) or not given:
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


def largest_batch(workload: str, mesh, target: str, params: Mapping | None = None, *,
                  preset: str | None = "fsdp", rules=None,
                  remats: Sequence[str] = REMATS, offloads: Sequence[str] = ("none",),
                  max_batch: int | None = None, strategy: bool = True,
                  progress: Callable[[str], Any] | None = None,
                  compile_for: str = "target", timeout: float | None = None,
                  pool=None, search_kwargs: Mapping | None = None) -> CapacityResult:
    """The largest global batch of a training workload that fits `target`, for each activation
    policy, and the fastest strategy at the best one's batch; every answer a compile.

    Args:
        workload: a training workload with a token batch (``transformer_train``).
        mesh: the mesh, e.g. ``"data=64"``; its device count must be the target's.
        target: the hardware, e.g. ``"h100-8x8"``: each probe compiles for it (its own
            compiler where installed, see ``compile_for``) and is judged against its memory.
        params: the workload's other params (its ``batch`` is what is searched).
        preset, rules: the layout the probes use (``fsdp`` by default).
        remats: the remat policies to try; offloads: the offload settings to try (``none``,
            ``opt_state``, ``activations``; ``activations`` pairs with remat=minimal only).
        max_batch: the largest batch to consider (default: the workload's bound on batch).
        strategy: after the policies, rank the strategies at the best batch with
            explorer.search (rules space), whose winner is the fastest layout that fits.
        progress: called with a line of text before each compile.
        compile_for, timeout, pool: as explorer.analyze takes them; `search_kwargs` go to
            explorer.search.

    Returns:
        A CapacityResult: each policy's largest batch with every probe's memory verdict, the
        best policy, and the strategy ranking at its batch.

    Raises:
        InputError: an unknown workload, remat or offload; a workload with no token batch; a
            mesh that does not fit the target.
    """
    params = dict(params or {})
    pairs = policies_for(remats, offloads)
    w = get_workload(workload)
    resolved = w.resolve(params)
    mesh_spec = check_mesh(mesh)
    check_target(target, None, mesh_spec)
    step = _batch_step(w, resolved, mesh_spec, preset, rules)
    bound = w.bounds["batch"].high if "batch" in w.bounds else 2 ** 24
    top = _largest_valid(w, params, min(int(max_batch), bound) if max_batch is not None
                         else bound, step)
    if top < step:
        raise InputError(f"max_batch={show(max_batch)} is below the batch step {step} (the "
                         f"devices the batch is split over); raise it to at least {step}")
    say = progress or (lambda line: None)
    seq = resolved["seq"]

    capacity = get_target(target).chip.capacity
    if capacity is None:
        raise InputError(f"target {target!r} has no sourced memory size to fit a batch into; "
                         "pick a GPU or TPU target")
    words: list[str] = []           # which compiler wrote the programs, from the first probe

    def probe(batch: int, remat: str, offload: str) -> BatchProbe:
        say(f"compiling batch {batch} with remat={remat}, offload={offload} for {target}")
        report = analyze_workload(workload, mesh_spec, params={**params, "batch": batch,
                                                              "remat": remat,
                                                              "offload": offload},
                                  preset=preset, rules=rules, target=target,
                                  compile_for=compile_for, timeout=timeout, pool=pool)
        if not words:
            words.append(compiled_by(report))
        return _probe_of(report, batch, target)

    found = []
    for remat, offload in pairs:
        probes: list[BatchProbe] = []
        try:
            largest = _search_batch(lambda b, r=remat, o=offload: probe(b, r, o), step, top,
                                    capacity, probes)
        except InputError as e:     # e.g. a combination the workload refuses
            found.append(PolicyCapacity(remat, offload, None, None, None, tuple(probes),
                                        error=str(e)))
            continue
        at = next((p for p in probes if p.batch == largest), None)
        seconds = at.step_seconds if at is not None else None
        found.append(PolicyCapacity(
            remat, offload, largest, seconds,
            largest * seq / seconds if largest and seconds else None, tuple(probes)))
    fitting = [p for p in found if p.largest_batch]
    best = max(fitting, key=lambda p: (p.largest_batch, p.tokens_per_second or 0.0),
               default=None)
    notes = []
    ranking = None
    if best is not None and strategy:
        say(f"ranking strategies at batch {best.largest_batch} with {best.label}")
        from explorer._search.search import search

        ranking = search(workload, mesh=mesh_spec.text(), target=target,
                         params={**params, "batch": best.largest_batch, "remat": best.remat,
                                 "offload": best.offload},
                         compile_for=compile_for, timeout=timeout, pool=pool,
                         **dict(search_kwargs or {}))
    if best is None:
        notes.append(f"no policy fits even a global batch of {step} on {target}; shard more "
                     "(a larger model axis), offload, or pick a chip with more memory")
    return CapacityResult(workload, mesh_spec.text(), target, step, tuple(found), best,
                          ranking, words[0] if words else "", tuple(notes))


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


def _search_batch(probe: Callable[[int], BatchProbe], step: int, top: int, capacity: float,
                  probes: list[BatchProbe]) -> int | None:
    """The largest multiple of `step` up to `top` that `probe` says fits, with `probes` filled
    in; None when `step` itself does not. Memory is assumed to grow with the batch (more rows,
    more activations), as it does; the line through the last two probes guesses the
    boundary, a bisection of the bracket guards the guess."""
    def run(batch: int) -> BatchProbe:
        p = probe(batch)
        probes.append(p)
        return p

    first = run(step)
    if not first.fits:
        return None
    lo, hi = first, None            # lo fits; hi (when known) does not
    while len(probes) < MAX_PROBES:
        if (hi is not None and hi.batch - lo.batch <= step) or lo.batch >= top:
            return lo.batch
        p = run(_line_guess(probes, step, lo, hi, top, capacity))
        if not p.fits:
            hi = p
            continue
        lo = p
        # The line aims at the boundary, so the next step up usually settles it; where that
        # fits too, the line through these two close probes (or a doubling) goes on.
        if lo.batch + step <= top and (hi is None or hi.batch > lo.batch + step) \
                and len(probes) < MAX_PROBES:
            n = run(lo.batch + step)
            lo, hi = (n, hi) if n.fits else (lo, n)
    return lo.batch


def _line_guess(probes: list[BatchProbe], step: int, lo: BatchProbe, hi: BatchProbe | None,
                top: int, capacity: float) -> int:
    """The next batch to compile: where the line through two probes with memory figures meets
    the chip's memory, kept strictly inside the bracket (lo, hi); without a line, double."""
    ceiling = hi.batch - step if hi is not None else top
    measured = [p for p in probes if p.memory_bytes is not None]
    guess = None
    if len(measured) >= 2:
        a, b = measured[-2], measured[-1]
        if b.batch != a.batch and b.memory_bytes != a.memory_bytes:
            slope = (b.memory_bytes - a.memory_bytes) / (b.batch - a.batch)
            if slope > 0:
                guess = a.batch + (capacity - a.memory_bytes) / slope
    if guess is None:
        guess = lo.batch * 2
    if hi is not None:
        # Never the bracket's ends, and at worst its middle: the bracket halves each time the
        # line would crawl.
        middle = (lo.batch + hi.batch) // 2
        guess = min(max(guess, lo.batch + step), ceiling)
        if not (lo.batch < guess < hi.batch):
            guess = middle
    batch = max(lo.batch + step, min(int(guess) // step * step, ceiling))
    return min(batch, top)


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
