"""The app's offer of layer extrapolation (issue 51, item 4): a built-in workload whose full
compile ran past its time limit is offered, beside a larger limit, an estimate from 3 and 4
layers (explorer.analyze's extrapolate), which is a setting like the time limit (the sidebar's
box, the session's history, the share link), and whose result says it is extrapolated in the
status and in the Timing, Memory and Collectives tabs. A user's function is never offered it.

The compile "stopped at its limit" is the pool's own error raised by a stand-in for the
session's `run` for the full model, so that no test depends on how long a compile takes; the
small compiles of an extrapolation run for real."""

import html
import re
from dataclasses import replace

import jax
import pytest

pytest.importorskip("ipywidgets")

from explorer import InputError, Request, TensorSpec  # noqa: E402
from explorer._src.api import analyze as analyze_module  # noqa: E402
from explorer._src.api import session as session_module  # noqa: E402
from explorer._src.api.exploration import Exploration, extrapolate_option, from_link, loads  # noqa: E402
from explorer._src.api.session import Session  # noqa: E402
from explorer._src.errors import WorkerError  # noqa: E402
from explorer._src.ui.app import TAB_TITLES  # noqa: E402
from explorer._src.ui.share import shown_exploration  # noqa: E402
from explorer._src.ui.status import LimitOffer, extrapolable  # noqa: E402
from explorer.ui import Explorer, explore  # noqa: E402

MESH = "data=2,model=4"
LAYERS = 8                      # the model asked for: more than the small compiles' 3 and 4
# What explorer._src.compile.pool says of a compile it stopped at its limit.
STOPPED = ("compile took longer than the 0.5 s limit on 8 devices and its worker was stopped; "
           "simplify the program, shrink the mesh or raise the timeout")
# The note each tab shows over an extrapolated result's numbers.
NOTE = f"Extrapolated from layers=3 and 4 to layers={LAYERS}"


def train(layers: int = LAYERS, **fields) -> Request:
    return Request(workload="transformer_train", mesh=MESH, preset="megatron",
                   params={"layers": layers}, **fields)


# ------------------------------------------------------------------ what is offered, unit


def test_only_a_workload_with_more_layers_than_the_small_compiles_is_offered():
    assert extrapolable(train()) == LAYERS
    assert extrapolable(train(layers=4)) is None             # no larger than 3 and 4
    assert extrapolable(train(extrapolate=True)) is None     # extrapolated already
    assert extrapolable(train(measure=True)) is None         # a run would time 3 layers
    assert extrapolable(Request(workload="mlp", mesh=MESH)) is None   # no layers

    def f(x):
        return x * 2

    function = Request(fn=f, inputs=(TensorSpec("x", (8, 8), "float32", "data,None"),),
                       mesh=MESH)
    assert extrapolable(function) is None


def test_the_offer_shows_both_buttons_or_neither():
    raised, extrapolated = [], []
    offer = LimitOffer(raised.append, lambda: extrapolated.append(True))
    offer.offer(240.0, LAYERS)
    assert offer.widget.layout.display is None
    assert offer.button.description == "raise the time limit to 240 s and compile again"
    assert offer.extrapolate_button.description == "estimate from 3 and 4 layers (extrapolated)"
    assert offer.extrapolate_button.layout.display is None
    offer.extrapolate_button.click()
    offer.button.click()
    assert extrapolated == [True] and raised == [240.0]
    offer.offer(240.0)                       # not extrapolable: the larger limit alone
    assert offer.button.layout.display is None
    assert offer.extrapolate_button.layout.display == "none"
    offer.offer(None, LAYERS)                # no stop at a limit: nothing offered
    assert offer.widget.layout.display == "none"
    assert offer.extrapolate_button.layout.display == "none"


# ------------------------------------------------------- the option in a file and a session


@pytest.mark.parametrize("given, written", [(False, False), (None, False), (True, True),
                                            ((3, 4), True), ("auto", "auto"),
                                            ("auto:3,4", "auto"), ((2, 5), "2,5"),
                                            ("auto:2, 6", "auto:2,6")])
def test_the_option_has_one_written_form(given, written):
    assert extrapolate_option(given) == written


def test_an_exploration_keeps_its_extrapolation_in_the_file_and_the_link():
    e = Exploration(mesh=MESH, workload="transformer_train", params={"layers": LAYERS},
                    extrapolate=True)
    assert e.to_dict()["compile"] == {"extrapolate": True}
    assert loads(e.to_json()).extrapolate is True
    assert from_link(e.to_link()).extrapolate is True
    assert "compile" not in Exploration(mesh=MESH, workload="transformer_train").to_dict()
    for bad in ('"sometimes"', "3", '"4,2"'):
        text = e.to_json().replace('"extrapolate": true', f'"extrapolate": {bad}')
        with pytest.raises(InputError, match="compile.extrapolate"):
            loads(text)


def test_the_session_records_the_option_as_an_edit_and_undoes_it():
    first = train()
    s = Session(first)
    assert s.request.extrapolate is False
    s.edit(extrapolate=True)
    assert (s.request.extrapolate, s.history[-1].changes) == (True, {"extrapolate": True})
    # The same program, the field alone changed.
    assert s.request == replace(first, extrapolate=True) and s.request != first
    s.edit(extrapolate=(3, 4))                        # the same option written otherwise
    assert len(s.history) == 2
    assert s.undo() is first and s.request.extrapolate is False
    s.redo()
    assert s.request.extrapolate is True
    s.edit(workload="mlp", params=None)               # another program: not extrapolated
    assert s.request.extrapolate is False
    with pytest.raises(InputError, match="has no layer count"):
        s.edit(extrapolate=True)
    assert s.request.workload == "mlp" and s.request.extrapolate is False   # refused


