# ruff: noqa: E501 (an HLO line is kept verbatim)
"""Host offload: inputs, outputs and activations in host memory (jax's memory kind pinned_host,
XLA's memory space S(5)). Read from hand-written module text (the entry layout, the schedule's
host transfers and their time on the host link), then from real compiles: a TPU slice through
libtpu, where jax gives inputs a host memory space; GPUs, where it gives them none but
activations offload; the CPU, which keeps one memory. Expected bytes are worked out by hand from
the shapes."""

import importlib.util

import pytest

from explorer import TensorSpec, analyze, analyze_workload
from explorer._src.compile.gpu import gpu_plugin_installed
from explorer._src.cost.catalog.names import get_target
from explorer._src.cost.estimate import estimate
from explorer._src.errors import TensorError, WorkloadError
from explorer._src.hlo.module import entry_memory_spaces, parse_module, shape_memory_spaces
from explorer._src.hlo.schedule import StepKind, read_schedule, schedule_work
from explorer._src.report.build import read_collectives
from explorer._src.report.summary import memory_lines
from explorer._src.report.trace import TraceLane, step_trace
from explorer._src.spec.mesh import parse_mesh

MiB = 2 ** 20

needs_libtpu = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                                  reason="libtpu (the tpu extra) is not installed")
needs_gpu_plugin = pytest.mark.skipif(not gpu_plugin_installed(),
                                      reason="jax's CUDA plugin (the gpu extra) is not installed")

# As libtpu writes it (jax 0.10.2, v5p): a weight w f32[256,1024] per device in host memory is
# copied in (copy-start/-done), multiplied by x f32[1024,1024], and the result copied back out.
HOST_ROUND_TRIP = """HloModule jit_step, is_scheduled=true, entry_computation_layout={(f32[256,1024]{1,0:T(8,128)S(5)}, f32[1024,1024]{1,0:T(8,128)})->f32[256,1024]{1,0:T(8,128)S(5)}}, num_partitions=4

ENTRY %main.0_spmd (param: f32[256,1024], param.1: f32[1024,1024]) -> f32[256,1024] {
  %param = f32[256,1024]{1,0:T(8,128)S(5)} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="w"}
  %param.1 = f32[1024,1024]{1,0:T(8,128)} parameter(1), sharding={replicated}, metadata={op_name="x"}
  %copy-start = (f32[256,1024]{1,0:T(8,128)}, f32[256,1024]{1,0:T(8,128)S(5)}, u32[]{:S(2)}) copy-start(%param)
  %copy-done = f32[256,1024]{1,0:T(8,128)} copy-done(%copy-start)
  %dot = f32[256,1024]{1,0:T(8,128)} dot(%copy-done, %param.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %copy-start.1 = (f32[256,1024]{1,0:T(8,128)S(5)}, f32[256,1024]{1,0:T(8,128)}, u32[]{:S(2)}) copy-start(%dot)
  ROOT %copy-done.1 = f32[256,1024]{1,0:T(8,128)S(5)} copy-done(%copy-start.1)
}
"""


def test_the_entry_layout_says_which_inputs_and_outputs_live_in_host_memory():
    assert entry_memory_spaces(HOST_ROUND_TRIP) == ((5, 0), (5,))
    tuple_result = "HloModule m, entry_computation_layout={(f32[2]{0}, /*index=1*/f32[3]{0:S(5)})->(f32[2]{0:S(5)}, s32[]{:S(5)})}"
    assert entry_memory_spaces(tuple_result) == ((0, 5), (5, 5))
    assert entry_memory_spaces("HloModule m, num_partitions=1") is None


def test_each_array_of_a_shape_has_its_memory_space():
    spaces = shape_memory_spaces("(f32[8,4]{1,0:T(8,128)S(5)}, bf16[2]{0}, u32[]{:S(2)})")
    assert [(a.text(), s) for a, s in spaces] == [("f32[8,4]", 5), ("bf16[2]", 0), ("u32[]", 2)]


def test_copies_to_and_from_host_memory_are_host_transfers_of_the_device_side():
    schedule = read_schedule(HOST_ROUND_TRIP)
    steps = {s.instr.name: s for s in schedule.steps}
    # Each copy moves one f32[256,1024] per device: 256·1024·4 = 1 MiB; the u32 sync flag is
    # not data.
    assert steps["copy-start"].kind is StepKind.HOST_START
    assert steps["copy-start"].bytes == 256 * 1024 * 4 == MiB
    assert steps["copy-done"].kind is StepKind.HOST_DONE
    assert steps["copy-done"].start == "copy-start"
    assert steps["copy-start.1"].kind is StepKind.HOST_START and steps["copy-done.1"].start == "copy-start.1"
    # Transfers are not the compute's: only the dot counts in the work.
    # 2·256·1024·1024 FLOPs; w and the result 1 MiB each, x 4 MiB.
    assert schedule_work(schedule).compute == ((2 * 256 * 1024 * 1024, 6 * MiB, 1),)


