"""Predicted step time on real hardware, from plain numbers: the roofline and collective formulas.

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
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from math import prod
from typing import Protocol

from explorer._src.cost.catalog.names import get_target
from explorer._src.cost.catalog.sources import CLOUD_BF16, JAX_LAX_PRECISION
from explorer._src.cost.catalog.types import (
    Chip,
    Target,
    TargetFamily,
    VectorUnit,
    achievable,
    format_rate,
)
from explorer._src.cost.coverage import kernel_efficiency
from explorer._src.cost.gemm_rates import GemmTable, gemm_table
from explorer._src.cost.mapping import AxisMapping, Segment, Tier, check_mapping, default_mapping
from explorer._src.cost.ranges import StepRange
from explorer._src.cost.tiling import reread_bytes
from explorer._src.errors import InputError, MappingError, choices
from explorer._src.hlo.arithmetic import Dot
from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.hlo.compiler_costs import UNCOSTABLE_SEEN_SLOWER
from explorer._src.hlo.groups import RingDirection, spanned_axes
from explorer._src.hlo.module import HLO_TO_NUMPY
from explorer._src.hlo.schedule import Step, Work
from explorer._src.spec.tensor import TensorRole, normalize_dtype
from explorer._src.units import format_bytes, format_seconds

# ---------------------------------------------------------------------------------------------
# What limits a time.

class CollectiveBound(StrEnum):
    """Which floor a collective's time is: its bytes over the links, or its hops' latency."""

    BANDWIDTH = "bandwidth"
    LATENCY = "latency"


class Bound(StrEnum):
    """What limits a step: the matmul rate, memory traffic, or (a step only) the collectives."""

    COMPUTE = "compute"
    MEMORY = "memory"
    COMMUNICATION = "communication"


# ---------------------------------------------------------------------------------------------
# Collectives.

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
    # when it uses both directions or a switch (explorer._src.cost.model.link_directions).
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


# ---------------------------------------------------------------------------------------------
# Compute and memory.

@dataclass(frozen=True)
class ComputeTime:
    """Roofline of the per-device program: max(FLOPs / peak, bytes / HBM bandwidth).

    SCALING_BOOK, tpus, Question 4: "max{T_math, T_comms}" with T_math = FLOPs / peak FLOP/s and
    T_comms = HBM bytes / HBM bandwidth ("Assuming as much overlap ... as possible").
    With the compiled schedule, each scheduled instruction run gets its own roofline and
    `seconds` is their sum (the notes say so).

    Attributes:
        seconds: the compute time; at memory speed alone where XLA gave no FLOP count or
            the chip has no peak for the dtype; None where the bytes cannot be timed either.
        flops_seconds: FLOPs over the peak.
        memory_seconds: bytes accessed over the memory bandwidth; None without either.
        bound: compute or memory, whichever is larger.
        peak_flops: the FLOP/s used (the measured achievable rate unless ``peak``).
        dtype: the program's matmul dtype.
        notes: how the time was made, and what was missing.
        peak_dtype: the dtype whose peak was used (a TPU runs float32 matmuls at its bf16
            rate); "" when none was.
        memory_bandwidth: bytes/s the memory roofline was drawn with.
        gemm_table: XLA's key of the measured GEMM rates that timed the bf16 dots, "" where
            none did.
        read_bandwidth: bytes/s an instruction that only reads moves at (Chip.read_measured);
            None where no such rate applies (every byte at `memory_bandwidth`).
        vector_unit: the chip's measured vector-unit rates that priced instructions doing no
            matmul (Chip.vector_unit); None where none did.
        float32_matmuls: how float32 matmuls at a raised precision were priced (TPU passes, or
            a GPU's float32 peak in place of TF32); None where no such rule applied.
    """

    seconds: float | None
    flops_seconds: float | None
    memory_seconds: float | None
    bound: Bound | None                 # COMPUTE or MEMORY
    peak_flops: float | None
    dtype: str                          # the program's matmul dtype
    notes: tuple[str, ...] = ()
    peak_dtype: str = ""                # the dtype whose peak was used; "" when none was
    memory_bandwidth: float | None = None   # bytes/s the memory roofline was drawn with
    # XLA's key of the measured GEMM rates that timed the bf16 dots (explorer._src.cost.gemm_rates),
    # "" where every FLOP was timed at `peak_flops`.
    gemm_table: str = ""
    read_bandwidth: float | None = None
    vector_unit: VectorUnit | None = None
    float32_matmuls: Float32Matmuls | None = None

    def to_dict(self) -> dict:
        return asdict(self)


# The peak_flops key of a GPU's TF32 tensor-core rate: what jax runs float32 matmuls at there
# by default.
TF32 = "tf32"


@dataclass(frozen=True)
class Float32Matmuls:
    """How a chip runs float32 matmuls at a raised precision (jax.lax.Precision): a TPU as 3
    (high) or 6 (highest) bfloat16 passes (`passes`, Step.passes per FLOP); a GPU, which runs
    them as TF32 by default and at high, on its float32 units at highest, `highest_slowdown`
    times slower (its TF32 peak over its float32 one; Step.highest_share of the FLOPs)."""

    passes: bool = False
    highest_slowdown: float = 1.0

    def factor(self, step: Step) -> float:
        """How many times its matmul FLOPs take as at the default precision."""
        if self.passes:
            return step.passes
        return 1.0 + step.highest_share * (self.highest_slowdown - 1.0)

    def notes(self, chip: Chip, runs: Sequence[tuple[Step, int]]) -> list[str]:
        """What the raised precisions of `runs` (each scheduled step and its runs) cost."""
        if self.passes:
            raised = [(r, s.passes) for s, r in runs if s.passes > 1]
            if not raised:
                return []
            passes = "/".join(f"{p:g}" for p in sorted({p for _, p in raised}))
            return [f"{sum(r for r, _ in raised)} matmul instruction run(s) at float32 "
                    f"precision high or highest: {chip.name} makes {passes} bfloat16 passes "
                    "for each of their FLOPs (jax.lax.Precision: 3 for high, 6 for highest)"]
        highest = sum(r for s, r in runs if s.highest_share > 0)
        if not highest:
            return []
        return [f"{highest} matmul instruction run(s) at float32 precision highest: "
                f"{chip.name} runs them on its float32 units, {self.highest_slowdown:.1f}x "
                "slower than TF32 (jax.lax.Precision: \"HIGHEST: ... On GPU: uses float32\")"]


def float32_matmuls(chip: Chip, peak_dtype: str) -> Float32Matmuls | None:
    """The rule for `chip`'s float32 matmuls at a raised precision, given the dtype whose peak
    prices the program (matmul_peak); None where none applies (no float32 program)."""
    if chip.float32_matmul_as is not None:
        return Float32Matmuls(passes=True)
    if peak_dtype == TF32 and chip.peak_flops.get("float32"):
        return Float32Matmuls(highest_slowdown=chip.peak_flops[TF32] / chip.peak_flops["float32"])
    return None


def matmul_peak(chip: Chip, dtype: str) -> tuple[float | None, str, str]:
    """(peak FLOP/s, the dtype it is quoted for, a note) for matmuls in `dtype` on `chip`.

    A float32 program on a chip with no float32 figure but a `float32_matmul_as` rule (TPUs)
    runs at that dtype's peak, and the note says so; otherwise a missing dtype has no peak.
    """
    dtype = normalize_dtype(dtype)
    if dtype == "float32" and TF32 in chip.peak_flops:
        peak = chip.peak_flops[TF32]
        return peak, TF32, (
            f"jax runs float32 matmuls on a {chip.name} as TF32 at its default precision ("
            f"\"On GPU: uses tensorfloat32 if available (e.g. on A100 and H100 GPUs)\", "
            f"{JAX_LAX_PRECISION}), so the TF32 peak {format_rate(peak, 'FLOP/s')} is used; one "
            f"at precision highest runs at the float32 peak "
            f"{format_rate(chip.peak_flops.get('float32', 0.0), 'FLOP/s')}")
    if dtype in chip.peak_flops:
        return chip.peak_flops[dtype], dtype, ""
    alias = chip.float32_matmul_as
    if dtype == "float32" and alias in chip.peak_flops:
        peak = chip.peak_flops[alias]
        return peak, alias, (
            f"{chip.name} has no float32 matmul peak; it runs float32 matmuls as {alias} passes "
            f"with float32 accumulation by default ({CLOUD_BF16}), so the {alias} peak "
            f"{format_rate(peak, 'FLOP/s')} is used")
    have = choices(chip.peak_flops) if chip.peak_flops else "none"
    return None, "", (f"no sourced {dtype} matrix peak for {chip.name} (sourced dtypes: {have}): "
                      "its FLOPs are not timed, and the compute is timed at memory speed "
                      "(bytes over the HBM bandwidth), a lower bound")


def compute_time(flops: float | None, bytes_accessed: float | None, dtype: str,
                 target: str | Target) -> ComputeTime:
    target = get_target(target)
    chip = target.chip
    dtype = normalize_dtype(dtype)
    notes = []
    peak, peak_dtype, peak_note = matmul_peak(chip, dtype)
    flops_s = memory_s = None
    if flops is None:
        notes.append("XLA gave no FLOP count, so the compute is its bytes at memory speed (a "
                     "lower bound), or unknown without those")
    else:
        if peak_note:
            notes.append(peak_note)
        if peak is not None:
            flops_s = flops / peak
    if bytes_accessed is None:
        notes.append("XLA gave no bytes-accessed count, so the HBM roofline is unknown")
    elif chip.memory_bandwidth is None:
        notes.append(f"no sourced memory bandwidth for {chip.name}, so no memory roofline")
    else:
        memory_s = bytes_accessed / chip.memory_bandwidth
    bandwidth = chip.memory_bandwidth
    if flops_s is None:
        # No FLOP count or no peak for the dtype: at memory speed where there is one, so that
        # a step is never priced as its communication alone.
        return ComputeTime(memory_s, None, memory_s, None if memory_s is None else Bound.MEMORY,
                           peak, dtype, tuple(notes), peak_dtype, bandwidth)
    bound = Bound.MEMORY if memory_s is not None and memory_s > flops_s else Bound.COMPUTE
    return ComputeTime(max(flops_s, memory_s or 0.0), flops_s, memory_s, bound, peak, dtype,
                       tuple(notes), peak_dtype, bandwidth)


def roofline_seconds(flops: float, nbytes: float, peak: float, bandwidth: float | None,
                     dots: Sequence[Dot] = (), table: GemmTable | None = None) -> float:
    """One instruction on the roofline: max(FLOPs / peak, bytes / HBM bandwidth); FLOPs alone
    where the chip has no sourced memory bandwidth. With the chip's measured GEMM `table` and
    the instruction's `dots`, its FLOPs take the rate measured for each dot's shape instead of
    `peak` (explorer._src.cost.gemm_rates)."""
    return max(math_seconds(flops, peak, dots, table), nbytes / bandwidth if bandwidth else 0.0)


def math_seconds(flops: float, peak: float, dots: Sequence[Dot] = (),
                 table: GemmTable | None = None) -> float:
    """The FLOP side of one instruction's roofline: at each dot's measured rate where `table`
    has one, else at `peak`."""
    if table is not None and dots:
        return table.seconds(flops, tuple(dots), peak)
    return flops / peak


# The read share of an instruction's bytes from which it moves faster than a copy, and the share
# at which it reaches the read rate. On a TPU v5e (rates.json) copies and transposes (half their
# bytes read) and adds (two thirds read) ran at 0.79 to 0.84 of 819 GB/s, reductions (all read)
# at 0.92: between two thirds and all, the rate is drawn on the line between the two.
READ_SHARE_AT_COPY_RATE = 2 / 3


def memory_seconds(nbytes: float, written: float, bandwidth: float | None,
                   read_bandwidth: float | None = None) -> float:
    """`nbytes` moved, `written` of them written and the rest read, at `bandwidth` (what copies
    reach); where the chip reads faster (`read_bandwidth`), an instruction that reads more
    than two thirds of its bytes moves them at a rate between the two, linear in its read share:
    a reduction that writes almost nothing at `read_bandwidth`. 0 without a bandwidth."""
    if not bandwidth or nbytes <= 0:
        return 0.0
    if not read_bandwidth:
        return nbytes / bandwidth
    share = 1.0 - min(max(written, 0.0), nbytes) / nbytes
    over = max(0.0, share - READ_SHARE_AT_COPY_RATE) / (1.0 - READ_SHARE_AT_COPY_RATE)
    return nbytes / (bandwidth + (read_bandwidth - bandwidth) * over)


def vector_seconds(ops: float, transcendentals: float, reduced: float,
                   unit: VectorUnit | None) -> float:
    """The vector unit's time for an instruction that does no matmul (Step.vector_ops,
    Step.transcendentals, Step.reduced): the larger of its elementwise operations over the
    unit's rate, each transcendental as `unit.transcendental_ops` operations, and its reduced
    elements over the unit's reduction rate (the two ran side by side on the chip: layernorm
    chains bound by their arithmetic, one-hot reductions by the reduction). 0 without a
    measured unit."""
    if unit is None:
        return 0.0
    weighted = ops + (unit.transcendental_ops - 1.0) * transcendentals
    return max(weighted / unit.ops_per_second, reduced / unit.reduced_per_second)


def step_math_seconds(step: Step, peak: float, table: GemmTable | None = None,
                      float32: Float32Matmuls | None = None) -> float:
    """The FLOP side of one scheduled instruction (math_seconds); with `float32`
    (Float32Matmuls), FLOPs of float32 matmuls at a raised precision take longer: as a TPU's
    bfloat16 passes (`step.passes` each), or at a GPU's float32 peak in place of TF32."""
    return math_seconds(step.flops, peak, step.dots, table) * (
        float32.factor(step) if float32 else 1.0)