def test_a_functions_session_refuses_the_option():
    def f(x):
        return x * 2

    with pytest.raises(InputError, match="a function's layers cannot be counted"):
        Session(fn=f, inputs=(TensorSpec("x", (8, 8), "float32", "data,None"),), mesh=MESH,
                extrapolate=True)


# ------------------------------------------------------------------------ the app, driven


@pytest.fixture
def stopped(monkeypatch):
    """The session's compiles, with the full model's stopped at its limit as the pool stops
    one; every other request compiled for real. Yields the layer counts compiled (asked for
    with `extrapolate` off: an extrapolated request's `run` asks again for each plain
    request it needs, through analyze's `run`, which is stood in for too)."""
    real_run, asked = analyze_module.run, []

    def run(request, **kwargs):
        if request.extrapolate:
            return real_run(request, **kwargs)
        layers = request.planned.params.get("layers")
        asked.append(layers)
        if request.workload is None or layers == LAYERS:
            raise WorkerError(STOPPED)
        return real_run(request, **kwargs)

    monkeypatch.setattr(session_module, "run", run)
    monkeypatch.setattr(analyze_module, "run", run)
    return asked


def show(app, title):
    app.tabs.selected_index = TAB_TITLES.index(title)


def text(widget) -> str:
    """A widget's HTML as a reader sees it: its tags dropped, its entities read."""
    return html.unescape(re.sub(r"<[^>]+>", "", widget.value))


@pytest.mark.slow
def test_a_stopped_workload_is_offered_its_extrapolation_labelled_and_undone(stopped):
    app = Explorer(workload="transformer_train", mesh=MESH, preset="megatron",
                   params={"layers": LAYERS}, debounce=None)
    try:
        # The full compile was stopped: both offers, the sidebar's box shown and off.
        assert app.report is None and "took longer than the 0.5 s limit" in app.error
        offer = app.limit_offer
        assert offer.button.layout.display is None
        assert offer.extrapolate_button.layout.display is None
        assert app.sidebar.extrapolate_w.layout.display is None
        assert app.sidebar.extrapolate_w.value is False

        stopped.clear()
        offer.extrapolate_button.click()
        assert app.error is None, app.error
        x = app.report.extrapolated
        assert x is not None
        # The model asked for, carried on from compiles at 3 and 4 layers, which were the
        # ones compiled (the full model was not asked for again).
        assert (x.param, x.layers, x.from_layers) == ("layers", LAYERS, (3, 4))
        assert sorted(stopped) == [3, 4]
        assert app.report.workload.params["layers"] == LAYERS
        assert app.sidebar.extrapolate_w.value is True
        assert offer.widget.layout.display == "none"
        assert app.session.request.extrapolate is True
        assert app.session.history[-1].changes == {"extrapolate": True}

        # Labelled everywhere it shows.
        assert f"extrapolated from layers=3 and 4 to {LAYERS}" in text(app.status)
        show(app, "Timing")
        assert NOTE in text(app.timing.text)
        show(app, "Memory")
        assert NOTE in text(app.memory.text)
        show(app, "Collectives")
        assert NOTE in text(app.collectives.table)
        assert x.error in text(app.collectives.table)      # the method's measured error
        shared = shown_exploration(app)
        assert shared.extrapolate is True and from_link(shared.to_link()).extrapolate is True
        assert "extrapolated" in app.share.widget.value

        # Undo: the full model again, stopped again, offered again.
        stopped.clear()
        app.undo()
        assert app.session.request.extrapolate is False
        assert app.sidebar.extrapolate_w.value is False
        assert app.session.request.params["layers"] == LAYERS
        assert stopped == [LAYERS]
        assert app.error is not None and offer.extrapolate_button.layout.display is None
        # Redo: the extrapolated result, from the cache of its small compiles.
        app.redo()
        assert app.error is None and app.report.extrapolated == x
    finally:
        app.close()


def test_a_workload_without_layers_gets_no_box(stopped):
    app = Explorer(workload="mlp", mesh=MESH, debounce=None)
    try:
        assert app.error is None
        assert app.sidebar.extrapolate_w.layout.display == "none"
        app._show_error(STOPPED)
        assert app.limit_offer.button.layout.display is None
        assert app.limit_offer.extrapolate_button.layout.display == "none"
    finally:
        app.close()


def mlp_forward(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


def test_a_stopped_function_is_offered_a_larger_limit_only(stopped):
    T = TensorSpec
    app = explore(mlp_forward, T("x", (16, 32), spec="data,None"), T("w1", (32, 64)),
                  T("w2", (64, 32)), mesh=MESH, debounce=None)
    try:
        assert "took longer than the 0.5 s limit" in app.error
        assert app.limit_offer.button.layout.display is None
        assert app.limit_offer.extrapolate_button.layout.display == "none"
        assert app.sidebar.extrapolate_w.layout.display == "none"
        assert app.session.request.extrapolate is False
    finally:
        app.close()
