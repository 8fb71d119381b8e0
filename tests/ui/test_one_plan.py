"""One edit, one plan: the sidebar makes the explorer Request the session compiles, and a
workload's layout is planned by that Request alone (explorer/_src/ui/sidebar/checks.py). Counted,
not
timed: every call of the planner (explorer._src.strategy.plan.plan, wherever it is imported) and of
`Workload.resolve` between an edit and its result, on a small MLP whose compiles are fast."""

from __future__ import annotations

import collections

import pytest

pytest.importorskip("ipywidgets")

import explorer._src.api.analysis_request as analysis_request  # noqa: E402
from explorer._src.workloads.base import Workload  # noqa: E402
from explorer.ui import Explorer  # noqa: E402

SMALL = {"batch": 64, "d_model": 64, "d_ff": 128}


@pytest.fixture
def counted(monkeypatch):
    """Calls of the planner and of Workload.resolve, by name."""
    calls = collections.Counter()
    plan, resolve = analysis_request.plan, Workload.resolve

    def counting_plan(*args, **kwargs):
        calls["plan"] += 1
        return plan(*args, **kwargs)

    def counting_resolve(self, *args, **kwargs):
        calls["resolve"] += 1
        return resolve(self, *args, **kwargs)

    monkeypatch.setattr(analysis_request, "plan", counting_plan)
    monkeypatch.setattr(Workload, "resolve", counting_resolve)
    import explorer._src.strategy.plan as planner
    monkeypatch.setattr(planner, "plan", counting_plan)     # any caller of the module's plan
    return calls


@pytest.fixture
def app():
    a = Explorer(workload="mlp", mesh="data=2,model=4", params=SMALL, preset="megatron",
                 debounce=None)
    yield a
    a.close()


def test_a_spec_pick_an_undo_and_a_redo_each_plan_once(app, counted):
    counted.clear()
    app.spec_rows["w2"].pickers[0].value = ["data"]         # pinned over the preset's pick
    assert counted["plan"] == 1
    # The pick the preset would have made is still offered back, from that one plan.
    assert app.kept_picks.kept == {"w2": (("data", None), ("model", None))}
    assert app.session.request.planned.layout.specs["w2"] == ("data", None)
    for step in (app.undo, app.redo):
        counted.clear()
        step()
        assert counted["plan"] == 1, step.__name__
        assert app.error is None


def test_an_edit_resolves_the_params_once_before_its_answer(app, counted, monkeypatch):
    # The share link, drawn after the answer, reads the workload's defaults: not the edit's.
    monkeypatch.setattr(app, "_show", lambda *a, **k: None)
    counted.clear()
    app.spec_rows["w2"].pickers[0].value = ["data"]
    assert counted == {"plan": 1, "resolve": 1}


def test_the_session_compiles_the_request_the_sidebar_made(app):
    app.spec_rows["w2"].pickers[0].value = ["data"]
    made = app.sidebar.request()
    # The sidebar's request carries the explorer Request, checked and planned; the session
    # holds an equal one, and the pickers show that Request's plan.
    assert made.analysis is not None and made.analysis.planned.layout is not None
    assert made.specs == {t.name: tuple(t.spec) for t in made.analysis.planned.leaves}
    assert made.analysis.planned.key == app.session.request.planned.key
