"""A figure of an earlier result is never shown beside the status of a newer one (issue 53):
the app hides every figure of its result tabs ("drawing…" in its place) before the status names
the new result, and a slot reveals its new figure in the same message that puts it in its box.
The browser side of this, on a loaded machine, is tests/ui/test_stale_views_browser.py."""

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

import ipywidgets as w  # noqa: E402
import plotly.graph_objects as go  # noqa: E402

from explorer._src.ui.app import TAB_TITLES  # noqa: E402
from explorer._src.ui.figure import DRAWING, SLOT, FigureSlot, drawn_result  # noqa: E402
from explorer.ui import Explorer  # noqa: E402

SMALL = {"batch": 64, "d_model": 64, "d_ff": 256}
MEGATRON = {"x": "data,None", "w1": "None,model", "w2": "model,None"}


def slots(widget) -> list[w.Box]:
    """Every FigureSlot box under `widget` (depth first, in the page's order)."""
    found, stack = [], [widget]
    while stack:
        node = stack.pop()
        if isinstance(node, w.Box) and SLOT in node._dom_classes:
            found.append(node)
        stack.extend(reversed([c for c in getattr(node, "children", ())
                               if isinstance(c, w.Widget)]))
    return found


def figures(widget) -> list[tuple[int | None, bool]]:
    """(the result it draws, whether hidden as outdated) of each figure shown in a slot."""
    return [(drawn_result(box.children[0]), DRAWING in box._dom_classes)
            for box in slots(widget) if box.children]


def tab(app, title: str) -> w.Widget:
    return app.tabs.children[TAB_TITLES.index(title)]


def test_the_earlier_results_figures_are_hidden_before_the_status_names_the_new_one():
    app = Explorer(workload="mlp", mesh="data=2,model=4", specs=MEGATRON, params=SMALL,
                   debounce=None)
    try:
        placement = tab(app, "Placement")
        first = app.result_id
        # The Placement tab's two heatmaps, drawn for the first result and shown.
        assert figures(placement) == [(first, False), (first, False)]
        # The Memory tab drawn too, then left: its figures are of the first result.
        app.tabs.selected_index = TAB_TITLES.index("Memory")
        memory = figures(tab(app, "Memory"))
        assert memory and all(f == (first, False) for f in memory)
        app.tabs.selected_index = TAB_TITLES.index("Placement")

        # What every slot showed at each status the app said.
        said = []
        say = app.status_line.say

        def recording(text, result):
            said.append((result, figures(placement), figures(tab(app, "Memory"))))
            say(text, result)

        app.status_line.say = recording
        app.set_spec("w2", "None,None")
        assert app.result_id == first + 1
        # When the status first named the new result, every figure of the first one was
        # hidden, in the visible tab and in the hidden one.
        named = [s for s in said if s[0] == first + 1]
        assert named, said
        _, shown_placement, shown_memory = named[0]
        assert shown_placement == [(first, True), (first, True)]
        assert shown_memory and all(f == (first, True) for f in shown_memory)
        # Drawn again: the visible tab's figures are the new result's and shown; the hidden
        # tab's stay hidden until it is shown and drawn.
        assert figures(placement) == [(first + 1, False), (first + 1, False)]
        assert all(f == (first, True) for f in figures(tab(app, "Memory")))
        app.tabs.selected_index = TAB_TITLES.index("Memory")
        assert all(f == (first + 1, False) for f in figures(tab(app, "Memory")))
    finally:
        app.close()


def test_a_slot_reveals_its_new_figure_in_the_message_that_puts_it_in_the_box():
    slot = FigureSlot()
    slot.show(go.FigureWidget(), 1)
    slot.box.add_class(DRAWING)             # outdated: a newer result than 1 is the app's
    assert slot.outdated
    sent = []
    slot.box._send = lambda msg, buffers=None: sent.append(msg)
    fig = slot.show(go.FigureWidget(), 2)
    # One update of the box: the new figure and the class that no longer hides it together,
    # so that the page never shows the old figure revealed nor the new one hidden.
    states = [m["state"] for m in sent if m.get("method") == "update"]
    assert len(states) == 1, sent
    assert states[0]["children"] == [f"IPY_MODEL_{fig.model_id}"]
    assert DRAWING not in states[0]["_dom_classes"] and SLOT in states[0]["_dom_classes"]
    assert not slot.outdated and slot.result == 2
    slot.box.add_class(DRAWING)
    slot.clear()
    assert not slot.outdated and slot.box.children == ()
