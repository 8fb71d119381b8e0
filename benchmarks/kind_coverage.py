"""Per instruction kind, the model against the chip: the kept TPU v5e programs' instructions.

    python benchmarks/kind_coverage.py [DIR]

Prices each program's kept optimized HLO (DIR/hlo/NAME.hlo.txt.gz, as the chip compiled it) on
tpu-v5e-1x1 with no chip, sorts its compute instructions into the kinds of
explorer/_src/cost/coverage.py, and sets each beside its measured time (DIR/programs.json).
Prints, per kind: instructions, predicted and measured totals, and the largest measured over
predicted ratio among instructions predicted at 10 us or more. What the coverage table
(COVERAGE) was checked against.
"""

from __future__ import annotations

import gzip
import json
import os
import sys

DIR = "benchmarks/results/tpu-v5e-2026-12-06"
FLOOR_S = 10e-6     # predicted: below it, a relative error says little


def main() -> int:
    folder = sys.argv[1] if len(sys.argv) > 1 else DIR
    from explorer._src.cost.coverage import instruction_kind
    from explorer._src.cost.estimate import estimate
    from explorer._src.cost.ranges import scheduled_steps
    from explorer._src.hlo.schedule import read_schedule, schedule_work
    from explorer._src.report.trace import step_trace

    programs = json.load(open(os.path.join(folder, "programs.json")))["programs"]
    kinds: dict[str, dict] = {}
    for p in programs:
        path = os.path.join(folder, "hlo", f"{p['name']}.hlo.txt.gz")
        with gzip.open(path, "rt") as f:
            schedule = read_schedule(f.read())
        est = estimate([], None, None, None, "bfloat16", ["data"], [1], "tpu-v5e-1x1",
                       work=schedule_work(schedule))
        trace = step_trace(schedule, [], est)
        predicted: dict[str, float] = {}
        for e in trace.events:
            predicted[e.hlo] = predicted.get(e.hlo, 0.0) + e.duration
        steps = scheduled_steps(schedule)
        measured = {n: ns * 1e-9 for n, (ns, _) in p["op_ns_per_call"].items()}
        for name, pred in predicted.items():
            s = steps.get(name)
            if s is None or name not in measured:
                continue
            k = kinds.setdefault(instruction_kind(s, schedule.module),
                                 {"n": 0, "pred": 0.0, "meas": 0.0, "worst": (0.0, "")})
            k["n"] += 1
            k["pred"] += pred
            k["meas"] += measured[name]
            if pred >= FLOOR_S:
                ratio = measured[name] / pred
                if ratio > k["worst"][0]:
                    k["worst"] = (ratio, f"{p['name']}:{name}")
    print(f"{'kind':42} {'n':>5} {'predicted':>10} {'measured':>10} {'worst':>7}  where")
    for kind, k in sorted(kinds.items(), key=lambda kv: -kv[1]["meas"]):
        print(f"{kind[:42]:42} {k['n']:5} {k['pred'] * 1e3:9.3f}m {k['meas'] * 1e3:9.3f}m "
              f"{k['worst'][0]:7.2f}  {k['worst'][1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
