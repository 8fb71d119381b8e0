"""Benchmark: a page load of the Voila app, to its first heatmap, in headless Chromium.

Run by hand:  .venv/bin/python benchmarks/bench_page_load.py [--loads 3] [--variants ...]

For each variant it starts a server on a free loopback port, opens the app in a fresh browser
context per load (no HTTP cache: a first visit) and times, inside the page with
performance.now() from the navigation's start:

- `html`: the page's HTML received (Voila sends it once the notebook has executed in a kernel,
  so this includes the kernel's start, its imports and the first result);
- `widgets`: the app's widgets on the page (the widget manager has fetched every widget's state
  from the kernel over the websocket and rendered the app);
- `heatmap`: the placement heatmap drawn (the first `.gtitle` inside the Placement tab's plotly
  figure), the number the target is about.

It also counts the bytes the page received over the kernel's websocket and the JavaScript files
it fetched. The variants add the cuts one at a time (docs/performance.md, "First result on a
page load"):

- `stock`: Voila on notebooks/app.ipynb as before this work: each figure widget carries
  plotly.js (`explorer._src.ui.figure` patched back to plotly's own FigureWidget in a copy of the
  notebook), every JupyterLab extension is loaded, no persistent report cache;
- `cache`: + the report cache on disk, filled beforehand by running the app notebook once;
- `js`: + plotly.js sent once per page (explorer._src.ui.figure), and no jupyterlab-plotly
  extension;
- `preheat`: + one preheated kernel (what `sharding-explorer app` runs:
  explorer._src.ui.serve.voila_command); each load waits until Voila has refilled its pool; the
  figures' code is the app's plotly bundle (plotly's widget code with a plotly.js of the trace
  types the app draws, explorer/_src/ui/static/plotly_widget.js);
- `preheat-plotly`: `preheat` with plotly's own widget bundle (every trace type, 5 MB) in place
  of the app's (`EXPLORER_PLOTLY_BUNDLE=plotly`), as `preheat` was before that bundle;
- `binder`: Voila as Binder's server extension serves it: a Jupyter server with Voila's server
  extension (`/voila/render/notebooks/app.ipynb`, no preheated kernel: the extension has none),
  with the report cache and binder/voila.json, as binder/postBuild leaves them;
- `binder-proxy`: the same Jupyter server, with binder/jupyter_server_config.py, and the page at
  `/explorer-app/`: jupyter-server-proxy starts the standalone Voila of `preheat` on the first
  request and forwards to it (the Binder badge's link). That first visit, which starts Voila
  and waits for its preheated kernel, is timed on its own (as a Binder user's first visit is)
  and printed in a separate row; the loads after it are timed as the other variants' are.

- `app`: `sharding-explorer app` itself (what `preheat` serves, started by the CLI): its first
  load is made the moment the CLI prints the URL (once the port answers, should it print the URL
  sooner) and printed in its own row, "first load after start"; the loads after it are timed
  as the other variants' are.

With `--gap S`, each variant's loads come S seconds apart (S seconds after the previous load's
heatmap), without waiting for the kernel pool to be refilled: a user reloading the page, or a
room's first visits coming together (docs/performance.md, "Reloads in quick succession").

Prints markdown tables; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from playwright.sync_api import sync_playwright  # noqa: E402

from explorer._src.ui.serve import (  # noqa: E402
    VOILA_LIMITS,
    VOILA_PREHEAT,
    free_port,
    voila_command,
    wait_until_serving,
)

CHROMIUM = os.environ.get("EXPLORER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
APP = ROOT / "notebooks" / "app.ipynb"
VARIANTS = ("stock", "cache", "js", "preheat", "preheat-plotly", "binder", "binder-proxy",
            "app")
# Variants whose Voila keeps a preheated kernel: a load waits until it is there again.
PREHEATED = ("preheat", "preheat-plotly", "binder-proxy", "app")
URL_LINE = "sharding-explorer app: "       # how `sharding-explorer app` prints its address
# The kernels such a pool keeps (explorer._src.ui.serve's --pool_size).
POOL_SIZE = int(next(a.split("=", 1)[1] for a in VOILA_PREHEAT if a.startswith("--pool_size=")))

# Marks taken in the page: the first moment each condition holds, in ms since navigation start.
MARKS_JS = """
window.__marks = {};
const mark = (k) => { if (!(k in window.__marks)) window.__marks[k] = performance.now(); };
const look = () => {
  if (document.querySelector('.explorer-app')) mark('widgets');
  const plot = document.querySelector('.explorer-placement .js-plotly-plot');
  if (plot && plot.querySelector('.gtitle')) mark('heatmap');
};
new MutationObserver(look).observe(document, {subtree: true, childList: true});
"""

# A first cell for the `stock` variant's copy of the app notebook: the figures as plotly ships
# them, each carrying its own copy of plotly.js.
STOCK_FIGURES = """import plotly.graph_objects as _go
import explorer._src.ui.graph as _graph
import explorer._src.ui.views as _views
_views.FigureWidget = _graph.FigureWidget = _go.FigureWidget"""


def wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float = 240) -> None:
    try:
        wait_until_serving(url, proc, timeout)
    except RuntimeError as e:
        raise RuntimeError(f"the server did not start ({e}); see {log}") from None


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a process and all its descendants, from /proc."""
    total, todo, tick = 0.0, [pid], os.sysconf("SC_CLK_TCK")
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text()
                         .split()]
        except (OSError, IndexError, ValueError):
            continue              # gone meanwhile
    return total


