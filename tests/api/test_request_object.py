"""explorer.Request: one checked analysis. It checks every field when it is made (an
InputError naming the field and the choices), plans the layout once, when `plan()` is first
asked (explorer.analyze asks it), and explorer.analyze runs it without checking or planning
again. The expected shard shapes and bytes are worked out
by hand from the shapes and the mesh."""

import dataclasses

import jax
import numpy as np
import pytest

import explorer
from explorer import Request, TensorSpec
from explorer._src.api import analysis_request
from explorer._src.lru import Lru

MESH = "data=2,model=4"


@pytest.mark.parametrize("fields, error, words", [
    (dict(partitioner="gpsmd"), explorer.InputError, "partitioner 'gpsmd' is not one of "
                                                     "'shardy', 'gspmd'"),
    (dict(compile_for="gpu"), explorer.InputError, "compile_for='gpu' is not one of "
                                                   "'target', 'cpu'"),
    (dict(axis_type="implicit"), explorer.MeshError, "'implicit' is not one of 'auto', "
                                                     "'explicit', 'manual'"),
    (dict(target="h100-9"), explorer.TargetError, "h100-9"),
    (dict(workload="mpl"), explorer.WorkloadError, "is unknown; choose one of 'matmul'"),
    (dict(preset="megatorn"), explorer.PresetError, "megatorn"),
    (dict(params={"batch": 0}), explorer.WorkloadError, "batch=0"),
    (dict(mesh="data=2,model=x"), explorer.MeshError, "axis 'model' has size 'x'"),
    (dict(timeout=-1), explorer.InputError, "timeout -1 is not a positive"),
    (dict(inputs=(TensorSpec("x", (8, 8)),)), explorer.InputError,
     "inputs= is not part of a workload's request"),
])
def test_a_bad_field_is_refused_when_the_request_is_made(fields, error, words):
    with pytest.raises(error, match=words.replace("(", r"\(")):
        Request(**{"workload": "mlp", "mesh": MESH, **fields})


def matmul(x, w):
    return x @ w


def test_a_function_request_refuses_a_workload_s_fields_and_a_second_program():
    x = TensorSpec("x", (256, 1024))
    with pytest.raises(explorer.InputError, match="preset= is not part of a function's"):
        Request(fn=matmul, inputs=(x, x), mesh=MESH, preset="dp")
    with pytest.raises(explorer.InputError, match="a built-in workload or a function, not both"):
        Request(fn=matmul, workload="mlp", inputs=(x, x), mesh=MESH)


