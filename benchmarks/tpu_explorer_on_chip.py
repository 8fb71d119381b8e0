"""The explorer itself on a machine with a TPU chip: prediction and measurement side by side.

    python benchmarks/tpu_explorer_on_chip.py [--out DIR] [--only NAME ...] [--target NAME]

Each of benchmarks/user_programs.py's programs is given to
`explorer.analyze(fn, *args, mesh="data=1", real_devices=True, measure=True)` as a user on a
TPU VM would: the compile worker compiles it for the chip and runs it (its device times read
from a profile of the run), and the Report prices it for the catalog target the chip is, so
the Timing tab and the CLI show the prediction against the measurement, op by op. Prints the
CLI's comparison per program and writes DIR/explorer_on_chip.json.

With --target (e.g. tpu-v5e-1x1) the programs are given as a user who names the hardware
would: `analyze(fn, *args, mesh="data=1", target=NAME, measure=True)`, which compiles and
runs them on the chip when the machine has that target's devices.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--target", default=None,
                    help="name the target instead of real_devices=True")
    args = ap.parse_args()

    from user_programs import programs

    import explorer
    from explorer._src.report.op_comparison import compare_ops, comparison_lines

    rows = []
    for program in programs():
        if args.only and program.name not in args.only:
            continue
        t0 = time.perf_counter()
        try:
            where = ({"target": args.target} if args.target else {"real_devices": True})
            report = explorer.analyze(program.fn, *program.args, mesh="data=1",
                                      measure=True, **where)
        except Exception as e:  # noqa: BLE001 - a check on a machine records what failed
            rows.append({"name": program.name, "error": repr(e)[:2000],
                         "traceback": traceback.format_exc()[-3000:]})
            print(program.name, "failed:", repr(e)[:500], flush=True)
            continue
        est, t = report.estimate, report.timing
        cmp = compare_ops(report)
        row = {"name": program.name, "seconds": time.perf_counter() - t0,
               "device_kind": report.device_kind, "target": est.target if est else None,
               "predicted_s": est.step_trace_seconds if est else None,
               "measured_s": t.measured_s, "measured_device_s": t.measured_device_s,
               "measured_on": t.measured_on, "measure_note": t.measure_note,
               "ahead_of_time": report.ahead_of_time, "approximation": report.approximation,
               "notes": list(report.notes),
               "ops_measured": len(t.measured_ops), "cautions": list(est.cautions) if est else [],
               "comparison": comparison_lines(cmp) if cmp else None}
        rows.append(row)
        print(f"== {program.name}: {row['device_kind']} priced as {row['target']}", flush=True)
        print("\n".join(row["comparison"] or [f"no comparison: {t.measure_note}"]), flush=True)
    with open(os.path.join(args.out, "explorer_on_chip.json"), "w") as f:
        json.dump(rows, f, indent=1)
    explorer._src.compile.pool.default_pool().close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
