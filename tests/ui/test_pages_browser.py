"""Under load (issue 23), in Chromium on a real Voila server: eight pages at once, each editing
differently, each shows its own results; a page whose kernel is killed in the middle of a compile
says so in words, and a reload brings the app back.

Slow on 2 cores (eight kernels, each with its compile workers): the waits are generous, and no
time is asserted.
"""

import time
from pathlib import Path

import pytest

pytest.importorskip("voila")
playwright = pytest.importorskip("playwright.sync_api")
psutil = pytest.importorskip("psutil")

from explorer._src.ui.kernel_watch import BANNER_CLASS, KERNEL_STOPPED  # noqa: E402
from explorer._src.ui.serve import one_cell_notebook  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SUPPORT = str(Path(__file__).resolve().parents[1] / "_support")
WAIT_MS = 600_000          # per wait: eight kernels compiling at once on 2 cores

# What a page shows, read in the page: the status line and its result, the Collectives tab's
# table (each row's kind, axes with group size, per-device shape and bytes; readable while the
# tab is hidden, as the app keeps it current) and the result it was drawn for, and the
# Placement tab's heatmap title (the picked tensor, x by default) and its result.
PAGE_STATE_JS = """() => {
  const status = document.querySelector('.explorer-status [data-result]');
  const table = document.querySelector('.explorer-collectives .explorer-drawn');
  const plot = document.querySelector('.explorer-placement .js-plotly-plot');
  const rows = table ? [...table.querySelectorAll('tr[data-kind]')].map(
      tr => [tr.dataset.kind, ...[...tr.cells].slice(2, 5).map(td => td.textContent)]) : null;
  return {
    status: status ? status.textContent : '',
    result: status ? status.dataset.result : null,
    rows: rows,
    table_result: table ? table.dataset.result : null,
    heatmap: plot && plot.layout && plot.layout.title ? plot.layout.title.text : null,
    heatmap_result: plot && plot.layout && plot.layout.meta ? String(plot.layout.meta.result)
                                                           : null,
  };
}"""


def page_state(page) -> dict:
    return page.evaluate(PAGE_STATE_JS)


def wait_for_state(page, rows: list[list[str]], heatmap: str) -> dict:
    """Wait until the page shows a result ('●') whose collectives table has `rows` and whose
    heatmap is titled `heatmap`, both drawn for the result the status line shows. A page that
    never gets there fails with what it shows instead."""
    try:
        page.wait_for_function(
            f"([rows, heatmap]) => {{ const s = ({PAGE_STATE_JS})();"
            " return s.status.startsWith('●') && s.table_result === s.result"
            " && s.heatmap_result === s.result && s.heatmap === heatmap"
            " && JSON.stringify(s.rows) === JSON.stringify(rows); }",
            arg=[rows, heatmap], timeout=WAIT_MS)
    except playwright.TimeoutError:
        pytest.fail(f"the page shows {page_state(page)}, not rows {rows} and heatmap {heatmap!r}")
    return page_state(page)


def mesh_size(page, row: int):
    return page.locator(".explorer-mesh-axis").nth(row).locator("input").nth(1)


def set_mesh_size(page, row: int, size: int) -> None:
    box = mesh_size(page, row)
    box.fill(str(size))
    box.press("Enter")


def x_title(spec: str, shard: str, replicas: int) -> str:
    """The heatmap title of the app's x (256 x 1024 float32) under `spec`."""
    return f"x float32[256,1024]  spec {spec}  shard [{shard}] ×{replicas} replicas"


