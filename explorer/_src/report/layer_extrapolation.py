"""A stack of identical layers' Report carried on linearly from two compiles of fewer layers.

Two Reports of one program at layer counts a < b give every number a line through the layer
count, total(L) = base + L * per_layer, with per_layer = (r(b) - r(a)) / (b - a) and base =
r(a) - a * per_layer: each collective's runs and bytes, the memory, the cost and the predicted
times. Everything else (the collectives' list, the placement, the why, the HLO texts) is the
larger compile's. Counts (a collective's runs, its bytes, a shape) must fall on their line
exactly, else the two compiles differ by more than repeated layers and nothing is extrapolated
(`InputError`). The one exception is how many collectives XLA's combiner joins an unrolled
stack's ops into, which steps with the layers: such a group is carried by its total bytes
(a Report note names it). Pure functions over Reports: nothing here compiles.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from fractions import Fraction
from typing import NamedTuple

from explorer._src.cost.collectives import CollectiveBound, CollectiveTime
from explorer._src.cost.estimate import Estimate
from explorer._src.cost.memory_fit import memory_fit
from explorer._src.errors import InputError
from explorer._src.report.report import (
    Collective,
    Cost,
    Extrapolation,
    Memory,
    Report,
    TensorInfo,
    TensorRole,
    Timing,
)

__all__ = ["extrapolate_layers"]


class _Line:
    """The line through (a, r(a)) and (b, r(b)), read at L."""

    def __init__(self, a: int, b: int, layers: int):
        if not 0 < a < b:
            raise InputError(f"extrapolation needs two layer counts 0 < a < b; got {a} and {b}")
        self.a, self.b, self.layers = a, b, layers

    def value(self, ra: float | None, rb: float | None) -> float | None:
        if ra is None or rb is None:
            return None
        per_layer = (rb - ra) / (self.b - self.a)
        return ra + (self.layers - self.a) * per_layer

    def size(self, ra: int, rb: int) -> int:
        """A byte count the compiler rounds (padding, buffer reuse): the nearest whole number,
        never below zero."""
        return max(0, round(self.value(ra, rb)))

    def count(self, ra: int, rb: int, what: str) -> int:
        """A count that must be linear in the layers exactly: runs, bytes, a dimension."""
        per_layer = Fraction(rb - ra, self.b - self.a)
        total = ra + (self.layers - self.a) * per_layer
        if total.denominator != 1 or total < 0:
            raise InputError(
                f"cannot extrapolate: {what} is {ra} at {self.a} layers and {rb} at {self.b}, "
                f"which gives {float(total):g} at {self.layers}, not a whole count; the two "
                "compiles differ by more than repeated layers (compile the full model, or "
                "extrapolate from other layer counts)")
        return int(total)

    def counts(self, ra: Sequence[int], rb: Sequence[int], what: str) -> tuple[int, ...]:
        if len(ra) != len(rb):
            raise InputError(f"cannot extrapolate: {what} has rank {len(ra)} at {self.a} "
                             f"layers and {len(rb)} at {self.b}")
        return tuple(self.count(x, y, what) for x, y in zip(ra, rb, strict=True))


def _key(c: Collective) -> tuple:
    """What names one collective of the program in both compiles: not its HLO name or
    computation, which the compiler numbers anew in each."""
    return (c.kind, c.axes, c.group_size, c.dtype, c.op_name, c.source, c.tier, c.parts,
            c.is_async, c.direction)


def _by_key(collectives: Sequence[Collective]) -> dict[tuple, list[int]]:
    out: dict[tuple, list[int]] = defaultdict(list)
    for i, c in enumerate(collectives):
        out[_key(c)].append(i)
    return out


def _describe(c: Collective) -> str:
    return f"the {c.kind} over {','.join(c.axes) or '-'} of {c.op_name or c.hlo_name}"


def _combined_key(c: Collective) -> tuple:
    """What names a collective XLA's combiner made of several (gradients' all-reduces of an
    unrolled stack's layers merged into one): its op_name lists the ops it joins, so it differs
    between two layer counts; its kind, axes and groups do not."""
    return (c.kind, c.axes, c.group_size, c.dtype, c.tier, c.is_async, c.direction)


class _Totals(NamedTuple):
    """A _combined_key whose collectives XLA's combiner grouped into a different number at
    each layer count: carried by their total bytes."""

    ia: list[int]          # its collectives in the compile at a
    ib: list[int]          # in the compile at b
    factor: Fraction       # the group's total bytes at L over its total at b
    note: str


class _Regroup(Exception):  # noqa: N818 (a signal, caught in _collectives, not an error)
    """A combined collective whose runs or bytes are off their line: its _combined_key is to
    be carried by its totals."""

    def __init__(self, key: tuple, error: InputError):
        super().__init__(str(error))
        self.key, self.error = key, error


def _combined(r: Report, in_other: dict[tuple, list[int]], key: tuple) -> list[int]:
    """The collectives of `r` under the _combined_key `key` that the combiner made (several
    parts) or that the other compile has none like."""
    return [i for i, c in enumerate(r.collectives) if _combined_key(c) == key
            and (c.parts > 1 or _key(c) not in in_other)]


def _pair_combined(ra: Report, rb: Report, in_a: dict[tuple, list[int]],
                   in_b: dict[tuple, list[int]], line: _Line, regroup: set[tuple]
                   ) -> tuple[dict[int, int], dict[int, _Totals]]:
    """The collectives found in one compile only, grouped across the two by their
    _combined_key: {index at b: index at a} for a key with as many at a as at b (the combiner
    joined the layers' ops into the same number of collectives), paired in order; {index at b:
    its group} for a key with a different number at each (the combiner joins ops up to a
    byte threshold, so how many it makes steps with the layers, while their total bytes grow
    by each layer's share), and for each key in `regroup`, whose combined collectives were
    found in both compiles under one name but grouped otherwise. A key found in one compile
    only means the two differ by more than repeated layers."""
    totals: dict[int, _Totals] = {}
    grouped_a: set[int] = set()
    for key in regroup:
        ia, ib = _combined(ra, in_b, key), _combined(rb, in_a, key)
        totals.update(dict.fromkeys(ib, _totals(ra, rb, ia, ib, line)))
        grouped_a.update(ia)
    only_a: dict[tuple, list[int]] = defaultdict(list)
    only_b: dict[tuple, list[int]] = defaultdict(list)
    for key, idx in in_a.items():
        if key not in in_b:
            for i in idx:
                if i not in grouped_a:
                    only_a[_combined_key(ra.collectives[i])].append(i)
    for key, idx in in_b.items():
        if key not in in_a:
            for i in idx:
                if i not in totals:
                    only_b[_combined_key(rb.collectives[i])].append(i)
    pairs: dict[int, int] = {}
    for key in only_a.keys() | only_b.keys():
        ia, ib = only_a.get(key, []), only_b.get(key, [])
        if len(ia) == len(ib):
            pairs.update(zip(ib, ia, strict=True))
        elif ia and ib:
            group = _totals(ra, rb, ia, ib, line)
            totals.update(dict.fromkeys(ib, group))
        else:
            c = ra.collectives[ia[0]] if ia else rb.collectives[ib[0]]
            raise InputError(f"cannot extrapolate: {_describe(c)} is one of {len(ia)} such "
                             f"collectives at {line.a} layers and {len(ib)} at {line.b}")
    return pairs, totals


def _totals(ra: Report, rb: Report, ia: list[int], ib: list[int], line: _Line) -> _Totals:
    """The group of ia at a and ib at b carried by their total bytes, which must fall on
    their line as exactly as one collective's bytes do (_Line.count): the combiner joins whole
    buffers and pads none, so the bytes each layer adds are the same whatever the grouping."""
    if not ia or not ib:
        c = ra.collectives[ia[0]] if ia else rb.collectives[ib[0]]
        raise InputError(f"cannot extrapolate: {_describe(c)} is one of {len(ia)} such "
                         f"collectives at {line.a} layers and {len(ib)} at {line.b}")
    ca, cb = [ra.collectives[i] for i in ia], [rb.collectives[i] for i in ib]
    first = cb[0]
    what = (f"the {first.kind}s over {','.join(first.axes) or '-'} that XLA's combiner joined "
            f"({len(ia)} at {line.a} layers, {len(ib)} at {line.b})")
    total_a = sum(c.bytes * c.runs for c in ca)
    total_b = sum(c.bytes * c.runs for c in cb)
    total = line.count(total_a, total_b, f"the total bytes of {what}")
    if total_b == 0:
        raise InputError(f"cannot extrapolate: {what} move no bytes at {line.b} layers")
    note = (f"{what} are carried by their total bytes, {total_a:,} at {line.a} and "
            f"{total_b:,} at {line.b}, {total:,} at {line.layers}: shown as the compile at "
            f"{line.b}'s {len(ib)}, each scaled by {total / total_b:.3g}; how many the combiner "
            f"makes at {line.layers} layers, and so their latency, is not known")
    return _Totals(ia, ib, Fraction(total, total_b), note)


def _scaled(values: Sequence[int], runs: Sequence[int], total: int) -> list[int]:
    """`values` scaled so that their sum, each times its runs, is `total` (whole numbers: each
    rounded down, what that leaves given to the largest run once, where there is one)."""
    weight = sum(v * r for v, r in zip(values, runs, strict=True))
    out = [v * total // weight if weight else 0 for v in values]
    left = total - sum(v * r for v, r in zip(out, runs, strict=True))
    once = [i for i, r in enumerate(runs) if r == 1] or list(range(len(values)))
    if once and left:
        i = max(once, key=lambda j: values[j])
        out[i] += left // runs[i]
    return out


def _scale_group(rb: Report, group: _Totals) -> dict[int, Collective]:
    """The compile at b's collectives of `group`, their bytes (and each part's program bytes)
    scaled so that the group's total is its total at L."""
    cb = [rb.collectives[i] for i in group.ib]
    runs = [c.runs for c in cb]
    total_b = sum(c.bytes * c.runs for c in cb)
    new = _scaled([c.bytes for c in cb], runs, int(group.factor * total_b))
    out = {}
    for i, c, nbytes in zip(group.ib, cb, new, strict=True):
        parts = c.program_part_bytes
        if parts and c.bytes:
            # Each part in its program dtype, by the collective's own factor.
            parts = tuple(_scaled(parts, [1] * len(parts),
                                  round(Fraction(sum(parts) * nbytes, c.bytes))))
        out[i] = replace(c, bytes=nbytes, program_part_bytes=parts)
    return out


