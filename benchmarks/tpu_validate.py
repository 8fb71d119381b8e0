"""Validate the cost model on a real TPU chip: each step's predicted time against its measured
time, on one TPU v5e chip (a one-chip TPU VM), with the same cases and timing as
benchmarks/gpu_validate.py.

    python benchmarks/tpu_validate.py [--out results.json] [--repeats 15] [--target tpu-v5e-1x1]

Two processes, because libtpu lets one process at a time hold the chip:
1. predictions: each case through `analyze_workload(..., target=...)` in a process that keeps
   jax on the CPU; its compile worker compiles the program with libtpu for the target's
   topology, with no chip opened (as on a laptop), and the estimate prices it;
2. measurements: the same program (gpu_validate.build_case: the workload's function and
   specs, as the planner lays them out) compiled by jax for the chip and timed with
   gpu_validate.time_call (median of samples of back-to-back calls).

One chip has no links, so every case has mesh axes of size 1: this checks the compute and
memory side of the model (matmul rates, HBM traffic), not the collectives.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_validate import (  # noqa: E402
    fmt_err,
    fmt_s,
    measure_steps,
    median_abs,
    predict_steps,
    step_cases,
)

# gpu_validate's transformer step (batch 16, seq 1024) needs 16.0 GiB of temporaries, more
# than a v5e chip's 15.75 (libtpu's own refusal on the chip); at batch 4 it fits.
TRANSFORMER_BATCH = 4


def cases() -> list[dict]:
    out = step_cases(1, small=False)
    for case in out:
        if case["workload"] == "transformer_train":
            case["params"] = {**case["params"], "batch": TRANSFORMER_BATCH}
    return out


def predict(target: str, out: str) -> None:
    """Phase 1, in a process with jax on the CPU: the explorer's estimate of every case, and
    its memory verdict (libtpu's, for a program it compiled for the target)."""
    from explorer._src.cost.catalog.names import get_target
    from explorer._src.report.predict import compiled_memory_fit

    def verdict(report) -> dict:
        fit = compiled_memory_fit(report, get_target(target))
        return {"fits": None if fit is None else fit.fits,
                "memory_verdict": "" if fit is None else fit.text}

    with open(out, "w") as f:
        json.dump(predict_steps(cases(), target, extra=verdict), f)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the results as JSON to this path")
    ap.add_argument("--repeats", type=int, default=15, help="timing samples per case")
    ap.add_argument("--target", default="tpu-v5e-1x1", help="catalog target to compare with")
    ap.add_argument("--predict-only", metavar="FILE", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.predict_only:
        predict(args.target, args.predict_only)
        return 0

    predictions = f"/tmp/tpu_validate_{os.getpid()}.json"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--target", args.target, "--predict-only",
                    predictions], env=env, check=True)
    print(f"# predictions in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    with open(predictions) as f:
        predicted = json.load(f)

    import jax

    devices = jax.devices()
    if devices[0].platform != "tpu":
        print(f"no TPU here (jax found {devices[0].platform}); nothing measured")
        return 0
    results = {"device_kind": devices[0].device_kind, "target": args.target,
               "jax": jax.__version__, "date": time.strftime("%Y-%m-%d")}
    results["steps"] = measure_steps(predicted, devices[:1], args.repeats, "tpu_collectives")
    report(results)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


def report(results: dict) -> None:
    print(f"\n## Steps on one {results['device_kind']} against {results['target']} "
          f"(jax {results['jax']}, {results['date']})\n")
    print("| workload | preset | predicted, full overlap | predicted, none | bound | measured "
          "| error (full overlap) | error (none) | memory, as the explorer predicted |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s in results["steps"]:
        if "measured_s" not in s:
            print(f"| {s['workload']} | {s['preset']} | — | — | — | "
                  f"{s.get('skipped') or s.get('failed', '')[:80]} | — | — | "
                  f"{s.get('memory_verdict', '')} |")
            continue
        print(f"| {s['workload']} | {s['preset']} | {fmt_s(s['predicted_lower_s'])} | "
              f"{fmt_s(s['predicted_upper_s'])} | {s['bound']} | {fmt_s(s['measured_s'])} | "
              f"{fmt_err(s['error_lower'])} | {fmt_err(s['error_upper'])} | "
              f"{s.get('memory_verdict', '')} |")
    errors = [s["error_upper"] for s in results["steps"] if s.get("error_upper") is not None]
    m = median_abs(errors)
    if m is not None:
        print(f"\nmedian |error| (no overlap): {m:.1%} over {len(errors)} steps")


if __name__ == "__main__":
    sys.exit(main())
