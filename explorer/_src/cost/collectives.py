"""Collective time formulas on the target's links: one per CollectiveKind, on a torus, behind a
switch and across slices or nodes, and the ring directions a collective holds on a torus.

Pure functions over the hardware catalog (explorer/_src/cost/catalog/) and a mapping of mesh axes
onto its links (explorer/_src/cost/mapping.py); no jax. Every formula names its source
here and in docs/cost-model.md. V is always bytes per device in the program's dtype, as in
Report's `Collective.program_bytes`:

- all-gather: the gathered result; reduce-scatter: the full operand; all-reduce: the buffer
  (the scaling book's V, "the number of bytes in the array");
- all-to-all: each device's buffer (operand = result); ragged-all-to-all: its input buffer,
  at most what it sends (the chunk sizes are known only at run time), priced as an all-to-all;
- collective-permute: what each device sends.

Sources: SCALING_BOOK = https://jax-ml.github.io/scaling-book/ (Austin et al.), chapters
"sharding" (TPU collectives) and "gpus" (NVLink/InfiniBand collectives);
NCCL_TESTS = https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from math import prod

from explorer._src.cost.catalog.names import get_target
from explorer._src.cost.catalog.types import Target, TargetFamily
from explorer._src.cost.mapping import AxisMapping, Segment, Tier
from explorer._src.errors import InputError, MappingError, choices
from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.hlo.groups import RingDirection


class CollectiveBound(StrEnum):
    """Which floor a collective's time is: its bytes over the links, or its hops' latency."""

    BANDWIDTH = "bandwidth"
    LATENCY = "latency"



@dataclass(frozen=True)
class CollectiveTime:
    """The predicted time of one collective on the target.

    Attributes:
        kind: the collective's opcode.
        axes: the mesh axes it runs over.
        bytes: V, per device, in the program's dtype.
        seconds: one run's time, max(bandwidth_seconds, latency_seconds); None when it could
            not be placed on the target's links (``note`` says why).
        bandwidth_seconds: V over the links' bandwidth by the kind's formula; over two tiers
            (in a node or slice, and across them), the slower tier's.
        latency_seconds: the latency floor: hops times per-hop latency, summed over the tiers.
        bound: which of the two `seconds` is (bandwidth or latency); None where it moves no
            data or could not be timed.
        links: the links it crosses, e.g. ``"ICI y:16 (wraparound)"``,
            ``"NVLink x8 + InfiniBand x4"``.
        note: why it moves nothing or could not be timed, or a floor left out.
        runs: times one step runs it (the trip counts of the loops around it).
        one_way: ``+`` or ``-`` for a one-way permute on a torus's closed ring, whose two
            directions run on separate wires; empty when it uses both or a switch.
    """

    kind: CollectiveKind
    axes: tuple[str, ...]
    bytes: int                          # V, per device, in the program's dtype
    seconds: float | None               # max(bandwidth, latency); None when it cannot be placed
    bandwidth_seconds: float | None
    latency_seconds: float | None
    bound: CollectiveBound | None
    links: str = ""                     # e.g. "ICI y:16 (wraparound)", "NVLink x8 + InfiniBand x4"
    note: str = ""
    runs: int = 1                       # times one step runs it (a collective in a loop: trips)
    # The ring direction its data takes ("+" or "-") when it is a one-way permute on torus links,
    # which carry each direction on separate wires: a "+" and a "-" can run together. NONE ("")
    # when it uses both directions or a switch (link_directions).
    one_way: RingDirection = RingDirection.NONE

    def to_dict(self) -> dict:
        return asdict(self)


def _link_text(segs: Sequence[Segment]) -> str:
    parts = []
    for s in segs:
        if s.axis.link.switched:
            parts.append(f"{s.axis.link.kind} x{s.factor}")
        else:
            wrap = " (wraparound)" if s.wraps else " (no wraparound)"
            stride = f" stride {s.stride}" if s.stride > 1 else ""
            parts.append(f"{s.axis.link.kind} {s.axis.name}:{s.factor}{stride}{wrap}")
    return " + ".join(parts)


@dataclass(frozen=True)
class _TorusRun:
    """One torus segment as the formulas see it."""

    n: int          # chips along it
    w: float        # one-way bandwidth per link left to this group, bytes/s (link / stride)
    ring: bool      # closed by a wraparound
    hops: int       # hops to cross it once: floor(n/2) on a ring, n-1 on a line, times stride
    stride: int


def _torus_runs(segs: Sequence[Segment]) -> list[_TorusRun]:
    """A mesh axis that steps over `stride` chips shares each link with `stride` other groups,
    so it gets w / stride of it."""
    return [_TorusRun(s.factor, s.axis.link.bandwidth / s.stride, s.wraps,
                      (s.factor // 2 if s.wraps else s.factor - 1) * s.stride, s.stride)
            for s in segs]


# Every formula returns (bandwidth seconds, hops or ring steps); the latency floor is the steps
# times the link's per-hop latency. Sources are in each docstring and in docs/cost-model.md.

def _torus_gather(v: float, runs: Sequence[_TorusRun]) -> tuple[float, float]:
    """All-gather or reduce-scatter over torus dimensions (TPU ICI).

    SCALING_BOOK, sharding, "How long does this take?": a bidirectional ring all-gather of V
    bytes over |X| chips takes |X|/2 hops of V/|X| each way, T = V / W_bidi; without wraparound
    data crosses |X|-1 hops one way ("3 * 8.4e6 / 4.5e10", Pop Quiz 2). Exactly: ring
    floor(n/2)·(V/n)/w, line (n-1)·(V/n)/w, w = one-way link bandwidth. Several torus axes add
    their bandwidth ("increases the available bandwidth by a factor of N_axes").
    """
    speed = sum(r.w * r.n / (r.n // 2) if r.ring else r.w * r.n / (r.n - 1) for r in runs)
    return v / speed, sum(r.hops for r in runs)


def _torus_all_reduce(v: float, runs: Sequence[_TorusRun]) -> tuple[float, float]:
    """SCALING_BOOK, sharding: "an AllReduce is twice as expensive as an AllGather"."""
    seconds, hops = _torus_gather(v, runs)
    return 2 * seconds, 2 * hops


def _torus_all_to_all(v: float, runs: Sequence[_TorusRun]) -> tuple[float, float]:
    """SCALING_BOOK, sharding: "AllGather / 4 for a bidirectional ring", i.e. n·V/(4·W_bidi) with
    V the per-device buffer. A line (no wraparound) halves the bandwidth: its middle link carries
    floor(n/2)·ceil(n/2)·V/n each way. Over several axes the worst one bounds it (the bisection
    of the torus cuts the longest dimension); our derivation, not the book's."""
    worst = max(r.n * v / (8 * r.w) if r.ring else (r.n // 2) * (r.n - r.n // 2) * v / (r.n * r.w)
                for r in runs)
    return worst, sum(r.hops for r in runs)


def _torus_permute(v: float, runs: Sequence[_TorusRun]) -> tuple[float, float]:
    """Each device sends V over one (possibly strided) link."""
    return v / min(r.w for r in runs), max(r.stride for r in runs)


def _switched_gather(v: float, n: int, w: float) -> tuple[float, float]:
    """All-gather, reduce-scatter or all-to-all over n devices behind a switch (NVLink,
    IPU-Link).

    SCALING_BOOK, gpus, "Intra-node collectives": T_AG/RS = bytes·(N-1)/(N·W_egress), the same
    as NCCL_TESTS's "t = S*(n-1) / (B*n)"; AllToAll "B·(N-1)/(W·N²)" with B = N·V, i.e.
    V·(N-1)/(N·W).
    """
    return v * (n - 1) / (n * w), n - 1


def _switched_all_reduce(v: float, n: int, w: float) -> tuple[float, float]:
    """Twice an all-gather (NCCL_TESTS: busBw = algBw · 2(n-1)/n)."""
    return 2 * v * (n - 1) / (n * w), 2 * (n - 1)


def _switched_permute(v: float, n: int, w: float) -> tuple[float, float]:
    return v / w, 1


def _across_gather(v: float, m: int, g: int, w: float) -> tuple[float, float]:
    """All-gather or reduce-scatter across m slices/nodes, g group members in each.

    SCALING_BOOK, gpus, "Cross-node collectives": T_AG/RS = bytes·(M-1)/(M·W_node egress); and
    "Reductions when array is sharded over a separate axis": the group's share of node egress
    is its members' NICs, so W_node = g·W_per_device (bytes/400e9 · D_node/max(D_node, Y)).
    """
    return v * (m - 1) / (m * g * w), m - 1


def _across_all_reduce(v: float, m: int, g: int, w: float) -> tuple[float, float]:
    seconds, steps = _across_gather(v, m, g, w)
    return 2 * seconds, 2 * steps


def _across_all_to_all(v: float, m: int, g: int, w: float) -> tuple[float, float]:
    """SCALING_BOOK, gpus: AllToAll "B·(M-1)/(M²·W_node egress)" = V·(M-1)/(M·W_per_device)."""
    return v * (m - 1) / (m * w), m - 1


def _across_permute(v: float, m: int, g: int, w: float) -> tuple[float, float]:
    return v / w, 1


def _whole_buffer(v: float, m: int) -> float:
    return v


def _local_share(v: float, m: int) -> float:
    """An all-to-all keeps 1/m of each buffer inside the slice/node; the rest crosses."""
    return v / m


@dataclass(frozen=True)
class KindFormulas:
    """How one collective kind is timed on each tier of links."""

    torus: Callable[[float, Sequence[_TorusRun]], tuple[float, float]]
    switched: Callable[[float, int, float], tuple[float, float]]     # (V, n, w)
    across: Callable[[float, int, int, float], tuple[float, float]]  # (V, m, g, w)
    inside_bytes: Callable[[float, int], float] = _whole_buffer      # (V, m) -> V in the node


_GATHER = KindFormulas(_torus_gather, _switched_gather, _across_gather)

# One entry per CollectiveKind: a kind added to the enum without a formula raises, never guessed.
FORMULAS: Mapping[CollectiveKind, KindFormulas] = {
    CollectiveKind.ALL_GATHER: _GATHER,
    CollectiveKind.REDUCE_SCATTER: _GATHER,
    CollectiveKind.ALL_REDUCE: KindFormulas(_torus_all_reduce, _switched_all_reduce,
                                            _across_all_reduce),
    CollectiveKind.ALL_TO_ALL: KindFormulas(_torus_all_to_all, _switched_gather,
                                            _across_all_to_all, _local_share),
    # Priced as the all-to-all of its whole input: the chunk sizes are known only at run time,
    # and a device sends at most its input, so this is an upper bound.
    CollectiveKind.RAGGED_ALL_TO_ALL: KindFormulas(_torus_all_to_all, _switched_gather,
                                                   _across_all_to_all, _local_share),
    CollectiveKind.COLLECTIVE_PERMUTE: KindFormulas(_torus_permute, _switched_permute,
                                                    _across_permute),
}


def formulas_for(kind: CollectiveKind | str) -> tuple[CollectiveKind, KindFormulas]:
    """The kind as the enum, and its formulas; an InputError for a kind with none."""
    try:
        member = CollectiveKind(kind)
        return member, FORMULAS[member]
    except (ValueError, KeyError):
        raise InputError(f"collective kind {str(kind)!r} has no time formula; kinds with one: "
                         f"{choices(FORMULAS)}") from None


def collective_time(kind: CollectiveKind | str, nbytes: float, axes: Sequence[str],
                    target: str | Target, mapping: AxisMapping,
                    group_size: int | None = None,
                    direction: RingDirection | str = RingDirection.NONE,
                    tier: Tier | str = Tier.ALL) -> CollectiveTime:
    """Predicted seconds for one collective of V = `nbytes` per device over mesh `axes`.
    `direction`: a permute's ring direction ("+", "-"; Collective.direction), kept as
    `one_way` where its links are a torus's. `tier`: the links of `axes` it uses (all of them,
    or, for a leg of a collective libtpu split at the slices' edges, those inside the slices
    or those between them; Collective.tier).

    A DCN leg (tier ACROSS) is one device's own transfer between slices: m slices, g = 1,
    each device at its share of the DCN (the catalog's bandwidth per chip), by the `across`
    formula of its kind; e.g. an all-reduce of V bytes takes 2·V·(m-1)/(m·W_dcn).

    Within a slice or node (ICI, NVLink) and across them (DCN, InfiniBand) are two tiers of a
    hierarchical collective: bandwidth time is the slower tier, T = max(T_node, T_scale-out)
    (SCALING_BOOK gpus), and the latency floor is the sum over tiers of hops x per-hop latency
    (SCALING_BOOK sharding: T = max(T_min·hops, V/W)).
    """
    target = get_target(target)
    if mapping.target != target.name:
        raise MappingError(f"the mapping was made for {mapping.target}, not {target.name}; "
                           "build it with default_mapping or check_mapping for this target",
                           target=target.name)
    kind, formulas = formulas_for(kind)
    axes = tuple(axes)
    v = float(nbytes)

    def result(seconds, bw, lat, bound, links="", note=""):
        return CollectiveTime(kind, axes, int(nbytes), seconds, bw, lat, bound, links, note)

    if v <= 0 or (group_size is not None and group_size <= 1):
        return result(0.0, 0.0, 0.0, None, note="moves no data between devices")
    if not axes:
        return result(None, None, None, None,
                      note="its device groups match no mesh axes, so its links are unknown")
    tier = Tier(tier)
    segs = [s for a in axes for s in mapping.segments(a, tier)]
    if target.family is TargetFamily.CPU:
        return result(None, None, None, None, note="the CPU host has no sourced link speeds")
    if not segs and tier is Tier.ACROSS:
        return result(None, None, None, None,
                      note=f"it crosses slices, but the mapping puts none of {', '.join(axes)} "
                           "on the links between them")
    if not segs:
        return result(0.0, 0.0, 0.0, None, note="its mesh axes have size 1")
    if any(s.axis.link.bandwidth is None for s in segs):
        return result(None, None, None, None, _link_text(segs),
                      note="a link it uses has no sourced bandwidth")
    inside = [s for s in segs if not s.axis.link.across]
    across = [s for s in segs if s.axis.link.across]
    g, m = prod(s.factor for s in inside), prod(s.factor for s in across)
    tiers = []   # (bandwidth seconds, hops, per-hop latency or None)
    if inside:
        v_in = formulas.inside_bytes(v, m)
        if all(s.axis.link.switched for s in inside):
            bw, hops = formulas.switched(v_in, g, inside[0].axis.link.bandwidth)
        else:
            bw, hops = formulas.torus(v_in, _torus_runs(inside))
        tiers.append((bw, hops, inside[0].axis.link.latency))
    if across:
        bw, hops = formulas.across(v, m, g, across[0].axis.link.bandwidth)
        tiers.append((bw, hops, across[0].axis.link.latency))
    bandwidth = max(t[0] for t in tiers)
    latency = sum(h * lat for _, h, lat in tiers if lat is not None)
    note = ""
    if any(lat is None for _, _, lat in tiers):
        note = "no sourced per-hop latency for " + " or ".join(
            sorted({s.axis.link.kind for s in segs if s.axis.link.latency is None})) + \
            ", so no latency floor there"
    seconds = max(bandwidth, latency)
    bound = CollectiveBound.LATENCY if latency > bandwidth else CollectiveBound.BANDWIDTH
    time = result(seconds, bandwidth, latency, bound, _link_text(segs), note)
    # A ring closed by a wraparound: without one, the last device's send to the first crosses
    # the line the other way.
    if direction and kind is CollectiveKind.COLLECTIVE_PERMUTE and not across \
            and all(not s.axis.link.switched and s.wraps for s in inside):
        time = replace(time, one_way=RingDirection(direction))
    return time


LINK_DIRECTIONS = (RingDirection.NEXT, RingDirection.PREVIOUS)


def link_directions(t: CollectiveTime) -> tuple[RingDirection, ...]:
    """The ring directions a collective occupies: its own for a one-way torus permute, else
    both (a ring collective sends both ways; a switched link is one shared port)."""
    return (t.one_way,) if t.one_way else LINK_DIRECTIONS


def overlapped_comm_seconds(times: Sequence[CollectiveTime]) -> float:
    """Communication time when collectives overlap as far as the links allow: one-way torus
    permutes of opposite directions side by side, everything else one at a time, i.e. the busier
    direction's total."""
    busy = dict.fromkeys(LINK_DIRECTIONS, 0.0)
    for t in times:
        if t.seconds is not None:
            for d in link_directions(t):
                busy[d] += t.runs * t.seconds
    return max(busy.values())

