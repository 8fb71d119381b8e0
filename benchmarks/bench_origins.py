"""Benchmark: what reading the origins of every tensor's layout costs an analysis, side by side.

The origins come from Shardy's module after propagation, which it writes only when the dump's
pass regex names `shardy-verbose` (its record of where each axis came from is kept while it
propagates, then the module is written). Each round compiles one program twice in this process,
as the worker does (`explorer._src.compile.backend.compile_request`, on the program lowered as the
caller lowers it, `explorer._src.compile.lowering.lower_program`), with `origins=True` (the regex
with `shardy-verbose`) and without, and builds the Report from each
(`explorer._src.report.build.build_report`, which reads the origins when the module is there); the
order of the two alternates, and each round uses a new batch size so that no compile is
answered from a cache. Each ratio is the median of the per-round ratios of (compile + build),
in CPU time of this process and in wall time.

Run by hand:  .venv/bin/python benchmarks/bench_origins.py [--repeats 5]
Prints a markdown table for docs/performance.md.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from explorer._src.api.request import check_mesh  # noqa: E402
from explorer._src.compile import backend  # noqa: E402
from explorer._src.compile.lowering import lower_program  # noqa: E402
from explorer._src.report.build import build_report  # noqa: E402
from explorer._src.strategy.plan import plan  # noqa: E402
from explorer._src.workloads.registry import get_workload  # noqa: E402

WITH, WITHOUT = True, False
CASES = (
    ("mlp_train, megatron", "mlp_train", "megatron", {}),
    ("transformer_train 12 layers, fsdp_tp", "transformer_train", "fsdp_tp", {"layers": 12}),
)
MESH = "data=2,model=4"


def _program(name: str, preset: str, params: dict, batch: int):
    """The workload's program as the caller lowers it, its flat inputs and the mesh."""
    w = get_workload(name)
    resolved = w.resolve({**params, "batch": batch})
    mesh = check_mesh(MESH, "auto")
    layout = plan(w, resolved, mesh, None, preset, None, None)
    fn = w.build(resolved)
    if layout.constraints:
        fn = functools.partial(fn, constraints=layout.constraints)
    tensors = tuple(w.tensors(resolved, layout.specs))
    return lower_program(fn, tensors, mesh, "cpu", "shardy"), tensors, mesh


def _analysis(program, tensors, mesh, origins: bool) -> tuple[float, float, float, float, int]:
    """Wall seconds to compile and to build the Report, the same in CPU seconds of this
    process (XLA's threads included: steadier than wall time on a shared machine), and the
    bytes of Shardy's module."""
    t0, c0 = time.perf_counter(), time.process_time()
    raw = backend.compile_request(program, tensors, mesh, "shardy", origins=origins)
    t1, c1 = time.perf_counter(), time.process_time()
    build_report(raw, mesh, "shardy")
    t2, c2 = time.perf_counter(), time.process_time()
    return t1 - t0, t2 - t1, c1 - c0, c2 - c1, len(raw.propagated_mlir or "")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print("| program | compile without / with (CPU) | build without / with (CPU) | Shardy's "
          "module | with / without, CPU time | with / without, wall time |")
    print("|---|---|---|---|---|---|")
    for label, name, preset, params in CASES:
        _analysis(*_program(name, preset, params, 8), WITH)          # warm jax and XLA
        rows: dict[bool, list] = {WITH: [], WITHOUT: []}
        cpu, wall = [], []
        for k in range(args.repeats):
            program = _program(name, preset, params, 16 + 8 * k)
            first, second = (WITH, WITHOUT) if k % 2 else (WITHOUT, WITH)
            runs = {first: _analysis(*program, first), second: _analysis(*program, second)}
            for asked in (WITH, WITHOUT):
                rows[asked].append(runs[asked])
            wall.append(sum(runs[WITH][:2]) / sum(runs[WITHOUT][:2]))
            cpu.append(sum(runs[WITH][2:4]) / sum(runs[WITHOUT][2:4]))

        print(f"| {label} | {_ms(rows, WITHOUT, 2)} / {_ms(rows, WITH, 2)} ms | "
              f"{_ms(rows, WITHOUT, 3)} / {_ms(rows, WITH, 3)} ms | "
              f"{rows[WITH][0][4] / 1024:.0f} KiB | {_ratio(cpu)} | {_ratio(wall)} |")


def _ms(rows: dict, asked: bool, i: int) -> str:
    return f"{statistics.median(r[i] for r in rows[asked]) * 1e3:.0f}"


def _ratio(values: list[float]) -> str:
    return f"**{statistics.median(values):.3f}** ({min(values):.2f}–{max(values):.2f})"


if __name__ == "__main__":
    main()
