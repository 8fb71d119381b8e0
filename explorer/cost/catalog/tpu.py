"""The hardware catalog, as data: chips, their links, and the slices and nodes people rent.

Every number carries its unit and a public source. Where sources differ we say which one we took
and why. Nothing here computes a time; the formulas live in explorer/cost/model.py and
docs/cost-model.md.

Target names:

- TPU: ``tpu-<generation>-<slice shape>``, e.g. ``tpu-v5e-16x16``, ``tpu-v5p-4x4x4``; several
  slices joined by the data-center network add ``-<N>slices``: ``tpu-v5e-16x16-4slices``.
  The shape may be written in either order (``tpu-v5e-8x4`` is Google's 4x8 slice).
- NVIDIA: ``<gpu>-<G>`` for G GPUs of one NVLink node (G in 1, 2, 4, 8), ``<gpu>-8x<N>`` for N
  DGX nodes of 8 GPUs joined by InfiniBand: ``h100-8``, ``h100-8x4`` (32 GPUs).
- ``bow-2000``: one Graphcore Bow-2000 IPU-Machine (4 IPUs).
- ``cpu``: the host the explorer compiles on; it has no sourced speeds, so nothing is predicted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from math import prod

from explorer.errors import TargetError, choices
from explorer.units import format_bytes

# ---------------------------------------------------------------------------------------------
# Units. Vendors quote link speeds in bits per second and memory in decimal or binary bytes.
# Memory capacities are binary whatever the vendor writes: Google's "16 GB" v5e and NVIDIA's
# "80GB" H100 are 16 and 80 GiB of HBM (DRAM comes in powers of two), as the chips' own software
# reports them (libtpu's "available HBM (15.75G)" for a v5e, tsl's 1024-based units; CUDA's
# 84,942,979,072 bytes, 79.11 GiB, of an H100), so they are written in GiB below.

GB = 1e9                   # bytes
GiB = 2**30                # bytes

# XLA's device descriptions of NVIDIA GPUs (their GpuTargetConfigProto as a GPU reports it,
# `device_memory_size`: what CUDA gives programs, ECC on), at a pinned commit.
XLA_GPU_SPECS = ("https://github.com/openxla/xla/blob/4336d12e0706168f6a382ddb231f3a83853b0657/"
                 "xla/backends/gpu/target_config/specs/")


def gbit_per_s(gigabits: float) -> float:
    """Bytes per second from a link speed in Gbit/s (vendors quote NICs in bits)."""
    return gigabits * 1e9 / 8


# ---------------------------------------------------------------------------------------------
# Sources, cited by name below.

SCALING_BOOK = "https://jax-ml.github.io/scaling-book/"          # Austin et al., 2025
BOOK_TPUS = SCALING_BOOK + "tpus/"          # "How to Think About TPUs": TPU Specs tables
BOOK_SHARDING = SCALING_BOOK + "sharding/"  # "Sharded Matrices": collective costs, ICI latency
BOOK_GPUS = SCALING_BOOK + "gpus/"          # "How to Think About GPUs": GPU specs, networking
CLOUD_V4 = "https://cloud.google.com/tpu/docs/v4"
CLOUD_V5E = "https://cloud.google.com/tpu/docs/v5e"
CLOUD_V5P = "https://cloud.google.com/tpu/docs/v5p"
CLOUD_V6E = "https://cloud.google.com/tpu/docs/v6e"
CLOUD_BF16 = "https://cloud.google.com/tpu/docs/bfloat16"
JAX_PRECISION = "https://docs.jax.dev/en/latest/201/precision.html"
NV_A100 = "https://www.nvidia.com/en-us/data-center/a100/"
NV_H100 = "https://www.nvidia.com/en-us/data-center/h100/"
NV_H200 = "https://www.nvidia.com/en-us/data-center/h200/"
NV_DGX_A100 = "https://docs.nvidia.com/dgx/dgxa100-user-guide/introduction-to-dgxa100.html"
NV_DGX_H = ("https://docs.nvidia.com/dgx-basepod/reference-architecture-infrastructure-"
            "foundation-enterprise-ai/latest/core-components.html")
NV_DGX_B200 = "https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html"
NCCL_TUNING = "https://github.com/NVIDIA/nccl/blob/master/src/graph/tuning.cc"
BOW_2000 = "https://docs.graphcore.ai/projects/bow-2000-datasheet/en/latest/overview.html"
# libtpu's own out-of-memory message, compiling ahead of time (jax 0.10.2, libtpu 0.0.42.1) a
# program larger than each generation's HBM ("exceeds available HBM (15.75G)", in 1024-based
# units: 40e9 bytes read "37.25G"); tests/compile/test_capacities.py compiles them again.
LIBTPU_HBM = "tests/compile/test_capacities.py"
# Measured fractions of the nominal rates (see Measured below), at pinned commits.
ML_ENG = "https://github.com/stas00/ml-engineering/blob/744d01e18b79512572f64a6bbd8b5f4a725203a7/"
ML_ENG_MAMF = (ML_ENG + "compute/accelerator/README.md"
               "#maximum-achievable-matmul-flops-comparison-table")
ML_ENG_NVLINK = ML_ENG + "network/README.md#sharp"
BOOK_REPO = "https://github.com/jax-ml/scaling-book/blob/0819a7d/"


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
    its bytes at HBM speed (explorer.cost.model.instruction_seconds).

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
    # XLA's key for the GEMM rates it measured on this chip (explorer.cost.gemm_rates), e.g.
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

    get_target builds one from its name (the grammar is in this module's docstring); the
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
            mem = f"{format_bytes(chip.memory_bytes)} {chip.memory_kind}"
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



# ---------------------------------------------------------------------------------------------
# TPUs. Peak FLOP/s, HBM and DCN per chip come from the Google Cloud pages (the vendor); ICI
# per-link bandwidth comes from the scaling book, because Cloud quotes only per-chip totals.

# s; "Each hop over an ICI link has some intrinsic overhead ... typically around 1us" BOOK_SHARDING
TPU_HOP_LATENCY = 1e-6

# "By default, TPUs perform matrix multiplication operations with bfloat16 values and
# accumulations with IEEE float32 values" CLOUD_BF16; "float32 dot products may be computed with
# reduced-precision arithmetic internally (bfloat16 on TPU ...)" JAX_PRECISION. No TPU page
# quotes a float32 matmul peak, so a float32 program is predicted at the bf16 peak. On a v5e one
# pass it is: a float32 4096^3 matmul at the default precision (its HLO carries no
# precision_config) ran at 191 TFLOP/s, as bf16 did (benchmarks/results/tpu-v5e-2026-12-06/
# rates.json); 3 or 6 passes would take 3 or 6 times as long.
_TPU_FLOAT32_MATMUL = "bfloat16"

# A large matmul on 8 TPU v2 cores: "we expect it to take about ... 95.6ms which is pretty much
# exactly how long it takes (96ms)" (scaling book, profiling.md). 95.6 / 96 = 0.996. The only
# published TPU matmul measurement found; applied to every generation not measured here (v5e
# is, below), since each feeds its MXUs the same way (XLA's tiling, bf16 inputs, f32
# accumulation).
_TPU_MATMUL = Measured(95.6 / 96, "a large matmul on 8 TPU v2 cores, 96 ms against 95.6 ms at "
                       "peak (scaling book)", BOOK_REPO + "profiling.md")
# "Here is an empirical measurement of AllGather bandwidth on a TPU v5e 8x16 slice ... we not
# only achieve about 95% of the peak claimed bandwidth (4.5e10)" (BOOK_SHARDING). The book's
# worked problem on a 4-chip axis without wraparound saw less (680 us against 560 us), but the
# figure is the measured curve over sizes, at the ring's full width.
_TPU_ICI = Measured(0.95, "an AllGather on a v5e 8x16 slice reaches about 95% of 4.5e10 B/s "
                    "per link (scaling book)", BOOK_SHARDING)

TPU_V4 = Chip(
    "TPU v4",
    {
        "bfloat16": 275e12,   # FLOP/s; "Peak compute per chip 275 teraflops (bf16 or int8)"
        "int8": 275e12,       # OP/s; same line of CLOUD_V4
    },
    memory_bytes=32 * GiB,          # "HBM2 capacity and bandwidth 32 GiB, 1200 GBps" CLOUD_V4
    memory_available=30.75 * GiB,   # libtpu: "exceeds available HBM (30.75G)", LIBTPU_HBM
    available_source=LIBTPU_HBM,
    memory_bandwidth=1200 * GB,     # bytes/s; same line
    source=CLOUD_V4,
    float32_matmul_as=_TPU_FLOAT32_MATMUL,
    matmul_measured=_TPU_MATMUL,
    # bytes/s one way; "PCIe bandwidth for TPU v4 is 16GB / second each way" (BOOK_REPO tpus.md)
    host_bandwidth=16 * GB,
    host_source=BOOK_REPO + "tpus.md",
)
# Measured on one TPU v5e chip by benchmarks/tpu_measure.py (jax 0.10.2, libtpu of jax 0.10.2,
# 2026-12-06; raw results in TPU_V5E_RUN): device times from a profile of the run.
TPU_V5E_RUN = "benchmarks/results/tpu-v5e-2026-12-06/rates.json"
# bf16 matmuls with every dimension at least 1024 and M·N·K at least 2048^3 (11 shapes, square
# and rectangular, 2048^3 to 16384^3): 187 to 194 TFLOP/s, median 191 of 197. float32 at the
# default precision runs at the same rate (its 4096^3: 191 TFLOP/s) where its operands' bytes
# allow: at 8192^3 and 16384^3 (164 and 174) libtpu's tiling reads each f32 operand 8 and 16
# times and the matmul waits on HBM (explorer/cost/tiling.py prices those bytes). Smaller
# matmuls run slower (1024^3: 136 TFLOP/s), where the fraction is optimistic.
_V5E_MATMUL = Measured(0.97, "bf16 matmuls of 2048^3 to 16384^3 on one TPU v5e chip, 187 to "
                       "194 of 197 TFLOP/s (benchmarks/tpu_measure.py, jax 0.10.2, 2026-12-06)",
                       TPU_V5E_RUN)
# Copies, elementwise adds, broadcasts written and transposes of 256 MiB to 2 GiB: 646 to 687
# GB/s, median 660 of 819 (0.81). Reductions that only read reach 753 to 757 GB/s (0.92); most
# instructions write what they read, so the copy rate is the one applied.
_V5E_HBM = Measured(0.81, "copies, adds, writes and transposes of 256 MiB to 2 GiB on one TPU "
                    "v5e chip, 646 to 687 of 819 GB/s (reads alone: 0.92; "
                    "benchmarks/tpu_measure.py, jax 0.10.2, 2026-12-06)", TPU_V5E_RUN)
# Reductions that only read, of 256 MiB to 2 GiB: 753 to 757 GB/s (0.92 of 819), bf16 and f32
# alike (rates.json, "hbm_read_*"). The programs' reductions agree: layernorm_chain's
# reduce_sum.112 ran 0.355 ms for 268 MB (0.92), xent_128k_vocab's exponential_reduce_fusion
# 2.778 ms for 2.1 GB (0.92).
_V5E_READ = Measured(0.92, "reductions that only read, 256 MiB to 2 GiB, on one TPU v5e chip, "
                     "753 to 757 of 819 GB/s (benchmarks/tpu_measure.py, jax 0.10.2, 2026-12-06)",
                     TPU_V5E_RUN)
TPU_V5E_VECTOR_RUN = "benchmarks/results/tpu-v5e-2026-12-06/vector.json"
# vector.json and programs.json, one TPU v5e chip, jax 0.10.2, 2026-12-06:
# - vpu_fma_64: 64 multiply-adds (128 operations) on each of 8192x8192 f32 elements, read and
#   written once, took 1.463 ms where its bytes take 0.81 ms: 128 * 67108864 / 1.463e-3 =
#   5.87e12 operations/s. With 1 and 4 multiply-adds it ran at its bytes' time.
# - vpu_exp_16, vpu_tanh_16: 16 (transcendental, multiply) pairs per element took 0.822 ms, at
#   the corner where the vector time meets the bytes' (1 and 4 pairs: 0.812 ms): (16 c + 16) *
#   67108864 / 5.87e12 = 0.822e-3 gives c = 3.5 operations per transcendental.
# - one-hot reductions of a tensor made in registers (iota, compare, select, sum), which read
#   almost nothing: llama_train's select_reduce_fusion reduced 8192 x 32000 elements in
#   0.710 ms (3.69e11/s); xent_128k_vocab's, and the probe vpu_onehot_reduce, 4096 x 128256 in
#   1.630 ms (3.22e11/s). The faster is taken, so that no reduction measured ran faster than
#   this floor (causal_attention_bfloat16_softmax's fusion.3 reduced 1.07e9 elements in
#   2.868 ms at HBM read speed, 3.74e11/s).
_V5E_VECTOR = VectorUnit(
    5.87e12, 3.5, 3.69e11,
    "elementwise chains and one-hot reductions on one TPU v5e chip (benchmarks/tpu_measure.py "
    "--part vector, jax 0.10.2, 2026-12-06)", TPU_V5E_VECTOR_RUN)
TPU_V5E = Chip(
    "TPU v5e",
    {
        "bfloat16": 197e12,   # FLOP/s; "Peak compute per chip (bf16) 197 TFLOPs" CLOUD_V5E
        "int8": 393e12,       # OP/s; "Peak compute per chip (Int8) 393 TOPs" CLOUD_V6E table
    },
    # "HBM2 capacity and bandwidth 16 GB, 819 GBps" CLOUD_V5E: binary, 16 GiB, since libtpu
    # gives a program 15.75 GiB of it (16.9e9 bytes, more than 16e9).
    memory_bytes=16 * GiB,
    memory_available=15.75 * GiB,   # libtpu: "exceeds available HBM (15.75G)", LIBTPU_HBM
    available_source=LIBTPU_HBM,
    memory_bandwidth=819 * GB,      # bytes/s; same line (the book rounds to 8.1e11)
    source=CLOUD_V5E,
    float32_matmul_as=_TPU_FLOAT32_MATMUL,
    matmul_measured=_V5E_MATMUL,
    memory_measured=_V5E_HBM,
    read_measured=_V5E_READ,
    vector_unit=_V5E_VECTOR,
    # bytes/s one way; "PCIe bandwidth is typically around `1.5e10` bytes / second per chip"
    # (BOOK_REPO tpus.md)
    host_bandwidth=1.5e10,
    host_source=BOOK_REPO + "tpus.md",
)
TPU_V5P = Chip(
    "TPU v5p",
    {
        "bfloat16": 459e12,       # FLOP/s; "Peak compute per chip (BF16) (TFLOPs) 459" CLOUD_V5P
        "float8_e4m3fn": 459e12,  # FLOP/s; "Peak compute per chip (FP8) (TFLOPs) 459" CLOUD_V5P
        "float8_e5m2": 459e12,    # same line
        "int8": 918e12,           # OP/s; "FLOPs/s/chip (int8) 9.18e14" BOOK_TPUS TPU Specs
    },
    memory_bytes=95 * GiB,          # "HBM capacity per chip (GiB) 95" CLOUD_V5P
    # libtpu: "exceeds available HBM (95.74G)" (LIBTPU_HBM): more than Cloud's rounded 95 GiB.
    memory_available=95.74 * GiB,
    available_source=LIBTPU_HBM,
    memory_bandwidth=2765 * GB,     # bytes/s; "HBM bandwidth per chip (GBps) 2765" CLOUD_V5P
    source=CLOUD_V5P,
    float32_matmul_as=_TPU_FLOAT32_MATMUL,
    matmul_measured=_TPU_MATMUL,
    # bytes/s one way; the same line as v5e's: v5 chips ("Trillium ... about 2x higher than v5")
    host_bandwidth=1.5e10,
    host_source=BOOK_REPO + "tpus.md",
)
TPU_V6E = Chip(
    "TPU v6e",
    {
        "bfloat16": 918e12,   # FLOP/s; "Peak compute per chip (bf16) 918 TFLOPs" CLOUD_V6E
        "int8": 1836e12,      # OP/s; "Peak compute per chip (Int8) 1836 TOPs" CLOUD_V6E
    },
    # "HBM capacity per chip 32 GB" CLOUD_V6E: binary, 32 GiB, since libtpu gives a program
    # 31.25 GiB of it (33.6e9 bytes, more than 32e9).
    memory_bytes=32 * GiB,
    memory_available=31.25 * GiB,   # libtpu: "exceeds available HBM (31.25G)", LIBTPU_HBM
    available_source=LIBTPU_HBM,
    memory_bandwidth=1640 * GB,     # bytes/s; "HBM bandwidth per chip 1640 GBps" CLOUD_V6E
    source=CLOUD_V6E,
    float32_matmul_as=_TPU_FLOAT32_MATMUL,
    matmul_measured=_TPU_MATMUL,
    # bytes/s one way; "Trillium (TPU v6e) has 32GB/s, about 2x higher than v5" (tpus.md)
    host_bandwidth=32 * GB,
    host_source=BOOK_REPO + "tpus.md",
)


def _ici(one_way: float) -> Link:
    return Link(LinkKind.ICI, one_way, TPU_HOP_LATENCY, switched=False, across=False,
                source=BOOK_TPUS, measured=_TPU_ICI)


def _dcn(per_chip: float, source: str) -> Link:
    # DCN latency: no public per-hop figure found, so no latency floor is applied over DCN.
    return Link(LinkKind.DCN, per_chip, None, switched=True, across=True, source=source)


@dataclass(frozen=True)
class _TpuGeneration:
    chip: Chip
    ici: Link
    dcn: Link
    rank: int                                  # 2-D or 3-D torus
    shapes: tuple[tuple[int, ...], ...]        # documented slice shapes, Cloud's order
    max_chips: int                             # largest single slice
    cube_wrap: bool   # True: wraparound only on whole 4x4x4 cubes; False: on axes of 16


_TPU = {
    "v4": _TpuGeneration(
        TPU_V4,
        _ici(4.5e10),   # bytes/s one way per link; "TPU v4p ... 4.5e10" BOOK_TPUS ICI table
        # bytes/s per chip; "DCN bandwidth is typically around 6.25e9 bytes / second per TPU"
        # BOOK_TPUS. No v4-specific figure was found; this is the book's typical value.
        _dcn(6.25e9, BOOK_TPUS),
        3,
        # Shapes named in BOOK_TPUS ("2x2x1, 2x2x2 ... 2x2x4 ... 4x4x4 or 4x4x8") and CLOUD_V4
        # ("4x4x8, 4x8x8"), up to the 16x16x16 pod.
        ((2, 2, 1), (2, 2, 2), (2, 2, 4), (2, 4, 4), (4, 4, 4), (4, 4, 8), (4, 8, 8),
         (8, 8, 8), (8, 8, 16), (8, 16, 16), (16, 16, 16)),
        4096,           # chips; "TPU Pod size 4096 chips" CLOUD_V4
        cube_wrap=True,
    ),
    "v5e": _TpuGeneration(
        TPU_V5E,
        _ici(4.5e10),   # bytes/s one way per link; "TPU v5e 4.5e10" BOOK_TPUS ICI table
        # bytes/s per chip; "v5e has 3.125e9 bytes/s" BOOK_TPUS, = CLOUD_V5E's "Data center
        # network bandwidth per Pod 6.4 Tbps" / 256 chips.
        _dcn(3.125e9, BOOK_TPUS),
        2,
        # "The following 2D slice shapes are supported for v5e" CLOUD_V5E
        ((1, 1), (2, 2), (2, 4), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16)),
        256,            # chips; "TPU Pod size 256 chips" CLOUD_V5E
        cube_wrap=False,
    ),
    "v5p": _TpuGeneration(
        TPU_V5P,
        _ici(9e10),     # bytes/s one way per link; "TPU v5p 9e10" BOOK_TPUS ICI table
        # bytes/s per chip; "Data center network (DCN) bandwidth per chip (Gbps) 50" CLOUD_V5P
        _dcn(gbit_per_s(50), CLOUD_V5P),
        3,
        # "the most common single-slice shapes supported with v5p" CLOUD_V5P
        ((2, 2, 1), (2, 2, 2), (2, 4, 4), (4, 4, 4), (4, 4, 8), (4, 8, 8), (8, 8, 8),
         (8, 8, 16), (8, 16, 16), (16, 16, 16), (16, 16, 24)),
        6144,           # chips; "The largest job that can be scheduled is a 96 cube (6144 chip)"
        cube_wrap=True,
    ),
    "v6e": _TpuGeneration(
        TPU_V6E,
        _ici(9e10),     # bytes/s one way per link; "TPU v6e 9e10" BOOK_TPUS ICI table
        # bytes/s per chip; "12.5e9 for TPU v6e" BOOK_TPUS, = CLOUD_V6E's 25.6 Tbps / 256 chips.
        _dcn(12.5e9, BOOK_TPUS),
        2,
        # "the 2D slice shapes that are supported for v6e" CLOUD_V6E
        ((1, 1), (2, 2), (2, 4), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16)),
        256,            # chips; "TPU Pod size 256 chips" CLOUD_V6E
        cube_wrap=False,
    ),
}

# Slices smaller than a cube that v4/v5p offer (no wraparound: "Smaller topologies (e.g. 2x2x1,
# 2x2x2) can also be requested, albeit with no wraparounds" BOOK_TPUS).
_SUBCUBE = {(1, 2, 2), (2, 2, 2), (2, 2, 4), (2, 4, 4)}


def _tpu_wraps(gen: _TpuGeneration, shape: tuple[int, ...]) -> tuple[bool, ...]:
    """Which slice axes close into a ring.

    v4/v5p: "Any multiple of a full cube (e.g. 4x4x4 or 4x4x8) will have wraparounds provided by
    the optical switches ... a 2x2x4 won't have any" (BOOK_TPUS); CLOUD_V4: a torus needs "each
    dimension is a multiple of 4". v5e/v6e: "wraparounds along any axis of size 16 (meaning an
    8x16 has a wraparound on the long axis) ... without wraps on dims < 16" (BOOK_TPUS).
    """
    if gen.cube_wrap:
        whole_cubes = all(d % 4 == 0 for d in shape)
        return tuple(whole_cubes for _ in shape)
    return tuple(d == 16 for d in shape)


def _tpu_shape_ok(gen: _TpuGeneration, shape: tuple[int, ...]) -> bool:
    key = tuple(sorted(shape))
    if key in {tuple(sorted(s)) for s in gen.shapes}:
        return True
    if gen.rank == 3 and len(shape) == 3:
        # Any whole number of 4x4x4 cubes within the largest slice is rentable.
        return (all(d % 4 == 0 for d in shape) and prod(shape) <= gen.max_chips) or \
            key in _SUBCUBE
    return False


# The physical axis of a multi-slice TPU target that joins its slices by DCN (outermost).
SLICE_AXIS = "slice"


def _tpu_target(gen_name: str, shape: tuple[int, ...], slices: int = 1) -> Target:
    gen = _TPU[gen_name]
    shape_text = "x".join(map(str, shape))
    name = f"tpu-{gen_name}-{shape_text}" + (f"-{slices}slices" if slices > 1 else "")
    wraps = _tpu_wraps(gen, shape)
    axes = []
    if slices > 1:
        axes.append(PhysicalAxis(SLICE_AXIS, slices, gen.dcn))
    for dim_name, size, wrap in zip("xyz", shape, wraps, strict=False):
        if size > 1:
            axes.append(PhysicalAxis(dim_name, size, gen.ici, wraparound=wrap and size > 2))
    wrapped = [n for n, s, w in zip("xyz", shape, wraps, strict=False) if w and s > 2]
    topo = f"{gen.rank}-D torus {shape_text}"
    topo += f" (wraparound: {', '.join(wrapped)})" if wrapped else " (no wraparound)"
    if slices > 1:
        topo += f", {slices} slices over DCN"
    return Target(name, TargetFamily.TPU, gen.chip, tuple(axes), topo)


# ---------------------------------------------------------------------------------------------
# NVIDIA GPUs in DGX nodes of 8, joined by InfiniBand (one NIC per GPU).

NVLINK_STEP_LATENCY = 0.6e-6   # s per ring step; NCCL's model: hwLat[NVLINK][Ring][LL] = .6 us
IB_STEP_LATENCY = 2.7e-6       # s per ring step; NCCL's model: hwLat[NET][Ring][LL] = 2.7 us
GPUS_PER_NODE = 8              # "Sets of 8 GPUs called nodes" BOOK_GPUS; DGX A100/H100/H200/B200


@dataclass(frozen=True)
class _GpuGeneration:
    chip: Chip
    nvlink: Link
    ib: Link


def _mamf(tflops: float, peak: float, gpu: str) -> Measured:
    """Maximum achievable bf16 matmul FLOP/s (MAMF), measured over many large shapes."""
    return Measured(tflops / peak, f"{gpu}: {tflops} of {peak} bf16 TFLOP/s in the largest "
                    "matmuls (ml-engineering MAMF table)", ML_ENG_MAMF)


def _ring(busbw: float, spec: float, node: str) -> Measured:
    """NCCL ring bus bandwidth (nccl-tests busbw, 16 GiB, SHARP off) over the one-way spec."""
    return Measured(busbw / spec, f"{node}: NCCL ring busbw {busbw} of {spec} GB/s "
                    "(ml-engineering)", ML_ENG_NVLINK)


def _nvlink(one_way: float, measured: Measured) -> Link:
    return Link(LinkKind.NVLINK, one_way, NVLINK_STEP_LATENCY, switched=True, across=False,
                source=BOOK_GPUS + " ; " + NCCL_TUNING, measured=measured)


def _ib(per_gpu: float, source: str) -> Link:
    return Link(LinkKind.INFINIBAND, per_gpu, IB_STEP_LATENCY, switched=True, across=True,
                source=source + " ; " + NCCL_TUNING)


_GPU = {
    "a100": _GpuGeneration(
        Chip("A100 SXM 80GB", {
            "bfloat16": 312e12,   # FLOP/s dense; "BFLOAT16 Tensor Core 312 TFLOPS" NV_A100
            "float16": 312e12,    # FLOP/s dense; "FP16 Tensor Core 312 TFLOPS" NV_A100
            "float32": 19.5e12,   # FLOP/s; "FP32 19.5 TFLOPS" NV_A100 (no TF32)
            "int8": 624e12,       # OP/s dense; "INT8 Tensor Core 624 TOPS" NV_A100
        },
            memory_bytes=80 * GiB,        # "GPU Memory 80GB HBM2e" NV_A100: 80 GiB (Units)
            # CUDA's total: 85,100,068,864 bytes (79.25 GiB), a100_sxm_80.txtpb XLA_GPU_SPECS
            memory_available=85_100_068_864, available_source=XLA_GPU_SPECS + "a100_sxm_80.txtpb",
            memory_bandwidth=2039 * GB,   # bytes/s; "GPU Memory Bandwidth 2,039GB/s" NV_A100 SXM
            source=NV_A100, matmul_measured=_mamf(271.2, 312, "A100 SXM"),
            host_bandwidth=32 * GB,   # bytes/s one way; "PCIe Gen4: 64GB/s" (both ways) NV_A100
            host_source=NV_A100),
        # bytes/s one way per GPU; NVLink 3.0: 12 ports x 25 GB/s, "Node GPU to GPU bandwidth
        # 300 GB/s full-duplex" BOOK_GPUS; NV_A100: "NVLink 600GB/s" (both directions).
        _nvlink(300 * GB, _ring(234.89, 300, "8x A100 (NVLink 3)")),
        # bytes/s per GPU; DGX A100 "Networking: 8x Single-Port Mellanox ConnectX-6 VPI 200Gb/s
        # HDR InfiniBand", one per GPU (NV_DGX_A100 component specifications).
        _ib(gbit_per_s(200), NV_DGX_A100),
    ),
    "h100": _GpuGeneration(
        Chip("H100 SXM", {
            "bfloat16": 989e12,       # FLOP/s dense; NV_H100 lists 1,979 with sparsity
            "float16": 989e12,        # FLOP/s dense; same
            "float8_e4m3fn": 1979e12,  # FLOP/s dense; NV_H100 lists 3,958 with sparsity
            "float8_e5m2": 1979e12,
            "float32": 67e12,         # FLOP/s; "FP32 67 teraFLOPS" NV_H100
            "int8": 1979e12,          # OP/s dense; NV_H100 lists 3,958 with sparsity
        },
            memory_bytes=80 * GiB,        # "GPU Memory 80GB" NV_H100 SXM: 80 GiB (Units)
            # CUDA's total: 84,942,979,072 bytes (79.11 GiB), h100_sxm.txtpb XLA_GPU_SPECS
            memory_available=84_942_979_072, available_source=XLA_GPU_SPECS + "h100_sxm.txtpb",
            memory_bandwidth=3.35e12,     # bytes/s; "GPU Memory Bandwidth 3.35TB/s" NV_H100
            source=NV_H100, matmul_measured=_mamf(794.5, 989, "H100 SXM"),
            xla_gemm_table="sm_90",   # XLA keys its measured tables by compute capability
            host_bandwidth=64 * GB,   # bytes/s one way; "PCIe Gen5: 128GB/s" (both ways) NV_H100
            host_source=NV_H100),
        # bytes/s one way per GPU; "18 * 25=450GB/s of full-duplex bandwidth" BOOK_GPUS;
        # NV_H100: "NVLink 900GB/s" (both directions).
        _nvlink(450 * GB, _ring(367.61, 450, "8x H200 (NVLink 4, as H100)")),
        # bytes/s per GPU; DGX H100: "eight single-port NVIDIA ConnectX-7 VPI ... up to 400 Gb/s
        # InfiniBand" NV_DGX_H; "each node has 400GB/s of egress bandwidth" BOOK_GPUS.
        _ib(gbit_per_s(400), NV_DGX_H),
    ),
    "h200": _GpuGeneration(
        Chip("H200 SXM", {
            "bfloat16": 989e12,       # FLOP/s dense; NV_H200 lists 1,979 with sparsity
            "float16": 989e12,
            "float8_e4m3fn": 1979e12,  # FLOP/s dense; NV_H200 lists 3,958 with sparsity
            "float8_e5m2": 1979e12,
            "float32": 67e12,         # FLOP/s; "FP32 67 TFLOPS" NV_H200
            "int8": 1979e12,          # OP/s dense
        },
            # "GPU Memory 141GB" NV_H200 (DGX H200: 1,128 GB / 8): 141 GiB, what CUDA reports,
            # 151,397,597,184 bytes (h200.txtpb XLA_GPU_SPECS).
            memory_bytes=141 * GiB,
            memory_available=151_397_597_184, available_source=XLA_GPU_SPECS + "h200.txtpb",
            memory_bandwidth=4.8e12,      # bytes/s; "GPU Memory Bandwidth 4.8TB/s" NV_H200
            # The MAMF table's H100 row: "H200 is the same" (the same compute die).
            source=NV_H200, matmul_measured=_mamf(794.5, 989, "H100/H200 SXM"),
            xla_gemm_table="sm_90",   # the H100's die
            host_bandwidth=64 * GB,   # bytes/s one way; "PCIe Gen5: 128GB/s" (both ways) NV_H200
            host_source=NV_H200),
        # bytes/s one way; NVLink 4 as H100: NV_H200 "NVLink 900GB/s"
        _nvlink(450 * GB, _ring(367.61, 450, "8x H200 (NVLink 4)")),
        _ib(gbit_per_s(400), NV_DGX_H),   # bytes/s per GPU; DGX H200 = DGX H100 networking
    ),
    "b200": _GpuGeneration(
        Chip("B200", {
            # FLOP/s dense; DGX B200: "FP8 72 PFLOPS" with sparsity for 8 GPUs -> 4.5e15 dense
            # FP8 per GPU, half that in bf16; BOOK_GPUS uses 2250e12 bf16, 4.5e15 fp8/int8.
            "bfloat16": 2.25e15,
            "float16": 2.25e15,
            "float8_e4m3fn": 4.5e15,
            "float8_e5m2": 4.5e15,
            "int8": 4.5e15,
            "float32": 80e12,     # FLOP/s; "a B200 can perform 80TFLOPs/s of vector fp32" BOOK_GPUS
        },
            # "8 x NVIDIA B200 GPUs that provide 1,440 GB" NV_DGX_B200: 180 GiB each (Units).
            memory_bytes=180 * GiB,
            # CUDA's total: 191,514,411,008 bytes (178.36 GiB), b200.txtpb XLA_GPU_SPECS
            memory_available=191_514_411_008, available_source=XLA_GPU_SPECS + "b200.txtpb",
            memory_bandwidth=8e12,        # bytes/s; DGX B200 "64 TB/s" / 8; BOOK_GPUS 8.0e12
            source=NV_DGX_B200, matmul_measured=_mamf(1745.0, 2250, "B200 SXM"),
            xla_gemm_table="sm_100_B200"),
        # bytes/s one way per GPU; NVLink 5: "50 GB/s ... 18 ... 900 GB/s" BOOK_GPUS
        # No ring figure was found for NVLink 5; NVLink 4's measured fraction is taken.
        _nvlink(900 * GB, _ring(367.61, 450, "8x H200 (NVLink 4; none found for NVLink 5)")),
        # bytes/s per GPU; DGX B200: "8 x NVIDIA ConnectX-7 ... Up to 400Gbps" NV_DGX_B200
        _ib(gbit_per_s(400), NV_DGX_B200),
    ),
}

_GPU_SIZES = (1, 2, 4, 8)     # GPUs of one node a target may use


# The physical axis of a GPU target's nodes, joined by InfiniBand.
NODE_AXIS = "node"


def _gpu_target(gpu: str, gpus: int, nodes: int = 1) -> Target:
    gen = _GPU[gpu]
    name = f"{gpu}-{gpus}" + (f"x{nodes}" if nodes > 1 else "")
    axes = []
    if nodes > 1:
        axes.append(PhysicalAxis(NODE_AXIS, nodes, gen.ib))
    if gpus > 1:
        axes.append(PhysicalAxis("gpu", gpus, gen.nvlink))
    if nodes > 1:
        topo = f"{nodes} DGX nodes x {gpus} GPUs (NVLink in a node, InfiniBand across)"
    else:
        topo = f"{gpus} GPU{'s' if gpus > 1 else ''} of one NVLink node"
    return Target(name, TargetFamily.GPU, gen.chip, tuple(axes), topo)


# ---------------------------------------------------------------------------------------------
# Graphcore Bow-2000: 4 Bow IPUs in a 1U machine.

BOW_IPU = Chip(
    "Bow IPU",
    {
        "float16": 1.4e15 / 4,   # FLOP/s; "4x Bow IPUs, 1.4 petaFLOPS FP16.16 AI compute" BOW_2000
    },
    memory_bytes=3.6 * GB / 4,   # bytes; "3.6GB In-Processor-Memory" for 4 IPUs, BOW_2000
    # No public figure for In-Processor-Memory bandwidth was found: no memory roofline.
    memory_bandwidth=None,
    memory_kind="In-Processor-Memory",
    source=BOW_2000,
)
# bytes/s; "IPU-Link - 512Gbps for communication within Bow Pods" BOW_2000. The datasheet does
# not say per IPU or per direction, nor the wiring; we take it as each IPU's one-way egress
# into an any-to-any fabric. No public latency figure: no latency floor.
IPU_LINK = Link(LinkKind.IPU_LINK, gbit_per_s(512), None, switched=True, across=False,
                source=BOW_2000)


def _bow_target() -> Target:
    return Target("bow-2000", TargetFamily.IPU, BOW_IPU, (PhysicalAxis("ipu", 4, IPU_LINK),),
                  "4 IPUs joined by IPU-Links",
                  notes=("IPU-Link bandwidth per IPU and wiring are our reading of the "
                         "datasheet's single 512 Gbps figure",))


CPU_HOST = Chip("CPU host", {}, None, None, source="")


def _cpu_target() -> Target:
    return Target("cpu", TargetFamily.CPU, CPU_HOST, (), "fake devices sharing one host")


# ---------------------------------------------------------------------------------------------
# The catalog.

def _catalog() -> dict[str, Target]:
    out: dict[str, Target] = {}

    def add(t: Target) -> None:
        out[t.name] = t

    for gen_name in ("v5e", "v6e", "v4", "v5p"):
        for shape in _TPU[gen_name].shapes:
            add(_tpu_target(gen_name, shape))
    add(_tpu_target("v5e", (16, 16), 2))
    add(_tpu_target("v5e", (16, 16), 4))
    add(_tpu_target("v6e", (16, 16), 2))
    add(_tpu_target("v5p", (8, 16, 16), 2))
    for gpu in _GPU:
        for g in _GPU_SIZES:
            add(_gpu_target(gpu, g))
        for nodes in (2, 4, 16, 32):
            add(_gpu_target(gpu, GPUS_PER_NODE, nodes))
    add(_bow_target())
    add(_cpu_target())
    return out


_CATALOG = _catalog()

_TPU_NAME = re.compile(r"tpu-(?P<gen>v\w+?)-(?P<shape>\d+(?:x\d+)*)(?:-(?P<slices>\d+)slices)?")
_GPU_NAME = re.compile(r"(?P<gpu>[a-z]\d+)-(?P<gpus>\d+)(?:x(?P<nodes>\d+))?")


def targets() -> dict[str, Target]:
    """The named targets, in listing order (TPUs by generation, GPUs, IPU, CPU).

    get_target() also accepts any other valid name of the same grammar, such as
    ``tpu-v5e-8x4`` or ``h100-8x64``.

    Returns:
        Name -> Target; a new dict on each call.
    """
    return dict(_CATALOG)


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


def get_target(name: str | Target) -> Target:
    """The Target called `name`; the error lists the valid names and the name grammar.

    Args:
        name: a catalog name (see targets()) or any name of the grammar in this module's
            docstring, case and surrounding spaces ignored; a Target is returned as it is.

    Returns:
        The Target.

    Raises:
        TargetError: an unknown name, a TPU generation or slice shape that does not exist,
            or a GPU count that is not a node or whole nodes.

    Example:
        >>> from explorer import get_target
        >>> t = get_target("h100-8x4")          # 4 DGX nodes of 8 GPUs
        >>> t.chips, [(a.name, a.size) for a in t.axes]
        (32, [('node', 4), ('gpu', 8)])
    """
    if isinstance(name, Target):
        return name
    if not isinstance(name, str):
        raise TargetError(f"target {name!r} is not a name; {_grammar()}")
    key = name.strip().lower()
    if key in _CATALOG:
        return _CATALOG[key]
    m = _TPU_NAME.fullmatch(key)
    if m:
        return _parse_tpu(name, m)
    m = _GPU_NAME.fullmatch(key)
    if m and m["gpu"] in _GPU:
        return _parse_gpu(name, m)
    raise TargetError(f"unknown target {name!r}; {_grammar()}", target=name)


def _grammar() -> str:
    gens = ", ".join(f"'tpu-{g}-...'" for g in _TPU)
    return (f"valid targets: {choices(_CATALOG)}. Also any valid TPU slice ({gens}, "
            "plus '-<N>slices' for several slices over DCN) and any "
            f"'<gpu>-8x<N>' for N DGX nodes, gpu one of {choices(_GPU)}")


def _parse_tpu(name: str, m: re.Match) -> Target:
    gen_name = m["gen"]
    if gen_name not in _TPU:
        raise TargetError(f"unknown TPU generation {gen_name!r} in {name!r}; generations: "
                          f"{choices(_TPU)}", target=name)
    gen = _TPU[gen_name]
    shape = tuple(int(d) for d in m["shape"].split("x"))
    if len(shape) != gen.rank or not _tpu_shape_ok(gen, shape):
        listed = ", ".join("x".join(map(str, s)) for s in gen.shapes)
        more = (" or any whole number of 4x4x4 cubes up to "
                f"{gen.max_chips} chips" if gen.rank == 3 else "")
        raise TargetError(f"{name!r}: TPU {gen_name} has no {m['shape']} slice; TPU "
                          f"{gen_name} slices are {listed}{more} (axes in either order)",
                          target=name)
    slices = int(m["slices"]) if m["slices"] else 1
    if slices < 1:
        raise TargetError(f"{name!r}: the slice count must be at least 1", target=name)
    return _tpu_target(gen_name, shape, slices)


def _parse_gpu(name: str, m: re.Match) -> Target:
    gpus = int(m["gpus"])
    nodes = int(m["nodes"]) if m["nodes"] else 1
    if nodes > 1 and gpus != GPUS_PER_NODE:
        raise TargetError(f"{name!r}: multi-node targets use whole nodes of "
                          f"{GPUS_PER_NODE} GPUs, e.g. '{m['gpu']}-8x{nodes}'", target=name)
    if nodes < 1:
        raise TargetError(f"{name!r}: the node count must be at least 1, e.g. "
                          f"'{m['gpu']}-8x2' for 2 nodes of {GPUS_PER_NODE} GPUs", target=name)
    if gpus not in _GPU_SIZES:
        raise TargetError(f"{name!r}: a node has {GPUS_PER_NODE} GPUs; write "
                          f"'{m['gpu']}-G' with G in {choices(_GPU_SIZES)} or "
                          f"'{m['gpu']}-8xN' for N nodes", target=name)
    return _gpu_target(m["gpu"], gpus, nodes)


def tpu_generations() -> dict[str, int]:
    """The catalog's TPU generations (the names jax's topology strings use, e.g. 'v5e'), each with
    the number of dimensions of its torus."""
    return {name: gen.rank for name, gen in _TPU.items()}


def tpu_topology_of(target: Target) -> str | None:
    """jax's topology name of a one-slice TPU target (`tpu-v5e-4x4` -> `v5e:4x4`); None for a
    target of several slices."""
    slices = tpu_slices_of(target)
    return slices[0] if slices is not None and slices[1] == 1 else None


def tpu_slices_of(target: Target) -> tuple[str, int] | None:
    """jax's topology name of a TPU target's slice and how many of them it joins by DCN:
    `tpu-v5e-4x4` -> ("v5e:4x4", 1), `tpu-v5e-16x16-4slices` -> ("v5e:16x16", 4); None for a
    target that is no TPU slice."""
    m = _TPU_NAME.fullmatch(target.name)
    if m is None or m["gen"] not in tpu_generations():
        return None
    return f"{m['gen']}:{m['shape']}", int(m["slices"] or 1)


# Multi-node GPU targets up to this many nodes, and multi-slice TPU targets of slices of at
# least this many chips, up to this many slices, are offered for a device count
# (targets_with_chips); the grammar accepts larger ones.
MAX_GPU_NODES = 128
MIN_SLICE_CHIPS = 16
MAX_SLICES = 64


def _tpu_shapes_with(gen: _TpuGeneration, n: int) -> list[tuple[int, ...]]:
    """The slice shapes of `gen` with n chips: the documented ones in Cloud's order, then (3-D
    tori) every other whole number of 4x4x4 cubes, smallest axis first."""
    out = [s for s in gen.shapes if prod(s) == n]
    if gen.rank == 3 and n <= gen.max_chips:
        for a in range(4, n + 1, 4):
            for b in range(a, n // a + 1, 4):
                c, rest = divmod(n, a * b)
                if not rest and c >= b and c % 4 == 0 and \
                        sorted((a, b, c)) not in [sorted(s) for s in out]:
                    out.append((a, b, c))
    return out


def targets_with_chips(n: int) -> list[str]:
    """Every target name of the grammar with exactly n devices, by family: NVIDIA nodes (one
    node's 1, 2, 4 or 8 GPUs, or 2 to MAX_GPU_NODES whole nodes of 8), GPUs first where n is a
    multiple of 8; then each TPU generation's slices of n chips, then its multi-slice targets
    (2 to MAX_SLICES slices of at least MIN_SLICE_CHIPS chips, one documented shape each)."""
    if n < 1:
        return []
    gpus = []
    for gpu in ("h100", "h200", "a100", "b200"):
        if n in _GPU_SIZES:
            gpus.append(f"{gpu}-{n}")
        elif n % GPUS_PER_NODE == 0 and 2 <= n // GPUS_PER_NODE <= MAX_GPU_NODES:
            gpus.append(f"{gpu}-{GPUS_PER_NODE}x{n // GPUS_PER_NODE}")
    tpus = []
    for gen_name in ("v5e", "v5p", "v6e", "v4"):
        gen = _TPU[gen_name]
        tpus += [f"tpu-{gen_name}-{'x'.join(map(str, s))}" for s in _tpu_shapes_with(gen, n)]
        for slices in range(2, MAX_SLICES + 1):
            if n % slices or n // slices < MIN_SLICE_CHIPS:
                continue
            shape = next((s for s in gen.shapes if prod(s) == n // slices), None)
            if shape is not None:
                tpus.append(f"tpu-{gen_name}-{'x'.join(map(str, shape))}-{slices}slices")
    return gpus + tpus if n % GPUS_PER_NODE == 0 else tpus + gpus


# The dtypes a program computes in on every target: jax and XLA compile them for the CPU, the
# GPUs and the TPUs alike.
COMPUTE_DTYPES = ("float32", "bfloat16", "float16")
_FP8 = ("float8_e4m3fn", "float8_e5m2")


def compute_dtypes(target: str | Target | None = None) -> tuple[str, ...]:
    """The dtypes a workload may compute in on `target`: float32, bfloat16 and float16
    everywhere, and the 8-bit floats where the chip has a published rate for them (H100, H200,
    B200); for no target, the three."""
    if not target:
        return COMPUTE_DTYPES
    chip = get_target(target).chip
    return COMPUTE_DTYPES + tuple(d for d in _FP8 if d in chip.peak_flops)