def pool_kernels_waiting(log: Path) -> int:
    """Preheated kernels waiting in the pool, from Voila's log: POOL_SIZE when it last said
    the pool was filled, less the kernels pages took since (Voila logs the pool as filled when
    its kernels have started, before they have run the notebook)."""
    text = log.read_text(errors="replace")
    filled = text.rfind("is filled with")
    if filled < 0:
        return 0
    return POOL_SIZE - text.count("Using pre-heated kernel", filled)


def fill_cache(folder: Path, env: dict) -> None:
    """Run the app notebook once with the report cache on, as binder/postBuild does."""
    code = ("import nbformat; from nbclient import NotebookClient; "
            f"nb = nbformat.read({str(APP)!r}, as_version=4); "
            "NotebookClient(nb, timeout=600, kernel_name='python3').execute()")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Server:
    """A server for one variant; `url` is the app's page."""

    def __init__(self, variant: str, work: Path):
        self.variant = variant
        self.log = work / f"{variant}.log"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
        if variant == "stock":
            env["EXPLORER_DISK_CACHE"] = "0"
        else:
            cache = work / "report-cache"
            env.update(EXPLORER_DISK_CACHE="1", EXPLORER_CACHE_DIR=str(cache))
            if not cache.exists():
                fill_cache(cache, env)
        port = free_port()
        if variant == "app":
            self._start_app(port, env)
            return
        if variant in ("stock", "cache"):
            # Voila as it was served before: every lab extension, figures as plotly ships them.
            cmd = [sys.executable, "-m", "voila", str(self._stock_copy(work)), "--no-browser",
                   f"--port={port}", "--Voila.ip=127.0.0.1", *VOILA_LIMITS]
            self.url = f"http://127.0.0.1:{port}/"
        elif variant == "js":
            cmd = voila_command(port, preheat=False)
            self.url = f"http://127.0.0.1:{port}/"
        elif variant in ("preheat", "preheat-plotly"):
            env.pop("EXPLORER_PLOTLY_BUNDLE", None)
            if variant == "preheat-plotly":
                env["EXPLORER_PLOTLY_BUNDLE"] = "plotly"
            cmd = voila_command(port, preheat=True)
            self.url = f"http://127.0.0.1:{port}/"
        else:
            # binder, binder-proxy: the Jupyter server with the Jupyter settings binder/postBuild
            # leaves in ~/.jupyter (Voila's server extension, and the proxy to the standalone
            # Voila at explorer-app/).
            config = work / "jupyter-config"
            config.mkdir(exist_ok=True)
            for name in ("voila.json", "jupyter_server_config.py"):
                shutil.copy(ROOT / "binder" / name, config / name)
            env["JUPYTER_CONFIG_PATH"] = str(config)
            cmd = [sys.executable, "-m", "jupyter_server", "--no-browser", f"--port={port}",
                   "--ServerApp.ip=127.0.0.1", f"--ServerApp.root_dir={ROOT}",
                   "--IdentityProvider.token=", "--ServerApp.password=",
                   # a container (this one, Binder's) may run as root
                   *(["--allow-root"] if os.geteuid() == 0 else [])]
            self.url = f"http://127.0.0.1:{port}/" + (
                "explorer-app/" if variant == "binder-proxy"
                else "voila/render/notebooks/app.ipynb")
        self.handle = self.log.open("w")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.handle, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=ROOT)
        wait_http(f"http://127.0.0.1:{port}/api/status" if variant.startswith("binder")
                  else f"http://127.0.0.1:{port}/voila/static/", self.proc, self.log)
        # binder-proxy: no Voila, hence no kernel pool, until the first page request.
        self.voila_started = variant != "binder-proxy"

    def _start_app(self, port: int, env: dict) -> None:
        """`sharding-explorer app` on `port`, returned once it has printed its URL and the port
        answers (at once where the URL is printed only then); Voila's log is the CLI's stderr."""
        self.handle = self.log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "explorer._src.cli", "app", f"--port={port}"], env=env,
            stdout=subprocess.PIPE, stderr=self.handle, stdin=subprocess.DEVNULL, cwd=ROOT,
            text=True)
        while not (line := self.proc.stdout.readline()).startswith(URL_LINE):
            if not line:
                raise RuntimeError(f"sharding-explorer app exited; see {self.log}")
        self.url = line.strip().removeprefix(URL_LINE)
        wait_http(f"http://127.0.0.1:{port}/voila/static/", self.proc, self.log)
        self.voila_started = True

    @staticmethod
    def _stock_copy(work: Path) -> Path:
        """The app notebook with the stock figures (for `cache`: only the cache changes)."""
        nb = work / "app_stock.ipynb"
        if not nb.exists():
            notebook = json.loads(APP.read_text())
            notebook["cells"].insert(0, {"cell_type": "code", "metadata": {}, "outputs": [],
                                         "execution_count": None, "id": "stockfigures",
                                         "source": STOCK_FIGURES})
            nb.write_text(json.dumps(notebook))
        return nb

    def ready(self, timeout: float = 300) -> None:
        """Wait until the server and its kernels are quiet: the previous page's kernel has shut
        down and, for a preheated server, the pool's new kernel has run the app notebook
        (Voila logs the pool as filled when the kernel has started, before that)."""
        deadline = time.time() + timeout
        if self.variant in PREHEATED and self.voila_started:
            while pool_kernels_waiting(self.log) < POOL_SIZE:
                if time.time() > deadline:
                    raise RuntimeError(f"the kernel pool was not refilled; see {self.log}")
                time.sleep(0.5)
        quiet = 0
        last = cpu_seconds(self.proc.pid)
        while quiet < 3 and time.time() < deadline:
            time.sleep(0.5)
            now = cpu_seconds(self.proc.pid)
            quiet = quiet + 1 if now - last < 0.05 else 0
            last = now

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.handle.close()