def test_host_transfers_take_their_bytes_over_the_host_link_and_the_compute_waits_at_the_done():
    mesh = parse_mesh("data=4")
    schedule = read_schedule(HOST_ROUND_TRIP)
    est = estimate(read_collectives(parse_module(HOST_ROUND_TRIP), mesh), None, None, None,
                   "float32", mesh.names, mesh.sizes, "tpu-v5p-2x2x1",
                   work=schedule_work(schedule), peak=True)
    link = 1.5e10    # bytes/s one way, TPU v5 PCIe (the catalog's host_bandwidth)
    assert get_target("tpu-v5p-2x2x1").chip.host_bandwidth == link
    trace = step_trace(schedule, (), est, host_bandwidth=link)
    host = [e for e in trace.events if e.lane == TraceLane.HOST]
    assert [e.hlo for e in host] == ["copy-start", "copy-start.1"]
    assert all(e.duration == pytest.approx(MiB / link) for e in host)      # 69.9 us each
    dot = next(e for e in trace.events if e.hlo == "dot")
    # The dot waits for the copy in; the copy out starts when the dot ends; the step ends with it.
    assert dot.start == pytest.approx(MiB / link)
    assert host[1].start == pytest.approx(dot.end)
    assert trace.seconds == pytest.approx(dot.end + MiB / link)
    assert "host link" in trace.rows()


def test_without_a_host_link_figure_the_transfers_show_no_duration_and_say_so():
    mesh = parse_mesh("data=4")
    schedule = read_schedule(HOST_ROUND_TRIP)
    est = estimate((), None, None, None, "float32", mesh.names, mesh.sizes, "tpu-v5p-2x2x1",
                   work=schedule_work(schedule), peak=True)
    trace = step_trace(schedule, (), est, host_bandwidth=None)
    assert all(e.duration == 0 for e in trace.events if e.lane == TraceLane.HOST)
    assert any("host-link bandwidth" in n for n in trace.notes)


def test_a_memory_kind_outside_the_choices_is_refused_with_them():
    with pytest.raises(TensorError, match=r"memory_kind 'host'.*'device'.*'pinned_host'"):
        TensorSpec("w", (8, 8), memory_kind="host")


def test_offloading_activations_needs_the_minimal_remat_policy():
    with pytest.raises(WorkloadError, match=r"offload=activations with remat='none'.*remat=minimal"):
        analyze_workload("transformer_train", mesh="data=2", params={"offload": "activations"})
    with pytest.raises(WorkloadError, match=r"offload.*'spill'.*none.*opt_state.*activations"):
        analyze_workload("transformer_train", mesh="data=2", params={"offload": "spill"})


def offloaded_step(w, x):
    """A user's step with its weight in host memory: read in, used, written back."""
    import jax
    import jax.numpy as jnp

    wd = jax.device_put(w, jax.memory.Space.Device)
    new = wd - 0.01 * jnp.sum(x @ wd.T)
    return jax.device_put(new, jax.memory.Space.Host)


def offloaded_inputs():
    return (TensorSpec("w", (1024, 1024), "float32", "data,None", memory_kind="pinned_host"),
            TensorSpec("x", (64, 1024), "float32"))


@pytest.mark.slow
@pytest.mark.tpu
@needs_libtpu
def test_on_a_tpu_a_users_offloaded_weight_is_host_memory_and_its_copies_are_timed():
    r = analyze(offloaded_step, *offloaded_inputs(), mesh="data=4", target="tpu-v5p-2x2x1")
    assert r.ahead_of_time and r.backend.startswith("tpu")
    # w per device: [1024/4, 1024] f32 = 1 MiB, in host memory in and out (its rows are a
    # multiple of the TPU's 8x128 tile: no padding); x (256 KiB) on the device.
    assert r.memory.host_arguments == MiB and r.memory.host_outputs == MiB
    assert r.memory.arguments == 64 * 1024 * 4
    assert r.tensor("w").memory_kind == "pinned_host" and r.tensor("x").memory_kind == "device"
    host = [e for e in r.trace.events if e.lane == TraceLane.HOST]
    assert sum(e.args["bytes"] for e in host) == 2 * MiB      # read in, written back
    assert sum(e.duration for e in host) == pytest.approx(2 * MiB / 1.5e10)
    assert any(line.startswith("host memory per device (offloaded)") for line in memory_lines(r))