class _Carried(NamedTuple):
    """One extrapolated collective with the indices of its counterpart in each small compile
    (ia None where a repeated group was merged into one line, an unrolled stack's copies, or
    where it is one of a group carried by its totals)."""

    collective: Collective
    ia: int | None
    ib: int
    totals: _Totals | None = None


def _collectives(ra: Report, rb: Report, line: _Line) -> list[_Carried]:
    """The extrapolated collectives in the larger compile's order. A combined collective whose
    runs or bytes are off their line (libtpu named the combined gradient all-reduces of an
    unrolled stack by nothing, so they matched across the two compiles while their parts were
    grouped otherwise) has its _combined_key carried by its totals instead."""
    regroup: set[tuple] = set()
    while True:
        try:
            return _collectives_of(ra, rb, line, regroup)
        except _Regroup as again:
            if again.key in regroup:
                raise again.error from None
            regroup.add(again.key)


def _collectives_of(ra: Report, rb: Report, line: _Line, regroup: set[tuple]
                    ) -> list[_Carried]:
    in_a, in_b = _by_key(ra.collectives), _by_key(rb.collectives)
    combined, totals = _pair_combined(ra, rb, in_a, in_b, line, regroup)
    scaled: dict[int, Collective] = {}
    for group in {id(g): g for g in totals.values()}.values():
        scaled.update(_scale_group(rb, group))
    out: list[_Carried] = []
    done: set[tuple] = set()
    for ib, cb in enumerate(rb.collectives):
        if ib in totals:
            # Shown as the compile at b's collectives of the group, not as the number the
            # combiner would make at L: that number is not the total over a byte threshold.
            # Measured (libtpu, docs/cost-model.md, "Extrapolated layers"): the gradient
            # all-reduces over data of an unrolled d_model 512 stack were joined into pieces
            # of at most 4,980,736 bytes, 4 of them for 12.6 MB at 3 layers and 5 for 16.8 MB
            # at 4, where that threshold alone would make 3 and 4. A count at L would be a
            # guess.
            out.append(_Carried(scaled[ib], None, ib, totals[ib]))
            continue
        if ib in combined:
            # One of the combiner's: the ops it joins differ with the layer count. Its runs and
            # bytes are carried on; its parts (their shapes and bytes) are the compile at b's.
            ia, what = combined[ib], _describe(cb)
            ca = ra.collectives[ia]
            with _regrouped(cb):
                out.append(_Carried(
                    replace(cb, runs=line.count(ca.runs, cb.runs, f"the runs of {what}"),
                            bytes=line.count(ca.bytes, cb.bytes, f"the bytes of {what}")),
                    ia, ib))
            continue
        key = _key(cb)
        if key in done:
            continue
        ia_list, ib_list = in_a.get(key, []), in_b[key]
        what = _describe(cb)
        if len(ia_list) == len(ib_list):
            # The same collectives in both (a scanned stack: the loop's trip count grows):
            # each keeps its line, its runs and sizes carried on.
            for ia, jb in zip(ia_list, ib_list, strict=True):
                with _regrouped(cb):
                    out.append(_Carried(_carried(ra.collectives[ia], rb.collectives[jb], line,
                                                 what), ia, jb))
            done.add(key)
            continue
        # An unrolled stack: one copy per layer. The copies are one line whose runs count
        # them all; they must be alike, or which copy grows would be a guess.
        copies = [ra.collectives[i] for i in ia_list] + [rb.collectives[i] for i in ib_list]
        with _regrouped(cb):
            if len({(c.shape, c.bytes) for c in copies}) != 1:
                raise InputError(f"cannot extrapolate: {what} has {len(ia_list)} copies at "
                                 f"{line.a} layers and {len(ib_list)} at {line.b}, not all "
                                 "alike")
            runs = line.count(sum(ra.collectives[i].runs for i in ia_list),
                              sum(rb.collectives[i].runs for i in ib_list),
                              f"the runs of {what}")
        out.append(_Carried(replace(cb, runs=runs), None, ib))
        done.add(key)
    return out


