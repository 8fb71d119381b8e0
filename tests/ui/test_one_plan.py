"""One plan per edit, none per tab switch or tensor pick (issue 52, item 2): a workload's layout
is planned by the explorer Request the sidebar makes, and nothing else plans it again (not the
Share section's link, not a saved exploration, not an Undo). Counted, not timed: every call of
the planner, `explorer._src.strategy.plan.plan`, wherever it was imported, on a small MLP whose
compiles are fast.

The planner is wrapped where it is defined and in every module that imported it by name before
the test started (found by identity in `sys.modules`, not by a list of modules kept by hand), so
that a caller added later is counted too."""

from __future__ import annotations

import collections
import sys

import pytest

pytest.importorskip("ipywidgets")

import explorer._src.strategy.plan as planner  # noqa: E402
from explorer._src.api.exploration import Exploration, from_link, loads  # noqa: E402
from explorer._src.ui.page import AppPage  # noqa: E402
from explorer.ui import Explorer  # noqa: E402

SMALL = {"batch": 64, "d_model": 64, "d_ff": 128}
DEFAULT = dict(workload="mlp", mesh="data=2,model=4", params=SMALL, preset="megatron",
               debounce=None)


@pytest.fixture
def plans(monkeypatch) -> collections.Counter:
    """The planner's calls so far (`plans["plan"]`), counted wherever it is called from."""
    calls: collections.Counter = collections.Counter()
    original = planner.plan

    def counting_plan(*args, **kwargs):
        calls["plan"] += 1
        return original(*args, **kwargs)

    holders = [m for name, m in list(sys.modules.items())
               if name.startswith("explorer") and getattr(m, "plan", None) is original]
    assert planner in holders
    for module in holders:
        monkeypatch.setattr(module, "plan", counting_plan)
    # Every module of the explorer that imported it holds the counting one now (test modules
    # that import it too, run earlier in this process, call it only from their own tests).
    assert not [name for name, m in list(sys.modules.items())
                if name.startswith("explorer") and getattr(m, "plan", None) is original]
    return calls


@pytest.fixture
def app():
    a = Explorer(**DEFAULT)
    yield a
    a.close()


def planned_by(plans: collections.Counter, action) -> int:
    """How many times `action()` planned a layout."""
    plans.clear()
    action()
    return plans["plan"]


def test_an_edit_plans_once_and_an_undo_and_a_redo_at_most_once(app, plans):
    def edit():
        app.spec_rows["w2"].pickers[0].value = ["data"]       # pinned over the preset's pick

    assert planned_by(plans, edit) == 1
    assert app.error is None and app.session.request.planned.layout.specs["w2"] == ("data", None)
    # The pick the preset would have made is still offered back, from that one plan.
    assert app.kept_picks.kept == {"w2": (("data", None), ("model", None))}
    # An Undo or a Redo goes back to a layout planned before: at most one plan (none where the
    # Request remembers that layout), never the Share section's second one.
    assert planned_by(plans, app.undo) <= 1
    assert app.error is None and app.spec_rows["w2"].spec == ("model", None)
    assert planned_by(plans, app.redo) <= 1
    assert app.error is None and app.spec_rows["w2"].spec == ("data", None)


def test_a_tab_switch_and_a_tensor_pick_plan_nothing(app, plans):
    def switch():
        app.tabs.selected_index = 1

    def pick():
        app.placement.tensor.value = "w1"

    assert planned_by(plans, switch) == 0
    assert planned_by(plans, pick) == 0
    # The Share section followed both: its link names the tab and the tensor.
    shown = app.share.exploration
    assert shown is not None and (shown.app.tab, shown.app.tensor) == ("Collectives", "w1")


def test_sharing_the_result_shown_plans_nothing(app, plans, tmp_path):
    path = tmp_path / "shown.json"

    def share():
        app.share.update()
        app.share.exploration.save(path)

    assert planned_by(plans, share) == 0
    assert loads(path.read_text()) == app.share.exploration


def test_opening_a_link_plans_once(plans):
    page = AppPage(**DEFAULT)
    try:
        link = Exploration(mesh="data=4,model=2", workload="mlp", params=SMALL,
                           preset="megatron", specs={"w2": "data,None"}).to_link()

        def open_link():
            page.open_query(f"?exploration={link}")

        assert planned_by(plans, open_link) == 1
        assert page.app.error is None and page.error.value == ""
        assert page.app.session.request.planned.layout.specs["w2"] == ("data", None)
        assert from_link(page.app.share.exploration.to_link()).mesh == "data=4,model=2"
    finally:
        page.app.close()


def test_the_session_compiles_the_request_the_sidebar_made(app):
    app.spec_rows["w2"].pickers[0].value = ["data"]
    made = app.sidebar.request()
    # The sidebar's request carries the explorer Request, checked and planned; the session
    # holds an equal one, and the pickers show that Request's plan.
    assert made.analysis is not None and made.analysis.planned.layout is not None
    assert made.specs == {t.name: tuple(t.spec) for t in made.analysis.planned.leaves}
    assert made.analysis.planned.key == app.session.request.planned.key
