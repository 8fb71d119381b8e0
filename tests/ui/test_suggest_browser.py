"""The Suggest tab end to end: a real Voila server on a notebook that opens the app, driven in
headless Chromium (Debian's /usr/bin/chromium) as tests/ui/test_app_browser.py does. The search
runs on its thread while the kernel's event loop draws its progress and its result."""

import pytest

pytest.importorskip("voila")
playwright = pytest.importorskip("playwright.sync_api")

from explorer._src.ui.serve import one_cell_notebook  # noqa: E402

pytestmark = pytest.mark.browser

# Megatron specs on a small MLP; the search over `batch` and `mlp` finds data parallelism on
# every device better (no collective), so Apply visibly changes the mesh and the rules.
CELL = """\
from explorer.ui import Explorer
Explorer(workload="mlp", mesh="data=2,model=4", target="h100-8",
         params={"batch": 64, "d_model": 64, "d_ff": 256},
         specs={"x": "data,None", "w1": "None,model", "w2": "model,None"})
"""


def test_search_in_the_page_then_apply(tmp_path, chromium, artifacts, voila_server,
                                       search_in_page):
    notebook = one_cell_notebook(CELL, tmp_path / "suggest.ipynb")
    with voila_server(notebook) as url:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(**chromium)
            page = browser.new_page(viewport={"width": 1440, "height": 1400})
            try:
                page.goto(url, timeout=120_000)
                page.wait_for_selector(".explorer-status:has-text(' devices ')",
                                       timeout=120_000)
                search_in_page(page)
                # The winner's row, its plot and its comparison are in the page.
                winner = page.locator(".explorer-suggest-table tr.explorer-winner")
                assert winner.get_attribute("data-label") == "data=8,model=1: batch=data"
                page.locator(".explorer-suggest .gtitle", has_text="memory per device") \
                    .first.wait_for(timeout=60_000)
                assert "Why data=8,model=1: batch=data beats" in page.locator(
                    ".explorer-suggest-why").inner_text()
                page.locator(".explorer-suggest button", has_text="Apply").click()
                # The sidebar takes the winner's mesh and rules, and the app recompiles it.
                page.wait_for_function(
                    "() => [...document.querySelectorAll('.explorer-mesh-axis input')]"
                    ".map(e => e.value).join(',') === 'data,8,model,1'", timeout=60_000)
                status = page.locator(".explorer-status")
                status.filter(has_text="0 collectives").wait_for(timeout=120_000)
            finally:
                page.screenshot(path=str(artifacts / "tab-suggest.png"), full_page=True)
                browser.close()
