"""Benchmark: in the Voila app, the time from an edit in the page to the redrawn placement heatmap
and collectives table, next to the compile time of the same request.

Run by hand:  .venv/bin/python benchmarks/bench_app.py [--rounds 6]

It starts Voila on notebooks/app.ipynb on a free loopback port, opens it in headless Chromium
(Debian's /usr/bin/chromium, driven by Playwright) and, per round, makes four edits:

1. param edit, uncached: a new `batch` in the IntText (fill, then Enter);
2. spec edit, uncached: x's first dimension gains or loses the axis `model` in its picker;
3. spec edit, cached: the picker back to its previous entry (a request seen in step 1);
4. spec edit, cached: the picker forward again (the request of step 2).

Every batch is new, so steps 1 and 2 are requests the kernel has never seen: they pay the app's
debounce and a compile. Both ends are taken inside the page with performance.now(): the start
in a capturing listener for the edit's `change` event (Enter for the IntText), the end in a
MutationObserver at the first moment the table shows the new collectives *and* the placement
heatmap's title reads the new tensor layout. The expected title and table summary are computed
beforehand in this process with the same explorer code, which also gives an independent compile
time of each request (`analyze_workload(..., use_cache=False)`), measured before Voila starts so
the two never compete for the CPU. The app's own compile time (lower + compile in its worker) is
read from the Timing tab after each edit. Prints markdown tables; asserts nothing about time.

`--working` measures instead, in this process and without a browser, how soon an edit says
"◌ working…": an Explorer on a small workload (mlp) and on a 12-layer train step
(transformer_train, data=4,model=4, fsdp_tp, scan_layers=false) gets `batch` edits, new (uncached)
and back to a seen value (cached); an observer on the status line stamps when it first reads
"working…" and when it reads the result ("●"). The baseline, timed in the same run, is a no-op
widget update: setting an HTML widget's value and its observer firing. The browser-level time
from an edit to the '◌' status is the "edit → '◌ …' shown" row of the main benchmark.

`--burst` measures issue 22's set-up of a real model, in this process and without a browser, as
one burst: from a 2-layer train step on data=2,model=2, four param edits (12 layers, d_model,
d_ff, seq), two mesh edits (data=4, model=4) and the fsdp_tp preset, `--gap` seconds apart, in an
event loop as in a kernel. Each round times the first edit to the result of the last state, and
counts the compiles started; the baseline, timed in the same round after it, is one uncached
compile of that last state (what a burst that became one compile would cost), so the ratio holds
under any load. `--modes live,paused`: live updates on (every edit handed to the app's
scheduler), and off, then Apply (one compile by construction).

`--workload train` runs the browser rounds on that 12-layer train step instead (a one-cell
notebook with the same Explorer call as the --working row): per round a new `batch` (uncached, a
compile) and `batch` back to the first value (cached), each timed in the page as above, from the
IntText's Enter to the status first reading '◌', to it reading '●', and to the table and heatmap
redrawn. The baseline is the main benchmark's: the same requests compiled beforehand in this
process (`analyze_workload(..., use_cache=False)`), and the app's own compile from its Timing tab.

`--big` measures issue 31's big models live, in this process and without a browser (an app in an
event loop as in a kernel): an 8B-shaped train step (Llama 3 8B's shape, bf16, remat full, seq
4096, batch 256, fsdp_tp on data=32,model=8) on h100-8x32 and on tpu-v5p-8x8x4, and a 70B-shaped
one on data=128,model=8, h100-8x128 (1024 GPUs); `--cases` picks some. Per case and round, in
alternating order: (1) the bare compile, benchmarks/bare_compile.py in a fresh process: the same
program (the explorer's planner gives the function, specs and donation; the target's devices as
the worker builds them), `jax.jit(...).lower(...).compile()` by plain jax, then the edited
program, then that once more with the worker's dump options; (2) the app on a fresh worker pool
(its worker starts, as in a fresh kernel): `Explorer(...)` to its first result, then one spec
edit (tokens' sequence picker gains `model`) to the status reading the new result, the status
sampled every second meanwhile and the event loop's longest stall recorded. Each round has a new
`lr`, and the disk cache is off, so nothing is answered from a cache. Where the time goes comes
from wrapping the app's and the API's stages in this process (Spans). The pool's compile limit
is --compile-timeout (the default pool's is 120 s, which a v5p compile here exceeds).
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from playwright.sync_api import sync_playwright  # noqa: E402

import explorer  # noqa: E402
from explorer._src.compile.pool import default_pool  # noqa: E402
from explorer._src.ui.app import App, Explorer  # noqa: E402
from explorer._src.ui.grids import placement_grid  # noqa: E402
from explorer._src.ui.serve import free_port, one_cell_notebook, voila_command  # noqa: E402
from explorer._src.ui.views import collectives_html, tensor_options  # noqa: E402
from explorer._src.units import format_bytes  # noqa: E402

CHROMIUM = os.environ.get("EXPLORER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]

# The request notebooks/app.ipynb starts with; the benchmark checks the page agrees.
WORKLOAD, MESH, TARGET = "mlp", "data=2,model=4", "h100-8"
START_SPECS = {"x": "data,None", "w1": "None,model", "w2": "model,None"}
START_BATCH = 256
# Entries cycled through x's first spec picker. Each differs from the one before, so every spec
# edit changes x's placement and the collectives; and each is one user action away from the one
# before (the picker holds mesh axes as tags: `model` is typed in after `data`, or removed).
X_CYCLE = ["(data,model)", "data"]
TENSOR = "x"            # the tensor the placement tab shows (the first, the app's default)
DEBOUNCE_S = inspect.signature(Explorer).parameters["debounce"].default

# Installed before each edit. t0: the edit's change event (or Enter) reaches the document; t1:
# the first DOM mutation after which both the table and the heatmap title show the new result.
ARM_JS = """([expTitle, marker]) => {
  const tableEl = () => document.querySelector('.explorer-collectives .widget-html-content');
  const titleEl = () => document.querySelector('.explorer-placement .gtitle');
  const statusEl = () => document.querySelector('.explorer-status');
  const b = {t0: null, t1: null, tTable: null, tTitle: null, tBusy: null, tStatus: null,
             oldTable: tableEl().innerHTML, oldStatus: statusEl().textContent};
  const check = () => {
    if (b.t0 === null || b.t1 !== null) return;
    const now = performance.now(), te = tableEl(), ti = titleEl();
    const st = statusEl().textContent;
    // The status line: "◌ compiling…" once the debounce ran out, "● compiled in" or
    // "● cached: answered in" with the result (set first when the result is drawn).
    if (b.tBusy === null && st.startsWith('◌')) b.tBusy = now;
    if (b.tStatus === null && st.startsWith('●') && (b.tBusy !== null || st !== b.oldStatus))
      b.tStatus = now;
    if (b.tTable === null && te && te.innerHTML !== b.oldTable &&
        te.textContent.includes(marker)) b.tTable = now;
    if (b.tTitle === null && ti && ti.textContent === expTitle) b.tTitle = now;
    if (b.tTable !== null && b.tTitle !== null) { b.t1 = now; b.stop(); }
  };
  const start = e => {
    const removal = e.type === 'mousedown' && e.target.closest('.jupyter-widget-tag-close');
    if (b.t0 === null && (e.type === 'change' || e.key === 'Enter' || removal))
      b.t0 = performance.now();
  };
  const obs = new MutationObserver(check);
  b.stop = () => {
    obs.disconnect();
    document.removeEventListener('change', start, true);
    document.removeEventListener('keydown', start, true);
    document.removeEventListener('mousedown', start, true);
  };
  document.addEventListener('change', start, true);
  document.addEventListener('keydown', start, true);
  document.addEventListener('mousedown', start, true);
  obs.observe(document.body, {subtree: true, childList: true, characterData: true});
  window.__bench = b;
}"""


def x_spec(entry: str) -> str:
    return f"{entry},None"


def request_specs(entry: str) -> dict:
    return {**START_SPECS, "x": x_spec(entry)}


def analyze(batch: int, entry: str, use_cache: bool = True):
    return explorer.analyze_workload(WORKLOAD, MESH, specs=request_specs(entry),
                                     params={"batch": batch}, target=TARGET,
                                     use_cache=use_cache)


def table_marker(report) -> str:
    """A part of the collectives table that names this result (no source paths in it)."""
    if not report.collectives:
        return "No collectives"
    n = len(report.collectives)
    # The summary's start (views.collectives_html), before wording that may change.
    return (f"{n} collective{'s' if n > 1 else ''}, "
            f"{format_bytes(report.cost.collective_bytes)} per device")


def timed_analysis(analyze_fn, cached: bool, *args):
    """(report, seconds): a request this process has seen is answered from its cache and not
    timed (None); a new one is compiled with the cache off and timed, as the independent
    baseline."""
    if cached:
        return analyze_fn(*args), None
    t0 = time.perf_counter()
    report = analyze_fn(*args, use_cache=False)
    return report, time.perf_counter() - t0


def planned_edit(report, previous, tensor: str, table, what: str, **fields) -> dict:
    """One edit with the heatmap title and table marker the page should show after it; the
    edit must change both the title and `table(report)`, or the page could not tell."""
    title = placement_grid(report, tensor).title
    if title == placement_grid(previous, tensor).title or table(report) == table(previous):
        raise RuntimeError(f"{what} would not change both the heatmap title and the table; "
                           "pick other edits")
    return dict(**fields, title=title, marker=table_marker(report),
                independent_compile=report.timing.lower_s + report.timing.compile_s)


def plan(rounds: int) -> list[dict]:
    """The edits, each with its expected title/table, checked to differ from the one before.

    Compiles every new request here (uncached) for the independent compile time."""
    analyze(START_BATCH, "data")            # warm this process's worker (jax loaded, 1 compile)
    previous = analyze(START_BATCH, "data")
    edits, entry = [], "data"
    for i in range(rounds):
        batch = START_BATCH + 64 * (i + 1)   # divisible by 8, so (data,model) fits the batch
        new_entry = X_CYCLE[i % len(X_CYCLE)]
        steps = [("param", batch, entry, False), ("spec", batch, new_entry, False),
                 ("spec", batch, entry, True), ("spec", batch, new_entry, True)]
        for kind, b, e, cached in steps:
            report, wall = timed_analysis(analyze, cached, b, e)
            edits.append(planned_edit(report, previous, TENSOR, collectives_html,
                                      f"edit to batch={b}, x={x_spec(e)}", round=i, kind=kind,
                                      cached=cached, batch=b, entry=e, independent_wall=wall))
            previous = report
        entry = new_entry
    default_pool().close()
    return edits


def start_voila(log, notebook: Path | None = None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(voila_command(port, notebook=notebook), stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.time() + 240
    while True:
        try:
            urllib.request.urlopen(url + "voila/static/", timeout=2)
            return proc, url
        except urllib.error.HTTPError:     # any HTTP answer means the server is up
            return proc, url
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"Voila did not start; see {log.name}") from None
            time.sleep(0.5)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


TIMING_RE = re.compile(r"lower (\d+) ms, compile (\d+) ms")


def timing_text(page) -> str:
    return page.evaluate("() => document.querySelector('.explorer-timing-body').textContent")


def run_edit(page, edit: dict, timeout_ms: int) -> dict:
    """Make one edit and return the in-page times (ms) and what the app reported."""
    old_timing = timing_text(page)
    if edit["kind"] == "param":
        box = page.locator(".widget-text:has(label:text-is('batch')) input")
        box.fill(str(edit["batch"]))      # no change event yet: the IntText sends on Enter
        page.evaluate(ARM_JS, [edit["title"], edit["marker"]])
        box.press("Enter")
    else:
        picker = page.locator(f".explorer-spec-{TENSOR} .explorer-dim-0")
        if edit["entry"] == "data":          # from (data,model): remove the model tag
            page.evaluate(ARM_JS, [edit["title"], edit["marker"]])
            picker.locator(".jupyter-widget-tag", has_text="model") \
                .locator(".jupyter-widget-tag-close").click()
        else:                                # from data: type model after it
            picker.click()
            box = picker.locator("input.jupyter-widget-taginput")
            box.fill("model")
            page.evaluate(ARM_JS, [edit["title"], edit["marker"]])
            box.press("Enter")
    try:
        page.wait_for_function("() => window.__bench.t1 !== null", timeout=timeout_ms)
    except Exception:
        seen = page.evaluate("() => [document.querySelector('.explorer-status').textContent, "
                             "(document.querySelector('.explorer-placement .gtitle') || {})"
                             ".textContent]")
        raise RuntimeError(f"no redraw for {edit}; page shows {seen}") from None
    b = page.evaluate("() => ({t0: __bench.t0, t1: __bench.t1, tTable: __bench.tTable, "
                      "tTitle: __bench.tTitle, tBusy: __bench.tBusy, tStatus: __bench.tStatus})")
    # The Timing tab is updated in the same kernel call, just after the table: give it a moment
    # (its text can also be unchanged, when the numbers are).
    try:
        page.wait_for_function("old => document.querySelector('.explorer-timing-body')"
                               ".textContent !== old", arg=old_timing, timeout=2000)
    except Exception:
        pass
    text = timing_text(page)
    m = TIMING_RE.search(text)
    def since(key):
        return None if b[key] is None else b[key] - b["t0"]

    return dict(total=since("t1"), table=since("tTable"), heatmap=since("tTitle"),
                busy=since("tBusy"), status=since("tStatus"),
                app_compile=(int(m[1]) + int(m[2])) if m else None,
                app_cached="answered from the cache" in text)


def med(xs) -> float:
    return statistics.median(xs)


def fmt(xs) -> str:
    return f"{med(xs):.0f} ms ({min(xs):.0f}–{max(xs):.0f})"


WORKING_CASES = {
    "mlp (small)": dict(workload="mlp", mesh="data=2,model=4", specs=START_SPECS,
                        target=TARGET, batch=START_BATCH, step=64),
    "transformer_train, 12 layers, 16 devices": dict(
        workload="transformer_train", mesh="data=4,model=4", preset="fsdp_tp",
        params={"layers": 12, "d_model": 256, "d_ff": 1024, "seq": 128, "scan_layers": "false"},
        target="h100-8x2", batch=8, step=8),
}


def working_latency(rounds: int) -> None:
    """Edit → 'working…' and edit → result, in the kernel, against a no-op widget update."""
    import ipywidgets as w

    def stamp_status(app):
        marks: dict[str, float] = {}

        def seen(change):
            text = change["new"]
            if "working" in text and "working" not in marks:
                marks["working"] = time.perf_counter()
            if "●" in text and "result" not in marks:
                marks["result"] = time.perf_counter()
        app.status.observe(seen, "value")
        return marks

    probe, fired = w.HTML(), []
    probe.observe(lambda _: fired.append(time.perf_counter()), "value")

    def baseline() -> float:
        fired.clear()
        t0 = time.perf_counter()
        probe.value = f"<span>{t0}</span>"
        return (fired[0] - t0) * 1e3

    rows = []
    for label, case in WORKING_CASES.items():
        case = dict(case)
        batch, step = case.pop("batch"), case.pop("step")
        params = {**case.pop("params", {}), "batch": batch}
        t0 = time.perf_counter()
        app = Explorer(**case, params=params, debounce=None)
        first = time.perf_counter() - t0
        box = next(wid for wid in app.source.params_box.children if wid.description == "batch")
        samples: dict[str, list] = {"uncached": [], "cached": []}
        base = []
        for r in range(rounds):
            for kind, value in (("uncached", batch + step * (r + 1)), ("cached", batch)):
                base.append(baseline())
                marks = stamp_status(app)
                t0 = time.perf_counter()
                box.value = value                 # the edit: the IntText's new value
                cached = app.report.timing.cached
                if kind == "cached" and not cached or kind == "uncached" and cached:
                    raise RuntimeError(f"{label}: batch={value} was {'' if cached else 'not '}"
                                       "answered from the cache")
                samples[kind].append(((marks["working"] - t0) * 1e3,
                                      (marks["result"] - t0) * 1e3))
        rows.append((label, first, samples, base))
        app.close()
    print(f"Run of {datetime.date.today()}, {rounds} edits of each kind per workload, in the "
          "kernel's process (no browser); median (min–max).\n")
    print("| workload | edit | n | edit → 'working…' | edit → result | no-op widget update "
          "(baseline) | 'working…' ÷ baseline |")
    print("|---|---|---|---|---|---|---|")
    for label, _first, samples, base in rows:
        for kind, xs in samples.items():
            work, done = [a for a, _ in xs], [b for _, b in xs]
            ratio = med(work) / med(base)
            print(f"| {label} | `batch`, {kind} | {len(xs)} | {fmtf(work)} | {fmtf(done)} | "
                  f"{fmtf(base)} | {ratio:.1f}× |")
    for label, first, _, _ in rows:
        print(f"\n{label}: the app's first result (built and compiled) in {first:.1f} s.")
    default_pool().close()


# ------------------------------------------------------------------ a burst of edits (issue 22)

# Issue 22's set-up of a real model, as a burst: four param edits, two mesh edits and a preset,
# from a 2-layer train step on 4 devices to a 12-layer one on 16 under fsdp_tp.
BURST_START = dict(workload="transformer_train", mesh="data=2,model=2",
                   params={"scan_layers": "false"})
BURST_PARAMS = {"layers": 12, "d_model": 256, "d_ff": 1024, "seq": 128}
BURST_MESH = {"data": 4, "model": 4}
BURST_PRESET = "fsdp_tp"


def burst_edits(app, paused: bool) -> list:
    """The burst's edits as (what, action) pairs, in the order a participant makes them."""
    boxes = {wid.description: wid for wid in app.source.params_box.children}
    edits = [(f"{k}={v}", lambda k=k, v=v: setattr(boxes[k], "value", v))
             for k, v in BURST_PARAMS.items()]
    edits += [(f"mesh {k}={v}", lambda k=k, v=v: setattr(app.mesh_editor.row(k).size_w,
                                                         "value", v))
              for k, v in BURST_MESH.items()]
    edits.append((f"preset {BURST_PRESET}",
                  lambda: setattr(app.preset_w, "value", BURST_PRESET)))
    if paused:
        edits.append(("Apply", lambda: app.apply_w.click()))
    return edits


