"""The caller's contexts reach the program compiled and run on a TPU chip.

    python benchmarks/tpu_caller_context.py [--out DIR] [--precisions default high highest]

A float32 matmul chain is given to `explorer.analyze(fn, x, w, mesh="data=1",
target="tpu-v5e-1x1", measure=True)` at each precision asked (default: as written, and inside
the caller's `jax.default_matmul_precision("highest")`, six bfloat16 passes instead of one on a
TPU; "high" is three). The
explorer traces the function where it is called, so the second program is the one jax runs
under that context. Plain jax's own jit of the same call, timed on the chip under the same
context, is the ground truth. Writes DIR/caller_context.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time

N = 4096
PRECISIONS = {"default": None, "high": "high", "highest": "highest"}


def _plain_seconds(fn, *args, repeats: int = 10) -> float:
    import jax
    jitted = jax.jit(fn)
    jax.block_until_ready(jitted(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(jitted(*args))
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--plain", action="store_true", help="time plain jax's jit alone")
    ap.add_argument("--precisions", nargs="*", default=["default", "highest"],
                    choices=list(PRECISIONS))
    args = ap.parse_args()
    import jax
    import jax.numpy as jnp

    def chain(x, w):
        for _ in range(4):
            x = jnp.tanh(x @ w)
        return x

    if args.plain:
        x = jnp.ones((N, N), jnp.float32)
        w = jnp.ones((N, N), jnp.float32) / N
        for precision in (PRECISIONS[p] for p in args.precisions):
            ctx = (jax.default_matmul_precision(precision) if precision
                   else contextlib.nullcontext())
            with ctx:
                print(json.dumps({"who": "plain jax", "precision": precision or "default",
                                  "measured_s": _plain_seconds(chain, x, w)}))
        return 0
    # Plain jax in a process of its own: one process at a time may hold the chip, and the
    # explorer's compile worker must hold it next.
    plain = subprocess.run([sys.executable, __file__, "--plain", "--precisions",
                            *args.precisions], capture_output=True,
                           text=True, check=True).stdout
    rows = [json.loads(line) for line in plain.splitlines() if line.startswith("{")]
    x_struct = jax.ShapeDtypeStruct((N, N), jnp.float32)
    out = {"jax": jax.__version__, "rows": rows}
    import explorer
    for precision in (PRECISIONS[p] for p in args.precisions):
        ctx = (jax.default_matmul_precision(precision) if precision
               else contextlib.nullcontext())
        with ctx:
            report = explorer.analyze(chain, x_struct, x_struct, mesh="data=1",
                                      target="tpu-v5e-1x1", measure=True)
        t, est = report.timing, report.estimate
        rows.append({"who": "explorer", "precision": precision or "default",
                     "measured_s": t.measured_s, "measured_device_s": t.measured_device_s,
                     "predicted_s": est.step_trace_seconds if est else None,
                     "measure_note": t.measure_note, "notes": list(report.notes)})
    for row in rows:
        print(json.dumps({k: v for k, v in row.items() if k != "notes"}), flush=True)
    with open(os.path.join(args.out, "caller_context.json"), "w") as f:
        json.dump(out, f, indent=1)
    explorer._src.compile.pool.default_pool().close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
