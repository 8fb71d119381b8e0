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
the ops with dictionaries of tuples.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from math import prod

from explorer.compile.jaxpr_graph import Op, Program
from explorer.errors import RankError, UnknownAxisError, choices
from explorer.hlo.collectives import CollectiveKind
from explorer.spec.mesh import MeshSpec
from explorer.spec.tensor import Entry, entry_axes, format_spec, normalize_spec

Dims = tuple[tuple[str, ...], ...]     # per dimension, the mesh axes splitting it

# XLA's combiners merge collectives of one kind over the same devices that do not depend on
# each other (the gradients' all-reduces, say) into one, up to a size: 30 MiB + 7 bytes for
# all-reduces, all-gathers and reduce-scatters (kDefault*CombineThreshold in
# xla/service/collective_utils.h; the GPU compiler's xla_gpu_*_combine_threshold_bytes).
COMBINE_THRESHOLD = 30 * 1024 * 1024 + 7

AG, AR, RS, A2A, CP = (CollectiveKind.ALL_GATHER, CollectiveKind.ALL_REDUCE,
                       CollectiveKind.REDUCE_SCATTER, CollectiveKind.ALL_TO_ALL,
                       CollectiveKind.COLLECTIVE_PERMUTE)


@dataclass(frozen=True)
class ImpliedCollective:
    """A collective the layout implies, in the cost model's terms (explorer.cost.model).

    Attributes:
        kind: the collective.
        axes: the mesh axes it runs over, in mesh order.
        program_bytes: V per device: all-gather the gathered result, reduce-scatter the full
            operand, all-reduce the buffer, all-to-all each device's buffer.
        group_size: the devices in one group (the product of the axes' sizes).
        runs: times one step runs it: loop trips, and identical collectives (same kind, axes,
            bytes and reason) counted together.
        why: what makes it, e.g. ``dot_general: partial sums over its contracting dims``.
    """

    kind: CollectiveKind
    axes: tuple[str, ...]
    program_bytes: int
    group_size: int
    runs: int = 1
    why: str = ""


@dataclass(frozen=True)
class ImpliedCost:
    """What one step of a layout costs each device, without a compile.

    Attributes:
        flops: FLOPs per device per step (loop bodies times their trip counts).
        bytes_accessed: bytes per device read and written by what survives fusion, roughly.
        collectives: the collectives the layout implies.
        notes: what the estimate could not follow (a primitive with no rule, a loop whose
            trip count is unknown).
    """

    flops: float
    bytes_accessed: float
    collectives: tuple[ImpliedCollective, ...]
    notes: tuple[str, ...]


