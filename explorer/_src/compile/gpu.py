"""NVIDIA GPU targets for ahead-of-time compiles with no GPU present (XLA's GPU compiler).

jax's CUDA plugin (the `gpu` extra, `jax[cuda12]`) compiles for a GPU it is only told about:
`jax.experimental.topologies.get_topology_desc(platform="cuda", topology=..., target_config=...)`
returns devices of that GPU, built from a `GpuTargetConfigProto` in text form, and
`jit(f).lower(...).compile()` then runs XLA's whole GPU pipeline (its fusions, Triton and cuBLAS
gemms, async collectives, the latency-hiding scheduler and buffer assignment) with no device.

The device description is written here from facts about each chip, each with its source; the
memory size and bandwidth are the hardware catalog's (explorer/_src/cost/catalog/gpu.py), so the
compiler and the cost model see one chip. explorer/_src/api/targeting.py decides, before any worker
starts, whether a request compiles here (the plugin installed, the target a GPU this module
describes).
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer._src.cost.catalog.names import get_target
from explorer._src.cost.catalog.types import Target
from explorer._src.cost.gemm_rates import plugin_binary
from explorer._src.errors import TargetError, choices

# Sources, cited by name below.
CUDA_GUIDE = ("https://docs.nvidia.com/cuda/cuda-c-programming-guide/"
              "#features-and-technical-specifications")   # "Technical Specifications per CC"
NV_A100_ARCH = ("https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/"
                "nvidia-ampere-architecture-whitepaper.pdf")
NV_H100_ARCH = "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper"
NV_B200_ARCH = "https://resources.nvidia.com/en-us-blackwell-architecture"

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class GpuChip:
    """What XLA's GPU compiler needs to know of one NVIDIA chip beyond the catalog's memory:
    its compute capability (which instructions and Triton features exist), SM count and
    clock (its cost model and tiling), and per-SM limits (block sizes, shared memory)."""

    device_name: str                 # as the CUDA driver names the device (device_kind)
    compute_capability: tuple[int, int]
    sms: int                         # streaming multiprocessors
    fp32_cores_per_sm: int
    clock_ghz: float                 # boost clock of the SMs
    l2_bytes: int
    shared_memory_per_sm: int        # bytes, the largest carve-out
    shared_memory_per_block_optin: int   # bytes a block may opt in to
    source: str


# The per-CC limits are the CUDA C++ Programming Guide's table "Technical Specifications per
# Compute Capability" (CUDA_GUIDE): 8.0, 9.0 and 10.0 all allow 1024 threads a block, 2048
# threads and 64 K 32-bit registers an SM, 48 KB of static shared memory a block.
THREADS_PER_BLOCK = 1024
THREADS_PER_SM = 2048
REGISTERS_PER_SM = 64 * KiB
STATIC_SHARED_PER_BLOCK = 48 * KiB
WARP = 32

GPU_CHIPS: dict[str, GpuChip] = {
    # The catalog's generation names (cost/catalog/gpu.py) -> chip.
    "a100": GpuChip(
        "NVIDIA A100-SXM4-80GB", (8, 0),
        sms=108,                      # "The A100 GPU includes 108 SMs" NV_A100_ARCH
        fp32_cores_per_sm=64,         # "64 FP32 CUDA Cores/SM" NV_A100_ARCH, Table 1
        clock_ghz=1.41,               # "GPU Boost Clock 1410 MHz" NV_A100_ARCH, Table 1
        l2_bytes=40 * MiB,            # "40 MB L2 cache" NV_A100_ARCH
        shared_memory_per_sm=164 * KiB,          # CUDA_GUIDE, CC 8.0: 164 KB per SM
        shared_memory_per_block_optin=163 * KiB,  # CUDA_GUIDE, CC 8.0: 163 KB per block
        source=NV_A100_ARCH),
    "h100": GpuChip(
        "NVIDIA H100 80GB HBM3", (9, 0),
        sms=132,                      # "The H100 SXM5 GPU has 132 SMs" NV_H100_ARCH
        fp32_cores_per_sm=128,        # "128 FP32 CUDA Cores per SM" NV_H100_ARCH
        clock_ghz=1.98,               # SXM5 max SM clock, 1,980 MHz, as the driver reports it
        l2_bytes=50 * MiB,            # "50 MB L2 cache" NV_H100_ARCH
        shared_memory_per_sm=228 * KiB,          # CUDA_GUIDE, CC 9.0: 228 KB per SM
        shared_memory_per_block_optin=227 * KiB,  # CUDA_GUIDE, CC 9.0: 227 KB per block
        source=NV_H100_ARCH),
    # H200: the H100's GH100 die with 141 GB of HBM3e (the catalog's memory figures).
    "h200": GpuChip(
        "NVIDIA H200", (9, 0), sms=132, fp32_cores_per_sm=128, clock_ghz=1.98,
        l2_bytes=50 * MiB, shared_memory_per_sm=228 * KiB,
        shared_memory_per_block_optin=227 * KiB, source=NV_H100_ARCH),
    "b200": GpuChip(
        "NVIDIA B200", (10, 0),
        sms=148,                      # two dies of 74 SMs as the driver reports them
        fp32_cores_per_sm=128,        # 128 FP32 cores per SM, as Hopper (NV_B200_ARCH)
        clock_ghz=1.965,              # boost clock the driver reports, 1,965 MHz
        l2_bytes=126 * MiB,           # 126 MB of L2 over both dies (NV_B200_ARCH)
        shared_memory_per_sm=228 * KiB,          # CUDA_GUIDE, CC 10.0: 228 KB per SM
        shared_memory_per_block_optin=227 * KiB,  # CUDA_GUIDE, CC 10.0: 227 KB per block
        source=NV_B200_ARCH),
}


@dataclass(frozen=True)
class GpuTopology:
    """The GPUs of one target as the compiler sees them: `nodes` hosts of `gpus_per_node`
    GPUs, and the device description of the chip (a GpuTargetConfigProto in text form)."""

    target: str                      # the catalog name, e.g. "h100-8x4"
    chip: str                        # the generation, e.g. "h100"
    nodes: int
    gpus_per_node: int
    config: str

    @property
    def devices(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def topology(self) -> str:
        # jax's GPU topology grammar: "<slices>x<hosts per slice>x<devices per host>".
        return f"1x{self.nodes}x{self.gpus_per_node}"


def gpu_plugin_installed() -> bool:
    """Whether XLA's GPU compiler is installed: jax's CUDA PJRT plugin (`jax_plugins.xla_cuda12`
    and its binary, which jax registers as the cuda platform). That plugin, not the CUDA kernels'
    `jax_cuda12_plugin` beside it, is what `get_topology_desc(platform="cuda")` needs: with
    only the latter importable, a worker raised "topology not implemented for cuda"."""
    return plugin_binary() is not None


GPU_EXTRA_NOTE = ("install the gpu extra for the GPU compiler's own program: pip install "
                  "'sharding-explorer[gpu]' (about 5 GB of CUDA wheels; no GPU needed)")


def gpu_topology(target: str | Target) -> GpuTopology:
    """The compiler's view of a GPU target of the catalog; TargetError for a target that is
    not an NVIDIA GPU this module can describe."""
    t = get_target(target)
    generation = t.name.split("-", 1)[0]
    if t.family != "gpu" or generation not in GPU_CHIPS:
        raise TargetError(
            f"target {t.name!r} is not a GPU the GPU compiler can be told about; GPU "
            f"generations: {choices(GPU_CHIPS)}, e.g. 'h100-8' or 'h100-8x4'", target=t.name)
    sizes = {a.name: a.size for a in t.axes}
    return GpuTopology(t.name, generation, sizes.get("node", 1), sizes.get("gpu", 1),
                       target_config(generation, t))


def target_config(generation: str, target: Target) -> str:
    """The GpuTargetConfigProto text of one chip: what `get_topology_desc` builds the
    compiler's device description from."""
    chip = GPU_CHIPS[generation]
    major, minor = chip.compute_capability
    fields = {
        "threads_per_block_limit": THREADS_PER_BLOCK,
        "threads_per_warp": WARP,
        "shared_memory_per_block": STATIC_SHARED_PER_BLOCK,
        "shared_memory_per_core": chip.shared_memory_per_sm,
        "threads_per_core_limit": THREADS_PER_SM,
        "core_count": chip.sms,
        "fpus_per_core": chip.fp32_cores_per_sm,
        # CUDA's grid limits (CUDA_GUIDE): 2**31 - 1 blocks in x, 65535 in y and z.
        "block_dim_limit_x": 2**31 - 1,
        "block_dim_limit_y": 65535,
        "block_dim_limit_z": 65535,
        "memory_bandwidth": int(target.chip.memory_bandwidth or 0),
        "l2_cache_size": chip.l2_bytes,
        "clock_rate_ghz": chip.clock_ghz,
        # What CUDA reports to programs, as XLA's own device descriptions have it.
        "device_memory_size": int(target.chip.capacity or 0),
        "shared_memory_per_block_optin": chip.shared_memory_per_block_optin,
        "registers_per_core_limit": REGISTERS_PER_SM,
        "registers_per_block_limit": REGISTERS_PER_SM,
    }
    lines = [f"  {k}: {v}" for k, v in fields.items()]
    lines.append(f"  cuda_compute_capability {{ major: {major} minor: {minor} }}")
    # cuDNN 9 is what the CUDA 12 wheels of this jax bring; XLA gates cuDNN fusions on it.
    return ("gpu_device_info {\n" + "\n".join(lines) + "\n}\n"
            'platform_name: "CUDA"\n'
            "dnn_version_info { major: 9 minor: 0 }\n"
            f'device_description_str: "{chip.device_name}"\n')


def gpu_devices(topology: GpuTopology) -> list:
    """Inside a worker (JAX_PLATFORMS=cpu, JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1): the devices of
    the topology, for compiling without a GPU."""
    from jax.experimental import topologies

    return list(topologies.get_topology_desc(platform="cuda", topology=topology.topology,
                                             target_config=topology.config).devices)
