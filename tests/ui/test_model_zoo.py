"""A model built the way model zoos build theirs (tests/_support/model_zoo.py), explored first
try and compared with plain jax's compile of the same program.

The model's config caches its meshes (its GraphDef holds Devices), its sharding helper reads
the legacy `with mesh:` context (which the tests enter, as the library's users do), its experts
run in a shard_map over a mesh of their own, and its parameters are placed by '/'-path rules
ending in a catch-all, with a size-1 axis in tuple entries. The model is traced where the test
calls the explorer, as a notebook cell's code is.

Plain jax is the ground truth: the library's own placement (its rules over '/'-joined paths,
first match), compiled under `with mesh:` as the library runs it, in this process on 8 fake
CPU devices; its collectives are read from `compiled.as_text()` by opcode, their bytes from
the shapes printed there (per device, the larger of operands and result, as the textbook V),
its memory from `compiled.memory_analysis()`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

nnx = pytest.importorskip("flax.nnx")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402

import explorer  # noqa: E402
from explorer.ui import explore_module  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_support"))
import model_zoo as zoo  # noqa: E402
from plain_jax import collectives_of_hlo, collectives_of_report  # noqa: E402

MESH = "fsdp=4,sp=1,tp=2"
BATCH, SEQ = 8, 16
@pytest.fixture(scope="module")
def meshes():
    devices = np.array(jax.devices()[:8])
    return (Mesh(devices.reshape(4, 1, 2), ("fsdp", "sp", "tp")),
            Mesh(devices, ("expert",)))


@pytest.fixture(scope="module")
def model(meshes):
    mesh, expert_mesh = meshes
    config = zoo.Config(mesh=mesh, expert_mesh=expert_mesh)
    return nnx.eval_shape(lambda: zoo.Model(config, rngs=nnx.Rngs(0)))


@pytest.fixture(scope="module")
def ground_truth(model, meshes):
    """Plain jax: the library's placement of every parameter, compiled under `with mesh:`."""
    mesh, _ = meshes
    graphdef, state = nnx.split(model)
    params = nnx.to_pure_dict(state)

    def placed(path, leaf):
        spec = zoo.spec_of("/".join(str(k.key) for k in path))
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=NamedSharding(mesh, spec))

    structs = jax.tree_util.tree_map_with_path(placed, params)
    ids = jax.ShapeDtypeStruct((BATCH, SEQ), np.int32,
                               sharding=NamedSharding(mesh, zoo.BATCH_SPEC))

    def step(params, input_ids):
        return zoo.loss(nnx.merge(graphdef, params), input_ids)

    with mesh:
        compiled = jax.jit(step).lower(structs, ids).compile()
    shardings = jax.tree_util.tree_flatten_with_path(compiled.input_shardings[0][0])[0]
    return {
        "collectives": collectives_of_hlo(compiled.as_text()),
        "memory": compiled.memory_analysis(),
        "params": {".".join(str(k.key) for k in path): s.spec for path, s in shardings},
    }


def users_step(model):
    """The user's train-step function over the model's parameters, and those parameters as
    abstract arrays: the step is a closure over the GraphDef, config meshes and all."""
    graphdef, state = nnx.split(model)
    params = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype),
                          nnx.to_pure_dict(state))

    def step(params, input_ids):
        return zoo.loss(nnx.merge(graphdef, params), input_ids)

    return step, params


def input_ids():
    return explorer.TensorSpec("input_ids", (BATCH, SEQ), "int32", spec=zoo.BATCH_SPEC)


def assert_same_program(report, truth):
    assert collectives_of_report(report) == truth["collectives"]
    m = truth["memory"]
    assert (report.memory.arguments, report.memory.outputs, report.memory.temporaries) == (
        m.argument_size_in_bytes, m.output_size_in_bytes, m.temp_size_in_bytes)


@pytest.mark.slow
def test_the_model_as_a_users_function_matches_plain_jax(model, ground_truth, meshes):
    step, params = users_step(model)
    with meshes[0]:          # the library's context, as the user runs the model
        report = explorer.analyze(step, params, input_ids(), mesh=MESH, specs=zoo.RULES)
    assert_same_program(report, ground_truth)
    # The expert shard_map's psum over its own mesh is among them: an all-reduce per layer of
    # the [8, 16, 64] f32 activations, 32 KiB on every device.
    assert ground_truth["collectives"]["all-reduce", BATCH * SEQ * 64 * 4] >= 2
    # Every parameter as the library's '/'-path rules place it, size-1 axis included, and the
    # tokens' own spec kept though the catch-all matches them too.
    for name, spec in ground_truth["params"].items():
        assert report.tensor(name).spec == tuple(spec) + (None,) * (
            len(report.tensor(name).shape) - len(spec)), name
    assert report.tensor("layers.0.mlp.up_proj.kernel").spec == (("fsdp", "sp"), "tp")
    assert report.tensor("input_ids").spec == (("fsdp", "sp"), None)
    assert "P(('fsdp', 'sp'), 'tp')" in report.to_code()
    assert any("shard_map in the program runs over a mesh of its own" in n
               for n in report.notes)
    assert not any("matched no input tensor" in n for n in report.notes)


@pytest.mark.slow
def test_the_module_in_the_app_matches_plain_jax(model, ground_truth, meshes):
    with meshes[0]:
        app = explore_module(model, input_ids(), fn=zoo.loss, mesh=MESH, specs=zoo.RULES,
                             debounce=None)
    report = app.report
    assert report is not None, app.status_w.value
    assert_same_program(report, ground_truth)
    assert report.tensor("embed.embedding").spec == ("tp", ("fsdp", "sp"))
    assert report.tensor("input_ids").spec == (("fsdp", "sp"), None)


@pytest.mark.slow
def test_without_the_librarys_mesh_context_its_helper_fails_as_it_would_in_plain_jax(model):
    # The model's sharding helper reads the legacy `with mesh:` context; traced where it is
    # called, outside it, the helper's own assertion says so.
    step, params = users_step(model)
    with pytest.raises(explorer.CompileError, match="No mesh found under this context manager"):
        explorer.analyze(step, params, input_ids(), mesh=MESH, specs=zoo.RULES)


def test_rules_written_for_other_names_are_named_in_the_notes(model, meshes):
    step, params = users_step(model)
    rules = [(r"model/decoder/layers_\d+/mlp/wi/kernel", ("fsdp", "tp")), *zoo.RULES[-1:]]
    with meshes[0]:
        report = explorer.analyze(step, params, input_ids(), mesh=MESH, specs=rules)
    note = next(n for n in report.notes if "matched no input tensor" in n)
    assert note.startswith(r"spec pattern 'model/decoder/layers_\\d+/mlp/wi/kernel' matched")