# The app notebook: the mlp (x 256x1024, w1 1024x4096, w2 4096x1024, float32) on data=2,model=4,
# x "data,None", w1 "None,model", w2 "model,None". Eight pages, eight edits, each result worked
# out by hand; every mesh keeps 8 devices, so that all stay priced on h100-8 (the same rows
# whether the GPU compiler or the CPU's compiles them).
# Megatron: h = x @ w1 is split over model by columns, h @ w2 leaves each device a partial sum
# of its (256/data) x 1024 output rows, all-reduced over model: (256/data) * 1024 * 4 B.
EIGHT_PAGES = [
    # 0: untouched: 128 x 1024 floats = 512 KiB all-reduced over the 4 model devices.
    ([], [["all-reduce", "model (4)", "float32[128,1024]", "512.0 KiB"]],
     x_title("data,None", "128,1024", 4)),
    # 1: both weights replicated: each device computes its rows alone.
    ([("pick", "w1", 1, []), ("pick", "w2", 0, [])], [], x_title("data,None", "128,1024", 4)),
    # 2: and w1's rows over model: partial sums of h (128 x 4096 floats, 2 MiB).
    ([("pick", "w1", 1, []), ("pick", "w2", 0, []), ("pick", "w1", 0, ["model"])],
     [["all-reduce", "model (4)", "float32[128,4096]", "2.0 MiB"]],
     x_title("data,None", "128,1024", 4)),
    # 3: x whole on every device: the partial sums are of all 256 rows (1 MiB).
    ([("pick", "x", 0, [])], [["all-reduce", "model (4)", "float32[256,1024]", "1.0 MiB"]],
     x_title("replicated", "256,1024", 8)),
    # 4: data=4,model=2 (model first: the mesh passes through 4 devices, never 16): 64 rows
    # a device, all-reduced over 2 (256 KiB).
    ([("mesh", 1, 2), ("mesh", 0, 4)],
     [["all-reduce", "model (2)", "float32[64,1024]", "256.0 KiB"]],
     x_title("data,None", "64,1024", 2)),
    # 5: data=8,model=1: a model axis of one device splits nothing: no collective.
    ([("mesh", 1, 1), ("mesh", 0, 8)], [], x_title("data,None", "32,1024", 1)),
    # 6: data=1,model=8: all 256 rows on every device, all-reduced over 8 (1 MiB); x keeps the
    # spec as written, over a data axis of one device, so it is whole on each of the 8.
    ([("mesh", 0, 1), ("mesh", 1, 8)],
     [["all-reduce", "model (8)", "float32[256,1024]", "1.0 MiB"]],
     x_title("data,None", "256,1024", 8)),
    # 7: everything replicated: no collective, x whole on all 8.
    ([("pick", "x", 0, []), ("pick", "w1", 1, []), ("pick", "w2", 0, [])], [],
     x_title("replicated", "256,1024", 8)),
]


def edit(page, pick, steps) -> None:
    for step in steps:
        if step[0] == "pick":
            pick(page, *step[1:])
        else:
            set_mesh_size(page, *step[1:])


def test_eight_concurrent_pages_each_editing_each_show_their_own_results(
        chromium, voila_server, pick, artifacts):
    with voila_server() as url, playwright.sync_playwright() as p:
        browser = p.chromium.launch(**chromium)
        try:
            contexts = [browser.new_context(viewport={"width": 1400, "height": 1000})
                        for _ in EIGHT_PAGES]
            pages = [c.new_page() for c in contexts]
            for page in pages:                        # all eight load before any is edited
                page.goto(url, wait_until="commit", timeout=WAIT_MS)
            for i, page in enumerate(pages):
                try:
                    page.wait_for_selector(".explorer-status:has-text('compiled'), "
                                           ".explorer-status:has-text('cached')",
                                           timeout=WAIT_MS)
                except playwright.TimeoutError:
                    # What each page shows, kept, so that a page that never opens says why.
                    for k, other in enumerate(pages):
                        other.screenshot(path=str(artifacts / f"pages-opening-{k}.png"),
                                         full_page=True)
                    status = page.locator(".explorer-status").all_inner_texts()
                    raise AssertionError(f"page {i} never showed a result; its status: "
                                         f"{status}; screenshots pages-opening-*.png") from None
            for page, (steps, _, _) in zip(pages, EIGHT_PAGES, strict=True):
                edit(page, pick, steps)
            for i, (page, (_, rows, heatmap)) in enumerate(zip(pages, EIGHT_PAGES, strict=True)):
                try:
                    wait_for_state(page, rows, heatmap)
                finally:
                    page.screenshot(path=str(artifacts / f"pages-{i}.png"), full_page=True)
            # Once all are done, each still shows its own (none was redrawn with another's).
            for i, (page, (_, rows, heatmap)) in enumerate(zip(pages, EIGHT_PAGES, strict=True)):
                state = page_state(page)
                assert (state["rows"], state["heatmap"]) == (rows, heatmap), f"page {i}"
                assert state["status"].startswith("●"), f"page {i}: {state['status']}"
        finally:
            browser.close()