def instruction_seconds(step: Step, peak: float, bandwidth: float | None,
                        table: GemmTable | None = None, read_bandwidth: float | None = None,
                        unit: VectorUnit | None = None,
                        float32: Float32Matmuls | None = None) -> float:
    """One scheduled instruction on the roofline of the matrix unit, the memory and the vector
    unit: max(FLOPs / peak (each dot at its measured rate where `table` has it), bytes at
    memory speed (memory_seconds: reads faster where the chip does; a TPU matmul's operand
    windows that libtpu's tiling fetches again, explorer._src.cost.tiling.reread_bytes, at
    `bandwidth`, the copy rate), vector_seconds); the FLOPs as step_math_seconds prices them.
    The chip runs the three side by side; the slowest bounds the instruction."""
    math = step_math_seconds(step, peak, table, float32)
    memory = memory_seconds(step.bytes, step.written, bandwidth, read_bandwidth)
    if bandwidth:
        memory += reread_bytes(step) / bandwidth
    vector = vector_seconds(step.vector_ops, step.transcendentals, step.reduced, unit)
    return max(math, memory, vector)


def scheduled_compute_time(work: Sequence[tuple[float, float, int]], dtype: str,
                           target: str | Target, dots: Sequence[Sequence[Dot]] = (),
                           table: GemmTable | None = None, steps: Sequence[Step] = (),
                           read_bandwidth: float | None = None,
                           vector_unit: VectorUnit | None = None,
                           efficiency: Callable[[Step], float] | None = None) -> ComputeTime:
    """Compute over a schedule: each instruction on its own roofline, summed.

    `work` holds (FLOPs, bytes, runs) per scheduled instruction. XLA runs the instructions of
    one device one after another, so a memory-bound fusion cannot hide behind a compute-bound
    dot: the roofline (SCALING_BOOK, tpus, Question 4) applies per instruction, and the sum is
    at least the whole-program max(FLOPs / peak, bytes / bandwidth). `bound` names the side
    whose instructions take most of the time. `dots`: each entry's dots (Work.dots); with the
    chip's measured GEMM `table`, their FLOPs take the rate measured for their shapes.
    `steps`: each entry's Step (Work.compute_steps); with them, an entry is priced by
    instruction_seconds, its reads at `read_bandwidth` and its vector work on `vector_unit`
    where those are given, and a TPU matmul's operand windows that libtpu's tiling reads again
    (explorer._src.cost.tiling) at `bandwidth`. `efficiency`: the measured fraction of its
    roofline a step runs at (a kernel's, explorer._src.cost.coverage.kernel_efficiency).
    """
    target = get_target(target)
    chip = target.chip
    dtype = normalize_dtype(dtype)
    peak, peak_dtype, peak_note = matmul_peak(chip, dtype)
    bandwidth = chip.memory_bandwidth
    notes = [peak_note] if peak_note else []
    if bandwidth is None:
        notes.append(f"no sourced memory bandwidth for {chip.name}, so no memory roofline")
    memory_s = sum(r * b for _, b, r in work) / bandwidth if bandwidth else None
    if peak is None:
        # No matrix peak for the dtype: each instruction at memory speed (see matmul_peak).
        return ComputeTime(memory_s, None, memory_s, None if memory_s is None else Bound.MEMORY,
                           None, dtype, tuple(notes), "", bandwidth)
    if table is not None and not any(table.rate(d) for entry in dots for d in entry):
        table = None     # no dot of a dtype it measured (a float32 program)
    float32 = float32_matmuls(chip, peak_dtype)
    seconds = flops_bound = math_total = 0.0
    for k, (f, b, r) in enumerate(work):
        if k < len(steps):
            slow = efficiency(steps[k]) if efficiency is not None else 1.0
            math = step_math_seconds(steps[k], peak, table, float32) / slow
            whole = instruction_seconds(steps[k], peak, bandwidth, table, read_bandwidth,
                                        vector_unit, float32) / slow
        else:
            math = math_seconds(f, peak, dots[k] if k < len(dots) else (), table)
            whole = max(math, b / bandwidth if bandwidth else 0.0)
        seconds += r * whole
        math_total += r * math
        if math >= whole:
            flops_bound += r * whole
    notes.append(f"compute sums {sum(r for *_, r in work)} scheduled instruction runs, each at "
                 "max(FLOPs / peak, bytes / HBM bandwidth)")
    if table is not None:
        notes.append(table.describe() + "; other FLOPs at the peak above")
    priced = bool(steps)
    if priced and read_bandwidth:
        notes.append(f"instructions that read more than two thirds of their bytes move them "
                     f"faster, up to {format_rate(read_bandwidth, 'B/s')} for one that only "
                     "reads (the chip's measured read rate)")
    if priced and vector_unit is not None:
        notes.append(f"instructions that do no matmul take at least their vector-unit time: "
                     f"{format_rate(vector_unit.ops_per_second, 'op/s')} elementwise, a "
                     f"transcendental as {vector_unit.transcendental_ops:g} operations, "
                     f"{format_rate(vector_unit.reduced_per_second, 'element/s')} reduced "
                     f"({vector_unit.what})")
    if float32 is not None:
        notes += float32.notes(chip, [(s, r) for s, (*_, r) in zip(steps, work, strict=False)])
    reread = [(r, reread_bytes(s)) for s, (*_, r) in zip(steps, work, strict=False)]
    reread = [(r, b) for r, b in reread if b]
    if reread and bandwidth:
        notes.append(f"{len(reread)} matmul(s) tiled by libtpu in all three dimensions read "
                     f"operand windows again: {format_bytes(sum(r * b for r, b in reread))} "
                     f"more, at {format_rate(bandwidth, 'B/s')} (explorer/_src/cost/tiling.py)")
    bound = Bound.COMPUTE if flops_bound >= seconds - flops_bound else Bound.MEMORY
    return ComputeTime(seconds, math_total, memory_s, bound, peak, dtype, tuple(notes),
                       peak_dtype, bandwidth, table.device if table is not None else "",
                       read_bandwidth if priced else None,
                       vector_unit if priced else None, float32 if priced else None)


