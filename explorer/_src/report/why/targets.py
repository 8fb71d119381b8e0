"""What is explained: one collective of the optimized module (or one part of a combined one),
with the propagated instructions its metadata points at, ranked most likely meant first."""

from __future__ import annotations

from dataclasses import dataclass, replace

from explorer._src.hlo.collectives import CollectiveKind, collective_kind
from explorer._src.hlo.module import Instruction, ints
from explorer._src.report.why.context import Context, location
from explorer._src.report.why.parts import Name, collective_parts

_REDUCTIONS = (CollectiveKind.ALL_REDUCE, CollectiveKind.REDUCE_SCATTER)


@dataclass(frozen=True)
class CollectiveToExplain:
    """One collective (or one part of a combined one) to explain."""

    kind: CollectiveKind
    axes: tuple[str, ...]              # the mesh axes its groups span
    op_name: str
    location: tuple[str, int] | None
    operand: Instruction | None        # its operand in the optimized module
    dims: tuple[int, ...]              # result dims of this part
    gather_dim: int | None = None      # all-gather's `dimensions={d}`
    # The axes of every step when XLA moved the data in several collectives (a permute, then
    # an all-gather, for one resharding): the layouts are compared over all of them.
    chain_axes: tuple[str, ...] = ()
    steps: int = 1
    # The collective's own file, where sentences say `line N` when the target has no
    # location of its own (a part named by a combined op_name); None when unknown.
    file: str | None = None
    # The propagated instructions its metadata points at, in module order, and the same
    # ranked most likely meant first (see `rank`); filled by `_anchored`.
    anchors: tuple[Instruction, ...] = ()
    ranked: tuple[Instruction, ...] = ()

    @property
    def home(self) -> str | None:
        """The file whose lines the sentences say as `line N` (others as `file.py:N`)."""
        return self.location[0] if self.location is not None else self.file

    @property
    def is_reduction(self) -> bool:
        return self.kind in _REDUCTIONS


def targets_to_explain(ctx: Context, instr: Instruction) -> list[CollectiveToExplain]:
    """What to explain of an optimized collective: itself, or each part of a combined one
    (see parts.py), each under the first name that points at propagated instructions."""
    kind, _ = collective_kind(instr.opcode)
    chain = ctx.chains.get(instr.name)
    axes = ctx.group_axes(instr, kind)
    chain_axes = axes
    if chain:
        used = {x for c in chain for x in ctx.group_axes(c, collective_kind(c.opcode)[0])}
        chain_axes = tuple(x for x in ctx.mesh.names if x in used)
    gather_dim = None
    if kind is CollectiveKind.ALL_GATHER:
        dims = ints(instr.attr("dimensions"))
        gather_dim = dims[0] if dims else None
    steps = len(chain) if chain else 1
    own = location(ctx.optimized, instr)
    return [_named(ctx, CollectiveToExplain(kind, axes, "", None, part.operand, part.dims,
                                            gather_dim, chain_axes, steps,
                                            file=own[0] if own else None), part.names)
            for part in collective_parts(ctx, instr)]


def _named(ctx: Context, t: CollectiveToExplain, names: tuple[Name, ...]) -> CollectiveToExplain:
    """`t` under the first of `names` that points at propagated instructions; else under
    the first (the unknown then says which), or none."""
    first = None
    for n in names:
        named = _anchored(ctx, replace(t, op_name=n.op_name, location=n.location))
        if named.anchors:
            return named
        first = first or named
    return first or t


def fused_reductions(ctx: Context, t: CollectiveToExplain) -> list[CollectiveToExplain]:
    """The reductions (reduce, dot) that feed an all-reduce through a few element-wise
    steps in the optimized module, as targets of their own: XLA fused the reduction into the
    op that feeds the collective and kept that op's metadata (e.g. a negate after a sum)."""
    if t.operand is None or not t.is_reduction:
        return []
    out, seen, todo = [], set(), [t.operand]
    while todo and len(seen) < 6:
        i = todo.pop(0)
        if i.name in seen:
            continue
        seen.add(i.name)
        inside = ctx.optimized.called(i) if i.opcode == "fusion" else [i]
        found = [x for x in inside if x.opcode in ("reduce", "dot", "convolution")]
        for x in found:
            if x.op_name and x.op_name != t.op_name:
                out.append(_anchored(ctx, replace(t, op_name=x.op_name,
                                                  location=location(ctx.optimized, x),
                                                  operand=None)))
        if not found:
            todo += [ctx.opt_names[o] for o in i.operands if o in ctx.opt_names]
    return out


def _anchored(ctx: Context, t: CollectiveToExplain) -> CollectiveToExplain:
    anchors = tuple(_anchors(ctx, t))
    return replace(t, anchors=anchors, ranked=tuple(_rank(ctx, anchors, t)))


def _anchors(ctx: Context, t: CollectiveToExplain) -> list[Instruction]:
    """The propagated instructions the collective's metadata points at."""
    found = list(ctx.by_op_name.get(t.op_name, ()))
    if not found and t.op_name:
        # Inside a shard_map body the propagated op_name lacks the outer path.
        found = [i for name, instrs in ctx.by_op_name.items()
                 if t.op_name.endswith("/" + name) for i in instrs]
    if t.location is not None:
        same = [i for i in found if location(ctx.propagated, i) == t.location]
        if same or any(location(ctx.propagated, i) for i in found):
            found = same
    return found


def _rank(ctx: Context, anchors: tuple[Instruction, ...],
          t: CollectiveToExplain) -> list[Instruction]:
    """The anchors most likely meant first. The layers of a loop, or a forward op and its
    transpose, can share op_name and line; shapes tell them apart: the per-device result
    of the anchor (for a reduction) or of one of its operands (for a data movement) has
    the collective's shape."""
    def fits(i: Instruction | None) -> int:
        if i is None or not i.arrays:
            return 2
        dims = i.arrays[0].dims
        if len(dims) != len(t.dims):
            return 2
        ax = ctx.axes(i)
        local = ctx.shard_dims(dims, ax) if ax else dims
        return 0 if tuple(t.dims) in (tuple(dims), local) else 1

    moved = ctx.input_of(ctx.optimized, t.operand)
    # The inputs (weights) the reduced value was computed from, next to the collective.
    near = ctx.inputs_near(ctx.optimized, t.operand, 2)

    def score(a: Instruction) -> int:
        if t.is_reduction:
            same = not near or bool(near & ctx.inputs_near(ctx.propagated, a, 1))
            return (0 if same else 4) + fits(a)
        operands = [ctx.prop_names.get(o) for o in a.operands]
        # The collective moves a program input (a weight): the anchor that uses that
        # input comes first, whatever the other layers look like.
        same = moved is not None and any(
            ctx.input_of(ctx.propagated, o) == moved for o in operands)
        return (0 if same else 4) + min([fits(o) for o in operands], default=2)
    return sorted(anchors, key=score)
