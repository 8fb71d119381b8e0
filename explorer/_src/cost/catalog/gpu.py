"""The catalog's NVIDIA GPUs in DGX nodes of 8 (A100, H100, H200, B200): each chip (peak
rates, HBM, the measured fractions), its NVLink and InfiniBand links, and the target of G
GPUs of one node or N whole nodes (`h100-8`, `h100-8x4`)."""

from __future__ import annotations

from dataclasses import dataclass

from explorer._src.cost.catalog.sources import (
    BOOK_GPUS,
    GB,
    ML_ENG_MAMF,
    ML_ENG_NVLINK,
    NCCL_TUNING,
    NV_A100,
    NV_DGX_A100,
    NV_DGX_B200,
    NV_DGX_H,
    NV_H100,
    NV_H200,
    XLA_GPU_SPECS,
    GiB,
    gbit_per_s,
)
from explorer._src.cost.catalog.types import (
    Chip,
    Link,
    LinkKind,
    Measured,
    PhysicalAxis,
    Target,
    TargetFamily,
)

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
            "float32": 19.5e12,   # FLOP/s; "FP32 19.5 TFLOPS" NV_A100
            # FLOP/s dense; "Tensor Float 32 (TF32) 156 TFLOPS | 312 TFLOPS*" (* with
            # sparsity) NV_A100: what jax runs float32 matmuls at by default (JAX_LAX_PRECISION)
            "tf32": 156e12,
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
            "tf32": 494.5e12,     # FLOP/s dense; NV_H100 lists TF32 989 with sparsity
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
            "tf32": 494.5e12,     # FLOP/s dense; NV_H200 lists TF32 989 with sparsity
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
            "tf32": 1.1e15,   # FLOP/s dense; NV_HGX: "TF32 Tensor Core 2.2 PFLOPS" sparse
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
