"""The catalog's TPU generations: each chip (peak rates, HBM, the measured fractions), its ICI
and DCN links, the slice shapes Google rents and which of their axes wrap around, and the
target of a slice shape (`tpu-v5e-16x16`, `-<N>slices` over DCN)."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from explorer._src.cost.catalog.sources import (
    BOOK_REPO,
    BOOK_SHARDING,
    BOOK_TPUS,
    CLOUD_V4,
    CLOUD_V5E,
    CLOUD_V5P,
    CLOUD_V6E,
    GB,
    LIBTPU_HBM,
    GiB,
    gbit_per_s,
)
from explorer._src.cost.catalog.types import (
    Chip,
    Link,
    LinkKind,
    Measured,
    PhysicalAxis,
    SortingRates,
    Target,
    TargetFamily,
    VectorUnit,
)

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
# times and the matmul waits on HBM (explorer/_src/cost/tiling.py prices those bytes). Smaller
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
TPU_V5E_SORT_RUN = "benchmarks/results/tpu-v5e-2026-12-07/unmeasured/unmeasured.json"
# Sorts and TopK on one TPU v5e chip, jax 0.10.2, 2026-12-07 (benchmarks/tpu_unmeasured.py),
# fitted on the two sorts and the one TopK measured first, and held against eight others
# measured after (tpu-v5e-2026-12-07/census-kinds; docs/cost-model.md, "Sorts and top-k"):
# - sort_16m: sort(f32[2^24]) with its iota, sort.6 42.787 ms: 2^24 keys x 300 passes (L = 24)
#   = 8.501 ps per key per pass;
# - argsort_4m: argsort(f32[2^22]), sort.0 8.35 ms (more-kinds/log-1.txt): 2^22 x 253 passes
#   (L = 22) = 7.869 ps. The two give 0.917 ps + 0.316 ps x L;
# - top_k_rows: top_k(f32[8192,32000], 64), TopK 54.560 ms: 3.252 ps per key per k.
_V5E_SORTING = SortingRates(
    0.917e-12, 0.316e-12, 3.252e-12,
    "a sort of 2^24 floats, an argsort of 2^22 and a top-64 of 8192 rows of 32000 on one TPU "
    "v5e chip (benchmarks/tpu_unmeasured.py, jax 0.10.2, 2026-12-07)", TPU_V5E_SORT_RUN)
_V5E_VECTOR = VectorUnit(
    5.87e12, 3.5, 3.69e11,
    "elementwise chains and one-hot reductions on one TPU v5e chip (benchmarks/tpu_measure.py "
    "--part vector, jax 0.10.2, 2026-12-06)", TPU_V5E_VECTOR_RUN, _V5E_SORTING)
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
    dims = "xyz"[:len(shape)]        # a 2-D torus's dimensions are x and y
    axes = []
    if slices > 1:
        axes.append(PhysicalAxis(SLICE_AXIS, slices, gen.dcn))
    for dim_name, size, wrap in zip(dims, shape, wraps, strict=True):
        if size > 1:
            axes.append(PhysicalAxis(dim_name, size, gen.ici, wraparound=wrap and size > 2))
    wrapped = [n for n, s, w in zip(dims, shape, wraps, strict=True) if w and s > 2]
    topo = f"{gen.rank}-D torus {shape_text}"
    topo += f" (wraparound: {', '.join(wrapped)})" if wrapped else " (no wraparound)"
    if slices > 1:
        topo += f", {slices} slices over DCN"
    return Target(name, TargetFamily.TPU, gen.chip, tuple(axes), topo)


def tpu_generations() -> dict[str, int]:
    """The catalog's TPU generations (the names jax's topology strings use, e.g. 'v5e'), each with
    the number of dimensions of its torus."""
    return {name: gen.rank for name, gen in _TPU.items()}


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