@contextmanager
def _regrouped(c: Collective) -> Iterator[None]:
    """An InputError carrying a collective the combiner made (several parts) asks for its
    _combined_key to be carried by its totals."""
    try:
        yield
    except InputError as error:
        if c.parts > 1:
            raise _Regroup(_combined_key(c), error) from error
        raise


def _carried(ca: Collective, cb: Collective, line: _Line, what: str) -> Collective:
    return replace(
        cb, runs=line.count(ca.runs, cb.runs, f"the runs of {what}"),
        bytes=line.count(ca.bytes, cb.bytes, f"the bytes of {what}"),
        shape=line.counts(ca.shape, cb.shape, f"the shape of {what}"),
        program_part_bytes=line.counts(ca.program_part_bytes, cb.program_part_bytes,
                                       f"the part bytes of {what}"),
        part_shapes=tuple(line.counts(x, y, f"a part's shape of {what}") for x, y in zip(
            ca.part_shapes, cb.part_shapes, strict=True)) if len(ca.part_shapes) == len(
            cb.part_shapes) else cb.part_shapes)


def _memory(ma: Memory | None, mb: Memory | None, line: _Line) -> Memory | None:
    if ma is None or mb is None:
        return None
    kinds = None
    if ma.kinds is not None and mb.kinds is not None:
        kinds = {k: (None if v is None or ma.kinds.get(k) is None
                     else line.size(ma.kinds[k], v)) for k, v in mb.kinds.items()}
    fields = ("arguments", "outputs", "aliased", "temporaries", "generated_code",
              "host_arguments", "host_outputs", "host_temporaries")
    return replace(mb, kinds=kinds, **{f: line.size(getattr(ma, f), getattr(mb, f))
                                       for f in fields})


