"""End to end in JupyterLab: a notebook whose cell defines the user's own Flax model and opens
the app on it, run in a real JupyterLab server on a loopback port and shown in headless
Chromium. The first Placement heatmap must be drawn, with its caption, on the model's data."""

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

pytest.importorskip("jupyterlab")
pytest.importorskip("flax")
playwright = pytest.importorskip("playwright.sync_api")

from explorer._src.ui.serve import free_port, stop_server, wait_until_serving  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# The model is defined in the cell, as a user writes one: it reaches the compile worker by
# value, with its cell as its source.
CELL = '''\
import jax
from flax import nnx
from explorer import TensorSpec as T
from explorer.ui import explore_module

class Block(nnx.Module):
    def __init__(self, d, f, rngs):
        self.up = nnx.Linear(d, f, rngs=rngs, kernel_init=nnx.with_partitioning(
            nnx.initializers.lecun_normal(), ("embed", "mlp")))
        self.down = nnx.Linear(f, d, rngs=rngs, kernel_init=nnx.with_partitioning(
            nnx.initializers.lecun_normal(), ("model", None)))

    def __call__(self, x):
        return self.down(jax.nn.relu(self.up(x)))

with nnx.use_eager_sharding(False):
    model = nnx.eval_shape(lambda: nnx.Sequential(Block(64, 256, nnx.Rngs(0)),
                                                  Block(64, 256, nnx.Rngs(1))))
explore_module(model, T("x", (32, 64), spec="data,None"), mesh="data=2,model=4",
               rules="mlp=model")
'''

# What the page's plotly figures hold: their traces and titles.
FIGURES_JS = """() => [...document.querySelectorAll('.explorer-app .js-plotly-plot')]
    .filter(d => d.offsetParent !== null)
    .map(d => ({traces: (d.data || []).length,
                title: (d.layout && d.layout.title && d.layout.title.text) || ''}))"""


def wait_for_idle_kernel(url: str, timeout: float = 300) -> None:
    """Until the notebook's kernel has started and is idle (Jupyter's REST API says so)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(url + "api/kernels", timeout=10) as answer:
            kernels = json.load(answer)
        if kernels and all(k["execution_state"] == "idle" for k in kernels):
            return
        time.sleep(0.5)
    raise AssertionError(f"no idle kernel after {timeout} s: {kernels}")


@pytest.fixture(scope="module")
def lab(tmp_path_factory, artifacts):
    root = tmp_path_factory.mktemp("lab")
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "source": CELL, "outputs": [],
                           "execution_count": None}],
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                            "language": "python"}},
                "nbformat": 4, "nbformat_minor": 5}
    (root / "model.ipynb").write_text(json.dumps(notebook))
    port = free_port()
    log = open(artifacts / f"jupyterlab-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
         "--ip=127.0.0.1", "--ServerApp.token=", "--ServerApp.password=",
         f"--ServerApp.root_dir={root}", "--allow-root",
         # A workspace of its own: no layout restored from an earlier JupyterLab session.
         f"--LabApp.workspaces_dir={tmp_path_factory.mktemp('workspaces')}",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class="
         "jupyterlab.NeverCheckForUpdate"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_until_serving(url + "api", proc)
        yield url
    finally:
        stop_server(proc, timeout=30)
        log.close()


def test_a_users_flax_model_in_jupyterlab_draws_its_first_heatmap(chromium, lab, artifacts):
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(**chromium)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(lab + "lab/tree/model.ipynb", timeout=300_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell .jp-InputArea-editor",
                                   timeout=300_000)
            wait_for_idle_kernel(lab)
            # Run the cell as a user does: select it, then the toolbar's run button.
            page.click(".jp-Cell .jp-InputPrompt")
            page.click("jp-button[data-command='notebook:run-cell-and-select-next'], "
                       "button[data-command='notebook:run-cell-and-select-next']")
            try:
                page.wait_for_selector(".explorer-status:has-text('●')", timeout=600_000)
                # The first heatmap: drawn (a trace) with its caption, on the model's data x.
                page.wait_for_function(
                    f"() => ({FIGURES_JS})().some(f => f.traces > 0 && "
                    "f.title.startsWith('x '))", timeout=120_000)
            finally:
                page.screenshot(path=str(artifacts / "jupyterlab-first-heatmap.png"))
            figures = page.evaluate(FIGURES_JS)
        finally:
            browser.close()
    heatmap = next(f for f in figures if f["title"].startswith("x "))
    # x [32, 64] split over data=2: each device holds a [16, 64] block, on 4 devices each.
    assert "spec data,None" in heatmap["title"] and "shard [16,64]" in heatmap["title"]
    assert all(f["traces"] > 0 and f["title"] for f in figures)
