"""The app's state is an explorer.Session (`Explorer(...).session`): every valid edit made in
the widgets becomes one edit of the session's Request, a refused one changes nothing, and the
result shown is the session's."""

import pytest

pytest.importorskip("ipywidgets")

import explorer  # noqa: E402
from explorer import TensorSpec  # noqa: E402
from explorer.ui import Explorer, explore  # noqa: E402

HAND_SET = {"x": "data,None", "w1": "None,model", "w2": "model,None"}
SMALL = {"batch": 64, "d_model": 64, "d_ff": 128}


def test_the_widgets_edit_the_session_and_show_its_result():
    app = Explorer(workload="mlp", mesh="data=2,model=4", params=SMALL, specs=HAND_SET,
                   debounce=None)
    try:
        s = app.session
        assert isinstance(s, explorer.Session)
        assert s.request.planned.mesh.text() == "data=2,model=4"
        assert {t.name: t.spec for t in s.request.planned.leaves} == {
            "x": ("data", None), "w1": (None, "model"), "w2": ("model", None)}
        assert s.report is app.report
        # w2 is (d_ff, d_model) = (128, 64), its rows split over model's 4 devices.
        assert app.report.tensor("w2").shard_shape == (128 // 4, 64)
        generation = s.generation
        app.rules_w.value = "batch=zz"                 # refused: the session is as it was
        assert s.generation == generation and app.error is not None
        app.rules_w.value = ""
        assert s.generation == generation and s.report is app.report
        batch = next(b for b in app.params_box.children if b.description == "batch")
        batch.value = 128
        assert s.generation == generation + 1
        assert s.history[-1].changes == {"params": {**SMALL, "batch": 128, "dtype": "float32"}}
        assert s.request.planned.leaves[0].shape == (128, 64) and s.report is app.report
        # Where the time went: the worker's own lowering and compile, as the Report says.
        assert s.result.spent.compile_s == app.report.timing.compile_s
        assert "This answer took" in app.timing.text.value and s.result.spent.draw_s > 0
    finally:
        app.close()


def test_the_timing_tab_says_where_the_wait_went_when_it_is_the_tab_shown():
    # Drawn while visible, the tab's text was rewritten without the split of the wait.
    from explorer._src.ui.tabs import TAB_TITLES
    from explorer._src.units import format_seconds

    app = Explorer(workload="mlp", mesh="data=2,model=4", params=SMALL, specs=HAND_SET,
                   debounce=None)
    try:
        app.tabs.selected_index = TAB_TITLES.index("Timing")
        batch = next(b for b in app.params_box.children if b.description == "batch")
        batch.value = 96
        spent = app.session.result.spent
        assert app.report.tensor("x").shape == (96, 64)
        assert "This answer took" in app.timing.text.value
        assert f"compile {format_seconds(spent.compile_s)}" in app.timing.text.value
    finally:
        app.close()


def matmul(x, w):
    return x @ w


def test_a_functions_result_is_held_by_the_session_as_the_app_shows_it():
    # The app names a user's function and its specs in the Report it shows (its source's
    # describe); the session's Result holds that Report, not a second one.
    app = explore(matmul, TensorSpec("x", (64, 32), spec="data,None"), TensorSpec("w", (32, 16)),
                  mesh="data=2,model=4", debounce=None)
    try:
        s = app.session
        assert app.result is s.result and app.report is s.report
        assert app.report.workload.name == "matmul()"
        assert app.report.workload.specs == {"x": "data,None"}
        app.set_spec("w", "None,model")
        assert app.result is s.result and s.result.generation == s.generation
        assert s.report.workload.specs == {"x": "data,None", "w": "None,model"}
    finally:
        app.close()
