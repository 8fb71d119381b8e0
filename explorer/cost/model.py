"""Predicted step time on real hardware, from plain numbers: the roofline and collective formulas.

Pure functions over the hardware catalog (_hardware.py); no jax. Every formula names its source
here and in docs/cost-model.md. V is always bytes per device in the program's dtype, as in
Report's `Collective.program_bytes`:

- all-gather: the gathered result; reduce-scatter: the full operand; all-reduce: the buffer
  (the scaling book's V, "the number of bytes in the array");
- all-to-all: each device's buffer (operand = result);
- collective-permute: what each device sends.

Sources: SCALING_BOOK = https://jax-ml.github.io/scaling-book/ (Austin et al.), chapters
"sharding" (TPU collectives) and "gpus" (NVLink/InfiniBand collectives);
NCCL_TESTS = https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from math import gcd, prod

from explorer.cost.hardware import (
    PhysicalAxis,
    Target,
    format_bytes,
    format_rate,
    get_target,
    targets_with_chips,
)
from explorer.errors import ExplorerError, MappingError, choices
from explorer.spec.tensor import normalize_dtype

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
BOUNDS = ("compute", "memory", "communication")


# ---------------------------------------------------------------------------------------------
# Mapping mesh axes onto the machine.

@dataclass(frozen=True)
class Segment:
    """The part of one physical axis that one mesh axis occupies.

    On a physical axis shared by several mesh axes, the later mesh axis (inner, as in row-major
    device order) takes neighbouring chips (stride 1); an earlier one steps over it (stride =
    the inner factors), so its traffic crosses `stride` links per logical hop.
    """

    mesh_axis: str
    axis: PhysicalAxis
    factor: int
    stride: int = 1

    @property
    def wraps(self) -> bool:
        """A closed ring: the physical axis wraps and this segment goes all the way round."""
        return (self.axis.wraparound and not self.axis.link.switched
                and self.factor * self.stride == self.axis.size)

    def text(self) -> str:
        return self.axis.name if self.factor == self.axis.size else \
            f"{self.axis.name}:{self.factor}"


@dataclass(frozen=True)
class AxisMapping:
    """Where each mesh axis lives on a target. Build it with default_mapping/check_mapping."""

    target: str
    names: tuple[str, ...]
    sizes: tuple[int, ...]
    placement: tuple[tuple[Segment, ...], ...]     # per mesh axis, in mesh order

    def segments(self, mesh_axis: str) -> tuple[Segment, ...]:
        if mesh_axis not in self.names:
            raise MappingError(f"collective names mesh axis {mesh_axis!r}, which the mesh "
                               f"lacks; mesh axes: {choices(self.names)}", axis=mesh_axis,
                               target=self.target)
        return self.placement[self.names.index(mesh_axis)]

    def to_dict(self) -> dict[str, str]:
        return {n: "+".join(s.text() for s in segs) or "-"
                for n, segs in zip(self.names, self.placement, strict=True)}

    def text(self) -> str:
        """The mapping as check_mapping/parse_mapping accept it, e.g. 'data=slice,model=x+y'."""
        return ",".join(f"{n}={t}" for n, t in self.to_dict().items())


def parse_mapping(text: str) -> dict[str, tuple[str, ...]]:
    """`'data=slice,model=x+y:2'` -> {'data': ('slice',), 'model': ('x', 'y:2')}.

    Each mesh axis names the physical axes it spans, joined by '+'; ':k' takes k of that
    axis's chips instead of all of them.
    """
    out: dict[str, tuple[str, ...]] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, eq, rhs = (p.strip() for p in part.partition("="))
        if not eq or not rhs:
            raise MappingError(f"mapping entry {part!r} in {text!r} is not mesh_axis=physical "
                               "axes; write e.g. 'data=slice,model=x+y' or 'model=gpu+node:2'")
        out[name] = tuple(p.strip() for p in rhs.split("+"))
    return out


def _check_mesh(target: Target, names, sizes) -> tuple[tuple[str, ...], tuple[int, ...]]:
    names, sizes = tuple(names), tuple(int(s) for s in sizes)
    if len(names) != len(sizes):
        raise MappingError(f"mesh has {len(names)} axis names but {len(sizes)} sizes")
    n = prod(sizes)
    if target.chips is not None and n != target.chips:
        same = targets_with_chips(n)
        hint = (f"; targets with {n} devices: {choices(same)}" if same else
                f"; no catalog target has {n} devices")
        mesh = ",".join(f"{a}={s}" for a, s in zip(names, sizes, strict=True))
        raise MappingError(f"mesh {mesh!r} has {n} devices but {target.name} has "
                           f"{target.chips} chips{hint}", target=target.name)
    return names, sizes


def _limit(target: Target, axis: PhysicalAxis) -> str:
    """The physical limit of an axis, in words, for error messages."""
    if axis.name == "gpu":
        return f"a node has {axis.size} GPU{'s' if axis.size > 1 else ''} on NVLink"
    if axis.name == "node":
        return f"{target.name} has {axis.size} nodes on InfiniBand"
    if axis.name == "slice":
        return f"{target.name} has {axis.size} slices on DCN"
    if axis.name == "ipu":
        return f"a Bow-2000 has {axis.size} IPUs"
    return f"{target.name}'s ICI dimension {axis.name!r} has {axis.size} chips"


def _hint(target: Target, axis: PhysicalAxis, mesh_axis: str, size: int) -> str:
    others = [a for a in target.axes if a.name != axis.name]
    if not others:
        return ""
    rest = size // axis.size if size % axis.size == 0 else None
    if rest and any(a.size % rest == 0 for a in others):
        nxt = next(a for a in others if a.size % rest == 0)
        return f"; map the rest elsewhere, e.g. {mesh_axis}={axis.name}+{nxt.name}:{rest}"
    return f"; other axes: {', '.join(a.describe() for a in others)}"


def check_mapping(target: str | Target, mesh_names: Sequence[str], mesh_sizes: Sequence[int],
                  mapping: AxisMapping | str | Mapping[str, str | Sequence]) -> AxisMapping:
    """Validate a user mapping of mesh axes onto physical axes; the error names the limit.

    `mapping` is text ('data=slice,model=x+y:2'), a dict {mesh axis: physical axes}, whose
    values are a name, 'name:k', (name, k) or a sequence of those, or an AxisMapping.
    """
    target = get_target(target)
    names, sizes = _check_mesh(target, mesh_names, mesh_sizes)
    if isinstance(mapping, AxisMapping):
        mapping = {n: tuple(s.text() for s in segs)
                   for n, segs in zip(mapping.names, mapping.placement, strict=True)}
    elif isinstance(mapping, str):
        mapping = parse_mapping(mapping)
    for key in mapping:
        if key not in names:
            raise MappingError(f"mapping names mesh axis {key!r}, which the mesh lacks; mesh "
                               f"axes: {choices(names)}", axis=key, target=target.name)
    if target.family == "cpu":
        return AxisMapping(target.name, names, sizes, tuple(() for _ in names))
    phys_names = [a.name for a in target.axes]
    raw: list[list[tuple[PhysicalAxis, int]]] = []
    for name, size in zip(names, sizes, strict=True):
        entries = mapping.get(name, ())
        if isinstance(entries, str) or (isinstance(entries, tuple) and len(entries) == 2
                                        and isinstance(entries[1], int)):
            entries = (entries,)
        if not entries and size > 1:
            raise MappingError(f"mesh axis {name!r} (size {size}) is not mapped; map it onto "
                               f"{', '.join(a.describe() for a in target.axes)}",
                               axis=name, target=target.name)
        placed = []
        for entry in entries:
            if isinstance(entry, tuple):
                phys_name, factor = entry
            else:
                phys_name, _, f_text = str(entry).partition(":")
                factor = None
                if f_text:
                    if not re.fullmatch(r"\d+", f_text.strip()):
                        raise MappingError(f"mesh axis {name!r}: {entry!r} has factor "
                                           f"{f_text!r}, not a whole number", axis=name,
                                           target=target.name)
                    factor = int(f_text)
            phys_name = phys_name.strip()
            if phys_name not in phys_names:
                raise MappingError(
                    f"mesh axis {name!r} is mapped to {phys_name!r}, which {target.name} lacks; "
                    f"its axes: {', '.join(a.describe() for a in target.axes) or '(none)'}",
                    axis=name, target=target.name)
            axis = target.axis(phys_name)
            factor = axis.size if factor is None else factor
            if factor < 1 or factor > axis.size or axis.size % factor:
                raise MappingError(
                    f"mesh axis {name!r} takes {factor} from {phys_name!r} but "
                    f"{_limit(target, axis)}; a factor must divide {axis.size}"
                    + _hint(target, axis, name, factor), axis=name, target=target.name)
            placed.append((axis, factor))
        spanned = prod(f for _, f in placed)
        if spanned != size:
            where = " + ".join(f"{a.name}:{f}" for a, f in placed)
            limits = "; ".join(_limit(target, a) for a, _ in placed)
            hint = _hint(target, placed[0][0], name, size) if len(placed) == 1 else ""
            raise MappingError(
                f"mesh axis {name!r} has size {size} but is mapped to {where} = {spanned} "
                f"devices ({limits}){hint}", axis=name, target=target.name)
        raw.append(placed)
    # Each physical axis must be shared out exactly; inner (later) mesh axes get stride 1.
    placement: list[list[Segment]] = [[] for _ in names]
    for axis in target.axes:
        stride = 1
        for i in reversed(range(len(names))):
            for a, f in raw[i]:
                if a.name == axis.name:
                    placement[i].append(Segment(names[i], axis, f, stride))
                    stride *= f
        if stride > axis.size or axis.size % stride:
            users = [names[i] for i in range(len(names)) if any(a.name == axis.name
                                                                 for a, _ in raw[i])]
            raise MappingError(f"mesh axes {choices(users)} ask for {stride} of "
                               f"{axis.name!r} but {_limit(target, axis)}",
                               axis=users[0] if users else None, target=target.name)
    return AxisMapping(target.name, names, sizes,
                       tuple(tuple(p) for p in placement))


def default_mapping(target: str | Target, mesh_names: Sequence[str],
                    mesh_sizes: Sequence[int]) -> AxisMapping:
    """Innermost mesh axes on the fastest links: walk the mesh from its last axis and the
    machine from its innermost axis (ICI/NVLink before DCN/InfiniBand), giving each mesh axis
    the largest factor of the current physical axis that divides it."""
    target = get_target(target)
    names, sizes = _check_mesh(target, mesh_names, mesh_sizes)
    if target.family == "cpu":
        return AxisMapping(target.name, names, sizes, tuple(() for _ in names))
    remaining = [a.size for a in target.axes]
    j = len(remaining) - 1
    assign: dict[str, list[tuple[str, int]]] = {}
    for i in reversed(range(len(names))):
        need, placed = sizes[i], []
        while need > 1:
            while j >= 0 and remaining[j] == 1:
                j -= 1
            f = gcd(need, remaining[j]) if j >= 0 else 1
            if f == 1:
                left = target.axes[j].describe() if j >= 0 else "nothing"
                raise MappingError(
                    f"no default mapping: mesh axis {names[i]!r} still needs {need} devices "
                    f"but the next free physical axis is {left}; give a mapping such as "
                    f"'{names[i]}=...' over {choices(a.name for a in target.axes)}",
                    axis=names[i], target=target.name)
            placed.append((target.axes[j].name, f))
            need //= f
            remaining[j] //= f
        assign[names[i]] = placed
    return check_mapping(target, names, sizes, assign)


# ---------------------------------------------------------------------------------------------
# Collectives.

@dataclass(frozen=True)
class CollectiveTime:
    """The predicted time of one collective on the target."""

    kind: str
    axes: tuple[str, ...]
    bytes: int                          # V, per device, in the program's dtype
    seconds: float | None               # max(bandwidth, latency); None when it cannot be placed
    bandwidth_seconds: float | None
    latency_seconds: float | None
    bound: str | None                   # "bandwidth" or "latency"
    links: str = ""                     # e.g. "ICI y:16 (wraparound)", "NVLink x8 + InfiniBand x4"
    note: str = ""

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


def _torus(kind: str, v: float, segs: Sequence[Segment]) -> tuple[float, float]:
    """(bandwidth seconds, hops) over the torus dimensions `segs` (TPU ICI).

    SCALING_BOOK, sharding, "How long does this take?": a bidirectional ring all-gather of V
    bytes over |X| chips takes |X|/2 hops of V/|X| each way, T = V / W_bidi; without wraparound
    data crosses |X|-1 hops one way ("3 * 8.4e6 / 4.5e10", Pop Quiz 2). Exactly: ring
    floor(n/2)·(V/n)/w, line (n-1)·(V/n)/w, w = one-way link bandwidth. Several torus axes add
    their bandwidth ("increases the available bandwidth by a factor of N_axes"). A mesh axis that
    steps over `stride` chips shares each link with `stride` other groups: w / stride.
    """
    per = []
    for s in segs:
        w = s.axis.link.bandwidth * s.axis.link.links_per_direction / s.stride
        n, ring = s.factor, s.wraps
        hops = (n // 2 if ring else n - 1) * s.stride
        per.append((n, w, ring, hops))
    if kind in ("all-gather", "reduce-scatter", "all-reduce"):
        speed = sum(w * n / (n // 2) if ring else w * n / (n - 1) for n, w, ring, _ in per)
        seconds, hops = v / speed, sum(h for *_, h in per)
        if kind == "all-reduce":   # "an AllReduce is twice as expensive as an AllGather"
            seconds, hops = 2 * seconds, 2 * hops
        return seconds, hops
    if kind == "all-to-all":
        # SCALING_BOOK: "AllGather / 4 for a bidirectional ring", i.e. n·V/(4·W_bidi) with V the
        # per-device buffer. A line (no wraparound) halves the bandwidth: its middle link carries
        # floor(n/2)·ceil(n/2)·V/n each way. Over several axes the worst one bounds it (the
        # bisection of the torus cuts the longest dimension); our derivation, not the book's.
        worst = max(n * v / (8 * w) if ring else (n // 2) * (n - n // 2) * v / (n * w)
                    for n, w, ring, _ in per)
        return worst, sum(h for *_, h in per)
    # collective-permute: each device sends V over one (possibly strided) link.
    return v / min(w for _, w, _, _ in per), max(s.stride for s in segs)


def _switched(kind: str, v: float, n: int, w: float) -> tuple[float, float]:
    """(bandwidth seconds, ring steps) over n devices behind a switch (NVLink, IPU-Link).

    SCALING_BOOK, gpus, "Intra-node collectives": T_AG/RS = bytes·(N-1)/(N·W_egress), the same
    as NCCL_TESTS's "t = S*(n-1) / (B*n)"; AllReduce twice that (NCCL_TESTS: 2(n-1)/n);
    AllToAll "B·(N-1)/(W·N²)" with B = N·V, i.e. V·(N-1)/(N·W).
    """
    if kind in ("all-gather", "reduce-scatter", "all-to-all"):
        return v * (n - 1) / (n * w), n - 1
    if kind == "all-reduce":
        return 2 * v * (n - 1) / (n * w), 2 * (n - 1)
    return v / w, 1


def _across(kind: str, v: float, m: int, g: int, w: float) -> tuple[float, float]:
    """(bandwidth seconds, ring steps) across m slices/nodes, g group members in each.

    SCALING_BOOK, gpus, "Cross-node collectives": T_AG/RS = bytes·(M-1)/(M·W_node egress); and
    "Reductions when array is sharded over a separate axis": the group's share of node egress
    is its members' NICs, so W_node = g·W_per_device (bytes/400e9 · D_node/max(D_node, Y)).
    AllReduce twice that; AllToAll "B·(M-1)/(M²·W_node egress)" = V·(M-1)/(M·W_per_device).
    """
    if kind in ("all-gather", "reduce-scatter"):
        return v * (m - 1) / (m * g * w), m - 1
    if kind == "all-reduce":
        return 2 * v * (m - 1) / (m * g * w), 2 * (m - 1)
    if kind == "all-to-all":
        return v * (m - 1) / (m * w), m - 1
    return v / w, 1


def collective_time(kind: str, nbytes: float, axes: Sequence[str], target: str | Target,
                    mapping: AxisMapping, group_size: int | None = None) -> CollectiveTime:
    """Predicted seconds for one collective of V = `nbytes` per device over mesh `axes`.

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
    if kind not in KINDS:
        raise ExplorerError(f"collective kind {kind!r} is not one of {choices(KINDS)}")
    axes = tuple(axes)
    v = float(nbytes)

    def result(seconds, bw, lat, bound, links="", note=""):
        return CollectiveTime(kind, axes, int(nbytes), seconds, bw, lat, bound, links, note)

    if v <= 0 or (group_size is not None and group_size <= 1):
        return result(0.0, 0.0, 0.0, None, note="moves no data between devices")
    if not axes:
        return result(None, None, None, None,
                      note="its device groups match no mesh axes, so its links are unknown")
    segs = [s for a in axes for s in mapping.segments(a)]
    if target.family == "cpu":
        return result(None, None, None, None, note="the CPU host has no sourced link speeds")
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
        # An all-to-all keeps 1/m of each buffer inside the slice/node; the rest crosses.
        v_in = v / m if kind == "all-to-all" else v
        if all(s.axis.link.switched for s in inside):
            bw, hops = _switched(kind, v_in, g, inside[0].axis.link.bandwidth)
        else:
            bw, hops = _torus(kind, v_in, inside)
        tiers.append((bw, hops, inside[0].axis.link.latency))
    if across:
        bw, hops = _across(kind, v, m, g, across[0].axis.link.bandwidth)
        tiers.append((bw, hops, across[0].axis.link.latency))
    bandwidth = max(t[0] for t in tiers)
    latency = sum(h * lat for _, h, lat in tiers if lat is not None)
    note = ""
    if any(lat is None for _, _, lat in tiers):
        note = "no sourced per-hop latency for " + " or ".join(
            sorted({s.axis.link.kind for s in segs if s.axis.link.latency is None})) + \
            ", so no latency floor there"
    seconds = max(bandwidth, latency)
    bound = "latency" if latency > bandwidth else "bandwidth"
    return result(seconds, bandwidth, latency, bound, _link_text(segs), note)


