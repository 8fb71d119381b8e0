"""The predicted step as a range, from where each instruction's time comes from.

Each compute event of the predicted step trace carries its TimeBasis
(explorer/_src/cost/coverage.py): measured on the chip for its kind, or a roofline never held
against it. An instruction's time is bounded by

- **high**: its predicted time times its basis's `slowdown` (a measured kind that ran slower
  than the model by that much; `UNMEASURED_SLOWDOWN` for a kind never measured), or, for a
  sort (and XLA's TopK, a sort of each row), the bytes of a bitonic sorting network's passes
  over memory, L(L+1)/2 passes of its bytes for L = ceil(log2 n) of its longest dimension, at
  the copy rate, where that is more (`sort_bound_seconds`: a sort of 2^24 floats ran 85x its
  bytes on a TPU v5e, a top-k of 32000-wide rows 39x);
- **low**: its predicted time, but for a kernel priced at a measured fraction of its cost
  estimate, which may run faster: the best measured over its estimate (`Coverage.best`).

The step is a max-plus function of its instructions' durations (lanes that wait for each
other), which grows by at most the sum of what its durations grow by, and shrinks likewise:
so `high = step + sum(high_i - predicted_i)` and `low = step - sum(predicted_i - low_i)`
bound the step wherever each instruction stays within its own bounds. Where the high end is
twice the step or more, a caution names the instructions that could make it so, at their line.
Pure arithmetic over the trace; no jax.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from math import prod

from explorer._src.cost.compute import ComputeTime, instruction_seconds
from explorer._src.cost.coverage import TimeBasis, coverage_for, instruction_body
from explorer._src.hlo.module import HloModule, shape_memory_spaces
from explorer._src.hlo.schedule import Schedule, Step, StepKind
from explorer._src.units import format_seconds

# A range whose high end is this many times the predicted step or more carries a caution
# naming the instructions that make it so: the user meets no 2x error with no word.
CAUTION_AT = 2.0
# Instructions a caution names.
NAMED = 3
# The memory space of on-chip memory in a layout (`S(1)`: XLA's alternate memory, VMEM).
ON_CHIP_SPACE = 1


@dataclass(frozen=True)
class RangePart:
    """One instruction that widens the step's range, its events summed.

    Attributes:
        hlo: its instruction.
        kind: its kind (docs/cost-model.md, "Provenance and ranges").
        measured: its kind was held against the chip.
        source: ``file.py:12`` of the user's code; "" if unknown.
        predicted_s: its predicted seconds per step.
        low_s: the least it may take; high_s: the most.
        text: where its time comes from (its TimeBasis's text).
    """

    hlo: str
    kind: str
    measured: bool
    source: str
    predicted_s: float
    low_s: float
    high_s: float
    text: str

    def to_dict(self) -> dict:
        return {"hlo": self.hlo, "kind": self.kind, "measured": self.measured,
                "source": self.source, "predicted_s": self.predicted_s, "low_s": self.low_s,
                "high_s": self.high_s, "text": self.text}


@dataclass(frozen=True)
class StepRange:
    """The predicted step as a range, low..high, around the trace's step.

    Attributes:
        chip: the chip whose measurements were looked up.
        low_seconds, seconds, high_seconds: the least, the predicted and the most.
        unmeasured_seconds: the predicted time of instructions of kinds never held against
            the chip.
        parts: the instructions that widen it, the most widening first.
        cautions: what to tell the user where the high end is CAUTION_AT times the step or
            more, naming the instructions at their lines.
    """

    chip: str
    low_seconds: float
    seconds: float
    high_seconds: float
    unmeasured_seconds: float
    parts: tuple[RangePart, ...] = ()
    cautions: tuple[str, ...] = ()

    @property
    def widened(self) -> bool:
        """Whether the range is more than the one predicted number."""
        return self.low_seconds < self.seconds or self.high_seconds > self.seconds

    @property
    def unmeasured_share(self) -> float:
        return self.unmeasured_seconds / self.seconds if self.seconds else 0.0

    def text(self) -> str:
        """`2.9 ms .. 98.6 ms (34x: 100% of the predicted step is of kinds never measured on a
        TPU v5e)`, or the one number where nothing widens it."""
        if not self.widened:
            return f"{format_seconds(self.seconds)} (every instruction of a kind measured on " \
                   f"a {self.chip})"
        span = f"{format_seconds(self.low_seconds)} .. {format_seconds(self.high_seconds)}"
        ratio = self.high_seconds / self.seconds if self.seconds else math.inf
        return (f"{span} around {format_seconds(self.seconds)} (up to {ratio:.3g}x; "
                f"{self.unmeasured_share:.0%} of the predicted step is of kinds never "
                f"measured on a {self.chip})")

    def to_dict(self) -> dict:
        return {"chip": self.chip, "low_seconds": self.low_seconds, "seconds": self.seconds,
                "high_seconds": self.high_seconds,
                "unmeasured_seconds": self.unmeasured_seconds,
                "parts": [p.to_dict() for p in self.parts], "cautions": list(self.cautions)}


def scheduled_steps(schedule: Schedule) -> dict[str, Step]:
    """Instruction name -> its Step, loop bodies included."""
    out: dict[str, Step] = {}
    todo = list(schedule.steps)
    while todo:
        s = todo.pop()
        todo += s.body
        if s.kind is not StepKind.LOOP:
            out.setdefault(s.instr.name, s)
    return out


_SORTS = ("sort", "custom-call TopK")


def sort_bound_seconds(step: Step, kind: str, bandwidth: float | None) -> float:
    """The most a sort (or XLA's TopK) may take by its operation count: a bitonic network's
    L(L+1)/2 passes over its bytes, L = ceil(log2 n) for n its instruction's longest dimension,
    at `bandwidth` (the copy rate). 0 for any other kind, or without a bandwidth."""
    if kind not in _SORTS or not bandwidth:
        return 0.0
    n = max((d for a in step.instr.arrays for d in a.dims), default=1)
    passes = math.ceil(math.log2(n)) if n > 1 else 1
    return step.bytes * passes * (passes + 1) / 2 / bandwidth


# What one index of a gather or scatter may cost: element gathers of 2^20 indices (a
# searchsorted's, 21 trips in 152 ms) and a segment sum's 2^20 updates (7.05 ms) took 6.9 and
# 6.7 ns per index on a TPU v5e (tpu-v5e-2026-12-07/more-kinds), rounded up.
INDEX_SECONDS = 10e-9
_INDEXED = {"gather": "gather", "scatter": "scatter"}


def index_bound_seconds(step: Step, kind: str, module: HloModule | None) -> float:
    """The most a gather or scatter may take by its index count: INDEX_SECONDS for each element
    of the index operands of the gathers or scatters it runs. 0 for any other kind."""
    op = _INDEXED.get(kind)
    if op is None or module is None:
        return 0.0
    indices = 0
    for i in instruction_body(step.instr, module):
        if i.opcode != op or len(i.operands) < 2:
            continue
        # Its index operand, in the computation it is in (a fusion's body, or the entry's).
        operand = next((x for x in module.computations.get(i.computation, [])
                        if x.name == i.operands[1]), None)
        if operand is not None:
            indices += sum(prod(a.dims) for a in operand.arrays)
    return indices * INDEX_SECONDS


def on_chip(step: Step) -> bool:
    """Whether the instruction's result lies in on-chip memory (memory space 1, `S(1)`: VMEM
    on a TPU), whose bytes the model charges at HBM speed."""
    return any(space == ON_CHIP_SPACE for _, space in shape_memory_spaces(step.instr.shape))


def bytes_free_seconds(step: Step, compute: ComputeTime) -> float:
    """`step`'s time as `compute` priced it with its bytes left out: its FLOPs at the peak,
    its vector and sorting work. The least an instruction whose result lies in on-chip memory
    may take."""
    peak = compute.peak_flops or math.inf
    return instruction_seconds(step, peak, None, None, None, compute.vector_unit)


def instruction_bounds(step: Step, basis: TimeBasis, predicted: float, chip: str,
                       compute: ComputeTime, module: HloModule | None = None
                       ) -> tuple[float, float]:
    """(low, high) seconds for one run of `step` predicted at `predicted` seconds by
    `compute` (whose copy rate a sort's passes move at)."""
    high = max(predicted * basis.slowdown,
               0.0 if basis.measured else sort_bound_seconds(step, basis.kind,
                                                             compute.memory_bandwidth),
               index_bound_seconds(step, basis.kind, module))
    # An instruction whose result lies in on-chip memory: its bytes may never touch HBM, so it
    # may take as little as its work without them. On a TPU v5e a loop's in-place updates of a
    # buffer in S(1) ran 57 us where their bytes at HBM speed give 3.2 ms
    # (tpu-v5e-2026-12-07/more-kinds); a CNN train step's fusions with results in S(1) ran 0.11
    # to 0.57 of their bytes' time, the step 114 us against 292 predicted
    # (tpu-v5e-2026-12-07/census-kinds, census_cnn_train).
    low = predicted
    if on_chip(step) and step.kernel is None:
        low = min(predicted, bytes_free_seconds(step, compute))
    if basis.efficiency != 1.0:
        entry = coverage_for(chip, basis.kind)
        if entry is not None:
            low = predicted * min(1.0, entry.best * entry.efficiency)
    return low, high


def step_range(trace, schedule: Schedule, chip: str, compute: ComputeTime
               ) -> StepRange | None:
    """The range of the predicted step `trace` (explorer._src.report.trace.StepTrace, whose
    compute events carry their TimeBasis) of `schedule` on the chip named `chip`, as `compute`
    priced it. None without a trace."""
    if trace is None:
        return None
    steps = scheduled_steps(schedule)
    parts: dict[str, list] = {}   # hlo -> [basis, source, predicted, low, high]
    unmeasured = 0.0
    for e in trace.events:
        basis = getattr(e, "basis", None)
        step = steps.get(e.hlo)
        if basis is None or step is None or e.duration <= 0:
            continue
        if not basis.measured:
            unmeasured += e.duration
        low, high = instruction_bounds(step, basis, e.duration, chip, compute,
                                       schedule.module)
        if low == e.duration and high == e.duration:
            continue
        part = parts.setdefault(e.hlo, [basis, e.source, 0.0, 0.0, 0.0])
        part[2] += e.duration
        part[3] += low
        part[4] += high
    widened = [RangePart(hlo, b.kind, b.measured, src, p, lo, hi, b.text)
               for hlo, (b, src, p, lo, hi) in parts.items()]
    widened.sort(key=lambda r: -(r.high_s - r.predicted_s))
    high = trace.seconds + sum(r.high_s - r.predicted_s for r in widened)
    low = max(0.0, trace.seconds - sum(r.predicted_s - r.low_s for r in widened))
    rng = StepRange(chip, low, trace.seconds, high, unmeasured, tuple(widened))
    return StepRange(chip, low, trace.seconds, high, unmeasured, tuple(widened),
                     range_cautions(rng))


def range_cautions(rng: StepRange) -> tuple[str, ...]:
    """A caution where the step could take CAUTION_AT times its prediction or more, naming the
    instructions that could make it so, each at its line of code; one where it could take
    1/CAUTION_AT of it or less."""
    if not rng.seconds:
        return ()
    out = ()
    if rng.low_seconds <= rng.seconds / CAUTION_AT:
        fast = [p for p in rng.parts if p.low_s < p.predicted_s][:NAMED]
        out = (f"the step could take as little as {format_seconds(rng.low_seconds)}: "
               + "; ".join(f"{p.hlo} ({p.kind})" + (f" at {p.source}" if p.source else "")
                           + f", predicted {format_seconds(p.predicted_s)}, writes to on-chip "
                           "memory (S(1)), whose bytes the model charges at HBM speed and may "
                           "never touch HBM"
                           for p in fast),)
    if rng.high_seconds < CAUTION_AT * rng.seconds:
        return out
    named = "; ".join(
        f"{p.hlo} ({'measured slower' if p.measured else 'unmeasured'}: {p.kind})"
        + (f" at {p.source}" if p.source else "")
        + f", predicted {format_seconds(p.predicted_s)}, could take {format_seconds(p.high_s)}"
        for p in rng.parts[:NAMED])
    more = f" and {len(rng.parts) - NAMED} more" if len(rng.parts) > NAMED else ""
    return out + (f"the step could take up to {format_seconds(rng.high_seconds)}, "
            f"{rng.high_seconds / rng.seconds:.3g}x the {format_seconds(rng.seconds)} "
            f"predicted, where instructions of kinds never measured on a {rng.chip}, or "
            f"measured slower than the model, run as slowly as such kinds have: {named}{more}",)
