"""A layout carried through a traced program without a compile: GSPMD's rules in small.

Each value gets a split per dimension (which mesh axes divide it, major to minor), propagated
forward from the inputs' specs through the ops; where an op needs its operands split otherwise,
the resharding is priced as the collective GSPMD/Shardy would insert:

- an axis removed from a dimension: an all-gather over it (V = the gathered shard);
- an axis added to a dimension that was whole: a local slice, free;
- an axis moved from one dimension to another: an all-to-all over it (V = the buffer);
- partial sums (a dot's or a sum's reduced dimension split on both sides): an all-reduce over
  those axes (V = the buffer), or a reduce-scatter (V = the full operand) where the next
  resharding splits a dimension over them, as XLA's reduce-scatter creator makes it.

Each device's FLOPs follow from its shard shapes (a dot: 2·prod(all its dims) over the axes
that split it; an elementwise op: one per element; transcendentals none, as XLA's cost
analysis counts them), and its bytes from what survives XLA's fusion, roughly: the operands and
results of dots, and of the fusions elementwise ops and reductions make (what one writes and
another reads from memory), each at its shard size.

Plain data only (no jax): the search calls this thousands of times, so the per-program work
(shapes, each op's rule and its static facts) is done once (`prepare`), and a call only walks
the ops with dictionaries of tuples. This module prepares a program and runs the walk
(walk.py: the splits, partial sums, reshardings and their pricing, the combiner); the rule of
each primitive is in rules.py.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from math import prod

from explorer._src.compile.jaxpr_graph import Program
from explorer._src.estimate.rules import (
    FUSIBLE,
    PRIMITIVE_RULES,
    classify,
    flops_per_element,
    reduce_rule,
    replicated,
)
from explorer._src.estimate.walk import (
    Body,
    Dims,
    ImpliedCollective,
    ImpliedCost,
    Prepared,
    Walk,
    WalkStep,
)
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import Entry

__all__ = ["ImpliedCollective", "ImpliedCost", "Prepared", "implied_cost", "prepare"]


def implied_cost(program: Program, mesh: MeshSpec, specs: Mapping[str, tuple[Entry, ...]],
                 points: Mapping[str, tuple[Entry, ...]] | None = None, *,
                 own_constraints: bool = False) -> ImpliedCost:
    """The collectives and per-device work of `program` under a layout.

    Args:
        program: traced by explorer._src.compile.jaxpr_graph.trace_program (its ``names`` are the
            inputs' names, in order).
        mesh: the mesh (the one it was traced on, or one of the same axis names).
        specs: input name -> spec entries (None, an axis, a tuple of axes; shorter than the
            rank pads with None; ``()`` replicated). An input not named is replicated.
        points: constraint point name -> spec entries: a sharding_constraint in the named
            scope of a key reshards its value to that spec.
        own_constraints: a constraint whose point is not in `points` keeps the spec the
            program gave it (a user's function); else it is the identity (a workload traced
            with every point in place, of which the layout pins some).

    Raises:
        UnknownAxisError: a spec names an axis the mesh lacks.
        RankError: a spec has more entries than its tensor has dimensions.
    """
    walk = Walk(prepare(program), mesh, points or {}, own_constraints)
    return walk.run_program(specs)


def _steps(prep: Prepared, program: Program) -> Body:
    """`program`'s vars recorded in `prep`, and its ops as steps, each with its rule (rules.py)
    and static facts; loop and call bodies likewise."""
    for vid, var in program.vars.items():
        prep.shape[vid] = var.shape
        prep.item[vid] = var.itemsize
        prep.rep[vid] = _REP[len(var.shape)]
        prep.size[vid] = prod(var.shape)
    steps = []
    for op in program.ops:
        rule, facts = PRIMITIVE_RULES.get(op.primitive) or classify(op, prep.shape)
        if facts is not None and (not op.inputs or op.inputs[0] is None):
            # A literal operand (a scalar constant) is replicated, and so is what it makes.
            rule, facts = replicated, None
        step = WalkStep(op, rule, prep.shape)
        if op.body is not None:
            step.body = _steps(prep, op.body)
        if facts is not None:
            step.extra = facts(op, prep.shape)
        step.k = flops_per_element(op)
        steps.append(step)
    _fusions(steps, program.outputs)
    return Body(tuple(steps), program.inputs, program.outputs, frozenset(program.vars))


def _fusions(steps: list[WalkStep], outputs: tuple[int, ...]) -> None:
    """Mark what XLA's fusion leaves in memory, roughly: elementwise and layout ops fuse into
    their consumers, so one writes its result only where a non-fusible op (a dot, a
    reduction, a loop) or more than one op reads it, or the program returns it; and reads an
    operand only where that was written (or is an input, or a non-fusible op's result)."""
    consumers: dict[int, list[WalkStep | None]] = {}
    for step in steps:
        for i in step.arrays:
            consumers.setdefault(i, []).append(step)
    for o in outputs:
        consumers.setdefault(o, []).append(None)
    written: dict[int, bool] = {}
    for step in steps:
        if step.rule not in FUSIBLE:
            continue
        users = [u for o in step.outs for u in consumers.get(o, ())]
        # A reduction ends its fusion (its producers fuse into it; it is always written).
        out = step.rule is reduce_rule or len(users) != 1 or users[0] is None \
            or users[0].rule not in FUSIBLE
        for o in step.outs:
            written[o] = out
        step.io = (out, tuple(i for i in step.arrays if written.get(i, True)))


_REP: list[Dims] = [((),) * r for r in range(64)]
_prepared: dict[int, tuple[weakref.ref, Prepared]] = {}


def prepare(program: Program | Prepared) -> Prepared:
    """`program` prepared, from a cache keyed by the program object while it lives."""
    if isinstance(program, Prepared):
        return program
    hit = _prepared.get(id(program))
    if hit is not None and hit[0]() is program:
        return hit[1]
    prep = Prepared(program, _steps)
    key = id(program)
    # The cache is bound into the callback: at interpreter exit the module's globals may be
    # gone before the program is collected.
    _prepared[key] = (weakref.ref(program, lambda _, cache=_prepared: cache.pop(key, None)),
                      prep)
    return prep

