"""Validate the cost model on real NVIDIA GPUs: predicted against measured times, per case.

Run it on a machine with GPUs and jax's CUDA plugin (`pip install -e . "jax[cuda12]"`):

    python benchmarks/gpu_validate.py [--out results.json] [--repeats 15] [--skip-steps]

1. Collectives: all-gather, all-reduce, reduce-scatter and all-to-all of several sizes over a 1-D
   mesh of the local GPUs (jax.shard_map with lax.all_gather / psum / psum_scatter /
   all_to_all), against explorer._src.cost.collectives.collective_time on the matching catalog
   target (h100-8, h200-4, ...) with the default mapping. V is the cost model's V: bytes per
   device of the gathered result (all-gather), the full operand (reduce-scatter), the buffer
   (all-reduce, all-to-all).
2. Steps: a few strategy presets on built-in workloads, compiled for real on a GPU mesh with
   random inputs placed by the preset's specs, against the estimate that explorer makes from
   the same request compiled on fake CPU devices (`analyze_workload(..., target=...)`:
   report.estimate.step_lower_seconds with full overlap, step_upper_seconds with none).

Times are medians over --repeats samples after warm-up; each sample runs the program enough
times back to back (async dispatch, one block_until_ready at the end) to last about 20 ms, so
launch overhead is amortised as it would be in a training loop. Calls cannot go faster than the
host dispatches them: a program without a collective, timed the same way, gives that floor, and
collectives that measure within 1.5x of it are marked and left out of the medians. The error is
(predicted - measured) / measured; the target (issue 4) is a median absolute error under 15%
for step time.

With one GPU there is nothing to communicate: only single-device steps (mesh axes of size 1)
are compared. Without a GPU the script says so and exits with status 0.

--dry-run-cpu N runs the whole path on N fake CPU devices with tiny sizes against an h100-N
target, so the code can be tested on any machine; its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import platform
import re
import statistics
import sys
import time

KINDS = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all")
MiB = 2**20
GPU_SIZES = (64 * 2**10, MiB, 16 * MiB, 256 * MiB, 1024 * MiB)   # V, bytes per device
DRY_SIZES = (4 * 2**10, 64 * 2**10, MiB)
TARGET_ERROR = 0.15       # issue 4: median |error| of step time under 15%
SAMPLE_S = 0.02           # each timing sample lasts about this long
MAX_BATCH_BYTES = 4 * 2**30   # outputs kept alive per sample, per device
DISPATCH_MARGIN = 1.5         # a collective under 1.5x the dispatch floor measures the host
MAX_INNER = 200               # calls per sample at most; 1 in a CPU dry run (see time_call)

# device_kind substring -> catalog GPU generation (explorer/_src/cost/catalog/gpu.py). The catalog
# models
# SXM parts in DGX nodes (NVLink switch); other form factors are compared against the same.
GPU_KINDS = (("b200", "b200"), ("h200", "h200"), ("h100", "h100"), ("a100", "a100"))
GPUS_PER_TARGET = (1, 2, 4, 8)

# jax's GPU backends come as plugins; without one, jax.devices("gpu") cannot succeed. (A ROCm GPU
# is found too, and then stopped at pick_target: the catalog has no AMD GPU.)
GPU_PLUGINS = ("jax_plugins.xla_cuda12", "jax_plugins.xla_cuda13", "jax_cuda12_plugin",
               "jax_cuda13_plugin", "jax_plugins.xla_rocm", "jax_plugins.xla_rocm6",
               "jax_plugins.xla_rocm7", "jax_rocm6_plugin", "jax_rocm7_plugin")


def gpu_plugin() -> str | None:
    for name in GPU_PLUGINS:
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except (ImportError, ValueError):
            continue
    return None


def no_gpu(reason: str) -> int:
    print(f"gpu_validate: no GPU, nothing measured ({reason}). Run this on a machine with "
          "NVIDIA GPUs and jax's CUDA plugin (pip install 'jax[cuda12]') to compare the cost "
          "model with real times.")
    return 0


# ---------------------------------------------------------------------------------------------
# Timing.

def _device_bytes(out) -> int:
    import jax

    total = 0
    for leaf in jax.tree.leaves(out):
        shards = getattr(leaf, "addressable_shards", None)
        total += shards[0].data.nbytes if shards else getattr(leaf, "nbytes", 0)
    return total


def time_call(call, repeats: int) -> float:
    """Median seconds per call: compile and warm up, then `repeats` samples of `inner` calls
    dispatched back to back and waited for once.

    On fake CPU devices (--dry-run-cpu) only one call is in flight at a time: the CPU backend's
    in-process collectives deadlock with dozens of executions queued on two cores."""
    import jax

    out = call()
    jax.block_until_ready(out)            # compile
    for _ in range(2):
        jax.block_until_ready(call())     # warm up (allocator, NCCL communicators)
    t0 = time.perf_counter()
    jax.block_until_ready(call())
    single = time.perf_counter() - t0
    inner = max(1, min(MAX_INNER, int(SAMPLE_S / max(single, 1e-6))))
    inner = max(1, min(inner, MAX_BATCH_BYTES // max(_device_bytes(out), 1)))
    del out
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        outs = [call() for _ in range(inner)]
        jax.block_until_ready(outs)
        samples.append((time.perf_counter() - t0) / inner)
        del outs
    return statistics.median(samples)


def error(predicted: float | None, measured: float) -> float | None:
    return None if predicted is None or measured <= 0 else (predicted - measured) / measured


def fmt_s(s: float | None) -> str:
    from explorer._src.units import format_seconds

    return format_seconds(s)


def fmt_err(e: float | None) -> str:
    return "—" if e is None else f"{e * 100:+.1f}%"


def fmt_bytes(n: float) -> str:
    from explorer._src.units import format_bytes

    return format_bytes(n)


def median_abs(errors) -> float | None:
    errors = [abs(e) for e in errors if e is not None]
    return statistics.median(errors) if errors else None


# ---------------------------------------------------------------------------------------------
# Collectives.

_OPCODE = re.compile(r"\b(all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute)"
                     r"(?:-start)?\(")


def collective_program(kind: str, mesh):
    import jax
    from jax.sharding import PartitionSpec as P

    def body(a):
        if kind == "all-reduce":
            return jax.lax.psum(a, "x")
        if kind == "all-gather":
            return jax.lax.all_gather(a, "x", tiled=True)
        if kind == "reduce-scatter":
            return jax.lax.psum_scatter(a, "x", scatter_dimension=0, tiled=True)
        return jax.lax.all_to_all(a, "x", 0, 0, tiled=True)

    def nothing(a):      # the same dispatch and one tiny kernel per device, no communication
        return a + 1

    # out_specs P("x"): every device's own result is kept as it is; nothing moves to assemble it.
    return jax.jit(jax.shard_map(nothing if kind == "none" else body, mesh=mesh,
                                 in_specs=P("x"), out_specs=P("x")))


def measure_collectives(devices, target: str, sizes, repeats: int) -> list[dict]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import AxisType, Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from explorer._src.cost.collectives import collective_time
    from explorer._src.cost.mapping import default_mapping

    k = len(devices)
    mesh = Mesh(np.array(devices), ("x",), axis_types=(AxisType.Auto,))
    mapping = default_mapping(target, ("x",), (k,))
    dtype = jnp.float32
    itemsize = jnp.dtype(dtype).itemsize

    def ones(elements: int):
        make = jax.jit(lambda: jnp.ones((elements,), dtype),
                       out_shardings=NamedSharding(mesh, P("x")))
        return make()

    # Back-to-back calls cannot go faster than the host dispatches them: a program with no
    # collective, timed the same way, gives that floor. Rows near it measure dispatch, not NCCL.
    tiny, nothing = ones(k * 256), collective_program("none", mesh)
    floor = time_call(lambda: nothing(tiny), repeats)
    print(f"  dispatch floor (no collective): {fmt_s(floor)} per call", file=sys.stderr)
    rows = []
    for kind in KINDS:
        fn = collective_program(kind, mesh)
        for v in sizes:
            # Elements per device going in: the shard for an all-gather, V for the others.
            local = v // itemsize // (k if kind == "all-gather" else 1)
            if local % k or local == 0:
                print(f"  skip {kind} of {fmt_bytes(v)}: {local} elements do not split {k} ways",
                      file=sys.stderr)
                continue
            a = ones(local * k)
            hlo = fn.lower(a).compile().as_text()
            ops = sorted(set(_OPCODE.findall(hlo)))
            seconds = time_call(lambda fn=fn, a=a: fn(a), repeats)
            pred = collective_time(kind, v, ("x",), target, mapping, group_size=k)
            rows.append({"kind": kind, "bytes": v, "group": k, "measured_s": seconds,
                         "predicted_s": pred.seconds, "bound": pred.bound, "links": pred.links,
                         "error": error(pred.seconds, seconds), "hlo_ops": ops,
                         "dispatch_floor_s": floor,
                         "dispatch_bound": seconds < DISPATCH_MARGIN * floor})
            flag = "" if ops == [kind] else f"  (compiled to {ops or 'no collective'})"
            print(f"  {kind:15} {fmt_bytes(v):>10}: measured {fmt_s(seconds):>9}, predicted "
                  f"{fmt_s(pred.seconds):>9}{flag}", file=sys.stderr)
            del a
    return rows


# ---------------------------------------------------------------------------------------------
# Steps of presets.

def step_cases(k: int, small: bool) -> list[dict]:
    """(workload, preset, mesh, params): sized so that an H100 spends milliseconds per step."""
    m = 2 if k >= 2 else 1                # model axis of the 2-D case
    if small:
        mlp = {"batch": 64, "d_model": 128, "d_ff": 256, "dtype": "bfloat16"}
        tt = {"batch": 8, "seq": 32, "vocab": 256, "d_model": 64, "heads": 4, "d_head": 16,
              "d_ff": 256, "layers": 2, "dtype": "bfloat16"}
        moe = {"batch": 8, "seq": 64, "d_model": 128, "d_ff": 256, "experts": 8, "top_k": 2,
               "dtype": "bfloat16"}
    else:
        mlp = {"batch": 16384, "d_model": 8192, "d_ff": 32768, "dtype": "bfloat16"}
        tt = {"batch": 16, "seq": 1024, "vocab": 8192, "d_model": 2048, "heads": 16,
              "d_head": 128, "d_ff": 8192, "layers": 4, "dtype": "bfloat16"}
        moe = {"batch": 16, "seq": 2048, "d_model": 2048, "d_ff": 8192, "experts": 8,
               "top_k": 2, "dtype": "bfloat16"}
    return [
        {"workload": "mlp_train", "preset": "dp", "mesh": f"data={k}", "params": mlp},
        {"workload": "mlp_train", "preset": "fsdp", "mesh": f"data={k}", "params": mlp},
        {"workload": "mlp", "preset": "megatron", "mesh": f"model={k}", "params": mlp},
        {"workload": "transformer_train", "preset": "fsdp_tp",
         "mesh": f"data={k // m},model={m}", "params": tt},
        {"workload": "moe", "preset": "ep", "mesh": f"expert={k}", "params": moe},
    ]


def build_case(case: dict):
    """The function, its input TensorSpecs and the MeshSpec, as analyze_workload builds them."""
    from explorer._src.spec.mesh import parse_mesh
    from explorer._src.strategy.plan import plan
    from explorer._src.workloads.registry import get_workload

    workload = get_workload(case["workload"])
    params = workload.resolve(case["params"])
    mesh_spec = parse_mesh(case["mesh"])
    if workload.check is not None:
        workload.check(params, mesh_spec)
    layout = plan(workload, params, mesh_spec, None, case["preset"], None, None)
    tensors = workload.tensors(params, layout.specs)
    fn = workload.build(params)
    if layout.constraints:
        fn = functools.partial(fn, constraints=layout.constraints)
    return fn, tensors, mesh_spec


def random_input(spec, mesh, key):
    """A random array of spec's shape and dtype, created already sharded (no host copy)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    dtype = jnp.dtype(spec.dtype)
    sharding = NamedSharding(mesh, P(*spec.spec))
    if jnp.issubdtype(dtype, jnp.integer):
        # Token ids: 0 and 1 are valid for any vocabulary.
        make = jax.jit(lambda k: jax.random.randint(k, spec.shape, 0, 2, dtype),
                       out_shardings=sharding)
    else:
        make = jax.jit(lambda k: (0.02 * jax.random.normal(k, spec.shape, jnp.float32))
                       .astype(dtype), out_shardings=sharding)
    return make(key)


