"""The largest buffers live at the memory peak of the per-device program.

XLA's buffer assignment simulates the schedule and writes, in its live-range dump, every
buffer live at the step where the bytes in use peak ("Live ranges at 10 (peak):", one line
"name{index}: BYTES bytes (cumulative: ...)" per buffer; the worker keeps that section,
CompileResult.peak_live). Each line names an HLO value: an instruction of the optimized module
and, for a tuple-shaped one, the index of its part. The live ranges count a value's logical
bytes; the buffer-assignment dump ("value: <ID NAME @POS> (size=BYTES,...): SHAPE", kept as
CompileResult.buffer_values) has the bytes allocated for it, a TPU's tile padding included, and
its shape with its layout, and where it lives: values live at once in the same bytes are one
buffer updated in place, held once. The module gives the jax operation that made it and the
user's line.

Buffers in a memory space other than the device's main one (a TPU's on-chip VMEM and SMEM,
`S(1)` and `S(2)` in their layouts) are left out: they are scratch of a fusion, not what fills
the HBM.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import NamedTuple

from explorer._src.hlo.module import (
    HLO_TO_NUMPY,
    HloModule,
    Instruction,
    memory_space,
    parse_shape,
    subshape,
)
from explorer._src.report.report import Buffer, BufferKind
from explorer._src.report.source import line_of_code, source_of

TOP_BUFFERS = 10

_LINE = re.compile(r"^\s*(\S+?)\{([\d,]*)\}: (\d+) bytes")


def peak_entries(peak_live: str) -> list[tuple[str, tuple[int, ...], int]]:
    """(instruction name, shape index, bytes) of each buffer line of the peak section."""
    out = []
    for line in peak_live.splitlines():
        m = _LINE.match(line)
        if m:
            index = tuple(int(i) for i in m.group(2).split(",") if i)
            out.append((m.group(1), index, int(m.group(3))))
    return out


def _made_by(instr: Instruction, module: HloModule, inputs: list[str]) -> str:
    """"input w1" for an entry parameter, named as the request named the input (HLO parameter
    i is input i), else the jax operation (op_name) or, where the compiler recorded none, the
    opcode."""
    if instr.opcode == "parameter" and instr.computation == module.entry:
        number = instr.operand_text.strip()
        name = (inputs[int(number)] if number.isdigit() and int(number) < len(inputs)
                else instr.op_name)
        return f"input {name}".strip()
    return instr.op_name or instr.opcode


_ALLOCATION = re.compile(r"^\s*allocation (\d+):")
_ALLOCATION_HEADER = re.compile(r"^\s*allocation (\d+): size (\d+)(.*):\s*$")
_COLOR = re.compile(r", color (\d+)")
_SHAPE_TEXT = re.compile(r"\|[^|]*\|")
# A loop's carried value is marked "(phi)": "value: <2023 param.1{15} (phi) @0> ...".
_VALUE = re.compile(
    r"^\s*value: <\d+ (\S+)(?: \(phi\))? @\d+> \(size=(\d+),offset=(\d+)\): (.*)$")


class Slice(NamedTuple):
    """Where the buffer assignment put a value: bytes [offset, offset + size) of an allocation."""

    allocation: int
    offset: int
    size: int
    shape: str                   # with layout and memory space


class Allocation(NamedTuple):
    """One allocation of the buffer assignment: its bytes, what it holds, its memory space."""

    size: int
    kind: BufferKind | None      # None: thread-local scratch of a fusion or a call
    color: int                   # the memory space: 0 the device's main memory


def allocations(buffer_values: str) -> dict[int, Allocation]:
    """Allocation number -> its size and kind, from the headers XLA writes ("allocation 2:
    size 131072, parameter 0, shape |f32[256,128]| at ShapeIndex {}:", "..., maybe-live-out:",
    "..., preallocated-temp:"). An input's allocation that an output shares (a donated input)
    is an argument."""
    out: dict[int, Allocation] = {}
    for line in buffer_values.splitlines():
        m = _ALLOCATION_HEADER.match(line)
        if not m:
            continue
        flags = _SHAPE_TEXT.sub("", m.group(3))     # shapes can hold no flag words
        color = _COLOR.search(flags)
        kind = (BufferKind.ARGUMENT if ", parameter " in flags
                else BufferKind.OUTPUT if "maybe-live-out" in flags
                else BufferKind.CONSTANT if ", constant" in flags
                else None if "thread-local" in flags
                else BufferKind.TEMPORARY)
        out[int(m.group(1))] = Allocation(int(m.group(2)), kind,
                                          int(color.group(1)) if color else 0)
    return out


def assigned(buffer_values: str) -> dict[str, Slice]:
    """Value name ("fusion", "copy-start{0}"; a whole tuple "copy-start{}" is named like an
    array, "copy-start") -> where it lives."""
    out: dict[str, Slice] = {}
    allocation = -1
    for line in buffer_values.splitlines():
        a = _ALLOCATION.match(line)
        if a:
            allocation = int(a.group(1))
            continue
        m = _VALUE.match(line)
        if m:
            out.setdefault(m.group(1).removesuffix("{}"), Slice(
                allocation, int(m.group(3)), int(m.group(2)), m.group(4).strip()))
    return out


def top_buffers(peak_live: str, module: HloModule, buffer_values: str = "",
                inputs: list[str] | None = None, count: int = TOP_BUFFERS
                ) -> tuple[Buffer, ...]:
    """The `count` largest buffers live at the peak, largest first (ties in the dump's order),
    sized as the buffer assignment allocated them (as the live ranges count them where the
    assignment does not list them). `inputs` names the program's inputs in HLO parameter order.

    Values live at the same time in overlapping bytes of one allocation are one buffer updated
    in place (an all-reduce writing over the matmul result it sums): the live ranges count each,
    the device holds it once. It is listed once, as the first of them in the dump, with the
    others as its `aliases`. A buffer whose instruction is not in `module` is still listed, with
    its bytes and no shape: the dump said it is there."""
    names = module.by_name()
    slices = assigned(buffer_values)
    kinds = allocations(buffer_values)
    out: list[Buffer] = []
    held: list[tuple[Slice, int]] = []        # slices listed so far, with their index in out
    for name, index, live_bytes in peak_entries(peak_live):
        label = name + (f"{{{','.join(map(str, index))}}}" if index else "")
        where = slices.get(label)
        shared = next((i for s, i in held if where is not None and overlaps(s, where)), None)
        if shared is not None:
            out[shared] = replace(out[shared], aliases=out[shared].aliases + (label,))
            continue
        instr = names.get(name)
        shape = where.shape if where else (subshape(instr.shape, index) if instr else None)
        if shape is not None and memory_space(shape) != 0:
            continue
        if where is not None:
            held.append((where, len(out)))
        allocation = kinds.get(where.allocation) if where is not None else None
        out.append(buffer_of(label, where.size if where else live_bytes, shape, instr, module,
                             inputs or [], allocation.kind if allocation else None))
    out.sort(key=lambda b: -b.bytes)      # stable: equal sizes keep the dump's order
    return tuple(out[:count])


def buffer_of(label: str, nbytes: int, shape: str | None, instr: Instruction | None,
              module: HloModule, inputs: list[str], kind: BufferKind | None = None) -> Buffer:
    """The Buffer of HLO value `label` ("fusion", "copy-start{0}") of `nbytes` bytes, with
    `shape` (its layout text, None where unknown) read into dims and dtype, and the jax
    operation and line of code of `instr`, the instruction that made it (None where the
    module lacks it: the buffer is listed with its bytes alone)."""
    arrays = parse_shape(shape) if shape is not None and not shape.startswith("(") else []
    dims, dtype = ((arrays[0].dims, HLO_TO_NUMPY.get(arrays[0].dtype, arrays[0].dtype))
                   if len(arrays) == 1 else ((), "tuple" if shape else ""))
    if instr is None:
        return Buffer(label, nbytes, dims, dtype, "", kind=kind)
    return Buffer(name=label, bytes=nbytes, shape=dims, dtype=dtype,
                  instruction=_made_by(instr, module, inputs),
                  source=source_of(module, instr), source_text=line_of_code(module, instr),
                  kind=kind)


def overlaps(a: Slice, b: Slice) -> bool:
    """Whether two values share bytes of one allocation."""
    return (a.allocation == b.allocation and a.offset < b.offset + b.size
            and b.offset < a.offset + a.size)
