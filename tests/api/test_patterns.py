"""The textbook sharding patterns, compiled for real on fake CPU devices.

Expected values are computed by hand from the shapes (comments show the arithmetic), not taken
from the code under test. Megatron-LM's tensor-parallel MLP (Shoeybi et al. 2019, §3) needs one
all-reduce of the layer output in the forward pass; data parallelism all-reduces gradients.
"""

import pytest

import explorer
from explorer import TensorSpec, analyze, analyze_workload

F32 = 4  # bytes


def test_megatron_mlp_has_one_all_reduce_over_model():
    batch, d_model, d_ff = 256, 1024, 4096
    r = analyze_workload("mlp", "data=2,model=4",
                         specs={"x": "data,None", "w1": "None,model", "w2": "model,None"},
                         params={"batch": batch, "d_model": d_model, "d_ff": d_ff})
    assert len(r.collectives) == 1
    c = r.collectives[0]
    assert c.kind == "all-reduce"
    assert c.axes == ("model",)
    assert c.group_size == 4
    # V = batch/|data| × d_model × 4 bytes = 128 × 1024 × 4 = 524288
    assert c.bytes == batch // 2 * d_model * F32 == 524288
    assert c.shape == (128, 1024) and c.dtype == "float32"
    # The all-reduce is caused by the second matmul, `h @ w2`, in explorer/_src/workloads/mlp.py.
    src_file, line = c.source.rsplit(":", 1)
    assert src_file == "explorer/_src/workloads/mlp.py"
    import inspect

    from explorer._src.workloads import mlp as _workloads
    lines, start = inspect.getsourcelines(_workloads.mlp)
    assert lines[int(line) - start].strip() == "return h @ w2"
    # Groups: devices sharing a data index, i.e. rows of arange(8).reshape(2, 4).
    assert set(map(frozenset, c.groups)) == {frozenset({0, 1, 2, 3}), frozenset({4, 5, 6, 7})}


def test_megatron_mlp_same_under_gspmd():
    r = analyze_workload("mlp", "data=2,model=4",
                         specs={"x": "data,None", "w1": "None,model", "w2": "model,None"},
                         partitioner="gspmd")
    assert [(c.kind, c.axes, c.bytes) for c in r.collectives] == \
        [("all-reduce", ("model",), 128 * 1024 * F32)]
    assert r.partitioner == "gspmd"


def test_megatron_layouts_memory_and_placement():
    r = analyze_workload("mlp", "data=2,model=4",
                         specs={"x": "data,None", "w1": "None,model", "w2": "model,None"})
    w1 = r.tensor("w1")
    # w1 f32[1024,4096] split over model=4 on columns: shard [1024,1024], held by the 2 data rows.
    assert w1.shard_shape == (1024, 1024) and w1.replicas == 2
    assert w1.bytes_per_device == 1024 * 1024 * F32
    assert w1.spec == (None, "model")
    # Device 5 has mesh coords (data=1, model=1): model index 1 -> columns [1024, 2048).
    assert r.placement("w1")[5] == ((0, 1024), (1024, 2048))
    assert r.placement("x")[5] == ((128, 256), (0, 1024))
    # The first matmul's output h = x @ w1 is split over both axes: [256/2, 4096/4].
    h = [t for t in r.tensors if t.kind == "intermediate" and t.op_name.endswith("dot_general")
         and t.shape == (256, 4096)]
    assert h and h[0].spec == ("data", "model") and h[0].shard_shape == (128, 1024)
    assert h[0].source.startswith("explorer/_src/workloads/mlp.py:")
    out = r.tensor("out")
    assert out.shape == (256, 1024) and out.spec == ("data", None)
    # Arguments per device: x 128×1024 + w1 1024×1024 + w2 1024×1024 floats.
    assert r.memory.arguments == (128 * 1024 + 2 * 1024 * 1024) * F32
    assert r.memory.outputs == 128 * 1024 * F32
    assert r.memory.total >= r.memory.arguments
    # cost_analysis counts per-device flops: two matmuls of 2·128·1024·1024 each, plus gelu.
    assert r.cost.flops >= 2 * (2 * 128 * 1024 * 1024)
    assert r.cost.collective_bytes == 524288
    assert r.timing.compile_s > 0 and r.timing.lower_s > 0


def test_fully_replicated_has_no_collectives():
    r = analyze_workload("mlp_train", "data=2,model=4")
    assert r.collectives == ()
    assert all(t.replicas == 8 for t in r.tensors if t.kind == "input")


def test_data_parallel_train_step_all_reduces_gradients_over_data_only():
    batch, d_model, d_ff = 256, 1024, 4096
    r = analyze_workload("mlp_train", "data=2,model=4", specs={"x": "data,None"},
                         params={"batch": batch, "d_model": d_model, "d_ff": d_ff})
    assert r.collectives
    assert {c.kind for c in r.collectives} == {"all-reduce"}
    assert {c.axes for c in r.collectives} == {("data",)}
    # Every gradient is reduced once: V totals both weight gradients, 2·d_model·d_ff floats.
    assert sum(c.bytes for c in r.collectives) == 2 * d_model * d_ff * F32