@dataclass(frozen=True)
class MemoryFit:
    """Per-device bytes against one chip's memory.

    Attributes:
        bytes: the program's bytes per device (Memory.total).
        capacity: what one program may hold of a chip's memory (`Chip.capacity`), bytes.
        fraction: bytes / capacity.
        fits: bytes <= capacity.
        text: the verdict in words, e.g. ``"uses 9.5 MiB of 79.1 GiB HBM per H100 SXM (0%):
            fits"``.
        checked_by: the compiler check the verdict is, where it is not `bytes` against
            `capacity` (``"libtpu's memory check"``: libtpu refuses a program over the chip's
            available HBM, so one it compiled fits); "" otherwise.
    """

    bytes: int
    capacity: float
    fraction: float
    fits: bool
    text: str
    checked_by: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def memory_fit(memory_bytes: float | None, target: str | Target) -> MemoryFit | None:
    target = get_target(target)
    # What one program may hold (libtpu's available HBM, CUDA's total), not the vendor's
    # whole capacity: the bytes the compiler and the driver would let it have.
    cap, kind = target.chip.capacity, target.chip.memory_kind
    if memory_bytes is None or cap is None:
        return None
    frac = memory_bytes / cap
    fits = memory_bytes <= cap
    # In binary units, as the capacities are (a "80GB" H100 has 80 GiB, of which CUDA gives a
    # program 79.1 GiB).
    if fits:
        text = (f"uses {format_bytes(memory_bytes)} of {format_bytes(cap)} "
                f"{kind} per {target.chip.name} ({frac:.0%}): fits")
    else:
        text = (f"needs {format_bytes(memory_bytes)} per device but a "
                f"{target.chip.name} gives a program {format_bytes(cap)} {kind} "
                f"({frac:.0%}): does not fit; shard more or pick a chip with more memory")
    return MemoryFit(int(memory_bytes), cap, frac, fits, text)


