"""The rules of the propagation (propagate.py): one per primitive, each carrying the splits of
an op's operands to its outputs the way GSPMD/Shardy would, and pricing what it needs moved as
the collective they would insert (an all-gather where a split is dropped, an all-to-all where
one moves, partial sums where a contracted or reduced dimension is split on both sides). Also
the FLOPs per element each elementwise op counts, as XLA's cost analysis counts them.

`PRIMITIVE_RULES` maps a jaxpr primitive to (rule, prep): `prep` computes an op's static facts
once per program, and `rule(walk, step)` runs for every layout. An op with no entry is
classified by its shapes (`classify`): elementwise where its operands match its output (or
broadcast to it), else the safe fallback (its operands gathered, its outputs replicated, a note
saying so).
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod

from explorer._src.compile.jaxpr_graph import JaxprOp
from explorer._src.estimate.walk import A2A, AG, AR, CP, RS, Body, Dims, Walk, WalkStep, broadcasts

# ---------------------------------------------------------------------------------------------
# Rules. Each takes the walk and the step, reads its operands' splits, prices what it needs
# moved, and sets its outputs' splits (and their partial sums).

def _set(w: Walk, step: WalkStep, dims: Dims) -> None:
    for o in step.outs:
        w.dims[o] = dims if len(w.p.shape[o]) == len(dims) else w.p.rep[o]


def replicated(w: Walk, step: WalkStep) -> None:
    # iota, constants, random seeds: every device makes the whole value, so none moves.
    for o in step.outs:
        w.dims[o] = w.p.rep[o]


def _identity(w: Walk, step: WalkStep) -> None:
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


def _carry_partial(w: Walk, step: WalkStep) -> tuple | None:
    """The partial sum an elementwise op passes on, else None after reducing its operands'."""
    pending = [w.partial[i] for i in step.arrays if i in w.partial]
    if not pending:
        return None
    if step.name in _SCALING and len(pending) == 1 and step.ins[0] in w.partial \
            and all(len(w.p.shape[i]) == 0 for i in step.arrays[1:]):
        return pending[0]       # a partial sum scaled by a scalar
    w.settle_all(step.arrays)
    return None


def _elementwise(w: Walk, step: WalkStep) -> None:
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


def _fallback(w: Walk, step: WalkStep) -> None:
    # No rule: every split operand is gathered and the outputs taken as replicated, the safe
    # (costly) reading; its FLOPs are not counted.
    w.note(f"no sharding rule for primitive {step.name!r}: its operands are gathered and its "
           "outputs taken as replicated; its FLOPs are not counted")
    w.settle_all(step.arrays)
    for i in step.arrays:
        w.reshard(i, w.p.rep[i], f"{step.name}: no sharding rule, operands gathered")
    replicated(w, step)


def classify(op: JaxprOp, shapes) -> tuple[Callable, Callable | None]:
    """A primitive with no rule of its own: elementwise where every output has the shape its
    array operands have (scalars aside), else the fallback."""
    arrays = [shapes[i] for i in op.inputs if i is not None]
    outs = [shapes[o] for o in op.outputs]
    if outs and all(s == outs[0] for s in outs) \
            and all(len(s) == 0 or broadcasts(s, outs[0]) for s in arrays):
        return _elementwise, None
    return _fallback, None


# -- layout ops -------------------------------------------------------------------------------

def _prep_broadcast(op: JaxprOp, shapes):
    src, out = shapes[op.inputs[0]], shapes[op.outputs[0]]
    # Operand dim i lands on dim broadcast_dimensions[i]; a size-1 dim stretched holds no split.
    return tuple((i, d) for i, d in enumerate(op.params["broadcast_dimensions"])
                 if src[i] == out[d])


def _broadcast(w: Walk, step: WalkStep) -> None:
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


def _prep_reshape(op: JaxprOp, shapes):
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


def _reshape(w: Walk, step: WalkStep) -> None:
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


def _pick_dims(w: Walk, step: WalkStep) -> None:
    """The output's dims are some of the operand's, in `step.extra`'s order (a transpose's
    permutation, a squeeze's kept dims): each keeps its split, and pending sums stay pending."""
    v, o = step.ins[0], step.outs[0]
    src = w.get(v)
    w.dims[o] = tuple(src[p] for p in step.extra)
    if v in w.partial:
        w.partial[o] = w.partial[v]


def _prep_squeeze(op: JaxprOp, shapes):
    drop = set(op.params.get("dimensions", ()))
    return tuple(d for d in range(len(shapes[op.inputs[0]])) if d not in drop)


def _prep_whole_dims(op: JaxprOp, shapes):
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


def _whole_dims(w: Walk, step: WalkStep) -> None:
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
        replicated(w, step)
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

def _prep_reduce(op: JaxprOp, shapes):
    axes = frozenset(op.params.get("axes", ()))
    return axes, tuple(d for d in range(len(shapes[op.inputs[0]])) if d not in axes)


