"""Measured runs on the fake CPU devices, and ahead-of-time compiles for TPU topologies."""

import importlib.util

import pytest

import explorer
from explorer import analyze, analyze_workload

MEGATRON = {"x": "data,None", "w1": "None,model", "w2": "model,None"}
_NO_LIBTPU = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                                  reason="libtpu (the tpu extra) is not installed")


def needs_libtpu(test):
    """A test that compiles for a TPU topology: marked `tpu`, skipped without libtpu."""
    return pytest.mark.tpu(_NO_LIBTPU(test))


@pytest.mark.slow
def test_measure_runs_the_program_and_says_where():
    r = analyze_workload("mlp", "data=2,model=4", specs=MEGATRON, params={"batch": 64},
                         measure=True)
    assert r.timing.measured_s > 0
    assert r.timing.measured_on == "8 cpu device(s) of this host"


@pytest.mark.slow
def test_measure_refuses_inputs_over_the_cap():
    # 2^16 × 2^12 floats = 1 GiB per device on one device, plus w: over the 1 GiB cap.
    r = analyze(lambda x: x * 2, explorer.TensorSpec("x", (2**16, 2**13)), mesh="d=1",
                measure=True)
    assert r.timing.measured_s is None
    assert "over the cap on a run of CPU devices (1073741824 bytes)" in r.timing.measure_note


class _Chip:
    """A device as jax's runtime shows an accelerator: its memory_stats has the bytes a
    program may hold."""
    platform = "tpu"

    def __init__(self, stats):
        self._stats = stats

    def memory_stats(self):
        return self._stats


def test_a_run_on_an_accelerator_is_bounded_by_its_own_memory_not_the_cpu_cap():
    from explorer._src.compile.backend import _run_cap

    # A v5e chip's runtime reports 15.75 GiB; the CPU cap of 1 GiB must not apply there.
    hbm = 16_909_336_576
    assert _run_cap(_Chip({"bytes_limit": hbm}), 1 << 30) == (hbm, "the device's memory")
    # A runtime that reports no memory keeps the cap.
    assert _run_cap(_Chip(None), 1 << 30) == (1 << 30, "the cap on a run of CPU devices")


def test_a_run_out_of_device_memory_is_a_note_not_a_failure():
    import jax
    import numpy as np
    from jax.sharding import Mesh

    from explorer._src.compile.backend import _measure

    def refused(*_):
        raise RuntimeError("RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to "
                           "allocate 4.00G. That was not possible. There are 1.2G free.; "
                           "(0x0x0_HBM0): out of memory")

    mesh = Mesh(np.array(jax.devices()[:1]), ("d",))
    m = _measure(refused, (explorer.TensorSpec("x", (8, 8)),), mesh, 1 << 30)
    assert m.seconds is None
    assert m.note.startswith("not measured: the run ran out of device memory")
    assert "Attempting to allocate 4.00G" in m.note


def test_bad_tpu_topology_names_the_format():
    with pytest.raises(explorer.ExplorerError, match="'v5x:4x4' is not written as"):
        analyze_workload("mlp", "data=16", tpu_topology="v5x:4x4")
    with pytest.raises(explorer.ExplorerError, match="a v4 slice has 3 dimensions"):
        analyze_workload("mlp", "data=16", tpu_topology="v4:4x4")


@needs_libtpu
def test_tpu_chip_count_must_match_the_mesh():
    with pytest.raises(explorer.MeshError, match="has 16 chips but mesh 'data=8' has 8"):
        analyze_workload("mlp", "data=8", tpu_topology="v5e:4x4")


@needs_libtpu
@pytest.mark.slow
def test_tpu_compile_keeps_bf16_and_carries_xla_estimate():
    r = analyze_workload("mlp", "data=2,model=4", specs=MEGATRON, tpu_topology="v5e:2x4",
                         params={"dtype": "bfloat16"})
    assert r.backend == "tpu v5e:2x4"
    [c] = r.collectives
    # The TPU moves bf16 (unlike the CPU backend): V = 128 × 1024 × 2 bytes.
    assert (c.kind, c.axes, c.dtype, c.bytes) == ("all-reduce", ("model",), "bfloat16",
                                                  128 * 1024 * 2)
    assert c.operand_dtype == ""
    assert r.cost.xla_optimal_seconds > 0
    assert r.to_dict()["mesh"]["backend"] == "tpu v5e:2x4"
    # Not asked to measure, so no note why it was not measured.
    assert r.timing.measure_note == "" and r.timing.measured_s is None
    # TPU layouts are tiled: the optimized HLO carries T(8,128) tiles.
    assert ":T(" in r.optimized_hlo


@needs_libtpu
def test_measure_asked_on_a_tpu_target_says_why_not():
    r = analyze_workload("mlp", "data=2,model=4", specs=MEGATRON, tpu_topology="v5e:2x4",
                         measure=True)
    assert r.timing.measured_s is None
    assert "not measured: compiled ahead of time for a TPU" in r.timing.measure_note


@needs_libtpu
@pytest.mark.slow
def test_full_v4_pod_train_step_compiles():
    # 4096 chips: over the 2048 fake-CPU-device limit, but a TPU topology brings its own.
    r = analyze_workload("mlp_train", "data=64,model=64", preset="fsdp_tp",
                         tpu_topology="v4:16x16x16")
    assert r.mesh.device_count == 4096
    assert r.collectives and {c.axes for c in r.collectives} <= {("data",), ("model",)}


def test_without_libtpu_the_error_says_how_to_install_it(monkeypatch):
    from explorer._src.compile import tpu as _tpu

    monkeypatch.setattr(_tpu.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(explorer.ExplorerError, match=r"pip install 'sharding-explorer\[tpu\]'"):
        analyze_workload("mlp", "data=8", tpu_topology="v5e:2x4")


@pytest.mark.slow
def test_real_devices_use_the_machines_own_devices():
    # This machine has one CPU device of its own (no fake count): a 1-device mesh runs on it.
    r = analyze(lambda x: x * 2, explorer.TensorSpec("x", (256, 256)), mesh="d=1",
                real_devices=True, measure=True)
    assert r.timing.measured_s > 0 and r.timing.measured_on == "1 cpu device(s) of this host"
    with pytest.raises(explorer.CompileError,
                       match="needs 2 devices but this worker has 1 \\(cpu\\)"):
        analyze(lambda x: x * 2, explorer.TensorSpec("x", (256, 256)), mesh="d=2",
                real_devices=True)
    with pytest.raises(explorer.ExplorerError, match="exclude each other"):
        analyze(lambda x: x, explorer.TensorSpec("x", (4,)), mesh="d=1", real_devices=True,
                tpu_topology="v5e:1x1")