# ---------------------------------------------------------------------------------------------
# The step.

@dataclass(frozen=True)
class Estimate:
    """Predicted step time of one compiled program on a target.

    step_lower_seconds assumes communication fully overlaps compute, max(compute, comm), where
    one-way permutes of opposite ring directions on a torus overlap each other too;
    step_upper_seconds assumes none does, compute + comm (SCALING_BOOK, tpus, Question 6: "An
    upper bound ... is the sum ... the TPU can typically overlap these operations ... bottlenecked
    by the slowest piece").

    Attributes:
        target: the target's name.
        mapping: mesh axis -> the physical axes it lies on, e.g. ``{"data": "gpu:2",
            "model": "gpu:4"}``.
        dtype: the matmul dtype whose peak applies (by default the largest input's).
        collectives: the time of each collective, in the Report's order.
        compute: the roofline of the per-device program.
        comm_seconds: the collectives that could be timed, each times its runs, summed.
        step_lower_seconds: full overlap, max(compute, communication); None where the
            compute time is unknown (the communication alone would understate the step).
        step_upper_seconds: no overlap, compute + communication; None where the compute time
            or a collective's is unknown.
        bound: what limits the step at full overlap: compute, memory or communication; None
            where the compute time is unknown.
        memory: the per-device memory against the chip's; None without both figures.
        notes: which rates were used, and what could not be timed or placed.
        step_trace_seconds: the step on the predicted timeline of the scheduled program,
            where asynchronous collectives overlap the compute scheduled between their start
            and done; None without a schedule.
        peak: True for the vendors' nominal rates, False for the measured achievable ones.
        cautions: what may make the step far slower than predicted.
        step_range: the step as a range low..high, from where each instruction's time comes
            from (measured on the chip for its kind, or not; docs/cost-model.md, "Provenance
            and ranges"); None without a predicted trace.
    """

    target: str
    mapping: dict[str, str]
    dtype: str
    collectives: tuple[CollectiveTime, ...]     # same order as the input
    compute: ComputeTime
    comm_seconds: float                          # sum of the collectives that could be placed
    step_lower_seconds: float | None
    step_upper_seconds: float | None
    bound: Bound | None
    memory: MemoryFit | None
    notes: tuple[str, ...] = field(default=())
    # The step on the predicted timeline of the scheduled program (explorer._src.report.trace):
    # asynchronous collectives overlap the compute scheduled between their start and done.
    step_trace_seconds: float | None = None
    # True: the vendors' nominal rates; False: scaled by the measured fractions (`achievable`).
    peak: bool = False
    # What the prediction cannot see and that may make the step far slower than predicted:
    # fusions the compiler could not cost, kernels it cannot look inside (see `cautions`).
    cautions: tuple[str, ...] = ()
    # The step as a range, from where each instruction's time comes from
    # (explorer._src.cost.ranges); None without a predicted trace.
    step_range: StepRange | None = None

    @property
    def compute_seconds(self) -> float | None:
        """The compute part of the step, ``compute.seconds``."""
        return self.compute.seconds

    def to_dict(self) -> dict:
        return {
            "target": self.target, "mapping": dict(self.mapping), "dtype": self.dtype,
            "collectives": [c.to_dict() for c in self.collectives],
            "compute": self.compute.to_dict(), "comm_seconds": self.comm_seconds,
            "step_lower_seconds": self.step_lower_seconds,
            "step_upper_seconds": self.step_upper_seconds, "bound": self.bound,
            "step_trace_seconds": self.step_trace_seconds, "peak": self.peak,
            "memory": self.memory.to_dict() if self.memory else None,
            "notes": list(self.notes), "cautions": list(self.cautions),
            "step_range": self.step_range.to_dict() if self.step_range else None,
        }

    def text(self) -> str:
        """A short plain-text summary."""
        mapping = ", ".join(f"{k}={v}" for k, v in self.mapping.items())
        lines = [f"target {self.target}: {mapping}"]
        c = self.compute
        if c.seconds is None:
            lines.append("compute  unknown")
        else:
            mem = f", HBM {format_seconds(c.memory_seconds)}" if c.memory_seconds else ""
            rate = (f"FLOPs at {format_rate(c.peak_flops, 'FLOP/s')} {c.peak_dtype} "
                    f"{format_seconds(c.flops_seconds)}" if c.peak_flops is not None
                    else f"no {c.dtype} matrix peak")
            lines.append(f"compute  {format_seconds(c.seconds)} ({c.bound}-bound: {rate}{mem})")
        lines.append(f"comm     {format_seconds(self.comm_seconds)} in "
                     f"{len(self.collectives)} collective(s)")
        for t in self.collectives:
            secs = format_seconds(t.seconds) if t.seconds is not None else "?"
            over = ",".join(t.axes) or "-"
            lines.append(f"  {t.kind} over {over}: {format_bytes(t.bytes)}, {secs}"
                         + (f" x{t.runs} (in a loop)" if t.runs != 1 else "")
                         + (f", {t.links}" if t.links else "")
                         + (f" [{t.bound}-bound]" if t.bound is CollectiveBound.LATENCY else ""))
        if self.step_lower_seconds is not None:
            upper = (format_seconds(self.step_upper_seconds)
                     if self.step_upper_seconds is not None else "?")
            lines.append(f"step     {format_seconds(self.step_lower_seconds)} (full overlap) to "
                         f"{upper} (no overlap)" + (f": {self.bound}-bound" if self.bound else ""))
        if self.step_trace_seconds is not None:
            lines.append(f"trace    {format_seconds(self.step_trace_seconds)} on the predicted "
                         "timeline of the compiled schedule")
        if self.step_range is not None:
            lines.append(f"range    {self.step_range.text()}")
        lines += [f"caution  {c}" for c in self.cautions]
        if self.memory:
            lines.append(f"memory   {self.memory.text}")
        lines += [f"note     {n}" for n in self.notes]
        return "\n".join(lines)



