"""The units the catalog's figures are written in, and the public sources they cite by name
(the scaling book, the vendors' pages, XLA's device descriptions, NCCL's model, the measured
fractions' tables)."""

from __future__ import annotations

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
# jax.lax.Precision's documentation: what DEFAULT, HIGH and HIGHEST do on TPUs and GPUs.
JAX_LAX_PRECISION = "https://docs.jax.dev/en/latest/_autosummary/jax.lax.Precision.html"
NV_A100 = "https://www.nvidia.com/en-us/data-center/a100/"
NV_H100 = "https://www.nvidia.com/en-us/data-center/h100/"
NV_H200 = "https://www.nvidia.com/en-us/data-center/h200/"
NV_DGX_A100 = "https://docs.nvidia.com/dgx/dgxa100-user-guide/introduction-to-dgxa100.html"
NV_DGX_H = ("https://docs.nvidia.com/dgx-basepod/reference-architecture-infrastructure-"
            "foundation-enterprise-ai/latest/core-components.html")
# HGX B200's per-GPU table: "TF32 Tensor Core 2.2 PFLOPS", with sparsity like its other tensor
# figures ("FP16/BF16 Tensor Core 4.5 PFLOPS", twice the 2.25 dense the catalog uses).
NV_HGX = "https://www.nvidia.com/en-us/data-center/hgx/"
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
