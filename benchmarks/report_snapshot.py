"""Write the JSON of a fixed set of Reports to a folder, so that a refactoring can be checked to
leave every report byte-identical: run it before and after, then `diff -r BEFORE AFTER`.

    EXPLORER_DISK_CACHE=0 python benchmarks/report_snapshot.py /tmp/before

The set covers each built-in workload family, a user's own function shipped by value, and a
prediction on a GPU and a TPU target (so the cost model and the trace are in the JSON too). The
CPU's programs are compiled with compile_for="cpu", so that they do not depend on which extras
are installed; the two "-on-target" cases compile for the target itself (the gpu and tpu
extras).
Timings (compile and run seconds) differ run to run and are left out; everything else is kept,
the why of every collective included.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import jax

import explorer
from explorer import TensorSpec as T


def _user_mlp(x, w1, w2):
    return jax.nn.gelu(x @ w1) @ w2


CASES = {
    "mlp-megatron-h100": lambda: explorer.analyze_workload(
        "mlp", "data=2,model=4", preset="megatron", target="h100-8", compile_for="cpu"),
    "transformer-megatron-sp": lambda: explorer.analyze_workload(
        "transformer", "data=2,model=4", preset="megatron_sp", target="h100-8",
        compile_for="cpu"),
    "train-fsdp-tp-v5e": lambda: explorer.analyze_workload(
        "transformer_train", "data=4,model=4", preset="fsdp_tp", target="tpu-v5e-4x4",
        params={"layers": 2, "dtype": "bfloat16"}, compile_for="cpu"),
    "train-zero3": lambda: explorer.analyze_workload(
        "transformer_train", "data=8", preset="zero3", target="a100-8", compile_for="cpu"),
    "moe-ep": lambda: explorer.analyze_workload(
        "moe", "data=2,expert=4", preset="ep", target="h100-8", compile_for="cpu"),
    "pipeline-1f1b": lambda: explorer.analyze_workload(
        "pipeline", "stage=4", params={"schedule": "1f1b"}, target="h100-4",
        compile_for="cpu"),
    "user-function": lambda: explorer.analyze(
        _user_mlp, T("x", (256, 1024), spec="data,None"), T("w1", (1024, 4096)),
        T("w2", (4096, 1024)), mesh="data=2,model=4",
        specs={"w1": "None,model", "w2": "model,None"}, target="h100-8", compile_for="cpu"),
    "train-fsdp-tp-on-h100": lambda: explorer.analyze_workload(
        "transformer_train", "data=2,model=4", preset="fsdp_tp", target="h100-8",
        params={"layers": 2, "dtype": "bfloat16"}),
    "train-fsdp-tp-on-v5e": lambda: explorer.analyze_workload(
        "transformer_train", "data=4,model=4", preset="fsdp_tp", target="tpu-v5e-4x4",
        params={"layers": 2, "dtype": "bfloat16"}),
}


def snapshot(report) -> dict:
    d = report.to_dict()          # each collective's why is in it
    d.pop("timing", None)
    d["trace"] = asdict(report.trace) if report.trace is not None else None
    return d


def main(out: str) -> None:
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    for name, case in CASES.items():
        print(f"{name} ...", flush=True)
        text = json.dumps(snapshot(case()), indent=1, sort_keys=True, default=str)
        (folder / f"{name}.json").write_text(text + "\n")
    print(f"wrote {len(CASES)} reports to {folder}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "report-snapshot")
