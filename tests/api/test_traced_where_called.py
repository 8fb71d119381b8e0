"""A user's function is traced where it is called, under the caller's contexts, and compiled in
the worker (explorer/_src/compile/lowering.py): the program the explorer compiles is the program
plain jax compiles in the user's process.

Plain jax is the ground truth: the same function compiled in this process, on 8 fake CPU devices
(tests/conftest.py), inside the same contexts; its collectives read from `compiled.as_text()`
by opcode (tests/_support/plain_jax.py), its memory from `compiled.memory_analysis()`.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import explorer
from explorer import TensorSpec as T

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_support"))
from plain_jax import collectives_of_hlo, collectives_of_report  # noqa: E402

MESH = "data=2,model=4"


def plain_mesh() -> Mesh:
    return Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"),
                axis_types=(AxisType.Auto,) * 2)


def plain_compile(fn, *structs, **jit):
    mesh = plain_mesh()
    placed = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=NamedSharding(mesh, P(*spec)))
              for s, spec in structs]
    return jax.jit(fn, keep_unused=True, **jit).lower(*placed).compile()


# ------------------------------------------------------------ flax linen under axis_rules

linen = pytest.importorskip("flax.linen")
nn_partitioning = pytest.importorskip("flax.linen.partitioning")

# Logical names as a model writes them, and the rules as MaxText writes its
# logical_axis_rules: (logical name, mesh axes) pairs.
RULES = (("batch", "data"), ("mlp", "model"), ("embed", None))
BATCH, D, F = 16, 128, 512


class Mlp(linen.Module):
    @linen.compact
    def __call__(self, x):
        h = linen.Dense(F, use_bias=False)(x)
        h = linen.with_logical_constraint(h, ("batch", "mlp"))
        y = linen.Dense(D, use_bias=False)(jax.nn.relu(h))
        return linen.with_logical_constraint(y, ("batch", "embed"))


def linen_step():
    model = Mlp()
    x = jax.ShapeDtypeStruct((BATCH, D), jnp.float32)
    params = jax.eval_shape(model.init, jax.random.key(0), x)

    def step(params, x):
        def loss(p):
            return jnp.mean(model.apply(p, x) ** 2)
        return jax.grad(loss)(params)

    return step, params, x


def linen_truth(step, params, x):
    """Plain jax's compile of the step, its kernels and batch replicated (the constraints
    decide the layout), inside the caller's axis rules."""
    flat = jax.tree.leaves(params)

    def flat_step(x, *leaves):
        return step(jax.tree.unflatten(jax.tree.structure(params), leaves), x)

    return plain_compile(flat_step, (x, (None, None)), *[(p, ()) for p in flat])


def test_linen_logical_constraints_follow_the_callers_axis_rules():
    step, params, x = linen_step()
    with nn_partitioning.axis_rules(RULES):
        report = explorer.analyze(step, params, x, mesh=MESH)
        with jax.set_mesh(plain_mesh()):
            truth = collectives_of_hlo(linen_truth(step, params, x).as_text())
    # The rules change the program: without them every constraint is a no-op.
    with jax.set_mesh(plain_mesh()):
        assert truth != collectives_of_hlo(linen_truth(step, params, x).as_text())
    assert collectives_of_report(report) == truth
    assert any(k == "all-gather" for k, _ in truth)


def test_without_the_callers_rules_the_constraints_are_dropped_as_in_plain_jax():
    step, params, x = linen_step()
    report = explorer.analyze(step, params, x, mesh=MESH)
    with jax.set_mesh(plain_mesh()):
        truth = linen_truth(step, params, x)
    assert collectives_of_report(report) == collectives_of_hlo(truth.as_text())


# ---------------------------------------------------------------- other contexts of jax

def matmul(x, w):
    return x @ w


def test_the_callers_matmul_precision_reaches_the_compiled_program():
    args = (T("x", (64, 64), spec="data,None"), T("w", (64, 64)))
    with jax.default_matmul_precision("highest"):
        highest = explorer.analyze(matmul, *args, mesh=MESH)
    plain = explorer.analyze(matmul, *args, mesh=MESH)
    assert "precision = [HIGHEST, HIGHEST]" in highest.stablehlo
    assert "HIGHEST" not in plain.stablehlo
    # Two programs, so two answers: the cache does not give one for the other.
    assert not highest.timing.cached and not plain.timing.cached


def test_the_callers_mesh_context_serves_bare_partition_specs():
    def constrained(x):
        return jax.lax.with_sharding_constraint(x * 2, P(None, "model"))

    with jax.set_mesh(plain_mesh()):
        report = explorer.analyze(constrained, T("x", (64, 64), spec="data,None"), mesh=MESH)
    assert report.tensor("out").spec == (None, "model")


# ------------------------------------------------------ meshes the user's objects hold

