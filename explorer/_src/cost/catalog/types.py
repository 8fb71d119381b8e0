"""The catalog's data classes: a `Target` (a chip, how many, how they are wired: its
`PhysicalAxis`es and their `Link`s), a `Chip` with its peak rates and memory, the `Measured`
fraction of a nominal rate that runs reach and the `VectorUnit`'s measured rates; and
`achievable`, a target at its measured rates."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from math import prod

from explorer._src.errors import TargetError, choices
from explorer._src.units import format_bytes

# ---------------------------------------------------------------------------------------------
# The data classes.

class TargetFamily(StrEnum):
    """What kind of machine a target is."""

    TPU = "tpu"
    GPU = "gpu"
    IPU = "ipu"
    CPU = "cpu"     # the host the explorer compiles on: no sourced speeds


class LinkKind(StrEnum):
    """Which interconnect a link is, as vendors name it (the formulas read `switched` and
    `across`, not the kind)."""

    ICI = "ICI"                  # TPU inter-chip interconnect, a torus
    NVLINK = "NVLink"            # GPUs in one node, through NVSwitch
    INFINIBAND = "InfiniBand"    # between GPU nodes
    DCN = "DCN"                  # the data-center network between TPU slices
    IPU_LINK = "IPU-Link"        # Graphcore IPUs

@dataclass(frozen=True)
class Measured:
    """The fraction of a nominal rate that a public measurement reached, and where it is.

    Peak FLOP/s and nominal link bandwidth are never reached: a large bf16 matmul on an H100
    runs at about 80% of its peak, and an NCCL ring at about 80% of NVLink's wire speed. The
    catalog keeps the vendor's nominal figure and, beside it, the measured fraction; the cost
    model applies the fraction unless asked for the peak (see `achievable`).
    """

    fraction: float
    what: str            # what was measured, in a few words
    source: str          # where: a URL at a pinned commit


@dataclass(frozen=True)
class VectorUnit:
    """What a chip's vector unit (the elementwise and reduction work outside the matrix unit)
    was measured to do: an instruction that does no matmul takes at least its elementwise
    operations over `ops_per_second` and its reduced elements over `reduced_per_second`, beside
    its bytes at HBM speed (docs/cost-model.md).

    Attributes:
        ops_per_second: elementwise HLO operations per second, one per element of an
            operation's result (a multiply over 1024 elements is 1024).
        transcendental_ops: what one transcendental (exp, tanh, log, rsqrt, divide...) costs, in
            elementwise operations.
        reduced_per_second: elements a reduction consumes per second.
        what: what was measured, in a few words.
        source: where the measurements are kept.
    """

    ops_per_second: float
    transcendental_ops: float
    reduced_per_second: float
    what: str
    source: str
    sorting: SortingRates | None = None


@dataclass(frozen=True)
class SortingRates:
    """What a chip was measured to take to sort (docs/cost-model.md, "Sorts and top-k").

    A sort of `elements` keys along rows of length n takes elements x P x (per_pass +
    per_pass_per_stage x L), P = L(L+1)/2 the compare-exchange passes of a bitonic network
    and L = ceil(log2 n): each pass over the keys, slower the longer the rows (more of the
    passes span more than on-chip memory holds). XLA's TopK of k from rows takes elements x k
    x `top_k_per_element_k`.

    Attributes:
        per_pass: seconds per key per pass, at L = 0.
        per_pass_per_stage: seconds per key per pass that each stage of L adds.
        top_k_per_element_k: seconds per key per k of a TopK.
        what: what was measured, in a few words.
        source: where the measurements are kept.
    """

    per_pass: float
    per_pass_per_stage: float
    top_k_per_element_k: float
    what: str
    source: str


@dataclass(frozen=True)
class Chip:
    """One accelerator: peak matmul rate per dtype, and its main memory."""

    name: str
    # dtype (the explorer's names, e.g. "bfloat16") -> dense peak FLOP/s of one chip.
    # Sparsity figures are never used. A dtype missing here has no sourced number.
    peak_flops: dict[str, float]
    memory_bytes: float | None          # capacity of one chip's HBM (or on-chip SRAM), bytes
    memory_bandwidth: float | None      # HBM <-> cores, bytes/s
    memory_kind: str = "HBM"
    source: str = ""
    # The dtype whose peak a float32 matmul runs at when the chip has no float32 figure of its
    # own (TPUs: bf16 passes with f32 accumulation by default); None: no such rule.
    float32_matmul_as: str | None = None
    # Measured fraction of the peak that large dense matmuls reach; None: none found, the peak
    # is used as it is.
    matmul_measured: Measured | None = None
    # The link between the chip and its host's memory (PCIe), bytes/s in one direction: what
    # offloaded arrays (memory kind pinned_host) move over. None: no sourced figure.
    host_bandwidth: float | None = None
    host_source: str = ""
    # Of `memory_bytes`, what one program may hold, as the chip's own software reports it:
    # libtpu's "available HBM" (it refuses a program over it), CUDA's total device memory
    # (ECC and the driver's reserve taken off). None: no such figure; all of it.
    memory_available: float | None = None
    available_source: str = ""
    # XLA's key for the GEMM rates it measured on this chip (explorer._src.cost.gemm_rates), e.g.
    # "sm_90"; None: XLA measured none.
    xla_gemm_table: str | None = None
    # Measured fraction of `memory_bandwidth` that large copies reach; None: none found, the
    # nominal bandwidth is used as it is.
    memory_measured: Measured | None = None
    # Measured fraction of `memory_bandwidth` that instructions which only read reach (a
    # reduction); None: none found, reads go at `memory_measured`'s rate.
    read_measured: Measured | None = None
    # The vector unit's measured rates; None: none measured, instructions are priced by their
    # FLOPs and bytes alone.
    vector_unit: VectorUnit | None = None

    @property
    def capacity(self) -> float | None:
        """Bytes one program may hold on one chip: what a memory verdict compares a program's
        bytes per device (Memory.total) with."""
        return self.memory_available or self.memory_bytes


@dataclass(frozen=True)
class Link:
    """One kind of interconnect, as the cost formulas see it.

    `bandwidth` is bytes/s in ONE direction: per physical link for a torus (ICI), per device
    into its switch or NIC for a switched network (NVLink, InfiniBand, DCN).
    """

    kind: LinkKind
    bandwidth: float | None      # bytes/s, one direction
    latency: float | None        # seconds per hop (torus) or per ring step (switched)
    switched: bool               # any-to-any through switches: no torus hops, no wraparound
    across: bool                 # joins slices/nodes: the slow tier of a hierarchical collective
    source: str = ""
    # Measured fraction of `bandwidth` that large collectives reach; None: none found.
    measured: Measured | None = None


@dataclass(frozen=True)
class PhysicalAxis:
    """One dimension of the machine that mesh axes are laid onto."""

    name: str          # "x", "y", "z" (ICI torus dims), "slice", "gpu", "node", "ipu"
    size: int
    link: Link
    wraparound: bool = False     # torus only: the ring closes, so both directions carry data

    def describe(self) -> str:
        if self.link.switched:
            where = {"gpu": "GPUs in a node", "node": "nodes", "slice": "slices",
                     "ipu": "IPUs"}.get(self.name, "devices")
            return f"{self.name!r} ({self.link.kind}, {self.size} {where})"
        wrap = "with wraparound" if self.wraparound else "no wraparound"
        return f"{self.name!r} ({self.link.kind} torus dimension of {self.size}, {wrap})"


@dataclass(frozen=True)
class Target:
    """A machine someone rents: a chip, how many, and how they are wired.

    get_target builds one from its name (the grammar is in names.py's docstring); the
    catalog's are listed by targets().

    Attributes:
        name: the target's name, e.g. ``"tpu-v5e-16x16"`` or ``"h100-8x4"``.
        family: tpu, gpu, ipu or cpu.
        chip: the accelerator, with its peak rates and memory.
        axes: the physical axes mesh axes are mapped onto, outermost (slowest) first, like a
            mesh: a TPU's torus dimensions (and ``slice``), a GPU system's ``node`` and
            ``gpu``; none for the CPU host.
        topology: how the chips are wired, in words, e.g. ``"2-D torus 16x16"``.
        notes: caveats about the sources of its numbers.
    """

    name: str
    family: TargetFamily
    chip: Chip
    axes: tuple[PhysicalAxis, ...]         # outermost (slowest) first, like a mesh
    topology: str                          # e.g. "2-D torus 16x16"
    notes: tuple[str, ...] = field(default=())

    @property
    def chips(self) -> int | None:
        """How many devices; None for the CPU host, which takes any fake-device count."""
        if self.family is TargetFamily.CPU:
            return None
        return prod(a.size for a in self.axes)

    def axis(self, name: str) -> PhysicalAxis:
        """The physical axis called `name`; a TargetError names the target's axes."""
        for a in self.axes:
            if a.name == name:
                return a
        raise TargetError(f"{self.name} has no physical axis {name!r}; its axes are "
                          f"{choices(a.name for a in self.axes)}", target=self.name)

    def describe(self) -> str:
        """One line for a `sharding-explorer targets` listing, the name first."""
        chip = self.chip
        if self.family is TargetFamily.CPU:
            return (f"{self.name}: the CPU host the explorer compiles on, any number of fake "
                    "devices; no sourced speeds, so no time prediction")
        parts = [f"{self.name}: {self.chips} x {chip.name}, {self.topology}"]
        peak = chip.peak_flops.get("bfloat16") or chip.peak_flops.get("float16")
        if peak:
            dt = "bf16" if "bfloat16" in chip.peak_flops else "fp16"
            parts.append(f"{format_rate(peak, 'FLOP/s')} {dt}")
        if chip.memory_bytes:
            # What a program may hold (a v5e's 15.75 GiB, not its 16), as analyze's memory
            # verdict compares with.
            mem = f"{format_bytes(chip.capacity)} {chip.memory_kind}"
            if chip.memory_bandwidth:
                mem += f" at {format_rate(chip.memory_bandwidth, 'B/s')}"
            parts.append(mem)
        seen = set()
        for a in reversed(self.axes):
            if a.link.kind in seen or a.link.bandwidth is None:
                continue
            seen.add(a.link.kind)
            per = "per link" if not a.link.switched else "per device"
            parts.append(f"{a.link.kind} {format_rate(a.link.bandwidth, 'B/s')} {per} one way")
        return ", ".join(parts)


def format_rate(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def achievable(target: Target) -> tuple[Target, tuple[str, ...]]:
    """`target` with every rate that has a measured fraction scaled by it, and a note per
    fraction applied or missing. Latencies are kept: the measurements are of large transfers."""
    if target.family is TargetFamily.CPU:
        return target, ()
    chip, notes = target.chip, []
    m = chip.matmul_measured
    if m is not None:
        chip = replace(chip, peak_flops={k: v * m.fraction for k, v in chip.peak_flops.items()})
        notes.append(f"matmul peak x {m.fraction:.2f}, as measured: {m.what}")
    else:
        notes.append(f"no published matmul measurement for {chip.name}: its peak is used")
    hbm = chip.memory_measured
    if chip.memory_bandwidth is not None and hbm is not None:
        chip = replace(chip, memory_bandwidth=chip.memory_bandwidth * hbm.fraction)
        notes.append(f"{chip.memory_kind} bandwidth x {hbm.fraction:.2f}, as measured: {hbm.what}")
    elif chip.memory_bandwidth is not None:
        notes.append(f"{chip.memory_kind} at its nominal bandwidth: no published measurement of "
                     f"what {chip.name} reaches was found")
    axes, seen = [], set()
    for a in target.axes:
        link = a.link
        if link.measured is not None and link.bandwidth is not None:
            link = replace(link, bandwidth=link.bandwidth * link.measured.fraction)
            if link.kind not in seen:
                notes.append(f"{link.kind} bandwidth x {link.measured.fraction:.2f}, as "
                             f"measured: {link.measured.what}")
        elif link.kind not in seen:
            notes.append(f"{link.kind} at its nominal bandwidth: no published measurement found")
        seen.add(link.kind)
        axes.append(replace(a, link=link))
    return replace(target, chip=chip, axes=tuple(axes)), tuple(notes)