def test_a_request_is_checked_when_made_planned_once_and_analyze_plans_nothing_again(
        monkeypatch):
    # Layouts planned by earlier tests are not reused here.
    monkeypatch.setattr(analysis_request, "_LAYOUTS", Lru(analysis_request.LAYOUTS_KEPT))
    calls = {"plan": 0, "check_mesh": 0}
    for name in calls:
        real = getattr(analysis_request, name)

        def counted(*a, _real=real, _name=name, **k):
            calls[_name] += 1
            return _real(*a, **k)
        monkeypatch.setattr(analysis_request, name, counted)
    request = Request(workload="mlp", mesh=MESH, preset="megatron")
    assert calls == {"plan": 0, "check_mesh": 1}            # made: checked, not planned
    planned = request.plan()
    assert request.plan() is planned and request.planned is planned
    assert calls == {"plan": 1, "check_mesh": 1}
    # The megatron MLP by hand: x (256, 1024) split by rows over data, w1 (1024, 4096) by
    # columns and w2 (4096, 1024) by rows over model.
    assert [t.spec for t in request.planned.leaves] == [("data", None), (None, "model"),
                                                        ("model", None)]
    report = explorer.analyze(request)
    again = explorer.analyze(request)
    assert calls == {"plan": 1, "check_mesh": 1}
    assert again.timing.cached
    assert report.tensor("w1").shard_shape == (1024, 4096 // 4)
    # One all-reduce over model of each device's partial (256 / 2, 1024) float32 block.
    [ar] = report.collectives
    assert (ar.kind, ar.axes, ar.bytes) == ("all-reduce", ("model",), 128 * 1024 * 4)
    assert report.workload.specs == {"x": "data,None", "w1": "None,model", "w2": "model,None"}


def test_the_keyword_form_builds_the_same_request():
    request = Request(workload="mlp", mesh=MESH, preset="megatron")
    explorer.analyze(request)
    by_keywords = explorer.analyze_workload("mlp", MESH, preset="megatron", cache_only=True)
    assert by_keywords is not None and by_keywords.timing.cached


def test_a_user_function_with_pytree_inputs_and_spec_patterns():
    scale = 2.0        # a closure, as a notebook cell's function often is

    def step(params, x):
        return scale * (x @ params["w"])

    params = {"w": jax.ShapeDtypeStruct((512, 256), np.float32)}
    x = jax.ShapeDtypeStruct((64, 512), np.float32)
    request = Request(fn=step, inputs=(params, x), mesh="data=2,model=4",
                      specs={r"^w$": "model,None", r"^x$": "data,model", "nothing": "data"})
    assert [(t.name, t.spec) for t in request.planned.leaves] == [("w", ("model", None)),
                                                                  ("x", ("data", "model"))]
    report = explorer.analyze(request)
    # Contracting dimension split over model: each device holds a partial sum of its
    # (64 / 2, 256) block, added by one all-reduce over model.
    [ar] = report.collectives
    assert (ar.kind, ar.axes, ar.bytes) == ("all-reduce", ("model",), 32 * 256 * 4)
    assert any("'nothing'" in n for n in report.notes)      # the idle pattern is named


def test_analyze_takes_a_request_alone():
    request = Request(workload="mlp", mesh=MESH)
    with pytest.raises(explorer.InputError, match="takes only pool=, use_cache= and "
                                                  "cache_only="):
        explorer.analyze(request, mesh="data=8")
    with pytest.raises(explorer.InputError, match="mesh= is missing"):
        explorer.analyze(matmul, TensorSpec("x", (8, 8)), TensorSpec("w", (8, 8)))


def test_replace_checks_the_edit_and_the_request_is_frozen():
    request = Request(workload="mlp", mesh=MESH)
    # A spec that does not fit the mesh needs the layout planned: refused by plan(), which
    # explorer.analyze calls first, so that analyze raises the same one error.
    edited = dataclasses.replace(request, mesh="data=3,model=4", preset="megatron")
    with pytest.raises(explorer.DivisibilityError, match="not divisible by data=3"):
        edited.plan()
    with pytest.raises(explorer.DivisibilityError, match="not divisible by data=3"):
        explorer.analyze(edited)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.mesh = "data=8"
    bigger = dataclasses.replace(request, params={"batch": 512}, preset="dp")
    assert bigger.planned.params["batch"] == 512
    assert bigger.planned.leaves[0].shape == (512, 1024)
    assert request.planned.leaves[0].shape == (256, 1024)        # the old one is as it was


def test_what_if_takes_a_request_of_a_user_function():
    def mlp(x, w1, w2):
        return jax.nn.relu(x @ w1) @ w2

    # w2 split by columns as w1 is: the hidden activation, split by columns over model, is
    # gathered whole before h @ w2: 128 x 4096 float32 values per device. Splitting w2 by rows
    # instead leaves a partial sum of the 128 x 1024 result, all-reduced: 128 * 1024 * 4.
    request = Request(fn=mlp, inputs=(TensorSpec("x", (256, 1024), "float32", "data,None"),
                                      TensorSpec("w1", (1024, 4096), "float32", "None,model"),
                                      TensorSpec("w2", (4096, 1024), "float32", "None,model")),
                      mesh=MESH)
    changes = explorer.what_if(request, 0)
    assert {"w2": "model,None"} in [c.specs for c in changes]
    assert {(c.line_bytes_before, c.line_bytes_after) for c in changes} == {
        (128 * 4096 * 4, 128 * 1024 * 4)}
    with pytest.raises(explorer.InputError, match="a Request carries its program"):
        explorer.what_if(request, 0, fn=mlp)


def test_search_takes_a_request():
    request = Request(workload="mlp", mesh=MESH, target="h100-8", compile_for="cpu",
                      params={"batch": 64, "d_model": 64, "d_ff": 128})
    with pytest.raises(explorer.InputError, match="takes the program, mesh, target and "
                                                  "mapping from the Request"):
        explorer.search(request, mesh="data=8")
    result = explorer.search(request, names=("batch",), mesh_shapes=False)
    # batch on data, on model, or on neither (the reference): three rule tables, the mesh kept.
    assert (result.program, result.target) == ("mlp", "h100-8")
    assert {c.mesh.sizes for c in result.candidates} == {(2, 4)}
    assert {c.rules for c in result.candidates} == {"batch=data", "batch=model", ""}


def test_a_misspelt_or_positional_field_is_an_input_error_naming_the_fields():
    # Issue 43: Request(nope=1) raised Python's TypeError where Session.edit(nope=1) gives an
    # InputError.
    from explorer._src.api.analysis_request import Request
    from explorer._src.errors import InputError

    with pytest.raises(InputError, match=r"'nope' is not a field of a Request; the fields are "
                                         r".*'workload'"):
        Request(nope=1)
    with pytest.raises(InputError, match="takes its fields by name"):
        Request("mlp")