# ---------------------------------------------------------------------------------------------
# Compute and memory.

@dataclass(frozen=True)
class ComputeTime:
    """Roofline of the per-device program: max(FLOPs / peak, bytes / HBM bandwidth).

    SCALING_BOOK, tpus, Question 4: "max{T_math, T_comms}" with T_math = FLOPs / peak FLOP/s and
    T_comms = HBM bytes / HBM bandwidth ("Assuming as much overlap ... as possible").
    """

    seconds: float | None
    flops_seconds: float | None
    memory_seconds: float | None
    bound: str | None                   # "compute" or "memory"
    peak_flops: float | None
    dtype: str
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return asdict(self)


def compute_time(flops: float | None, bytes_accessed: float | None, dtype: str,
                 target: str | Target) -> ComputeTime:
    target = get_target(target)
    chip = target.chip
    dtype = normalize_dtype(dtype)
    notes = []
    peak = chip.peak_flops.get(dtype)
    flops_s = memory_s = None
    if flops is None:
        notes.append("XLA gave no FLOP count, so compute time is unknown")
    elif peak is None:
        have = choices(chip.peak_flops) if chip.peak_flops else "none"
        notes.append(f"no sourced {dtype} peak for {chip.name} (sourced dtypes: {have}), so "
                     "compute time is unknown")
    else:
        flops_s = flops / peak
    if bytes_accessed is None:
        notes.append("XLA gave no bytes-accessed count, so the HBM roofline is unknown")
    elif chip.memory_bandwidth is None:
        notes.append(f"no sourced memory bandwidth for {chip.name}, so no memory roofline")
    else:
        memory_s = bytes_accessed / chip.memory_bandwidth
    if flops_s is None:
        return ComputeTime(None, None, memory_s, None, peak, dtype, tuple(notes))
    if memory_s is not None and memory_s > flops_s:
        return ComputeTime(memory_s, flops_s, memory_s, "memory", peak, dtype, tuple(notes))
    return ComputeTime(flops_s, flops_s, memory_s, "compute", peak, dtype, tuple(notes))