# A user's layer on the app, with the kernel watch the app's pages carry. A compile on 4
# devices waits (in the compile worker, which answers the tests' Sleep through its test hook,
# tests/_support/worker_faults.py) while the file HOLD exists, so that the test can kill the
# kernel in the middle of one; the 8-device compiles the page starts with never wait.
WATCHED = """\
import os
import sys

sys.path.insert(0, {support!r})
from explorer import TensorSpec as T
from explorer._src.compile.pool import WorkerPool
from explorer._src.compile.worker import HOOK_VARIABLE
from explorer.ui import explore
from explorer._src.ui.kernel_watch import watch_kernel
from worker_faults import Sleep

os.environ[HOOK_VARIABLE] = "worker_faults"
HOLD = {hold!r}

# The function is traced in the kernel; what is held is the 4-device worker, kept busy while
# HOLD exists, as a long compile keeps it.
_run = WorkerPool.run

def held(self, key, message, timeout=None):
    while key.devices == 4 and os.path.exists(HOLD):
        _run(self, key, Sleep(0.05), timeout)
    return _run(self, key, message, timeout)

WorkerPool.run = held

def layer(x, w):
    return x @ w

watch_kernel()
explore(layer, T("x", (64, 32), spec="data,None"), T("w", (32, 16), spec="None,model"),
        mesh="data=2,model=4")
"""


def kernel_process(page) -> "psutil.Process":
    """The kernel process of `page`: the ipykernel whose connection file names the page's
    kernel id (Voila writes it into the page's config)."""
    kernel_id = page.evaluate(
        "() => JSON.parse(document.getElementById('jupyter-config-data').textContent)"
        ".kernelId")
    found = [q for q in psutil.process_iter(["cmdline"])
             if f"kernel-{kernel_id}.json" in " ".join(q.info["cmdline"] or [])]
    assert len(found) == 1, f"kernel {kernel_id}: {found}"
    return found[0]


def compile_workers(kernel, devices: int) -> list:
    """The processes under `kernel` that serve `devices` devices (the worker and its reaper)."""
    found = []
    for q in kernel.children(recursive=True):
        try:
            cmd = q.cmdline()
        except psutil.NoSuchProcess:
            continue
        if "explorer._src.compile.worker" in cmd and cmd[-1] == str(devices):
            found.append(q)
    return found


def wait_for_workers(kernel, devices: int) -> list:
    """The processes serving `devices` devices under `kernel`, once there are some."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while not (found := compile_workers(kernel, devices)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert found, f"no compile worker for {devices} devices started under the kernel"
    return found


def test_a_kernel_killed_mid_compile_is_said_in_the_page_and_a_reload_brings_the_app_back(
        chromium, voila_server, pick, artifacts, tmp_path):
    hold = tmp_path / "hold"
    notebook = one_cell_notebook(WATCHED.format(hold=str(hold), support=SUPPORT),
                                 tmp_path / "watched.ipynb")
    with voila_server(notebook) as url, playwright.sync_playwright() as p:
        browser = p.chromium.launch(**chromium)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(url, timeout=WAIT_MS)
            wait_for_state(page, [], "x float32[64,32]  spec data,None  shard [32,32] ×4 "
                                     "replicas")
            hold.touch()
            set_mesh_size(page, 1, 2)          # data=2,model=2: a 4-device compile, held
            page.locator(".explorer-status", has_text="compiling").wait_for(timeout=WAIT_MS)
            kernel = kernel_process(page)
            workers = wait_for_workers(kernel, 4)
            assert page.locator(f".{BANNER_CLASS}").count() == 0
            kernel.kill()                      # as the out-of-memory killer would
            banner = page.locator(f".{BANNER_CLASS}")
            banner.wait_for(timeout=WAIT_MS)
            assert banner.inner_text().startswith(KERNEL_STOPPED)
            page.screenshot(path=str(artifacts / "pages-kernel-killed.png"), full_page=True)
            # The killed kernel's compile workers end with it (their reaper sees it go).
            _, alive = psutil.wait_procs(workers, timeout=WAIT_MS / 1000)
            assert alive == [], "the killed kernel's compile workers did not end"
            hold.unlink()
            page.reload(timeout=WAIT_MS)
            wait_for_state(page, [], "x float32[64,32]  spec data,None  shard [32,32] ×4 "
                                     "replicas")
            assert page.locator(f".{BANNER_CLASS}").count() == 0
            # The app answers edits again: x's columns and w's rows over model leave each
            # device a partial sum of its 32 x 16 output rows, all-reduced over the 4 model
            # devices: 32 * 16 * 4 B = 2 KiB.
            pick(page, "w", 1, [])
            pick(page, "w", 0, ["model"])
            pick(page, "x", 1, ["model"])
            wait_for_state(page, [["all-reduce", "model (4)", "float32[32,16]", "2.0 KiB"]],
                           "x float32[64,32]  spec data,model  shard [32,8] ×1 replicas")
            page.screenshot(path=str(artifacts / "pages-after-reload.png"), full_page=True)
        finally:
            hold.unlink(missing_ok=True)
            browser.close()
