"""Hold the explorer's predictions of user-style programs against their runs on a TPU chip.

    python benchmarks/tpu_programs_validate.py [--measured DIR] [--only NAME ...] [--out FILE]

The programs are benchmarks/user_programs.py's, written in plain jax as users write them. Each
is predicted here, with no chip: `explorer.analyze(fn, *args, mesh="data=1",
target="tpu-v5e-1x1")` compiles it with libtpu for a v5e chip ahead of time and prices the
compiled schedule. The measurements were made on one TPU v5e chip by
benchmarks/tpu_measure.py and are kept in DIR (benchmarks/results/tpu-v5e-2026-12-06): each
program's device time per call (the profile's "XLA Modules" line, median of 5 calls) and each
instruction's time.

Printed: per program, the predicted step (the predicted trace, the no-overlap bound where there
is no trace), the measured one, the error (predicted - measured) / measured, the warnings and
kernel labels the Report carries; then the median |error|, and the issue's targets: at most 5%,
errors of both signs, no program more than 2x off unless its estimate carries a caution (a
fusion libtpu could not cost, a kernel, a scatter).
With --ops, the instructions where prediction and measurement part most. With --kept-hlo, each
program is priced from the optimized HLO the chip compiled (DIR/hlo) instead of compiling it
here: the same schedule, estimate and trace, without libtpu or its compile time (the two agree:
on 2026-12-06's programs they gave the same step to 0.01 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

HERE = os.path.dirname(os.path.abspath(__file__))
MEASURED = os.path.join(HERE, "results", "tpu-v5e-2026-12-06")
TARGET = "tpu-v5e-1x1"
TARGET_ERROR = 0.05
FLAG_FACTOR = 2.0


def predict(program, target: str) -> dict:
    import explorer

    report = explorer.analyze(program.fn, *program.args, mesh="data=1", target=target)
    est = report.estimate
    step = est.step_trace_seconds or est.step_upper_seconds
    ops = {}
    if report.trace is not None:
        for e in report.trace.events:
            ops[e.hlo] = ops.get(e.hlo, 0.0) + e.duration
    return {"predicted_s": step, "bound": str(est.bound),
            "compute_s": est.compute.seconds, "notes": list(est.notes),
            "warnings": [w.text for w in report.warnings], "cautions": list(est.cautions),
            "ops_s": ops}


def predict_kept(name: str, folder: str, target: str) -> dict:
    """predict() from the chip's own optimized HLO of the program (DIR/hlo/NAME.hlo.txt.gz)."""
    import gzip

    from explorer._src.cost.estimate import estimate
    from explorer._src.hlo.schedule import read_schedule, schedule_work
    from explorer._src.report.trace import step_trace

    with gzip.open(os.path.join(folder, "hlo", f"{name}.hlo.txt.gz"), "rt") as f:
        schedule = read_schedule(f.read())
    work = schedule_work(schedule)
    # The dtype whose peak applies: a TPU runs f32 matmuls at its bf16 rate, so either gives
    # the same peak here.
    est = estimate([], None, None, None, "bfloat16", ["data"], [1], target, work=work)
    trace = step_trace(schedule, [], est)
    ops = {}
    for e in trace.events if trace is not None else ():
        ops[e.hlo] = ops.get(e.hlo, 0.0) + e.duration
    return {"predicted_s": trace.seconds if trace is not None else est.step_upper_seconds,
            "bound": str(est.bound), "compute_s": est.compute.seconds,
            "notes": list(est.notes), "warnings": [], "cautions": list(est.cautions),
            "ops_s": ops}


def compare(predicted: dict, measured: dict) -> dict:
    m = measured["module_ns"] * 1e-9
    p = predicted["predicted_s"]
    return {"measured_s": m, "error": None if p is None else (p - m) / m}


def flagged(pred: dict) -> bool:
    """The Report says its time may be far off: a caution on the estimate (an uncostable
    fusion, a kernel, a scatter)."""
    return bool(pred["cautions"])


def worst_ops(pred: dict, measured: dict, k: int = 5) -> list[tuple[str, float, float]]:
    meas = {name: ns * 1e-9 for name, (ns, _) in measured.get("op_ns_per_call", {}).items()}
    rows = [(name, pred["ops_s"].get(name, 0.0), t) for name, t in meas.items()]
    rows.sort(key=lambda r: -abs(r[1] - r[2]))
    return rows[:k]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measured", default=MEASURED, help="folder with programs.json")
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--out", help="write predictions and errors as JSON here")
    ap.add_argument("--ops", action="store_true", help="list the ops that part most")
    ap.add_argument("--kept-hlo", action="store_true",
                    help="price the chip's kept optimized HLO instead of compiling here")
    args = ap.parse_args()

    from user_programs import programs

    with open(os.path.join(args.measured, "programs.json")) as f:
        chip = json.load(f)
    measured = {p["name"]: p for p in chip["programs"] if p.get("module_ns")}
    rows = []
    print(f"| program | kind | predicted | measured on {chip['device_kind']} | error | "
          "flagged |\n|---|---|---|---|---|---|")
    for program in programs():
        if (args.only and program.name not in args.only) or program.name not in measured:
            continue
        pred = (predict_kept(program.name, args.measured, TARGET) if args.kept_hlo
                else predict(program, TARGET))
        row = {"name": program.name, "kind": program.kind, **pred,
               **compare(pred, measured[program.name]), "flagged": flagged(pred)}
        rows.append(row)
        err = "—" if row["error"] is None else f"{row['error']:+.1%}"
        ps = "—" if pred["predicted_s"] is None else f"{pred['predicted_s'] * 1e3:.2f} ms"
        print(f"| {program.name} | {program.kind} | {ps} | {row['measured_s'] * 1e3:.2f} ms | "
              f"{err} | {'yes' if row['flagged'] else ''} |", flush=True)
        if args.ops:
            for name, p, m in worst_ops(pred, measured[program.name]):
                print(f"|   {name} | | {p * 1e3:.3f} ms | {m * 1e3:.3f} ms | | |")
    errors = [r["error"] for r in rows if r["error"] is not None]
    if errors:
        med = statistics.median(abs(e) for e in errors)
        far = [r["name"] for r in rows if r["error"] is not None and not r["flagged"]
               and max(r["predicted_s"] / r["measured_s"], r["measured_s"] / r["predicted_s"])
               > FLAG_FACTOR]
        print(f"\nmedian |error| {med:.1%} over {len(errors)} programs (target "
              f"{TARGET_ERROR:.0%}); {sum(e > 0 for e in errors)} slower than measured, "
              f"{sum(e < 0 for e in errors)} faster; more than {FLAG_FACTOR:g}x off with no "
              f"caution: {', '.join(far) or 'none'}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"target": TARGET, "chip": chip["device_kind"], "rows": rows}, f, indent=1)
    if not args.kept_hlo:
        import explorer
        explorer._src.compile.pool.default_pool().close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
