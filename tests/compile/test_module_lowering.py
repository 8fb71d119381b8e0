"""The worker compiles the caller's module as jax compiles the same program itself, and lowers
nothing a second time (explorer/_src/compile/jax_private.py's lowered_module).

Ground truth is plain jax: `jax.jit(f, donate_argnums=...).lower(*structs).compile()` of the
same function on the same 8 CPU devices, in this process."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from explorer import TensorSpec
from explorer._src.compile import backend
from explorer._src.compile.jax_private import lowered_module, new_ir_context
from explorer._src.compile.lowering import lower_program
from explorer._src.spec.mesh import parse_mesh
from explorer._src.spec.tensor import KeyDataSpec


def step(w, x, key):
    """A sharded matmul with a reduction over `model`, an update of the donated `w`, and a
    typed key output: every kind of result the worker must hand back."""
    y = x @ w
    new_key, sub = jax.random.split(key)
    noise = jax.random.normal(sub, w.shape, w.dtype)
    return w - 0.1 * (x.T @ y) + 1e-3 * noise, y.sum(), new_key


MESH = parse_mesh("data=2,model=4")
INPUTS = (TensorSpec("w", (256, 512), "float32", "model,None"),
          TensorSpec("x", (64, 256), "float32", "data,model"))
DONATE = (0,)


def _plain_jax():
    mesh = jax.make_mesh((2, 4), ("data", "model"),
                         axis_types=(jax.sharding.AxisType.Auto,) * 2)
    structs = [jax.ShapeDtypeStruct(t.shape, jnp.dtype(t.dtype),
                                    sharding=NamedSharding(mesh, P(*t.spec))) for t in INPUTS]
    key = jax.random.key(0)
    key_struct = jax.ShapeDtypeStruct(key.shape, key.dtype,
                                      sharding=NamedSharding(mesh, P()))
    with jax.set_mesh(mesh):
        return jax.jit(step, donate_argnums=DONATE).lower(*structs, key_struct).compile()


def _explorer(monkeypatch=None):
    key = KeyDataSpec("key", (2,), "uint32", (), impl="threefry2x32")
    args = (*INPUTS, key)
    program = lower_program(step, args, MESH, "cpu", "shardy", donated=DONATE)
    if monkeypatch is not None:
        # The worker's side of the compile may not lower anything: the caller did.
        from jax._src.interpreters import pxla

        def no_lowering(*a, **k):
            raise AssertionError("the worker lowered a program")

        monkeypatch.setattr(pxla, "lower_sharding_computation", no_lowering)
    return backend.compile_request(program, args, MESH, "shardy", donate=DONATE)


def test_the_worker_lowers_nothing(monkeypatch):
    result = _explorer(monkeypatch)
    assert result.optimized


@pytest.mark.slow
def test_the_compile_is_plain_jax_s_compile_of_the_same_program():
    plain = _plain_jax()
    ours = _explorer()
    # The same optimized program: every instruction alike, but for its metadata (the explorer
    # keeps each op's innermost frame of the user's code, jax its whole stack).
    def instructions(text):
        return [re.sub(r", metadata=\{[^}]*\}", "", line) for line in text.splitlines()
                if " = " in line and not line.startswith("HloModule")]

    assert instructions(ours.optimized) == instructions(plain.as_text())
    # The same inputs' and outputs' layouts as jax reports them.
    assert [i.sharding for i in ours.inputs] == [
        str(s._to_xla_hlo_sharding(len(a.shape))) for s, a in zip(
            jax.tree.leaves(plain.input_shardings[0]), jax.tree.leaves(plain.args_info),
            strict=True)]
    out_shapes = [(tuple(o.shape), str(o.dtype)) for o in jax.tree.leaves(plain.out_info)]
    assert [(tuple(o.shape), o.dtype) for o in ours.outputs] == out_shapes
    # The donated w is written in place, as plain jax's executable aliases it.
    memory = plain.memory_analysis()
    assert ours.memory["aliased"] == memory.alias_size_in_bytes == 256 * 512 * 4 // 4
    assert ours.memory["temporaries"] == memory.temp_size_in_bytes


@pytest.mark.parametrize("seed", [0, 1])
def test_a_measured_run_computes_what_plain_jax_computes(seed):
    """The executable built from the caller's module runs: its result for given inputs is
    plain jax's."""
    program = lower_program(lambda w, x: x @ w, INPUTS, MESH, "cpu", "shardy")
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
    structs = [jax.ShapeDtypeStruct(t.shape, jnp.dtype(t.dtype),
                                    sharding=NamedSharding(mesh, P(*t.spec))) for t in INPUTS]
    compiled = lowered_module(program.stablehlo, new_ir_context(), structs, program.outputs,
                              mesh, (), "cpu").compile()
    rng = np.random.default_rng(seed)
    w, x = (jax.device_put(rng.standard_normal(t.shape, np.float32), s.sharding)
            for t, s in zip(INPUTS, structs, strict=True))
    (ours,) = compiled(w, x)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(x) @ np.asarray(w),
                               rtol=1e-5, atol=1e-4)


def test_the_lowering_holds_what_plain_jax_s_lowering_holds():
    """The fields of the MeshComputation built for the caller's module are the ones plain jax's
    `jit(...).lower(...)` fills, with the same values where they do not name the module's own
    objects: on every tested jax, so that a release that adds or renames a field fails here,
    not in a user's compile."""
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"),
                axis_types=(jax.sharding.AxisType.Auto,) * 2)
    structs = [jax.ShapeDtypeStruct(t.shape, jnp.dtype(t.dtype),
                                    sharding=NamedSharding(mesh, P(*t.spec))) for t in INPUTS]

    def f(w, x):
        return x @ w, (x @ w).sum()

    plain = jax.jit(f, donate_argnums=(0,), keep_unused=True).lower(*structs)._lowering
    program = lower_program(f, INPUTS, MESH, "cpu", "shardy", donated=(0,))
    ours = lowered_module(program.stablehlo, new_ir_context(), structs, program.outputs, mesh,
                          (0,), "cpu")._lowering
    assert sorted(ours.compile_args) == sorted(plain.compile_args)
    # Not compared: the backend client and the avals' debug info (the same objects by other
    # names), the context mesh (jax's is empty outside a set_mesh; the worker's is the mesh it
    # compiles over), the shape-polymorphism state (none in a module lowered elsewhere).
    same = ("committed", "num_devices", "in_layouts", "out_layouts", "kept_var_idx",
            "tuple_args", "host_callbacks", "keepalive", "ordered_effects",
            "unordered_effects", "intermediate_shardings", "mut", "pgle_profiler",
            "global_in_avals", "global_out_avals", "in_shardings")
    for field in same:
        assert ours.compile_args[field] == plain.compile_args[field], field
    assert ours._donated_invars == plain._donated_invars == (True, False)
    assert ours._platforms == plain._platforms
    assert tuple(ours._device_list) == tuple(plain._device_list)
