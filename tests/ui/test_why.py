"""The "why" panel: a picked collective's line of code, reason, layouts before and after, and
what-ifs that a compile confirmed. The program is defined here (traced in this process,
where it was defined); source lines are found with inspect."""

import asyncio
import inspect
from dataclasses import replace
from html import unescape

import jax.numpy as jnp
import pytest

pytest.importorskip("ipywidgets")

from explorer import TensorSpec, analyze  # noqa: E402
from explorer._src.spec.tensor import format_spec  # noqa: E402
from explorer._src.ui.app import TAB_TITLES  # noqa: E402
from explorer._src.ui.why import candidates, line_bytes  # noqa: E402
from explorer.ui import explore  # noqa: E402

T = TensorSpec


def two_matmuls(x, w1, w2):
    h = jnp.tanh(x @ w1)
    return h @ w2


def line_of(text: str) -> int:
    lines, first = inspect.getsourcelines(two_matmuls)
    return first + next(i for i, line in enumerate(lines) if text in line)


INPUTS = (T("x", (256, 1024), spec="data,None"), T("w1", (1024, 4096), spec="data,model"),
          T("w2", (4096, 1024), spec="model,None"))


@pytest.fixture
def app():
    a = explore(two_matmuls, *INPUTS, mesh="data=2,model=4", debounce=None)
    a.tabs.selected_index = TAB_TITLES.index("Collectives")
    yield a
    a.close()


def test_a_picked_collective_shows_its_line_reason_and_layouts(app):
    # w1 is split over data on its contracting dimension while x is not: the all-gather over
    # data makes each device's [512, 1024] block of w1 whole along dim 0, [1024, 1024] f32.
    c = app.report.collectives[0]
    assert (c.kind, c.axes, c.bytes) == ("all-gather", ("data",), 1024 * 1024 * 4)
    app.collectives.pick.value = 0
    text = unescape(app.why.text.value)
    assert f"test_why.py:{line_of('jnp.tanh')}</code>" in text
    assert "h = jnp.tanh(x @ w1)" in text
    assert ">gather-operand</span>" in text
    # Before: w1 as data,model, 2 × 4 blocks, each on one device (row-major over the mesh).
    before, after = app.why.figs[0], app.why.figs[1]
    assert before.layout.title.text == "before: input w1<br>[1024,4096] data,model"
    assert [list(r) for r in before.data[0].z] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert before.data[0].text[1][0] == "b4: d4"
    # After: what the matmul needs, None,model: 4 column blocks, each on a data pair.
    assert after.layout.title.text == "after: input w1<br>[1024,4096] None,model"
    assert [list(r) for r in after.data[0].z] == [[0, 1, 2, 3]]
    assert after.data[0].text[0][0] == "b0: d0,d4"
    assert app.why.fig_boxes[2].layout.display == "none"


def test_a_partial_sum_shows_both_operands_and_the_result(app):
    app.collectives.pick.value = 1
    assert ">partial-sum</span>" in app.why.text.value
    titles = [f.layout.title.text for f in app.why.figs]
    # In the user's words: the operands of `h @ w2` by side, the jax op that made each value
    # and its line where the report lists it (not XLA's %tanh.0 and %dot_general.1).
    tanh = line_of("jnp.tanh")
    assert titles == [f"before, left operand: tanh (test_why.py:{tanh})<br>[256,4096] "
                      "data,model",
                      "before, right operand: input w2<br>[4096,1024] model,None",
                      "after: the result of dot_general<br>[256,1024] data,None"]
    # The result split over data on rows: 2 blocks, each held by the 4 model devices.
    assert [list(r) for r in app.why.figs[2].data[0].z] == [[0], [1]]
    assert app.why.figs[2].data[0].text[0][0] == "b0: d0…d3 ×4"


def test_a_missing_layout_is_said_not_drawn(app):
    c = app.report.collectives[0]
    gone = replace(c, why=replace(c.why, evidence=replace(c.why.evidence, sharding_after="",
                                                                spec_after=None)))
    report = replace(app.report, collectives=(gone, *app.report.collectives[1:]))
    app.why.show(report, 0)
    assert "after: no layout of input w1 is known" in unescape(app.why.layout_note.value)
    assert [b.layout.display for b in app.why.fig_boxes] == ["", "none", "none"]


def test_candidates_follow_the_evidence():
    r = analyze(two_matmuls, *INPUTS, mesh="data=2,model=4")
    specs = {t.name: t.spec for t in INPUTS}
    shapes = {t.name: t.shape for t in INPUTS}
    # The partial sum over model names w2: stop splitting it over model (replicating it is
    # the same spec), or split its other dimension over model instead.
    found = candidates(r, 1, specs, shapes, r.mesh)
    assert [(c.tensor, c.spec) for c in found] == [("w2", (None, None)), ("w2", (None, "model"))]
    # The gather names w1 (and x): first the layout the consumer needs.
    found = candidates(r, 0, specs, shapes, r.mesh)
    assert (found[0].tensor, found[0].spec) == ("w1", (None, "model"))


