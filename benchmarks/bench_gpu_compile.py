"""Benchmark: an analysis compiled for 64 H100s (XLA's GPU compiler, no GPU) against a bare
plain-jax deviceless compile of the same program, side by side in one run.

Both sides start from nothing, so start-up is counted on each: the bare side is a fresh Python
process that imports jax, builds the 64 devices from the same device description and lowers
and compiles; the explorer side is `analyze_workload(...)` on a fresh WorkerPool, whose first
request starts the GPU worker (and so imports jax there), compiles, reads the dumps and builds
and prices the Report. The program is a 12-layer bf16 `transformer_train` step under the
`fsdp_tp` preset on data=8,model=8.

Run by hand:  .venv/bin/python benchmarks/bench_gpu_compile.py [--repeats 3]
Needs the gpu extra. Prints a markdown table for docs/performance.md (wall-clock medians).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("EXPLORER_DISK_CACHE", "0")

import explorer  # noqa: E402
from explorer._src.compile.gpu import gpu_plugin_installed  # noqa: E402
from explorer._src.compile.pool import WorkerPool  # noqa: E402

MESH = "data=8,model=8"
TARGET = "h100-8x8"
PARAMS = {"layers": 12, "d_model": 1024, "d_ff": 4096, "heads": 16, "d_head": 64,
          "seq": 1024, "batch": 64, "vocab": 32000, "dtype": "bfloat16"}
PRESET = "fsdp_tp"

# The bare side: the explorer's planner gives the workload's function and the specs of its
# inputs (so both compile the same program), then plain jax does the rest.
BARE = """
import os, sys, time, json
t0 = time.perf_counter()
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P
from jax.experimental import topologies
from explorer._src.compile.gpu import gpu_topology
from explorer._src.spec.mesh import parse_mesh
from explorer._src.strategy.plan import plan
from explorer._src.workloads.registry import get_workload
import functools
mesh_text, target, preset, params = json.loads(sys.argv[1])
w = get_workload("transformer_train")
resolved = w.resolve(params)
spec = parse_mesh(mesh_text)
layout = plan(w, resolved, spec, None, preset, None, None)
tensors = w.tensors(resolved, layout.specs)
fn = w.build(resolved)
if layout.constraints:
    fn = functools.partial(fn, constraints=layout.constraints)
topo = gpu_topology(target)
devices = topologies.get_topology_desc(platform="cuda", topology=topo.topology,
                                       target_config=topo.config).devices
mesh = Mesh(np.array(devices).reshape(spec.sizes), spec.names,
            axis_types=(AxisType.Auto,) * len(spec.names))
args = [jax.ShapeDtypeStruct(t.shape, jnp.dtype(t.dtype), sharding=NamedSharding(mesh, P(*t.spec)))
        for t in tensors]
with jax.set_mesh(mesh):
    jax.jit(fn, keep_unused=True).lower(*args).compile()
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""


def bare() -> float:
    """Seconds of a fresh process's deviceless compile, jax's import included."""
    import json

    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_SKIP_CUDA_CONSTRAINTS_CHECK": "1"}
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", BARE, json.dumps([MESH, TARGET, PRESET, PARAMS])],
                         env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    assert json.loads(out.stdout.strip().splitlines()[-1])["seconds"] > 0
    return wall


def explorer_run() -> float:
    """Seconds of an analysis on a fresh pool: the GPU worker's start-up included."""
    pool = WorkerPool()
    try:
        t0 = time.perf_counter()
        report = explorer.analyze_workload("transformer_train", MESH, params=PARAMS,
                                           preset=PRESET, target=TARGET, pool=pool,
                                           use_cache=False)
        wall = time.perf_counter() - t0
    finally:
        pool.close()
    assert report.backend == "gpu" and report.estimate is not None
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if not gpu_plugin_installed():
        sys.exit("needs the gpu extra: pip install 'sharding-explorer[gpu]'")
    bares, ours = [], []
    for i in range(args.repeats):            # alternated, so the machine's state hits both
        bares.append(bare())
        ours.append(explorer_run())
        print(f"run {i + 1}: bare {bares[-1]:.2f} s, explorer {ours[-1]:.2f} s "
              f"({ours[-1] / bares[-1]:.2f}x)", file=sys.stderr, flush=True)
    b, o = statistics.median(bares), statistics.median(ours)
    print(f"| 12-layer bf16 train step, {MESH}, compiled for {TARGET} | "
          f"{b:.2f} s | {o:.2f} s | {o / b:.2f} |")


if __name__ == "__main__":
    main()
