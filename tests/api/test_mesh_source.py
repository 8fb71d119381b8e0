"""Where a request's mesh comes from (explorer/_src/api/mesh_source.py), each axis's type
(explorer/_src/spec/mesh.py), and a jax Mesh given as mesh= in force while the program is traced.

Ground truth is plain jax where a compile is compared: the same function jitted and compiled on
the same 8 CPU devices of this process (tests/conftest.py)."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import explorer
from explorer import Request, TensorSpec, parse_mesh
from explorer._src.api.exploration import Exploration, from_link

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_support"))
from legacy_mesh import legacy_mesh, reads_the_legacy_mesh  # noqa: E402

E, A = AxisType.Explicit, AxisType.Auto


def _struct(shape, mesh, spec):
    return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))


def matmul(x, w):
    return x @ w


# ----------------------------------------------------------------------- the mesh's sources


def test_two_meshes_that_differ_are_refused_naming_both():
    """The inputs on one mesh, the caller's jax.set_mesh on another: nothing is guessed."""
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(A, A))
    other = jax.make_mesh((4, 2), ("data", "model"), axis_types=(A, A))
    x = _struct((8, 16), mesh, P("data", None))
    with jax.set_mesh(other), pytest.raises(explorer.InputError) as e:
        explorer.analyze(lambda a: a * 2, x)
    message = str(e.value)
    assert "input 'a' is on data=2,model=4 (auto axes)" in message
    assert "the caller's jax.set_mesh on data=4,model=2 (auto axes)" in message
    assert "mesh=" in message


def test_two_inputs_on_meshes_of_other_axis_types_are_refused():
    explicit = jax.make_mesh((2, 4), ("data", "model"), axis_types=(E, E))
    auto = jax.make_mesh((2, 4), ("data", "model"), axis_types=(A, A))
    with pytest.raises(explorer.InputError, match=r"input 'x' is on data=2,model=4 \(explicit "
                                                  r"axes\), input 'w' on data=2,model=4 "
                                                  r"\(auto axes\)"):
        explorer.Request(fn=matmul, inputs=(_struct((8, 16), explicit, P("data", None)),
                                            _struct((16, 4), auto, P())))


def test_no_mesh_anywhere_is_refused_as_before():
    with pytest.raises(explorer.InputError, match="mesh= is missing.*no input carries a "
                                                  "NamedSharding"):
        explorer.analyze(matmul, TensorSpec("x", (8, 8)), TensorSpec("w", (8, 8)))


def test_the_caller_s_set_mesh_is_the_mesh_of_inputs_without_shardings():
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(E, A))
    with jax.set_mesh(mesh):
        request = Request(fn=matmul, inputs=(TensorSpec("x", (8, 16), spec="data,None"),
                                             TensorSpec("w", (16, 4))))
    assert request.planned.mesh == parse_mesh("data=2:explicit,model=4:auto")


def test_mesh_given_wins_over_the_inputs_mesh_and_keeps_their_specs():
    """mesh= given: the inputs' PartitionSpecs are placed on it, as before."""
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(A, A))
    request = Request(fn=matmul, inputs=(_struct((8, 16), mesh, P("data", None)),
                                         _struct((16, 4), mesh, P())), mesh="data=4,model=2")
    assert request.planned.mesh.sizes == (4, 2)
    assert request.planned.leaves[0].spec == ("data", None)


# ----------------------------------------------------------------- a jax Mesh as mesh=


@pytest.mark.slow
def test_a_jax_mesh_given_is_in_force_while_the_program_is_traced():
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(A, A))
    x = TensorSpec("x", (8, 16))
    report = explorer.analyze(reads_the_legacy_mesh, x, mesh=mesh)
    assert report.mesh == parse_mesh("data=2,model=4")
    # As plain jax compiles it under the same mesh, in both forms.
    with jax.set_mesh(mesh), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with mesh:
            plain = jax.jit(reads_the_legacy_mesh).lower(
                jax.ShapeDtypeStruct((8, 16), jnp.float32, sharding=NamedSharding(mesh, P()))
            ).compile()
    [out] = [t for t in report.tensors if str(t.kind) == "output"]
    [plain_out] = jax.tree.leaves(plain.output_shardings)
    assert out.sharding == str(plain_out._to_xla_hlo_sharding(2))
    # Outside the call, nothing is left in force.
    assert legacy_mesh().empty