def _cost(ca: Cost, cb: Cost, collectives: Sequence[Collective], line: _Line) -> Cost:
    return replace(cb, flops=line.value(ca.flops, cb.flops),
                   bytes_accessed=line.value(ca.bytes_accessed, cb.bytes_accessed),
                   transcendentals=line.value(ca.transcendentals, cb.transcendentals),
                   # each collective's V times its runs, summed, as the compile's reader counts
                   # it: quadratic in the layers where a looped collective's V grows with them
                   collective_bytes=sum(c.bytes * c.runs for c in collectives),
                   xla_optimal_seconds=line.value(ca.xla_optimal_seconds,
                                                  cb.xla_optimal_seconds))


def _tensors(ra: Report, rb: Report, line: _Line) -> tuple[TensorInfo, ...]:
    """The larger compile's tensors, each input and output found in both compiles carried on
    (a scanned stack's weights are [layers, ...]); intermediates as the larger compile has
    them."""
    in_a = {t.name: t for t in ra.tensors if t.kind != TensorRole.INTERMEDIATE}
    out = []
    for t in rb.tensors:
        ta = in_a.get(t.name)
        if ta is None or ta.shape == t.shape:
            out.append(t)
            continue
        out.append(replace(
            t, shape=line.counts(ta.shape, t.shape, f"the shape of {t.name}"),
            shard_shape=line.counts(ta.shard_shape, t.shard_shape,
                                    f"the block of {t.name}"),
            bytes_per_device=line.count(ta.bytes_per_device, t.bytes_per_device,
                                        f"the bytes per device of {t.name}")))
    return tuple(out)


