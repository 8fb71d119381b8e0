"""Compute time on the target's chip: the roofline of a program or of each scheduled
instruction (the matrix unit at its peak or XLA's measured GEMM rates, memory at the HBM
bandwidth or the chip's faster read rate, the vector unit), float32 matmuls at a raised
precision, and the matmul dtype whose peak applies.

Pure functions over the hardware catalog (explorer/_src/cost/catalog/) and a compiled
schedule's Steps (explorer/_src/hlo/schedule.py); no jax. Sources are named beside each formula
and in docs/cost-model.md: SCALING_BOOK = https://jax-ml.github.io/scaling-book/ (Austin et al.),
chapter "tpus".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum

from explorer._src.cost.catalog.names import get_target
from explorer._src.cost.catalog.sources import CLOUD_BF16, JAX_LAX_PRECISION
from explorer._src.cost.catalog.types import Chip, Target, VectorUnit, format_rate
from explorer._src.cost.gemm_rates import GemmTable
from explorer._src.cost.tiling import reread_bytes
from explorer._src.errors import choices
from explorer._src.hlo.arithmetic import Dot, Sorting
from explorer._src.hlo.module import HLO_TO_NUMPY
from explorer._src.hlo.schedule import Step, Work
from explorer._src.spec.tensor import TensorRole, normalize_dtype
from explorer._src.units import format_bytes


class Bound(StrEnum):
    """What limits a step: the matmul rate, memory traffic, or (a step only) the collectives."""

    COMPUTE = "compute"
    MEMORY = "memory"
    COMMUNICATION = "communication"



@dataclass(frozen=True)
class ComputeTime:
    """Roofline of the per-device program: max(FLOPs / peak, bytes / HBM bandwidth).

    SCALING_BOOK, tpus, Question 4: "max{T_math, T_comms}" with T_math = FLOPs / peak FLOP/s and
    T_comms = HBM bytes / HBM bandwidth ("Assuming as much overlap ... as possible").
    With the compiled schedule, each scheduled instruction run gets its own roofline and
    `seconds` is their sum (the notes say so).

    Attributes:
        seconds: the compute time; at memory speed alone where XLA gave no FLOP count or
            the chip has no peak for the dtype; None where the bytes cannot be timed either.
        flops_seconds: FLOPs over the peak.
        memory_seconds: bytes accessed over the memory bandwidth; None without either.
        bound: compute or memory, whichever is larger.
        peak_flops: the FLOP/s used (the measured achievable rate unless ``peak``).
        dtype: the program's matmul dtype.
        notes: how the time was made, and what was missing.
        peak_dtype: the dtype whose peak was used (a TPU runs float32 matmuls at its bf16
            rate); "" when none was.
        memory_bandwidth: bytes/s the memory roofline was drawn with.
        gemm_table: XLA's key of the measured GEMM rates that timed the bf16 dots, "" where
            none did.
        read_bandwidth: bytes/s an instruction that only reads moves at (Chip.read_measured);
            None where no such rate applies (every byte at `memory_bandwidth`).
        vector_unit: the chip's measured vector-unit rates that priced instructions doing no
            matmul (Chip.vector_unit); None where none did.
        float32_matmuls: how float32 matmuls at a raised precision were priced (TPU passes, or
            a GPU's float32 peak in place of TF32); None where no such rule applied.
    """

    seconds: float | None
    flops_seconds: float | None
    memory_seconds: float | None
    bound: Bound | None                 # COMPUTE or MEMORY
    peak_flops: float | None
    dtype: str                          # the program's matmul dtype
    notes: tuple[str, ...] = ()
    peak_dtype: str = ""                # the dtype whose peak was used; "" when none was
    memory_bandwidth: float | None = None   # bytes/s the memory roofline was drawn with
    # XLA's key of the measured GEMM rates that timed the bf16 dots (explorer._src.cost.gemm_rates),
    # "" where every FLOP was timed at `peak_flops`.
    gemm_table: str = ""
    read_bandwidth: float | None = None
    vector_unit: VectorUnit | None = None
    float32_matmuls: Float32Matmuls | None = None

    def to_dict(self) -> dict:
        return asdict(self)


# The peak_flops key of a GPU's TF32 tensor-core rate: what jax runs float32 matmuls at there
# by default.
TF32 = "tf32"


@dataclass(frozen=True)
class Float32Matmuls:
    """How a chip runs float32 matmuls at a raised precision (jax.lax.Precision): a TPU as 3
    (high) or 6 (highest) bfloat16 passes (`passes`, Step.passes per FLOP); a GPU, which runs
    them as TF32 by default and at high, on its float32 units at highest, `highest_slowdown`
    times slower (its TF32 peak over its float32 one; Step.highest_share of the FLOPs)."""

    passes: bool = False
    highest_slowdown: float = 1.0

    def factor(self, step: Step) -> float:
        """How many times its matmul FLOPs take as at the default precision."""
        if self.passes:
            return step.passes
        return 1.0 + step.highest_share * (self.highest_slowdown - 1.0)

    def notes(self, chip: Chip, instructions: Sequence[PricedInstruction]) -> list[str]:
        """What the raised precisions of `instructions` (each scheduled step and its runs)
        cost."""
        if self.passes:
            raised = [(i.runs, i.step.passes) for i in instructions if i.step.passes > 1]
            if not raised:
                return []
            passes = "/".join(f"{p:g}" for p in sorted({p for _, p in raised}))
            return [f"{sum(r for r, _ in raised)} matmul instruction run(s) at float32 "
                    f"precision high or highest: {chip.name} makes {passes} bfloat16 passes "
                    "for each of their FLOPs (jax.lax.Precision: 3 for high, 6 for highest)"]
        highest = sum(i.runs for i in instructions if i.step.highest_share > 0)
        if not highest:
            return []
        return [f"{highest} matmul instruction run(s) at float32 precision highest: "
                f"{chip.name} runs them on its float32 units, {self.highest_slowdown:.1f}x "
                "slower than TF32 (jax.lax.Precision: \"HIGHEST: ... On GPU: uses float32\")"]


def float32_matmuls(chip: Chip, peak_dtype: str) -> Float32Matmuls | None:
    """The rule for `chip`'s float32 matmuls at a raised precision, given the dtype whose peak
    prices the program (matmul_peak); None where none applies (no float32 program)."""
    if chip.float32_matmul_as is not None:
        return Float32Matmuls(passes=True)
    if peak_dtype == TF32 and chip.peak_flops.get("float32"):
        return Float32Matmuls(highest_slowdown=chip.peak_flops[TF32] / chip.peak_flops["float32"])
    return None


def matmul_peak(chip: Chip, dtype: str) -> tuple[float | None, str, str]:
    """(peak FLOP/s, the dtype it is quoted for, a note) for matmuls in `dtype` on `chip`.

    A float32 program on a chip with no float32 figure but a `float32_matmul_as` rule (TPUs)
    runs at that dtype's peak, and the note says so; otherwise a missing dtype has no peak.
    """
    dtype = normalize_dtype(dtype)
    if dtype == "float32" and TF32 in chip.peak_flops:
        peak = chip.peak_flops[TF32]
        return peak, TF32, (
            f"jax runs float32 matmuls on a {chip.name} as TF32 at its default precision ("
            f"\"On GPU: uses tensorfloat32 if available (e.g. on A100 and H100 GPUs)\", "
            f"{JAX_LAX_PRECISION}), so the TF32 peak {format_rate(peak, 'FLOP/s')} is used; one "
            f"at precision highest runs at the float32 peak "
            f"{format_rate(chip.peak_flops.get('float32', 0.0), 'FLOP/s')}")
    if dtype in chip.peak_flops:
        return chip.peak_flops[dtype], dtype, ""
    alias = chip.float32_matmul_as
    if dtype == "float32" and alias in chip.peak_flops:
        peak = chip.peak_flops[alias]
        return peak, alias, (
            f"{chip.name} has no float32 matmul peak; it runs float32 matmuls as {alias} passes "
            f"with float32 accumulation by default ({CLOUD_BF16}), so the {alias} peak "
            f"{format_rate(peak, 'FLOP/s')} is used")
    have = choices(chip.peak_flops) if chip.peak_flops else "none"
    return None, "", (f"no sourced {dtype} matrix peak for {chip.name} (sourced dtypes: {have}): "
                      "its FLOPs are not timed, and the compute is timed at memory speed "
                      "(bytes over the HBM bandwidth), a lower bound")


def compute_time(flops: float | None, bytes_accessed: float | None, dtype: str,
                 target: str | Target) -> ComputeTime:
    target = get_target(target)
    chip = target.chip
    dtype = normalize_dtype(dtype)
    notes = []
    peak, peak_dtype, peak_note = matmul_peak(chip, dtype)
    flops_s = memory_s = None
    if flops is None:
        notes.append("XLA gave no FLOP count, so the compute is its bytes at memory speed (a "
                     "lower bound), or unknown without those")
    else:
        if peak_note:
            notes.append(peak_note)
        if peak is not None:
            flops_s = flops / peak
    if bytes_accessed is None:
        notes.append("XLA gave no bytes-accessed count, so the HBM roofline is unknown")
    elif chip.memory_bandwidth is None:
        notes.append(f"no sourced memory bandwidth for {chip.name}, so no memory roofline")
    else:
        memory_s = bytes_accessed / chip.memory_bandwidth
    bandwidth = chip.memory_bandwidth
    if flops_s is None:
        # No FLOP count or no peak for the dtype: at memory speed where there is one, so that
        # a step is never priced as its communication alone.
        return ComputeTime(memory_s, None, memory_s, None if memory_s is None else Bound.MEMORY,
                           peak, dtype, tuple(notes), peak_dtype, bandwidth)
    bound = Bound.MEMORY if memory_s is not None and memory_s > flops_s else Bound.COMPUTE
    return ComputeTime(max(flops_s, memory_s or 0.0), flops_s, memory_s, bound, peak, dtype,
                       tuple(notes), peak_dtype, bandwidth)


def roofline_seconds(flops: float, nbytes: float, peak: float, bandwidth: float | None,
                     dots: Sequence[Dot] = (), table: GemmTable | None = None) -> float:
    """One instruction on the roofline: max(FLOPs / peak, bytes / HBM bandwidth); FLOPs alone
    where the chip has no sourced memory bandwidth. With the chip's measured GEMM `table` and
    the instruction's `dots`, its FLOPs take the rate measured for each dot's shape instead of
    `peak` (explorer._src.cost.gemm_rates)."""
    return max(math_seconds(flops, peak, dots, table), nbytes / bandwidth if bandwidth else 0.0)


def math_seconds(flops: float, peak: float, dots: Sequence[Dot] = (),
                 table: GemmTable | None = None) -> float:
    """The FLOP side of one instruction's roofline: at each dot's measured rate where `table`
    has one, else at `peak`."""
    if table is not None and dots:
        return table.seconds(flops, tuple(dots), peak)
    return flops / peak


# The read share of an instruction's bytes from which it moves faster than a copy, and the share
# at which it reaches the read rate. On a TPU v5e (rates.json) copies and transposes (half their
# bytes read) and adds (two thirds read) ran at 0.79 to 0.84 of 819 GB/s, reductions (all read)
# at 0.92: between two thirds and all, the rate is drawn on the line between the two.
READ_SHARE_AT_COPY_RATE = 2 / 3


def memory_seconds(nbytes: float, written: float, bandwidth: float | None,
                   read_bandwidth: float | None = None) -> float:
    """`nbytes` moved, `written` of them written and the rest read, at `bandwidth` (what copies
    reach); where the chip reads faster (`read_bandwidth`), an instruction that reads more
    than two thirds of its bytes moves them at a rate between the two, linear in its read share:
    a reduction that writes almost nothing at `read_bandwidth`. 0 without a bandwidth."""
    if not bandwidth or nbytes <= 0:
        return 0.0
    if not read_bandwidth:
        return nbytes / bandwidth
    share = 1.0 - min(max(written, 0.0), nbytes) / nbytes
    over = max(0.0, share - READ_SHARE_AT_COPY_RATE) / (1.0 - READ_SHARE_AT_COPY_RATE)
    return nbytes / (bandwidth + (read_bandwidth - bandwidth) * over)


def vector_seconds(ops: float, transcendentals: float, reduced: float,
                   unit: VectorUnit | None) -> float:
    """The vector unit's time for an instruction that does no matmul (Step.vector_ops,
    Step.transcendentals, Step.reduced): the larger of its elementwise operations over the
    unit's rate, each transcendental as `unit.transcendental_ops` operations, and its reduced
    elements over the unit's reduction rate (the two ran side by side on the chip: layernorm
    chains bound by their arithmetic, one-hot reductions by the reduction). 0 without a
    measured unit."""
    if unit is None:
        return 0.0
    weighted = ops + (unit.transcendental_ops - 1.0) * transcendentals
    return max(weighted / unit.ops_per_second, reduced / unit.reduced_per_second)


def sorting_seconds(sorting: Sorting | None, unit: VectorUnit | None) -> float:
    """A sort's or TopK's time at the chip's measured sorting rates (SortingRates): a sort's
    keys over its bitonic network's passes, each pass slower the longer the rows; a TopK's keys
    times k. 0 without a sort, or a chip that measured none."""
    rates = unit.sorting if unit is not None else None
    if sorting is None or rates is None:
        return 0.0
    if sorting.k:
        return sorting.elements * sorting.k * rates.top_k_per_element_k
    return sorting.elements * sorting.network_passes * (
        rates.per_pass + rates.per_pass_per_stage * sorting.stages)


def step_math_seconds(step: Step, peak: float, table: GemmTable | None = None,
                      float32: Float32Matmuls | None = None) -> float:
    """The FLOP side of one scheduled instruction (math_seconds); with `float32`
    (Float32Matmuls), FLOPs of float32 matmuls at a raised precision take longer: as a TPU's
    bfloat16 passes (`step.passes` each), or at a GPU's float32 peak in place of TF32."""
    return math_seconds(step.flops, peak, step.dots, table) * (
        float32.factor(step) if float32 else 1.0)