def burst_done(app, batch: int) -> bool:
    """The app shows the result of the burst's last state."""
    r = app.request
    return (r is not None and r.preset == BURST_PRESET and r.mesh.text() == "data=4,model=4"
            and r.params.get("batch") == batch
            and all(r.params.get(k) == v for k, v in BURST_PARAMS.items()))


async def run_burst(batch: int, gap_s: float, paused: bool, timeout_s: float) -> dict:
    """One burst on a fresh app in this process's event loop: the edits `gap_s` apart (the
    debounced path, as in the page), then the wait for the last state's result."""
    import asyncio

    app = Explorer(**BURST_START | {"params": {**BURST_START["params"], "batch": batch}})
    compiles = []
    compile_fn = app.source.compile

    def counted(request, pool, cache_only):
        if not cache_only:
            compiles.append(time.perf_counter())
        return compile_fn(request, pool, cache_only)

    app.source.compile = counted
    try:
        if paused:
            app.live_w.value = False
        t0 = time.perf_counter()
        for k, (_, action) in enumerate(burst_edits(app, paused)):
            if k:
                await asyncio.sleep(gap_s)
            action()
        last = time.perf_counter()
        while not burst_done(app, batch):
            if time.perf_counter() - last > timeout_s:
                raise RuntimeError(f"no result for the burst's last state in {timeout_s:g} s; "
                                   f"status: {app.status.value}")
            await asyncio.sleep(0.05)
        done = time.perf_counter()
        return {"total": done - t0, "after_last": done - last, "compiles": len(compiles),
                "seconds": app.report.timing.lower_s + app.report.timing.compile_s}
    finally:
        app.close()


