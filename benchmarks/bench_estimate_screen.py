"""The search's estimate screen (explorer/_src/layout_search/estimate_screen.py): how much more a
budgeted search on a GPU target sees with it, and how well its estimate ranks the candidates.

    .venv/bin/python benchmarks/bench_estimate_screen.py [--budget-s 60] [--skip-search]
                                                         [--skip-ranking]
    .venv/bin/python benchmarks/bench_estimate_screen.py --idle-and-loaded [--load-jobs 4]

0. With --idle-and-loaded (issue 53): the search below as a user runs it (estimate screen on),
   once on the machine as it is and once while `--load-jobs` processes this script starts burn
   CPU beside it (each a busy loop, stopped when the search returns). Printed for each: the
   load average before, candidates evaluated (of 8,620), of which estimated and compiled, when
   the first estimate came (seconds into the search; nothing compiles before it), the search's
   wall seconds and how far past (+) or short of (-) its budget it ended, the headline, and why
   it stopped (with the phases the budget cut short, and the work in flight not waited for).

1. The search of issue 31 on XLA's GPU compiler (needs the gpu extra):
   `explorer.search("transformer_train", mesh="data=2,model=4", target="h100-8",
   params={"dtype": "bfloat16"}, budget_s=60)`, once with the estimate screen and once without
   it (the program made untraceable, so the search compiles every candidate with the target's
   compiler, as it did before the screen), alternating, so that the machine's load weighs on
   both. Printed: candidates evaluated (compiled or estimated), confirmed by the GPU compiler,
   wall seconds, and the headline.
2. The estimate's ranking against the compiler's, on CPU: every distinct candidate of the rules
   space of `transformer_train` at its defaults (batch, embed, mlp, heads over data=2,model=4
   and its other factorisations), compiled on fake CPU devices and priced on h100-8 (prune off),
   and the same candidates estimated. Printed: Spearman's rank correlation of the two step
   times, where the compiled optimum falls in the estimate's order, and the seconds per
   candidate of each (their ratio is the screen's speed-up).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ["EXPLORER_DISK_CACHE"] = "0"     # every compile is a compile

import numpy as np  # noqa: E402

import explorer  # noqa: E402
from explorer._src.errors import WorkloadError  # noqa: E402
from explorer._src.layout_search import search as search_module  # noqa: E402
from explorer._src.layout_search.estimate_screen import EstimateScreen  # noqa: E402
from explorer._src.layout_search.result import CandidateStatus, SearchSpace  # noqa: E402
from explorer._src.layout_search.space import enumerate_space, mesh_factorisations  # noqa: E402
from explorer._src.spec.mesh import parse_mesh  # noqa: E402

SEARCH = dict(mesh="data=2,model=4", target="h100-8", params={"dtype": "bfloat16"})
NAMES = ["batch", "embed", "mlp", "heads"]


def _untraceable(self, mesh):
    raise WorkloadError("estimate screen off for this run")


def one_search(budget_s: float, estimate: bool) -> dict:
    saved = EstimateScreen.trace
    if not estimate:
        EstimateScreen.trace = _untraceable
    try:
        explorer.clear_cache()
        t0 = time.perf_counter()
        r = explorer.search("transformer_train", **SEARCH, budget_s=budget_s)
        wall = time.perf_counter() - t0
    finally:
        EstimateScreen.trace = saved
    s = r.stats
    return {"estimate": estimate, "evaluated": s.evaluated, "estimated": s.estimated,
            "confirmed": s.confirmed, "wall_s": wall, "headline": r.headline()}


def searches(budget_s: float, rounds: int) -> None:
    rows = []
    for i in range(rounds):
        order = (True, False) if i % 2 == 0 else (False, True)
        rows += [one_search(budget_s, e) for e in order]
    print("| screen | evaluated of 8,620 | of which estimated | confirmed by the GPU compiler "
          "| wall s |\n|---|---|---|---|---|")
    for row in rows:
        print(f"| {'estimate' if row['estimate'] else 'none (every candidate compiled)'} | "
              f"{row['evaluated']:,} | {row['estimated']:,} | {row['confirmed']} | "
              f"{row['wall_s']:.1f} |")
    for row in rows:
        print(f"- {'estimate' if row['estimate'] else 'none'}: {row['headline']}")


def timed_search(budget_s: float) -> dict:
    """One search as a user runs it, with when its first estimate came."""
    first: list[float] = []

    def progress(p):
        if p.phase == "estimate" and not first:
            first.append(p.elapsed_s)

    explorer.clear_cache()
    t0 = time.perf_counter()
    r = explorer.search("transformer_train", **SEARCH, budget_s=budget_s, progress=progress)
    s = r.stats
    return {"evaluated": s.evaluated, "estimated": s.estimated, "compiled": s.compiled,
            "first_estimate_s": first[0] if first else None,
            "wall_s": time.perf_counter() - t0, "headline": r.headline(),
            "stopped": s.stopped_text()}


def idle_and_loaded(budget_s: float, jobs: int) -> None:
    """The search on the machine as it is, then with `jobs` CPU-burning processes beside it."""
    import subprocess

    rows = []
    for label, n in (("as it is", 0), (f"+{jobs} busy processes", jobs)):
        # Plain interpreters in a busy loop (a fork of this process would copy jax's threads).
        burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                   for _ in range(n)]
        try:
            if n:
                time.sleep(10)         # let the load average see them
            load = os.getloadavg()[0]
            rows.append((label, load, timed_search(budget_s)))
        finally:
            for b in burners:
                b.terminate()
                b.wait()
    print("| machine | load before | evaluated of 8,620 | estimated | compiled | first "
          f"estimate at | wall s ({budget_s:g} s budget) | past the budget |"
          "\n|---|---|---|---|---|---|---|---|")
    for label, load, r in rows:
        first = f"{r['first_estimate_s']:.1f} s" if r["first_estimate_s"] is not None else "-"
        print(f"| {label} | {load:.1f} | {r['evaluated']:,} | {r['estimated']:,} | "
              f"{r['compiled']} | {first} | {r['wall_s']:.1f} | "
              f"{r['wall_s'] - budget_s:+.1f} s |")
    for label, _, r in rows:
        print(f"- {label}: {r['headline']} Stopped: {r['stopped']}.")


def spearman(a: list[float], b: list[float]) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def ranking() -> None:
    """The estimate against CPU compiles of every distinct candidate of the rules space."""
    t0 = time.perf_counter()
    compiled = explorer.search("transformer_train", mesh="data=2,model=4", target="h100-8",
                               names=NAMES, prune=False, compile_for="cpu")
    compile_s = time.perf_counter() - t0
    steps = {c.label: c.seconds for c in compiled.candidates
             if c.status is CandidateStatus.OK and c.seconds is not None}
    problem = search_module._problem(explorer.Request(workload="transformer_train",
                                                     mesh="data=2,model=4"))
    mesh = parse_mesh("data=2,model=4")
    found = enumerate_space(problem, mesh_factorisations(mesh), SearchSpace.RULES,
                            *search_module._searched(problem, SearchSpace.RULES, NAMES, None),
                            lambda: False)
    screen = EstimateScreen(problem, "h100-8")
    t0 = time.perf_counter()
    estimated = {c.label: c.seconds for c in map(screen.candidate, found.points)}
    estimate_s = time.perf_counter() - t0
    labels = [k for k in steps if estimated.get(k) is not None]
    rho = spearman([steps[k] for k in labels], [estimated[k] for k in labels])
    best = min(labels, key=steps.get)
    order = sorted(labels, key=estimated.get)
    n = len(found.points)
    print(f"\n{n} distinct candidates; {len(labels)} compiled and estimated")
    print(f"Spearman rank correlation, estimate against compiled step: {rho:.2f}")
    print(f"the compiled optimum ({best}) is #{order.index(best) + 1} in the estimate's order; "
          f"the estimate's top 3 hold compiled ranks "
          f"{sorted(sorted(labels, key=steps.get).index(k) + 1 for k in order[:3])}")
    per_compile, per_estimate = compile_s / n, estimate_s / n
    print(f"seconds a candidate: CPU compile {per_compile:.2f} (search with prune off), "
          f"estimate {per_estimate * 1e3:.1f} ms (tracing included): "
          f"{per_compile / per_estimate:.0f}x")
    print(f"median |estimate / compiled - 1|: "
          f"{statistics.median(abs(estimated[k] / steps[k] - 1) for k in labels):.0%}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget-s", type=float, default=60.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--skip-search", action="store_true")
    ap.add_argument("--skip-ranking", action="store_true")
    ap.add_argument("--idle-and-loaded", action="store_true",
                    help="the search as it is and beside --load-jobs CPU-burning processes")
    ap.add_argument("--load-jobs", type=int, default=4)
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    if args.idle_and_loaded:
        idle_and_loaded(args.budget_s, args.load_jobs)
        return 0
    if not args.skip_search:
        searches(args.budget_s, args.rounds)
    if not args.skip_ranking:
        ranking()
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
