"""The evidence of a reason, built once from the instructions a rule read: each as text (what
the views show) and as fields (what explorer.what_if acts on), so that the two cannot differ
and nothing downstream parses the text back."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from explorer._src.hlo.module import Instruction, ints
from explorer._src.report.why.context import Context
from explorer._src.report.why.layout import DimAxes, layout_spec, spec_text
from explorer._src.report.why.reason import Evidence, Operand, OperandRole
from explorer._src.report.why.text import instruction_text, named_input


def operand(ctx: Context, i: Instruction, role: OperandRole) -> Operand:
    """A propagated instruction as an Operand: its name, first array, layout and input."""
    array = i.arrays[0] if i.arrays else None
    parameter = None
    if i.opcode == "parameter":
        number = ints(i.operand_text)
        parameter = number[0] if number else None
    entry = ctx.propagated is not None and i.computation == ctx.propagated.entry
    name = (ctx.inputs[parameter] if entry and parameter is not None
            and parameter < len(ctx.inputs) else "")
    return Operand(role, i.name, array.dtype if array else "",
                   tuple(array.dims) if array else None, layout_spec(ctx.axes(i)), name,
                   parameter, i.op_name or "")


def at(ctx: Context, consumer: Instruction) -> Evidence:
    """The Evidence of a reason that rests on its consumer alone (no layouts compared)."""
    return Evidence(consumer=instruction_text(consumer),
                    user=operand(ctx, consumer, OperandRole.CONSUMER))


def evidence(ctx: Context, consumer: Instruction, operands: Sequence[Instruction] = (),
             after: DimAxes | None = None, named: Iterable[Instruction | None] = (),
             inputs: Iterable[str] = (), origin_before: str = "",
             origin_after: str = "") -> Evidence:
    """The Evidence of a reason read at `consumer` from its `operands` (two: a contraction's
    lhs and rhs; one: the operand moved or reduced; none), `after` the layout after. `named`
    are the instructions the sentence names, in its order, and `inputs` further inputs it names
    (where a layout came from): together, the program inputs the sentence names."""
    roles = ((OperandRole.LHS, OperandRole.RHS) if len(operands) == 2
             else (OperandRole.OPERAND,) * len(operands))
    ops = tuple(operand(ctx, o, r) for o, r in zip(operands, roles, strict=True))
    if len(ops) == 2:
        producer = f"lhs {instruction_text(operands[0])}; rhs {instruction_text(operands[1])}"
        before = f"lhs {spec_text(ctx.axes(operands[0]))}; rhs {spec_text(ctx.axes(operands[1]))}"
    else:
        producer = "; ".join(instruction_text(o) for o in operands)
        before = "; ".join(spec_text(ctx.axes(o)) for o in operands)
    names = [n for i in named if (n := named_input(ctx, i))] + list(inputs)
    return Evidence(consumer=instruction_text(consumer), producer=producer, sharding_before=before,
                    sharding_after=spec_text(after),
                    origin_before=origin_before, origin_after=origin_after, operands=ops,
                    user=operand(ctx, consumer, OperandRole.CONSUMER),
                    spec_after=layout_spec(after), inputs=tuple(dict.fromkeys(names)))
