"""The Suggest tab end to end: a real Voila server on a notebook that opens the app, driven in
headless Chromium (Debian's /usr/bin/chromium) as tests/ui/test_app_browser.py does. The search
runs on its thread while the kernel's event loop draws its progress and its result."""

import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("voila")
playwright = pytest.importorskip("playwright.sync_api")

from explorer.ui.serve import free_port, one_cell_notebook, voila_command  # noqa: E402

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("EXPLORER_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]

if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
    if os.environ.get("CI"):
        raise RuntimeError(f"{CHROMIUM} is missing: .ci/run must install Debian's chromium")
    pytest.skip(f"no Chromium at {CHROMIUM}", allow_module_level=True)

# Megatron specs on a small MLP; the search over `batch` and `mlp` finds data parallelism on
# every device better (no collective), so Apply visibly changes the mesh and the rules.
CELL = """\
from explorer.ui import Explorer
Explorer(workload="mlp", mesh="data=2,model=4", target="h100-8",
         params={"batch": 64, "d_model": 64, "d_ff": 256},
         specs={"x": "data,None", "w1": "None,model", "w2": "model,None"})
"""




def test_search_in_the_page_then_apply(tmp_path):
    ARTIFACTS.mkdir(exist_ok=True)
    port = free_port()
    log = open(ARTIFACTS / "voila-suggest.log", "w")
    notebook = one_cell_notebook(CELL, tmp_path / "s.ipynb")
    proc = subprocess.Popen(voila_command(port, notebook=notebook),
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.time() + 240
        while True:
            try:
                urllib.request.urlopen(url + "voila/static/", timeout=2)
                break
            except urllib.error.HTTPError:     # any HTTP answer means the server is up
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, "Voila did not start"
                time.sleep(0.5)
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 1400})
            try:
                page.goto(url, timeout=120_000)
                page.wait_for_selector(".explorer-status:has-text(' devices ')",
                                       timeout=120_000)
                page.get_by_text("Suggest", exact=True).click()
                tags = page.locator(".explorer-suggest input.jupyter-widget-taginput")
                for name in ("batch", "mlp"):
                    tags.click()
                    tags.fill(name)
                    tags.press("Enter")
                page.locator(".explorer-suggest button", has_text="Start search").click()
                progress = page.locator(".explorer-suggest-progress")
                progress.filter(has_text="complete: evaluated").wait_for(timeout=300_000)
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
                page.screenshot(path=str(ARTIFACTS / "tab-suggest.png"), full_page=True)
                browser.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
