"""A Voila page whose app cannot be built shows the explorer's own message, never Voila's
generic "There was an error when executing cell [1]" (the app is served with tracebacks off)."""

import pytest

playwright = pytest.importorskip("playwright.sync_api")

from explorer._src.ui.serve import one_cell_notebook  # noqa: E402

CELL = """from explorer._src.app_page import app_page

app_page(workload="mlpp", mesh="data=2,model=4")
"""


def test_a_page_that_fails_says_what_and_what_to_do(tmp_path, voila_server, browser, artifacts):
    nb = one_cell_notebook(CELL, tmp_path / "failing_page.ipynb")
    with voila_server(nb) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(url, timeout=120_000)
            message = page.locator(".explorer-page-failed")
            message.wait_for(timeout=120_000)
            page.screenshot(path=str(artifacts / "page-failed.png"))
            text = message.inner_text()
            assert text.startswith("⚠ The app could not open: workload 'mlpp' is unknown")
            assert "transformer" in text and "reload this page" in text
            assert "There was an error when executing cell" not in page.inner_text("body")
        finally:
            page.close()
