"""The walk of the propagation (propagate.py): one layout carried through a prepared program.

`Walk` holds one call's state: each var's split per dimension, the partial sums not yet
reduced, the reshardings the rules (rules.py) ask for, priced as the collectives GSPMD/Shardy
would insert, each device's FLOPs and bytes, and the collectives merged as XLA's combiners
merge them. `WalkStep`, `Body` and `Prepared` are the program as the walk runs it, prepared once
per program (propagate.prepare).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from math import prod

from explorer._src.compile.jaxpr_graph import JaxprOp, Program
from explorer._src.cost.mapping import Tier
from explorer._src.errors import RankError, UnknownAxisError, choices
from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.hlo.groups import RingDirection
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import Entry, entry_axes, format_spec, normalize_spec

Dims = tuple[tuple[str, ...], ...]     # per dimension, the mesh axes splitting it


AG, AR, RS, A2A, CP = (CollectiveKind.ALL_GATHER, CollectiveKind.ALL_REDUCE,
                       CollectiveKind.REDUCE_SCATTER, CollectiveKind.ALL_TO_ALL,
                       CollectiveKind.COLLECTIVE_PERMUTE)


# XLA's combiners merge collectives of one kind over the same devices that do not depend on
# each other (the gradients' all-reduces, say) into one, up to a size: 30 MiB + 7 bytes for
# all-reduces, all-gathers and reduce-scatters (kDefault*CombineThreshold in
# xla/service/collective_utils.h; the GPU compiler's xla_gpu_*_combine_threshold_bytes).
COMBINE_THRESHOLD = 30 * 1024 * 1024 + 7


@dataclass(frozen=True)
class ImpliedCollective:
    """A collective the layout implies, in the cost model's terms (explorer._src.cost.estimate).

    Attributes:
        kind: the collective.
        axes: the mesh axes it runs over, in mesh order.
        program_bytes: V per device: all-gather the gathered result, reduce-scatter the full
            operand, all-reduce the buffer, all-to-all each device's buffer.
        group_size: the devices in one group (the product of the axes' sizes).
        runs: times one step runs it: loop trips, and identical collectives (same kind, axes,
            bytes and reason) counted together.
        why: what makes it, e.g. ``dot_general: partial sums over its contracting dims``.

    It has what the cost model reads of a compiled one
    (explorer._src.cost.estimate.PricedCollective); with no compile there is no instruction, no
    device groups, no ring direction and no slice tier, which the empty values say.
    """

    kind: CollectiveKind
    axes: tuple[str, ...]
    program_bytes: int
    group_size: int
    runs: int = 1
    why: str = ""
    hlo_name: str = ""
    groups: tuple[tuple[int, ...], ...] = ()
    direction: RingDirection = RingDirection.NONE
    tier: Tier = Tier.ALL


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


def broadcasts(shape: tuple[int, ...], out: tuple[int, ...]) -> bool:
    return len(shape) == len(out) and all(a in (b, 1) for a, b in zip(shape, out, strict=True))


# ---------------------------------------------------------------------------------------------
# The program as the walk runs it, prepared once per program (propagate.prepare).

class WalkStep:
    """One op as the walk runs it: its rule, ids, and what its rule precomputed."""

    __slots__ = ("rule", "name", "ins", "outs", "arrays", "same", "bcast", "k", "extra",
                 "body", "runs", "point", "own_spec", "note", "io")

    def __init__(self, op: JaxprOp, rule: Callable, shapes: Mapping[int, tuple[int, ...]]):
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
                           and broadcasts(shapes[i], out_shape))
        self.k = 0.0
        self.extra = None
        self.body: Body | None = None
        # A fusible op's memory traffic: (whether its result is written out of its fusion,
        # the operands it reads from memory); None for the others, which count their own.
        self.io: tuple[bool, tuple[int, ...]] | None = None
        self.runs, self.point, self.own_spec, self.note = op.runs, op.point, op.own_spec, op.note


class Body:
    """A program's steps, inputs and outputs, and every var id it defines (for a loop's
    second pass, which forgets what its first left)."""

    __slots__ = ("steps", "inputs", "outputs", "ids")

    def __init__(self, steps, inputs, outputs, ids):
        self.steps, self.inputs, self.outputs, self.ids = steps, inputs, outputs, ids




class Prepared:
    """A Program with its per-program facts computed once (propagate.prepare): every var's
    shape, bytes per element and replicated split, and each op's step (its rule and what the
    rule precomputed), built by `build` into `top`."""

    def __init__(self, program: Program, build: Callable[[Prepared, Program], Body]):
        self.program = program
        self.shape: dict[int, tuple[int, ...]] = {}
        self.item: dict[int, int] = {}
        self.rep: dict[int, Dims] = {}
        self.size: dict[int, int] = {}      # elements
        self.top = build(self, program)


# ---------------------------------------------------------------------------------------------
# The walk: one layout through the program.

class Walk:
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

    def run(self, body: Body, in_dims: Sequence[Dims]) -> None:
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

    def fused_io(self, step: WalkStep) -> None:
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

