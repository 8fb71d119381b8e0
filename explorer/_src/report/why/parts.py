"""The parts of a collective of the optimized module, and the op_names that may explain each
part where the collective's own metadata does not.

XLA's combiners merge several collectives into one in two forms: a tuple of operands, whose
op_name lists the parts' (`prefix/(a:b:c)`, in operand order, leaving out parts that had
none, and written once when all are the same), or, in XLA's GPU pipeline, one all-reduce of
a concatenation (a `wrapped_concatenate` fusion of the flattened parts), whose metadata names
nothing (`scheduling_name` only). Where no name is given, the optimized module still says
what each part is: a reduction sums the values its producer computed (reached from the
operand through what only relays them: bitcasts, copies, converts, tuple elements, the
layout-only `wrapped_*` fusions), and a data movement feeds the consumers that needed it
(the instruction whose metadata the partitioner gives a collective)."""

from __future__ import annotations

from dataclasses import dataclass

from explorer._src.hlo.collectives import CollectiveKind, collective_kind
from explorer._src.hlo.module import Instruction, ints
from explorer._src.report.why.context import Context, location, renames
from explorer._src.report.why.metadata import combined_op_names

# Ops that relay a value without computing it: its producer is further up.
_RELAYS = {"bitcast", "copy", "reshape", "transpose", "convert"}


@dataclass(frozen=True)
class Name:
    """An op_name a part may be explained from, and the source line of the instruction of the
    optimized module that carries it (None where no instruction does, or it has no line)."""

    op_name: str
    location: tuple[str, int] | None


@dataclass(frozen=True)
class Part:
    """One part of a collective: its operand in the optimized module, its result dims, and
    the names that may explain it, most likely first (empty op_names left out)."""

    operand: Instruction | None
    dims: tuple[int, ...]
    names: tuple[Name, ...]


def collective_parts(ctx: Context, instr: Instruction) -> list[Part]:
    """The parts of an optimized collective: each element of a tuple collective that XLA
    combined (its op_name lists the parts', or names none), each piece of the concatenation
    a GPU all-reduce combined (it names none), else the collective itself, whose `operand` is
    that of the first step of its chain (see steps.py)."""
    kind, _ = collective_kind(instr.opcode)
    operands = [ctx.opt_names.get(o) for o in instr.operands]
    result = instr.arrays
    if instr.opcode.endswith("-start") and len(result) > len(operands):
        result = result[len(operands):]     # start ops return (operands..., results...)
    if kind is CollectiveKind.RAGGED_ALL_TO_ALL:
        # One part: its data is its first operand; the others are the output buffer it
        # writes into and the offsets and sizes.
        operands, result = operands[:1], result[-1:]
    named = combined_op_names(instr.op_name)
    if len(operands) > 1 and (named or not instr.op_name):
        # Where the combined op_name lists every part, each is named by its own element;
        # where it lists fewer (XLA leaves out parts that had none), by what made it.
        aligned = len(named) == len(operands)
        return [Part(op, result[i].dims if i < len(result) else (),
                     _names(ctx, instr, i, op, named[i] if aligned else None))
                for i, op in enumerate(operands)]
    if kind is CollectiveKind.ALL_REDUCE and not instr.op_name and len(operands) == 1:
        pieces = _concatenated(ctx, operands[0])
        if pieces:
            return [Part(p, _dims(producer(ctx, p)), _names(ctx, instr, i, p, None))
                    for i, p in enumerate(pieces)]
    chain = ctx.chains.get(instr.name)
    first = chain[0] if chain else instr
    operand = ctx.opt_names.get(first.operands[0]) if first.operands else None
    own = (Name(instr.op_name, location(ctx.optimized, instr)),) if instr.op_name else ()
    made_for = _names(ctx, instr, 0, operands[0] if operands else None, None)
    if own and _names_only_inputs(ctx, instr.op_name):
        # The XLA of jax 0.12 gives a collective it inserts to move an input that input's
        # metadata (op_name="w1"), where 0.10's gave it the consumer's: what the move was
        # made for is what uses it, so those names come first.
        return [Part(operand, result[0].dims if result else (), _unique(made_for + own))]
    return [Part(operand, result[0].dims if result else (), _unique(own + made_for))]


def _names_only_inputs(ctx: Context, op_name: str) -> bool:
    """Whether `op_name` is the metadata of the program's inputs alone (parameters of the
    propagated module), not of an op the program runs."""
    named = ctx.by_op_name.get(op_name, ())
    return bool(named) and all(i.opcode == "parameter" for i in named)


def _dims(i: Instruction | None) -> tuple[int, ...]:
    return i.arrays[0].dims if i is not None and len(i.arrays) == 1 else ()


def _unique(names: tuple[Name, ...]) -> tuple[Name, ...]:
    """The first of each op_name, in order."""
    first: dict[str, Name] = {}
    for n in names:
        first.setdefault(n.op_name, n)
    return tuple(first.values())