def test_a_closure_over_a_mesh_and_a_named_sharding_compiles():
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
    hidden = NamedSharding(mesh, P("data", "model"))

    def layer(x, w):
        # The closure's sharding is over the explored mesh: the hidden [256, 512] block is
        # split 2 x 4, and x @ w with w split by columns needs no collective to get there.
        return jax.lax.with_sharding_constraint(x @ w, hidden).sum(axis=1)

    r = explorer.analyze(layer, T("x", (256, 1024), spec="data,None"),
                         T("w", (1024, 512), spec="None,model"), mesh="data=2,model=4")
    # The row sums of a [128, 128] block per device are added up over model: an all-reduce
    # of the 128 f32 partial sums each device holds.
    assert [(c.kind, c.axes, c.bytes) for c in r.collectives] == [
        ("all-reduce", ("model",), 128 * 4)]


def test_a_shard_map_over_a_mesh_of_its_own_runs_over_that_mesh():
    experts = Mesh(np.array(jax.devices()[:8]), ("expert",))

    def moe(w, x):
        return jax.shard_map(lambda w, x: jax.lax.psum(jnp.einsum("td,edf->tf", x, w),
                                                       "expert"),
                             mesh=experts, in_specs=(P("expert"), P()), out_specs=P())(w, x)

    r = explorer.analyze(moe, T("w", (8, 64, 32)), T("x", (16, 64)), mesh="data=2,model=4")
    # Every device's experts summed over the 8 of them: one all-reduce of the [16, 32] f32
    # result, over every device (both axes of the explored mesh).
    assert [(c.kind, c.bytes) for c in r.collectives] == [("all-reduce", 16 * 32 * 4)]
    assert set(r.collectives[0].axes) == {"data", "model"}
    assert any("shard_map in the program runs over a mesh of its own" in n for n in r.notes)


def test_a_mesh_larger_than_the_explored_one_is_refused_as_jax_refuses_it():
    big = Mesh(np.array(jax.devices()[:8]).reshape(8), ("expert",))

    def f(x):
        return jax.lax.with_sharding_constraint(x, NamedSharding(big, P("expert")))

    # Traced where it is called, the program is refused there, as plain jax refuses it.
    with pytest.raises(explorer.CompileError,
                       match=r"data=2,model=2 mesh: .*AbstractMesh size: 4 does not match the "
                             r"device assignment size: 8"):
        explorer.analyze(f, T("x", (64,)), mesh="data=2,model=2")


# ----------------------------------------------------------- what could not be pickled

def test_a_function_closing_over_what_cannot_be_pickled_is_traced_here():
    lock = threading.Lock()         # refused when the function was pickled to the worker

    def guarded(x, w):
        with lock:
            return jax.nn.relu(x @ w)

    report = explorer.analyze(guarded, T("x", (64, 128), spec="data,None"),
                              T("w", (128, 256), spec="model,None"), mesh=MESH)
    truth = plain_compile(guarded, (T("x", (64, 128)), ("data", None)),
                          (T("w", (128, 256)), ("model", None)))
    assert collectives_of_report(report) == collectives_of_hlo(truth.as_text())
    # Source lines are this file's, where the function was traced.
    assert all(f"{Path(__file__).name}:" in c.source for c in report.collectives)
    assert report.collectives[0].source_text == "return jax.nn.relu(x @ w)"


# ------------------------------------------------------------- inputs as libraries hold them

nnx = pytest.importorskip("flax.nnx")


class Noisy(nnx.Module):
    def __init__(self, rngs):
        self.up = nnx.Linear(64, 256, use_bias=False, rngs=rngs)
        self.drop = nnx.Dropout(0.1, rngs=rngs)

    def __call__(self, x):
        return self.drop(self.up(x))


@pytest.mark.slow
def test_an_nnx_state_with_its_rng_keys_is_an_input_like_any_other():
    model = nnx.eval_shape(lambda: Noisy(nnx.Rngs(0)))
    graphdef, state = nnx.split(model)

    def forward(state, x):
        return nnx.merge(graphdef, state)(x)

    x = T("x", (32, 64), spec="data,None")
    report = explorer.analyze(forward, state, x, mesh=MESH,
                              specs={r"up\.kernel": "None,model"})
    key = report.tensor("drop.rngs.key.value")
    # jax lays a key<fry> scalar out as its data: uint32[2], the key's own dimension whole.
    assert (key.shape, key.dtype, key.spec) == ((2,), "uint32", (None,))
    # The same program as plain jax compiles with the typed key as its input.
    truth = jax.jit(forward, keep_unused=True).lower(
        _placed(state, {"up": P(None, "model")}), _struct(x)).compile()
    assert collectives_of_report(report) == collectives_of_hlo(truth.as_text())
    m = truth.memory_analysis()
    assert (report.memory.arguments, report.memory.outputs) == (
        m.argument_size_in_bytes, m.output_size_in_bytes)


def _struct(t: T):
    return jax.ShapeDtypeStruct(t.shape, t.dtype, sharding=NamedSharding(plain_mesh(),
                                                                          P(*t.spec)))


def _placed(state, specs: dict):
    mesh = plain_mesh()

    def place(path, leaf):
        spec = specs.get(str(path[0].key), P()) if path[-2].key == "kernel" else P()
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=NamedSharding(mesh, spec))

    return jax.tree_util.tree_map_with_path(place, state)