def instruction_seconds(step: Step, peak: float, bandwidth: float | None,
                        table: GemmTable | None = None, read_bandwidth: float | None = None,
                        unit: VectorUnit | None = None,
                        float32: Float32Matmuls | None = None) -> float:
    """One scheduled instruction on the roofline of the matrix unit, the memory and the vector
    unit: max(FLOPs / peak (each dot at its measured rate where `table` has it), bytes at
    memory speed (memory_seconds: reads faster where the chip does; a TPU matmul's operand
    windows that libtpu's tiling fetches again, explorer._src.cost.tiling.reread_bytes, at
    `bandwidth`, the copy rate), vector_seconds); the FLOPs as step_math_seconds prices them.
    The chip runs the three side by side; the slowest bounds the instruction."""
    math = step_math_seconds(step, peak, table, float32)
    memory = memory_seconds(step.bytes, step.written, bandwidth, read_bandwidth)
    if bandwidth:
        memory += reread_bytes(step) / bandwidth
    vector = vector_seconds(step.vector_ops, step.transcendentals, step.reduced, unit)
    return max(math, memory, vector, sorting_seconds(step.sorting, unit))


@dataclass(frozen=True)
class PricedInstruction:
    """One scheduled instruction that computes, as the compute sum prices it: its Step (FLOPs,
    bytes, dots, what it writes, its vector work) and the times one step runs it (the trip
    counts of the loops around it multiplied)."""

    step: Step
    runs: int


