"""Benchmark: the caller's lowering of a small program in one MLIR context per thread
(explorer/_src/compile/ir_context.py) against jax's new context per lowering, in the same run.

Run by hand:  .venv/bin/python benchmarks/bench_ir_context.py [--rounds 40]
Each round lowers the small MLP of bench_analyze.py --small (x 256 x 512, w1 512 x ~1100, w2
back, Megatron specs, data=2,model=4) once each way, in alternating order, each lowering a new
d_ff so that no jax cache answers it; prints the medians and their ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

import explorer._src.compile.lowering as lowering  # noqa: E402
from explorer import TensorSpec  # noqa: E402
from explorer._src.spec.mesh import parse_mesh  # noqa: E402

MESH = parse_mesh("data=2,model=4")


def mlp(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


def inputs(d_ff: int) -> tuple[TensorSpec, ...]:
    return (TensorSpec("x", (256, 512), spec=("data", None)),
            TensorSpec("w1", (512, d_ff), spec=(None, "model")),
            TensorSpec("w2", (d_ff, 512), spec=("model", None)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=40)
    rounds = parser.parse_args().rounds
    shared = lowering.shared_ir_context
    seconds: dict[str, list[float]] = {"shared context": [], "new context": []}
    lowering.trace_and_lower(mlp, inputs(1024), MESH, "cpu", "shardy")      # jax warmed up
    for i in range(rounds):
        for k, way in enumerate(("shared context", "new context")[::1 if i % 2 else -1]):
            # The explorer's lowering as it is, or with jax's new context per lowering.
            lowering.shared_ir_context = shared if way == "shared context" else \
                contextlib.nullcontext
            t0 = time.perf_counter()
            lowering.trace_and_lower(mlp, inputs(1100 + 8 * i + 4 * k), MESH, "cpu", "shardy")
            seconds[way].append(time.perf_counter() - t0)
    lowering.shared_ir_context = shared
    medians = {way: statistics.median(s) for way, s in seconds.items()}
    print("| caller's lowering of the small MLP | median of", rounds, "|")
    print("|---|---|")
    for way, s in medians.items():
        print(f"| {way} | {s * 1e3:.1f} ms |")
    print(f"| ratio shared / new | {medians['shared context'] / medians['new context']:.2f} |")


if __name__ == "__main__":
    main()
