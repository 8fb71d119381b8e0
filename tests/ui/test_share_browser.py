"""Explorations shared by a link, in Chromium on the Voila app (`sharding-explorer app`'s
notebook, with its preheated kernel): `URL?exploration=...` opens the app on the linked
workload, mesh, preset and tab; the Share section's own link opens the same again; a bad link
shows its error over the default app."""

import pytest

pytest.importorskip("voila")
pytest.importorskip("playwright.sync_api")

from explorer import AppState, Exploration  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]
WAIT_MS = 300_000          # a page load and a compile on the loaded 2-core machine

# A two-layer train step on 4 x 2 devices under FSDP + tensor parallelism, shown on the Memory
# tab with one of its layers' weights picked: written here by hand, as an instructor would.
LINKED = Exploration(mesh="data=4,model=2", workload="transformer_train",
                     params={"layers": 2}, preset="fsdp_tp", target="h100-8",
                     app=AppState(tab="Memory", tensor="layers.w1"))


# Run in the page before its own scripts: on every frame, note whether the default mlp app, or
# the "Opening ..." line, is on screen.
WATCH_JS = """
window.__seen = {defaultApp: false, opening: false};
const shown = e => e.checkVisibility({checkVisibilityCSS: true, visibilityProperty: true});
const look = () => {
  for (const h of document.querySelectorAll('.explorer-app h3'))
    if (h.textContent === 'sharding-explorer · mlp' && shown(h)) window.__seen.defaultApp = true;
  for (const o of document.querySelectorAll('.explorer-page-opening'))
    if (shown(o)) window.__seen.opening = true;
  requestAnimationFrame(look);
};
requestAnimationFrame(look);
"""


@pytest.fixture(scope="module")
def app_url(voila_server):
    """The Voila app (notebooks/app.ipynb) on a free loopback port."""
    with voila_server() as url:
        yield url


@pytest.fixture
def open_page(browser, artifacts):
    """open_page(url, name, workload): the page at `url` once its app shows a result of
    `workload` (a link's page shows "Opening ...", then the app its link names); a
    screenshot goes to test-artifacts/ at the end, pass or fail."""
    opened = []

    def open_(url: str, name: str, workload: str = "mlp"):
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        opened.append((page, name))
        page.add_init_script(WATCH_JS)
        page.goto(url, timeout=WAIT_MS)
        page.wait_for_function(
            "header => { const s = document.querySelector('.explorer-status [data-result]');"
            " const h = document.querySelector('.explorer-app h3');"
            " return s && s.textContent.startsWith('●') && h && h.textContent === header; }",
            arg=f"sharding-explorer · {workload}", timeout=WAIT_MS)
        return page

    yield open_
    for page, name in opened:
        page.screenshot(path=str(artifacts / f"share-{name}.png"), full_page=True)
        page.close()


def shown_request(page) -> dict:
    """What the page's sidebar and tabs show: the workload, its layers, the mesh, the preset,
    the selected tab and the status line."""
    return page.evaluate("""() => {
      const value = label => { for (const e of document.querySelectorAll('.widget-inline-hbox'))
          if (e.querySelector('label') && e.querySelector('label').textContent === label)
            return e.querySelector('select, input').value; return null; };
      const axes = [...document.querySelectorAll('.explorer-mesh-axis')].map(r =>
          [...r.querySelectorAll('input')].map(i => i.value).join('='));
      const tab = document.querySelector('.explorer-app .lm-TabBar-tab.lm-mod-current');
      return {header: document.querySelector('.explorer-app h3').textContent,
              workload: value('workload'),
              layers: value('layers'),
              mesh: axes.join(','), preset: value('preset'),
              tab: tab && tab.textContent.trim(),
              status: document.querySelector('.explorer-status').textContent,
              error: document.querySelector('.explorer-page-error').textContent};
    }""")


def test_a_link_opens_the_app_on_its_workload_mesh_preset_and_tab_and_offers_it_again(
        app_url, open_page):
    page = open_page(f"{app_url}?exploration={LINKED.to_link()}", "linked",
                     "transformer_train")
    # While the link opened, the page said so, and never showed the default app.
    assert page.evaluate("window.__seen") == {"defaultApp": False, "opening": True}
    shown = shown_request(page)
    assert shown["header"] == "sharding-explorer · transformer_train"
    assert (shown["workload"], shown["layers"], shown["mesh"], shown["preset"]) == \
        ("transformer_train", "2", "data=4,model=2", "fsdp_tp")
    assert shown["tab"] == "Memory" and "8 devices" in shown["status"]
    assert shown["error"] == ""
    page.locator(".explorer-memory .gtitle").first.wait_for(state="visible", timeout=WAIT_MS)
    # The picked tensor: 2 layers of d_model 64 by d_ff 256 (the workload's defaults).
    assert page.locator(".explorer-placement select").first.input_value() == \
        "input: layers.w1 float32[2,64,256]"

    # The Share section links to this page, now on the Timing tab.
    page.get_by_text("Timing", exact=True).click()
    share = page.locator(".explorer-share a.explorer-share-link")
    page.wait_for_function(
        "() => { const a = document.querySelector('.explorer-share a.explorer-share-link');"
        " return a && a.closest('.explorer-share').textContent.includes('Timing tab'); }",
        timeout=60_000)
    href = share.get_attribute("href")
    assert href.startswith("/?exploration=")
    download = page.locator(".explorer-share a.explorer-share-download")
    assert download.get_attribute("download") == "transformer_train-data-4-model-2.json"
    assert download.get_attribute("href").startswith("data:application/json;base64,")

    again = open_page(app_url.rstrip("/") + href, "shared-again", "transformer_train")
    shown = shown_request(again)
    assert (shown["workload"], shown["layers"], shown["mesh"], shown["preset"], shown["tab"]) \
        == ("transformer_train", "2", "data=4,model=2", "fsdp_tp", "Timing")


def test_a_bad_link_shows_its_error_over_the_default_mlp_app(app_url, open_page):
    page = open_page(f"{app_url}?exploration=not*base64!", "bad")
    page.locator(".explorer-page-error").filter(has_text="could not be opened") \
        .wait_for(timeout=WAIT_MS)
    shown = shown_request(page)
    assert shown["error"] == ("⚠ This link's exploration could not be opened: exploration "
                              "link text 'not*base64!' is not base64url. Showing the default "
                              "app.")
    assert shown["header"] == "sharding-explorer · mlp"
    page.wait_for_function("window.__seen.defaultApp", timeout=60_000)   # under the error
    assert (shown["workload"], shown["mesh"]) == ("mlp", "data=2,model=4")
    assert shown["tab"] == "Placement"
