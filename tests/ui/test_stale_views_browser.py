"""Issue 53's stale Placement figures: on a loaded machine, switching the served app from the
mlp to transformer_train showed the new result's status for seconds beside both Placement
heatmaps of the mlp's result (stamped with its id), and then the new tokens heatmap above the
mesh figure still of the mlp's x (test-artifacts/room-load-stale-placement*.png).

The page is watched at every animation frame (what the browser paints, so what a person could
see) from the moment the status names the new result until every view on screen drew it: each
plotly figure on screen must then be stamped with the status's result, or be hidden (a slot of
an earlier result shows "drawing…" in its place, explorer._src.ui.figure.FigureSlot), and so must
each stamped text view (the Placement legend, which says what the heatmaps' colours mean). Before
the fix, both heatmaps of the mlp's result were seen here beside the new status for the first 19
frames, and the mesh figure alone for 12 more.

Nothing here is timed: the test waits on what the page shows, with timeouts generous enough for
a loaded 2-core machine. The load is one CPU burner per core, as in
tests/ui/test_room_under_load_browser.py."""

import sys
from pathlib import Path

import pytest

pytest.importorskip("voila")
pytest.importorskip("playwright.sync_api")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_support"))
from cpu_load import burners  # noqa: E402
from page_state import DRAWN_JS  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]
WAIT_MS = 600_000          # a page load or a compile with every core taken
VIEW = {"width": 1400, "height": 900}
WORKLOAD = "transformer_train"
STATUS = ".explorer-status [data-result]"
# From the first frame the status names another result than `before`, until stopped: every
# frame, each plotly figure on screen whose stamp is not the status's is recorded (the first
# 50), with the frame count. Visible as the trust tests read it (tests/ui/test_trust_browser.py).
WATCH_JS = """before => {
  const w = window.__staleWatch = {frames: 0, stale: [], texts: [], drawing: 0, stop: false,
                                    statuses: []};
  const shown = e => e.offsetParent !== null && getComputedStyle(e).visibility !== 'hidden';
  const frame = () => {
    const s = document.querySelector('.explorer-status [data-result]');
    if (s && s.dataset.result !== before) {
      w.frames++;
      if (!w.statuses.includes(s.dataset.result)) w.statuses.push(s.dataset.result);
      for (const e of document.querySelectorAll('.explorer-app .js-plotly-plot')) {
        const drawn = String(e.layout && e.layout.meta && e.layout.meta.result);
        if (shown(e) && drawn !== s.dataset.result && w.stale.length < 50)
          w.stale.push({frame: w.frames, status: s.dataset.result, drawn,
                        title: String((e.layout.title && e.layout.title.text) || '')
                          .slice(0, 60)});
      }
      for (const e of document.querySelectorAll('.explorer-app .explorer-drawn'))
        if (shown(e) && e.dataset.result !== s.dataset.result && w.texts.length < 50)
          w.texts.push({frame: w.frames, status: s.dataset.result, drawn: e.dataset.result,
                        text: e.textContent.slice(0, 60)});
      if (document.querySelector('.explorer-app .explorer-drawing')) w.drawing++;
    }
    if (!w.stop) requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}"""


@pytest.fixture(scope="module")
def loaded():
    """One CPU-burning process per core, running before the server starts and until the
    module's last test ends; killed and waited for whatever happens."""
    with burners() as procs:
        yield procs


@pytest.fixture(scope="module")
def app_url(loaded, voila_server):
    """The app served while loaded, its kernels without the disk cache: the new workload
    compiles now, under the load, and is not answered by an earlier run's files."""
    with voila_server(env={"EXPLORER_DISK_CACHE": "0"}) as url:
        yield url


def test_no_figure_of_the_earlier_result_beside_the_new_status(loaded, app_url, browser,
                                                               artifacts):
    page = browser.new_page(viewport=VIEW)
    try:
        page.goto(app_url, timeout=WAIT_MS)
        # The mlp's result, its Placement figures drawn for it.
        page.wait_for_function(DRAWN_JS, timeout=WAIT_MS)
        before = page.locator(STATUS).get_attribute("data-result")
        page.evaluate(WATCH_JS, before)
        page.locator(".widget-dropdown:has(label:text-is('workload')) select").first \
            .select_option(WORKLOAD)
        # The new result's status, then every view on screen drawn for it.
        page.wait_for_function(
            "before => { const s = document.querySelector('.explorer-status [data-result]');"
            " return !!s && s.dataset.result !== before && s.textContent.startsWith('●'); }",
            arg=before, timeout=WAIT_MS)
        # For a reader: what the page shows as the new status lands (under load, most often
        # the figures' "drawing…").
        page.screenshot(path=str(artifacts / "stale-views-new-status.png"))
        page.wait_for_function(DRAWN_JS, timeout=WAIT_MS)
        watched = page.evaluate("() => { const w = window.__staleWatch; w.stop = true;"
                                " return w; }")
        page.screenshot(path=str(artifacts / "stale-views-drawn.png"))
        print("frames watched:", watched["frames"], "statuses:", watched["statuses"],
              "frames with a figure drawing:", watched["drawing"],
              "stale figures seen:", watched["stale"][:10],
              "stale texts seen:", watched["texts"][:10])
        # The watch ran while the new status was shown (a state, whatever the frame rate).
        assert watched["frames"] > 0
        assert not watched["stale"], (
            f"figures of an earlier result on screen beside the status of result "
            f"{watched['stale'][0]['status']}: {watched['stale']}")
        # Nor the text that says what their colours mean (the Placement legend).
        assert not watched["texts"], (
            f"text views of an earlier result on screen beside the status of result "
            f"{watched['texts'][0]['status']}: {watched['texts']}")
        assert all(p.poll() is None for p in loaded), "a burner stopped before the test ended"
    finally:
        page.close()
