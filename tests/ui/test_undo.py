"""Undo and Redo in the app: they step through the app's explorer.Session, set the sidebar's
widgets to the request they restore and show its result, and record no edit of their own. Each
result is checked against the one shown before the edit or a plain explorer.analyze of the same
layout. Edits compile at once (no event loop)."""

import jax
import pytest

pytest.importorskip("ipywidgets")

import explorer  # noqa: E402
from explorer import TensorSpec  # noqa: E402
from explorer._src.ui.sidebar.checks import target_options  # noqa: E402
from explorer.ui import Explorer, explore  # noqa: E402

SMALL = {"batch": 64, "d_model": 64, "d_ff": 128}
W1_BY_MODEL = {"w1": "None,model"}


@pytest.fixture
def app():
    a = Explorer(workload="mlp", mesh="data=2,model=4", params=SMALL, specs=W1_BY_MODEL,
                 debounce=None)
    yield a
    a.close()


def collectives(report):
    return [(c.kind, c.axes, c.bytes) for c in report.collectives]


def analyzed(mesh: str, specs=None, rules=None):
    """The same layout analysed without the app."""
    return explorer.analyze(explorer.Request(workload="mlp", mesh=mesh, params=SMALL,
                                             specs=specs, rules=rules))


def buttons(app):
    """(Undo disabled, Redo disabled)."""
    return app.undo_w.disabled, app.redo_w.disabled


def test_undo_a_hand_set_spec_shows_the_earlier_spec_and_report_and_redo_brings_it_back(app):
    s = app.session
    before = collectives(app.report)
    assert before == collectives(analyzed("data=2,model=4", W1_BY_MODEL))
    app.spec_rows["w2"].pickers[0].value = ["model"]        # Megatron: one all-reduce
    megatron = {**W1_BY_MODEL, "w2": "model,None"}
    after = collectives(app.report)
    assert after == collectives(analyzed("data=2,model=4", megatron)) and after != before
    assert len(s.history) == 2

    app.undo()
    assert app.spec_rows["w2"].spec == (None, None) and "w2" not in app.pinned
    assert app.spec_rows["w1"].spec == (None, "model") and "w1" in app.pinned
    assert collectives(app.report) == before and app.error is None
    assert app.report.workload.specs == analyzed("data=2,model=4", W1_BY_MODEL).workload.specs
    assert len(s.history) == 1 and s.can_redo and s.request.specs == {"w1": (None, "model")}
    assert s.report is not None           # the result shown is the session's current one

    app.redo()
    assert app.spec_rows["w2"].spec == ("model", None) and "w2" in app.pinned
    assert collectives(app.report) == after and len(s.history) == 2 and not s.can_redo


def test_undo_and_redo_a_mesh_edit(app):
    s = app.session
    app.mesh_editor.row("model").size_w.value = 2
    assert s.request.planned.mesh.text() == "data=2,model=2"
    on_two = collectives(app.report)
    assert on_two == collectives(analyzed("data=2,model=2", W1_BY_MODEL))

    app.undo()
    assert app.mesh_editor.axes == [("data", 2), ("model", 4)]
    assert app.report.mesh.sizes == (2, 4) and len(s.history) == 1
    assert collectives(app.report) == collectives(analyzed("data=2,model=4", W1_BY_MODEL))
    assert list(app.target_w.options) == target_options(8)     # the targets of 8 devices

    app.redo()
    assert app.mesh_editor.axes == [("data", 2), ("model", 2)]
    assert app.report.mesh.sizes == (2, 2) and collectives(app.report) == on_two
    assert len(s.history) == 2 and s.request.planned.mesh.text() == "data=2,model=2"


def test_undo_a_rules_edit(app):
    s = app.session
    before = collectives(app.report)
    app.rules_w.value = "batch=data"
    assert s.history[-1].changes == {"rules": "batch=data"}
    ruled = analyzed("data=2,model=4", W1_BY_MODEL, rules="batch=data")
    assert collectives(app.report) == collectives(ruled)
    assert app.spec_rows["x"].spec == ("data", None)          # placed by the rule

    app.undo()
    assert app.rules_w.value == "" and app.spec_rows["x"].spec == (None, None)
    assert collectives(app.report) == before and len(s.history) == 1
    assert s.request.rules is None


def test_the_buttons_follow_what_the_session_can_step_to(app):
    assert buttons(app) == (True, True)
    assert "explorer-undo" in app.undo_w._dom_classes
    assert "explorer-redo" in app.redo_w._dom_classes
    assert app.undo_w.tooltip == "Undo the last edit"
    assert app.redo_w.tooltip == "Redo the edit undone last"
    app.spec_rows["w2"].pickers[0].value = ["model"]
    assert buttons(app) == (False, True)
    app.undo_w.click()                          # the button does what app.undo() does
    assert buttons(app) == (True, False) and app.spec_rows["w2"].spec == (None, None)
    app.redo_w.click()
    assert buttons(app) == (False, True) and app.spec_rows["w2"].spec == ("model", None)


def test_an_edit_after_an_undo_drops_the_redo(app):
    s = app.session
    app.spec_rows["w2"].pickers[0].value = ["model"]
    app.undo()
    assert s.can_redo and not app.redo_w.disabled
    app.rules_w.value = "batch=data"                # an ordinary edit
    assert not s.can_redo and app.redo_w.disabled and not app.undo_w.disabled
    assert [e.changes for e in s.history[1:]] == [{"rules": "batch=data"}]
    assert s.request.specs == {"w1": (None, "model")}     # built on the undone state
    app.redo()                                  # nothing to redo: said, nothing changes
    assert "nothing to redo" in app.error_w.value
    assert len(s.history) == 2 and s.request.rules == "batch=data"