def burst_baseline(batch: int) -> float:
    """The burst's last state compiled once more, uncached, in this process (after the burst,
    so that the two never compete): the time a burst that became one compile would need."""
    params = {**BURST_START["params"], **BURST_PARAMS, "batch": batch}
    t0 = time.perf_counter()
    explorer.analyze_workload("transformer_train", "data=4,model=4", params=params,
                              preset=BURST_PRESET, use_cache=False)
    return time.perf_counter() - t0


def burst_latency(rounds: int, gap_s: float, timeout_s: float, modes: list[str]) -> None:
    """Issue 22's burst, edits `gap_s` apart, in each of `modes` (live; paused, then Apply),
    each against one compile of the burst's last state timed in the same round."""
    import asyncio

    rows: dict[str, list[dict]] = {m: [] for m in modes}
    batch = 8
    for r in range(rounds):
        for mode in modes:
            batch += 8                    # a new batch: every state of the burst is uncached
            row = asyncio.run(run_burst(batch, gap_s, mode == "paused", timeout_s))
            row["baseline"] = burst_baseline(batch)
            rows[mode].append(row)
            print(f"round {r} {mode}: {row}", file=sys.stderr)
    print(f"Run of {datetime.date.today()}, {rounds} rounds; the burst's "
          f"{len(BURST_PARAMS) + len(BURST_MESH) + 1} edits {gap_s:g} s apart, in the "
          "kernel's process (no browser); median (min–max).\n")
    print("| mode | n | compiles started | first edit → last state's result | last edit → "
          "result | one compile of the last state (baseline) | last edit → result ÷ baseline |")
    print("|---|---|---|---|---|---|---|")
    for mode, xs in rows.items():
        total = [x["total"] for x in xs]
        after = [x["after_last"] for x in xs]
        base = [x["baseline"] for x in xs]
        n = [x["compiles"] for x in xs]
        ratios = [x["after_last"] / x["baseline"] for x in xs]
        print(f"| {mode} | {len(xs)} | {statistics.median(n):g} ({min(n)}–{max(n)}) | "
              f"{fmts(total)} | {fmts(after)} | {fmts(base)} | {med(ratios):.1f}× "
              f"({min(ratios):.1f}–{max(ratios):.1f}) |")
    default_pool().close()