def measure_step(case: dict, devices, repeats: int) -> tuple[float, list[str]]:
    import jax
    import numpy as np
    from jax.sharding import AxisType, Mesh

    fn, tensors, mesh_spec = build_case(case)
    mesh = Mesh(np.array(devices[:mesh_spec.device_count]).reshape(mesh_spec.sizes),
                mesh_spec.names, axis_types=(AxisType.Auto,) * len(mesh_spec.names))
    jax.config.update("jax_use_shardy_partitioner", True)   # as the compile workers do
    keys = jax.random.split(jax.random.key(0), len(tensors))
    with jax.set_mesh(mesh):    # constraints in the workloads are bare PartitionSpecs
        args = [random_input(t, mesh, key) for t, key in zip(tensors, keys, strict=True)]
        jitted = jax.jit(fn, keep_unused=True)
        ops = _OPCODE.findall(jitted.lower(*args).compile().as_text())
        seconds = time_call(lambda: jitted(*args), repeats)
    return seconds, ops


def measure_steps(cases: list[dict], devices, repeats: int, ops_key: str) -> list[dict]:
    """Each predicted case timed on `devices`, with its error against the prediction and the
    collectives its program holds (under `ops_key`); a case that was skipped or that fails
    (e.g. out of the device's memory) is kept with why, and the others go on."""
    steps = []
    for case in cases:
        name = f"{case['workload']} {case['preset']} {case['mesh']}"
        if "skipped" in case:
            print(f"  skip {name}: {case['skipped']}", file=sys.stderr)
            steps.append(case)
            continue
        print(f"step {name} ...", file=sys.stderr)
        try:
            seconds, ops = measure_step(case, devices, repeats)
        except Exception as e:   # e.g. out of memory on a smaller device: report, go on
            print(f"  failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}",
                  file=sys.stderr)
            steps.append({**case, "failed": f"{type(e).__name__}: {e}"[:2000]})
            continue
        steps.append({**case, "measured_s": seconds, ops_key: ops,
                      "error_lower": error(case["predicted_lower_s"], seconds),
                      "error_upper": error(case["predicted_upper_s"], seconds)})
    return steps