def priced_instructions(work: Work) -> tuple[PricedInstruction, ...]:
    """The instructions of `work` that compute, in schedule order, each with its runs
    (Work.compute_steps and the runs of Work.compute, index for index)."""
    return tuple(PricedInstruction(step, runs) for step, (*_, runs)
                 in zip(work.compute_steps, work.compute, strict=True))


def scheduled_compute_time(instructions: Sequence[PricedInstruction], dtype: str,
                           target: str | Target, table: GemmTable | None = None,
                           read_bandwidth: float | None = None,
                           vector_unit: VectorUnit | None = None,
                           efficiency: Callable[[Step], float] | None = None) -> ComputeTime:
    """Compute over a schedule: each instruction on its own roofline, summed.

    XLA runs the instructions of one device one after another, so a memory-bound fusion cannot
    hide behind a compute-bound dot: the roofline (SCALING_BOOK, tpus, Question 4) applies per
    instruction, and the sum is at least the whole-program max(FLOPs / peak, bytes / bandwidth).
    `bound` names the side whose instructions take most of the time. Each instruction is priced
    by instruction_seconds: with the chip's measured GEMM `table`, its dots' FLOPs take the
    rate measured for their shapes; its reads at `read_bandwidth` and its vector work on
    `vector_unit` where those are given, and a TPU matmul's operand windows that libtpu's tiling
    reads again (explorer._src.cost.tiling) at the HBM bandwidth. `efficiency`: the measured
    fraction of its roofline a step runs at (a kernel's,
    explorer._src.cost.coverage.kernel_efficiency).
    """
    target = get_target(target)
    chip = target.chip
    dtype = normalize_dtype(dtype)
    peak, peak_dtype, peak_note = matmul_peak(chip, dtype)
    bandwidth = chip.memory_bandwidth
    notes = [peak_note] if peak_note else []
    if bandwidth is None:
        notes.append(f"no sourced memory bandwidth for {chip.name}, so no memory roofline")
    memory_s = (sum(i.runs * i.step.bytes for i in instructions) / bandwidth if bandwidth
                else None)
    if peak is None:
        # No matrix peak for the dtype (an integer program: a random-number generator's, whose
        # largest input is its uint32 key; see matmul_peak): FLOPs take no time of their own,
        # and each instruction is its bytes at memory speed or its work on the vector unit,
        # whichever is longer. The vector unit is what such programs wait on: threefry's 123
        # integer operations per element ran 357 us for u32[4096,4096] on a TPU v5e, where
        # the bytes take 101 us and the operations 352 us
        # (benchmarks/results/tpu-v5e-2026-12-07/census-kinds, bits_16m).
        if memory_s is None:
            return ComputeTime(None, None, None, None, None, dtype, tuple(notes), "", bandwidth)
        seconds = sum(i.runs * instruction_seconds(i.step, float("inf"), bandwidth, None,
                                                   read_bandwidth, vector_unit)
                      for i in instructions)
        priced = bool(instructions)
        if priced and vector_unit is not None:
            notes.append(_vector_note(vector_unit))
        return ComputeTime(seconds, None, memory_s, Bound.MEMORY, None, dtype, tuple(notes), "",
                           bandwidth, "", read_bandwidth if priced else None,
                           vector_unit if priced else None)
    if table is not None and not any(table.rate(d) for i in instructions for d in i.step.dots):
        table = None     # no dot of a dtype it measured (a float32 program)
    float32 = float32_matmuls(chip, peak_dtype)
    seconds = flops_bound = math_total = 0.0
    for i in instructions:
        slow = efficiency(i.step) if efficiency is not None else 1.0
        math = step_math_seconds(i.step, peak, table, float32) / slow
        whole = instruction_seconds(i.step, peak, bandwidth, table, read_bandwidth,
                                    vector_unit, float32) / slow
        seconds += i.runs * whole
        math_total += i.runs * math
        if math >= whole:
            flops_bound += i.runs * whole
    notes.append(f"compute sums {sum(i.runs for i in instructions)} scheduled instruction runs, "
                 "each at max(FLOPs / peak, bytes / HBM bandwidth)")
    if table is not None:
        notes.append(table.describe() + "; other FLOPs at the peak above")
    priced = bool(instructions)
    if priced and read_bandwidth:
        notes.append(f"instructions that read more than two thirds of their bytes move them "
                     f"faster, up to {format_rate(read_bandwidth, 'B/s')} for one that only "
                     "reads (the chip's measured read rate)")
    if priced and vector_unit is not None:
        notes.append(_vector_note(vector_unit))
    if float32 is not None:
        notes += float32.notes(chip, instructions)
    reread = [(i.runs, reread_bytes(i.step)) for i in instructions]
    reread = [(r, b) for r, b in reread if b]
    if reread and bandwidth:
        notes.append(f"{len(reread)} matmul(s) tiled by libtpu in all three dimensions read "
                     f"operand windows again: {format_bytes(sum(r * b for r, b in reread))} "
                     f"more, at {format_rate(bandwidth, 'B/s')} (explorer/_src/cost/tiling.py)")
    bound = Bound.COMPUTE if flops_bound >= seconds - flops_bound else Bound.MEMORY
    return ComputeTime(seconds, math_total, memory_s, bound, peak, dtype, tuple(notes),
                       peak_dtype, bandwidth, table.device if table is not None else "",
                       read_bandwidth if priced else None,
                       vector_unit if priced else None, float32 if priced else None)