def test_a_jax_mesh_keeps_its_axis_types():
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(E, A))
    request = Request(fn=matmul, inputs=(TensorSpec("x", (8, 16), spec="data,None"),
                                         TensorSpec("w", (16, 4))), mesh=mesh)
    assert [str(t) for t in request.planned.mesh.axis_types] == ["explicit", "auto"]


# ------------------------------------------------------------------- per-axis types


def test_mixed_axis_types_through_the_api_compile_as_plain_jax():
    """`data=2:explicit,model=4` is jax's mesh with axis_types=(Explicit, Auto): the same
    program as plain jax's under that mesh."""
    x, w = TensorSpec("x", (8, 16), spec="data,None"), TensorSpec("w", (16, 32))
    report = explorer.analyze(matmul, x, w, mesh="data=2:explicit,model=4")
    assert report.mesh.axis_types == ("explicit", "auto")
    assert report.mesh.to_dict()["axis_types"] == {"data": "explicit", "model": "auto"}
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(E, A))
    with jax.set_mesh(mesh):
        plain = jax.jit(matmul).lower(_struct((8, 16), mesh, P("data", None)),
                                      _struct((16, 32), mesh, P())).compile()
    # The type of the output carries the Explicit axis only, as plain jax's trace types it.
    [out] = [t for t in report.tensors if str(t.kind) == "output"]
    assert out.typed_spec == ("data", None)
    assert out.sharding == str(jax.tree.leaves(plain.output_shardings)[0]
                               ._to_xla_hlo_sharding(2))
    memory = plain.memory_analysis()
    assert report.memory.temporaries == memory.temp_size_in_bytes
    assert report.memory.outputs == memory.output_size_in_bytes
    # The summary says each axis's type, and the sharding in each value's type.
    text = explorer.summary(report)
    assert "(8 devices, data explicit, model auto axes)" in text
    header = next(line for line in text.splitlines() if "tensor" in line and "kind" in line)
    assert "in type" in header
    assert report.to_dict()["tensors"][0]["typed_spec_text"] == "data,None"


@pytest.mark.parametrize("text, types", [
    ("data=2:explicit,model=4", ("explicit", "auto")),
    ("data=2, model=4:explicit", ("auto", "explicit")),
    ("data=2:manual,model=4:explicit", ("manual", "explicit")),
    ("data=2:explicit,model=4:explicit", ("explicit", "explicit")),
])
def test_the_mesh_grammar_takes_a_type_per_axis(text, types):
    mesh = parse_mesh(text)
    assert mesh.axis_types == types
    assert parse_mesh(mesh.text(), mesh.axis_types[0]) == mesh    # text reads back


def test_jax_s_own_axis_types_are_read_by_their_names():
    """axis_type= as the docs write axis_types=: jax's AxisType members."""
    request = Request(fn=matmul, inputs=(TensorSpec("x", (8, 16), spec="data,None"),
                                         TensorSpec("w", (16, 4))),
                      mesh="data=2,model=4", axis_type=(E, A))
    assert request.planned.mesh == parse_mesh("data=2:explicit,model=4")
    assert parse_mesh("x=8", E).axis_type == "explicit"


def test_a_mesh_of_one_type_is_the_mesh_it_was():
    """One type throughout is that one type (one mesh, one cache key), and a bad type is
    named with its axis and the choices."""
    assert parse_mesh("data=2:explicit,model=4:explicit") == parse_mesh("data=2,model=4",
                                                                         "explicit")
    assert parse_mesh("x=8").axis_type == "auto"
    with pytest.raises(explorer.MeshError, match="axis type 'explict' of mesh axis 'data' is "
                                                 "not one of 'auto', 'explicit', 'manual'"):
        parse_mesh("data=2:explict,model=4")
    with pytest.raises(explorer.MeshError, match="2 axes but 3 axis types"):
        explorer.MeshSpec(("a", "b"), (2, 4), ("auto", "auto", "explicit"))


def test_the_cli_takes_a_type_per_axis(cli):
    code, out, err = cli(["analyze", "--workload", "mlp", "--mesh", "data=2:explicit,model=4",
                          "--json"])
    assert code == 0, err
    assert json.loads(out)["mesh"]["axis_types"] == {"data": "explicit", "model": "auto"}
    code, out, err = cli(["analyze", "--workload", "mlp", "--mesh", "data=2:sideways,model=4"])
    assert code != 0 and "'sideways'" in err and "'auto', 'explicit', 'manual'" in err


