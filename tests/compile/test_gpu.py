"""GPU targets for ahead-of-time compiles: the device description written for XLA's GPU
compiler, the topology of a target, and the checks before any worker starts. No compile here;
tests/compile/test_gpu_compile.py compiles for real."""

import re

import pytest

import explorer
from explorer._src.compile.gpu import GPU_CHIPS, gpu_topology, target_config
from explorer._src.cost.catalog.names import get_target
from explorer._src.errors import TargetError


def _field(config: str, name: str) -> str:
    return re.search(rf"\b{name}: (\S+)", config).group(1)


@pytest.mark.parametrize("name, nodes, gpus, topology", [
    ("h100-8", 1, 8, "1x1x8"),          # one DGX node of 8
    ("h100-8x4", 4, 8, "1x4x8"),        # 4 nodes of 8 = 32 GPUs
    ("a100-2", 1, 2, "1x1x2"),
    ("b200-8x128", 128, 8, "1x128x8"),  # 1024 GPUs
    ("h200-1", 1, 1, "1x1x1"),
])
def test_a_gpu_target_is_nodes_times_gpus_per_node(name, nodes, gpus, topology):
    t = gpu_topology(name)
    assert (t.nodes, t.gpus_per_node, t.topology) == (nodes, gpus, topology)
    assert t.devices == nodes * gpus == get_target(name).chips


def test_every_gpu_generation_of_the_catalog_has_a_chip_description():
    gpus = {n.split("-")[0] for n, t in explorer.targets().items() if t.family == "gpu"}
    assert gpus == set(GPU_CHIPS) == {"a100", "h100", "h200", "b200"}


def test_the_h100_description_carries_its_sm_count_compute_capability_and_catalog_memory():
    config = target_config("h100", get_target("h100-8"))
    assert _field(config, "core_count") == "132"       # H100 SXM5: 132 SMs
    assert "cuda_compute_capability { major: 9 minor: 0 }" in config
    # What CUDA gives programs of the H100's 80 GiB (XLA's own h100_sxm description, which the
    # catalog's capacity is), and 3.35 TB/s: the compiler and the cost model see one chip.
    assert int(_field(config, "device_memory_size")) == 84_942_979_072
    assert int(_field(config, "memory_bandwidth")) == 3_350_000_000_000
    assert 'device_description_str: "NVIDIA H100 80GB HBM3"' in config


def test_the_a100_is_compute_capability_8_with_108_sms_and_164_kib_shared_memory_per_sm():
    config = target_config("a100", get_target("a100-8"))
    assert _field(config, "core_count") == "108"
    assert "cuda_compute_capability { major: 8 minor: 0 }" in config
    assert int(_field(config, "shared_memory_per_core")) == 164 * 1024


def test_a_tpu_target_is_not_a_gpu_and_the_error_names_the_gpu_generations():
    with pytest.raises(TargetError, match=r"'tpu-v5e-4x4' is not a GPU .*GPU generations: "
                                            r"'a100', 'h100', 'h200', 'b200'"):
        gpu_topology("tpu-v5e-4x4")