def fmts(xs) -> str:
    """Seconds: median (min–max)."""
    return f"{med(xs):.1f} s ({min(xs):.1f}–{max(xs):.1f})"


def fmtf(xs) -> str:
    """Like fmt, with a resolution that suits sub-millisecond times."""
    digits = 2 if med(xs) < 10 else 0
    return f"{med(xs):.{digits}f} ms ({min(xs):.{digits}f}–{max(xs):.{digits}f})"


# ------------------------------------------------------------------ browser rounds on a train step

TRAIN = "transformer_train, 12 layers, 16 devices"     # the WORKING_CASES entry it runs


def train_analyze(batch: int, use_cache: bool = True):
    c = WORKING_CASES[TRAIN]
    return explorer.analyze_workload(c["workload"], c["mesh"], preset=c["preset"],
                                     params={**c["params"], "batch": batch}, target=c["target"],
                                     use_cache=use_cache)


def train_notebook(path: Path) -> Path:
    """A one-cell notebook opening the app on the train step, as the --working row builds it."""
    c = WORKING_CASES[TRAIN]
    params = {**c["params"], "batch": c["batch"]}
    source = ("from explorer.ui import Explorer\n"
              f"Explorer(workload={c['workload']!r}, mesh={c['mesh']!r}, preset={c['preset']!r},\n"
              f"         params={params!r}, target={c['target']!r})\n")
    return one_cell_notebook(source, path)


def train_plan(rounds: int) -> list[dict]:
    """Per round a new `batch` (uncached) and `batch` back to the first value (cached), with
    the heatmap title (of the first tensor, the one the app shows) and table each should bring.

    Compiles every new request here (uncached) for the independent compile time."""
    c = WORKING_CASES[TRAIN]
    start, step = c["batch"], c["step"]
    train_analyze(start)                    # warm this process's worker (jax loaded, 1 compile)
    previous = train_analyze(start)
    tensor = tensor_options(previous)[0][1]
    edits = []
    for i in range(rounds):
        for batch, cached in ((start + step * (i + 1), False), (start, True)):
            report, wall = timed_analysis(train_analyze, cached, batch)
            edits.append(planned_edit(report, previous, tensor, table_marker, f"batch={batch}",
                                      round=i, kind="param", cached=cached, batch=batch,
                                      entry=None, independent_wall=wall))
            previous = report
    default_pool().close()
    return edits