def test_a_saved_exploration_keeps_each_axis_s_type(tmp_path):
    x, w = TensorSpec("x", (8, 16), spec="data,None"), TensorSpec("w", (16, 32))
    report = explorer.analyze(matmul, x, w, mesh="data=2:explicit,model=4")
    saved = Exploration.from_report(report, matmul)
    assert saved.mesh == "data=2:explicit,model=4:auto"
    path = tmp_path / "mixed.json"
    saved.save(path)
    for loaded in (explorer.load_exploration(path), from_link(saved.to_link())):
        assert loaded == saved
        again = loaded.analyze(matmul, x, w)
        assert again.mesh == report.mesh


def test_the_report_s_code_makes_the_mesh_with_each_axis_s_type():
    x, w = TensorSpec("x", (8, 16), spec="data,None"), TensorSpec("w", (16, 32))
    report = explorer.analyze(matmul, x, w, mesh="data=2:explicit,model=4")
    lines = report.to_code().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("mesh = jax.make_mesh("))
    namespace = {"jax": jax, "AxisType": AxisType}
    exec("\n".join(lines[start:start + 2]), namespace)      # the code's own two lines
    assert namespace["mesh"].axis_types == (E, A)
    assert namespace["mesh"].axis_names == ("data", "model")


def test_a_request_on_the_user_s_jax_mesh_pickles():
    """A Request travels (to a Ray task) without the jax meshes it was made with, whose
    devices do not pickle, and compiles there as here."""
    import pickle

    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(E, A))
    request = Request(fn=matmul, inputs=(_struct((8, 16), mesh, P("data", None)),
                                         _struct((16, 32), mesh, P())), mesh=mesh)
    here = explorer.analyze(request)
    there = pickle.loads(pickle.dumps(request))
    assert there.planned.mesh == request.planned.mesh
    assert explorer.analyze(there, use_cache=False).collectives == here.collectives


def test_the_legacy_with_mesh_names_the_mesh_and_is_in_force_while_tracing():
    """Inside the legacy `with mesh:` with no mesh=, the mesh is that one, and the program
    reads it while it is traced, as it would under plain jax."""
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(A, A))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with mesh:
            report = explorer.analyze(reads_the_legacy_mesh, TensorSpec("x", (8, 16)))
            plain = jax.jit(reads_the_legacy_mesh).lower(
                _struct((8, 16), mesh, P())).compile()
    assert report.mesh == parse_mesh("data=2,model=4")
    [out] = [t for t in report.tensors if str(t.kind) == "output"]
    assert out.sharding == str(jax.tree.leaves(plain.output_shardings)[0]
                               ._to_xla_hlo_sharding(2))


def test_a_jax_mesh_given_is_the_mesh_jax_s_own_readers_see():
    """Inside the trace, jax.sharding.get_abstract_mesh() is the given mesh's own (its device
    kind included), as under jax.set_mesh(mesh), so that a shard_map over it matches."""
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(A, A))
    seen = []

    def f(x):
        seen.append(jax.sharding.get_abstract_mesh())
        return jax.shard_map(lambda b: b * 2, mesh=mesh, in_specs=P("data"),
                             out_specs=P("data"))(x)

    report = explorer.analyze(f, TensorSpec("x", (8, 16)), mesh=mesh)
    with jax.set_mesh(mesh):
        jax.jit(f).trace(_struct((8, 16), mesh, P()))
    assert seen[0] == seen[1] == mesh.abstract_mesh
    assert not [n for n in report.notes if "mesh of its own" in n]


def test_a_what_if_of_a_request_without_mesh_keeps_the_inputs_mesh():
    """A what-if's variants replace the inputs with TensorSpecs, which name no mesh: the
    Request keeps the one its inputs named (their abstract mesh), so the variants compile on
    it, axis types included."""
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(A, A))
    request = Request(fn=matmul, inputs=(_struct((8, 16), mesh, P("data", "model")),
                                         _struct((16, 32), mesh, P("model", None))))
    assert request.mesh == mesh.abstract_mesh
    report = explorer.analyze(request)
    [reduce] = [i for i, c in enumerate(report.collectives) if str(c.kind) == "all-reduce"]
    found = explorer.what_if(request, reduce)
    assert found and all(w.report.mesh == report.mesh for w in found)