def _names(ctx: Context, instr: Instruction, index: int, operand: Instruction | None,
           combined: str | None) -> tuple[Name, ...]:
    """The names part `index` may be explained from: its element of the combined op_name
    when there is one (at the line of the instruction that carries it), then the metadata of
    what made the collective: for a reduction the producer of the partial values, then the
    relays down to the operand; for a data movement the users of its result (the consumers
    it was made for, whose metadata the partitioner gives it), then its operand's chain."""
    kind, _ = collective_kind(instr.opcode)
    up = _relayed(ctx, operand)
    if kind in (CollectiveKind.ALL_REDUCE, CollectiveKind.REDUCE_SCATTER):
        sources = up[::-1]
    else:
        users = _users_of_part(ctx, instr, index)
        sources = sorted(users, key=lambda u: _is_relay(ctx, u)) + up
    out: list[Name] = []
    if combined:
        carrier = next((i for i in sources if i.op_name == combined), None)
        out.append(Name(combined, location(ctx.optimized, carrier) if carrier else None))
    out += [Name(i.op_name, location(ctx.optimized, i)) for i in sources if i.op_name]
    return _unique(tuple(out))


def _is_relay(ctx: Context, i: Instruction) -> bool:
    """Whether `i` only relays its one operand's values (a bitcast, a layout-only fusion)."""
    return len(i.operands) == 1 and (i.opcode in _RELAYS or renames(ctx.optimized, i))


def producer(ctx: Context, i: Instruction | None) -> Instruction | None:
    """The instruction that computed `i`'s values: `i` itself, or what it relays."""
    chain = _relayed(ctx, i)
    return chain[-1] if chain else None


def _relayed(ctx: Context, i: Instruction | None) -> list[Instruction]:
    """`i` and what it relays, up to its producer: through bitcasts, copies, converts,
    layout-only fusions, and a tuple element to the instruction that made it (inside a
    multi-output fusion, the root's element)."""
    out: list[Instruction] = []
    while i is not None and len(out) < 16:
        out.append(i)
        if i.opcode == "get-tuple-element":
            i = _element(ctx, i)
        elif _is_relay(ctx, i):
            i = ctx.opt_names.get(i.operands[0])
        else:
            break
    return out


def _element(ctx: Context, gte: Instruction) -> Instruction | None:
    """The instruction that made a tuple element: the tuple's operand, or the fused root's;
    None where the tuple comes from elsewhere (a loop, a collective)."""
    index = ints(gte.attr("index"))
    src = ctx.opt_names.get(gte.operands[0]) if gte.operands else None
    if not index or src is None:
        return None
    if src.opcode == "fusion":
        src = next((x for x in ctx.optimized.called(src) if x.is_root), None)
        if src is None:
            return None
    if src.opcode != "tuple" or index[0] >= len(src.operands):
        return None
    return ctx.opt_names.get(src.operands[index[0]])


def _concatenated(ctx: Context, i: Instruction | None) -> list[Instruction]:
    """The pieces of a concatenation (a concatenate, or a fusion whose root concatenates its
    parameters, as XLA's GPU all-reduce combiner writes), in order; [] for anything else."""
    if i is None:
        return []
    if i.opcode == "concatenate":
        return [p for o in i.operands if (p := ctx.opt_names.get(o)) is not None]
    if i.opcode != "fusion":
        return []
    body = ctx.optimized.called(i)
    root = next((x for x in body if x.is_root), None)
    if root is None or root.opcode != "concatenate":
        return []
    params = {x.name: ints(x.operand_text) for x in body if x.opcode == "parameter"}
    pieces = []
    for o in root.operands:
        number = params.get(o)
        if not number or number[0] >= len(i.operands):
            return []                    # a piece computed inside the fusion: not a combiner
        piece = ctx.opt_names.get(i.operands[number[0]])
        if piece is None:
            return []
        pieces.append(piece)
    return pieces


def _users_of_part(ctx: Context, instr: Instruction, index: int) -> list[Instruction]:
    """The instructions that use part `index` of a collective's result, after its -done and
    tuple element, through relays (the consumers a data movement was made for)."""
    todo = [u for u in ctx.opt_users.get(instr.name, ())]
    out: list[Instruction] = []
    seen: set[str] = set()
    while todo and len(seen) < 32:
        u = todo.pop(0)
        if u.name in seen:
            continue
        seen.add(u.name)
        if u.opcode.endswith("-done"):
            todo += ctx.opt_users.get(u.name, ())
            continue
        if u.opcode == "get-tuple-element":
            if ints(u.attr("index"))[:1] == (index,):
                todo += ctx.opt_users.get(u.name, ())
            continue
        out.append(u)
        if _is_relay(ctx, u):
            todo += ctx.opt_users.get(u.name, ())
    return out
