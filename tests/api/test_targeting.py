"""Which compiler a request gets (explorer/_src/api/targeting.py): decided before any worker starts,
from the target, the switch and what is installed."""

import pytest

import explorer
from explorer._src.api import targeting
from explorer._src.api.targeting import TPU_EXTRA_NOTE, CompileFor, compile_plan, tpu_topology_of
from explorer._src.compile.gpu import GPU_EXTRA_NOTE
from explorer._src.compile.protocol import Backend, WorkerKey
from explorer._src.cost.catalog.names import get_target
from explorer._src.cost.mapping import check_mapping
from explorer._src.errors import InputError
from explorer._src.spec.mesh import parse_mesh

MESH8 = parse_mesh("data=2,model=4")


def test_no_target_compiles_on_one_fake_cpu_device_per_mesh_device():
    plan = compile_plan(MESH8, None)
    assert plan.worker.backend is Backend.FAKE_CPU and plan.worker.devices == 8
    assert plan.approximate == ""


def test_a_gpu_target_compiles_for_its_gpus_where_the_plugin_is(monkeypatch):
    monkeypatch.setattr(targeting, "gpu_plugin_installed", lambda: True)
    plan = compile_plan(MESH8, "h100-8")
    assert plan.worker.backend is Backend.GPU_AOT
    assert (plan.gpu.nodes, plan.gpu.gpus_per_node, plan.gpu.chip) == (1, 8, "h100")
    assert plan.approximate == ""


def test_without_the_plugin_a_gpu_target_compiles_on_the_cpu_and_says_what_to_install(
        monkeypatch):
    monkeypatch.setattr(targeting, "gpu_plugin_installed", lambda: False)
    plan = compile_plan(MESH8, "h100-8")
    assert plan.worker.backend is Backend.FAKE_CPU and plan.gpu is None
    assert plan.approximate == GPU_EXTRA_NOTE and "sharding-explorer[gpu]" in GPU_EXTRA_NOTE


def test_compile_for_cpu_keeps_the_fake_devices_and_says_it_was_asked(monkeypatch):
    monkeypatch.setattr(targeting, "gpu_plugin_installed", lambda: True)
    plan = compile_plan(MESH8, "h100-8", "cpu")
    assert plan.worker.backend is Backend.FAKE_CPU
    assert plan.approximate == "compile_for='cpu' was asked"


@pytest.mark.parametrize("target, topology", [
    ("tpu-v5e-2x4", "v5e:2x4"), ("tpu-v5p-2x2x2", "v5p:2x2x2"), ("tpu-v4-4x4x4", "v4:4x4x4"),
    ("tpu-v5e-16x16-2slices", None),          # several slices: not one topology
])
def test_a_tpu_target_names_its_jax_topology(target, topology):
    assert tpu_topology_of(get_target(target)) == topology


def test_a_tpu_target_compiles_for_its_slice_where_libtpu_is(monkeypatch):
    monkeypatch.setattr(targeting, "libtpu_installed", lambda: True)
    plan = compile_plan(MESH8, "tpu-v5e-2x4")
    assert plan.worker.backend is Backend.TPU_AOT and plan.tpu_topology == "v5e:2x4"
    monkeypatch.setattr(targeting, "libtpu_installed", lambda: False)
    plan = compile_plan(MESH8, "tpu-v5e-2x4")
    assert plan.worker.backend is Backend.FAKE_CPU and plan.approximate == TPU_EXTRA_NOTE


def test_an_explicit_tpu_topology_or_real_devices_wins_over_the_target():
    assert compile_plan(MESH8, "h100-8", tpu_topology="v5e:2x4").worker.backend is \
        Backend.TPU_AOT
    assert compile_plan(MESH8, "h100-8", real_devices=True).worker.backend is Backend.REAL


def test_a_target_with_no_compiler_here_is_priced_from_the_cpu_without_a_warning():
    # The CPU host itself: its own program.
    plan = compile_plan(MESH8, "cpu")
    assert plan.worker.backend is Backend.FAKE_CPU and plan.approximate == ""


def test_a_bad_compile_for_names_the_value_and_the_choices():
    with pytest.raises(InputError, match=r"compile_for='gpu' is not one of 'target', 'cpu'"):
        compile_plan(MESH8, "h100-8", "gpu")
    assert CompileFor("cpu") is CompileFor.CPU


