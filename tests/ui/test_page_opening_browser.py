"""Issue 43 items 8 and 9 in Chromium on the Voila app (`sharding-explorer app`'s notebook): a
page opening a link says which exploration, which compiler, the seconds since it asked and the
compile time limit; after an edit the page's address names the exploration shown, and a reload
opens it again. Screenshots at 1400x900 go to test-artifacts/."""

import re

import pytest

pytest.importorskip("voila")
pytest.importorskip("playwright.sync_api")

from explorer import AppState, Exploration  # noqa: E402
from explorer._src.api.exploration import from_link  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]
WAIT_MS = 300_000          # a page load and a compile on the loaded 2-core machine
VIEW = {"width": 1400, "height": 900}

# A small MLP on another mesh and target than the default's, shown on its Timing tab.
LINKED = Exploration(mesh="data=4,model=2", workload="mlp",
                     params={"batch": 32, "d_model": 64, "d_ff": 128}, target="h100-8",
                     app=AppState(tab="Timing"))

# Run before the page's own scripts: every text the opening line shows, in order.
WATCH_JS = """
window.__opening = [];
new MutationObserver(() => {
  for (const o of document.querySelectorAll('.explorer-page-opening')) {
    const t = o.textContent;
    if (window.__opening[window.__opening.length - 1] !== t) window.__opening.push(t);
  }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""

# The app shows a result (its status starts with ●) of `workload`.
SHOWN_JS = ("header => { const s = document.querySelector('.explorer-status [data-result]');"
            " const h = document.querySelector('.explorer-app h3');"
            " return s && s.textContent.startsWith('●') && h && h.textContent === header; }")


@pytest.fixture(scope="module")
def app_url(voila_server):
    with voila_server() as url:
        yield url


def shown(page) -> dict:
    return page.evaluate("""() => {
      const axes = [...document.querySelectorAll('.explorer-mesh-axis')].map(r =>
          [...r.querySelectorAll('input')].map(i => i.value).join('='));
      const tab = document.querySelector('.explorer-app .lm-TabBar-tab.lm-mod-current');
      const on = document.querySelector('.explorer-app .widget-toggle-buttons .mod-active');
      return {mesh: axes.join(','), tab: tab && tab.textContent.trim(),
              partitioner: on && on.textContent.trim()};
    }""")


def test_a_link_opening_says_what_which_compiler_how_long_and_the_limit(
        app_url, browser, artifacts):
    page = browser.new_page(viewport=VIEW)
    page.add_init_script(WATCH_JS)
    try:
        page.goto(f"{app_url}?exploration={LINKED.to_link()}", timeout=WAIT_MS)
        page.wait_for_function("() => window.__opening.some(t => t.includes('since the page"
                               " asked'))", timeout=WAIT_MS)
        page.screenshot(path=str(artifacts / "opening-link.png"))
        page.wait_for_function(SHOWN_JS, arg="sharding-explorer · mlp", timeout=WAIT_MS)
        seen = page.evaluate("window.__opening")
        said = next(t for t in seen if "since the page asked" in t)
        assert "Opening the exploration this page's link names: mlp (batch=32, d_model=64, " \
               "d_ff=128) · mesh data=4,model=2 · target h100-8" in said
        # The GPU compiler where the gpu extra is installed, else fake CPU devices, said so.
        assert re.search(r"Compiling with (XLA's GPU compiler for 8 H100s|XLA's CPU compiler "
                         r"on 8 fake CPU devices, priced on h100-8)", said), said
        assert re.search(r"\d+\.\d s since the page asked · compile time limit \d+ s", said)
        # Opened: the line is gone, the app shows the link's mesh and tab, the address the link.
        page.locator(".explorer-page-opening").first.wait_for(state="hidden", timeout=WAIT_MS)
        assert shown(page)["mesh"] == "data=4,model=2" and shown(page)["tab"] == "Timing"
        assert from_link(page.url.split("exploration=")[1]).mesh == "data=4,model=2"
    finally:
        page.screenshot(path=str(artifacts / "opening-link-done.png"))
        page.close()


def test_a_reload_after_an_edit_opens_the_same_exploration(app_url, browser, artifacts):
    page = browser.new_page(viewport=VIEW)
    try:
        page.goto(app_url, timeout=WAIT_MS)
        page.wait_for_function(SHOWN_JS, arg="sharding-explorer · mlp", timeout=WAIT_MS)
        assert "exploration=" not in page.url                 # the default: no state
        page.get_by_role("button", name="GSPMD").click()
        page.wait_for_function("() => location.search.includes('exploration=')",
                               timeout=WAIT_MS)
        assert from_link(page.url.split("exploration=")[1]).partitioner == "gspmd"
        before = page.url
        page.reload(timeout=WAIT_MS)
        page.wait_for_function(SHOWN_JS, arg="sharding-explorer · mlp", timeout=WAIT_MS)
        page.locator(".explorer-page-opening").first.wait_for(state="hidden", timeout=WAIT_MS)
        assert shown(page)["partitioner"] == "GSPMD"
        assert shown(page)["mesh"] == "data=2,model=4"
        assert page.url == before
        page.screenshot(path=str(artifacts / "reloaded.png"))
    finally:
        page.close()
