"""The program's own dtype of each collective, read from the compiler's module before the CPU
backend upcast it.

The CPU backend moves bf16 and f16 collectives as f32: all-reduce-promotion rewrites the
all-reduces, float-normalization-bf16 the all-gathers, all-to-alls and permutes. A TPU or GPU
moves the program's dtype, so a prediction must count that one. The worker dumps the module just
before the first of those passes (CompileResult.unpromoted); each collective of the optimized
module is found there again, and each of its parts takes the dtype it has there.

Finding a collective again: the promotion gives it a new name (`all-reduce` becomes
`all-reduce.1`) but keeps its `channel_id`, which the partitioner makes unique per collective;
the all-reduce combiner then merges several into one tuple that keeps the channel id of its first
part, in program order. So a collective whose channel id names a collective of the same kind and
shapes takes that one's dtypes; the parts of a combined one take those of the unclaimed
collectives of the same kind and shape, nearest after the channel id it kept. A part found
nowhere (a collective made after the promotion) keeps the dtype it is moved in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from explorer._src.hlo.chains import collective_chains
from explorer._src.hlo.collectives import CollectiveKind, collective_kind
from explorer._src.hlo.module import HLO_DTYPE_BYTES, Array, HloModule, Instruction

# What a promotion may turn a dtype into: a narrower float into a wider one. Any other change
# means the match is wrong, and it is not taken.
_FLOATS = ("f8e4m3fn", "f8e5m2", "f8e4m3", "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz",
           "f8e3m4", "f16", "bf16", "f32", "f64")


class Placed(NamedTuple):
    """A collective instruction of a module, with what it delivers."""

    instr: Instruction
    kind: CollectiveKind
    is_async: bool
    result: list[Array]          # the arrays it delivers, one per part


def collectives_of(module: HloModule) -> list[Placed]:
    """The collective instructions of `module` in its order; an async -start/-done pair once
    (as its start), and a collective inside a computation that async-start runs as async; a
    TPU collective run across a chain of fusions (explorer._src.hlo.chains) once, as the collective
    of the chain's first fusion, async."""
    chains = collective_chains(module)
    pieces = {p for c in chains for p in c.pieces}
    heads = {c.collective for c in chains}
    done_of = {}
    wrapped = set()   # computations run by async-start: their collectives are async
    for instr in module.instructions():
        if instr.opcode.endswith("-done") and instr.operands:
            done_of[instr.operands[0]] = instr
        if instr.opcode == "async-start" and instr.attr("calls"):
            wrapped.add(instr.callee())
    out = []
    for instr in (i for instrs in module.collectives.values() for i in instrs):
        kind, is_async = collective_kind(instr.opcode)
        if instr.name in pieces:
            continue
        is_async = is_async or instr.computation in wrapped or instr.name in heads
        result = done_of[instr.name].arrays if instr.name in done_of else instr.arrays
        if is_async and instr.name not in done_of and len(result) > 1:
            result = result[len(result) // 2:]   # start ops return (operands..., results...)
        out.append(Placed(instr, kind, is_async, result))
    return out


def channel_id(instr: Instruction) -> int | None:
    value = instr.attr("channel_id")
    return int(value) if value and value.isdigit() else None


def _could_become(program: str, moved: str) -> bool:
    if program == moved:
        return True
    return (program in _FLOATS and moved in _FLOATS
            and HLO_DTYPE_BYTES[program] < HLO_DTYPE_BYTES[moved])


@dataclass
class _Part:
    kind: CollectiveKind
    channel: int | None
    order: int                  # position of its collective in the unpromoted module
    array: Array
    claimed: bool = False


def program_dtypes(optimized: list[Placed], unpromoted: HloModule | None
                   ) -> dict[str, tuple[str, ...]]:
    """For each collective of the optimized module (by instruction name): the HLO dtype the
    program gives each of its parts. Without an unpromoted module (no promotion ran: a TPU or
    GPU compile) that is the dtype it is moved in."""
    out = {c.instr.name: tuple(a.dtype for a in c.result) for c in optimized}
    if unpromoted is None:
        return out
    by_channel: dict[int, list[_Part]] = {}
    parts: list[_Part] = []
    for order, c in enumerate(collectives_of(unpromoted)):
        own = [_Part(c.kind, channel_id(c.instr), order, a) for a in c.result]
        parts += own
        if own and own[0].channel is not None:
            by_channel[own[0].channel] = own
    combined = []
    # First the collectives the passes left whole: their channel id names them.
    for c in optimized:
        match = by_channel.get(channel_id(c.instr))
        if match and _same(c, match) and not any(p.claimed for p in match):
            for p in match:
                p.claimed = True
            out[c.instr.name] = tuple(p.array.dtype for p in match)
        else:
            combined.append(c)
    # Then the combined ones, part by part.
    for c in combined:
        first = by_channel.get(channel_id(c.instr))
        start = first[0].order if first else 0
        dtypes = []
        for a in c.result:
            candidates = [p for p in parts if not p.claimed and p.kind == c.kind
                          and p.array.dims == a.dims and _could_become(p.array.dtype, a.dtype)]
            # The part that kept its channel id first, then those after it in program order.
            candidates.sort(key=lambda p: (p.order < start, abs(p.order - start)))
            if candidates:
                candidates[0].claimed = True
                dtypes.append(candidates[0].array.dtype)
            else:
                dtypes.append(a.dtype)
        out[c.instr.name] = tuple(dtypes)
    return out


def _same(c: Placed, parts: list[_Part]) -> bool:
    return (len(c.result) == len(parts) and all(p.kind == c.kind for p in parts)
            and all(a.dims == p.array.dims and _could_become(p.array.dtype, a.dtype)
                    for a, p in zip(c.result, parts, strict=True)))