def reduce_rule(w: Walk, step: WalkStep) -> None:
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


def _prep_dot(op: JaxprOp, shapes):
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


def _dot(w: Walk, step: WalkStep) -> None:
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


def _dot_choice(w: Walk, step: WalkStep, L: Dims, R: Dims) -> dict[str, tuple | None]:
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


def _keep_cost(w: Walk, role, other, v: int, dims: Dims, batch, contract, vbytes: int,
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

def _constraint(w: Walk, step: WalkStep) -> None:
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


def _prep_loop(op: JaxprOp, shapes):
    return op.params["num_consts"], op.params["num_carry"]


def _loop(w: Walk, step: WalkStep) -> None:
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


def _loop_carries(w: Walk, body: Body, ncar: int) -> list[Dims]:
    out = []
    for v in body.outputs[:ncar]:
        out.append(w.settle(v) if v in w.partial else w.get(v))
    return out


def _loop_outputs(w: Walk, step: WalkStep, carry: list[Dims], length: int) -> None:
    ncar = len(carry)
    for o, d in zip(step.outs[:ncar], carry, strict=True):
        w.dims[o] = d
    for o, v in zip(step.outs[ncar:], step.body.outputs[ncar:], strict=True):
        w.dims[o] = ((),) + w.get(v)
        if v in w.partial:
            # Each iteration's partial sum is reduced on its own, wherever it is next needed.
            axes, pieces, why, work = w.partial.pop(v)
            w.partial[o] = (axes, pieces * length, why, work)


def _call(w: Walk, step: WalkStep) -> None:
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


def _shard_map(w: Walk, step: WalkStep) -> None:
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


def _prep_shard_map(op: JaxprOp, shapes):
    p = op.params
    return p["in_specs"], p["out_specs"], tuple(p.get("manual_axes", ()))


# Collectives a shard_map body names: the kind, and which of its operands or results V is.
_NAMED = {"psum": AR, "pmax": AR, "pmin": AR, "psum_invariant": AR, "all_gather": AG,
          "all_gather_invariant": AG, "reduce_scatter": RS, "psum_scatter": RS,
          "all_to_all": A2A, "ppermute": CP}


def _named_collective(w: Walk, step: WalkStep) -> None:
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
    replicated(w, step)


def _prep_named(op: JaxprOp, shapes):
    p = op.params
    axes = p.get("axes", p.get("axis_name", ()))
    return (axes,) if isinstance(axes, str) else tuple(a for a in axes if isinstance(a, str))


def _gather(w: Walk, step: WalkStep) -> None:
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


def _prep_gather(op: JaxprOp, shapes):
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


def _scatter(w: Walk, step: WalkStep) -> None:
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


def _prep_scatter(op: JaxprOp, shapes):
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


def flops_per_element(op: JaxprOp) -> float:
    if op.primitive in _TRANSCENDENTAL or op.primitive in _NO_FLOPS:
        return 0.0
    if op.primitive == "integer_pow":
        y = abs(int(op.params.get("y", 2)))
        # XLA multiplies by repeated squaring: one multiply per bit past the first, and one
        # per further set bit.
        return float(max(y.bit_length() - 1 + bin(y).count("1") - 1, 1))
    if op.primitive in ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"):
        return 1.0
    return 1.0 if PRIMITIVE_RULES.get(op.primitive, (_elementwise,))[0] is _elementwise else 0.0


def _param_tuple(key: str):
    def prep(op: JaxprOp, shapes):
        return tuple(op.params[key])
    return prep


PRIMITIVE_RULES: dict[str, tuple[Callable, Callable | None]] = {
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
    **{n: (reduce_rule, _prep_reduce) for n in ("reduce_sum", "reduce_max", "reduce_min",
                                            "reduce_prod", "reduce_and", "reduce_or",
                                            "reduce_xor", "argmax", "argmin")},
    **{n: (_whole_dims, _prep_whole_dims) for n in (
        "slice", "dynamic_slice", "dynamic_update_slice", "pad", "concatenate", "rev", "split",
        "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "sort", "top_k",
        "approx_top_k", "fft", *_LINALG)},
    **{n: (replicated, None) for n in ("iota", "constant", "axis_index", "random_seed",
                                        "random_bits", "random_wrap", "random_unwrap",
                                        "rng_uniform", "rng_bit_generator", "empty")},
    **{n: (_identity, None) for n in ("device_put", "optimization_barrier", "copy", "copy_p",
                                      "pvary", "stop_gradient")},
    **{n: (_named_collective, _prep_named) for n in _NAMED},
}


# Ops XLA fuses into loop fusions with their neighbours (elementwise, broadcasts, layout
# changes): their traffic is counted at fusion boundaries only (_fusions).
FUSIBLE = frozenset({_elementwise, _broadcast, _reshape, _pick_dims, _identity,
                      reduce_rule})