def predict_steps(cases: list[dict], target: str, extra=None) -> list[dict]:
    """The explorer's estimate of each case, compiled in its workers (on fake CPU devices for a
    GPU target here); `extra(report)`, when given, adds fields of its own to each case."""
    import explorer

    out = []
    for case in cases:
        try:
            report = explorer.analyze_workload(case["workload"], case["mesh"],
                                               params=case["params"], preset=case["preset"],
                                               target=target)
        except explorer.ExplorerError as e:
            out.append({**case, "skipped": str(e)})
            continue
        est = report.estimate
        out.append({**case, "predicted_lower_s": est.step_lower_seconds,
                    "predicted_upper_s": est.step_upper_seconds, "bound": est.bound,
                    "compute_s": est.compute.seconds, "comm_s": est.comm_seconds,
                    "cpu_collectives": [c.kind for c in report.collectives],
                    "notes": list(est.notes), **(extra(report) if extra else {})})
    explorer._src.compile.pool.default_pool().close()
    return out


# ---------------------------------------------------------------------------------------------

def pick_target(device_kind: str, count: int, override: str | None) -> tuple[str, int]:
    from explorer._src.cost.catalog.names import get_target

    if override:
        t = get_target(override)
        if t.family != "gpu" or not t.chips or t.chips > count:
            raise SystemExit(f"--target {override}: needs a GPU target of at most {count} GPUs "
                             f"(this machine has {count})")
        return t.name, t.chips
    kind = device_kind.lower()
    gen = next((g for key, g in GPU_KINDS if key in kind), None)
    if gen is None:
        raise SystemExit(f"GPU {device_kind!r} is not in the hardware catalog "
                         f"({', '.join(g for _, g in GPU_KINDS)}); pass --target, e.g. "
                         "--target h100-8, to compare against one of those")
    usable = max(n for n in GPUS_PER_TARGET if n <= count)
    return f"{gen}-{usable}", usable


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the results as JSON to this path")
    ap.add_argument("--repeats", type=int, default=15, help="timing samples per case")
    ap.add_argument("--target", help="catalog target to compare with (default: from the GPU "
                    "name and count, e.g. h100-8)")
    ap.add_argument("--skip-collectives", action="store_true")
    ap.add_argument("--skip-steps", action="store_true")
    ap.add_argument("--dry-run-cpu", type=int, metavar="N", choices=GPUS_PER_TARGET,
                    help="test the code path on N fake CPU devices with tiny sizes "
                    "(numbers are meaningless)")
    args = ap.parse_args()

    global MAX_INNER
    dry = args.dry_run_cpu
    if dry:
        MAX_INNER = 1
        os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={dry}"
        os.environ["JAX_PLATFORMS"] = "cpu"
    elif gpu_plugin() is None:
        # Checked before jax starts: initialising every backend just to find none is slow and
        # noisy (libtpu, when installed, warns about its environment).
        return no_gpu("jax has no GPU plugin installed, so jax.devices('gpu') cannot succeed")

    import jax

    if dry:
        devices = jax.devices("cpu")
    else:
        try:
            devices = [d for d in jax.devices("gpu") if d.process_index == jax.process_index()]
        except RuntimeError as e:
            hint = (f"; JAX_PLATFORMS={os.environ['JAX_PLATFORMS']!r} is set"
                    if os.environ.get("JAX_PLATFORMS") else "")
            return no_gpu(f"jax found none: {str(e).splitlines()[0]}{hint}")
        if not devices:
            return no_gpu("jax found none on this process")

    device_kind = devices[0].device_kind
    target, k = pick_target(device_kind, len(devices), args.target or
                            (f"h100-{dry}" if dry else None))
    devices = devices[:k]
    print(f"# {len(devices)} x {device_kind} (jax {jax.__version__}, {jax.default_backend()})"
          f", compared with catalog target {target}" + (" — DRY RUN ON CPU, numbers are "
                                                         "meaningless" if dry else ""))
    if any(s in device_kind.lower() for s in ("pcie", "nvl", "gh200", "gb200")):
        print(f"note: the catalog models SXM GPUs in DGX nodes; {device_kind} differs "
              "(links, clocks or memory), so expect larger errors")
    results: dict = {"device_kind": device_kind, "devices": len(devices), "target": target,
                     "jax": jax.__version__, "host": platform.node(), "dry_run": bool(dry),
                     "date": time.strftime("%Y-%m-%d"), "collectives": [], "steps": []}

    # The explorer's predictions first: its CPU workers then sit idle during the GPU timings.
    cases = [] if args.skip_steps else predict_steps(step_cases(k, bool(dry)), target)

    if args.skip_collectives:
        pass
    elif k == 1:
        print("one GPU: no collective to measure; comparing single-device step times only "
              "(every mesh axis has size 1, so the programs have no collectives)")
    else:
        print(f"collectives over {k} devices ...", file=sys.stderr)
        results["collectives"] = measure_collectives(devices, target,
                                                     DRY_SIZES if dry else GPU_SIZES,
                                                     args.repeats)

    results["steps"] = measure_steps(cases, devices, args.repeats, "gpu_collectives")

    report(results)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
        print(f"\nwrote {args.out}")
    return 0


