"""The predicted step of one program on a target (`estimate`, `Estimate`): its collectives
timed on the target's links (explorer/_src/cost/collectives.py), its compute on the chip's
roofline (explorer/_src/cost/compute.py), the two overlapped or not, its memory against the
chip's (explorer/_src/cost/memory_fit.py) and its cautions (explorer/_src/cost/cautions.py).

Pure numbers over the hardware catalog; no jax. SCALING_BOOK = https://jax-ml.github.io/scaling-book/
(Austin et al.).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from explorer._src.cost.catalog.names import get_target
from explorer._src.cost.catalog.types import Target, VectorUnit, achievable, format_rate
from explorer._src.cost.cautions import cautions
from explorer._src.cost.collectives import (
    CollectiveBound,
    CollectiveTime,
    collective_time,
    overlapped_comm_seconds,
)
from explorer._src.cost.compute import (
    Bound,
    ComputeTime,
    compute_time,
    measured_read_bandwidth,
    priced_instructions,
    scheduled_compute_time,
)
from explorer._src.cost.coverage import kernel_efficiency
from explorer._src.cost.gemm_rates import GemmTable, gemm_table
from explorer._src.cost.mapping import AxisMapping, Tier, check_mapping, default_mapping
from explorer._src.cost.memory_fit import MemoryFit, memory_fit
from explorer._src.cost.ranges import StepRange
from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.hlo.groups import RingDirection, spanned_axes
from explorer._src.hlo.schedule import Work
from explorer._src.units import format_bytes, format_seconds


@dataclass(frozen=True)
class Estimate:
    """Predicted step time of one compiled program on a target.

    step_lower_seconds assumes communication fully overlaps compute, max(compute, comm), where
    one-way permutes of opposite ring directions on a torus overlap each other too;
    step_upper_seconds assumes none does, compute + comm (SCALING_BOOK, tpus, Question 6: "An
    upper bound ... is the sum ... the TPU can typically overlap these operations ... bottlenecked
    by the slowest piece").

    Attributes:
        target: the target's name.
        mapping: mesh axis -> the physical axes it lies on, e.g. ``{"data": "gpu:2",
            "model": "gpu:4"}``.
        dtype: the matmul dtype whose peak applies (by default the largest input's).
        collectives: the time of each collective, in the Report's order.
        compute: the roofline of the per-device program.
        comm_seconds: the collectives that could be timed, each times its runs, summed.
        step_lower_seconds: full overlap, max(compute, communication); None where the
            compute time is unknown (the communication alone would understate the step).
        step_upper_seconds: no overlap, compute + communication; None where the compute time
            or a collective's is unknown.
        bound: what limits the step at full overlap: compute, memory or communication; None
            where the compute time is unknown.
        memory: the per-device memory against the chip's; None without both figures.
        notes: which rates were used, and what could not be timed or placed.
        step_trace_seconds: the step on the predicted timeline of the scheduled program,
            where asynchronous collectives overlap the compute scheduled between their start
            and done; None without a schedule.
        peak: True for the vendors' nominal rates, False for the measured achievable ones.
        cautions: what may make the step far slower than predicted.
        step_range: the step as a range low..high, from where each instruction's time comes
            from (measured on the chip for its kind, or not; docs/cost-model.md, "Provenance
            and ranges"); None without a predicted trace.
    """

    target: str
    mapping: dict[str, str]
    dtype: str
    collectives: tuple[CollectiveTime, ...]     # same order as the input
    compute: ComputeTime
    comm_seconds: float                          # sum of the collectives that could be placed
    step_lower_seconds: float | None
    step_upper_seconds: float | None
    bound: Bound | None
    memory: MemoryFit | None
    notes: tuple[str, ...] = field(default=())
    # The step on the predicted timeline of the scheduled program (explorer._src.report.trace):
    # asynchronous collectives overlap the compute scheduled between their start and done.
    step_trace_seconds: float | None = None
    # True: the vendors' nominal rates; False: scaled by the measured fractions (`achievable`).
    peak: bool = False
    # What the prediction cannot see and that may make the step far slower than predicted:
    # fusions the compiler could not cost, kernels it cannot look inside (see `cautions`).
    cautions: tuple[str, ...] = ()
    # The step as a range, from where each instruction's time comes from
    # (explorer._src.cost.ranges); None without a predicted trace.
    step_range: StepRange | None = None

    @property
    def compute_seconds(self) -> float | None:
        """The compute part of the step, ``compute.seconds``."""
        return self.compute.seconds

    def to_dict(self) -> dict:
        return {
            "target": self.target, "mapping": dict(self.mapping), "dtype": self.dtype,
            "collectives": [c.to_dict() for c in self.collectives],
            "compute": self.compute.to_dict(), "comm_seconds": self.comm_seconds,
            "step_lower_seconds": self.step_lower_seconds,
            "step_upper_seconds": self.step_upper_seconds, "bound": self.bound,
            "step_trace_seconds": self.step_trace_seconds, "peak": self.peak,
            "memory": self.memory.to_dict() if self.memory else None,
            "notes": list(self.notes), "cautions": list(self.cautions),
            "step_range": self.step_range.to_dict() if self.step_range else None,
        }

    def text(self) -> str:
        """A short plain-text summary."""
        mapping = ", ".join(f"{k}={v}" for k, v in self.mapping.items())
        lines = [f"target {self.target}: {mapping}"]
        c = self.compute
        if c.seconds is None:
            lines.append("compute  unknown")
        else:
            mem = f", HBM {format_seconds(c.memory_seconds)}" if c.memory_seconds else ""
            rate = (f"FLOPs at {format_rate(c.peak_flops, 'FLOP/s')} {c.peak_dtype} "
                    f"{format_seconds(c.flops_seconds)}" if c.peak_flops is not None
                    else f"no {c.dtype} matrix peak")
            lines.append(f"compute  {format_seconds(c.seconds)} ({c.bound}-bound: {rate}{mem})")
        lines.append(f"comm     {format_seconds(self.comm_seconds)} in "
                     f"{len(self.collectives)} collective(s)")
        for t in self.collectives:
            secs = format_seconds(t.seconds) if t.seconds is not None else "?"
            over = ",".join(t.axes) or "-"
            lines.append(f"  {t.kind} over {over}: {format_bytes(t.bytes)}, {secs}"
                         + (f" x{t.runs} (in a loop)" if t.runs != 1 else "")
                         + (f", {t.links}" if t.links else "")
                         + (f" [{t.bound}-bound]" if t.bound is CollectiveBound.LATENCY else ""))
        if self.step_lower_seconds is not None:
            upper = (format_seconds(self.step_upper_seconds)
                     if self.step_upper_seconds is not None else "?")
            lines.append(f"step     {format_seconds(self.step_lower_seconds)} (full overlap) to "
                         f"{upper} (no overlap)" + (f": {self.bound}-bound" if self.bound else ""))
        if self.step_trace_seconds is not None:
            lines.append(f"trace    {format_seconds(self.step_trace_seconds)} on the predicted "
                         "timeline of the compiled schedule")
        if self.step_range is not None:
            lines.append(f"range    {self.step_range.text()}")
        lines += [f"caution  {c}" for c in self.cautions]
        if self.memory:
            lines.append(f"memory   {self.memory.text}")
        lines += [f"note     {n}" for n in self.notes]
        return "\n".join(lines)



class PricedCollective(Protocol):
    """What the model reads of a collective: a Report's (explorer._src.report.report.Collective) or
    one a layout implies without a compile (explorer._src.estimate.walk.ImpliedCollective), which
    has no instruction, device groups, ring direction or slice tier and says so by their
    empty values."""

    @property
    def kind(self) -> CollectiveKind: ...
    @property
    def axes(self) -> tuple[str, ...]: ...       # mesh axes its groups span; () where none
    @property
    def program_bytes(self) -> int: ...          # V per device, in the program's dtype
    @property
    def group_size(self) -> int | None: ...
    @property
    def groups(self) -> tuple[tuple[int, ...], ...]: ...   # device groups; () where unknown
    @property
    def direction(self) -> RingDirection: ...    # a permute's ring direction, or NONE
    @property
    def tier(self) -> Tier: ...                  # the links it uses: ALL, or a leg's
    @property
    def hlo_name(self) -> str: ...               # its instruction, "" for an implied one
    @property
    def runs(self) -> int: ...                   # times one step runs it


def _collective_time(c: PricedCollective, target: Target, placed: AxisMapping,
                     mesh_names: Sequence[str], mesh_sizes: Sequence[int]) -> CollectiveTime:
    """collective_time of a Report's collective; one whose groups match no whole mesh axes is
    timed over the axes that hold them (explorer._src.hlo.groups.spanned_axes), where it has
    groups."""
    axes = tuple(c.axes)
    if not axes and c.groups:
        axes = spanned_axes([list(g) for g in c.groups], tuple(mesh_sizes), tuple(mesh_names))
    return collective_time(c.kind, c.program_bytes, axes, target, placed, c.group_size,
                           c.direction, c.tier)



def estimate(collectives: Sequence[PricedCollective], flops: float | None,
             bytes_accessed: float | None, memory_bytes: float | None, dtype: str,
             mesh_names: Sequence[str], mesh_sizes: Sequence[int], target: str | Target,
             mapping: AxisMapping | str | Mapping | None = None,
             work: Work | None = None, peak: bool = False) -> Estimate:
    """Predict a step on `target` from plain data.

    `collectives`: a Report's or the ones a layout implies (PricedCollective); each's .runs
    counts where no `work` says how often a step runs it. `flops`, `bytes_accessed`: per device,
    from XLA's cost analysis (None when XLA gave none). `memory_bytes`: per device. `dtype`: the
    matmul dtype whose peak applies. `mapping`: None for default_mapping, else as check_mapping
    takes. `work`: what the compiled schedule runs (explorer._src.hlo.schedule.schedule_work); with
    it, compute is summed per instruction and a collective in a loop counts once per trip, so
    that the bounds bracket the step on the predicted timeline. `peak`: time with the vendors'
    nominal FLOP/s and link bandwidths; by default each is scaled by its published measured
    fraction (explorer._src.cost.catalog.types.achievable), and the notes say which.
    """
    target = get_target(target)
    notes: list[str] = []
    # XLA's measured GEMM rates replace the flat measured fraction for the dots it measured;
    # at the vendors' peak (peak=True) nothing is measured.
    table = None if peak else gemm_table(target.chip.xla_gemm_table)
    if not peak and work is not None and table is None and target.chip.xla_gemm_table:
        notes.append(f"XLA's measured GEMM rates for {target.chip.name} are read from the gpu "
                     "extra's CUDA plugin, which is not installed: every matmul is timed at the "
                     "flat measured fraction of the peak")
    read_bandwidth, unit = None, None
    if peak:
        notes.append("at the vendors' peak FLOP/s and nominal link bandwidths, which real runs "
                     "do not reach")
    else:
        read_bandwidth, unit = measured_read_bandwidth(target.chip), target.chip.vector_unit
        target, derated = achievable(target)
        notes += derated
    if mapping is None:
        placed = default_mapping(target, mesh_names, mesh_sizes)
    else:
        placed = check_mapping(target, mesh_names, mesh_sizes, mapping)
    times = _collective_times(collectives, target, placed, mesh_names, mesh_sizes, work, notes)
    unplaced = [t for t in times if t.seconds is None]
    comm = sum(t.runs * t.seconds for t in times if t.seconds is not None)
    if unplaced:
        notes.append(f"{len(unplaced)} collective(s) could not be timed "
                     f"({unplaced[0].note}); communication time counts only the others")
    comp = _compute(flops, bytes_accessed, dtype, target, work, table, notes, read_bandwidth,
                    unit, peak)
    fit = memory_fit(memory_bytes, target)
    if memory_bytes is None:
        notes.append("no per-device memory figure, so no memory verdict")
    if comp.seconds is None:
        # Without a compute time there is no step time: its communication alone would
        # understate it, and a search would rank layouts by that.
        lower, upper, bound = None, None, None
        notes.append("the compute could not be timed, so no step time is given (the "
                     "communication alone would understate it)")
    else:
        # Full overlap: compute under communication, and opposite one-way permutes side by side.
        both_ways = overlapped_comm_seconds(times)
        lower = max(comp.seconds, both_ways)
        upper = comp.seconds + comm if not unplaced else None
        bound = comp.bound if comp.seconds >= both_ways else Bound.COMMUNICATION
    return Estimate(target.name, placed.to_dict(), comp.dtype, times, comp, comm, lower, upper,
                    bound, fit, tuple(notes), peak=peak,
                    cautions=cautions(work, "" if peak else target.chip.name)
                    if work is not None else ())


def _collective_times(collectives: Sequence[PricedCollective], target: Target, placed: AxisMapping,
                      mesh_names: Sequence[str], mesh_sizes: Sequence[int], work: Work | None,
                      notes: list[str]) -> tuple[CollectiveTime, ...]:
    """Each collective's time on `placed` links, run as often as the schedule (`work`) runs it;
    `notes` gets what is only bounded."""
    times = tuple(_collective_time(c, target, placed, mesh_names, mesh_sizes)
                  for c in collectives)
    # A leg of a split collective (tier inside or across) is timed on exactly its links.
    split = sum(1 for c, t in zip(collectives, times, strict=True)
                if t.axes != tuple(c.axes) and not c.tier)
    if split:
        notes.append(f"{split} collective(s) run over part of a mesh axis (device groups the "
                     "compiler split off, e.g. every fourth device of an axis of 16): each is "
                     "timed as over the whole axis, an upper bound")
    # How often a step runs each: the compiled schedule's trips, else the collective's own
    # count (a loop's trips read from the program, or implied by a scan's length).
    runs = ([work.collective_runs.get(c.hlo_name, 1) for c in collectives]
            if work is not None else [c.runs for c in collectives])
    return tuple(t if r == 1 else replace(t, runs=r)
                 for t, r in zip(times, runs, strict=True))



def _compute(flops: float | None, bytes_accessed: float | None, dtype: str, target: Target,
             work: Work | None, table: GemmTable | None, notes: list[str],
             read_bandwidth: float | None = None,
             vector_unit: VectorUnit | None = None, peak: bool = False) -> ComputeTime:
    """The step's compute: on one roofline from XLA's whole-program counts, or summed per
    scheduled instruction (`work`, dots at the GEMM `table`'s rates where it has them, reads at
    `read_bandwidth`, vector work on `vector_unit`, kernels at their measured efficiency but
    at the vendors' `peak`); `notes` gets how it was counted."""
    if work is None:
        comp = compute_time(flops, bytes_accessed, dtype, target)
    else:
        # A kernel runs at the fraction of its cost estimate measured on the chip, where one
        # was (not at the vendors' peak, where nothing measured applies).
        chip = target.chip.name
        comp = scheduled_compute_time(priced_instructions(work), dtype, target, table,
                                      read_bandwidth, vector_unit,
                                      None if peak else (lambda s: kernel_efficiency(s, chip)))
        notes += [f"loop {name!r}: its trip count could not be read, so its body is counted "
                  "once" for name in work.uncounted_loops]
        if work.fused_kernel_runs:
            notes.append(f"{work.fused_kernel_runs} instruction run(s) in a 'fused_kernel' "
                         "named scope are timed as one on-chip kernel (a flash-attention "
                         "kernel keeps its scores in on-chip memory): FLOPs at the peak (at "
                         "XLA's measured GEMM rate for each block's shape where the chip has "
                         "it), their memory traffic not counted")
        if work.causal_kernel_runs:
            notes.append(f"{work.causal_kernel_runs} of them in a 'fused_kernel_causal' scope "
                         "count half their FLOPs: a causal kernel skips the blocks above the "
                         "diagonal")
    notes += comp.notes
    if work is not None:
        whole = compute_time(flops, bytes_accessed, dtype, target)
        if flops is not None and whole.seconds is not None and comp.seconds is not None:
            notes.append(f"for comparison, XLA's whole-program counts ({flops:.3g} FLOPs, "
                         f"{format_bytes(bytes_accessed or 0)} accessed, loop bodies once) give "
                         f"{format_seconds(whole.seconds)} on one roofline")
    return comp