@pytest.mark.slow
def test_undo_records_no_edit(app):
    s = app.session
    app.spec_rows["w2"].pickers[0].value = ["model"]
    app.mesh_editor.row("model").size_w.value = 2
    assert len(s.history) == 3
    edits = s.history
    app.undo()
    assert s.history == edits[:2] and s.request is edits[1].request
    app.undo()
    assert s.history == edits[:1] and s.request is edits[0].request
    assert app.undo_w.disabled and not app.redo_w.disabled
    app.undo()                                  # at the first request: said, nothing changes
    assert "nothing to undo" in app.error_w.value and s.history == edits[:1]
    app.redo()
    app.redo()
    assert s.history == edits and s.request is edits[2].request and not s.can_redo
    # Every step showed the session's own result, the widgets making the same request.
    assert app.report.mesh.sizes == (2, 2) and app.spec_rows["w2"].spec == ("model", None)


def test_undo_back_across_a_workload_change(app):
    s = app.session
    mlp = collectives(app.report)
    app.workload_w.value = "matmul"
    assert s.request.workload == "matmul" and app.report.workload.name == "matmul"
    app.undo()
    assert app.workload_w.value == "mlp" and app.params == {**SMALL, "dtype": "float32"}
    assert app.spec_rows["w1"].spec == (None, "model") and "w1" in app.pinned
    assert collectives(app.report) == mlp and app.report.workload.name == "mlp"
    assert "<code>mlp</code>" in app.header.value and len(s.history) == 1
    app.redo()
    assert app.workload_w.value == "matmul" and app.report.workload.name == "matmul"
    assert len(s.history) == 2


def test_a_request_the_sidebar_cannot_make_is_refused_changing_nothing(app):
    s = app.session
    shown = app.report
    # An activation pinned by a script: the sidebar has no widget for it.
    s.edit(activations={"hidden": "data,None"})
    s.undo()
    app.redo()
    assert "cannot redo" in app.error_w.value and "exactly" in app.error_w.value
    assert len(s.history) == 1 and s.can_redo and app.report is shown
    assert app.spec_rows["w2"].spec == (None, None) and "w2" not in app.pinned


def test_undo_with_live_updates_off_shows_the_result_at_once(app):
    before = collectives(app.report)
    app.spec_rows["w2"].pickers[0].value = ["model"]
    app.live_w.value = False
    app.undo()
    assert collectives(app.report) == before and app.spec_rows["w2"].spec == (None, None)
    assert "explorer-stale" not in app.tabs._dom_classes


def _mlp(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


def test_undo_in_the_app_on_a_function():
    # A function's request carries every input's spec: undo pins only what its patterns and
    # given specs would not place so.
    app = explore(_mlp, TensorSpec("x", (64, 64), spec="data,None"), TensorSpec("w1", (64, 128)),
                  TensorSpec("w2", (128, 64)), mesh="data=2,model=4",
                  specs={"^w1$": "None,model"}, debounce=None)
    try:
        s = app.session
        before = collectives(app.report)
        assert [kind for kind, _, _ in before] == ["all-reduce"]
        app.spec_rows["w1"].pickers[1].value = []      # replicated: data parallel, no collective
        assert collectives(app.report) == [] and "w1" in app.pinned
        app.undo()
        assert app.spec_rows["w1"].spec == (None, "model") and "w1" not in app.pinned
        assert collectives(app.report) == before and app.error_w.value == ""
        assert len(s.history) == 1 and s.can_redo
        app.redo()
        assert app.spec_rows["w1"].spec == (None, None) and "w1" in app.pinned
        assert collectives(app.report) == [] and len(s.history) == 2
    finally:
        app.close()


def test_rules_as_pairs_open_in_the_box_as_their_text():
    # As explorer.analyze_workload takes them (flax's and MaxText's form): the box shows text
    # that parses back to the same rules, and the result is the API's for the pairs.
    a = Explorer(workload="mlp", mesh="data=2,model=4", params=SMALL,
                 rules=[("batch", "data"), ("mlp", "model")], debounce=None)
    try:
        assert a.rules_w.value == "(batch,data),(mlp,model)"
        assert collectives(a.report) == collectives(
            analyzed("data=2,model=4", rules=[("batch", "data"), ("mlp", "model")]))
    finally:
        a.close()
    with pytest.raises(explorer.ExplorerError, match=r"rules\[0\] = \('batch',\) is not a"):
        Explorer(workload="mlp", params=SMALL, rules=[("batch",)], debounce=None)


@pytest.mark.slow
def test_undo_and_redo_step_through_edits_made_on_the_apps_session(app):
    # session.edit takes rules as a mapping or pairs and specs as text: the app's Undo and Redo
    # show them in its widgets and step the session, recording no edit.
    s = app.session
    s.edit(rules={"batch": "data"})
    s.analyze()
    s.edit(specs={**s.request.specs, "w2": "model,None"})
    s.analyze()
    edits = s.history
    app.undo()
    assert app.error_w.value == ""
    assert s.history == edits[:2] and s.request is edits[1].request
    assert app.rules_w.value == "batch=data" and app.spec_rows["w2"].spec == (None, None)
    assert collectives(app.report) == collectives(
        analyzed("data=2,model=4", W1_BY_MODEL, rules={"batch": "data"}))
    app.redo()
    assert app.error_w.value == "" and s.history == edits and s.request is edits[2].request
    assert app.spec_rows["w2"].spec == ("model", None)
    assert collectives(app.report) == collectives(analyzed(
        "data=2,model=4", {**W1_BY_MODEL, "w2": "model,None"}, rules={"batch": "data"}))
