"""Strategy search on transformer_train over a 2-axis mesh of 8 devices: does a budgeted search
find the exhaustive optimum while compiling at most a quarter of the candidates?

    .venv/bin/python benchmarks/bench_search.py [--config small|medium] [--budget-s 60]
                                                [--patience 15] [--skip-exhaustive]

The search space is the logical-axis rules over `batch`, `embed`, `mlp` and `heads` (each mapped
to `data`, `model` or neither) on every factorisation of 8 devices into (data, model): 194 rule
tables, about 150 distinct programs. First the search runs as a user would run it on a large
space: pruning on, the local worker pool, a 60 s budget, and a patience of 15 (it stops after 15
compiles in a row that do not improve the best). Then, unless skipped, the exhaustive search of
the same space (pruning off: every candidate compiled; several minutes). The script prints both
winners, how many candidates each compiled, and at which compile the first search first held
its winner; it exits 0 when that winner is the exhaustive optimum, found compiling at most a
quarter of the candidates within the budget.

Configurations:
- small: transformer_train's defaults (2 layers, d_model 64) on h100-8, where every collective
  is below NVLink's latency floor;
- medium: 2 layers, d_model 1024, d_ff 4096, 16 heads of 64, vocab 32768, batch 16 x seq 256 on
  tpu-v5e-2x4, where compute, HBM traffic and collective bandwidth all matter.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import explorer  # noqa: E402

CONFIGS = {
    "small": ({}, "h100-8"),
    "medium": ({"batch": 16, "seq": 256, "vocab": 32768, "d_model": 1024, "heads": 16,
                "d_head": 64, "d_ff": 4096, "layers": 2}, "tpu-v5e-2x4"),
}
NAMES = ["batch", "embed", "mlp", "heads"]
MESH = "data=2,model=4"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=list(CONFIGS), default="small")
    ap.add_argument("--budget-s", type=float, default=60.0)
    ap.add_argument("--patience", type=int, default=15)
    ap.add_argument("--skip-exhaustive", action="store_true")
    args = ap.parse_args()
    params, target = CONFIGS[args.config]

    # Warm the 8-device worker first (jax import and device start-up are not the search's).
    explorer.analyze_workload("mlp", "data=8", params={"batch": 8, "d_model": 8, "d_ff": 8},
                              use_cache=False)
    explorer.clear_cache()

    first_best = {}

    def progress(p):
        if p.best_seconds is not None and p.best_seconds not in first_best:
            first_best[p.best_seconds] = (p.compiled + p.failed, p.elapsed_s)

    t0 = time.perf_counter()
    budgeted = explorer.search("transformer_train", mesh=MESH, target=target, params=params,
                               names=NAMES, budget_s=args.budget_s, patience=args.patience,
                               progress=progress)
    wall = time.perf_counter() - t0
    s = budgeted.stats
    print(f"config {args.config}: transformer_train {params or '(defaults)'} on {target}, "
          f"mesh {MESH} and its factorisations, rules over {', '.join(NAMES)}")
    print(f"search (budget {args.budget_s:g} s, patience {args.patience}): {s.text()}")
    print(f"  wall {wall:.1f} s; winner {budgeted.best.label} at "
          f"{budgeted.best.seconds * 1e6:.2f} us")
    at, when = first_best[budgeted.best.seconds]
    print(f"  the winner was first held after {at} compile(s), {when:.1f} s into the search")
    if args.skip_exhaustive:
        return 0

    explorer.clear_cache()
    t0 = time.perf_counter()
    exhaustive = explorer.search("transformer_train", mesh=MESH, target=target, params=params,
                                 names=NAMES, prune=False)
    wall_x = time.perf_counter() - t0
    e = exhaustive.stats
    print(f"exhaustive search: {e.text()}")
    print(f"  wall {wall_x:.1f} s; winner {exhaustive.best.label} at "
          f"{exhaustive.best.seconds * 1e6:.2f} us")
    found = budgeted.best.seconds == exhaustive.best.seconds
    quarter = s.compiled <= s.distinct / 4
    print(f"the budgeted search {'found' if found else 'MISSED'} the exhaustive optimum, "
          f"compiling {s.compiled} of {s.distinct} candidates "
          f"({s.compiled / s.distinct:.0%}; {'within' if quarter else 'OVER'} a quarter), "
          f"in {wall:.1f} s")
    violations = s.bound_violations + e.bound_violations
    if violations:
        print("bound violations:", *violations, sep="\n  ")
    return 0 if found and quarter and wall <= args.budget_s + 10 else 1


if __name__ == "__main__":
    sys.exit(main())