class PricedCollective(Protocol):
    """What the model reads of a collective: a Report's (explorer._src.report.report.Collective) or
    one a layout implies without a compile (explorer._src.estimate.walk.ImpliedCollective), which
    has no instruction, device groups, ring direction or slice tier and says so by their
    empty values."""

    @property
    def kind(self) -> CollectiveKind: ...
    @property
    def axes(self) -> tuple[str, ...]: ...       # mesh axes its groups span; () where none
    @property
    def program_bytes(self) -> int: ...          # V per device, in the program's dtype
    @property
    def group_size(self) -> int | None: ...
    @property
    def groups(self) -> tuple[tuple[int, ...], ...]: ...   # device groups; () where unknown
    @property
    def direction(self) -> str: ...              # a permute's ring direction, or ""
    @property
    def tier(self) -> str: ...                   # Tier's value: "" for every link
    @property
    def hlo_name(self) -> str: ...               # its instruction, "" for an implied one
    @property
    def runs(self) -> int: ...                   # times one step runs it


def _collective_time(c: PricedCollective, target: Target, placed: AxisMapping,
                     mesh_names: Sequence[str], mesh_sizes: Sequence[int]) -> CollectiveTime:
    """collective_time of a Report's collective; one whose groups match no whole mesh axes is
    timed over the axes that hold them (explorer._src.hlo.groups.spanned_axes), where it has
    groups."""
    axes = tuple(c.axes)
    if not axes and c.groups:
        axes = spanned_axes([list(g) for g in c.groups], tuple(mesh_sizes), tuple(mesh_names))
    return collective_time(c.kind, c.program_bytes, axes, target, placed, c.group_size,
                           c.direction, c.tier)


