"""What each of jax 0.10's compilers does with donated inputs (jax.jit's donate_argnums, as
explorer.analyze(donate=...) passes them): the CPU of the fake devices, and XLA's GPU compiler
and libtpu ahead of time, with no device present.

All three honour a donation: the output takes the donated input's buffer and the memory
analysis counts it once (`alias_size_in_bytes`, Memory.aliased). They differ in what they say
of a donation they cannot use: the CPU warns ("Some donated buffers were not usable", naming
shapes only), the GPU and TPU compilers say nothing. The Report says it for all three, by
name, from the optimized module's input_output_alias."""

import importlib.util

import pytest

import explorer
from explorer import TensorSpec as T
from explorer._src.compile.gpu import gpu_plugin_installed
from explorer._src.hlo.module import input_output_aliases

needs_libtpu = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                                  reason="libtpu (the tpu extra) is not installed")
needs_gpu_plugin = pytest.mark.skipif(not gpu_plugin_installed(),
                                      reason="jax's CUDA plugin (the gpu extra) is not installed")


def update(w, g):
    return w - 0.1 * g


def loss(w, g):
    return (w * g).sum()


def inputs():
    # w and g [1024, 256] f32 (1 MiB each), rows split over the 4 devices: 256 KiB a device.
    return T("w", (1024, 256), spec="data,None"), T("g", (1024, 256), spec="data,None")


SHARD = 1024 * 256 * 4 // 4


def analyze(fn, where: dict, donate):
    return explorer.analyze(fn, *inputs(), mesh="data=4", donate=donate, **where)


CPU = {}
GPU = {"target": "h100-4"}
TPU = {"tpu_topology": "v5e:2x2"}
BACKENDS = [pytest.param(CPU, id="cpu"),
            pytest.param(GPU, id="gpu", marks=[pytest.mark.slow, pytest.mark.gpu,
                                              needs_gpu_plugin]),
            pytest.param(TPU, id="tpu", marks=[pytest.mark.slow, pytest.mark.tpu,
                                              needs_libtpu])]


@pytest.mark.parametrize("where", BACKENDS)
@pytest.mark.slow
def test_every_compiler_writes_the_update_into_the_donated_input(where):
    kept, donated = analyze(update, where, None), analyze(update, where, "^w$")
    assert kept.memory.aliased == 0
    # The new w is w's 256 KiB a device, written where the old one was.
    assert donated.memory.aliased == SHARD
    assert input_output_aliases(donated.optimized_hlo) == {(): 0}    # output -> parameter 0
    assert kept.memory.total - donated.memory.total == SHARD
    if where is GPU:
        assert donated.backend == "gpu"
    if where is TPU:
        assert donated.backend.startswith("tpu")


@pytest.mark.parametrize("where", BACKENDS)
def test_every_compiler_leaves_an_unusable_donation_and_the_report_names_it(where):
    r = analyze(loss, where, "^w$")
    assert r.memory.aliased == 0 and input_output_aliases(r.optimized_hlo) == {}
    assert [n for n in r.notes if n.startswith("the donated input w: no output has its shape")]
    # jax's own warning (the CPU's) stays out of the compiler's messages.
    assert not [w for w in r.warnings if "donated buffers" in w.text]


def test_the_module_header_says_which_output_took_which_donated_input():
    header = ("HloModule jit_step, is_scheduled=true, input_output_alias={ {0}: (2, {}, "
              "may-alias), {2}: (3, {}, must-alias) }, entry_computation_layout={(f32[4]{0}, "
              "f32[4]{0}, f32[4]{0}, f32[4]{0})->(f32[4]{0}, f32[], f32[4]{0})}\n\nENTRY %main {}")
    # Outputs 0 and 2 were written into parameters 2 and 3; output 1 (a scalar) into none.
    assert input_output_aliases(header) == {(0,): 2, (2,): 3}
    assert input_output_aliases("HloModule jit_f, entry_computation_layout={()->f32[]}") == {}


@pytest.mark.slow
def test_a_donating_program_is_measured_each_call_on_its_own_copy_of_the_donated_inputs():
    # A donated buffer passed to a second call is refused ("Buffer has been deleted or
    # donated"): every timed call must get its own, as a training loop hands each step the
    # state the step before returned. Found on a TPU v5e, where measure=True of a training
    # step failed; the CPU refuses it the same way.
    r = explorer.analyze(update, *inputs(), mesh="data=4", donate="w", measure=True)
    assert r.memory.aliased == SHARD                   # the donation held in the compile
    assert r.timing.measured_s is not None and r.timing.measured_s > 0
    workload = explorer.analyze_workload("mlp_train", "data=2", measure=True, use_cache=False)
    assert workload.donated and workload.timing.measured_s is not None
