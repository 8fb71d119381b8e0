"""explorer._src.compile.jaxpr_graph: a program traced once into plain data.

Expectations are the programs' own shapes and structure, written out by hand; jax is only the
thing traced."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import functools
import pickle

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

from explorer._src.compile.jaxpr_graph import JaxprOp, Program, Var, trace_program
from explorer._src.errors import CompileError, ExplorerError
from explorer._src.spec.mesh import parse_mesh
from explorer._src.spec.tensor import TensorSpec
from explorer._src.workloads.registry import get_workload

MESH = parse_mesh("data=2,model=4")


def _t(name, shape, dtype="float32"):
    return TensorSpec(name, shape, dtype)


def _ops(program: Program) -> list[JaxprOp]:
    """Every op, bodies included, in program order."""
    out = []
    for op in program.ops:
        out.append(op)
        if op.body is not None:
            out += _ops(op.body)
    return out


def _plain(value) -> bool:
    """Whether `value` is made of plain Python data only (what the estimate stage may read)."""
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if isinstance(value, tuple):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def test_a_matmul_becomes_vars_and_one_dot():
    prog = trace_program(lambda x, w: jnp.tanh(x @ w), [_t("x", (16, 64)), _t("w", (64, 32))],
                         MESH)
    assert prog.names == ("x", "w")
    assert [prog.vars[i] for i in prog.inputs] == [Var((16, 64), "float32"),
                                                   Var((64, 32), "float32")]
    assert [op.primitive for op in prog.ops] == ["dot_general", "tanh"]
    dot = prog.ops[0]
    assert dot.inputs == prog.inputs
    # ((lhs contracting, rhs contracting), (lhs batch, rhs batch)), as tuples
    assert dot.params["dimension_numbers"] == (((1,), (0,)), ((), ()))
    assert prog.vars[dot.outputs[0]] == Var((16, 32), "float32")
    assert prog.outputs == prog.ops[1].outputs
    assert prog.vars[prog.outputs[0]].nbytes == 16 * 32 * 4


def test_params_are_plain_data_and_the_program_pickles():
    def f(x, idx):
        y = jnp.take(x, idx, axis=0).astype(jnp.bfloat16)
        return jnp.transpose(y.reshape(8, 4, 16), (2, 0, 1)), jnp.cumsum(x, axis=1)

    prog = trace_program(f, [_t("x", (16, 64)), _t("idx", (8,), "int32")], MESH)
    for op in _ops(prog):
        assert _plain(dict(op.params)), (op.primitive, op.params)
    gather = next(op for op in prog.ops if op.primitive == "gather")
    # A NamedTuple of jax's becomes a dict of its fields.
    assert gather.params["dimension_numbers"]["collapsed_slice_dims"] == (0,)
    assert gather.params["slice_sizes"] == (1, 64)
    convert = next(op for op in prog.ops if op.primitive == "convert_element_type")
    assert convert.params["new_dtype"] == "bfloat16"
    assert prog.vars[convert.outputs[0]].itemsize == 2
    back = pickle.loads(pickle.dumps(prog))
    assert repr(back) == repr(prog)           # (a gather's fill_value is nan, never equal)


def test_calls_are_inlined():
    @jax.custom_vjp
    def twice(x):
        return 2 * x

    twice.defvjp(lambda x: (2 * x, None), lambda _, g: (2 * g,))

    def f(x):
        y = jax.jit(lambda a: a + 1.0)(x)               # jit
        y = jax.nn.relu(y)                              # custom_jvp_call
        y = twice(y)                                    # custom_vjp_call
        return jax.checkpoint(lambda a: jnp.sin(a))(y)  # remat

    prog = trace_program(f, [_t("x", (4, 4))], MESH)
    names = [op.primitive for op in prog.ops]
    assert not {"jit", "pjit", "custom_jvp_call", "custom_vjp_call", "remat2", "checkpoint"} \
        & set(names)
    assert names == ["add", "max", "mul", "sin"]
    # The inlined ops chain through the caller's vars: each reads the one before.
    for before, after in zip(prog.ops, prog.ops[1:], strict=False):
        assert before.outputs[0] in after.inputs
    assert prog.outputs == prog.ops[-1].outputs


def test_literals_are_none_and_closed_over_arrays_are_constants():
    table = jnp.arange(16.0).reshape(4, 4)

    prog = trace_program(lambda x: x * 2.0 + table, [_t("x", (4, 4))], MESH)
    mul = next(op for op in prog.ops if op.primitive == "mul")
    assert mul.inputs[1] is None                      # the literal 2.0
    add = next(op for op in prog.ops if op.primitive == "add")
    const = next(op for op in prog.ops if op.primitive == "constant")
    assert const.outputs[0] in add.inputs
    assert prog.vars[const.outputs[0]] == Var((4, 4), "float32")


def test_scan_keeps_its_body_and_trip_count():
    def f(x, ws):
        return jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), h.sum()), x, ws)

    prog = trace_program(f, [_t("x", (16, 64)), _t("ws", (3, 64, 64))], MESH)
    scan = next(op for op in prog.ops if op.primitive == "scan")
    assert scan.runs == 3
    assert scan.params["num_consts"] == 0 and scan.params["num_carry"] == 1
    body = scan.body
    # Body inputs: the carry, then one slice of xs.
    assert [body.vars[i].shape for i in body.inputs] == [(16, 64), (64, 64)]
    # Body outputs: the carry, then one y per iteration; the scan stacks the ys.
    assert [body.vars[i].shape for i in body.outputs] == [(16, 64), ()]
    assert [prog.vars[o].shape for o in scan.outputs] == [(16, 64), (3,)]
    assert [op.primitive for op in body.ops][:2] == ["dot_general", "tanh"]


def test_while_and_cond_bodies_with_notes():
    def f(x):
        y = jax.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))[1]
        return jax.lax.cond(x[0, 0] > 0, lambda a: a + 1.0, lambda a: a @ a @ a, y)

    prog = trace_program(f, [_t("x", (8, 8))], MESH)
    loop = next(op for op in prog.ops if op.primitive == "while")
    assert loop.runs == 1 and "trip count" in loop.note
    assert loop.params["num_carry"] == 2 and len(loop.inputs) == 2
    cond = next(op for op in prog.ops if op.primitive == "cond")
    # The branch with the two matmuls is the one counted (jax lists the false branch first);
    # the branch index is not an input.
    assert [op.primitive for op in cond.body.ops] == ["dot_general", "dot_general"]
    assert cond.params["branch"] == 0 and "branch 0 of 2" in cond.note
    assert len(cond.inputs) == 1


def test_shard_map_body_is_per_device_with_its_collectives():
    mesh = jax.sharding.AbstractMesh((2, 4), ("data", "model"))

    def f(x):
        def body(a):
            return jax.lax.psum(a, "model"), jax.lax.all_gather(a, "data", axis=0, tiled=True)

        return jax.shard_map(body, mesh=mesh, in_specs=P("data", "model"),
                             out_specs=(P("data", None), P(None, "model")), check_vma=False)(x)

    prog = trace_program(f, [_t("x", (16, 32))], MESH)
    sm = next(op for op in prog.ops if op.primitive == "shard_map")
    assert sm.params["in_specs"] == (("data", "model"),)
    assert sm.params["out_specs"] == (("data", None), (None, "model"))
    assert sm.params["manual_axes"] == ("data", "model")
    # Per-device shapes: 16/2 x 32/4.
    assert [sm.body.vars[i].shape for i in sm.body.inputs] == [(8, 8)]
    psum = next(op for op in sm.body.ops if op.primitive == "psum")
    assert psum.params["axes"] == ("model",)
    gather = next(op for op in sm.body.ops if op.primitive == "all_gather")
    assert gather.params["axis_name"] == ("data",)
    assert sm.body.vars[gather.outputs[0]].shape == (16, 8)


def test_constraints_carry_their_point_and_spec_on_an_abstract_mesh():
    # 256 devices: more than the process has, so the trace cannot have used any.
    mesh = parse_mesh("data=16,model=16")

    def f(x):
        with jax.named_scope("outer"):
            with jax.named_scope("hidden"):
                y = jax.lax.with_sharding_constraint(x * 2.0, P("data", ("model",)))
            z = jax.lax.with_sharding_constraint(y, P(None, "model"))
        return jax.lax.with_sharding_constraint(z, P())

    prog = trace_program(f, [_t("x", (32, 64))], mesh)
    cons = [op for op in prog.ops if op.primitive == "sharding_constraint"]
    assert [c.point for c in cons] == ["hidden", "outer", ""]
    assert [c.own_spec for c in cons] == [("data", "model"), (None, "model"), ()]
    assert all(op.own_spec is None for op in prog.ops if op.primitive != "sharding_constraint")


def test_a_constraint_without_a_scope_takes_the_one_around_its_call_or_loop():
    def f(x):
        def step(h, _):
            return jax.lax.with_sharding_constraint(h * 2.0, P("data", None)), None

        with jax.named_scope("block"):
            y = jax.jit(lambda a: jax.lax.with_sharding_constraint(a, P("data", None)))(x)
            return jax.lax.scan(step, y, None, length=2)[0]

    prog = trace_program(f, [_t("x", (16, 64))], MESH)
    assert [op.point for op in _ops(prog) if op.primitive == "sharding_constraint"] == \
        ["block", "block"]


def test_a_constraint_in_the_backward_pass_keeps_its_point():
    def f(x, w):
        def loss(w):
            with jax.named_scope("act"):
                h = jax.lax.with_sharding_constraint(x @ w, P("data", None))
            return jnp.sum(h ** 2)

        return jax.grad(loss)(w)

    prog = trace_program(f, [_t("x", (16, 64)), _t("w", (64, 32))], MESH)
    points = [op.point for op in prog.ops if op.primitive == "sharding_constraint"]
    assert points == ["act", "act"]          # forward, and its transpose in the backward


def test_transformer_train_traces_with_every_point():
    w = get_workload("transformer_train")
    p = w.resolve({})
    tensors = w.tensors(p)
    state = [t.name for t in tensors if t.name not in ("tokens", "targets")]
    names = [*w.points(p), *state]
    fn = functools.partial(w.build(p), constraints={n: () for n in names})
    prog = trace_program(fn, tensors, MESH)
    assert prog.names == tuple(t.name for t in tensors)
    assert [prog.vars[i].shape for i in prog.inputs] == [t.shape for t in tensors]
    seen = {op.point for op in _ops(prog) if op.primitive == "sharding_constraint"}
    assert seen == set(names)
    scans = [op for op in prog.ops if op.primitive == "scan"]
    assert [s.runs for s in scans] == [p["layers"], p["layers"]]    # forward and backward


def test_a_function_that_fails_to_trace_is_a_compile_error():
    def bad(x):
        return x @ jnp.ones((3, 3))

    with pytest.raises(CompileError, match=r"could not trace 'test_a_function_that_fails.*"
                                           r"dot_general") as info:
        trace_program(bad, [_t("x", (4, 4))], MESH)
    assert isinstance(info.value, ExplorerError)
