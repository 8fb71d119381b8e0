"""The views read at any size (issue 53): the app in Voila at 1400x900, and at the width of a
JupyterLab notebook's output area at that window size (about 1150 px, the viewport's width), on
a small workload (8 devices) and a large one (256 devices, a 16x16 block grid); and the small
one in a real JupyterLab notebook cell at 1400x900. Every tab is photographed to
test-artifacts/views-*.png; what the DOM can say is asserted: each tab title whole, the
Collectives table's box as tall as the window allows, every figure within its box, and no two
tick labels of a heatmap over each other."""

import pytest

pytest.importorskip("voila")
playwright = pytest.importorskip("playwright.sync_api")

from explorer._src.ui.serve import one_cell_notebook  # noqa: E402
from explorer._src.ui.tabs import TAB_TITLES  # noqa: E402


def _jupyterlab_module():
    """tests/ui/test_jupyterlab_browser.py, for its JupyterLab server fixture; None where
    JupyterLab (or flax, which it tests) is missing."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "views_jupyterlab_server", Path(__file__).with_name("test_jupyterlab_browser.py"))
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except pytest.skip.Exception:
        return None
    return module


_LAB = _jupyterlab_module()
lab = _LAB.lab if _LAB else None                 # the server fixture, used by name below

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELLS = {
    # Megatron's transformer layer on 8 devices: several collectives in the table.
    "small": 'from explorer.ui import Explorer\n'
             'Explorer(workload="transformer", mesh="data=2,model=4", preset="megatron")\n',
    # 256 devices; w1 [1024, 4096] split over both axes: 16 x 16 blocks on a 16 x 16 mesh.
    "large": 'from explorer.ui import Explorer\n'
             'Explorer(workload="mlp", mesh="data=16,model=16",\n'
             '         specs={"x": "data,None", "w1": "data,model", "w2": "model,None"})\n',
}
WIDTHS = {"window": 1400, "lab-cell": 1150}
# The tensor each case's Placement heatmap is checked on: w1's 16 x 16 blocks in the large one.
TENSOR = {"small": "input: x float32[8,16,256]", "large": "input: w1 float32[1024,4096]"}

# Each tab title's label: its text, and whether it is cut (scrollWidth past clientWidth).
TAB_LABELS_JS = """() => [...document.querySelectorAll(
    '.explorer-app .lm-TabBar-tab .lm-TabBar-tabLabel, .explorer-app .p-TabBar-tabLabel')]
    .map(e => ({text: e.textContent, cut: e.scrollWidth > e.clientWidth + 0.5}))"""

# The visible heatmaps' tick labels, per figure and axis, as boxes on the page.
TICKS_JS = """() => [...document.querySelectorAll('.explorer-placement .js-plotly-plot')]
    .filter(d => d.offsetParent !== null)
    .map(d => ['xtick', 'ytick'].map(axis => [...d.querySelectorAll(`g.${axis} text`)]
        .filter(t => t.textContent.trim())
        .map(t => { const b = t.getBoundingClientRect();
                    return {text: t.textContent, l: b.left, r: b.right, t: b.top,
                            b: b.bottom}; })))"""

# Each visible heatmap's drawn width beside its box's: a figure wider than its box is cut.
WIDTHS_JS = """() => [...document.querySelectorAll('.explorer-placement .js-plotly-plot')]
    .filter(d => d.offsetParent !== null)
    .map(d => ({figure: d.querySelector('svg.main-svg').getBoundingClientRect().width,
                box: d.closest('.explorer-placement').getBoundingClientRect().width}))"""

# Whether each visible text of the Collectives and Timing tabs ends within its tab's box.
TEXT_WITHIN_JS = """() => [...document.querySelectorAll(
    '.explorer-collectives-summary, .explorer-collectives .explorer-table-wrap, '
    + '.explorer-timing-body p')].filter(e => e.offsetParent !== null)
    .map(e => ({text: e.textContent.slice(0, 40), within: e.getBoundingClientRect().right
        <= e.closest('.widget-tab-contents, .lm-TabPanel-stackedPanel, .widget-tab')
              .getBoundingClientRect().right + 0.5}))"""

FITTED_JS = "() => (" + WIDTHS_JS + ")().every(w => w.figure <= w.box)"

TABLE_JS = """() => { const e = [...document.querySelectorAll(
    '.explorer-collectives .explorer-table-wrap')].find(e => e.offsetParent !== null);
    return e && {max: getComputedStyle(e).maxHeight, client: e.clientHeight,
                 scroll: e.scrollHeight}; }"""


def overlapping(boxes: list[dict]) -> list[tuple[str, str]]:
    """The pairs of boxes that cover each other (more than half a pixel each way)."""
    return [(a["text"], b["text"]) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if min(a["r"], b["r"]) - max(a["l"], b["l"]) > 0.5
            and min(a["b"], b["b"]) - max(a["t"], b["t"]) > 0.5]


@pytest.fixture(scope="module", params=list(CELLS))
def app_url(request, voila_server, tmp_path_factory):
    nb = one_cell_notebook(CELLS[request.param],
                           tmp_path_factory.mktemp("views") / f"{request.param}.ipynb")
    with voila_server(nb) as url:
        yield request.param, url


@pytest.mark.parametrize("width", list(WIDTHS))
def test_every_tab_reads_whole_at_1400x900_and_in_a_notebook_cells_width(
        app_url, width, browser, artifacts):
    case, url = app_url
    page = browser.new_page(viewport={"width": WIDTHS[width], "height": 900})
    try:
        page.goto(url, timeout=600_000)
        page.wait_for_selector(".explorer-status:has-text('compiled'), "
                               ".explorer-status:has-text('cached')", timeout=600_000)
        page.locator(".explorer-placement .js-plotly-plot").first.wait_for(timeout=120_000)
        page.locator(".explorer-placement select").first.select_option(label=TENSOR[case])
        name = TENSOR[case].split()[1]
        page.wait_for_function(
            "n => [...document.querySelectorAll('.explorer-placement .js-plotly-plot')]"
            ".filter(d => d.offsetParent !== null && d.layout && d.layout.title && "
            "(d.layout.title.text || '').startsWith(n + ' ')).length == 1", arg=name,
            timeout=120_000)
        _placement_drawn(page)
        ticks = page.evaluate(TICKS_JS)
        widths = page.evaluate(WIDTHS_JS)
        page.locator(".explorer-placement").first.screenshot(
            path=str(artifacts / f"views-{case}-{width}-placement-whole.png"))
        labels = page.evaluate(TAB_LABELS_JS)
        for title in TAB_TITLES:
            page.get_by_text(title, exact=True).first.click()
            page.wait_for_timeout(1500)      # a tab drawn when shown: let it settle
            if title == "Collectives":
                page.locator(".explorer-collectives .explorer-table").first.wait_for(
                    state="visible", timeout=120_000)
                table = page.evaluate(TABLE_JS)
            page.screenshot(path=str(artifacts / f"views-{case}-{width}-{title.lower()}.png"),
                            full_page=True)
    finally:
        page.close()
    assert [label["text"] for label in labels] == list(TAB_TITLES)
    assert [label["text"] for label in labels if label["cut"]] == []
    # The table's box may grow to the window less the status line and the tab bar above it
    # (a fixed 430 px box held two or three collectives with their part rows); where its
    # rows are taller than that, it is.
    room = 900 - 200
    assert float(table["max"].removesuffix("px")) >= room
    assert table["client"] >= room or table["client"] >= table["scroll"]
    assert len(ticks) == 2                               # the blocks and the device grid
    assert all(w["figure"] <= w["box"] for w in widths), widths
    for figure in ticks:
        for axis in figure:
            assert axis, "an axis without tick labels"
            assert overlapping(axis) == []
    if case == "large":
        # 16 rows of blocks and 16 rows of devices, every one labelled.
        assert [len(figure[1]) for figure in ticks] == [16, 16]



def _placement_drawn(page) -> None:
    """Wait until both Placement heatmaps are drawn, and fitted to their box (plotly resizes a
    moment after drawing; one never fitted stays cut, which the width check then asserts)."""
    page.wait_for_function(
        "() => [...document.querySelectorAll('.explorer-placement .js-plotly-plot')]"
        ".filter(d => d.offsetParent !== null && d.data && d.data.length).length == 2",
        timeout=120_000)
    try:
        page.wait_for_function(FITTED_JS, timeout=30_000)
    except playwright.Error:
        pass

# ------------------------------------------------------------- inside JupyterLab, at 1400x900

@pytest.mark.skipif(_LAB is None, reason="needs jupyterlab and flax")
def test_in_a_jupyterlab_cell_at_1400x900_tab_titles_and_figures_are_whole(chromium, artifacts,
                                                                         lab):
    """The app in a real JupyterLab notebook cell (the server of test_jupyterlab_browser.py,
    given this notebook by its contents API), its file browser open as it opens. Driven from a
    thread of its own: Playwright's sync API refuses a thread with an asyncio loop running, which
    a test run earlier in the same process may leave in the main one (seen under xdist)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(_app_in_a_jupyterlab_cell, chromium, artifacts, lab).result()


