"""A workload switch and back: the workload comes back as the app opened it, with the specs the
app was given for it (issue 53), and without the picks made since (a switch forgets them)."""

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from explorer.ui import Explorer  # noqa: E402

MEGATRON = {"x": "data,None", "w1": "None,model", "w2": "model,None"}


def input_specs(app) -> dict[str, str]:
    return {t.name: t.spec_text for t in app.report.tensors if t.kind == "input"}


@pytest.fixture
def app():
    a = Explorer(workload="mlp", mesh="data=2,model=4", specs=MEGATRON, debounce=None)
    yield a
    a.close()


def test_a_switch_and_back_restores_the_specs_the_app_opened_the_workload_with(app):
    assert input_specs(app) == MEGATRON
    app.workload_w.value = "matmul"
    assert set(input_specs(app)) == {"x", "w"}
    app.workload_w.value = "mlp"
    assert input_specs(app) == MEGATRON
    assert {n: app.spec_rows[n].spec for n in MEGATRON} == {
        "x": ("data", None), "w1": (None, "model"), "w2": ("model", None)}


def test_a_pick_made_before_the_switch_is_forgotten_and_the_opening_spec_returns(app):
    app.spec_rows["w1"].pickers[1].value = []          # w1 replicated: the user's pick
    assert input_specs(app)["w1"] == "replicated"
    app.workload_w.value = "matmul"
    app.workload_w.value = "mlp"
    assert input_specs(app) == MEGATRON


def test_an_opening_spec_follows_an_axis_renamed_or_removed_since(app):
    app.workload_w.value = "matmul"
    app.mesh_editor.rows[1].name_w.value = "tensor"     # model -> tensor
    app.workload_w.value = "mlp"
    assert input_specs(app) == {"x": "data,None", "w1": "None,tensor", "w2": "tensor,None"}
    app.workload_w.value = "matmul"
    app.mesh_editor.rows[0].remove.click()              # data: gone
    app.workload_w.value = "mlp"
    assert input_specs(app) == {"x": "replicated", "w1": "None,tensor", "w2": "tensor,None"}