def report(results: dict) -> None:
    colls = results["collectives"]
    if colls:
        print(f"\n## Collectives over {results['devices']} GPUs ({results['target']}, "
              "float32)\n")
        print("| collective | V per device | predicted | measured | error | predicted bound |")
        print("|---|---|---|---|---|---|")
        for r in colls:
            note = " (≈ dispatch floor)" if r["dispatch_bound"] else ""
            print(f"| {r['kind']} | {fmt_bytes(r['bytes'])} | {fmt_s(r['predicted_s'])} | "
                  f"{fmt_s(r['measured_s'])}{note} | {fmt_err(r['error'])} | "
                  f"{r['bound'] or '—'} |")
        timed = [r for r in colls if not r["dispatch_bound"]]
        mae = median_abs(r["error"] for r in timed)
        big = median_abs(r["error"] for r in timed if r["bound"] == "bandwidth")
        results["median_abs_error_collectives"] = mae
        results["median_abs_error_collectives_bandwidth_bound"] = big
        print(f"\nHost dispatch floor: {fmt_s(colls[0]['dispatch_floor_s'])} per call; "
              f"{len(colls) - len(timed)} row(s) within {DISPATCH_MARGIN}x of it are left out "
              f"of the medians. Median |error|: {fmt_err(mae).lstrip('+')} over the other "
              f"{len(timed)}"
              + (f", {fmt_err(big).lstrip('+')} over the bandwidth-bound ones" if big else "")
              + ".")
    steps = [s for s in results["steps"] if "measured_s" in s]
    if results["steps"]:
        print(f"\n## Steps ({results['devices']} x {results['device_kind']}, predicted for "
              f"{results['target']})\n")
        print("| workload | preset | mesh | predicted (full overlap … none) | measured | "
              "error vs full overlap | error vs none | predicted bound | collectives "
              "(CPU / GPU compile) |")
        print("|---|---|---|---|---|---|---|---|---|")
        for s in results["steps"]:
            head = f"| {s['workload']} | {s['preset']} | {s['mesh']} |"
            if "measured_s" not in s:
                why = s.get("skipped") or s.get("failed") or "?"
                print(f"{head} — | — | — | — | — | {why.splitlines()[0][:120]} |")
                continue
            print(f"{head} {fmt_s(s['predicted_lower_s'])} … {fmt_s(s['predicted_upper_s'])} | "
                  f"{fmt_s(s['measured_s'])} | {fmt_err(s['error_lower'])} | "
                  f"{fmt_err(s['error_upper'])} | {s['bound'] or '—'} | "
                  f"{len(s['cpu_collectives'])} / {len(s['gpu_collectives'])} |")
    if steps:
        lower = median_abs(s["error_lower"] for s in steps)
        upper = median_abs(s["error_upper"] for s in steps)
        results["median_abs_error_step_lower"] = lower
        results["median_abs_error_step_upper"] = upper
        verdict = ("met" if lower is not None and lower < TARGET_ERROR else "NOT met")
        print(f"\nStep time, median |error| over {len(steps)} cases: "
              f"{fmt_err(lower).lstrip('+')} against the full-overlap prediction (target "
              f"< {TARGET_ERROR:.0%}: **{verdict}**), {fmt_err(upper).lstrip('+')} against "
              "the no-overlap one.")
        if results["dry_run"]:
            print("(dry run on CPU devices: these numbers test the code path, nothing else)")


if __name__ == "__main__":
    sys.exit(main())
