"""Outputs are named as inputs are (issue 53): the key path in dotted form, `out.blocks.0` for
jax's `out['blocks'][0]`, as an input `blocks.0` is named, in the Report, its summary and the
app's tensor picker."""

import jax
import jax.numpy as jnp

import explorer
from explorer import TensorSpec as T
from explorer._src.report.summary import tensors_table


def step(model, x):
    h = x @ model["blocks"][0]["w"]
    y = h @ model["blocks"][1]["w"]
    return {"blocks": [h, y]}, (jnp.sum(y), y.T)


MODEL = {"blocks": [{"w": jax.ShapeDtypeStruct((16, 32), jnp.float32)},
                    {"w": jax.ShapeDtypeStruct((32, 16), jnp.float32)}]}


def test_outputs_and_inputs_are_named_in_one_dotted_form():
    r = explorer.analyze(step, MODEL, T("x", (8, 16), spec="data,None"), mesh="data=2")
    inputs = [t.name for t in r.tensors if t.kind == "input"]
    outputs = [t.name for t in r.tensors if t.kind == "output"]
    assert inputs == ["blocks.0.w", "blocks.1.w", "x"]
    # The returned pytree flattened as jax flattens it: the dict first, then the tuple.
    assert outputs == ["out.0.blocks.0", "out.0.blocks.1", "out.1.0", "out.1.1"]
    assert r.tensor("out.0.blocks.1").shape == (8, 16)         # y = x @ w0 @ w1
    assert r.tensor("out.1.1").shape == (16, 8)                 # y.T
    assert not any("[" in name for name in outputs)
    assert any("out.0.blocks.0" in line for line in tensors_table(r))


def test_a_single_array_is_named_out():
    r = explorer.analyze(lambda x: x * 2, T("x", (8, 16), spec="data,None"), mesh="data=2")
    assert [t.name for t in r.tensors if t.kind == "output"] == ["out"]
