"""End to end: a real Voila server on a loopback port, driven in headless Chromium by Playwright.

Chromium comes from Debian's package (/usr/bin/chromium); Playwright's own browser download does
not work here. Screenshots go to test-artifacts/.
"""

import pytest

pytest.importorskip("voila")
playwright = pytest.importorskip("playwright.sync_api")

from explorer._src.ui.serve import one_cell_notebook  # noqa: E402

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(voila_server):
    with voila_server() as url:
        yield url


@pytest.fixture(scope="module")
def page(chromium, server):
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(**chromium)
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        pg.goto(server, timeout=120_000)
        pg.wait_for_selector(".explorer-status:has-text('compiled')", timeout=120_000)
        yield pg
        browser.close()


def collectives_text(page) -> str:
    return page.locator(".explorer-collectives").first.inner_text()


def wait_for_table(page, text: str, timeout=60_000) -> None:
    """Wait until the Collectives tab shows `text` on screen (innerText: a tab waiting to be
    drawn for the current result is hidden, and the picker's options hold text too)."""
    page.wait_for_function(
        "t => [...document.querySelectorAll('.explorer-collectives')]"
        ".some(e => e.innerText.includes(t))", arg=text, timeout=timeout)


def test_load_edit_see_collectives_change(page, artifacts, pick):
    page.get_by_text("Collectives", exact=True).click()
    wait_for_table(page, "all-reduce")
    text = collectives_text(page)
    assert "all-reduce" in text and "model" in text and "512.0 KiB" in text   # 128×1024×4 B
    # Replicate both weights: the data-parallel forward pass needs no collective.
    pick(page, "w1", 1, [])
    pick(page, "w2", 0, [])
    wait_for_table(page, "No collectives")
    # Split w1's rows over model: partial sums of h (128×4096 floats) are all-reduced.
    pick(page, "w1", 0, ["model"])
    wait_for_table(page, "2.0 MiB")
    text = collectives_text(page)
    assert "all-reduce" in text and "model" in text
    page.screenshot(path=str(artifacts / "app-collectives.png"), full_page=True)


def test_invalid_edit_shows_error_and_app_stays_usable(page, artifacts):
    size = page.locator(".explorer-mesh-axis").nth(1).locator("input").nth(1)
    size.fill("3")
    size.press("Enter")
    error = page.locator(".explorer-spec-w1 .explorer-error")
    error.filter(has_text="not divisible by model=3").wait_for(timeout=30_000)
    page.wait_for_selector(".explorer-stale", timeout=10_000)
    page.screenshot(path=str(artifacts / "app-error.png"), full_page=True)
    # Fix it: the error goes, the stale marking goes, and a result is shown again.
    size.fill("4")
    size.press("Enter")
    page.wait_for_selector(".explorer-stale", state="detached", timeout=60_000)
    assert page.locator(".explorer-spec-w1 .explorer-error").inner_text() == ""
    page.wait_for_selector(".explorer-status:has-text('compiled'), "
                           ".explorer-status:has-text('cached')", timeout=60_000)


def test_placement_view_draws_the_selected_tensor(page, artifacts):
    page.get_by_text("Placement", exact=True).click()
    picker = page.locator(".explorer-placement select").first
    picker.select_option(label="input: w2 float32[4096,1024]")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.explorer-placement .gtitle')]"
        ".some(e => e.textContent.startsWith('w2 float32[4096,1024]'))", timeout=30_000)
    # The plumbing checkbox's label is read in full, not cut to an ellipsis.
    label = page.locator(".explorer-placement .widget-checkbox .widget-label-basic span").first
    assert label.inner_text() == "list plumbing too (scalars, masks, reshapes, copies)"
    # Nothing from the text up to the checkbox widget clips it (the fixed-width widget did).
    clipped = label.evaluate("""e => {
        const out = [];
        for (let n = e; n; n = n.parentElement) {
            if (n.scrollWidth > n.clientWidth) out.push(n.className || n.tagName);
            if (n.classList.contains('widget-checkbox')) break;
        }
        return out; }""")
    assert clipped == []
    page.screenshot(path=str(artifacts / "app-placement.png"), full_page=True)