def test_offers_are_confirmed_by_a_compile_and_one_click_applies_them(app):
    line = app.report.collectives[0].source
    app.collectives.pick.value = 0
    offers = app.why.candidates
    assert offers and "compiled and confirmed" in app.why.offers_head.value
    for cand in offers:      # each offer, compiled on its own here, moves fewer bytes there
        specs = {t.name: (cand.spec if t.name == cand.tensor else t.spec) for t in INPUTS}
        variant = analyze(two_matmuls, *(replace(t, spec=specs[t.name]) for t in INPUTS),
                          mesh="data=2,model=4")
        assert line_bytes(variant, line) == cand.line_after < 1024 * 1024 * 4
    first = offers[0]
    assert (first.tensor, first.spec, first.line_after) == ("w1", (None, "model"), 0)
    button = app.why.offers.children[0].children[0]
    button.click()
    # Applied as the user's pick; the result has no collective on that line any more, and
    # the panel compares it with the result before.
    assert "w1" in app.pinned and app.spec_rows["w1"].spec == (None, "model")
    assert line_bytes(app.report, line) == 0
    shown = unescape(app.why.comparison.value)
    assert "Applied</b>: lay w1 out as None,model" in shown
    assert "<b>1</b> removed" in shown


def test_the_app_and_the_api_compile_the_same_variants(app, monkeypatch):
    # The why panel's search is its session's (explorer._src.api.what_if.ChangeSearch): the
    # variants it compiles are those explorer.what_if compiles of the session's Request, key for
    # key, and an offer applied is one of them (so its result comes from the cache).
    import explorer
    from explorer._src.api import what_if

    keys, made = [], what_if.changed_request

    def changed_request(*args, **kwargs):
        variant = made(*args, **kwargs)
        keys.append(variant.planned.key)
        return variant

    monkeypatch.setattr(what_if, "changed_request", changed_request)
    app.collectives.pick.value = 0
    offered, by_app = app.why.candidates, list(keys)
    assert offered and len(by_app) >= len(offered)
    keys.clear()
    found = explorer.what_if(app.session.request, 0)
    assert keys == by_app
    assert [x.specs for x in found] == [{n: format_spec(s) for n, s in c.specs.items()}
                                        for c in offered]
    app.why.offers.children[0].children[0].click()
    assert app.session.request.planned.key in by_app
    assert app.session.result.spent.cached and app.report is app.session.report


def test_what_ifs_compile_in_the_background_under_an_event_loop():
    async def scenario():
        app = explore(two_matmuls, *INPUTS, mesh="data=2,model=4", debounce=0.3)
        try:
            app.tabs.selected_index = TAB_TITLES.index("Collectives")
            app.collectives.pick.value = 0
            assert "in the background" in app.why.offers_head.value   # the kernel is free
            while not app.why.candidates:
                await asyncio.sleep(0.05)
            assert app.why.candidates[0].tensor == "w1"
        finally:
            app.close()

    asyncio.run(scenario())


def test_a_newer_edit_stops_a_background_search_between_its_compiles(monkeypatch):
    # The first of the gather's changes is held compiling until an edit is made; the search,
    # moot from then on, compiles none of the others and offers nothing.
    import threading

    from explorer._src.api import what_if

    started, edited, made = [], threading.Event(), what_if.changed_request

    def changed_request(*args, **kwargs):
        started.append(args[1])
        edited.wait(30)
        return made(*args, **kwargs)

    monkeypatch.setattr(what_if, "changed_request", changed_request)

    async def scenario():
        app = explore(two_matmuls, *INPUTS, mesh="data=2,model=4", debounce=0.3)
        try:
            app.tabs.selected_index = TAB_TITLES.index("Collectives")
            app.collectives.pick.value = 0
            assert "compiling 5 single-input changes in the background" in \
                app.why.offers_head.value
            while not started:
                await asyncio.sleep(0.01)
            app.set_spec("w2", "None,None")
            edited.set()
            while app.report.tensor("w2").spec != (None, None):
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)           # time for a search not stopped to go on
            assert len(started) == 1 and app.why.candidates == []
        finally:
            edited.set()
            app.close()

    asyncio.run(scenario())


def test_a_notebook_cells_line_is_read_from_the_kernels_history(monkeypatch):
    import IPython

    from explorer._src.ui.why import source_line

    class Shell:
        user_ns = {"_ih": ["", "import jax\n", "def f(x, w):\n    return x @ w\n"]}

    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell())
    r = analyze(two_matmuls, *INPUTS, mesh="data=2,model=4")
    in_cell = replace(r.collectives[0], source="In [2], line 2", source_text="")
    assert source_line(in_cell) == "return x @ w"
    assert source_line(replace(in_cell, source="In [9], line 2")) == ""     # no such cell
    assert source_line(r.collectives[0]) == "h = jnp.tanh(x @ w1)"          # read from file
