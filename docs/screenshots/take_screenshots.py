"""Retake the app's screenshots in docs/screenshots/: every tab on a small workload, on a large
one, and the app on a Flax NNX model.

Run by hand:  PYTHONPATH=. .venv/bin/python docs/screenshots/take_screenshots.py \
                  [small|large|flax|hlo|suggest|gpu|tpu|share]

Each scenario is a one-cell notebook served by Voila and driven in headless Chromium (Debian's
/usr/bin/chromium, through Playwright), as tests/ui/test_app_browser.py does; `share` opens the
Voila app itself (notebooks/app.ipynb) by a link, as tests/ui/test_share_browser.py does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

from explorer import AppState, Exploration
from explorer._src.ui.editors import css_name
from explorer._src.ui.serve import free_port, one_cell_notebook, voila_command

HERE = Path(__file__).resolve().parent
CHROMIUM = os.environ.get("EXPLORER_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]

SMALL = """\
from explorer.ui import Explorer
# w1 split over data on the dimension the matmul contracts: an all-gather, then Megatron's
# all-reduce over model.
Explorer(workload="mlp", mesh="data=2,model=4", target="h100-8",
         specs={"x": "data,None", "w1": "data,model", "w2": "model,None"})
"""

LARGE = """\
from explorer.ui import Explorer
Explorer(workload="transformer_train", mesh="data=4,model=4", preset="fsdp_tp",
         params={"layers": 12, "d_model": 256, "d_ff": 1024, "seq": 128}, target="h100-8x2")
"""

FLAX = """\
import jax
from flax import nnx
from explorer import TensorSpec as T
from explorer.ui import explore_module


class Block(nnx.Module):
    def __init__(self, d, f, *, rngs):
        self.norm = nnx.LayerNorm(d, rngs=rngs)
        self.up = nnx.Linear(d, f, rngs=rngs, kernel_init=nnx.with_partitioning(
            nnx.initializers.lecun_normal(), ("embed", "mlp")))
        self.down = nnx.Linear(f, d, rngs=rngs, kernel_init=nnx.with_partitioning(
            nnx.initializers.lecun_normal(), ("mlp", "embed")))

    def __call__(self, x):
        return x + self.down(jax.nn.gelu(self.up(self.norm(x))))


class Model(nnx.Module):
    def __init__(self, layers, d, f, *, rngs):
        self.layers = nnx.List([Block(d, f, rngs=rngs) for _ in range(layers)])

    def __call__(self, x):
        for block in self.layers:
            x = block(x)
        return x


with nnx.use_eager_sharding(False):
    model = nnx.eval_shape(lambda: Model(12, 256, 1024, rngs=nnx.Rngs(0)))

explore_module(model, T("x", (64, 256), spec="data,None"), mesh="data=2,model=4",
               rules="embed=data,mlp=model", target="h100-8")
"""

# The Suggest tab on the small workload at a smaller size (every compile of its search a
# fraction of a second), searched on its own program as a workshop participant would.
SUGGEST = """\
from explorer.ui import Explorer
Explorer(workload="mlp", mesh="data=2,model=4", target="h100-8",
         params={"batch": 256, "d_model": 256, "d_ff": 1024},
         specs={"x": "data,None", "w1": "None,model", "w2": "model,None"})