def test_spec_edit_redraws_the_heatmap_and_the_dataflow_graph(page, artifacts, pick):
    page.get_by_text("Placement", exact=True).click()
    picker = page.locator(".explorer-placement select").first
    picker.select_option(label="input: w1 float32[1024,4096]")
    # w1 split by columns over data alone: one row of 2 blocks; block 0 is held by d0..d3,
    # block 1 by d4..d7 (devices are numbered row-major over data=2 × model=4).
    pick(page, "w1", 0, [])
    pick(page, "w1", 1, ["data"])
    page.wait_for_function(
        "() => [...document.querySelectorAll('.explorer-placement .js-plotly-plot')]"
        ".some(e => e.layout.title.text.startsWith('w1 float32[1024,4096]  spec None,data'))",
        timeout=60_000)
    blocks = page.evaluate("() => document.querySelector('.explorer-placement .js-plotly-plot')"
                           ".data[0].z")
    assert blocks == [[0, 1]]               # coloured by block number
    labels = page.evaluate("() => document.querySelector('.explorer-placement .js-plotly-plot')"
                           ".data[0].text")
    assert labels == [["b0: d0…d3 ×4", "b1: d4…d7 ×4"]]
    # The HLO tab's dataflow graph is drawn for the current program when shown.
    page.get_by_text("HLO", exact=True).click()
    page.wait_for_function(
        "() => { const e = document.querySelector('.explorer-graph .js-plotly-plot');"
        " return e && e.data[3].x && e.data[3].x.length > 0; }", timeout=30_000)
    page.screenshot(path=str(artifacts / "app-hlo-graph.png"), full_page=True)


# Per tab: an element, and text it shows once the tab is drawn for the current result.
TAB_MARKERS = {
    "Placement": (".explorer-placement .explorer-legend", "Colour = block of"),
    "Collectives": (".explorer-collectives .explorer-table", "bytes/dev"),
    "Memory": (".explorer-memory .gtitle", "memory per device:"),
    "Timing": (".explorer-timing-body", "Compile"),
    "HLO": (".explorer-graph .gtitle", "per-device program"),
}


def test_every_tab_renders(page, artifacts, pick):
    """Each tab draws its content in the page; a screenshot of each goes to test-artifacts/."""
    for title, (marker, text) in TAB_MARKERS.items():
        page.get_by_text(title, exact=True).click()
        try:
            page.locator(marker).filter(has_text=text).first.wait_for(state="visible",
                                                                      timeout=30_000)
        finally:       # on failure too: the picture shows what was drawn instead
            page.screenshot(path=str(artifacts / f"tab-{title.lower()}.png"), full_page=True)
    page.get_by_text("Compare", exact=True).click()
    page.locator(".explorer-compare-pin").click()
    page.locator(".explorer-compare-metrics").wait_for(state="visible", timeout=30_000)
    pick(page, "w2", 1, ["data"])                  # B differs from the pinned A
    # The edit shows as B's change; w2 was replicated by the first test.
    page.locator(".explorer-compare").filter(has_text="spec w2: replicated -> None,data") \
        .first.wait_for(timeout=60_000)
    page.screenshot(path=str(artifacts / "tab-compare.png"), full_page=True)


# ------------------------------------------------------------- the user's own function

FUNCTION_CELL = """\
import jax.numpy as jnp
from explorer import TensorSpec as T
from explorer.ui import explore

def two_matmuls(x, w1, w2):
    h = jnp.tanh(x @ w1)
    return h @ w2

explore(two_matmuls, T("x", (256, 1024), spec="data,None"),
        T("w1", (1024, 4096), spec="data,model"), T("w2", (4096, 1024), spec="model,None"),
        mesh="data=2,model=4", target="h100-8")
"""