@dataclass(frozen=True)
class MemoryFit:
    """Per-device bytes against one chip's memory."""

    bytes: int
    capacity: float
    fraction: float
    fits: bool
    text: str

    def to_dict(self) -> dict:
        return asdict(self)


def memory_fit(memory_bytes: float | None, target: str | Target) -> MemoryFit | None:
    target = get_target(target)
    cap, kind = target.chip.memory_bytes, target.chip.memory_kind
    if memory_bytes is None or cap is None:
        return None
    frac = memory_bytes / cap
    fits = memory_bytes <= cap
    if fits:
        text = (f"uses {format_bytes(memory_bytes)} of {format_bytes(cap)} {kind} per "
                f"{target.chip.name} ({frac:.0%}): fits")
    else:
        text = (f"needs {format_bytes(memory_bytes)} per device but a {target.chip.name} has "
                f"{format_bytes(cap)} {kind} ({frac:.0%}): does not fit; shard more or pick a "
                "chip with more memory")
    return MemoryFit(int(memory_bytes), cap, frac, fits, text)


# ---------------------------------------------------------------------------------------------
# The step.

@dataclass(frozen=True)
class Estimate:
    """Predicted step time of one compiled program on a target.

    step_lower_seconds assumes communication fully overlaps compute, max(compute, comm);
    step_upper_seconds assumes none does, compute + comm (SCALING_BOOK, tpus, Question 6: "An
    upper bound ... is the sum ... the TPU can typically overlap these operations ... bottlenecked
    by the slowest piece").
    """

    target: str
    mapping: dict[str, str]
    dtype: str
    collectives: tuple[CollectiveTime, ...]     # same order as the input
    compute: ComputeTime
    comm_seconds: float                          # sum of the collectives that could be placed
    step_lower_seconds: float | None
    step_upper_seconds: float | None
    bound: str | None                            # "compute", "memory" or "communication"
    memory: MemoryFit | None
    notes: tuple[str, ...] = field(default=())

    @property
    def compute_seconds(self) -> float | None:
        return self.compute.seconds

    def to_dict(self) -> dict:
        return {
            "target": self.target, "mapping": dict(self.mapping), "dtype": self.dtype,
            "collectives": [c.to_dict() for c in self.collectives],
            "compute": self.compute.to_dict(), "comm_seconds": self.comm_seconds,
            "step_lower_seconds": self.step_lower_seconds,
            "step_upper_seconds": self.step_upper_seconds, "bound": self.bound,
            "memory": self.memory.to_dict() if self.memory else None,
            "notes": list(self.notes),
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
            lines.append(f"compute  {format_seconds(c.seconds)} ({c.bound}-bound: FLOPs at "
                         f"{format_rate(c.peak_flops, 'FLOP/s')} {c.dtype} "
                         f"{format_seconds(c.flops_seconds)}{mem})")
        lines.append(f"comm     {format_seconds(self.comm_seconds)} in "
                     f"{len(self.collectives)} collective(s)")
        for t in self.collectives:
            secs = format_seconds(t.seconds) if t.seconds is not None else "?"
            over = ",".join(t.axes) or "-"
            lines.append(f"  {t.kind} over {over}: {format_bytes(t.bytes)}, {secs}"
                         + (f", {t.links}" if t.links else "")
                         + (f" [{t.bound}-bound]" if t.bound == "latency" else ""))
        if self.step_lower_seconds is not None:
            upper = (format_seconds(self.step_upper_seconds)
                     if self.step_upper_seconds is not None else "?")
            lines.append(f"step     {format_seconds(self.step_lower_seconds)} (full overlap) to "
                         f"{upper} (no overlap)" + (f": {self.bound}-bound" if self.bound else ""))
        if self.memory:
            lines.append(f"memory   {self.memory.text}")
        lines += [f"note     {n}" for n in self.notes]
        return "\n".join(lines)


def format_seconds(s: float | None) -> str:
    if s is None:
        return "?"
    if s == 0:
        return "0 s"
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "us")):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def estimate(collectives: Sequence, flops: float | None, bytes_accessed: float | None,
             memory_bytes: float | None, dtype: str, mesh_names: Sequence[str],
             mesh_sizes: Sequence[int], target: str | Target,
             mapping: AxisMapping | str | Mapping | None = None) -> Estimate:
    """Predict a step on `target` from plain data.

    `collectives`: objects with .kind, .axes, .program_bytes and .group_size (Report's
    Collective). `flops`, `bytes_accessed`: per device, from XLA's cost analysis (None when XLA
    gave none). `memory_bytes`: per device. `dtype`: the matmul dtype whose peak applies.
    `mapping`: None for default_mapping, else as check_mapping takes.
    """
    target = get_target(target)
    if mapping is None:
        placed = default_mapping(target, mesh_names, mesh_sizes)
    else:
        placed = check_mapping(target, mesh_names, mesh_sizes, mapping)
    notes: list[str] = []
    times = tuple(collective_time(c.kind, c.program_bytes, c.axes, target, placed,
                                  getattr(c, "group_size", None)) for c in collectives)
    unplaced = [t for t in times if t.seconds is None]
    comm = sum(t.seconds for t in times if t.seconds is not None)
    if unplaced:
        notes.append(f"{len(unplaced)} collective(s) could not be timed "
                     f"({unplaced[0].note}); communication time counts only the others")
    comp = compute_time(flops, bytes_accessed, dtype, target)
    notes += comp.notes
    fit = memory_fit(memory_bytes, target)
    if memory_bytes is None:
        notes.append("no per-device memory figure, so no memory verdict")
    if comp.seconds is None:
        # Without a compute time the step is at least its communication; nothing more is known.
        lower, upper, bound = (comm or None), None, None
    else:
        lower = max(comp.seconds, comm)
        upper = comp.seconds + comm if not unplaced else None
        bound = comp.bound if comp.seconds >= comm else "communication"
    return Estimate(target.name, placed.to_dict(), comp.dtype, times, comp, comm, lower, upper,
                    bound, fit, tuple(notes))


def estimate_report(report, target: str | Target, dtype: str | None = None,
                    mapping: AxisMapping | str | Mapping | None = None) -> Estimate:
    """estimate() applied to a Report. `dtype` defaults to that of the largest input tensor."""
    if dtype is None:
        inputs = [t for t in report.tensors if t.kind == "input"] or list(report.tensors)
        dtype = max(inputs, key=lambda t: t.bytes_per_device).dtype if inputs else "float32"
    memory = report.memory.total if report.memory is not None else None
    return estimate(report.collectives, report.cost.flops, report.cost.bytes_accessed, memory,
                    dtype, report.mesh.names, report.mesh.sizes, target, mapping)
