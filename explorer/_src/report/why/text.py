"""The words of the why reader: how tensors, lines, axes and data movements are named in its
sentences, and the sentences more than one rule writes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from explorer._src.hlo.module import Instruction, ints
from explorer._src.report.why.context import Context, location
from explorer._src.report.why.layout import DimAxes, spec_text
from explorer._src.report.why.metadata import constraint_point, primitive
from explorer._src.report.why.needs import layout_source
from explorer._src.report.why.ops import RENAMING
from explorer._src.report.why.targets import CollectiveToExplain

if TYPE_CHECKING:       # at run time origins.py imports this package (its op_name words)
    from explorer._src.report.origins import AxisOrigin, Origins

CONFLICT = ("where propagation gave it a different layout from its operand (a conflict between "
            "the layouts around it)")


def axes_phrase(axes: Iterable[str]) -> str:
    axes = [f"`{a}`" for a in axes]
    return " and ".join(axes) if axes else "no mesh axis"


def dims_phrase(dims: Iterable[int]) -> str:
    dims = list(dims)
    return f"dimension {dims[0]}" if len(dims) == 1 else "dimensions " + ", ".join(map(str, dims))


def article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:1].isupper() and text[1:2].islower() else text


def moved_by(t: CollectiveToExplain, verb: str) -> str:
    """`the all-gather over `data` gathers`, or for a chain of steps, `the 2 collectives
    ending in this all-gather (over `data` and `model`) gather`."""
    if t.steps > 1:
        return (f"the {t.steps} collectives ending in this {t.kind} (over "
                f"{axes_phrase(t.chain_axes)}) {verb}")
    return f"the {t.kind} over {axes_phrase(t.axes)} {verb}s"


def loc_text(loc: tuple[str, int] | None, t: CollectiveToExplain) -> str:
    """`at line 12` in the collective's own file, `at other.py:12` elsewhere, "" unknown."""
    if loc is None:
        return ""
    if loc[0] == t.home:
        return f"at line {loc[1]}"
    return f"at {loc[0].replace(chr(92), '/').rsplit('/', 1)[-1]}:{loc[1]}"


def where(ctx: Context, i: Instruction, t: CollectiveToExplain) -> str:
    """Where a propagated instruction came from, as `loc_text` says it."""
    return loc_text(location(ctx.propagated, i), t)


def instruction_text(i: Instruction) -> str:
    """One instruction as evidence: `%name = f32[8,64] opcode(operands)`, op_name."""
    shape = " ".join(a.text() for a in i.arrays)
    ops = i.operand_text if i.opcode == "parameter" else ", ".join(
        "%" + o for o in i.operands)
    meta = f" [{i.op_name}]" if i.op_name else ""
    return f"%{i.name} = {shape} {i.opcode}({ops}){meta}"


def name(ctx: Context, i: Instruction | None, t: CollectiveToExplain) -> str:
    """A propagated tensor as a sentence names it: an input by its name, a constraint by its
    point, else the op and its line."""
    if i is None:
        return "an operand"
    if i.opcode == "parameter":
        return param_name(ctx, i)
    constraint = constraint_point(i.op_name)
    if constraint is not None:
        return f"the sharding constraint {constraint}{where(ctx, i, t)}".rstrip()
    own = f"the `{primitive(i.op_name, with_einsum=True) or i.opcode}` " \
          f"{where(ctx, i, t)}".rstrip()
    # A parameter only reshaped, broadcast or copied on its way here is named as well.
    src = _renamed(ctx, i)
    if src is not i and src.opcode == "parameter":
        return f"{param_name(ctx, src)} ({RENAMING[i.opcode]} {where(ctx, i, t)})".replace(
            " )", ")")
    return own


def _renamed(ctx: Context, i: Instruction) -> Instruction:
    """What `i` only reshapes, broadcasts or copies (through a chain of such ops); `i` itself
    where it computes."""
    src = i
    for _ in range(8):
        if src.opcode not in RENAMING or len(src.operands) != 1 \
                or src.operands[0] not in ctx.prop_names:
            break
        src = ctx.prop_names[src.operands[0]]
    return src


def named_input(ctx: Context, i: Instruction | None) -> str:
    """The program input that `name` names `i` by (`input `x``), as a name; "" where it names
    none. The evidence's `inputs` come from here, so that they are what the sentence says."""
    if i is None:
        return ""
    if i.opcode != "parameter":
        if constraint_point(i.op_name) is not None:
            return ""
        i = _renamed(ctx, i)
        if i.opcode != "parameter":
            return ""
    return _input_name(ctx, i)