def estimate(collectives: Sequence[PricedCollective], flops: float | None,
             bytes_accessed: float | None, memory_bytes: float | None, dtype: str,
             mesh_names: Sequence[str], mesh_sizes: Sequence[int], target: str | Target,
             mapping: AxisMapping | str | Mapping | None = None,
             work: Work | None = None, peak: bool = False) -> Estimate:
    """Predict a step on `target` from plain data.

    `collectives`: a Report's or the ones a layout implies (PricedCollective); each's .runs
    counts where no `work` says how often a step runs it. `flops`, `bytes_accessed`: per device,
    from XLA's cost analysis (None when XLA gave none). `memory_bytes`: per device. `dtype`: the
    matmul dtype whose peak applies. `mapping`: None for default_mapping, else as check_mapping
    takes. `work`: what the compiled schedule runs (explorer._src.hlo.schedule.schedule_work); with
    it, compute is summed per instruction and a collective in a loop counts once per trip, so
    that the bounds bracket the step on the predicted timeline. `peak`: time with the vendors'
    nominal FLOP/s and link bandwidths; by default each is scaled by its published measured
    fraction (explorer._src.cost.catalog.types.achievable), and the notes say which.
    """
    target = get_target(target)
    notes: list[str] = []
    # XLA's measured GEMM rates replace the flat measured fraction for the dots it measured;
    # at the vendors' peak (peak=True) nothing is measured.
    table = None if peak else gemm_table(target.chip.xla_gemm_table)
    if not peak and work is not None and table is None and target.chip.xla_gemm_table:
        notes.append(f"XLA's measured GEMM rates for {target.chip.name} are read from the gpu "
                     "extra's CUDA plugin, which is not installed: every matmul is timed at the "
                     "flat measured fraction of the peak")
    read_bandwidth, unit = None, None
    if peak:
        notes.append("at the vendors' peak FLOP/s and nominal link bandwidths, which real runs "
                     "do not reach")
    else:
        read_bandwidth, unit = measured_read_bandwidth(target.chip), target.chip.vector_unit
        target, derated = achievable(target)
        notes += derated
    if mapping is None:
        placed = default_mapping(target, mesh_names, mesh_sizes)
    else:
        placed = check_mapping(target, mesh_names, mesh_sizes, mapping)
    times = _collective_times(collectives, target, placed, mesh_names, mesh_sizes, work, notes)
    unplaced = [t for t in times if t.seconds is None]
    comm = sum(t.runs * t.seconds for t in times if t.seconds is not None)
    if unplaced:
        notes.append(f"{len(unplaced)} collective(s) could not be timed "
                     f"({unplaced[0].note}); communication time counts only the others")
    comp = _compute(flops, bytes_accessed, dtype, target, work, table, notes, read_bandwidth,
                    unit, peak)
    fit = memory_fit(memory_bytes, target)
    if memory_bytes is None:
        notes.append("no per-device memory figure, so no memory verdict")
    if comp.seconds is None:
        # Without a compute time there is no step time: its communication alone would
        # understate it, and a search would rank layouts by that.
        lower, upper, bound = None, None, None
        notes.append("the compute could not be timed, so no step time is given (the "
                     "communication alone would understate it)")
    else:
        # Full overlap: compute under communication, and opposite one-way permutes side by side.
        both_ways = overlapped_comm_seconds(times)
        lower = max(comp.seconds, both_ways)
        upper = comp.seconds + comm if not unplaced else None
        bound = comp.bound if comp.seconds >= both_ways else Bound.COMMUNICATION
    return Estimate(target.name, placed.to_dict(), comp.dtype, times, comp, comm, lower, upper,
                    bound, fit, tuple(notes), peak=peak,
                    cautions=cautions(work, "" if peak else target.chip.name)
                    if work is not None else ())


