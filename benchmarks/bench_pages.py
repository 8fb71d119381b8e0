"""Benchmark: the memory each open page of the Voila app holds, with 1, 4 and 8 pages at once.

Run by hand:  .venv/bin/python benchmarks/bench_pages.py [--pages 1 4 8] [--idle 120]

For each count it starts the app's Voila server as `sharding-explorer app` runs it
(explorer._src.ui.serve.voila_command: one preheated kernel) on a free loopback port, with the
report
cache off (EXPLORER_DISK_CACHE=0: every page compiles, the case where memory is highest) and the
compile workers' idle timeout at `--idle` seconds (EXPLORER_WORKER_IDLE_S). It opens that many
pages in headless Chromium, each in its own browser context, all loading at once, and measures
each page's kernel (found by the kernel id in the page) with its compile workers: the resident
memory (VmRSS) summed over the kernel's process tree (bench_notebook_memory.tree_rss):

- at its peak, sampled every 0.5 s while the pages load (each computes the app's first result,
  the mlp compiled for h100-8) and then each makes one edit (GSPMD picked instead of Shardy);
- idle: the pages stay open, untouched, until their workers have been closed (`--idle` s).

Shared pages are counted once per process, so the sums overstate what a container's memory
limit sees. The Voila server's own process and the preheated kernel waiting for the next page
are not a page's; the table gives the whole server's tree too. Prints a markdown table; asserts
nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_notebook_memory import tree_rss
from bench_page_load import CHROMIUM, CHROMIUM_ARGS, ROOT, wait_http
from playwright.sync_api import sync_playwright

from explorer._src.ui.serve import free_port, stop_server, voila_command

MIB = 2 ** 20
WAIT_MS = 900_000         # eight kernels compiling at once on 2 cores take minutes
RESULT = (".explorer-status:has-text('compiled'), .explorer-status:has-text('cached')")


def kernel_pid(page) -> int:
    """The pid of the page's kernel: the ipykernel whose connection file names its id (Voila
    writes the id into the page's config before it runs the notebook)."""
    page.wait_for_selector("#jupyter-config-data", state="attached", timeout=WAIT_MS)
    kernel_id = page.evaluate(
        "() => JSON.parse(document.getElementById('jupyter-config-data').textContent)"
        ".kernelId")
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if f"kernel-{kernel_id}.json".encode() in cmdline:
                return int(entry)
    raise RuntimeError(f"no process for kernel {kernel_id}")


def wait_for_result(page, after: str) -> str:
    """Wait until the page's status shows a result other than `after`; return its id."""
    return page.wait_for_function(
        "after => { const s = document.querySelector('.explorer-status [data-result]');"
        " return s && s.textContent.startsWith('●') && s.dataset.result !== after"
        " && s.dataset.result; }", arg=after, timeout=WAIT_MS).json_value()


class Peaks:
    """The largest tree_rss seen of each pid (and of the server's tree), sampled every 0.5 s
    on a thread until stopped: pages load and compile at different moments, so each page's
    peak is what its kernel and workers held at once."""

    def __init__(self, pids: list[int], server: int):
        self.pids, self.server = pids, server
        self.peak = {pid: (0, 0) for pid in [*pids, server]}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            for pid in self.peak:
                self.peak[pid] = max(self.peak[pid], tree_rss(pid))

    def stop(self) -> tuple[list[tuple[int, int]], int]:
        """(each page's peak (bytes, processes), the server tree's peak bytes)."""
        self._stop.set()
        self._thread.join()
        return [self.peak[pid] for pid in self.pids], self.peak[self.server][0]


def workers_left(pids: list[int]) -> int:
    """The processes beside the kernels themselves under `pids` (their compile workers)."""
    return sum(tree_rss(pid)[1] - 1 for pid in pids)


def measure(pages: int, idle_s: float, work: Path) -> dict:
    log = work / f"voila-{pages}.log"
    env = {**os.environ, "EXPLORER_DISK_CACHE": "0", "EXPLORER_WORKER_IDLE_S": str(idle_s),
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                         if p)}
    port = free_port()
    with log.open("w") as out:
        server = subprocess.Popen(voila_command(port), env=env, stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT)
        try:
            url = f"http://127.0.0.1:{port}/"
            wait_http(url + "voila/static/", server, log)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                opened = [browser.new_context().new_page() for _ in range(pages)]
                for page in opened:              # all load at once
                    page.goto(url, wait_until="commit", timeout=WAIT_MS)
                peaks = Peaks([kernel_pid(page) for page in opened], server.pid)
                results = [wait_for_result(page, "") for page in opened]
                for page in opened:
                    page.get_by_text("GSPMD", exact=True).click()
                for page, before in zip(opened, results, strict=True):
                    wait_for_result(page, before)
                busy, server_busy = peaks.stop()
                # Idle: the pages stay open, untouched, until their kernels' workers are closed.
                deadline = time.monotonic() + idle_s + 300
                while workers_left(peaks.pids) and time.monotonic() < deadline:
                    time.sleep(2)
                idle = [tree_rss(pid) for pid in peaks.pids]
                server_idle = tree_rss(server.pid)[0]
                browser.close()
        finally:
            stop_server(server, timeout=30)
    return {"pages": pages, "busy": busy, "idle": idle, "server_busy": server_busy,
            "server_idle": server_idle}


def _cell(sums: list[tuple[int, int]]) -> str:
    """Mean (min-max) MiB per page, and processes per page."""
    mib = [rss / MIB for rss, _ in sums]
    processes = sorted({count for _, count in sums})
    return (f"{statistics.mean(mib):.0f} MiB ({min(mib):.0f}-{max(mib):.0f}), "
            f"{'/'.join(map(str, processes))} proc.")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--idle", type=float, default=120.0,
                    help="the compile workers' idle timeout in the kernels, in seconds")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-pages-") as work:
        for n in args.pages:
            r = measure(n, args.idle, Path(work))
            rows.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
    print(f"\nRun of {datetime.date.today()}, report cache off, workers closed after "
          f"{args.idle:g} idle s; per page: its kernel and its compile workers, mean "
          "(min-max):\n")
    print("| pages | per page, at its peak (loading, compiling, an edit) | per page, idle "
          "(workers closed) | whole server at its peak | whole server, idle |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['pages']} | {_cell(r['busy'])} | {_cell(r['idle'])} | "
              f"{r['server_busy'] / MIB:.0f} MiB | {r['server_idle'] / MIB:.0f} MiB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
