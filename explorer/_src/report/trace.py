"""The predicted step trace: the compiled schedule laid out in time on a target.

The optimized module's entry computation is scheduled (explorer._src.hlo.schedule); walking it in
order on two lanes, compute and communication:

- a compute instruction runs on the compute lane for its roofline time on the target,
  max(FLOPs / peak, bytes / HBM bandwidth), at the Estimate's peak;
- a synchronous collective starts when both lanes are free and the compute lane waits for it;
  a fusion that runs a collective in place computes after it, or alongside it when its body
  has a dot or convolution that does not use the collective's result;
- an asynchronous collective starts on the communication lane when the compute lane reaches its
  start and the links it needs are free, overlaps the compute scheduled before its done (an
  async collective fusion's own arithmetic included), and the done makes the compute lane wait
  for it; explorer._src.hlo.schedule says which TPU collectives without a -start/-done pair run
  this way;
- a while runs its body trip-count times (once, with a note, when the count is unreadable);
- a transfer between host memory and the device (an offloaded array) runs on the host-link lane
  for its bytes over the chip's host bandwidth (PCIe), one at a time; a synchronous one makes
  the compute lane wait, an asynchronous one overlaps compute until its done.

Collectives share the links one at a time, except that on a torus (TPU ICI) a permute sent one
way round a ring and one sent the other way run side by side: each link carries each direction
on its own wires (the bidirectional collective matmul sends half its chunks each way). Those
run on a second communication row. Collective times are the cost model's (the Estimate's
CollectiveTime of each collective). At every moment until the step ends one lane is busy, so
the step lies between max(compute, the busier ring direction's communication) and the sum of
compute and all communication: the Estimate's bounds when it was made from the same schedule.
The trace writes itself as Chrome trace-event JSON, which Perfetto, chrome://tracing and
TensorBoard read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from explorer._src.cost.catalog.names import get_target
from explorer._src.cost.collectives import LINK_DIRECTIONS, CollectiveTime, link_directions
from explorer._src.cost.compute import instruction_seconds
from explorer._src.cost.coverage import TimeBasis, time_basis
from explorer._src.cost.estimate import Estimate
from explorer._src.cost.gemm_rates import GemmTable, gemm_table
from explorer._src.hlo.module import Instruction, short_path
from explorer._src.hlo.schedule import Schedule, Step, StepKind

# Events kept for display; a longer step is still timed to its end, only not listed.
MAX_EVENTS = 100_000


class TraceLane(StrEnum):
    """The lane an event of the step trace runs on."""

    COMPUTE = "compute"
    COMMUNICATION = "communication"
    HOST = "host link"        # transfers of offloaded arrays between host memory and the device


@dataclass(frozen=True)
class TraceEvent:
    """One instruction on the timeline.

    Attributes:
        name: what it does: the last part of its op name, or the collective.
        lane: compute or communication.
        start: seconds from the start of the step.
        duration: seconds.
        hlo: the HLO instruction.
        source: ``file.py:12`` of the user code; "" if unknown.
        args: JSON-able details (a permute's ``ring_direction`` among them).
        basis: where a compute event's time comes from: a rate measured on the chip for its
            kind, or a roofline never held against it (docs/cost-model.md, "Provenance and
            ranges"); None for a collective or a host transfer, timed by their formulas.
    """

    name: str                    # what it does: the op name's last part, or the collective
    lane: TraceLane
    start: float                 # seconds from the start of the step
    duration: float              # seconds
    hlo: str                     # the HLO instruction
    source: str = ""             # file:line of the user code, "" if unknown
    args: Mapping[str, Any] = field(default_factory=dict)   # JSON-able details
    basis: TimeBasis | None = None

    @property
    def end(self) -> float:
        return self.start + self.duration

    @property
    def row(self) -> str:
        """Where a timeline draws it: its lane, or for a permute sent the reverse way round a
        torus ring (which may run beside one sent the other way) a row of its own."""
        if self.args.get("ring_direction") == "-":
            return REVERSE_ROW
        return str(self.lane)


# The row of the communication events that run the reverse way round a torus ring.
REVERSE_ROW = "comm., reverse ring"


@dataclass(frozen=True)
class StepTrace:
    """The predicted timeline of one step of the compiled program on a target.

    Attributes:
        target: the target's name.
        events: the instructions in time, at most MAX_EVENTS of them (a longer step is still
            timed to its end).
        seconds: when both lanes are done: the predicted step.
        notes: what could not be timed as scheduled, and why.
    """

    target: str
    events: tuple[TraceEvent, ...]
    seconds: float               # when both lanes are done
    notes: tuple[str, ...] = ()

    def lane_seconds(self, lane: TraceLane) -> float:
        """Busy time of one lane (the listed events)."""
        return sum(e.duration for e in self.events if e.lane == lane)

    def rows(self) -> list[str]:
        """The timeline's rows, in order: the two lanes, then the reverse ring direction's
        where some event runs there."""
        rows = [str(TraceLane.COMPUTE), str(TraceLane.COMMUNICATION)]
        rows += [REVERSE_ROW] if any(e.row == REVERSE_ROW for e in self.events) else []
        return rows + ([str(TraceLane.HOST)] if any(e.lane == TraceLane.HOST
                                                    for e in self.events) else [])

    def to_chrome(self) -> dict:
        """Chrome trace-event JSON: complete ("X") events in microseconds, one thread per row
        (events on one thread never overlap, as the format needs)."""
        tids = {row: k + 1 for k, row in enumerate(self.rows())}
        meta = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
                 "args": {"name": f"predicted step on {self.target}"}}]
        meta += [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                  "args": {"name": row}} for row, tid in tids.items()]
        events = [{"name": e.name, "cat": str(e.lane), "ph": "X", "ts": e.start * 1e6,
                   "dur": e.duration * 1e6, "pid": 1, "tid": tids[e.row],
                   "args": {"hlo": e.hlo, "source": e.source, **e.args,
                            **({"time_from": e.basis.text} if e.basis else {})}}
                  for e in self.events]
        return {"traceEvents": meta + events, "displayTimeUnit": "ns",
                "otherData": {"target": self.target, "step_seconds": self.seconds,
                              "notes": list(self.notes)}}


def step_trace(schedule: Schedule, collectives: Sequence, estimate: Estimate,
               host_bandwidth: float | None = None) -> StepTrace | None:
    """Lay `schedule` out in time with the numbers of `estimate`.

    `collectives`: Report's Collectives (in the order of estimate.collectives), matched to the
    schedule's instructions by `hlo_name`. `host_bandwidth`: the chip's host link, bytes/s one
    way, for transfers of offloaded arrays (None: they are shown with no duration, and said).
    None when there is nothing to time: an empty schedule, or no peak for the Estimate's dtype
    on its target.
    """
    # With no matrix peak for the dtype, FLOPs take no time of their own and every
    # instruction runs at memory speed, as the estimate's compute does (matmul_peak).
    peak = estimate.compute.peak_flops or math.inf
    if (peak == math.inf and estimate.compute.memory_bandwidth is None) or not schedule.steps:
        return None
    timeline = _Timeline(schedule, peak, estimate.compute.memory_bandwidth,
                         {c.hlo_name: (c, t) for c, t in
                          zip(collectives, estimate.collectives, strict=True)},
                         host_bandwidth, gemm_table(estimate.compute.gemm_table))
    # Reads and vector work priced as the estimate's compute was (instruction_seconds).
    timeline.read_bandwidth = estimate.compute.read_bandwidth
    timeline.vector_unit = estimate.compute.vector_unit
    timeline.float32_matmuls = estimate.compute.float32_matmuls
    # Where each instruction's time comes from on the chip, and a kernel's measured efficiency
    # (none at the vendors' peak).
    timeline.chip = get_target(estimate.target).chip.name
    timeline.measured_rates = not estimate.peak
    timeline.run(schedule.steps, {})
    notes = list(dict.fromkeys(timeline.notes))
    if not schedule.scheduled:
        notes.insert(0, "the module is not marked is_scheduled=true; its text order was taken as "
                        "the run order")
    missing = [c.hlo_name for c in collectives if c.hlo_name not in timeline.seen]
    if missing:
        notes.append(f"{len(missing)} collective(s) sit outside the scheduled entry (e.g. "
                     f"{missing[0]!r} in a conditional branch) and are not on the timeline")
    if timeline.dropped:
        notes.append(f"the timeline lists the first {MAX_EVENTS} events; "
                     f"{timeline.dropped} more are timed but not listed")
    return StepTrace(estimate.target, tuple(timeline.events), timeline.end(), tuple(notes))


class _Timeline:
    def __init__(self, schedule: Schedule, peak: float, bandwidth: float | None,
                 collectives: dict[str, tuple[Any, CollectiveTime]],
                 host_bandwidth: float | None = None, table: GemmTable | None = None):
        self.module = schedule.module
        self.peak, self.bandwidth = peak, bandwidth
        self.table = table                 # the measured GEMM rates the estimate used
        self.read_bandwidth: float | None = None   # ComputeTime.read_bandwidth
        self.vector_unit = None                    # ComputeTime.vector_unit
        self.float32_matmuls = None                # ComputeTime.float32_matmuls
        self.chip = ""                             # the chip whose measurements apply
        self.measured_rates = True                 # False at the vendors' peak
        self.host_bandwidth = host_bandwidth
        self.host_at = 0.0                 # the host link is free from here
        self.collectives = collectives
        self.compute_at = 0.0              # the compute lane is free from here
        # The communication lane, per ring direction: free from here. A one-way torus permute
        # holds its direction, any other collective both
        # (explorer._src.cost.collectives.link_directions).
        self.link_at = dict.fromkeys(LINK_DIRECTIONS, 0.0)
        self.pending: dict[str, float] = {}   # async start -> when its collective ends
        self.events: list[TraceEvent] = []
        self.dropped = 0
        self.notes: list[str] = []
        self.seen: set[str] = set()
        self.bases: dict[str, TimeBasis] = {}

    def end(self) -> float:
        return max([self.compute_at, self.host_at, *self.link_at.values(),
                    *self.pending.values()])

    def run(self, steps: tuple[Step, ...], where: dict[str, Any]) -> None:
        for s in steps:
            if s.kind is StepKind.COMPUTE:
                self.compute_at = self.compute(s, self.compute_at, where)
            elif s.kind is StepKind.COLLECTIVE:
                begin, done = self.communicate(s, self.compute_at, where)
                math_from = begin if s.overlaps else done
                self.compute_at = max(done, self.compute(s, math_from, where))
            elif s.kind is StepKind.COLLECTIVE_START:
                _, self.pending[s.instr.name] = self.communicate(s, self.compute_at, where)
                # An async collective fusion's own arithmetic does not wait for it.
                self.compute_at = self.compute(s, self.compute_at, where)
            elif s.kind is StepKind.COLLECTIVE_DONE:
                self.compute_at = max(self.compute_at, self.pending.pop(s.start, 0.0))
            elif s.kind is StepKind.LOOP:
                self.loop(s, where)
            elif s.kind is StepKind.HOST_TRANSFER:
                self.compute_at = self.transfer(s, self.compute_at, where)
            elif s.kind is StepKind.HOST_START:
                self.pending[s.instr.name] = self.transfer(s, self.compute_at, where)
            elif s.kind is StepKind.HOST_DONE:
                self.compute_at = max(self.compute_at, self.pending.pop(s.start, 0.0))

    def transfer(self, s: Step, ready: float, where: dict[str, Any]) -> float:
        """Move the step's bytes over the host link, from `ready` or when the link is free;
        when the move ends."""
        if self.host_bandwidth is None:
            self.notes.append("no sourced host-link bandwidth for this chip: transfers of "
                              "offloaded arrays are shown with no duration")
        seconds = s.bytes / self.host_bandwidth if self.host_bandwidth else 0.0
        begin = max(ready, self.host_at)
        self.emit(TraceEvent("host transfer", TraceLane.HOST, begin, seconds, s.instr.name,
                             self.source(s.instr),
                             {"opcode": s.instr.opcode, "bytes": s.bytes,
                              "async": s.kind is StepKind.HOST_START,
                              "op_name": s.instr.op_name, **where}))
        self.host_at = begin + seconds
        return self.host_at

    def loop(self, s: Step, where: dict[str, Any]) -> None:
        trips = s.trips
        if trips is None:
            trips = 1
            self.notes.append(f"loop {s.instr.name!r}: its trip count could not be read, so its "
                              "body is counted once")
        for k in range(trips):
            self.run(s.body, {**where, "loop": s.instr.name, "iteration": k})

    def compute(self, s: Step, begin: float, where: dict[str, Any]) -> float:
        """Run the step's own arithmetic from `begin` on the compute lane; when it ends."""
        if not (s.flops or s.bytes):
            return begin
        basis = self.basis(s)
        seconds = instruction_seconds(s, self.peak, self.bandwidth, self.table,
                                      self.read_bandwidth, self.vector_unit,
                                      self.float32_matmuls) / basis.efficiency
        op = s.instr.op_name.rsplit("/", 1)[-1] or s.instr.opcode
        self.emit(TraceEvent(op, TraceLane.COMPUTE, begin, seconds, s.instr.name,
                             self.source(s.instr),
                             {"opcode": s.instr.opcode, "flops": s.flops, "bytes": s.bytes,
                              "op_name": s.instr.op_name, **where}, basis))
        return begin + seconds

    def basis(self, s: Step) -> TimeBasis:
        """Where the step's time comes from (time_basis, kept per instruction: a loop's body
        is asked every trip); at the vendors' peak no measured efficiency applies."""
        known = self.bases.get(s.instr.name)
        if known is None:
            known = time_basis(s, self.chip, self.module)
            if not self.measured_rates and known.efficiency != 1.0:
                known = replace(known, efficiency=1.0)
            self.bases[s.instr.name] = known
        return known

    def communicate(self, s: Step, ready: float, where: dict[str, Any]) -> tuple[float, float]:
        """Run the step's collectives one after another, the first from `ready` or when the
        links it needs are free; when the first starts and the last ends."""
        at, first = ready, None
        for name in s.collectives:
            self.seen.add(name)
            if name not in self.collectives:
                self.notes.append(f"collective {name!r} is not among the report's collectives; "
                                  "it is shown with no duration")
                c, t = None, None
            else:
                c, t = self.collectives[name]
            seconds = t.seconds if t is not None and t.seconds is not None else 0.0
            ways = link_directions(t) if t is not None else LINK_DIRECTIONS
            at = max(at, *(self.link_at[w] for w in ways))
            first = at if first is None else first
            if t is not None and t.seconds is None:
                self.notes.append(f"{c.kind} {name!r} could not be timed ({t.note}); it is "
                                  "shown with no duration")
            label = f"{c.kind} over {','.join(c.axes) or '-'}" if c is not None else name
            args = {} if c is None else {
                "kind": str(c.kind), "axes": list(c.axes), "bytes": c.program_bytes,
                "group_size": c.group_size, "links": t.links, "bound": t.bound,
                "async": s.kind is StepKind.COLLECTIVE_START}
            if t is not None and t.one_way:
                args["ring_direction"] = t.one_way
            self.emit(TraceEvent(label, TraceLane.COMMUNICATION, at, seconds, name,
                                 c.source if c is not None else self.source(s.instr),
                                 {**args, **where}))
            at += seconds
            for w in ways:
                self.link_at[w] = at
        return (ready if first is None else first), at

    def emit(self, event: TraceEvent) -> None:
        if len(self.events) < MAX_EVENTS:
            self.events.append(event)
        else:
            self.dropped += 1

    def source(self, instr: Instruction) -> str:
        src = self.module.source(instr)
        return f"{short_path(src[0])}:{src[1]}" if src else ""