def _collective_time(ta: CollectiveTime | None, tb: CollectiveTime, carried: _Carried,
                     line: _Line) -> CollectiveTime:
    c = carried.collective
    if carried.totals is not None:
        return _scaled_time(tb, c)
    if ta is None:                   # a merged unrolled group: one copy's time, all its runs
        return replace(tb, runs=c.runs)
    return replace(tb, runs=c.runs, bytes=c.program_bytes,
                   seconds=line.value(ta.seconds, tb.seconds),
                   bandwidth_seconds=line.value(ta.bandwidth_seconds, tb.bandwidth_seconds),
                   latency_seconds=line.value(ta.latency_seconds, tb.latency_seconds))


def _scaled_time(tb: CollectiveTime, c: Collective) -> CollectiveTime:
    """The time at b of one collective of a group carried by its totals, for its scaled bytes:
    the bandwidth part grows with the bytes (every kind's formula is linear in V), the latency
    part, one per collective, stays (the group keeps b's number of collectives)."""
    if tb.seconds is None or tb.bandwidth_seconds is None or not tb.bytes:
        return replace(tb, runs=c.runs)     # not timed, or moves nothing: nothing to scale
    bandwidth = tb.bandwidth_seconds * c.program_bytes / tb.bytes
    latency = tb.latency_seconds or 0.0
    bound = tb.bound if tb.bound is None else (
        CollectiveBound.LATENCY if latency > bandwidth else CollectiveBound.BANDWIDTH)
    return replace(tb, runs=c.runs, bytes=c.program_bytes, seconds=max(bandwidth, latency),
                   bandwidth_seconds=bandwidth, bound=bound)