def _app_in_a_jupyterlab_cell(chromium, artifacts, lab):
    import http.cookiejar
    import json
    import urllib.request

    notebook = {"type": "notebook", "format": "json", "content": {
        "cells": [{"cell_type": "code", "metadata": {}, "source": CELLS["small"], "outputs": [],
                   "execution_count": None}],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                    "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5}}
    # The server checks a write against its XSRF cookie, which a page load sets.
    cookies = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(cookies))
    opener.open(lab + "lab", timeout=60).close()
    xsrf = next((c.value for c in cookies if c.name == "_xsrf"), "")
    put = urllib.request.Request(lab + "api/contents/views.ipynb", method="PUT",
                                 data=json.dumps(notebook).encode(),
                                 headers={"Content-Type": "application/json",
                                          "X-XSRFToken": xsrf})
    opener.open(put, timeout=30).close()
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(**chromium)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(lab + "lab/tree/views.ipynb", timeout=300_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell .jp-InputArea-editor",
                                   timeout=300_000)
            _LAB.wait_for_idle_kernel(lab)
            page.click(".jp-Cell .jp-InputPrompt")
            page.click("jp-button[data-command='notebook:run-cell-and-select-next'], "
                       "button[data-command='notebook:run-cell-and-select-next']")
            page.wait_for_selector(".explorer-status:has-text('●')", timeout=600_000)
            _placement_drawn(page)
            labels = page.evaluate(TAB_LABELS_JS)
            widths = page.evaluate(WIDTHS_JS)
            ticks = page.evaluate(TICKS_JS)
            texts = []
            for title in TAB_TITLES:
                page.locator(".explorer-app").get_by_text(title, exact=True).first.click()
                page.wait_for_timeout(1500)
                texts += page.evaluate(TEXT_WITHIN_JS)
                page.screenshot(path=str(artifacts / f"views-jupyterlab-{title.lower()}.png"))
        finally:
            browser.close()
    assert [label["text"] for label in labels] == list(TAB_TITLES)
    assert [label["text"] for label in labels if label["cut"]] == []
    assert all(w["figure"] <= w["box"] for w in widths), widths
    for figure in ticks:
        for axis in figure:
            assert overlapping(axis) == []
    assert texts and [t["text"] for t in texts if not t["within"]] == []