def load(browser, url: str, timeout_ms: int = 240_000) -> dict:
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    page.add_init_script(MARKS_JS)
    received = [0]

    def on_socket(ws):
        ws.on("framereceived", lambda payload: received.__setitem__(
            0, received[0] + len(payload)))

    page.on("websocket", on_socket)
    page.goto(url, timeout=timeout_ms, wait_until="commit")
    page.wait_for_function("() => window.__marks && 'heatmap' in window.__marks",
                           timeout=timeout_ms, polling=50)
    marks = page.evaluate("() => window.__marks")
    nav = page.evaluate("() => performance.getEntriesByType('navigation')[0].responseEnd")
    scripts = page.evaluate("() => performance.getEntriesByType('resource')"
                            ".filter(r => r.name.split('?')[0].endsWith('.js'))"
                            ".map(r => r.decodedBodySize)")
    ctx.close()
    return {"html": nav, "widgets": marks["widgets"], "heatmap": marks["heatmap"],
            "ws_mb": received[0] / 1e6, "js_files": len(scripts), "js_mb": sum(scripts) / 1e6}


def med(xs) -> str:
    return f"{statistics.median(xs) / 1000:.1f} s ({min(xs) / 1000:.1f}–{max(xs) / 1000:.1f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loads", type=int, default=3, help="page loads per variant")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    ap.add_argument("--gap", type=float, default=None,
                    help="seconds between one load's heatmap and the next load, without "
                    "waiting for the kernel pool (default: wait until the server is quiet)")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-page-load-") as tmp, sync_playwright() as p:
        work = Path(tmp)
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        # All servers up at once, and the loads taken in turns (stock, cache, ..., stock, ...):
        # on a shared machine whose load drifts, each round compares the variants under the
        # same conditions. With --gap, one variant's loads follow each other.
        servers = {}
        first_visit = first_app_load = None
        load_average = [os.getloadavg()[0]]
        try:
            # `app` first, its first load the moment it prints its URL: a user's first visit
            # after starting it, before the other servers start competing for the CPU.
            for variant in sorted(args.variants, key=lambda v: v != "app"):
                servers[variant] = Server(variant, work)
                results[variant] = []
                if variant == "app":
                    first_app_load = load(browser, servers[variant].url)
                    print("app first load after start: " + json.dumps(
                        {k: round(v, 1) for k, v in first_app_load.items()}), file=sys.stderr,
                        flush=True)
            if "binder-proxy" in servers:
                # A Binder user's first visit: the proxy starts Voila, which starts its
                # preheated kernel and runs the notebook in it while the page waits.
                for server in servers.values():
                    server.ready()
                proxy = servers["binder-proxy"]
                first_visit = load(browser, proxy.url)
                proxy.voila_started = True
                print("binder-proxy first visit: " + json.dumps(
                    {k: round(v, 1) for k, v in first_visit.items()}), file=sys.stderr,
                    flush=True)
            rounds = [(i, v) for i in range(args.loads) for v in servers] if args.gap is None \
                else [(i, v) for v in servers for i in range(args.loads)]
            for i, variant in rounds:
                server = servers[variant]
                load_average.append(os.getloadavg()[0])
                if args.gap is None or i == 0:
                    server.ready()
                else:
                    time.sleep(args.gap)
                r = load(browser, server.url)
                results[variant].append(r)
                print(f"{variant} load {i + 1}: " + json.dumps(
                    {k: round(v, 1) for k, v in r.items()}), file=sys.stderr, flush=True)
        finally:
            for server in servers.values():
                server.stop()
            browser.close()

    load_average.append(os.getloadavg()[0])
    spacing = (f"each {args.gap:g} s after the previous one's heatmap" if args.gap is not None
               else "each on a quiet server")
    print(f"\nRun of {datetime.date.today()}, {args.loads} loads per variant, {spacing}, each "
          "in a fresh browser context; median (min–max), from the navigation's start; 1-minute "
          f"load average {min(load_average):.1f}–{max(load_average):.1f} "
          f"({os.cpu_count()} CPUs).\n")
    print("| variant | HTML received | app's widgets drawn | first heatmap | websocket | "
          "JavaScript files |")
    print("|---|---|---|---|---|---|")
    for variant, rs in results.items():
        print(f"| {variant} | {med([r['html'] for r in rs])} | {med([r['widgets'] for r in rs])}"
              f" | **{med([r['heatmap'] for r in rs])}** | "
              f"{statistics.median(r['ws_mb'] for r in rs):.1f} MB | "
              f"{statistics.median(r['js_files'] for r in rs):.0f} files, "
              f"{statistics.median(r['js_mb'] for r in rs):.1f} MB |")
    if args.gap is not None:
        print("\nEach load's first heatmap, in order:\n")
        for variant, rs in results.items():
            print(f"- {variant}: " + ", ".join(f"{r['heatmap'] / 1000:.1f} s" for r in rs))
    if first_app_load is not None:
        r = first_app_load
        print(f"| app, first load after start | {r['html'] / 1000:.1f} s | "
              f"{r['widgets'] / 1000:.1f} s | **{r['heatmap'] / 1000:.1f} s** | "
              f"{r['ws_mb']:.1f} MB | {r['js_files']} files, {r['js_mb']:.1f} MB |")
    if first_visit is not None:
        r = first_visit
        print(f"| binder-proxy, first visit (starts Voila) | {r['html'] / 1000:.1f} s | "
              f"{r['widgets'] / 1000:.1f} s | **{r['heatmap'] / 1000:.1f} s** | "
              f"{r['ws_mb']:.1f} MB | {r['js_files']} files, {r['js_mb']:.1f} MB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