def test_a_multi_slice_target_compiles_all_its_slices_through_libtpu(monkeypatch):
    monkeypatch.setattr(targeting, "libtpu_installed", lambda: True)
    plan = compile_plan(MESH8, "tpu-v5e-2x2-2slices")
    # The default mapping puts the outer mesh axis, data, on the slices: a hybrid mesh of two
    # slices along data, the 4 chips of model inside each.
    assert (plan.worker.backend, plan.tpu_topology, plan.slices_per_axis) == (
        Backend.TPU_AOT, "v5e:2x2", (2, 1))
    assert plan.approximate == ""
    inner = check_mapping("tpu-v5e-2x2-2slices", ("data", "model"), (2, 4),
                          "data=x,model=slice+y")
    assert compile_plan(MESH8, "tpu-v5e-2x2-2slices", mapping=inner).slices_per_axis == (1, 2)
    assert compile_plan(MESH8, "tpu-v5e-2x4").slices_per_axis == ()      # one slice


def test_without_libtpu_a_multi_slice_target_compiles_on_the_cpu_and_says_what_to_install(
        monkeypatch):
    monkeypatch.setattr(targeting, "libtpu_installed", lambda: False)
    plan = compile_plan(MESH8, "tpu-v5e-2x2-2slices")
    assert plan.worker.backend is Backend.FAKE_CPU and plan.approximate == TPU_EXTRA_NOTE
    assert plan.slices_per_axis == ()


@pytest.mark.parametrize(("kind", "count", "expected"), [
    ("TPU v5 lite", 1, "tpu-v5e-1x1"),      # jax's name for a v5e chip, seen on a v5e VM
    ("TPU v5 lite", 8, "tpu-v5e-2x4"),
    ("TPU v4", 4, "tpu-v4-2x2x1"),
    ("NVIDIA H100 80GB HBM3", 8, "h100-8"),
    ("NVIDIA A100-SXM4-80GB", 4, "a100-4"),
    ("cpu", 8, None),
    ("TPU v5 lite", 3, None),                 # no slice of 3 chips
])
def test_the_target_a_measured_run_ran_on(kind, count, expected):
    from explorer._src.api.targeting import target_of_devices

    assert target_of_devices(kind, count) == expected


# ---------------------------------------------------------- measure with the target one has

def _machine_with(monkeypatch, platform: str, devices: int, kind: str):
    """This machine as one whose accelerators are `devices` of `kind` on `platform`, as a
    worker on them answers (no worker starts: the probe is answered here)."""
    from explorer._src.api import analysis_request
    from explorer._src.compile.protocol import Pong

    monkeypatch.setattr(targeting, "accelerator_platform", lambda: platform)
    monkeypatch.setattr(analysis_request, "accelerator_platform", lambda: platform)
    asked = []

    class Pool:
        def warm(self, key):
            asked.append(key)
            return Pong(devices=devices, pid=0, device_kind=kind)

    monkeypatch.setattr(analysis_request, "default_pool", Pool)
    return asked


def matmul(x, w):
    return x @ w


ARGS = (explorer.TensorSpec("x", (64, 64)), explorer.TensorSpec("w", (64, 64)))


def test_measure_with_the_target_this_machine_is_compiles_and_runs_on_its_chips(monkeypatch):
    asked = _machine_with(monkeypatch, "tpu", 1, "TPU v5 lite")
    monkeypatch.setattr(analysis_request_module(), "leave_the_chip_to_the_worker",
                        lambda platform: "")
    r = explorer.Request(fn=matmul, inputs=ARGS, mesh="data=1", target="tpu-v5e-1x1",
                         measure=True)
    r.plan()                                # where it runs is asked when it is planned
    assert asked == [WorkerKey.real()]
    assert r.planned.compile_plan.worker.backend is Backend.REAL
    assert r.planned.lowered.platform == "tpu"
    assert any("measured on them" in n for n in r.planned.lowered.notes)


@pytest.mark.parametrize(("platform", "devices", "kind", "target", "measure"), [
    ("tpu", 1, "TPU v5 lite", "tpu-v5e-1x1", False),      # no run asked: ahead of time
    ("tpu", 1, "TPU v5", "tpu-v5e-1x1", True),            # another generation (v5p)
    ("tpu", 4, "TPU v5 lite", "tpu-v5e-1x1", True),       # 4 chips here, the mesh has 1
    ("cpu", 0, "cpu", "tpu-v5e-1x1", True),               # no accelerator at all
    ("cuda", 1, "NVIDIA H100 80GB HBM3", "tpu-v5e-1x1", True),   # a GPU, a TPU target
])
def test_otherwise_the_target_is_compiled_for_ahead_of_time(monkeypatch, platform, devices,
                                                            kind, target, measure):
    _machine_with(monkeypatch, platform, devices, kind)
    r = explorer.Request(fn=matmul, inputs=ARGS, mesh="data=1", target=target,
                         measure=measure)
    assert r.planned.compile_plan.worker.backend is not Backend.REAL


def analysis_request_module():
    from explorer._src.api import analysis_request

    return analysis_request
