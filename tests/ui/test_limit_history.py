"""The compile time limit is a setting like any other (issue 53, item 2): an edit of it is in the
session's history, so Undo restores the limit before it (its box included) and Redo the raised
one; the Undo and Redo buttons follow what there is to step to; and the page's address carries
the limit of the request asked last, so a reload keeps a raised limit. Edits compile at once
(no event loop), on a small MLP."""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")

from explorer._src.api.exploration import Exploration, from_link  # noqa: E402
from explorer._src.ui.page import AppPage  # noqa: E402
from explorer.ui import Explorer  # noqa: E402

SMALL = {"batch": 64, "d_model": 64, "d_ff": 128}
DEFAULT = dict(workload="mlp", mesh="data=2,model=4", params=SMALL, debounce=None)
# The time limit of a compile on fake CPU devices when none is typed (tests/ui/test_time_limit.py
# pins it: explorer._src.ui.sidebar.checks.default_timeout).
CPU_DEFAULT_S = 120


@pytest.fixture
def app():
    a = Explorer(**DEFAULT)
    yield a
    a.close()


def buttons(app) -> tuple[bool, bool]:
    """(Undo enabled, Redo enabled)."""
    return not app.undo_w.disabled, not app.redo_w.disabled


def test_undo_restores_the_limit_before_a_limit_edit_and_redo_the_raised_one(app):
    s = app.session
    assert s.request.timeout == CPU_DEFAULT_S and app.sidebar.timeout_w.value == ""
    app.sidebar.timeout_w.value = "900"
    assert app.error is None and s.request.timeout == 900 and len(s.history) == 2
    assert buttons(app) == (True, False)

    app.undo()
    assert app.error is None and app.error_w.value == ""
    assert s.request.timeout == CPU_DEFAULT_S and app.sidebar.timeout_w.value == ""
    assert len(s.history) == 1 and buttons(app) == (False, True)

    app.redo()
    assert app.error is None
    assert s.request.timeout == 900 and app.sidebar.timeout_w.value == "900"
    assert buttons(app) == (True, False)


def test_every_undo_steps_back_one_edit_until_the_first_and_the_buttons_follow(app):
    s = app.session
    app.spec_rows["w2"].pickers[0].value = ["model"]
    app.sidebar.timeout_w.value = "600"
    app.spec_rows["w1"].pickers[1].value = ["model"]
    app.partitioner_w.value = "gspmd"
    assert len(s.history) == 5
    # Each click steps back one edit, with its widgets: the limit edit no longer stops them.
    expected = [  # (partitioner, w1, limit box, w2) after each Undo
        ("shardy", (None, "model"), "600", ("model", None)),
        ("shardy", (None, None), "600", ("model", None)),
        ("shardy", (None, None), "", ("model", None)),
        ("shardy", (None, None), "", (None, None)),
    ]
    for n, (partitioner, w1, limit, w2) in enumerate(expected, start=1):
        app.undo_w.click()
        assert app.error is None, (n, app.error_w.value)
        assert len(s.history) == 5 - n
        assert (app.partitioner_w.value, app.spec_rows["w1"].spec,
                app.sidebar.timeout_w.value, app.spec_rows["w2"].spec) == \
            (partitioner, w1, limit, w2)
        assert buttons(app) == (n < 4, True)
    for n in range(1, 5):
        app.redo_w.click()
        assert app.error is None and len(s.history) == 1 + n
        assert buttons(app) == (True, n < 4)
    assert s.request.timeout == 600 and app.partitioner_w.value == "gspmd"


@pytest.fixture
def page():
    page = AppPage(**DEFAULT)
    yield page
    page.app.close()


def test_the_address_carries_a_raised_limit_and_a_reload_keeps_it(page):
    page.location.set_state({"path": "/", "query": ""})
    assert page.location.shown == ""                 # the default app: no exploration=
    page.app.sidebar.timeout_w.value = "900"
    linked = from_link(page.location.shown)
    assert linked.timeout == 900 and linked.mesh == "data=2,model=4"
    again = AppPage(**DEFAULT)
    try:
        again.location.set_state({"path": "/", "query": f"?exploration={page.location.shown}"})
        assert again.app.error is None and again.error.value == ""
        assert again.app.sidebar.timeout_w.value == "900"
        assert again.app.session.request.timeout == 900
    finally:
        again.app.close()
    page.app.undo()                                   # the limit before: the default's again
    assert page.location.shown == ""


@pytest.mark.slow
def test_a_limit_raised_after_a_link_stopped_at_its_own_is_in_the_banner_and_the_address(page):
    # A limit no compile meets: the linked exploration (a program no other test compiles, so
    # that no cache answers it) stops at it.
    stopped = Exploration(mesh="data=4,model=2", workload="mlp",
                          params={"batch": 32, "d_model": 64, "d_ff": 384}, timeout=0.01)
    page.location.set_state({"path": "/", "query": f"?exploration={stopped.to_link()}"})
    app, opening = page.app, page.opened
    assert opening is not None and app.report is None and "0.01 s limit" in app.error
    assert opening.limit_s == 0.01 and from_link(page.location.shown).timeout == 0.01
    # A limit raised by hand that still stops the compile: no result shows it, yet the
    # banner and the address name it, so a reload asks the raised limit, not the link's.
    app.sidebar.timeout_w.value = "0.02"
    assert app.report is None and "0.02 s limit" in app.error
    assert opening.limit_s == 0.02 and from_link(page.location.shown).timeout == 0.02
    app.limit_offer.button.click()                    # the larger limit offered
    raised = app.session.request.timeout
    assert raised == CPU_DEFAULT_S and app.sidebar.timeout_w.value == f"{raised:g}"
    assert opening.limit_s == raised                  # the banner said the raised limit
    assert app.report is not None and app.error is None
    # 120 s is the default of a compile on CPU devices: the address leaves it to the target.
    assert from_link(page.location.shown).timeout is None
