"""Benchmark: a CLI call that the cache on disk answers, against starting the explorer at all.

    .venv/bin/python benchmarks/bench_cached_call.py [--rounds 5] [--workload transformer_train]

A workload's analysis is compiled once into a fresh cache folder; then, each round, two fresh
processes are timed in turn: `python -c "import explorer"` (the baseline: what any call pays)
and `sharding-explorer analyze --workload NAME ...` answered from that cache. The ratio of the
medians is what a cached call costs beyond starting; it also says whether the call imported
jax and traced the workload to find its entry (a cached call needs neither: the request is
keyed by the workload's identity, explorer/_src/api/analysis_request.py). Prints a markdown row.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(argv: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workload", default="transformer_train")
    ap.add_argument("--mesh", default="data=2,model=4")
    ap.add_argument("--preset", default="megatron")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "EXPLORER_DISK_CACHE": "1", "EXPLORER_CACHE_DIR": folder,
               "PYTHONPATH": ROOT}
        call = [sys.executable, "-m", "explorer._src.cli", "analyze", "--workload", args.workload,
                "--mesh", args.mesh, "--preset", args.preset]
        start = [sys.executable, "-c", "import explorer"]
        timed(call, env)                                   # compiles and fills the cache
        calls, starts = [], []
        for _ in range(args.rounds):
            starts.append(timed(start, env))
            calls.append(timed(call, env))
        probe = subprocess.run(
            [sys.executable, "-c",
             "import sys, explorer; explorer.analyze_workload("
             f"{args.workload!r}, {args.mesh!r}, preset={args.preset!r}); "
             "print('jax' in sys.modules)"],
            env=env, cwd=ROOT, check=True, capture_output=True, text=True)
    call_s, start_s = statistics.median(calls), statistics.median(starts)
    print("| workload | import explorer (s) | cached CLI call (s) | ratio | jax imported |")
    print("|---|---|---|---|---|")
    print(f"| {args.workload} | {start_s:.2f} | {call_s:.2f} | {call_s / start_s:.2f} | "
          f"{probe.stdout.strip().splitlines()[-1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