def train_report(results: list[dict], first_load: float, args) -> None:
    c = WORKING_CASES[TRAIN]
    print(f"Run of {datetime.date.today()}, {TRAIN} ({c['mesh']}, {c['preset']}, "
          f"{c['params']}, target {c['target']}), {args.rounds} measured rounds after "
          f"{args.warmup} warm-up round(s), in headless Chromium; `batch` edits (IntText, "
          "Enter); all times are median (min–max).\n")
    print("| edit | n | edit → '◌' shown | edit → '●' shown | '●' → table and heatmap | "
          "edit → table and heatmap | compile in the app's worker (lower+compile) | "
          "independent `analyze_workload`, uncached: wall (lower+compile) | overhead (edit → "
          "redraw minus compile) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for cached in (False, True):
        rs = [r for r in results if r["cached"] == cached]
        if not rs:
            continue
        busy = [r["busy"] for r in rs if r["busy"] is not None]
        status = [r["status"] for r in rs if r["status"] is not None]
        drawn = [r["total"] - r["status"] for r in rs if r["status"] is not None]
        total = [r["total"] for r in rs]
        if cached:
            label, compile_, independent, over = \
                "`batch` back to the first value, cached", "— (no compile)", "—", fmt(total)
        else:
            label = "new `batch`, uncached"
            compile_ = fmt([r["app_compile"] for r in rs])
            independent = (f"{fmt([r['independent_wall'] * 1e3 for r in rs])} "
                           f"({med([r['independent_compile'] * 1e3 for r in rs]):.0f} ms)")
            over = fmt([r["total"] - r["app_compile"] for r in rs])
        print(f"| {label} | {len(rs)} | {fmt(busy) if busy else '— (not seen)'} | "
              f"{fmt(status) if status else '— (not seen)'} | "
              f"{fmt(drawn) if drawn else '—'} | {fmt(total)} | {compile_} | "
              f"{independent} | {over} |")
    shown = [r["busy"] for r in results if r["busy"] is not None]
    ok = sum(b <= 100 for b in shown)
    print(f"\n'◌' shown within 100 ms of the edit: {ok}/{len(results)} edits "
          f"(not seen at all: {len(results) - len(shown)}).")
    print(f"\nFirst page load to the first result: {first_load:.1f} s.")


# ------------------------------------------------------------ big models, live (issue 31 item 4)

# Llama-3-shaped train steps (transformer_train, bf16, full remat, one lax.scan over the layers):
# 8B (Dubey et al. 2024, Table 3: 32 layers, d_model 4096, 32 heads of 128, 8 kv heads, swiglu
# d_ff 14336, vocab 128256) and 70B (80 layers, d_model 8192, 64 heads of 128, 8 kv heads,
# d_ff 28672), at seq 4096 and a global batch of 256.
LLAMA_8B = {"layers": 32, "d_model": 4096, "heads": 32, "d_head": 128, "kv_heads": 8,
            "mlp": "swiglu", "d_ff": 14336, "vocab": 128256, "seq": 4096, "batch": 256,
            "dtype": "bfloat16", "remat": "full"}
LLAMA_70B = {**LLAMA_8B, "layers": 80, "d_model": 8192, "heads": 64, "d_ff": 28672}
BIG_CASES = {
    "8b-h100": ("8B-shaped step, data=32,model=8 on h100-8x32 (256 H100s)",
                dict(mesh="data=32,model=8", target="h100-8x32", params=LLAMA_8B)),
    "8b-v5p": ("8B-shaped step, data=32,model=8 on tpu-v5p-8x8x4 (256 v5p chips)",
               dict(mesh="data=32,model=8", target="tpu-v5p-8x8x4", params=LLAMA_8B)),
    "70b-h100": ("70B-shaped step, data=128,model=8 on h100-8x128 (1024 H100s)",
                 dict(mesh="data=128,model=8", target="h100-8x128", params=LLAMA_70B)),
}
BIG_WORKLOAD, BIG_PRESET = "transformer_train", "fsdp_tp"
# The spec edit: the picker of tokens' sequence dimension (dimension 1) gains the axis `model`
# (tokens data,None -> data,model), as a user trying a sequence-split input would.
BIG_EDIT = ("tokens", 1, "model")
BIG_EDIT_SPEC = ("data", "model")
BARE_SCRIPT = Path(__file__).with_name("bare_compile.py")
sys.path.insert(0, str(BARE_SCRIPT.parent))
from bare_compile import collective_ops  # noqa: E402

# Where an analysis's time goes: these functions are wrapped (in this process only) and each
# call's span recorded with its thread; a name the code no longer has is skipped. Functions
# imported by name elsewhere (`from m import f`) are replaced in every explorer module holding
# them.
LOOKUP = "cache lookup before compiling (Session._answer cache_only, event loop)"
COMPILE_CALL = "the compile's whole call (Session._answer: executor thread, or the constructor)"
SPAN_POINTS = [
    ("explorer._src.ui.app", "App._request",
     "check the sidebar, plan the layout (App._request, event loop)"),
    ("explorer._src.ui.app", "App._session_for",
     "make the analysis Request: check, plan, pickle (App._session_for, event loop)"),
    # Labelled by its cache_only argument (positional index 3 with self), see _span_label.
    ("explorer._src.api.session", "Session._answer", (LOOKUP, COMPILE_CALL, 3)),
    ("explorer._src.strategy.plan", "plan", "of those: plan the layout (strategy.plan, each call)"),
    ("explorer._src.compile.pool", "WorkerPool.compile",
     "worker round trip (WorkerPool.compile: start, lower, compile, dumps read, transfer)"),
    ("explorer._src.api.analyze", "build_report", "read the compiler's output (build_report)"),
    ("explorer._src.report.predict", "with_target", "price it on the target (with_target)"),
    ("explorer._src.report.memory", "with_workload", "memory by tensor kind (with_workload)"),
    ("explorer._src.ui.app", "App._show", "draw the result (App._show, event loop)"),
]


def _span_label(label, args, kwargs) -> str:
    if isinstance(label, str):
        return label
    lookup, call, index = label
    cache_only = kwargs.get("cache_only", args[index] if len(args) > index else False)
    return lookup if cache_only else call


def span_labels() -> list[str]:
    """Every label SPAN_POINTS records, in order."""
    out: list[str] = []
    for _, _, label in SPAN_POINTS:
        out += [label] if isinstance(label, str) else list(label[:2])
    return out


class Spans:
    """Records (label, thread, start, end) of every call to SPAN_POINTS while installed."""

    def __init__(self):
        import importlib
        import threading

        self.spans: list[tuple[str, str, float, float]] = []
        self.missing: list[str] = []
        self._undo: list[tuple[object, str, object]] = []
        lock = threading.Lock()
        for module_name, path, label in SPAN_POINTS:
            try:
                module = importlib.import_module(module_name)
                *owner_path, name = path.split(".")
                owner = module
                for part in owner_path:
                    owner = getattr(owner, part)
                original = getattr(owner, name)
            except (ImportError, AttributeError):
                self.missing.append(f"{module_name}.{path}")
                continue

            def wrapped(*args, _original=original, _label=label, **kwargs):
                t0 = time.perf_counter()
                try:
                    return _original(*args, **kwargs)
                finally:
                    t1 = time.perf_counter()
                    with lock:
                        self.spans.append((_span_label(_label, args, kwargs),
                                           threading.current_thread().name, t0, t1))
            holders = [owner] if owner_path else [
                m for n, m in list(sys.modules.items())
                if m is not None and (n == "explorer" or n.startswith("explorer."))
                and getattr(m, name, None) is original]
            for holder in holders:
                self._undo.append((holder, name, original))
                setattr(holder, name, wrapped)

    def close(self) -> None:
        for holder, name, original in reversed(self._undo):
            setattr(holder, name, original)

    def between(self, t0: float, t1: float) -> dict[str, float]:
        """Seconds per label of the calls that started in [t0, t1]."""
        out: dict[str, float] = {}
        for label, _thread, s, e in self.spans:
            if t0 <= s <= t1:
                out[label] = out.get(label, 0.0) + (e - s)
        return out


def plain_status(app) -> str:
    import html as html_module

    return html_module.unescape(re.sub(r"<[^>]+>", "", app.status.value)).strip()


def peak_rss_of(pid: int) -> int | None:
    """A process's high-water RSS (VmHWM), bytes; None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def worker_peak_rss() -> int | None:
    """The largest VmHWM among this process's compile workers."""
    import psutil

    peaks = []
    for p in psutil.Process().children(recursive=True):
        try:
            if "explorer._src.compile.worker" in " ".join(p.cmdline()):
                peaks.append(peak_rss_of(p.pid) or 0)
        except psutil.Error:
            continue
    return max(peaks) if peaks else None


def bare_run(case: dict, params: dict, timeout_s: float) -> dict:
    """The same two programs (the case's request, then it with the spec edit) compiled bare by
    plain jax in a fresh process (benchmarks/bare_compile.py), the edited one once more with the
    worker's dump options; plus that process's wall time from its start."""
    import json

    job = {"workload": BIG_WORKLOAD, "mesh": case["mesh"], "target": case["target"],
           "preset": BIG_PRESET, "params": params,
           "requests": [["base", {}], ["edit", {BIG_EDIT[0]: ",".join(BIG_EDIT_SPEC)}]],
           "dump": ["edit"]}
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_SKIP_CUDA_CONSTRAINTS_CHECK": "1",
           "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, str(BARE_SCRIPT), json.dumps(job)], env=env,
                         capture_output=True, text=True, timeout=timeout_s)
    wall = time.perf_counter() - t0
    if out.returncode:
        raise RuntimeError(f"bare compile failed ({out.returncode}): {out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    return result


async def big_app_round(case: dict, params: dict, pool, timeout_s: float, spans: Spans) -> dict:
    """One app on the case, in this process's event loop as in a kernel: its first result (the
    constructor, which compiles before the cell returns), then the spec edit through its picker
    until the status reads the new result, the status sampled every second meanwhile."""
    import asyncio

    set_calls: list[tuple[float, str]] = []     # every status the app set, while constructing
    original_set = App._set_status

    def recording(self, text):
        set_calls.append((time.perf_counter(), text))
        return original_set(self, text)

    App._set_status = recording
    t0 = time.perf_counter()
    try:
        app = Explorer(workload=BIG_WORKLOAD, mesh=case["mesh"], target=case["target"],
                       preset=BIG_PRESET, params=params, pool=pool)
    finally:
        App._set_status = original_set
    t_first = time.perf_counter()
    try:
        first = app.report
        if first is None or first.timing.cached:
            raise RuntimeError(f"the first result was {'cached' if first else 'not shown'}: "
                               f"{plain_status(app)}")
        row = dict(first=t_first - t0, first_timing=first.timing,
                   first_status=plain_status(app), first_spans=spans.between(t0, t_first),
                   first_sets=[(t - t0, text) for t, text in set_calls],
                   collectives=len(first.collectives),
                   first_ops=collective_ops(first.optimized_hlo))
        tensor, dim, axis = BIG_EDIT
        picker = app.spec_rows[tensor].pickers[dim]
        samples, gaps = [], []
        t1 = time.perf_counter()
        picker.value = [*picker.value, axis]                 # the edit: the picker gains a tag
        t_edited = time.perf_counter()        # the change handler ran (validation, lookup)
        next_sample, last = t1, t1

        def done() -> bool:
            r = app.request
            return (r is not None and r.pinned.get(tensor) == BIG_EDIT_SPEC
                    and app.report is not None and app.report is not first
                    and plain_status(app).startswith("●"))

        while not done():
            now = time.perf_counter()
            gaps.append(now - last)
            last = now
            if now >= next_sample:
                samples.append((now - t1, now - next_sample, plain_status(app)))
                next_sample += 1.0
            if now - t1 > timeout_s:
                raise RuntimeError(f"no result for the edit in {timeout_s:g} s; status: "
                                   f"{plain_status(app)}")
            if plain_status(app).startswith("⚠"):
                raise RuntimeError(f"the edit failed: {plain_status(app)}; {app.error}")
            await asyncio.sleep(0.02)
        t_done = time.perf_counter()
        gaps.append(t_done - last)
        edited = app.report
        if edited.timing.cached:
            raise RuntimeError("the edit was answered from a cache")
        row.update(edit=t_done - t1, edit_ops=collective_ops(edited.optimized_hlo),
                   edit_handler=t_edited - t1, edit_timing=edited.timing,
                   edit_status=plain_status(app), samples=samples, max_gap=max(gaps),
                   edit_spans=spans.between(t1, t_done), worker_rss=worker_peak_rss(),
                   kernel_rss=peak_rss_of(os.getpid()))
        return row
    finally:
        app.close()


def big_rounds(keys: list[str], rounds: int, timeout_s: float) -> None:
    """Per case and round: the bare compile of the two programs in a fresh process, and an app
    on a fresh worker pool (its worker started by the first result, as in a fresh kernel), in
    alternating order; each round a new `lr`, so no cache can answer."""
    import asyncio

    from explorer._src.compile.pool import WorkerPool

    os.environ["EXPLORER_DISK_CACHE"] = "0"      # read when the cache is first used
    results: dict[str, list[dict]] = {k: [] for k in keys}
    loads = [open("/proc/loadavg").read().split()[:3]]
    spans = Spans()
    try:
        for key in keys:
            _, case = BIG_CASES[key]
            for r in range(rounds):
                params = {**case["params"], "lr": 1e-3 * (r + 1)}
                pool = WorkerPool(timeout=timeout_s)
                sides = [("bare", lambda c, p, _pool: bare_run(c, p, timeout_s * 3)),
                         ("app", lambda c, p, pool: asyncio.run(
                             big_app_round(c, p, pool, timeout_s, spans)))]
                row = {}
                try:
                    for name, side in sides if r % 2 == 0 else sides[::-1]:
                        row[name] = side(case, params, pool)
                        loads.append(open("/proc/loadavg").read().split()[:3])
                finally:
                    pool.close()
                results[key].append(row)
                a, b = row["app"], row["bare"]
                print(f"{key} round {r}: bare start {b['start_s']:.1f} s, base "
                      f"{b['base']['lower_s'] + b['base']['compile_s']:.1f} s, edit "
                      f"{b['edit']['lower_s'] + b['edit']['compile_s']:.1f} s; app first "
                      f"{a['first']:.1f} s, edit {a['edit']:.1f} s; load {loads[-1]}",
                      file=sys.stderr, flush=True)
    finally:
        spans.close()
    big_report(results, rounds, loads, spans.missing)


def _compiled_s(t) -> float:
    return t.lower_s + t.compile_s


def _fmt_s(xs) -> str:
    if len(xs) == 1:
        return f"{xs[0]:.1f} s"
    return f"{med(xs):.1f} s ({min(xs):.1f}–{max(xs):.1f})"


def _fmt_x(xs) -> str:
    if len(xs) == 1:
        return f"{xs[0]:.2f}×"
    return f"{med(xs):.2f}× ({min(xs):.2f}–{max(xs):.2f})"


ELAPSED_RE = re.compile(r"\d+\.\d s")


def same_ops(rows: list[dict], phase: str, label: str) -> str:
    """Whether the app's module and the bare one hold the same collectives, in every round."""
    same = sum(r["app"][f"{phase}_ops"] == r["bare"][label]["collective_ops"] for r in rows)
    if same == len(rows):
        return f"yes ({rows[0]['app'][f'{phase}_ops']})"
    return (f"no in {len(rows) - same} of {len(rows)} (app {rows[0]['app'][f'{phase}_ops']}, "
            f"bare {rows[0]['bare'][label]['collective_ops']})")


def big_report(results: dict[str, list[dict]], rounds: int, loads, missing) -> None:
    print(f"Run of {datetime.date.today()}, {rounds} round(s) per case; transformer_train "
          f"{BIG_PRESET}, bf16, remat full, seq 4096, batch 256, lr new each round; in this "
          "process's event loop as in a kernel (no browser), the disk cache off. Median "
          "(min–max) where there are several rounds.\n")
    print("Time to first result: the app (`Explorer(...)` on a fresh worker pool, so its "
          "compile worker starts, as in a fresh kernel) against the same program compiled "
          "bare by plain jax in a fresh process (jax import and the target's devices, then "
          "`jit(...).lower(...).compile()`).\n")
    print("| case | n | bare: process start (jax, devices) | bare: lower+compile | bare: "
          "total | app: first result | of which: worker start | of which: lower+compile in "
          "the worker | app ÷ bare total (target ≤ 1.5×) | app ÷ bare lower+compile |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    verdicts = []
    for key, rows in results.items():
        label = BIG_CASES[key][0]
        start = [r["bare"]["start_s"] for r in rows]
        base = [r["bare"]["base"]["lower_s"] + r["bare"]["base"]["compile_s"] for r in rows]
        total = [s + b for s, b in zip(start, base, strict=True)]
        first = [r["app"]["first"] for r in rows]
        ws = [r["app"]["first_timing"].worker_start_s for r in rows]
        wc = [_compiled_s(r["app"]["first_timing"]) for r in rows]
        ratio = [f / t for f, t in zip(first, total, strict=True)]
        ratio_c = [f / b for f, b in zip(first, base, strict=True)]
        verdicts.append((f"{label}: first result ≤ 1.5× the bare compile", ratio, 1.5))
        print(f"| {label} | {len(rows)} | {_fmt_s(start)} | {_fmt_s(base)} | {_fmt_s(total)} | "
              f"{_fmt_s(first)} | {_fmt_s(ws)} | {_fmt_s(wc)} | {_fmt_x(ratio)} | "
              f"{_fmt_x(ratio_c)} |")
    tensor, dim, axis = BIG_EDIT
    print(f"\nAn edit of one spec: {tensor}'s dimension {dim} picker gains `{axis}` "
          f"({tensor} data,None → {','.join(BIG_EDIT_SPEC)}), from the picker's change to the "
          "status reading the new result with the views drawn, against the edited program "
          "compiled bare in the same fresh process as above (its second compile, as the "
          "app's is its worker's second), and once more there with the worker's dump "
          "options.\n")
    print("| case | n | bare: lower+compile | bare, with the worker's dumps | app: edit → "
          "redrawn | of which: the change handler (event loop) | of which: lower+compile in "
          "the worker | app ÷ bare (target ≤ 1.2×) |")
    print("|---|---|---|---|---|---|---|---|")
    for key, rows in results.items():
        label = BIG_CASES[key][0]
        bare = [r["bare"]["edit"]["lower_s"] + r["bare"]["edit"]["compile_s"] for r in rows]
        dumps = [r["bare"]["edit+dumps"]["lower_s"] + r["bare"]["edit+dumps"]["compile_s"]
                 for r in rows]
        edit = [r["app"]["edit"] for r in rows]
        handler = [r["app"]["edit_handler"] for r in rows]
        wc = [_compiled_s(r["app"]["edit_timing"]) for r in rows]
        ratio = [e / b for e, b in zip(edit, bare, strict=True)]
        verdicts.append((f"{label}: edit ≤ 1.2× its compile", ratio, 1.2))
        print(f"| {label} | {len(rows)} | {_fmt_s(bare)} | {_fmt_s(dumps)} | {_fmt_s(edit)} | "
              f"{_fmt_s(handler)} | {_fmt_s(wc)} | {_fmt_x(ratio)} |")
    print("\n| target | met |")
    print("|---|---|")
    for what, ratios, limit in verdicts:
        ok = sum(x <= limit for x in ratios)
        print(f"| {what} (median {med(ratios):.2f}×) | "
              f"{'**yes**' if ok == len(ratios) else '**no**'} ({ok}/{len(ratios)} rounds) |")

    print("\nThe status during the edit's compile, read every second from the event loop (what "
          "a page is sent); 'stall' is the longest the loop did not run this benchmark's "
          "coroutine (it polls every 20 ms), so also how long a page's messages waited:\n")
    print("| case | samples | said what it was doing ('◌ …') | with the seconds elapsed | "
          "first and last sample | longest event-loop stall |")
    print("|---|---|---|---|---|---|")
    for key, rows in results.items():
        label = BIG_CASES[key][0]
        samples = [s for r in rows for s in r["app"]["samples"]]
        doing = sum(text.startswith("◌") and len(text) > 2 for _, _, text in samples)
        timed = sum(bool(ELAPSED_RE.search(text)) for _, _, text in samples)
        r0 = rows[0]["app"]["samples"]
        ends = (f"{r0[0][0]:.1f} s: “{r0[0][2]}”; {r0[-1][0]:.1f} s: “{r0[-1][2]}”"
                if r0 else "—")
        stall = [r["app"]["max_gap"] for r in rows]
        print(f"| {label} | {len(samples)} | {doing}/{len(samples)} | {timed}/{len(samples)} | "
              f"{ends} (round 0) | {_fmt_s(stall)} |")
    print("\nThe status while the first result is computed (the constructor blocks, as the "
          "notebook cell does, so the loop runs nothing until it returns); what the app set, "
          "round 0:\n")
    for key, rows in results.items():
        sets = rows[0]["app"]["first_sets"]
        shown = "; ".join(f"{t:.1f} s “{text}”" for t, text in sets)
        print(f"- {BIG_CASES[key][0]}: {shown}")

    print("\nWhere the app's time goes (seconds, median over rounds; calls timed in this "
          "process; nested rows are inside the row above them):\n")
    labels = span_labels()
    trip = next(lab for _, path, lab in SPAN_POINTS if path == "WorkerPool.compile")
    rest = ("of the round trip: the worker's start, lower+compile (Report.timing) | of the "
            "round trip: the rest (the worker reads its dumps, sends the result)")
    columns = ["total"] + labels
    columns.insert(columns.index(trip) + 1, rest)
    print("| case | phase | " + " | ".join(columns) + " |")
    print("|---|---|" + "---|" * (len(columns) + 1))
    for key, rows in results.items():
        for phase in ("first", "edit"):
            cells = [f"{med([r['app'][phase] for r in rows]):.2f}"]
            for lab in labels:
                xs = [r["app"][f"{phase}_spans"].get(lab, 0.0) for r in rows]
                cells.append(f"{med(xs):.2f}")
                if lab == trip:
                    t = [r["app"][f"{phase}_timing"] for r in rows]
                    inside = [x.worker_start_s + _compiled_s(x) for x in t]
                    cells.append(f"{med(inside):.2f}")
                    cells.append(f"{med([a - b for a, b in zip(xs, inside, strict=True)]):.2f}")
            print(f"| {BIG_CASES[key][0]} | {phase} | " + " | ".join(cells) + " |")
    if missing:
        print(f"\n(not timed, not found in this explorer: {', '.join(missing)})")

    print("\n| case | peak RSS: bare process | peak RSS: compile worker | peak RSS: this "
          "process (the kernel) | optimized HLO (chars) | collectives | same collective ops "
          "in the bare and the app's module (first result, edit) |")
    print("|---|---|---|---|---|---|---|")
    for key, rows in results.items():
        gib = 2**30
        bare = max(r["bare"]["peak_rss"] for r in rows) / gib
        worker = [r["app"]["worker_rss"] for r in rows if r["app"]["worker_rss"]]
        kernel = max(r["app"]["kernel_rss"] or 0 for r in rows) / gib
        print(f"| {BIG_CASES[key][0]} | {bare:.2f} GiB | "
              f"{(max(worker) / gib) if worker else float('nan'):.2f} GiB | {kernel:.2f} GiB | "
              f"{rows[0]['bare']['base']['hlo_chars']:,} | {rows[0]['app']['collectives']} | "
              f"{same_ops(rows, 'first', 'base')}, {same_ops(rows, 'edit', 'edit')} |")
    print(f"\nLoad average (1, 5, 15 min) at the start and after each side: "
          f"{'; '.join(' '.join(x) for x in loads)}.")
    default_pool().close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--working", action="store_true",
                    help="only the edit → 'working…' latency, in this process (no browser)")
    ap.add_argument("--burst", action="store_true",
                    help="issue 22's burst of seven edits to a 12-layer train step, in this "
                         "process (no browser), live and paused, against one compile")
    ap.add_argument("--gap", type=float, default=2.0, help="--burst: seconds between edits")
    ap.add_argument("--modes", default="live,paused",
                    help="--burst: live (every edit sent on), paused (the 'live updates' switch "
                         "off, then Apply)")
    ap.add_argument("--big", action="store_true",
                    help="issue 31's big models live: an 8B- and a 70B-shaped train step on "
                         "256 and 1024 devices, first result and a spec edit in this process "
                         "(no browser), against a bare compile of the same programs")
    ap.add_argument("--cases", default=",".join(BIG_CASES),
                    help=f"--big: which of {', '.join(BIG_CASES)}")
    ap.add_argument("--compile-timeout", type=float, default=1800,
                    help="--big: seconds a compile may take (the app's worker pool and the "
                         "bare compile); the default pool's limit is 120 s")
    ap.add_argument("--rounds", type=int, default=None,
                    help="measured rounds (of four edits; --big: of each case), default 6 "
                         "(--big: 1)")
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first")
    ap.add_argument("--timeout", type=float, default=120, help="seconds to wait per edit")
    ap.add_argument("--verbose", action="store_true", help="also print every edit")
    ap.add_argument("--workload", choices=["mlp", "train"], default="mlp",
                    help="browser rounds on mlp (batch and spec edits, the app notebook) or on "
                         "the 12-layer train step of --working (batch edits)")
    args = ap.parse_args()
    if args.rounds is None:
        args.rounds = 1 if args.big else 6
    if args.big:
        keys = [k for k in args.cases.split(",") if k]
        unknown = [k for k in keys if k not in BIG_CASES]
        if unknown:
            ap.error(f"unknown --cases {unknown}; choose from {', '.join(BIG_CASES)}")
        big_rounds(keys, args.rounds, args.compile_timeout)
        return 0
    if args.working:
        working_latency(args.rounds)
        return 0
    if args.burst:
        burst_latency(args.rounds, args.gap, args.timeout * 3, args.modes.split(','))
        return 0
    if not os.path.exists(CHROMIUM):
        print(f"no Chromium at {CHROMIUM}; set EXPLORER_CHROMIUM", file=sys.stderr)
        return 2

    train = args.workload == "train"
    edits = (train_plan if train else plan)(args.warmup + args.rounds)
    log = tempfile.NamedTemporaryFile("w", prefix="bench-app-voila-", suffix=".log",
                                      delete=False)
    tmp = tempfile.TemporaryDirectory(prefix="bench-app-")
    proc, url = start_voila(log, train_notebook(Path(tmp.name) / "train.ipynb") if train
                            else None)
    results = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            t0 = time.perf_counter()
            page.goto(url, timeout=240_000)
            page.wait_for_selector(".explorer-status:has-text('compiled')", timeout=240_000)
            first_load = time.perf_counter() - t0
            page.get_by_text("Placement", exact=True).click()
            start_title = page.evaluate(
                "() => document.querySelector('.explorer-placement .gtitle').textContent")
            if train:
                first = train_analyze(WORKING_CASES[TRAIN]["batch"])
                expected = placement_grid(first, tensor_options(first)[0][1]).title
            else:
                expected = placement_grid(analyze(START_BATCH, "data"), TENSOR).title
            if start_title != expected:
                raise RuntimeError(f"the app does not start where this benchmark expects: "
                                   f"{start_title!r} != {expected!r}; update START_*")
            for edit in edits:
                r = run_edit(page, edit, int(args.timeout * 1000))
                if r["app_cached"] != edit["cached"]:
                    raise RuntimeError(f"edit {edit} was {'' if r['app_cached'] else 'not '}"
                                       "answered from the app's cache")
                if edit["round"] >= args.warmup:
                    results.append({**edit, **r})
                if args.verbose:
                    x = "" if edit["entry"] is None else f" x={x_spec(edit['entry'])}"
                    print(f"round {edit['round']} {edit['kind']:5} batch={edit['batch']}{x} "
                          f"cached={edit['cached']}: "
                          f"{r['total']:.0f} ms (table {r['table']:.0f}, heatmap "
                          f"{r['heatmap']:.0f}, busy {r['busy'] or 0:.0f}, status "
                          f"{r['status'] or 0:.0f}), app compile {r['app_compile']} ms",
                          file=sys.stderr)
            browser.close()
    finally:
        stop(proc)
        log.close()
        tmp.cleanup()
    default_pool().close()
    (train_report if train else report)(results, first_load, args)
    return 0


def report(results: list[dict], first_load: float, args) -> None:
    # The app's debounce is leading-edge: an edit after a quiet spell (as every edit here is)
    # compiles at once, and only edits that follow within DEBOUNCE_S are merged and wait.
    print(f"Run of {datetime.date.today()}, {args.rounds} measured rounds after "
          f"{args.warmup} warm-up round(s); debounce {DEBOUNCE_S * 1e3:.0f} ms (leading-edge: "
          "not applied to an isolated edit); all times are median (min–max).\n")
    print("| edit | n | edit → table and heatmap | compile in the app's worker "
          "(lower+compile) | independent `analyze_workload`, uncached: wall (lower+compile) "
          "| overhead (edit → redraw minus compile) |")
    print("|---|---|---|---|---|---|")
    rows = {}
    for kind in ("param", "spec"):
        rs = [r for r in results if r["kind"] == kind and not r["cached"]]
        if not rs:
            continue
        over = [r["total"] - r["app_compile"] for r in rs]
        rows[kind] = (rs, over)
        label = "new `batch` (IntText)" if kind == "param" else "new x spec (picker)"
        print(f"| {label}, uncached | {len(rs)} | {fmt([r['total'] for r in rs])} | "
              f"{fmt([r['app_compile'] for r in rs])} | "
              f"{fmt([r['independent_wall'] * 1e3 for r in rs])} "
              f"({med([r['independent_compile'] * 1e3 for r in rs]):.0f} ms) | {fmt(over)} |")
    cached = [r for r in results if r["cached"]]
    if cached:
        print(f"| x spec back to a seen request, cached | {len(cached)} | "
              f"{fmt([r['total'] for r in cached])} | — (no compile) | — | "
              f"{fmt([r['total'] for r in cached])} |")
    print()
    print("| target: edit → redraw ≤ compile + 200 ms | met |")
    print("|---|---|")
    for kind, (rs, over) in rows.items():
        label = "new `batch`" if kind == "param" else "new x spec"
        ok = sum(o <= 200 for o in over)
        print(f"| {label} (overhead median {med(over):.0f} ms, max {max(over):.0f} ms) | "
              f"{'**yes**' if ok == len(rs) else '**no**'} ({ok}/{len(rs)} edits) |")
    if cached:
        ok = sum(r["total"] <= 200 for r in cached)
        verdict = "**yes**" if ok == len(cached) else "**no**"
        print(f"| cached edit (no compile): ≤ 200 ms | {verdict} ({ok}/{len(cached)} edits) |")
    uncached = [r for r in results if not r["cached"] and r["busy"] is not None
                and r["status"] is not None]
    if uncached:
        print("\nWhere an uncached edit's time goes (all uncached edits; from the status line, "
              "which shows '◌ compiling…' when the debounce ends and '● compiled' first thing "
              "when the result is drawn):\n")
        print("| stage | median (min–max) |")
        print("|---|---|")
        stages = [
            ("edit → '◌ compiling…' shown (kernel round trip; debounce only for bursts)",
             [r["busy"] for r in uncached]),
            ("'◌ compiling…' → '● compiled' shown (compile in the worker + report + transfer)",
             [r["status"] - r["busy"] for r in uncached]),
            ("of which the worker's lower+compile", [r["app_compile"] for r in uncached]),
            ("'● compiled' → heatmap redrawn", [r["heatmap"] - r["status"] for r in uncached]),
            ("'● compiled' → table redrawn", [r["table"] - r["status"] for r in uncached]),
        ]
        for name, xs in stages:
            print(f"| {name} | {fmt(xs)} |")
    print(f"\nFirst page load to the first result: {first_load:.1f} s.")


if __name__ == "__main__":
    sys.exit(main())
