"""Compiles for NVIDIA GPUs with no GPU, compared with plain jax.

Each program of gpu_programs.py is analysed with explorer.analyze (traced and lowered in this
process, as a notebook's function is) and compiled with plain jax alone, deviceless, in a
subprocess; the Report's collectives and memory must be what jax's compiled object shows, and
each collective's groups and bytes what the mesh gives by hand."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import cloudpickle
import pytest

import explorer
from explorer import TensorSpec as T
from explorer._src.compile.gpu import gpu_plugin_installed

HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("gpu_programs", HERE / "gpu_programs.py")
programs = importlib.util.module_from_spec(_spec)
sys.modules["gpu_programs"] = programs
_spec.loader.exec_module(programs)
cloudpickle.register_pickle_by_value(programs)     # as a notebook cell's function travels

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not gpu_plugin_installed(), reason="jax's CUDA plugin (the gpu extra) is not installed")]

KIB = 1024


def _reference(name: str) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_SKIP_CUDA_CONSTRAINTS_CHECK": "1"}
    env.pop("XLA_FLAGS", None)
    out = subprocess.run([sys.executable, str(HERE / "gpu_programs.py"), name], env=env,
                         capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _analyze(name: str):
    fn, axes, target, inputs = programs.PROGRAMS[name]
    mesh = ",".join(f"{k}={v}" for k, v in axes.items())
    tensors = [T(n, shape, "bfloat16", spec=",".join(str(e) for e in spec))
               for n, shape, spec in inputs]
    return explorer.analyze(fn, *tensors, mesh=mesh, target=target)


@pytest.fixture(scope="module", params=sorted(programs.PROGRAMS))
def pair(request):
    return request.param, _analyze(request.param), _reference(request.param)


@pytest.mark.slow
def test_the_report_comes_from_the_gpu_compiler_and_names_the_device(pair):
    _, report, ref = pair
    assert report.backend == "gpu"
    assert report.device_kind == ref["device_kind"]
    assert report.approximation == ""


@pytest.mark.slow
def test_the_collectives_are_the_ones_jax_compiled_async_where_jax_s_are(pair):
    _, report, ref = pair
    # A GPU collective is a -start/-done pair where XLA runs it asynchronously; a combined one
    # is one line of jax's. (jax 0.10.2's XLA keeps every one here async; 0.12's makes one
    # that nothing overlaps synchronous again, `is_sync`, written without -start.)
    kinds = sorted(c.kind.value + ("-start" if c.is_async else "") for c in report.collectives)
    assert kinds == sorted(ref["collectives"])


@pytest.mark.slow
def test_memory_is_the_gpu_compilers_memory_analysis(pair):
    _, report, ref = pair
    m = report.memory
    assert (m.arguments, m.outputs, m.temporaries) == (
        ref["memory"]["arguments"], ref["memory"]["outputs"], ref["memory"]["temporaries"])


@pytest.mark.slow
def test_the_megatron_mlp_is_one_async_bf16_all_reduce_over_model():
    report = _analyze("megatron_mlp")
    (c,) = report.collectives
    assert c.kind == "all-reduce" and c.axes == ("model",)
    # data=2,model=4: devices are row-major mesh positions, a model group is one row.
    assert c.groups == ((0, 1, 2, 3), (4, 5, 6, 7))
    # The [256,1024] output's rows split over data: 128 x 1024 bf16 = 256 KiB per device, in
    # bf16 (the CPU backend would have moved it as f32).
    assert c.dtype == "bfloat16" and c.bytes == 128 * 1024 * 2 == 256 * KIB
    # No cost analysis from the GPU compiler: the FLOPs are the schedule's, two matmuls of
    # [128,1024] x [1024,1024] per device at 2·m·n·k each (the gelu is not a FLOP here).
    assert report.cost.flops == 2 * (2 * 128 * 1024 * 1024)


def test_fsdp_gradients_leave_as_a_reduce_scatter_over_data():
    report = _analyze("fsdp_grads")
    (rs,) = [c for c in report.collectives if c.kind == "reduce-scatter"]
    assert rs.axes == ("data",) and rs.groups == (tuple(range(8)),)
    # V of a reduce-scatter is its operand: w2's whole [4096,1024] gradient in bf16 = 8 MiB.
    assert rs.bytes == 4096 * 1024 * 2


def test_a_ring_permute_sends_each_device_to_the_next():
    report = _analyze("ring_permute")
    (c,) = report.collectives
    assert c.kind == "collective-permute" and c.axes == ("x",)
    assert c.direction == "+"
    assert c.bytes == 8 * 128 * 2       # each device's [8,128] bf16 block