def test_fsdp_gathers_weights_and_reduces_gradients_over_data():
    batch, d_model, d_ff = 256, 1024, 4096
    r = analyze_workload("mlp_train", "data=8",
                         specs={"x": "data,None", "w1": "data,None", "w2": "data,None"},
                         params={"batch": batch, "d_model": d_model, "d_ff": d_ff})
    assert all(c.axes == ("data",) for c in r.collectives)
    gathers = [c for c in r.collectives if c.kind == "all-gather"]
    # Each weight is gathered whole before it is used: V = the full weight, 1024·4096 floats.
    weight = d_model * d_ff * F32
    assert sorted(c.bytes for c in gathers if c.bytes == weight) == [weight, weight]
    # What jax 0.10.2's CPU backend really does (pinned): no reduce-scatter. w1's gradient
    # [d_model, d_ff] is all-reduced whole over data, then sliced; for w2 it gathers the
    # activations instead (h: [batch, d_ff] and the output grad: [batch, d_model]) and computes
    # the local gradient rows directly.
    reductions = [c for c in r.collectives if c.kind in ("all-reduce", "reduce-scatter")]
    assert [(c.kind, c.shape, c.bytes) for c in reductions] == \
        [("all-reduce", (d_model, d_ff), weight)]
    activation_gathers = sorted(c.shape for c in gathers if c.bytes != weight)
    assert activation_gathers == [(batch, d_model), (batch, d_ff)]
    # The updated weights keep their FSDP layout.
    assert r.tensor("out.0").spec == ("data", None)
    assert r.tensor("out.0").shard_shape == (d_model // 8, d_ff)


def test_sum_over_both_axes_maps_the_mesh_form_to_both_axes():
    def total(x):
        return x.sum()

    # Rows split over data×model: one all-reduce over all 8 devices, which the optimized HLO
    # prints in the mesh form `mesh['axis_0'=8,'axis_1'=1] {'axis_0'}` (synthetic axis names).
    r = analyze(total, TensorSpec("x", (256, 1024), spec="(data,model),None"),
                mesh="data=2,model=4")
    assert "mesh['axis_0'=8" in r.optimized_hlo
    assert [(c.kind, c.axes, c.group_size, c.bytes) for c in r.collectives] == \
        [("all-reduce", ("data", "model"), 8, F32)]
    # Rows over data and columns over model: the partitioner reduces in two steps.
    r = analyze(total, TensorSpec("x", (256, 1024), spec="data,model"), mesh="data=2,model=4")
    assert sorted((c.kind, c.axes, c.group_size) for c in r.collectives) == \
        [("all-reduce", ("data",), 2), ("all-reduce", ("model",), 4)]


def test_a_closure_and_bare_partitionspec_under_the_mesh():
    import jax
    from jax.sharding import PartitionSpec as P

    scale = 3.0

    def f(x):
        y = jax.lax.with_sharding_constraint(x * scale, P(None, "model"))
        return y

    r = analyze(f, TensorSpec("x", (64, 64), spec="model,None"), mesh="model=4")
    assert [c.kind for c in r.collectives] == ["all-to-all"]
    assert r.collectives[0].axes == ("model",)
    assert r.tensor("out").spec == (None, "model")


def test_a_trillion_element_tensor_is_analysed_without_allocating():
    r = analyze(lambda x: x.sum(axis=1), TensorSpec("x", (2**20, 2**20), spec="data,None"),
                mesh="data=8")
    x = r.tensor("x")
    assert x.shard_shape == (2**17, 2**20)
    assert x.bytes_per_device == 2**37 * F32     # 512 GiB per device, never allocated
    assert r.collectives == ()


def test_an_identical_request_is_cached():
    args = dict(specs={"w1": "None,model"}, params={"batch": 64})
    first = analyze_workload("mlp", "model=4", **args)
    second = analyze_workload("mlp", "model=4", **args)
    assert second.timing.cached and not first.timing.cached
    assert second.collectives == first.collectives


def test_explicit_axes_surface_jax_sharding_type_error():
    # Under Explicit axes jax refuses a matmul whose contracting dim is sharded on both sides.
    with pytest.raises(explorer.CompileError, match="(?i)sharding"):
        analyze_workload("matmul", "model=4", specs={"x": "None,model", "w": "model,None"},
                         axis_type="explicit")


def test_bf16_collectives_on_cpu_are_upcast_and_say_so():
    # The CPU backend converts bf16 to f32 before a collective (measured on jax 0.10.2): the
    # all-gather of a bf16[128,4096] FSDP shard moves f32[1024,4096]. The report keeps the f32
    # bytes the CPU moves and names the program's dtype, so predictions can use bf16.
    r = analyze_workload("mlp_train", "data=8",
                         specs={"x": "data,None", "w1": "data,None", "w2": "data,None"},
                         params={"dtype": "bfloat16"})
    [g] = [c for c in r.collectives if c.kind == "all-gather" and c.shape == (1024, 4096)]
    assert (g.dtype, g.operand_dtype) == ("float32", "bfloat16")
    assert g.bytes == 1024 * 4096 * 4 and g.program_bytes == 1024 * 4096 * 2
    assert r.tensor("w1").dtype == "bfloat16"
    assert r.tensor("w1").bytes_per_device == 128 * 4096 * 2