TRAIN = {"layers": 2, "d_model": 256, "d_ff": 1024, "batch": 16, "seq": 128}


@pytest.mark.slow
@pytest.mark.tpu
@needs_libtpu
def test_on_a_tpu_offloaded_optimizer_state_leaves_the_device():
    def run(offload):
        return analyze_workload("transformer_train", mesh="data=4", preset="fsdp",
                                target="tpu-v5p-2x2x1", params={**TRAIN, "offload": offload})

    kept, off = run("none"), run("opt_state")
    # What left the device's arguments is what the host now holds.
    assert kept.memory.arguments - off.memory.arguments == off.memory.host_arguments
    # m and v are each as large as the params (by_kind counts allocated bytes, the TPU's tile
    # padding included); per device under fsdp over 4 that is the params' bytes / 4 each:
    # by_kind's params count the params once (the step donates its state, so the new params
    # are the old ones' buffers), and m + v are twice that, and one more: libtpu pairs donated
    # buffers by their padded size, and wrote the scalar loss into the buffer of m.final_norm
    # ([64] f32 and [] f32 both take one 128-wide tile), so the new v.final_norm ([64] f32,
    # replicated, one 128-wide f32 tile: 512 bytes) is held beside its old one.
    params = kept.memory.by_kind["params"]
    assert off.memory.host_arguments >= 2 * params
    assert off.memory.by_kind["optimizer"] == 0
    assert kept.memory.by_kind["optimizer"] == 2 * params + 128 * 4
    assert not [n for n in off.notes if "host memory" in n]


@pytest.mark.slow
@pytest.mark.gpu
@needs_gpu_plugin
def test_on_gpus_offloaded_activations_are_the_saved_matmuls_moved_out_and_back():
    def run(offload):
        return analyze_workload("transformer_train", mesh="data=4", preset="fsdp",
                                target="h100-4", params={**TRAIN, "offload": offload,
                                                         "remat": "minimal"})

    kept, off = run("none"), run("activations")
    # Per device the batch is 16/4 = 4. Of the offloadable matmul outputs the backward pass
    # needs q, k and v (attention's), out_proj (the second norm reads x + out_proj) and
    # mlpwi_0 (gelu's derivative), not mlpwo (it only adds to the residual):
    # 3 x [4,128,4,16] + [4,128,256] + [4,128,1024] f32 per layer, 2 layers.
    per_layer = 4 * (3 * 4 * 128 * 4 * 16 + 4 * 128 * 256 + 4 * 128 * 1024)
    assert off.memory.host_temporaries == 2 * per_layer == 6029312
    assert off.memory.temporaries < kept.memory.temporaries
    host = [e for e in off.trace.events if e.lane == TraceLane.HOST]
    # Out in the forward pass, back in the backward, over PCIe Gen5 (64 GB/s one way).
    assert sum(e.args["bytes"] for e in host) == 2 * off.memory.host_temporaries
    assert sum(e.duration for e in host) == pytest.approx(2 * 6029312 / 64e9)


@pytest.mark.slow
@pytest.mark.gpu
@needs_gpu_plugin
def test_on_gpus_a_functions_offloaded_inputs_stay_in_host_memory():
    # Traced where it is called, over an abstract mesh, the function's module keeps its
    # inputs' memory kinds (as jax keeps them on a real GPU), and XLA's GPU compiler places
    # w's shard in host memory.
    r = analyze(offloaded_step, *offloaded_inputs(), mesh="data=8", target="h100-8")
    assert r.backend == "gpu"
    assert r.tensor("w").memory_kind == "pinned_host"
    assert r.memory.host_arguments == 128 * 1024 * 4               # w's shard
    assert r.memory.arguments == 64 * 1024 * 4                     # x
    assert not any("no host memory space for inputs" in n for n in r.notes)
    # What the program moves to host memory itself is offloaded: the new w.
    assert r.memory.host_outputs == 128 * 1024 * 4


def test_on_the_cpu_offloaded_inputs_are_placed_but_counted_as_device_memory():
    r = analyze(offloaded_step, *offloaded_inputs(), mesh="data=4", compile_for="cpu")
    assert r.tensor("w").memory_kind == "pinned_host"
    assert r.memory.host_arguments == 0
    assert r.memory.arguments == 256 * 1024 * 4 + 64 * 1024 * 4
    assert any("the CPU has one memory" in n for n in r.notes)