def _estimate(ea: Estimate | None, eb: Estimate | None, memory: Memory | None,
              carried: list[_Carried], line: _Line) -> Estimate | None:
    if ea is None or eb is None:
        return None
    # The step's figures (communication, step, trace) stay on their lines through the two
    # compiles, where a group carried by its totals is bandwidth-bound (its time then grows
    # with its bytes, linearly); each latency-bound collective more or fewer than the line
    # counts is its latency off (on a TPU slice, microseconds).
    times = tuple(_collective_time(None if c.ia is None else ea.collectives[c.ia],
                                   eb.collectives[c.ib], c, line) for c in carried)
    compute = replace(eb.compute, seconds=line.value(ea.compute.seconds, eb.compute.seconds),
                      flops_seconds=line.value(ea.compute.flops_seconds,
                                               eb.compute.flops_seconds),
                      memory_seconds=line.value(ea.compute.memory_seconds,
                                                eb.compute.memory_seconds))
    step_range = eb.step_range
    if ea.step_range is not None and step_range is not None:
        sa = ea.step_range
        step_range = replace(
            step_range, low_seconds=line.value(sa.low_seconds, step_range.low_seconds),
            seconds=line.value(sa.seconds, step_range.seconds),
            high_seconds=line.value(sa.high_seconds, step_range.high_seconds),
            unmeasured_seconds=line.value(sa.unmeasured_seconds, step_range.unmeasured_seconds))
    return replace(
        eb, collectives=times, compute=compute,
        comm_seconds=line.value(ea.comm_seconds, eb.comm_seconds),
        step_lower_seconds=line.value(ea.step_lower_seconds, eb.step_lower_seconds),
        step_upper_seconds=line.value(ea.step_upper_seconds, eb.step_upper_seconds),
        step_trace_seconds=line.value(ea.step_trace_seconds, eb.step_trace_seconds),
        step_range=step_range,
        # The small program passed the compiler's memory check; the large one is held
        # against the chip's capacity by its extrapolated bytes.
        memory=memory_fit(memory.total, eb.target) if memory is not None else None,
        notes=(*eb.notes, f"times extrapolated linearly from {line.a} and {line.b} layers"))


def extrapolate_layers(ra: Report, rb: Report, extrapolation: Extrapolation) -> Report:
    """The Report of `extrapolation.layers` layers, from the Reports `ra` and `rb` of the same
    program compiled (and priced, where they were) at `extrapolation.from_layers`.

    Raises:
        InputError: a count that does not fall on its line (a collective in one compile and
            not the other, runs or bytes that do not grow by whole steps): the two compiles
            differ by more than repeated layers."""
    a, b = extrapolation.from_layers
    line = _Line(a, b, extrapolation.layers)
    carried = _collectives(ra, rb, line)
    memory = _memory(ra.memory, rb.memory, line)
    collectives = tuple(c.collective for c in carried)
    ta, tb = ra.timing, rb.timing
    timing = Timing(lower_s=ta.lower_s + tb.lower_s, compile_s=ta.compile_s + tb.compile_s,
                    cached=ta.cached and tb.cached, worker_start_s=ta.worker_start_s
                    + tb.worker_start_s)
    note = (f"extrapolated to {extrapolation.param}={extrapolation.layers} from compiles at "
            f"{a} and {b}: the collectives' runs and bytes, the memory, the cost and the "
            "predicted times are carried on linearly; the collectives' list, the layouts, the "
            f"why and the HLO texts are the compile at {b}'s; its memory timeline, largest "
            "buffers and predicted timeline are left out")
    notes = (*rb.notes, note,
             *dict.fromkeys(c.totals.note for c in carried if c.totals is not None))
    if ra.memory is not None and rb.memory is not None and \
            ra.memory.temporaries == rb.memory.temporaries == 0:
        # Measured: libtpu gave an unrolled transformer_train (fsdp_tp on tpu-v5e-2x4) no
        # temporaries at 3 to 6 layers and 16.9 MB at 8 (docs/cost-model.md, "Extrapolated
        # layers"): a line through two zeros says nothing of the larger program's.
        notes += (f"the compiles at {a} and {b} layers held no temporaries; the compile at "
                  f"{extrapolation.layers} may (a TPU compiler gave an unrolled stack none at "
                  "3 to 6 layers and 16.9 MB at 8): the memory is a lower bound",)
    estimate = _estimate(ra.estimate, rb.estimate, memory, carried, line)
    if estimate is not None:
        # Each collective's predicted time as the estimate carries it (with_target's rule).
        collectives = tuple(replace(c, est_seconds=t.seconds) for c, t in zip(
            collectives, estimate.collectives, strict=True))
    return replace(
        rb, collectives=collectives, tensors=_tensors(ra, rb, line), memory=memory,
        cost=_cost(ra.cost, rb.cost, collectives, line), timing=timing,
        estimate=estimate, trace=None,
        top_buffers=(), memory_timeline=None, notes=notes, extrapolated=extrapolation)