def _input_name(ctx: Context, i: Instruction) -> str:
    """The input an entry parameter is (its name, else its op_name); "" for another
    computation's parameter, or an entry parameter with neither."""
    if i.computation != ctx.propagated.entry:
        return ""
    number = ints(i.operand_text)
    if number and number[0] < len(ctx.inputs):
        return ctx.inputs[number[0]]
    return i.op_name or ""


def param_name(ctx: Context, i: Instruction) -> str:
    if i.computation != ctx.propagated.entry:
        return f"a parameter of `{i.computation}`"
    named = _input_name(ctx, i)
    return f"input `{named}`" if named else f"parameter {i.operand_text}"


def cause(ctx: Context, a: Instruction, t: CollectiveToExplain) -> str | None:
    """`as the sharding constraint `x` at line 3 asks` (or the shard_map's in_specs) when
    that fixed `a`'s layout; None when the math or propagation did."""
    source = layout_source(ctx, a)
    if source is None:
        return None
    if source.shard_map:
        return "as the shard_map's in_specs ask"
    i = source.instr
    return (f"as the sharding constraint {constraint_point(i.op_name) or ''}"
            f"{where(ctx, i, t)} asks" + ("" if i is a else " (propagated back to it)"))


def _origins_of(ctx: Context, i: Instruction) -> Origins | None:
    """Shardy's record for a propagated instruction: an entry parameter's under its input's
    name, any other under its own."""
    if i.opcode == "parameter" and i.computation == ctx.propagated.entry:
        number = ints(i.operand_text)
        if number and number[0] < len(ctx.inputs):
            return ctx.origins.get(ctx.inputs[number[0]])
    return ctx.origins.get(i.name)


def _axis_origin(ctx: Context, i: Instruction, axes: set[str],
                 t: CollectiveToExplain) -> tuple[str, AxisOrigin | None]:
    """(`input `x` (`data` on dim 0)`, its AxisOrigin): where the first of `axes` that splits
    `i` came from; ("", None) where Shardy's record has none of them."""
    origins = _origins_of(ctx, i)
    for dim in origins.dims if origins is not None else ():
        for o in dim.axes:
            if o.axis in axes:
                return f"{o.phrase(t.home or '')} (`{o.axis}` on its dim {dim.dim})", o
    return "", None


@dataclass(frozen=True)
class Clash:
    """The two origins a reshard moves between, as Shardy recorded them: the sentence that
    says them (` The two layouts come from A and from B.`, "" where either is not known),
    the two (A, B; "" where not known), and the program inputs the sentence names."""

    text: str = ""
    before: str = ""
    after: str = ""
    inputs: tuple[str, ...] = ()


def _inputs_of(origins: Iterable[AxisOrigin | None]) -> tuple[str, ...]:
    """The program inputs among `origins`, by name."""
    # Here, not at the top: origins.py imports this package (its op_name words).
    from explorer._src.report.origins import OriginKind
    return tuple(o.name for o in origins if o is not None and o.kind is OriginKind.INPUT)


def clash(ctx: Context, producer: Instruction, consumer: Instruction, have: DimAxes,
          need: DimAxes, t: CollectiveToExplain) -> Clash:
    """Where the two layouts of a reshard came from (Clash)."""
    moved = {x for h, n in zip(have, need, strict=True) for x in set(h) ^ set(n)}
    moved &= set(t.chain_axes)
    before, came = _axis_origin(ctx, producer, moved, t)
    after, goes = _axis_origin(ctx, consumer, moved, t)
    if before and after and before != after:
        return Clash(f" The two layouts come from {before} and from {after}.", before, after,
                     _inputs_of((came, goes)))
    # No layout of the consumer's own: its operands met there and neither won.
    origins = _origins_of(ctx, consumer)
    for c in origins.conflicts if origins is not None else ():
        if not c.winner and len(c.candidates) >= 2:
            return Clash(f" The layouts that clash there: {' and '.join(c.candidates)}; "
                         "neither won.", c.candidates[0], c.candidates[1],
                         _inputs_of(c.origins))
    return Clash("", before, after)


def layout_change(ctx: Context, tensor: Instruction, before: DimAxes | None,
                  after: DimAxes | None, consumer: Instruction, t: CollectiveToExplain,
                  movement: str) -> str:
    """The reshard sentence: `tensor` changes layout for `consumer`, which only moves or maps
    its elements, as a constraint asks or where propagation met a conflict; `movement` says
    what the collective does (`the all-to-all over `data` moves the data`)."""
    return (f"The layout of {name(ctx, tensor, t)} changes from {spec_text(before)} to "
            f"{spec_text(after)} for `{primitive(consumer.op_name, with_einsum=True)}` "
            f"{where(ctx, consumer, t)}, {cause(ctx, consumer, t) or CONFLICT}; {movement}.")
