"""Benchmark: the memory a tutorial takes, its kernel plus the compile workers it starts.

Run by hand:  .venv/bin/python benchmarks/bench_notebook_memory.py [--warm] [notebooks ...]

Each notebook (default: the tutorials, notebooks/NN_*.ipynb, the app notebook first) runs top
to bottom in a fresh kernel with nbclient, as shipped. While it runs, the resident memory (from
/proc/PID/status) of the kernel and all its descendants is read every 0.2 s; the table gives
the peak and the figure after the last cell (what stays held until the kernel is shut down),
and the number of processes then. Each process's private memory (RssAnon) is summed, and the
libraries' pages (RssFile) counted once, at the largest process's: the kernel and its workers
map the same jaxlib, whose pages a container is charged for once.

`--warm` fills a fresh persistent report cache first (one run of each notebook, as
binder/postBuild does) and measures the second run: a learner's first run on Binder, answered
from the cache, with no compile worker unless a cell asks for something new. Without it the
report cache is off and every request compiles. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "notebooks"


def tree_memory(pid: int) -> tuple[int, int]:
    """(bytes, processes) of `pid` and its descendants: their private (anonymous) resident
    memory summed, plus the largest one's file-backed resident pages. The file-backed pages are
    the libraries each process maps (jaxlib's alone is about 190 MiB once a backend starts);
    the processes map the same files, whose pages a container is charged for once, so summing
    them (VmRSS) would count jaxlib once per process."""
    anon, files, count, todo = 0, 0, 0, [pid]
    while todo:
        p = todo.pop()
        try:
            fields = dict(line.split(":", 1) for line in
                          Path(f"/proc/{p}/status").read_text().splitlines() if ":" in line)
            anon += int(fields["RssAnon"].split()[0]) * 1024
            files = max(files, int(fields["RssFile"].split()[0]) * 1024)
            count += 1
            for task in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text()
                         .split()]
        except (OSError, ValueError, KeyError):
            continue
    return anon + files, count


def run(path: Path) -> dict:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(FOLDER)}})
    peak = [0]
    done = threading.Event()
    t0 = time.perf_counter()
    with client.setup_kernel():
        pid = client.km.provisioner.process.pid

        def sample():
            while not done.wait(0.2):
                peak[0] = max(peak[0], tree_memory(pid)[0])

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        end, processes = tree_memory(pid)
        done.set()
        sampler.join()
    return {"peak": max(peak[0], end), "end": end, "processes": processes,
            "seconds": time.perf_counter() - t0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="*", type=Path)
    ap.add_argument("--warm", action="store_true",
                    help="measure the second run, answered from a filled report cache")
    args = ap.parse_args()
    paths = args.notebooks or [FOLDER / "app.ipynb", *sorted(FOLDER.glob("[0-9][0-9]_*.ipynb"))]
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as cache:
        if args.warm:
            os.environ.update(EXPLORER_DISK_CACHE="1", EXPLORER_CACHE_DIR=cache)
            for path in paths:
                run(path)
        else:
            os.environ["EXPLORER_DISK_CACHE"] = "0"
        for path in paths:
            r = run(path)
            rows.append((path.stem, r))
            print(f"{path.stem}: {r}", file=sys.stderr, flush=True)
    how = "second run, report cache filled" if args.warm else "report cache off"
    print(f"\nRun of {datetime.date.today()}, {how}:\n")
    print("| notebook | peak (kernel + workers) | after the last cell | processes | run time |")
    print("|---|---|---|---|---|")
    for name, r in rows:
        print(f"| {name} | {r['peak'] / 2**20:.0f} MiB | {r['end'] / 2**20:.0f} MiB | "
              f"{r['processes']} | {r['seconds']:.0f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
