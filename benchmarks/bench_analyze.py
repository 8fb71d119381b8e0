"""Benchmark: explorer.analyze against a bare jax.jit(...).lower(...).compile() of the same
program, in the same run and machine state, without a target and priced for one (the same CPU
compile, its Report then priced on the target); plus the cache-hit latency and a 2048-device
step.

Run by hand:  .venv/bin/python benchmarks/bench_analyze.py [--repeats 7]
Prints a markdown table for docs/performance.md. Timings are wall-clock medians.

`--workload NAME` measures a built-in workload's uncached analysis (its Request made, traced,
lowered and compiled) against its bare trace and compile the same way.

`--small` measures small programs instead (the app's edit latency check: the MLP with x of
256 x 512, w1 of 512 x ~1100 and w2 back, on 8 fake devices, a bare compile of 50-100 ms), where
the fixed cost of an analysis over the compile shows most; each round a new d_ff, the two sides
in alternating order, the ratio the median of the paired rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import explorer  # noqa: E402
from explorer._src.compile.protocol import WorkerKey  # noqa: E402
from explorer._src.workloads.registry import WORKLOADS  # noqa: E402

MESH = "data=2,model=4"
TARGET = "h100-8"
SPECS = {"x": ("data", None), "w1": (None, "model"), "w2": ("model", None)}


def bare_compile(fn, tensors) -> float:
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"),
                axis_types=(AxisType.Auto,) * 2)
    args = [jax.ShapeDtypeStruct(t.shape, t.dtype, sharding=NamedSharding(mesh, P(*t.spec)))
            for t in tensors]
    t0 = time.perf_counter()
    with jax.set_mesh(mesh):
        jax.jit(fn).lower(*args).compile()
    return time.perf_counter() - t0


def timed_analyze(fn, tensors, target: str | None = None) -> float:
    """Seconds of one uncached analysis (no cache in memory or on disk is read, and the
    function is traced again: the lowered programs kept for an unchanged request are
    forgotten). With a target, still the CPU compile (compile_for="cpu"), so that it is the
    bare compile's program, priced."""
    explorer.clear_cache()
    t0 = time.perf_counter()
    explorer.analyze(fn, *tensors, mesh=MESH, use_cache=False, target=target, compile_for="cpu")
    return time.perf_counter() - t0


def program(batch: int):
    w = WORKLOADS["mlp_train"]
    params = w.resolve({"batch": batch})
    return w.build(params), w.tensors(params, SPECS)


def small_program(d_ff: int):
    w = WORKLOADS["mlp"]
    params = w.resolve({"batch": 256, "d_model": 512, "d_ff": d_ff})
    return w.build(params), w.tensors(params, SPECS)


def small_programs(repeats: int) -> None:
    fn, tensors = small_program(1024)
    bare_compile(fn, tensors)                                     # warm both sides
    explorer.analyze(fn, *tensors, mesh=MESH, use_cache=False)
    bare, ours = [], []
    for i in range(repeats):
        fn, tensors = small_program(1024 + 4 * (i + 19))          # 1100 and on: all new
        sides = [(bare, bare_compile), (ours, timed_analyze)]
        for times, measure in sides if i % 2 else sides[::-1]:
            times.append(measure(fn, tensors))
    ratios = [o / b for o, b in zip(ours, bare, strict=True)]
    print("| measurement (small programs) | value |")
    print("|---|---|")
    print(f"| mlp 256x512x~1100 on {MESH}, bare jit.lower.compile, median | "
          f"{statistics.median(bare) * 1e3:.0f} ms |")
    print(f"| same programs through explorer.analyze (uncached), median | "
          f"{statistics.median(ours) * 1e3:.0f} ms |")
    print(f"| ratio analyze / bare, median of {repeats} paired rounds (target <= 1.3) | "
          f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |")


def workload_request(name: str, round_: int) -> explorer.Request:
    """A new request of the workload each round (its batch grows), placed by rules, so that
    neither side may hit a cache and the program has collectives."""
    return explorer.Request(workload=name, mesh=MESH, rules="batch=data,mlp=model,heads=model",
                            params={"batch": 16 * (round_ + 2)})


def bare_workload_compile(name: str, round_: int) -> float:
    """The bare compile of the request's program, the trace included: the workload's function
    with its constraints, jitted on its inputs' shardings with its donation."""
    planned = workload_request(name, round_).planned
    fn = planned.workload.build(planned.params)
    constraints = planned.layout.constraints
    program = (lambda *a: fn(*a, constraints=constraints)) if constraints else fn
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"),
                axis_types=(AxisType.Auto,) * 2)
    args = [jax.ShapeDtypeStruct(t.shape, t.dtype, sharding=NamedSharding(mesh, P(*t.spec)))
            for t in planned.leaves]
    t0 = time.perf_counter()
    with jax.set_mesh(mesh):
        jax.jit(program, keep_unused=True, donate_argnums=planned.donated).lower(*args).compile()
    return time.perf_counter() - t0