def _collective_times(collectives: Sequence[PricedCollective], target: Target, placed: AxisMapping,
                      mesh_names: Sequence[str], mesh_sizes: Sequence[int], work: Work | None,
                      notes: list[str]) -> tuple[CollectiveTime, ...]:
    """Each collective's time on `placed` links, run as often as the schedule (`work`) runs it;
    `notes` gets what is only bounded."""
    times = tuple(_collective_time(c, target, placed, mesh_names, mesh_sizes)
                  for c in collectives)
    # A leg of a split collective (tier inside or across) is timed on exactly its links.
    split = sum(1 for c, t in zip(collectives, times, strict=True)
                if t.axes != tuple(c.axes) and not c.tier)
    if split:
        notes.append(f"{split} collective(s) run over part of a mesh axis (device groups the "
                     "compiler split off, e.g. every fourth device of an axis of 16): each is "
                     "timed as over the whole axis, an upper bound")
    # How often a step runs each: the compiled schedule's trips, else the collective's own
    # count (a loop's trips read from the program, or implied by a scan's length).
    runs = ([work.collective_runs.get(c.hlo_name, 1) for c in collectives]
            if work is not None else [c.runs for c in collectives])
    return tuple(t if r == 1 else replace(t, runs=r)
                 for t, r in zip(times, runs, strict=True))


def measured_read_bandwidth(chip: Chip) -> float | None:
    """Bytes/s an instruction that only reads moves at on `chip` (its nominal bandwidth times
    Chip.read_measured); None without that measurement."""
    if chip.read_measured is None or chip.memory_bandwidth is None:
        return None
    return chip.memory_bandwidth * chip.read_measured.fraction