def test_explore_on_a_function_defined_in_a_notebook_cell(page, tmp_path, artifacts,
                                                           voila_server):
    """explore() in a cell: the sidebar names the function, the why panel shows the cell's line
    of code, a confirmed what-if applies with a click, and Timing draws the predicted trace."""
    nb = one_cell_notebook(FUNCTION_CELL, tmp_path / "own_function.ipynb")
    with voila_server(nb) as url:
        # A page of the module's browser: one Playwright per thread.
        pg = page.context.browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            pg.goto(url, timeout=120_000)
            pg.wait_for_selector(".explorer-status:has-text('compiled')", timeout=120_000)
            head = pg.locator(".explorer-function-head").inner_text()
            assert "two_matmuls" in head and "w1 float32[1024,4096]" in head
            pg.get_by_text("Collectives", exact=True).click()
            wait_for_table(pg, "all-gather")
            pg.locator(".explorer-collectives select").first.select_option(index=1)
            why = pg.locator(".explorer-why").first
            why.filter(has_text="gather-operand").wait_for(timeout=30_000)
            assert "h = jnp.tanh(x @ w1)" in why.inner_text()
            apply = pg.locator(".explorer-what-if").first
            apply.wait_for(timeout=120_000)            # compiled in the background
            pg.screenshot(path=str(artifacts / "explore-why.png"), full_page=True)
            apply.click()
            pg.locator(".explorer-why-panel").filter(has_text="removed").first.wait_for(
                timeout=60_000)
            assert "all-gather" not in pg.locator(".explorer-collectives .explorer-table")\
                .first.inner_text()
            pg.get_by_text("Timing", exact=True).click()
            pg.wait_for_function(
                "() => { const e = document.querySelector('.explorer-trace .js-plotly-plot');"
                " return e && e.data.length > 0; }", timeout=30_000)
            pg.screenshot(path=str(artifacts / "explore-timing.png"), full_page=True)
        finally:
            pg.close()


def test_four_concurrent_sessions_each_stay_correct(page, voila_server, pick):
    # Four people open the app on one server at once; each edits differently and each page
    # shows its own result (one kernel per page). Memory per session is printed for
    # docs/reliability.md: each page's kernel plus its compile workers.
    import psutil

    with voila_server() as url:
        browser = page.context.browser
        contexts = [browser.new_context(viewport={"width": 1400, "height": 1000})
                    for _ in range(4)]
        try:
            pages = [c.new_page() for c in contexts]
            for p in pages:                          # all four load before any is edited
                p.goto(url, wait_until="commit", timeout=120_000)
            for p in pages:
                p.wait_for_selector(".explorer-status:has-text('compiled')", timeout=240_000)
                p.get_by_text("Collectives", exact=True).click()
            # As in test_load_edit_see_collectives_change: replicated weights need no
            # collective; w1's rows over model all-reduce the partial sums of h (2.0 MiB); the
            # untouched page keeps the Megatron all-reduce (512.0 KiB).
            pick(pages[0], "w1", 1, [])
            pick(pages[0], "w2", 0, [])
            pick(pages[1], "w1", 1, [])
            pick(pages[1], "w2", 0, [])
            pick(pages[1], "w1", 0, ["model"])
            pick(pages[3], "w1", 1, [])
            pick(pages[3], "w2", 0, [])
            wait_for_table(pages[0], "No collectives", timeout=240_000)
            wait_for_table(pages[1], "2.0 MiB", timeout=240_000)
            wait_for_table(pages[2], "512.0 KiB", timeout=240_000)     # untouched: the default
            wait_for_table(pages[3], "No collectives", timeout=240_000)
            assert "all-reduce" in collectives_text(pages[1])
            assert "all-reduce" in collectives_text(pages[2])
            assert "all-reduce" not in collectives_text(pages[0])
            port = url.rstrip("/").rsplit(":", 1)[1]
            [server] = [q for q in psutil.process_iter(["cmdline"])
                        if f"--port={port}" in (q.info["cmdline"] or [])]
            kernels = [k for k in server.children()
                       if "ipykernel_launcher" in " ".join(k.cmdline())]
            assert len(kernels) >= 4
            per_session = []
            for k in kernels:
                tree = [k, *k.children(recursive=True)]
                per_session.append(sum(q.memory_info().rss for q in tree if q.is_running()))
            print(f"\nmemory per Voila session (kernel + workers), MB: "
                  f"{[round(b / 2**20) for b in per_session]}")
        finally:
            for c in contexts:
                c.close()