"""

HEIGHTS = {"Collectives": 1750, "Timing": 1600, "HLO": 1300}
TABS = ["Placement", "Collectives", "Memory", "Timing", "HLO", "Compare"]
MARKERS = {
    "Placement": ".explorer-placement .explorer-legend",
    "Collectives": ".explorer-collectives .explorer-table",
    "Memory": ".explorer-memory .gtitle",
    "Timing": ".explorer-timing-body",
    "HLO": ".explorer-graph .gtitle",
    "Compare": ".explorer-compare",
    "Suggest": ".explorer-suggest",
}


def serve(nb: Path | None):
    """Voila on `nb` (the app notebook when None) on a free port; the process and its URL."""
    port = free_port()
    proc = subprocess.Popen(voila_command(port, notebook=nb), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    for _ in range(480):
        try:
            urllib.request.urlopen(url + "voila/static/", timeout=2)
            break
        except urllib.error.HTTPError:
            break
        except OSError:
            time.sleep(0.5)
    return proc, url


def shoot(page, name: str, full_page: bool = True) -> None:
    time.sleep(1.5)                      # plotly's transitions
    page.screenshot(path=str(HERE / f"{name}.png"), full_page=full_page)
    print("wrote", HERE / f"{name}.png", flush=True)


def pick_collective(page, index: int, wait_offers: bool) -> None:
    page.locator(".explorer-collectives select").first.select_option(index=index + 1)
    page.locator(".explorer-why").first.wait_for(timeout=60_000)
    if wait_offers:
        page.wait_for_function(
            "() => [...document.querySelectorAll('.explorer-offers')]"
            ".some(e => e.textContent.includes('confirmed') || e.textContent.includes('none'))",
            timeout=600_000)


def scenario(name: str, source: str, prefix: str, tabs, collective: int | None,
             open_section: str | None = None, compare_edit: tuple[str, int] | None = None,
             placement: str | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = serve(one_cell_notebook(source, Path(tmp) / f"{name}.ipynb"))
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(url, timeout=300_000)
                # "● compiled in", or "● cached: answered in" where an earlier run left it on disk
                page.wait_for_selector(".explorer-status:has-text('●')", timeout=300_000)
                if open_section:
                    for title in open_section.split(" / "):
                        page.locator(".explorer-specs .lm-AccordionPanel-title, "
                                     ".explorer-specs .jupyter-widget-Collapse-header, "
                                     ".explorer-specs .widget-accordion .p-Collapse-header",
                                     has_text=title).first.click()
                        time.sleep(1)
                if placement:
                    page.locator(".explorer-placement select").first.select_option(
                        label=placement)
                for tab in tabs:
                    # Tall enough for the tab's content (the app scrolls inside its pane).
                    page.set_viewport_size({"width": 1400, "height": HEIGHTS.get(tab, 1000)})
                    page.get_by_text(tab, exact=True).click()
                    page.locator(MARKERS[tab]).first.wait_for(state="visible", timeout=120_000)
                    if tab == "Timing":           # the trace and the roofline both drawn
                        page.locator(".explorer-timing .gtitle", has_text="roofline").first \
                            .wait_for(timeout=60_000)
                    if tab == "Collectives" and collective is not None:
                        pick_collective(page, collective, wait_offers=True)
                    if tab == "Compare":
                        page.locator(".explorer-compare-pin").click()
                        page.locator(".explorer-compare-metrics").wait_for(timeout=60_000)
                        if compare_edit:      # B: one tag removed from a picker
                            tensor, dim = compare_edit
                            page.locator(f".explorer-spec-{css_name(tensor)} "
                                         f".explorer-dim-{dim} .jupyter-widget-tag-close") \
                                .first.click()
                            page.locator(".explorer-compare").filter(
                                has_text=f"spec {tensor}:").first.wait_for(timeout=120_000)
                            # The click scrolled the sidebar's section: back to the top.
                            page.get_by_text("Compare", exact=True).scroll_into_view_if_needed()
                    shoot(page, f"{prefix}{tab.lower()}")
                browser.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def suggest_scenario() -> None:
    """The Suggest tab after a finished search, at desktop size (1440x900) and in full."""
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = serve(one_cell_notebook(SUGGEST, Path(tmp) / "suggest.ipynb"))
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                page.goto(url, timeout=300_000)
                # "compiled", or "cached" where an earlier run left the result on disk
                page.wait_for_selector(".explorer-status:has-text(' devices ')",
                                       timeout=300_000)
                page.get_by_text("Suggest", exact=True).click()
                page.locator(".explorer-suggest").first.wait_for(state="visible")
                page.locator(".explorer-suggest button", has_text="Start search").click()
                page.locator(".explorer-suggest-progress", has_text="complete:").wait_for(
                    timeout=600_000)
                page.locator(".explorer-suggest .gtitle").first.wait_for(timeout=60_000)
                shoot(page, "suggest-desktop")
                page.set_viewport_size({"width": 1440, "height": 2000})
                shoot(page, "suggest")
                browser.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)


TRAIN_UNROLLED = LARGE.replace('"seq": 128}', '"seq": 128, "scan_layers": "false"}')

# Compiled for the target by its own compiler, no device present: a bf16 train step of four
# layers on one H100 node (XLA's GPU compiler, the gpu extra) and on a v5e slice (libtpu).
ON_TARGET = """\
from explorer.ui import Explorer
Explorer(workload="transformer_train", mesh="data=2,model=4", preset="fsdp_tp",
         params={"layers": 4, "d_model": 256, "d_ff": 1024, "seq": 128,
                 "dtype": "bfloat16"}, target="TARGET")