def _compute(flops: float | None, bytes_accessed: float | None, dtype: str, target: Target,
             work: Work | None, table: GemmTable | None, notes: list[str],
             read_bandwidth: float | None = None,
             vector_unit: VectorUnit | None = None, peak: bool = False) -> ComputeTime:
    """The step's compute: on one roofline from XLA's whole-program counts, or summed per
    scheduled instruction (`work`, dots at the GEMM `table`'s rates where it has them, reads at
    `read_bandwidth`, vector work on `vector_unit`, kernels at their measured efficiency but
    at the vendors' `peak`); `notes` gets how it was counted."""
    if work is None:
        comp = compute_time(flops, bytes_accessed, dtype, target)
    else:
        # A kernel runs at the fraction of its cost estimate measured on the chip, where one
        # was (not at the vendors' peak, where nothing measured applies).
        chip = target.chip.name
        comp = scheduled_compute_time(work.compute, dtype, target, work.dots, table,
                                      work.compute_steps, read_bandwidth, vector_unit,
                                      None if peak else (lambda s: kernel_efficiency(s, chip)))
        notes += [f"loop {name!r}: its trip count could not be read, so its body is counted "
                  "once" for name in work.uncounted_loops]
        if work.fused_kernel_runs:
            notes.append(f"{work.fused_kernel_runs} instruction run(s) in a 'fused_kernel' "
                         "named scope are timed as one on-chip kernel (a flash-attention "
                         "kernel keeps its scores in on-chip memory): FLOPs at the peak (at "
                         "XLA's measured GEMM rate for each block's shape where the chip has "
                         "it), their memory traffic not counted")
        if work.causal_kernel_runs:
            notes.append(f"{work.causal_kernel_runs} of them in a 'fused_kernel_causal' scope "
                         "count half their FLOPs: a causal kernel skips the blocks above the "
                         "diagonal")
    notes += comp.notes
    if work is not None:
        whole = compute_time(flops, bytes_accessed, dtype, target)
        if flops is not None and whole.seconds is not None and comp.seconds is not None:
            notes.append(f"for comparison, XLA's whole-program counts ({flops:.3g} FLOPs, "
                         f"{format_bytes(bytes_accessed or 0)} accessed, loop bodies once) give "
                         f"{format_seconds(whole.seconds)} on one roofline")
    return comp


# A causal Pallas flash-attention kernel (jax.experimental.pallas.ops.tpu.flash_attention, B=4,
# H=16, S=4096, D=128) ran 21.1 ms on a TPU v5e where its cost estimate at the chip's measured
# rate gives 2.9 ms; the f32 softmax fusion libtpu could not cost took 437 ms where its roofline
# gives 13 ms (benchmarks/results/tpu-v5e-2026-12-06).
KERNEL_SEEN_SLOWER = 7
# Scatter-adds of embedding gradients ran 4.2x (embedding_grad) and 5.2x (llama_train) slower
# than their bytes at the measured HBM rate on a TPU v5e (the same run).
SCATTER_SEEN_SLOWER = "4 to 5"


def cautions(work: Work, chip: str = "") -> tuple[str, ...]:
    """What the priced schedule cannot see and that may make the step far slower: the fusions
    libtpu marked uncostable, the custom-call kernels priced from the compiler's estimate of
    their work (or, with none, from their bytes alone) but those priced at the efficiency
    measured for them on `chip`, and scatters priced by their bytes."""
    out = []
    kernels = [s for s in work.kernels if kernel_efficiency(s, chip) == 1.0]
    if work.uncostable:
        names = ", ".join(s.instr.name for s in work.uncostable[:3])
        out.append(f"libtpu could not estimate the cost of {len(work.uncostable)} fusion(s) "
                   f"({names}); such a fusion can run far slower than its roofline (one ran "
                   f"{UNCOSTABLE_SEEN_SLOWER}x slower on a TPU v5e), so the step may be far slower "
                   "than predicted: see the compiler warnings for the line and what helps")
    if kernels:
        names = ", ".join(s.instr.name for s in kernels[:3])
        blind = [s.instr.name for s in kernels if not s.kernel.estimated]
        out.append(f"{len(kernels)} custom-call kernel(s) ({names}) are priced from the "
                   "compiler's estimate of their work, FLOPs at the matmul rate and bytes at "
                   "HBM speed; the compiler cannot see inside a kernel, and its run can be far "
                   f"slower (a causal Pallas flash attention ran {KERNEL_SEEN_SLOWER}x slower "
                   "than its estimate on a TPU v5e)"
                   + (f"; {', '.join(blind[:3])} carry no estimate, so only their bytes are "
                      "priced" if blind else ""))
    if work.scatters:
        names = ", ".join(s.instr.name for s in work.scatters[:3])
        out.append(f"{len(work.scatters)} scatter(s) ({names}) are priced as the bytes they "
                   f"move; scatters can take far longer (embedding gradients' scatter-adds ran "
                   f"{SCATTER_SEEN_SLOWER}x slower than their bytes on a TPU v5e)")
    return tuple(out)


def matmul_dtype(work: Work | None, tensors: Sequence = ()) -> str:
    """The dtype whose matrix peak times a program: that of its largest floating-point input
    (token ids are int32 and can be the largest input of a language model at a large batch,
    yet do no matmul); with none, that of the dots doing most of its FLOPs (their left
    operand's); else that of the largest input. The inputs come first because a CPU compile
    upcasts bf16 dots to f32: its dots do not say what the target runs."""
    inputs = [t for t in tensors if t.kind == TensorRole.INPUT] or list(tensors)
    floating = [t for t in inputs if normalize_dtype(t.dtype).startswith(("float", "bfloat"))]
    if floating:
        return max(floating, key=lambda t: t.bytes_per_device).dtype
    flops: dict[str, float] = {}
    for dots in work.dots if work is not None else ():
        for d in dots:
            name = HLO_TO_NUMPY.get(d.lhs_dtype)
            if name:
                flops[name] = flops.get(name, 0.0) + d.flops
    if flops:
        return max(flops, key=flops.__getitem__)
    return max(inputs, key=lambda t: t.bytes_per_device).dtype if inputs else "float32"
