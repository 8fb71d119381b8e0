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

With --throughput it measures instead how many candidates a minute a search compiles on this
machine's worker pool and on a Ray cluster of two nodes (benchmarks/loopback_cluster.py: two
`ray start`ed nodes on loopback, one CPU each, so the cluster runs two compiles at a time), side
by side, on the rules space of `mlp_train` (a forward, backward and SGD step) over (data, model)
on 8 devices, with pruning off (55 distinct candidates, every one compiled):

    .venv/bin/python benchmarks/bench_search.py --throughput [--repeats 6]

Both are warm when timed: the local pool's 8-device worker, and the cluster's connection (held
for all its searches, as a caller's own `ray.init` is), Ray workers and their compile workers,
by a first, smaller search. Each repeat searches another batch size, so that no Report comes from
an earlier run's cache (the persistent cache is off). Local and cluster runs alternate, local
first in one repeat and the cluster first in the next, so that a change of the machine's load
weighs on both alike. It exits 0 when the cluster's median is no lower than the local one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# Every candidate compiled, none read from the persistent cache (the cluster's nodes inherit it).
os.environ["EXPLORER_DISK_CACHE"] = "0"

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
    ap.add_argument("--throughput", action="store_true",
                    help="candidates per minute on the local pool and a two-node Ray cluster")
    ap.add_argument("--repeats", type=int, default=6)
    args = ap.parse_args()
    if args.throughput:
        return throughput(args.repeats)
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


THROUGHPUT = dict(mesh=MESH, target="h100-8", compile_for="cpu", prune=False)
THROUGHPUT_PROGRAM = "mlp_train"


def per_minute(cluster: str | None, batch: int) -> tuple[float, int]:
    """Candidates compiled a minute by one search with `batch`, and how many."""
    t0 = time.perf_counter()
    result = explorer.search(THROUGHPUT_PROGRAM, params={"batch": batch}, cluster=cluster,
                             **THROUGHPUT)
    wall = time.perf_counter() - t0
    s = result.stats
    assert s.compiled == s.distinct and s.failed == 0, s.text()
    return 60 * s.compiled / wall, s.compiled


def throughput(repeats: int) -> int:
    import ray
    from loopback_cluster import LoopbackCluster

    from explorer._src.layout_search.connect import reread_auth, runtime_env

    t0 = time.perf_counter()
    with LoopbackCluster(nodes=2, cpus=1) as cluster:
        started = time.perf_counter() - t0
        os.environ.update(cluster.client_env())
        reread_auth()
        t0 = time.perf_counter()
        ray.init(address=cluster.address, runtime_env=runtime_env(), log_to_driver=False)
        # Warm: the local 8-device worker; the cluster's workers on both nodes (a first search
        # checks the nodes, starts a Ray worker and its compile worker on each).
        warm = dict(params={"batch": 64}, names=["batch"], **THROUGHPUT)
        explorer.search(THROUGHPUT_PROGRAM, **warm)
        explorer.search(THROUGHPUT_PROGRAM, cluster=cluster.address, **warm)
        warmed = time.perf_counter() - t0
        local, remote = [], []
        for i in range(repeats):
            batch = 128 * (i + 2)
            order = ((None, local), (cluster.address, remote))
            for where, rates in order if i % 2 == 0 else reversed(order):
                rate, count = per_minute(where, batch)
                rates.append(rate)
        ray.shutdown()
    one, two = statistics.median(local), statistics.median(remote)
    print(f"{THROUGHPUT_PROGRAM} rules over (data, model) on 8 devices, pruning off: {count} "
          f"candidates a search, compile_for='cpu', target h100-8; {os.cpu_count()} cores here")
    print(f"cluster: 2 nodes of 1 CPU started in {started:.0f} s; connected and warmed in "
          f"{warmed:.0f} s")
    print(f"{'where':<46} {'candidates/min (median)':>24}  runs")
    for name, rates in (("this machine's worker pool (1 compile at once)", local),
                        ("two-node loopback Ray cluster (1 CPU each)", remote)):
        runs = ", ".join(f"{r:.0f}" for r in rates)
        print(f"{name:<46} {statistics.median(rates):>24.0f}  {runs}")
    print(f"two nodes / one machine: {two / one:.2f}x")
    return 0 if two >= one else 1


if __name__ == "__main__":
    sys.exit(main())
