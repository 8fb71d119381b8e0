"""`out_specs` pins a function's outputs as jax.jit's `out_shardings` does
(explorer/_src/api/output_specs.py).

Plain jax is the ground truth: the same step compiled in this process on 8 fake CPU devices
(tests/conftest.py) with `out_shardings`, its collectives read from the optimized HLO by opcode
(tests/_support/plain_jax.py), its memory from `compiled.memory_analysis()`.
"""

from __future__ import annotations

import sys
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
W_SPEC, X_SPEC = ("model", None), ("data", None)


def step(w, x):
    """An SGD step on a linear layer: the new weight and the loss."""
    def loss(w):
        return jnp.mean((x @ w) ** 2)
    value, g = jax.value_and_grad(loss)(w)
    return {"w": w - 0.1 * g, "loss": value}


def plain_mesh() -> Mesh:
    return Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"),
                axis_types=(AxisType.Auto,) * 2)


def plain(out_shardings):
    mesh = plain_mesh()
    w = jax.ShapeDtypeStruct((512, 256), jnp.float32, sharding=NamedSharding(mesh, P(*W_SPEC)))
    x = jax.ShapeDtypeStruct((64, 512), jnp.float32, sharding=NamedSharding(mesh, P(*X_SPEC)))
    jit = {} if out_shardings is None else {"out_shardings": out_shardings(mesh)}
    return jax.jit(step, keep_unused=True, **jit).lower(w, x).compile()


def explored(**kw):
    return explorer.analyze(step, T("w", (512, 256), spec=W_SPEC), T("x", (64, 512), spec=X_SPEC),
                            mesh=MESH, use_cache=False, **kw)


def out_spec(report, name):
    return next(t.spec for t in report.tensors if t.name == name)


def test_pinned_outputs_compile_as_jax_jits_out_shardings():
    pinned = {"w": P("data", "model"), "loss": None}
    truth = plain(lambda mesh: {"w": NamedSharding(mesh, P("data", "model")), "loss": None})
    report = explored(out_specs=pinned)
    assert collectives_of_report(report) == collectives_of_hlo(truth.as_text())
    memory = truth.memory_analysis()
    assert (report.memory.arguments, report.memory.outputs, report.memory.temporaries) == (
        memory.argument_size_in_bytes, memory.output_size_in_bytes,
        memory.temp_size_in_bytes)
    assert out_spec(report, "out.w") == ("data", "model")
    # Left free, the program is another one: the partitioner keeps the weight's own layout.
    free = explored()
    assert collectives_of_report(free) == collectives_of_hlo(plain(None).as_text())
    assert collectives_of_report(free) != collectives_of_report(report)
    assert out_spec(free, "out.w") == W_SPEC


def test_every_form_of_a_spec_pins_the_same_program():
    mesh = plain_mesh()
    forms = [{"w": "data,model", "loss": None},
             {"w": NamedSharding(mesh, P("data", "model")), "loss": None},
             {"w": P(("data",), "model"), "loss": P()}]
    texts = {explored(out_specs=f).optimized_hlo for f in forms[:2]}
    assert len(texts) == 1
    replicated_loss = explored(out_specs=forms[2])
    assert out_spec(replicated_loss, "out.w") == ("data", "model")


def test_out_specs_refused_with_the_axis_or_the_forms_named():
    with pytest.raises(explorer.SpecError, match=r"axis 'fsdp' in out_specs 'fsdp,None' is "
                       r"not found in mesh 'data=2,model=4'; valid axes: 'data', 'model'"):
        explored(out_specs={"w": "fsdp,None", "loss": None})
    with pytest.raises(explorer.InputError, match=r"out_specs leaf 3 is not spec text"):
        explored(out_specs={"w": 3, "loss": None})
    with pytest.raises(explorer.InputError, match="out_specs= is not part of a workload's"):
        explorer.Request(workload="mlp", mesh=MESH, out_specs="data,None")
    # A prefix that does not fit the output is jax's to refuse, when the step is traced.
    with pytest.raises(explorer.CompileError, match="out_shardings"):
        explored(out_specs=("data,model", None, None))