"""


# Issue 21's evidence at desktop size, on the Voila app opened by a link to the 12-layer train
# step (LARGE's request) on its Memory tab: memory over the program, Copy as code, Share.
SHARED = Exploration(mesh="data=4,model=4", workload="transformer_train", preset="fsdp_tp",
                     params={"layers": 12, "d_model": 256, "d_ff": 1024, "seq": 128},
                     target="h100-8x2", app=AppState(tab="Memory"))


def share_scenario() -> None:
    """The memory curve, the Copy as code view and the Share section, each as a 1600x1000
    window shows it."""
    proc, url = serve(None)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(f"{url}?exploration={SHARED.to_link()}", timeout=600_000)
            page.wait_for_selector(".explorer-status:has-text('●')", timeout=600_000)
            curve = page.locator(".explorer-memory .js-plotly-plot").filter(
                has=page.locator(".gtitle", has_text="memory over the program"))
            curve.wait_for(state="visible", timeout=120_000)
            curve.evaluate("e => { e.scrollIntoView({block: 'start'}); window.scrollBy(0, -20); }")
            shoot(page, "memory-curve", full_page=False)
            page.get_by_text("HLO", exact=True).click()
            page.locator(MARKERS["HLO"]).first.wait_for(state="visible", timeout=120_000)
            page.locator(".explorer-app button", has_text="Copy as code").click()
            code = page.locator(".explorer-code textarea")
            page.wait_for_function("() => document.querySelector('.explorer-code textarea')"
                                   ".value.includes('jax.make_mesh')", timeout=60_000)
            code.scroll_into_view_if_needed()
            shoot(page, "copy-as-code", full_page=False)
            page.locator(".explorer-share a.explorer-share-link").wait_for(timeout=60_000)
            page.locator(".explorer-share").evaluate("e => e.scrollIntoView({block: 'center'})")
            shoot(page, "share", full_page=False)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main(which: list[str]) -> None:
    if "small" in which:
        scenario("small", SMALL, "", TABS, collective=0, compare_edit=("w1", 0))
    if "large" in which:
        # Every tab but HLO (the "hlo" scenario draws the unrolled step's); Suggest before a
        # search (a search of 12 layers takes minutes: the "suggest" scenario runs one).
        scenario("large", LARGE, "large-", ["Placement", "Collectives", "Memory", "Timing",
                                            "Compare", "Suggest"],
                 collective=0, open_section="parameters", compare_edit=("layers.w1", 2),
                 placement="input: layers.w1 float32[12,256,1024]")
    if "suggest" in which:
        suggest_scenario()
    if "hlo" in which:        # the HLO tab only: small, and a 12-layer train step (one node
        scenario("hlo", SMALL, "", ["HLO"], collective=None)          # per layer by default)
        scenario("hlo-large", TRAIN_UNROLLED, "large-", ["HLO"], collective=None)
    if "gpu" in which:
        scenario("gpu", ON_TARGET.replace("TARGET", "h100-8"), "gpu-",
                 ["Collectives", "Memory"], collective=0)
    if "tpu" in which:
        scenario("tpu", ON_TARGET.replace("TARGET", "tpu-v5e-2x4"), "tpu-",
                 ["Collectives", "Memory"], collective=0)
    if "share" in which:
        share_scenario()
    if "flax" in which:
        scenario("flax", FLAX, "flax-", ["Collectives", "Memory"], collective=0,
                 open_section="parameters / layers.3")


if __name__ == "__main__":
    main(sys.argv[1:] or ["small", "large", "flax", "hlo", "suggest", "share"])