def implied_cost(program: Program, mesh: MeshSpec, specs: Mapping[str, tuple[Entry, ...]],
                 points: Mapping[str, tuple[Entry, ...]] | None = None, *,
                 own_constraints: bool = False) -> ImpliedCost:
    """The collectives and per-device work of `program` under a layout.

    Args:
        program: traced by explorer.compile.jaxpr_graph.trace_program (its ``names`` are the
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
    walk = _Walk(prepare(program), mesh, points or {}, own_constraints)
    return walk.run_program(specs)


# ---------------------------------------------------------------------------------------------
# The program prepared once: each op's rule and static facts.

class _Step:
    """One op as the walk runs it: its rule, ids, and what its rule precomputed."""

    __slots__ = ("rule", "name", "ins", "outs", "arrays", "same", "bcast", "k", "extra",
                 "body", "runs", "point", "own_spec", "note", "io")

    def __init__(self, op: Op, rule: Callable, shapes: Mapping[int, tuple[int, ...]]):
        self.rule, self.name = rule, op.primitive
        self.ins, self.outs = op.inputs, op.outputs
        self.arrays = tuple(i for i in op.inputs if i is not None)
        out_shape = shapes[op.outputs[0]] if op.outputs else ()
        # The operands an elementwise op combines: those of its output's shape (a scalar
        # operand broadcasts and never moves).
        self.same = tuple(i for i in self.arrays if shapes[i] == out_shape)
        # Those of its rank that broadcast along size-1 dims, as lax's elementwise ops allow,
        # with which of their dims are full size (only those can be split).
        self.bcast = tuple((i, tuple(a == b for a, b in zip(shapes[i], out_shape, strict=True)))
                           for i in self.arrays if shapes[i] != out_shape
                           and _broadcasts(shapes[i], out_shape))
        self.k = 0.0
        self.extra = None
        self.body: _Body | None = None
        # A fusible op's memory traffic: (whether its result is written out of its fusion,
        # the operands it reads from memory); None for the others, which count their own.
        self.io: tuple[bool, tuple[int, ...]] | None = None
        self.runs, self.point, self.own_spec, self.note = op.runs, op.point, op.own_spec, op.note


class _Body:
    """A program's steps, inputs and outputs, and every var id it defines (for a loop's
    second pass, which forgets what its first left)."""

    __slots__ = ("steps", "inputs", "outputs", "ids")

    def __init__(self, steps, inputs, outputs, ids):
        self.steps, self.inputs, self.outputs, self.ids = steps, inputs, outputs, ids


class Prepared:
    """A Program with its per-program facts computed once: every var's shape, bytes per
    element and replicated split, and each op's rule. `implied_cost` makes one per program
    and keeps it while the program lives."""

    def __init__(self, program: Program):
        self.program = program
        self.shape: dict[int, tuple[int, ...]] = {}
        self.item: dict[int, int] = {}
        self.rep: dict[int, Dims] = {}
        self.size: dict[int, int] = {}      # elements
        self.top = self._body(program)

    def _body(self, program: Program) -> _Body:
        for vid, var in program.vars.items():
            self.shape[vid] = var.shape
            self.item[vid] = var.itemsize
            self.rep[vid] = _REP[len(var.shape)]
            self.size[vid] = prod(var.shape)
        steps = []
        for op in program.ops:
            rule, prep = _RULES.get(op.primitive) or _classify(op, self.shape)
            if prep is not None and (not op.inputs or op.inputs[0] is None):
                # A literal operand (a scalar constant) is replicated, and so is what it makes.
                rule, prep = _replicated, None
            step = _Step(op, rule, self.shape)
            if op.body is not None:
                step.body = self._body(op.body)
            if prep is not None:
                step.extra = prep(op, self.shape)
            step.k = _flops_per_element(op)
            steps.append(step)
        _fusions(steps, program.outputs)
        return _Body(tuple(steps), program.inputs, program.outputs, frozenset(program.vars))


def _fusions(steps: list[_Step], outputs: tuple[int, ...]) -> None:
    """Mark what XLA's fusion leaves in memory, roughly: elementwise and layout ops fuse into
    their consumers, so one writes its result only where a non-fusible op (a dot, a
    reduction, a loop) or more than one op reads it, or the program returns it; and reads an
    operand only where that was written (or is an input, or a non-fusible op's result)."""
    consumers: dict[int, list[_Step | None]] = {}
    for step in steps:
        for i in step.arrays:
            consumers.setdefault(i, []).append(step)
    for o in outputs:
        consumers.setdefault(o, []).append(None)
    written: dict[int, bool] = {}
    for step in steps:
        if step.rule not in _FUSIBLE:
            continue
        users = [u for o in step.outs for u in consumers.get(o, ())]
        # A reduction ends its fusion (its producers fuse into it; it is always written).
        out = step.rule is _reduce or len(users) != 1 or users[0] is None \
            or users[0].rule not in _FUSIBLE
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
    prep = Prepared(program)
    key = id(program)
    # The cache is bound into the callback: at interpreter exit the module's globals may be
    # gone before the program is collected.
    _prepared[key] = (weakref.ref(program, lambda _, cache=_prepared: cache.pop(key, None)),
                      prep)
    return prep


# ---------------------------------------------------------------------------------------------
# The walk: one layout through the program.

class _Walk:
    """One call's state: each var's split, pending partial sums, and the tallies."""

    def __init__(self, prep: Prepared, mesh: MeshSpec, points: Mapping, own: bool):
        self.p = prep
        self.mesh = mesh
        self.size = dict(zip(mesh.names, mesh.sizes, strict=True))
        self.order = {a: i for i, a in enumerate(mesh.names)}
        self.points, self.own = points, own
        self.dims: dict[int, Dims] = {}
        # var -> (the axes it is a partial sum over, pieces, why, work): a loop's stacked
        # output holds `pieces` per-iteration results, each reduced on its own; `work` is the
        # FLOPs that made it, in a list its copies share (settle takes it once).
        self.partial: dict[int, tuple[tuple[str, ...], int, str, list[float]]] = {}
        self.flops = 0.0
        self.bytes = 0.0
        self.runs = 1
        self.events: list[tuple] = []
        # Collectives on the longest dependence path to each var: two collectives at one
        # depth (in one loop body) cannot depend on each other, so XLA's combiners may merge
        # them (finish). `loop`: the loop body the walk is in (0: none).
        self.depth: dict[int, int] = {}
        self.loop = 0
        # Reshardings already priced: XLA emits one collective for a value moved the same way
        # twice (CSE), as the forward and the backward pass both gather a weight, or q, k and
        # v's dots the same activation. (It does not always: the CPU compile of a 2-D layout
        # gathers some activations again in the backward pass, so this is a lower bound.)
        self.moved: dict[tuple, None] = {}
        self.notes: dict[str, None] = {}
        self._split: dict[tuple[str, ...], int] = {(): 1}
        self._elems: dict[tuple, int] = {}
        self._specs: dict[tuple, Dims] = {}

    # -- sizes ------------------------------------------------------------------------------

    def split(self, axes: tuple[str, ...]) -> int:
        n = self._split.get(axes)
        if n is None:
            n = self._split[axes] = prod(self.size[a] for a in axes)
        return n

    def elems(self, v: int, dims: Dims) -> int:
        """Elements of v's shard; a dimension that does not divide is padded, as GSPMD
        pads it."""
        if dims is self.p.rep[v]:
            return self.p.size[v]
        key = (v, dims)
        e = self._elems.get(key)
        if e is None:
            e = 1
            for s, axes in zip(self.p.shape[v], dims, strict=True):
                e *= -(-s // self.split(axes)) if axes else s
            self._elems[key] = e
        return e

    def nbytes(self, v: int, dims: Dims) -> int:
        return self.elems(v, dims) * self.p.item[v]

    def get(self, v: int) -> Dims:
        return self.dims.get(v) or self.p.rep[v]

    def spec_dims(self, spec, rank: int, what: str) -> Dims:
        """Spec entries (or spec text) as a split per dimension, checked against the mesh
        once per spec; `what` names the tensor or point in the errors."""
        if isinstance(spec, list):
            spec = tuple(tuple(e) if isinstance(e, list) else e for e in spec)
        key = (spec, rank)
        d = self._specs.get(key)
        if d is None:
            entries = tuple(entry_axes(e) for e in normalize_spec(spec, tensor=what))
            if len(entries) > rank:
                raise RankError(f"spec {format_spec(normalize_spec(spec))!r} of {what!r} has "
                                f"{len(entries)} entries but its value has rank {rank}; give "
                                "at most one entry per dimension", tensor=what, mesh=self.mesh)
            for axes in entries:
                for a in axes:
                    if a not in self.size:
                        raise UnknownAxisError(
                            f"axis {a!r} in the spec of {what!r} is not in mesh "
                            f"{self.mesh.text()!r}; valid axes: {choices(self.mesh.names)}",
                            tensor=what, axis=a, mesh=self.mesh)
            d = self._specs[key] = entries + ((),) * (rank - len(entries))
        return d

    # -- tallies ----------------------------------------------------------------------------

    def record(self, kind: CollectiveKind, axes, nbytes: int, why: str, runs: int = 1,
               value: int | None = None) -> None:
        """One collective (on var `value`) run `runs` times per run of the code around it;
        none over axes of size 1, which move nothing. What `value` feeds comes after it."""
        n = self.split(tuple(axes))
        if n > 1 and nbytes > 0:
            depth = self.depth.get(value, 0) if value is not None else 0
            if value is not None:
                self.depth[value] = depth + 1
            self.events.append((kind, tuple(sorted(axes, key=self.order.get)), int(nbytes), why,
                                runs * self.runs, (self.loop, depth)))
            # Its operand and result count as memory traffic too, as XLA's cost analysis
            # counts them: V and V/n for a gather or scatter, V twice for the others.
            traffic = nbytes * (1 + 1 / n) if kind in (AG, RS) else 2 * nbytes
            self.bytes += traffic * runs * self.runs

    def note(self, text: str) -> None:
        self.notes[text] = None

    def mark(self) -> tuple:
        return self.flops, self.bytes, len(self.events), len(self.moved)

    def rollback(self, mark: tuple) -> None:
        self.flops, self.bytes, n, m = mark
        del self.events[n:]
        for key in list(self.moved)[m:]:
            del self.moved[key]

    # -- resharding -------------------------------------------------------------------------

    def settle(self, v: int, want: Dims | None = None) -> Dims:
        """v's pending partial sums reduced, on the way to `want` where it is known: the
        splits `want` adds that are not partial are taken first (a local slice commutes with
        the sum, and GSPMD, seeing the consumer, computes only that slice); a reduce-scatter
        over the partial axes `want` splits a dimension by (XLA turns an all-reduce and a
        slice into one); an all-reduce over the rest. v's split afterwards, also stored."""
        axes, pieces, why, work = self.partial.pop(v)
        cur = list(self.get(v))
        if want is not None:
            before = self.split(tuple(a for d in cur for a in d))
            taken = {a for d in cur for a in d}
            scatter: dict[int, tuple[str, ...]] = {}
            for d, wanted in enumerate(want):
                if wanted[:len(cur[d])] != cur[d]:
                    continue                    # not a refinement of this dim: reshard later
                add = tuple(a for a in wanted[len(cur[d]):] if a not in taken)
                if not add or self.p.shape[v][d] % self.split(cur[d] + add):
                    continue
                local = tuple(a for a in add if a not in axes)
                cur[d] = cur[d] + local
                if len(local) < len(add):
                    scatter[d] = tuple(a for a in add if a in axes)
            # The local slices divide the work that made v too (counted once, at the first
            # of its copies to be reduced).
            sliced = self.split(tuple(a for d in cur for a in d)) // before
            if sliced > 1 and work[0]:
                self.flops -= work[0] * (1 - 1 / sliced)
                work[0] = 0.0
            for d, add in scatter.items():
                prior = tuple(cur)
                cur[d] = cur[d] + add
                self.record(RS, add, self.nbytes(v, prior) // pieces, why, pieces, v)
                self.flops += self.elems(v, prior) * self.runs    # its additions, as XLA counts
            axes = tuple(a for a in axes if not any(a in s for s in scatter.values()))
        dims = tuple(cur)
        if axes:
            self.record(AR, axes, self.nbytes(v, dims) // pieces, why, pieces, v)
            self.flops += self.elems(v, dims) * self.runs
        self.dims[v] = dims
        return dims

    def settle_all(self, ids) -> None:
        if self.partial:
            for v in ids:
                if v in self.partial:
                    self.settle(v)

    def reshard(self, v: int, dst: Dims, why: str) -> None:
        """Price moving v from its split to `dst`: all-gathers of the axes a dimension loses,
        all-to-alls of those that move between dimensions, collective-permutes where an axis
        stays but changes place within a dimension; axes only added are local slices."""
        src = self.settle(v, dst) if v in self.partial else self.get(v)
        if src == dst:
            return
        key = (v, src, dst)
        if key in self.moved:
            return
        self.moved[key] = None
        where = {a: d for d, axes in enumerate(dst) for a in axes}
        cur = list(src)
        moves: dict[tuple[int, int], list[str]] = {}
        for d, axes in enumerate(src):
            gone = tuple(a for a in axes if a not in where)
            for a in axes:
                if a in where and where[a] != d:
                    moves.setdefault((d, where[a]), []).append(a)
            if gone:
                cur[d] = tuple(a for a in axes if a not in gone)
                self.record(AG, gone, self.nbytes(v, tuple(cur)), why, value=v)
        for (d, e), axes in moves.items():
            self.record(A2A, axes, self.nbytes(v, tuple(cur)), why, value=v)
            cur[d] = tuple(a for a in cur[d] if a not in axes)
            cur[e] = cur[e] + tuple(axes)
        for d, axes in enumerate(cur):
            kept = tuple(a for a in dst[d] if a in axes)
            if kept != dst[d][:len(kept)] or kept != tuple(a for a in axes if a in dst[d]):
                self.record(CP, kept, self.nbytes(v, tuple(cur)), why, value=v)

    def merge(self, ids: Sequence[int], v: int) -> Dims:
        """The split of an elementwise result: the most split operand's, with the splits of
        the others added where they fit (GSPMD merges compatible shardings), every operand
        of v's shape."""
        shape = self.p.shape[v]
        # An operand's split on a dim where it broadcasts (size 1) says nothing of the result.
        cands = [tuple(axes if s == n else () for axes, s, n in
                       zip(self.get(i), self.p.shape[i], shape, strict=True)) for i in ids]
        best = max(cands, key=lambda d: prod(self.split(a) for a in d))
        out = list(best)
        used = {a for axes in best for a in axes}
        for d in cands:
            if d is best:
                continue
            for i, axes in enumerate(d):
                if axes and not out[i] and not used.intersection(axes) \
                        and shape[i] % self.split(axes) == 0:
                    out[i] = axes
                    used.update(axes)
        return tuple(out)

    # -- programs ---------------------------------------------------------------------------

    def run(self, body: _Body, in_dims: Sequence[Dims]) -> None:
        dims = self.dims
        for v, d in zip(body.inputs, in_dims, strict=True):
            dims[v] = d
        depth = self.depth
        for step in body.steps:
            if depth:      # an op's outputs come after the collectives its operands did
                d = max((depth.get(i, 0) for i in step.arrays), default=0)
                for o in step.outs:
                    depth[o] = d
            step.rule(self, step)
            if depth and step.arrays:    # ... and after those the rule made on them
                d = max(depth.get(i, 0) for i in step.arrays)
                for o in step.outs:
                    if depth.get(o, 0) < d:
                        depth[o] = d
            if step.io is not None:
                self.fused_io(step)

    def fused_io(self, step: _Step) -> None:
        out, reads = step.io
        n = sum(self.nbytes(o, self.get(o)) for o in step.outs) if out else 0
        for i in reads:
            n += self.nbytes(i, self.get(i))
        self.bytes += n * self.runs

    def run_program(self, specs: Mapping[str, tuple[Entry, ...]]) -> ImpliedCost:
        top = self.p.top
        names = self.p.program.names
        ins = []
        for i, v in enumerate(top.inputs):
            name = names[i] if i < len(names) else f"input {i}"
            spec = specs.get(name, ())
            ins.append(self.spec_dims(spec, len(self.p.shape[v]), name))
        # The inputs' reads and the outputs' writes are counted by the ops that read and
        # write them (_fusions), as XLA's cost analysis counts its fusions' operands.
        self.run(top, ins)
        self.settle_all(top.outputs)
        return self.finish()

    def finish(self) -> ImpliedCost:
        runs: dict[tuple, int] = {}
        for kind, axes, nbytes, why, n in _combined(self.events):
            key = (kind, axes, nbytes, why)
            runs[key] = runs.get(key, 0) + n
        out = tuple(ImpliedCollective(kind, axes, nbytes, self.split(axes), n, why)
                    for (kind, axes, nbytes, why), n in runs.items())
        return ImpliedCost(self.flops, self.bytes, out, tuple(self.notes))


def _combined(events: list[tuple]) -> list[tuple]:
    """The collectives as XLA's combiners leave them: those of one combinable kind over the
    same axes, run as often, at one depth of one loop body, merged in program order into
    collectives of up to COMBINE_THRESHOLD bytes; the others as they are."""
    groups: dict[tuple, list[tuple]] = {}
    out = []
    for kind, axes, nbytes, why, n, (loop, depth) in events:
        if kind in (AR, AG, RS):
            groups.setdefault((kind, axes, n, loop, depth), []).append((nbytes, why))
        else:
            out.append((kind, axes, nbytes, why, n))
    for (kind, axes, n, _, _), items in groups.items():
        total, first, merged = 0, "", 0
        for nbytes, why in (*items, (None, "")):
            if total and (nbytes is None or total + nbytes > COMBINE_THRESHOLD):
                more = (f" (and {merged - 1} more {kind}s combined into one, as XLA's "
                        "combiner does)") if merged > 1 else ""
                out.append((kind, axes, total, first + more, n))
                total, merged = 0, 0
            if nbytes is not None:
                first = why if not merged else first
                total, merged = total + nbytes, merged + 1
    return out


# ---------------------------------------------------------------------------------------------
# Rules. Each takes the walk and the step, reads its operands' splits, prices what it needs
# moved, and sets its outputs' splits (and their partial sums).

def _set(w: _Walk, step: _Step, dims: Dims) -> None:
    for o in step.outs:
        w.dims[o] = dims if len(w.p.shape[o]) == len(dims) else w.p.rep[o]


def _replicated(w: _Walk, step: _Step) -> None:
    # iota, constants, random seeds: every device makes the whole value, so none moves.
    for o in step.outs:
        w.dims[o] = w.p.rep[o]


def _identity(w: _Walk, step: _Step) -> None:
    # device_put, optimization_barrier, copy: output i is input i, partial sums and all.
    for i, o in zip(step.ins, step.outs, strict=False):
        if i is None:
            w.dims[o] = w.p.rep[o]
            continue
        w.dims[o] = w.get(i)
        if i in w.partial:
            w.partial[o] = w.partial[i]


# Ops through which a partial sum stays a partial sum (they are linear in it, and move no
# data), so that its reduction can wait for a resharding that slices it or makes it a
# reduce-scatter. A sum of partial sums is not one of them: GSPMD reduces each, and XLA's CPU
# pipeline does not reassociate them (tests/estimate/test_propagate.py compares with it).
_SCALING = frozenset({"neg", "mul", "div", "convert_element_type", "reduce_precision", "copy",
                      "copy_p"})


def _carry_partial(w: _Walk, step: _Step) -> tuple | None:
    """The partial sum an elementwise op passes on, else None after reducing its operands'."""
    pending = [w.partial[i] for i in step.arrays if i in w.partial]
    if not pending:
        return None
    if step.name in _SCALING and len(pending) == 1 and step.ins[0] in w.partial \
            and all(len(w.p.shape[i]) == 0 for i in step.arrays[1:]):
        return pending[0]       # a partial sum scaled by a scalar
    w.settle_all(step.arrays)
    return None


def _broadcasts(shape: tuple[int, ...], out: tuple[int, ...]) -> bool:
    return len(shape) == len(out) and all(a in (b, 1) for a, b in zip(shape, out, strict=True))


def _elementwise(w: _Walk, step: _Step) -> None:
    # Operands of the result's shape (or broadcasting along size-1 dims): the result takes the
    # most split operand's split, merged with the others' where compatible; the operands that
    # differ are resharded to it (a size-1 dim never holds a split).
    pending = _carry_partial(w, step) if w.partial else None
    same = step.same
    out = w.get(same[0]) if same else w.p.rep[step.outs[0]]
    differs = False
    for i in same[1:]:
        d = w.get(i)
        if d is not out and d != out:
            differs = True
            break
    for i, full in step.bcast:
        if w.get(i) != _project(out, full):
            differs = True
            break
    if differs:
        out = w.merge((*same, *(i for i, _ in step.bcast)), step.outs[0])
        why = f"{step.name}: operands resharded to one layout"
        for j in same:
            w.reshard(j, out, why)
        for j, full in step.bcast:
            w.reshard(j, _project(out, full), why)
    _set(w, step, out)
    if pending is not None:
        for o in step.outs:
            w.partial[o] = pending
    if step.k:
        w.flops += step.k * w.elems(step.outs[0], out) * w.runs


def _project(dims: Dims, full: tuple[bool, ...]) -> Dims:
    return tuple(axes if f else () for axes, f in zip(dims, full, strict=True))


def _fallback(w: _Walk, step: _Step) -> None:
    # No rule: every split operand is gathered and the outputs taken as replicated, the safe
    # (costly) reading; its FLOPs are not counted.
    w.note(f"no sharding rule for primitive {step.name!r}: its operands are gathered and its "
           "outputs taken as replicated; its FLOPs are not counted")
    w.settle_all(step.arrays)
    for i in step.arrays:
        w.reshard(i, w.p.rep[i], f"{step.name}: no sharding rule, operands gathered")
    _replicated(w, step)


def _classify(op: Op, shapes) -> tuple[Callable, Callable | None]:
    """A primitive with no rule of its own: elementwise where every output has the shape its
    array operands have (scalars aside), else the fallback."""
    arrays = [shapes[i] for i in op.inputs if i is not None]
    outs = [shapes[o] for o in op.outputs]
    if outs and all(s == outs[0] for s in outs) \
            and all(len(s) == 0 or _broadcasts(s, outs[0]) for s in arrays):
        return _elementwise, None
    return _fallback, None


# -- layout ops -------------------------------------------------------------------------------

def _prep_broadcast(op: Op, shapes):
    src, out = shapes[op.inputs[0]], shapes[op.outputs[0]]
    # Operand dim i lands on dim broadcast_dimensions[i]; a size-1 dim stretched holds no split.
    return tuple((i, d) for i, d in enumerate(op.params["broadcast_dimensions"])
                 if src[i] == out[d])


def _broadcast(w: _Walk, step: _Step) -> None:
    v, o = step.ins[0], step.outs[0]
    if v is None:
        w.dims[o] = w.p.rep[o]
        return
    if v in w.partial:
        w.settle(v)
    src = w.get(v)
    out = list(w.p.rep[o])
    for i, d in step.extra:
        out[d] = src[i]
    w.dims[o] = tuple(out)


def _prep_reshape(op: Op, shapes):
    return _reshape_groups(shapes[op.inputs[0]], shapes[op.outputs[0]])


def _reshape_groups(src: tuple[int, ...], dst: tuple[int, ...]):
    """(operand dims, result dims) groups of equal size, each with its major dims (the first
    of size > 1): a split survives a reshape only on a group's major dim."""
    groups, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        gi, gj = [i] if i < len(src) else [], [j] if j < len(dst) else []
        a = src[i] if i < len(src) else 1
        b = dst[j] if j < len(dst) else 1
        i, j = i + bool(gi), j + bool(gj)
        while a != b:
            if a < b and i < len(src):
                a *= src[i]
                gi.append(i)
                i += 1
            elif j < len(dst):
                b *= dst[j]
                gj.append(j)
                j += 1
            else:
                break
        major_i = next((d for d in gi if src[d] > 1), None)
        major_j = next((d for d in gj if dst[d] > 1), None)
        groups.append((tuple(gi), major_i, major_j))
    return tuple(groups)


def _reshape(w: _Walk, step: _Step) -> None:
    # A dim's split survives where the dim survives, or is the major dim of a merge or split
    # group and the new major dim divides by it; any other split is gathered first.
    v, o = step.ins[0], step.outs[0]
    src = w.get(v)
    out = list(w.p.rep[o])
    kept = list(src)
    shape_o = w.p.shape[o]
    for dims_in, major_i, major_j in step.extra:
        for d in dims_in:
            if not src[d]:
                continue
            if d == major_i and major_j is not None and shape_o[major_j] % w.split(src[d]) == 0:
                out[major_j] = src[d]
            else:
                kept[d] = ()
    kept_t = tuple(kept)
    if kept_t != src:
        w.reshard(v, kept_t, "reshape: a split that the new shape cannot keep is gathered")
    w.dims[o] = tuple(out)
    if v in w.partial:
        w.partial[o] = w.partial.pop(v)


def _pick_dims(w: _Walk, step: _Step) -> None:
    """The output's dims are some of the operand's, in `step.extra`'s order (a transpose's
    permutation, a squeeze's kept dims): each keeps its split, and pending sums stay pending."""
    v, o = step.ins[0], step.outs[0]
    src = w.get(v)
    w.dims[o] = tuple(src[p] for p in step.extra)
    if v in w.partial:
        w.partial[o] = w.partial[v]


def _prep_squeeze(op: Op, shapes):
    drop = set(op.params.get("dimensions", ()))
    return tuple(d for d in range(len(shapes[op.inputs[0]])) if d not in drop)


def _prep_whole_dims(op: Op, shapes):
    """The operand dims an op needs whole: those whose size changes (a slice, a pad, a
    concatenation), and those it scans along (a cumulative sum, a sort, a reversal)."""
    src = shapes[op.inputs[0]]
    cut = set()
    for v in (*op.outputs, *(i for i in op.inputs if i is not None)):
        if len(shapes[v]) == len(src):
            cut |= {d for d in range(len(src)) if shapes[v][d] != src[d]}
    for key in ("axis", "dimension"):
        if isinstance(op.params.get(key), int):
            cut.add(op.params[key] % max(len(src), 1))
    cut |= set(op.params.get("dimensions", ()) or ()) if op.primitive == "rev" else set()
    if op.primitive in ("top_k", "approx_top_k"):
        cut.add(len(src) - 1)
    if op.primitive in _LINALG:
        cut |= {d for d in range(max(len(src) - 2, 0), len(src))}
    if op.primitive == "fft":
        n = len(op.params.get("fft_lengths", ()))
        cut |= set(range(len(src) - n, len(src)))
    return frozenset(cut)


_LINALG = frozenset({"cholesky", "triangular_solve", "lu", "qr", "householder_product",
                     "eigh", "eig", "svd", "schur", "hessenberg", "tridiagonal",
                     "tridiagonal_solve"})


def _whole_dims(w: _Walk, step: _Step) -> None:
    # Dims whose size changes, or that the op runs along, must be whole on every device:
    # their splits are gathered; the other dims keep theirs (operands of the same rank, such
    # as a concatenation's or a dynamic_update_slice's update, follow the first's).
    w.settle_all(step.arrays)
    cut = step.extra
    rank = len(w.p.shape[step.arrays[0]]) if step.arrays else 0
    # The layout comes from the operands of the result's shape (a dynamic_update_slice's
    # operand, not its update), else from the most split (a concatenation's).
    cands = step.same or [i for i in step.arrays if len(w.p.shape[i]) == rank]
    lead = max(cands, key=lambda i: prod(w.split(a) for a in w.get(i)), default=None)
    if lead is None:
        _replicated(w, step)
        return
    kept = tuple(() if d in cut else axes for d, axes in enumerate(w.get(lead)))
    why = f"{step.name}: a dimension it changes or runs along is gathered"
    for i in step.arrays:
        shape = w.p.shape[i]
        if len(shape) != rank:
            continue
        want = tuple(axes if shape[d] % w.split(axes) == 0 else ()
                     for d, axes in enumerate(kept))
        w.reshard(i, want, why)
    _set(w, step, kept)
    if step.k:
        w.flops += step.k * w.elems(step.outs[0], w.get(step.outs[0])) * w.runs


# -- reductions and dots ------------------------------------------------------------------------

def _prep_reduce(op: Op, shapes):
    axes = frozenset(op.params.get("axes", ()))
    return axes, tuple(d for d in range(len(shapes[op.inputs[0]])) if d not in axes)


def _reduce(w: _Walk, step: _Step) -> None:
    # A reduced dim that is split leaves each device a partial result: a sum stays a partial
    # sum (reduced where it is next needed), a max, min or arg-reduction is all-reduced now.
    v, o = step.ins[0], step.outs[0]
    if v in w.partial:
        w.settle(v)
    src = w.get(v)
    reduced, keep = step.extra
    out = tuple(src[d] for d in keep)
    w.dims[o] = out
    over = tuple(a for d in reduced for a in src[d])
    work = w.elems(v, src) * w.runs           # its bytes: _fusions, as a fusion's root
    w.flops += work
    if over:
        why = f"{step.name}: a reduced dimension is split"
        if step.name == "reduce_sum":
            w.partial[o] = (over, 1, why, [work])
        else:
            w.record(AR, over, w.nbytes(o, out), why, value=o)
            w.flops += w.elems(o, out) * w.runs


def _prep_dot(op: Op, shapes):
    (lc, rc), (lb, rb) = op.params["dimension_numbers"]
    lhs, rhs = shapes[op.inputs[0]], shapes[op.inputs[1]]
    lfree = tuple(d for d in range(len(lhs)) if d not in lc and d not in lb)
    rfree = tuple(d for d in range(len(rhs)) if d not in rc and d not in rb)
    # Role of each dim: ("b", i) batch pair i, ("c", i) contracting pair i, ("l", d)/("r", d)
    # a free dim of one side. A pair's two dims must carry the same axes.
    lrole = {d: ("b", i) for i, d in enumerate(lb)} | {d: ("c", i) for i, d in enumerate(lc)}
    lrole |= {d: ("l", d) for d in lfree}
    rrole = {d: ("b", i) for i, d in enumerate(rb)} | {d: ("c", i) for i, d in enumerate(rc)}
    rrole |= {d: ("r", d) for d in rfree}
    total = 2.0 * prod(lhs) * prod(rhs[d] for d in rfree)
    return (tuple(lb), tuple(rb), tuple(lc), tuple(rc), lfree, rfree, lrole, rrole, total)


def _dot(w: _Walk, step: _Step) -> None:
    # GSPMD's dot: a batch or contracting pair must be split the same on both sides (a
    # contracting pair so split leaves partial sums, reduced where the result is next
    # needed); a free dim keeps its split in the result; an axis may split only one dim of
    # each operand and of the result, so where the sides disagree the cheaper side moves
    # (_dot_choice). Its FLOPs, 2·prod(all its dims), divide by every axis left splitting it.
    lhs, rhs = step.ins[0], step.ins[1]
    o = step.outs[0]
    w.settle_all(step.arrays)
    lb, rb, lc, rc, lfree, rfree, lrole, rrole, total = step.extra
    L, R = w.get(lhs), w.get(rhs)
    if L == w.p.rep[lhs] and R == w.p.rep[rhs]:
        w.dims[o] = w.p.rep[o]
        w.flops += total * w.runs
        w.bytes += (w.nbytes(lhs, L) + w.nbytes(rhs, R) + w.nbytes(o, w.p.rep[o])) * w.runs
        return
    choice = _dot_choice(w, step, L, R)
    L2, R2 = [list(a) for a in L], [list(a) for a in R]
    for dims, side in ((L2, lrole), (R2, rrole)):
        for d in range(len(dims)):
            dims[d] = [a for a in dims[d] if choice[a] == side[d]]
    for pairs in ((lb, rb), (lc, rc)):
        for ld, rd in zip(*pairs, strict=True):
            both = L2[ld] + [a for a in R2[rd] if a not in L2[ld]]
            if w.p.shape[lhs][ld] % w.split(tuple(both)) or \
                    w.p.shape[rhs][rd] % w.split(tuple(both)):
                both = [a for a in L2[ld] if a in R2[rd]]      # what both sides already share
            L2[ld] = R2[rd] = both
    Lt = tuple(tuple(a) for a in L2)
    Rt = tuple(tuple(a) for a in R2)
    why = "dot_general: operands resharded to a common layout"
    w.reshard(lhs, Lt, why)
    w.reshard(rhs, Rt, why)
    out = tuple(Lt[d] for d in lb) + tuple(Lt[d] for d in lfree) + tuple(Rt[d] for d in rfree)
    w.dims[o] = out
    kept = {a for dims in (Lt, Rt) for axes in dims for a in axes}
    work = total / w.split(tuple(kept)) * w.runs
    w.flops += work
    w.bytes += (w.nbytes(lhs, Lt) + w.nbytes(rhs, Rt) + w.nbytes(o, out)) * w.runs
    contracted = tuple(a for d in lc for a in Lt[d])
    if contracted:
        w.partial[o] = (contracted, 1, "dot_general: partial sums over its contracting dims",
                        [work])


def _dot_choice(w: _Walk, step: _Step, L: Dims, R: Dims) -> dict[str, tuple | None]:
    """Per mesh axis on either operand, the role it keeps in the dot (None: gathered).

    An axis both sides hold in the same pair stays. Else each option is priced in bytes, the
    cheapest taken (ties keep the split, which divides the compute): keeping the lhs's role
    (the rhs gathers the axis, moves it, or slices it locally for free), keeping the rhs's, or
    gathering it on both; partial sums (a contracting pair) add an all-reduce of the result,
    counted at its bytes as GSPMD weighs it (a ring moves it twice, but keeping the split
    also divides the dot's compute)."""
    lb, rb, lc, rc, lfree, rfree, lrole, rrole, _ = step.extra
    lhs, rhs, o = step.ins[0], step.ins[1], step.outs[0]
    lr = {a: lrole[d] for d, axes in enumerate(L) for a in axes}
    rr = {a: rrole[d] for d, axes in enumerate(R) for a in axes}
    lbytes, rbytes = w.nbytes(lhs, L), w.nbytes(rhs, R)
    # The result's bytes, and the operands' non-contracting splits that would divide it.
    free = {a for a, r in (*lr.items(), *rr.items()) if r[0] != "c"}
    whole = w.elems(o, w.p.rep[o]) * w.p.item[o]
    choice: dict[str, tuple | None] = {}
    for a in (*lr, *(a for a in rr if a not in lr)):
        left, right = lr.get(a), rr.get(a)
        if left == right:
            choice[a] = left
            continue
        n = w.size[a]
        # Its shard should `a` stay as a contracting axis (then the result is not split by it).
        out_bytes = whole / w.split(tuple(x for x in free if x != a))
        options = []
        if left is not None:
            options.append((_keep_cost(w, left, right, rhs, R, rb, rc, rbytes, n, out_bytes),
                            left))
        if right is not None:
            options.append((_keep_cost(w, right, left, lhs, L, lb, lc, lbytes, n, out_bytes),
                            right))
        options.append(((lbytes * n if left else 0) + (rbytes * n if right else 0), None))
        choice[a] = min(options, key=lambda c: c[0])[1]
    return choice


def _keep_cost(w: _Walk, role, other, v: int, dims: Dims, batch, contract, vbytes: int,
               n: int, out_bytes: float) -> float:
    """Bytes to keep an axis in `role` on one side, given its role `other` on the side v."""
    cost = 0.0
    if role[0] in "bc":
        d = (batch if role[0] == "b" else contract)[role[1]]
        if other is None:
            if w.p.shape[v][d] % (w.split(dims[d]) * n):
                return float("inf")           # v's matching dim cannot take the axis
        else:
            cost += vbytes                    # moved from another dim of v: an all-to-all
        if role[0] == "c":
            cost += out_bytes
    elif other is not None:
        cost += vbytes * n                    # a free dim keeps it: v gathers it
    return cost


# -- constraints, loops, calls, shard_map ---------------------------------------------------------

def _constraint(w: _Walk, step: _Step) -> None:
    # A named point in `points` reshards to its spec; another keeps its own spec if asked
    # (a user's function), else passes the value through (a workload's free point).
    v, o = step.ins[0], step.outs[0]
    if step.point and step.point in w.points:
        spec = w.points[step.point]
    elif w.own and step.own_spec is not None:
        spec = step.own_spec
    else:
        _identity(w, step)
        return
    name = step.point or "a constraint in the program"
    dst = w.spec_dims(spec, len(w.p.shape[o]), name)
    w.reshard(v, dst, f"constraint {name!r}")
    w.dims[o] = dst


def _prep_loop(op: Op, shapes):
    return op.params["num_consts"], op.params["num_carry"]


def _loop(w: _Walk, step: _Step) -> None:
    """A scan or while: the body walked with the consts' and carries' splits, each xs slice's
    (a split stacked dim gathered every iteration); if the carries come out split otherwise,
    the loop keeps the body's split (the init resharded once) and the body is walked again.
    Its work and collectives count `runs` times."""
    nc, ncar = step.extra
    body, length = step.body, step.runs
    w.settle_all(step.arrays)
    ins = [w.get(i) if i is not None else w.p.rep[b] for i, b in zip(step.ins, body.inputs,
                                                                        strict=True)]
    outer, outer_loop = w.runs, w.loop
    for k in range(nc + ncar, len(ins)):
        b = body.inputs[k]
        if ins[k] and ins[k][0]:
            w.runs, w.loop = outer * length, id(step)
            w.record(AG, ins[k][0], w.nbytes(b, ins[k][1:]),
                     f"{step.name}: xs split on its stacked dim, gathered each iteration")
        ins[k] = ins[k][1:]
    carry = ins[nc:nc + ncar]
    w.runs, w.loop = outer * length, id(step)
    mark = w.mark()
    w.run(body, ins)
    out = _loop_carries(w, body, ncar)
    if out != carry and all(_refines(c, o) for c, o in zip(carry, out, strict=True)):
        # The body's result only lacks splits the carry has: slicing it back each iteration
        # is free, so the loop keeps the init's layout.
        for k, v in enumerate(body.outputs[:ncar]):
            w.dims[v] = carry[k]
    elif out != carry:
        w.rollback(mark)
        for v in [v for v in w.partial if v in body.ids]:
            del w.partial[v]
        w.runs, w.loop = outer, outer_loop
        for k, i in enumerate(step.ins[nc:nc + ncar]):
            if i is not None:
                w.reshard(i, out[k], f"{step.name}: the init carry takes the body's layout")
        w.runs, w.loop = outer * length, id(step)
        carry = out
        w.run(body, ins[:nc] + carry + ins[nc + ncar:])
        for k, v in enumerate(body.outputs[:ncar]):
            w.reshard(v, carry[k], f"{step.name}: the carry resharded back each iteration")
    w.runs, w.loop = outer, outer_loop
    _loop_outputs(w, step, carry, length)
    if step.note:
        w.note(step.note)


def _refines(fine: Dims, coarse: Dims) -> bool:
    """Whether `fine` is `coarse` with splits only added (moving coarse to fine is a local
    slice)."""
    used = {a for axes in coarse for a in axes}
    return all(f[:len(c)] == c and not used.intersection(f[len(c):])
               for f, c in zip(fine, coarse, strict=True))


def _loop_carries(w: _Walk, body: _Body, ncar: int) -> list[Dims]:
    out = []
    for v in body.outputs[:ncar]:
        out.append(w.settle(v) if v in w.partial else w.get(v))
    return out


def _loop_outputs(w: _Walk, step: _Step, carry: list[Dims], length: int) -> None:
    ncar = len(carry)
    for o, d in zip(step.outs[:ncar], carry, strict=True):
        w.dims[o] = d
    for o, v in zip(step.outs[ncar:], step.body.outputs[ncar:], strict=True):
        w.dims[o] = ((),) + w.get(v)
        if v in w.partial:
            # Each iteration's partial sum is reduced on its own, wherever it is next needed.
            axes, pieces, why, work = w.partial.pop(v)
            w.partial[o] = (axes, pieces * length, why, work)


def _call(w: _Walk, step: _Step) -> None:
    # cond: the chosen branch walked on the operands' splits.
    w.settle_all(step.arrays)
    body = step.body
    w.run(body, [w.get(i) if i is not None else w.p.rep[b]
                 for i, b in zip(step.ins, body.inputs, strict=True)])
    w.settle_all(body.outputs)
    for o, v in zip(step.outs, body.outputs, strict=True):
        w.dims[o] = w.get(v)
    if step.note:
        w.note(step.note)


def _shard_map(w: _Walk, step: _Step) -> None:
    # Inputs resharded to in_specs; the body is per device already, so it is walked with
    # everything replicated at its own (local) shapes, its collectives as it names them.
    in_specs, out_specs, manual = step.extra
    w.settle_all(step.arrays)
    for i, spec in zip(step.ins, in_specs, strict=True):
        if i is not None and spec is not None:
            w.reshard(i, w.spec_dims(spec, len(w.p.shape[i]), "shard_map in_specs"),
                      "shard_map: an input resharded to its in_specs")
    body = step.body
    w.run(body, [w.p.rep[b] for b in body.inputs])
    w.settle_all(body.outputs)
    for o, spec in zip(step.outs, out_specs, strict=True):
        w.dims[o] = w.spec_dims(spec or (), len(w.p.shape[o]), "shard_map out_specs")
    rest = [a for a in w.mesh.names if a not in manual and w.size[a] > 1]
    if rest:
        w.note(f"a shard_map is manual over {', '.join(manual)} only: its body is counted "
               f"unsplit over {', '.join(rest)}")


def _prep_shard_map(op: Op, shapes):
    p = op.params
    return p["in_specs"], p["out_specs"], tuple(p.get("manual_axes", ()))


# Collectives a shard_map body names: the kind, and which of its operands or results V is.
_NAMED = {"psum": AR, "pmax": AR, "pmin": AR, "psum_invariant": AR, "all_gather": AG,
          "all_gather_invariant": AG, "reduce_scatter": RS, "psum_scatter": RS,
          "all_to_all": A2A, "ppermute": CP}


def _named_collective(w: _Walk, step: _Step) -> None:
    axes = step.extra
    axes = tuple(a for a in axes if a in w.size)
    kind = _NAMED[step.name]
    why = f"{step.name} in the program"
    # V: an all-gather's result, every other kind's operand (all at the body's local shapes).
    vals = step.outs if kind is AG else step.arrays
    for v in vals:
        if axes:
            w.record(kind, axes, w.nbytes(v, w.p.rep[v]), why, value=v)
            if kind in (AR, RS):
                w.flops += w.elems(v, w.p.rep[v]) * w.runs
    _replicated(w, step)


def _prep_named(op: Op, shapes):
    p = op.params
    axes = p.get("axes", p.get("axis_name", ()))
    return (axes,) if isinstance(axes, str) else tuple(a for a in axes if isinstance(a, str))


def _gather(w: _Walk, step: _Step) -> None:
    # The operand keeps its split on the dims taken whole (slice size = dim size, not
    # collapsed), which become the result's offset dims; the indices' split carries to the
    # result's batch dims; every other split is gathered.
    operand, indices = step.ins[0], step.ins[1]
    o = step.outs[0]
    w.settle_all(step.arrays)
    keep_pairs, batch_pairs = step.extra
    src = w.get(operand)
    keep = {d for d, _ in keep_pairs}
    want = tuple(axes if d in keep else () for d, axes in enumerate(src))
    why = "gather: operand dims it indexes into are gathered"
    w.reshard(operand, want, why)
    out = list(w.p.rep[o])
    for d, od in keep_pairs:
        out[od] = want[d]
    idx = w.get(indices) if indices is not None else ()
    used = {a for axes in out for a in axes}
    for d, od in batch_pairs:
        if idx and idx[d] and not used.intersection(idx[d]):
            out[od] = idx[d]
    w.dims[o] = tuple(out)


def _prep_gather(op: Op, shapes):
    dn = op.params["dimension_numbers"]
    operand, out = shapes[op.inputs[0]], shapes[op.outputs[0]]
    sizes = op.params["slice_sizes"]
    gone = set(dn.get("collapsed_slice_dims", ())) | set(dn.get("operand_batching_dims", ()))
    offset = list(dn.get("offset_dims", ()))
    whole = [d for d in range(len(operand)) if d not in gone]
    keep = tuple((d, od) for d, od in zip(whole, offset, strict=False)
                 if sizes[d] == operand[d])
    batch_out = [d for d in range(len(out)) if d not in offset]
    nidx = len(shapes[op.inputs[1]]) if op.inputs[1] is not None else 0
    # jax puts the index vector last in the indices.
    batch = tuple(zip(range(max(nidx - 1, 0)), batch_out, strict=False))
    return keep, batch


def _scatter(w: _Walk, step: _Step) -> None:
    # The operand keeps its split off the dims scattered into; indices and updates are
    # gathered whole, as every device may write anywhere in its kept shard.
    w.settle_all(step.arrays)
    operand = step.ins[0]
    src = w.get(operand)
    want = tuple(() if d in step.extra else axes for d, axes in enumerate(src))
    w.reshard(operand, want, "scatter: operand dims it writes into are gathered")
    for i in step.arrays[1:]:
        w.reshard(i, w.p.rep[i], "scatter: indices and updates gathered")
    _set(w, step, want)


def _prep_scatter(op: Op, shapes):
    dn = op.params["dimension_numbers"]
    return frozenset(dn.get("inserted_window_dims", ())) | frozenset(
        dn.get("scatter_dims_to_operand_dims", ())) | frozenset(
        dn.get("operand_batching_dims", ()))


# ---------------------------------------------------------------------------------------------
# FLOPs per element of an elementwise op, as XLA's cost analysis counts them: one for
# arithmetic and comparisons, none for transcendentals (counted apart, as `transcendentals`)
# and for ops that only move data.

_TRANSCENDENTAL = frozenset({"exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin",
                             "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh",
                             "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt", "pow", "erf",
                             "erfc", "erf_inv", "lgamma", "digamma"})
_NO_FLOPS = frozenset({"copy", "copy_p", "stop_gradient", "device_put", "optimization_barrier",
                       "pvary", "reduce_precision", "bitcast_convert_type", "real", "imag",
                       "iota", "constant"})


def _flops_per_element(op: Op) -> float:
    if op.primitive in _TRANSCENDENTAL or op.primitive in _NO_FLOPS:
        return 0.0
    if op.primitive == "integer_pow":
        y = abs(int(op.params.get("y", 2)))
        # XLA multiplies by repeated squaring: one multiply per bit past the first, and one
        # per further set bit.
        return float(max(y.bit_length() - 1 + bin(y).count("1") - 1, 1))
    if op.primitive in ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"):
        return 1.0
    return 1.0 if _RULES.get(op.primitive, (_elementwise,))[0] is _elementwise else 0.0


def _param_tuple(key: str):
    def prep(op: Op, shapes):
        return tuple(op.params[key])
    return prep


_RULES: dict[str, tuple[Callable, Callable | None]] = {
    "dot_general": (_dot, _prep_dot),
    "broadcast_in_dim": (_broadcast, _prep_broadcast),
    "reshape": (_reshape, _prep_reshape),
    "transpose": (_pick_dims, _param_tuple("permutation")),
    "squeeze": (_pick_dims, _prep_squeeze),
    "sharding_constraint": (_constraint, None),
    "scan": (_loop, _prep_loop),
    "while": (_loop, _prep_loop),
    "cond": (_call, None),
    "shard_map": (_shard_map, _prep_shard_map),
    "gather": (_gather, _prep_gather),
    **{n: (_scatter, _prep_scatter) for n in ("scatter", "scatter-add", "scatter_add",
                                              "scatter_mul", "scatter_min", "scatter_max")},
    **{n: (_reduce, _prep_reduce) for n in ("reduce_sum", "reduce_max", "reduce_min",
                                            "reduce_prod", "reduce_and", "reduce_or",
                                            "reduce_xor", "argmax", "argmin")},
    **{n: (_whole_dims, _prep_whole_dims) for n in (
        "slice", "dynamic_slice", "dynamic_update_slice", "pad", "concatenate", "rev", "split",
        "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "sort", "top_k",
        "approx_top_k", "fft", *_LINALG)},
    **{n: (_replicated, None) for n in ("iota", "constant", "axis_index", "random_seed",
                                        "random_bits", "random_wrap", "random_unwrap",
                                        "rng_uniform", "rng_bit_generator", "empty")},
    **{n: (_identity, None) for n in ("device_put", "optimization_barrier", "copy", "copy_p",
                                      "pvary", "stop_gradient")},
    **{n: (_named_collective, _prep_named) for n in _NAMED},
}


# Ops XLA fuses into loop fusions with their neighbours (elementwise, broadcasts, layout
# changes): their traffic is counted at fusion boundaries only (_fusions).
_FUSIBLE = frozenset({_elementwise, _broadcast, _reshape, _pick_dims, _identity,
                      _reduce})