def test_leaves_that_are_not_arrays_are_held_fixed():
    def act(params, x):
        return getattr(jax.nn, params["activation"])(x @ params["w"]) * params["scale"]

    params = {"w": T("w", (64, 128), spec="None,model"), "activation": "gelu", "scale": 3}
    report = explorer.analyze(act, params, T("x", (32, 64), spec="data,None"), mesh=MESH)
    assert [t.name for t in report.tensors if t.kind == "input"] == ["w", "x"]
    assert "tanh" in report.stablehlo          # gelu's approximation, from the fixed leaf


def test_an_input_the_program_never_reads_is_named_in_the_notes():
    def ignores(x, unused):
        return x * 2

    args = (T("x", (64, 64), spec="data,None"), T("unused", (256, 256)))
    report = explorer.analyze(ignores, *args, mesh=MESH)
    note = next(n for n in report.notes if "never reads" in n)
    assert "unused" in note and "keep_unused" in note
    # Kept, as the note says: its bytes are in the arguments (plain jax with keep_unused=True).
    truth = plain_compile(ignores, (args[0], ("data", None)), (args[1], ()))
    assert report.memory.arguments == truth.memory_analysis().argument_size_in_bytes
    assert not any("never reads" in n for n in explorer.analyze(
        matmul, T("x", (64, 64)), T("w", (64, 64)), mesh=MESH).notes)


def test_a_function_that_fails_to_trace_says_so_here():
    def broken(x):
        return x @ jnp.ones((3, 3))

    with pytest.raises(explorer.CompileError, match=r"'.*broken' raised while it was traced"):
        explorer.analyze(broken, T("x", (64, 64)), mesh=MESH)


# ------------------------------------------------------------- traced again, later

def test_an_edit_traced_later_on_another_thread_keeps_the_contexts_of_the_first():
    step, params, x = linen_step()
    with nn_partitioning.axis_rules(RULES), jax.default_matmul_precision("highest"):
        session = explorer.Session(fn=step, inputs=(params, x), mesh="data=4,model=2")
        with jax.set_mesh(plain_mesh()):
            truth = collectives_of_hlo(linen_truth(step, params, x).as_text())
    # After the blocks closed, on a thread of its own, as an app's edit is traced.
    results = []
    edit = threading.Thread(target=lambda: results.append(
        session.edit(mesh=MESH) and session.analyze()))
    edit.start()
    edit.join()
    [result] = results
    assert collectives_of_report(result.report) == truth
    assert "precision = [HIGHEST, HIGHEST]" in result.report.stablehlo


def test_a_program_that_calls_back_into_this_process_is_compiled_but_not_run():
    def prints(x, w):
        y = x @ w
        jax.debug.print("sum {}", y.sum())
        return y

    args = (T("x", (64, 64), spec="data,None"), T("w", (64, 64)))
    report = explorer.analyze(prints, *args, mesh=MESH, measure=True)
    # Compiled as plain jax compiles it; its callback belongs to this process, so no run.
    assert collectives_of_report(report) == collectives_of_hlo(plain_compile(
        prints, (args[0], ("data", None)), (args[1], ())).as_text())
    assert report.timing.measured_s is None
    assert "calls back into the process that traced it" in report.timing.measure_note


def test_the_same_call_is_not_traced_again_and_another_context_is():
    traces = []

    def counted(x, w):
        traces.append(1)           # runs once per trace
        return x @ w

    args = (T("x", (64, 64), spec="data,None"), T("w", (64, 64)))
    first = explorer.analyze(counted, *args, mesh=MESH)
    again = explorer.analyze(counted, *args, mesh=MESH)
    assert len(traces) == 1 and again.timing.cached and not first.timing.cached
    with jax.default_matmul_precision("highest"):
        other = explorer.analyze(counted, *args, mesh=MESH)
    assert len(traces) == 2 and not other.timing.cached
    # Another mesh is another program.
    explorer.analyze(counted, *args, mesh="data=4,model=2")
    assert len(traces) == 3


def test_a_flat_call_around_a_bound_function_keeps_its_contexts():
    # A search calls the app's function flat (FlatCall) and traces it on its own thread.
    from explorer._src.api.pytrees import FlatCall

    step, params, x = linen_step()
    with nn_partitioning.axis_rules(RULES):
        request = explorer.Request(fn=step, inputs=(params, x), mesh=MESH)
    flat = FlatCall(request.fn, request.planned.inputs)
    made = []
    thread = threading.Thread(target=lambda: made.append(
        explorer.Request(fn=flat, inputs=request.planned.leaves, mesh=MESH)))
    thread.start()
    thread.join()
    [again] = made
    assert "sdy.sharding_constraint" in request.planned.lowered.stablehlo
    assert again.planned.lowered.stablehlo.count("sdy.sharding_constraint") == \
        request.planned.lowered.stablehlo.count("sdy.sharding_constraint")
