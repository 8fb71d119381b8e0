"""The predicted step beside the measured one, instruction by instruction.

With `measure=True` on an accelerator, the Report holds each HLO instruction's time in a
profile of the run (Timing.measured_ops); with a target, it holds the predicted step trace,
whose events name the same instructions. Set side by side they show where prediction and chip
part: a fusion the compiler could not cost, a kernel slower than its estimate, a scatter, work
on the vector unit the roofline does not count. The profile's median call, laid out in time
(Timing.measured_events), gives the timelines a measured lane under the predicted ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from explorer._src.compile.device_profile import MeasuredEvent
from explorer._src.cost.coverage import TimeBasis
from explorer._src.hlo.schedule import StepKind, cached_schedule
from explorer._src.report.report import Report
from explorer._src.report.trace import StepTrace
from explorer._src.units import format_seconds

# Instructions whose profile event spans others' (a loop's body runs inside its `while`):
# counting them too would count their bodies twice.
_CONTAINERS = frozenset({"while", "conditional", "call"})


@dataclass(frozen=True)
class OpTime:
    """One instruction, predicted and measured (seconds per step; None where one side has no
    time for it)."""

    instruction: str
    what: str                   # what it does: the trace's name for it, or its opcode
    source: str                 # file:line of the user code, "" if unknown
    predicted_s: float | None
    measured_s: float | None
    # Where its predicted time comes from (a kind measured on the chip, or not); None for a
    # collective or an instruction the prediction does not time.
    basis: TimeBasis | None = None

    @property
    def gap_s(self) -> float:
        """Measured minus predicted, a missing side counted as 0."""
        return (self.measured_s or 0.0) - (self.predicted_s or 0.0)


@dataclass(frozen=True)
class OpComparison:
    """Every instruction either side timed, the largest gaps first.

    Attributes:
        rows: the instructions, by |measured - predicted|, largest first.
        predicted_s: the predicted step (the trace's end).
        measured_s: the program's run on the device, as the profile has it.
        measured_on: where it ran.
        ops_measured_s: the measured instructions' times summed (loops counted once, by
            their bodies' instructions).
    """

    rows: tuple[OpTime, ...]
    predicted_s: float
    measured_s: float | None
    measured_on: str
    ops_measured_s: float

    @property
    def error(self) -> float | None:
        """(predicted - measured) / measured for the whole step."""
        if not self.measured_s:
            return None
        return (self.predicted_s - self.measured_s) / self.measured_s


@dataclass(frozen=True)
class PredictedOp:
    """One instruction of the predicted step trace: the trace's name for it and its source
    (its first event's), and its seconds per step (all its events summed)."""

    what: str
    source: str
    seconds: float
    basis: TimeBasis | None = None


def predicted_ops(trace: StepTrace) -> dict[str, PredictedOp]:
    """Instruction name -> PredictedOp, for every instruction on `trace`."""
    out: dict[str, PredictedOp] = {}
    for e in trace.events:
        known = out.get(e.hlo)
        out[e.hlo] = (PredictedOp(e.name, e.source, e.duration, e.basis) if known is None
                      else replace(known, seconds=known.seconds + e.duration))
    return out


def compare_ops(report: Report) -> OpComparison | None:
    """The Report's predicted trace against its measured instructions; None without both (a
    prediction needs a target, a measurement `measure=True` on an accelerator)."""
    measured = report.timing.measured_ops
    if not measured or report.trace is None or report.estimate is None:
        return None
    predicted = predicted_ops(report.trace)
    containers = _containers(report.optimized_hlo)
    names = [n for n in {**predicted, **measured} if n not in containers]
    rows = [OpTime(n, p.what, p.source, p.seconds, measured.get(n), p.basis)
            if (p := predicted.get(n))
            else OpTime(n, "", "", None, measured.get(n)) for n in names]
    rows.sort(key=lambda r: -abs(r.gap_s))
    return OpComparison(tuple(rows), report.trace.seconds, report.timing.measured_device_s,
                        report.timing.measured_on,
                        sum(t for n, t in measured.items() if n not in containers))


def _containers(optimized_hlo: str) -> set[str]:
    """Names of the scheduled instructions that run others (loops, calls, conditionals)."""
    out: set[str] = set()
    steps = list(cached_schedule(optimized_hlo).steps) if optimized_hlo else []
    while steps:
        s = steps.pop()
        if s.kind is StepKind.LOOP or s.instr.opcode in _CONTAINERS:
            out.add(s.instr.name)
        steps.extend(s.body)
    return out


# How many instructions the views list: the largest gaps; the rest are summed in a line.
SHOWN = 12


def signed_seconds(s: float) -> str:
    """`+1.2 ms` (measured slower than predicted) or `-40 µs`."""
    return ("+" if s > 0 else "-") + format_seconds(abs(s))


def worth_listing(cmp: OpComparison, shown: int = SHOWN) -> tuple[OpTime, ...]:
    """The rows a view lists: the `shown` largest gaps, leaving out those under a ten-thousandth
    of the step (async copies' nanoseconds), which only push the real ones apart."""
    floor = 1e-4 * max(cmp.measured_s or 0.0, cmp.predicted_s)
    return tuple(r for r in cmp.rows[:shown] if abs(r.gap_s) >= floor)


def unmeasured_mark(r: OpTime) -> str:
    """` [unmeasured: sort]` for an instruction whose kind was never held against the chip, ``
    otherwise."""
    return f" [unmeasured: {r.basis.kind}]" if r.basis and not r.basis.measured else ""


def kernel_rows(cmp: OpComparison) -> tuple[OpTime, ...]:
    """The custom-call kernels (Pallas, Mosaic, Triton), in step order of their gaps: each
    predicted from its cost estimate (at a measured efficiency where the chip has one) beside
    its measured time."""
    return tuple(r for r in cmp.rows if r.basis and r.basis.kind.startswith("kernel "))


def kernel_lines(cmp: OpComparison) -> list[str]:
    """One line per custom-call kernel: predicted, how, and measured."""
    out = []
    for r in kernel_rows(cmp):
        how = (f"its estimate at {r.basis.efficiency:.2f} of the roofline, measured"
               if r.basis.efficiency != 1.0 else
               "its estimate at the roofline, never measured" if not r.basis.measured
               else "its estimate, measured")
        out.append(f"kernel {r.instruction} ({r.basis.kind.split(' ', 2)[-1]}): predicted "
                   f"{format_seconds(r.predicted_s)} ({how}), measured "
                   f"{format_seconds(r.measured_s)}" + (f"  {r.source}" if r.source else ""))
    return out


def comparison_lines(cmp: OpComparison, shown: int = SHOWN) -> list[str]:
    """The comparison as plain-text lines: the step, then the instructions with the largest
    gaps, measured minus predicted, those of kinds never measured on the chip marked; then
    each custom-call kernel's prediction beside its measurement (the CLI prints these)."""
    err = cmp.error
    lines = [f"step: predicted {format_seconds(cmp.predicted_s)}, measured "
             f"{format_seconds(cmp.measured_s)} on the device ({cmp.measured_on})"
             + (f": prediction {err:+.0%}" if err is not None else "")]
    lines.append(f"{'instruction':30} {'predicted':>10} {'measured':>10} {'gap':>10}  source")
    listed = worth_listing(cmp, shown)
    for r in listed:
        lines.append(f"{r.instruction[:30]:30} {format_seconds(r.predicted_s):>10} "
                     f"{format_seconds(r.measured_s):>10} {signed_seconds(r.gap_s):>10}  "
                     f"{r.source}{unmeasured_mark(r)}")
    rest = cmp.rows[len(listed):]
    if rest:
        gaps = format_seconds(sum(abs(r.gap_s) for r in rest))
        lines.append(f"... and {len(rest)} more instructions, {gaps} of gaps between them")
    return lines + kernel_lines(cmp)


# The measured lane's rows: the device's instructions one after another, and its asynchronous
# ones in flight (several at once: each on the first of these rows free when it starts).
MEASURED_ROW = "measured"
IN_FLIGHT_ROW = "measured, in flight"
MAX_IN_FLIGHT_ROWS = 4


def measured_rows(events: Sequence[MeasuredEvent]) -> list[tuple[str, MeasuredEvent]]:
    """Each measured event with the row a timeline draws it on, so that no two events of a row
    overlap (more flights at once than MAX_IN_FLIGHT_ROWS share the last row)."""
    free_at: list[float] = []
    out = []
    for e in sorted(events, key=lambda e: e.start):
        if not e.in_flight:
            out.append((MEASURED_ROW, e))
            continue
        row = next((k for k, t in enumerate(free_at) if t <= e.start), None)
        if row is None:
            if len(free_at) < MAX_IN_FLIGHT_ROWS:
                free_at.append(0.0)
            row = len(free_at) - 1
        free_at[row] = max(free_at[row], e.start + e.duration)
        out.append((IN_FLIGHT_ROW + (f" {row + 1}" if row else ""), e))
    return out


def chrome_trace(report: Report) -> dict | None:
    """The predicted step as Chrome trace-event JSON (StepTrace.to_chrome), and where the Report
    holds a run on the device, that run's median call beside it as a second process,
    "measured on ...", its rows those of `measured_rows`; None without a predicted trace."""
    if report.trace is None:
        return None
    doc = report.trace.to_chrome()
    placed = measured_rows(report.timing.measured_events)
    if not placed:
        return doc
    pid = 1 + max(e["pid"] for e in doc["traceEvents"])
    tids = {row: k + 1 for k, row in enumerate(dict.fromkeys(row for row, _ in placed))}
    predicted = predicted_ops(report.trace)
    meta = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
             "args": {"name": f"measured on {report.timing.measured_on or 'the device'} "
                              "(the profile's median call)"}}]
    meta += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": row}}
             for row, tid in tids.items()]
    events = [{"name": p.what if p else e.instruction, "cat": "measured", "ph": "X",
               "ts": e.start * 1e6, "dur": e.duration * 1e6, "pid": pid, "tid": tids[row],
               "args": {"hlo": e.instruction, "source": p.source if p else "",
                        "predicted_us": p.seconds * 1e6 if p else None}}
              for row, e in placed for p in [predicted.get(e.instruction)]]
    doc["traceEvents"] += meta + events
    doc["otherData"]["measured_seconds"] = report.timing.measured_device_s
    return doc