def _vector_note(unit: VectorUnit) -> str:
    return (f"instructions that do no matmul take at least their vector-unit time: "
            f"{format_rate(unit.ops_per_second, 'op/s')} elementwise, a transcendental as "
            f"{unit.transcendental_ops:g} operations, "
            f"{format_rate(unit.reduced_per_second, 'element/s')} reduced ({unit.what})")


def measured_read_bandwidth(chip: Chip) -> float | None:
    """Bytes/s an instruction that only reads moves at on `chip` (its nominal bandwidth times
    Chip.read_measured); None without that measurement."""
    if chip.read_measured is None or chip.memory_bandwidth is None:
        return None
    return chip.memory_bandwidth * chip.read_measured.fraction



def matmul_dtype(work: Work | None, tensors: Sequence = ()) -> str:
    """The dtype whose matrix peak times a program: that of its largest floating-point input
    (token ids are int32 and can be the largest input of a language model at a large batch,
    yet do no matmul); with none, that of the dots doing most of its FLOPs (their left
    operand's); else that of the largest input. The inputs come first because a CPU compile
    upcasts bf16 dots to f32: its dots do not say what the target runs."""
    inputs = [t for t in tensors if t.kind == TensorRole.INPUT] or list(tensors)
    floating = [t for t in inputs if normalize_dtype(t.dtype).startswith(("float", "bfloat"))]
    if floating:
        return max(floating, key=lambda t: t.bytes_per_device).dtype
    flops: dict[str, float] = {}
    for dots in work.dots if work is not None else ():
        for d in dots:
            name = HLO_TO_NUMPY.get(d.lhs_dtype)
            if name:
                flops[name] = flops.get(name, 0.0) + d.flops
    if flops:
        return max(flops, key=flops.__getitem__)
    return max(inputs, key=lambda t: t.bytes_per_device).dtype if inputs else "float32"
