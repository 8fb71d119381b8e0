"""Memory over the program: the bytes live on one device at every step of the schedule.

Every device runs the same per-device program, so one curve is each device's. It is read from
two of XLA's dumps of the optimized module, as XProf's memory viewer reads the same facts from
the module's HloProto:

- the live ranges (CompileResult.live_ranges): the schedule, loop bodies flattened in once
  ("InstructionSequence:", "    3:fusion.2"), and for each value the first and last position
  it is live at ("BufferLiveRange:", "    fusion.2{}:3-7", both ends included, as XLA's own
  peak listing counts them);
- the buffer assignment (CompileResult.buffer_values): which allocation each value lives in, at
  which offset, with how many bytes (a TPU's padding included), and what each allocation is.

The inputs', outputs' and constants' allocations are held from the program's start to its end
(the runtime allocates an output before the program runs, and XLA may compute temporaries in
its bytes before the output is written there), as XProf's viewer holds them. A value among the
temporaries is counted over its live range; values that share bytes at one moment (one buffer
updated in place) are counted once. Thread-local scratch of fusions and calls, and allocations
in another memory space (a TPU's VMEM, host memory), are not the device memory's and are left
out.

How the peak relates to XLA's memory analysis, exactly:

    peak = arguments + (outputs - aliased) + constants + the most temporary bytes live at once

where arguments, outputs and aliased are memory_analysis()'s (an output sharing an input's
allocation, a donated input, is counted once, as `arguments`). The temporaries live at once lie
inside the temporaries' allocation, whose size the CPU's and GPU's memory_analysis() give as
`temporaries`, so there the peak is at most `Memory.total` (plus constants), equal to it when
the temporaries fill their allocation at the peak, as they do when the heap has no hole there.
(libtpu's analysis was seen to give 0 temporaries for a program with an HBM temporaries
allocation; and a TPU keeps small programs' activations in VMEM, which is not in this curve.)
It is not arguments plus temporaries: the outputs' allocations are held too, and they are no
temporaries.

XProf's memory viewer finds its peak from the heap simulator's trace in the same module, which
leaves out the tables of pointers of tuple-shaped values (16 bytes for a pair) that the buffer
assignment still allocates among the temporaries: its peak is this one less the tables live
there.

XLA's own "Live ranges at N (peak)" line (which `Report.top_buffers` is read at) sizes each part
of a tuple-shaped value as the tuple's table of pointers (16 bytes for a pair), not its array: it
misplaces the peak of a program whose large values are parts of tuples (a loop's carried state,
a combined all-reduce). This curve sizes every value by its allocation.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import replace

from explorer._src.hlo.module import HloModule
from explorer._src.report.buffers import Slice, allocations, assigned, buffer_of, overlaps
from explorer._src.report.report import Buffer, BufferKind, MemoryPoint, MemoryTimeline

_SEQUENCE_HEADER = "InstructionSequence:"
_RANGES_HEADER = "BufferLiveRange:"
_POSITION = re.compile(r"^\s*(\d+):(\S+)\s*$")
_RANGE = re.compile(r"^\s*(\S+?)\{([\d,]*)\}:(\d+)-(\d+)\s*$")
# Kinds held from the program's start to its end.
_HELD = (BufferKind.ARGUMENT, BufferKind.OUTPUT, BufferKind.CONSTANT)


def read_live_ranges(live_ranges: str) -> tuple[list[str], list[tuple[str, int, int]]]:
    """The schedule (instruction names in program order) and each value's live range
    (label as the buffer assignment names it, first position, last position)."""
    sequence: dict[int, str] = {}
    ranges: list[tuple[str, int, int]] = []
    section = ""
    for line in live_ranges.splitlines():
        if line.strip() in (_SEQUENCE_HEADER, _RANGES_HEADER):
            section = line.strip()
            continue
        if section == _SEQUENCE_HEADER and (m := _POSITION.match(line)):
            sequence[int(m.group(1))] = m.group(2)
        elif section == _RANGES_HEADER and (m := _RANGE.match(line)):
            # An array's value is "name{}" in the live ranges and "name" in the assignment.
            label = m.group(1) + (f"{{{m.group(2)}}}" if m.group(2) else "")
            ranges.append((label, int(m.group(3)), int(m.group(4))))
    return [sequence[i] for i in sorted(sequence)], ranges


def memory_timeline(live_ranges: str, buffer_values: str, module: HloModule,
                    inputs: list[str] | None = None) -> MemoryTimeline | None:
    """The bytes live on one device at each position of the schedule, the peak (its first
    position) and every buffer live there. `inputs` names the program's inputs in HLO
    parameter order. None where either dump is missing."""
    sequence, ranges = read_live_ranges(live_ranges)
    if not sequence or not buffer_values:
        return None
    slices = assigned(buffer_values)
    device = {i: a for i, a in allocations(buffer_values).items() if a.color == 0}
    held = {kind: sum(a.size for a in device.values() if a.kind == kind) for kind in _HELD}

    # The temporaries' values, each entering at its first position and leaving after its last.
    enter: dict[int, list[tuple[str, Slice]]] = defaultdict(list)
    leave: dict[int, list[str]] = defaultdict(list)
    unplaced = 0
    for label, first, last in ranges:
        where = slices.get(label)
        if where is None:
            unplaced += 1
            continue
        allocation = device.get(where.allocation)
        if allocation is None or allocation.kind != BufferKind.TEMPORARY:
            continue         # held, thread-local or in another memory space
        enter[first].append((label, where))
        leave[last + 1].append(label)

    live: dict[str, Slice] = {}
    temporaries = 0
    points: list[MemoryPoint] = []
    peak: MemoryPoint | None = None
    peak_live: dict[str, Slice] = {}
    fixed = sum(held.values())
    for position, instruction in enumerate(sequence):
        if position in enter or position in leave:
            for label in leave.get(position, ()):
                live.pop(label, None)
            live.update(enter.get(position, ()))
            temporaries = _union_bytes(live.values())
        points.append(MemoryPoint(position, instruction, fixed + temporaries, temporaries))
        if peak is None or points[-1].bytes > peak.bytes:      # the first of equal maxima
            peak, peak_live = points[-1], dict(live)
    notes = (f"{unplaced} value{'s' if unplaced > 1 else ''} of the live ranges not in the "
             "buffer assignment, left out of the curve",) if unplaced else ()
    return MemoryTimeline(
        points=tuple(points), arguments=held[BufferKind.ARGUMENT],
        outputs=held[BufferKind.OUTPUT], constants=held[BufferKind.CONSTANT],
        peak=peak or points[0],
        peak_buffers=_peak_buffers(peak_live, slices, device, ranges, len(sequence), module,
                                   inputs or []),
        notes=notes)


def _union_bytes(live) -> int:
    """Bytes covered by the live slices: overlapping ones (one buffer updated in place) once."""
    total = 0
    by_allocation: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for s in live:
        by_allocation[s.allocation].append((s.offset, s.offset + s.size))
    for spans in by_allocation.values():
        spans.sort()
        start, end = spans[0]
        for a, b in spans[1:]:
            if a >= end:
                total += end - start
                start, end = a, b
            else:
                end = max(end, b)
        total += end - start
    return total


def _peak_buffers(peak_live: dict[str, Slice], slices: dict[str, Slice], device: dict,
                  ranges: list[tuple[str, int, int]], end: int, module: HloModule,
                  inputs: list[str]) -> tuple[Buffer, ...]:
    """The held allocations (each named by the value it holds at the program's end: the
    input, the output) and the temporaries live at the peak, largest first."""
    names = module.by_name()
    last = {label: stop for label, _, stop in ranges}
    held_values: dict[int, list[tuple[str, Slice]]] = defaultdict(list)
    for label, s in slices.items():
        held_values[s.allocation].append((label, s))
    out: list[Buffer] = []
    for index, allocation in sorted(device.items()):
        values = held_values.get(index)
        if allocation.kind not in _HELD or not values:
            continue
        # An output's allocation may hold temporaries before the output: name it by the
        # value still there at the end (for an input's, the parameter, live to the end).
        label, where = next(((label, s) for label, s in values if last.get(label, -1) >= end),
                            values[-1] if allocation.kind == BufferKind.OUTPUT else values[0])
        out.append(buffer_of(label, allocation.size, where.shape,
                             names.get(label.split("{")[0]), module, inputs, allocation.kind))
    listed: list[tuple[Slice, int]] = []
    for label, where in peak_live.items():
        shared = next((i for s, i in listed if overlaps(s, where)), None)
        if shared is not None:
            out[shared] = replace(out[shared], aliases=out[shared].aliases + (label,))
            continue
        listed.append((where, len(out)))
        out.append(buffer_of(label, where.size, where.shape, names.get(label.split("{")[0]),
                             module, inputs, BufferKind.TEMPORARY))
    return tuple(sorted(out, key=lambda b: -b.bytes))