def timed_workload(name: str, round_: int) -> float:
    """Seconds of one uncached analysis of the workload: the Request made (planned, traced and
    lowered) and compiled, nothing read from a cache."""
    explorer.clear_cache()
    t0 = time.perf_counter()
    explorer.analyze(workload_request(name, round_), use_cache=False)
    return time.perf_counter() - t0


def workload_programs(name: str, repeats: int) -> None:
    bare_workload_compile(name, 0)                                # warm both sides
    timed_workload(name, 0)
    bare, ours = [], []
    for i in range(1, repeats + 1):
        sides = [(bare, bare_workload_compile), (ours, timed_workload)]
        for times, measure in sides if i % 2 else sides[::-1]:
            times.append(measure(name, i))
    ratios = [o / b for o, b in zip(ours, bare, strict=True)]
    print(f"| measurement ({name}) | value |")
    print("|---|---|")
    print(f"| {name} on {MESH}, bare trace + jit.lower.compile, median | "
          f"{statistics.median(bare) * 1e3:.0f} ms |")
    print(f"| same programs through explorer.analyze(Request(workload=...)) (uncached), "
          f"median | {statistics.median(ours) * 1e3:.0f} ms |")
    print(f"| ratio analyze / bare, median of {repeats} paired rounds | "
          f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--skip-2048", action="store_true")
    ap.add_argument("--small", action="store_true", help="small programs only (see above)")
    ap.add_argument("--workload", help="a built-in workload's programs only (see "
                                       "workload_programs), e.g. transformer_train")
    args = ap.parse_args()
    if args.small or args.workload:
        if args.small:
            small_programs(args.repeats)
        else:
            workload_programs(args.workload, args.repeats)
        explorer._src.compile.pool.default_pool().close()
        return 0

    # Warm both paths: jax loaded and one compile done, here and in the worker.
    fn, tensors = program(8)
    bare_compile(fn, tensors)
    explorer.analyze(fn, *tensors, mesh=MESH, use_cache=False)

    bare, ours, priced = [], [], []
    for i in range(args.repeats):
        batch = 16 * (i + 2)   # a new shape each time: neither side may hit a compile cache
        fn, tensors = program(batch)
        sides = [(bare, bare_compile, ()), (ours, timed_analyze, ()),
                 (priced, timed_analyze, (TARGET,))]
        # Alternate the order so that drift on a shared machine hits every side.
        for times, measure, target_args in sides if i % 2 else sides[::-1]:
            times.append(measure(fn, tensors, *target_args))
    ratio = statistics.median(o / b for o, b in zip(ours, bare, strict=True))
    priced_ratio = statistics.median(o / b for o, b in zip(priced, bare, strict=True))

    fn, tensors = program(64)
    explorer.analyze(fn, *tensors, mesh=MESH)
    hits = []
    for _ in range(20):
        t0 = time.perf_counter()
        r = explorer.analyze(fn, *tensors, mesh=MESH)
        hits.append(time.perf_counter() - t0)
        assert r.timing.cached

    print("| measurement | value |")
    print("|---|---|")
    print(f"| mlp_train on {MESH}, bare jit.lower.compile, median | "
          f"{statistics.median(bare) * 1e3:.0f} ms |")
    print(f"| same programs through explorer.analyze (uncached), median | "
          f"{statistics.median(ours) * 1e3:.0f} ms |")
    print(f"| ratio analyze / bare, median of {args.repeats} paired runs (target <= 1.3) | "
          f"{ratio:.2f} |")
    print(f"| same programs through explorer.analyze(..., target={TARGET!r}), median | "
          f"{statistics.median(priced) * 1e3:.0f} ms |")
    print(f"| ratio priced analyze / bare, median of {args.repeats} paired runs (target <= 1.3) | "
          f"{priced_ratio:.2f} |")
    print(f"| cache hit, median of 20 (target < 30 ms) | {statistics.median(hits) * 1e3:.2f} ms |")

    if not args.skip_2048:
        mesh = "data=8,fsdp=16,model=16"
        w = WORKLOADS["mlp_train"]
        params = w.resolve({"batch": 2048, "d_model": 2048, "d_ff": 8192})
        tensors = w.tensors(params, {"x": ("data", None), "w1": ("fsdp", "model"),
                                     "w2": ("model", "fsdp")})
        t0 = time.perf_counter()
        explorer._src.compile.pool.default_pool().warm(WorkerKey.fake_cpu(2048))
        start = time.perf_counter() - t0
        t0 = time.perf_counter()
        r = explorer.analyze(w.build(params), *tensors, mesh=mesh, use_cache=False)
        warm = time.perf_counter() - t0
        print(f"| 2048-device worker start (jax import + 2048 devices) | {start:.1f} s |")
        print(f"| mlp_train on {mesh} (2048 devices), warm worker, uncached (target < 5 s) | "
              f"{warm:.2f} s (compile {r.timing.compile_s:.2f} s, "
              f"{len(r.collectives)} collectives, {len(r.tensors)} tensors) |")
    explorer._src.compile.pool.default_pool().close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
