"""Measure on a TPU chip what the cost model assumes: matmul rates, HBM bandwidth, and the run
time of user-style programs, op by op.

Run it on a machine with the chip (it needs jax and the explorer's own dependencies, jax and
numpy, not its extras; the explorer's package is taken from this checkout):

    python benchmarks/tpu_measure.py --out DIR [--part rates|programs|all] [--small]

It writes DIR/chip_measurements.json as it goes (a run cut short keeps what it measured), and
two archives: DIR/chip_hlo.tar.gz, each program's optimized HLO as the chip compiled it, and
DIR/chip_profiles.tar.gz, the raw profiles (xplane.pb) of a few programs. The run of
2026-12-06 is kept in benchmarks/results/tpu-v5e-2026-12-06 (rates.json, programs.json, hlo/,
profiles.tar.gz), where tests read the HLO as fixtures.

Times are device times from a profile of the run (`jax.profiler.trace`, read back with
`jax.profiler.ProfileData`): the "XLA Modules" line gives each call's run on the chip, the
"XLA Ops" line each instruction's; the wall clock of back-to-back calls is kept beside them.
`--small` runs everything at toy sizes, on whatever jax has (the CPU too), to test the script.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import io
import json
import os
import statistics
import sys
import tarfile
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from user_programs import programs  # noqa: E402

from explorer._src.compile.device_profile import profile_calls  # noqa: E402

PROFILED_CALLS = 5
WALL_SAMPLES = 7
SAMPLE_S = 0.05
KEEP_PROFILES = ("layernorm_chain", "causal_attention_float32_softmax",
                 "pallas_flash_attention", "llama_train", "matmul_bf16_8192")

MATMUL_SHAPES = [(n, n, n) for n in (1024, 2048, 4096, 8192, 16384)] + [
    (8192, 8192, 1024), (8192, 1024, 8192), (1024, 8192, 8192), (32768, 4096, 4096),
    (4096, 4096, 32768), (256, 8192, 8192), (65536, 1024, 1024), (16384, 2048, 8192)]
HBM_MIB = (16, 64, 256, 1024, 2048)


def _random(leaf, key, int_high: int):
    if jnp.issubdtype(leaf.dtype, jnp.integer):
        return jax.random.randint(key, leaf.shape, 0, int_high, leaf.dtype)
    return (jax.random.normal(key, leaf.shape, jnp.float32) * 0.02).astype(leaf.dtype)


def materialize(args, int_high: int):
    leaves, treedef = jax.tree.flatten(args)
    keys = jax.random.split(jax.random.key(0), max(len(leaves), 1))
    return treedef.unflatten([jax.jit(_random, static_argnums=(0, 2))(leaf, k, int_high)
                              for leaf, k in zip(leaves, keys[:len(leaves)], strict=True)])


def device_time(call, keep_dir: str | None) -> dict:
    """Run `call` PROFILED_CALLS times under a profile; per-call module and op times."""
    keep = None
    if keep_dir:
        os.makedirs(keep_dir, exist_ok=True)
        keep = os.path.join(keep_dir, "run.xplane.pb")
    profile = profile_calls(call, PROFILED_CALLS, keep)
    if profile is None:
        return {"error": "the profile held no device plane"}
    ops = {k: [t * 1e9, profile.op_runs[k]] for k, t in profile.op_seconds.items()}
    return {"module_ns": profile.module_seconds * 1e9, "op_ns_per_call": ops,
            "op_sum_ns": sum(v[0] for v in ops.values()), "device": profile.device}


def wall_time(call) -> float:
    """Median seconds per call of back-to-back calls, dispatched and waited for once."""
    jax.block_until_ready(call())
    t0 = time.perf_counter()
    jax.block_until_ready(call())
    single = time.perf_counter() - t0
    inner = max(1, min(100, int(SAMPLE_S / max(single, 1e-6))))
    samples = []
    for _ in range(WALL_SAMPLES):
        t0 = time.perf_counter()
        jax.block_until_ready([call() for _ in range(inner)])
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def run_case(name: str, fn, args, keep_dir: str | None = None, hlo_dir: str | None = None
             ) -> dict:
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    rec = {"name": name, "compile_s": time.perf_counter() - t0}
    try:
        cost = compiled.cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        rec["cost_analysis"] = {k: float(v) for k, v in (cost or {}).items()
                                if k in ("flops", "bytes accessed", "transcendentals",
                                         "optimal_seconds", "utilization")}
    except Exception as e:  # noqa: BLE001 - a measurement script records what failed
        rec["cost_analysis_error"] = repr(e)
    try:
        m = compiled.memory_analysis()
        rec["memory"] = {k: int(getattr(m, k)) for k in (
            "temp_size_in_bytes", "argument_size_in_bytes", "output_size_in_bytes",
            "alias_size_in_bytes", "generated_code_size_in_bytes")}
    except Exception as e:  # noqa: BLE001
        rec["memory_error"] = repr(e)
    if hlo_dir:
        os.makedirs(hlo_dir, exist_ok=True)
        with gzip.open(os.path.join(hlo_dir, f"{name}.hlo.txt.gz"), "wt") as f:
            f.write(compiled.as_text())
    call = lambda: compiled(*args)  # noqa: E731
    rec["wall_s"] = wall_time(call)
    rec.update(device_time(call, keep_dir))
    return rec


def matmul_cases(small: bool):
    shapes = [(64, 64, 64), (128, 64, 256)] if small else MATMUL_SHAPES
    for dtype in (jnp.bfloat16, jnp.float32):
        for m, k, n in shapes:
            a = jax.ShapeDtypeStruct((m, k), dtype)
            b = jax.ShapeDtypeStruct((k, n), dtype)
            yield (f"matmul_{jnp.dtype(dtype).name}_{m}x{k}x{n}",
                   {"kind": "matmul", "dtype": jnp.dtype(dtype).name, "m": m, "k": k, "n": n,
                    "flops": 2 * m * k * n},
                   lambda a, b: a @ b, (a, b))


def hbm_cases(small: bool):
    sizes = (1,) if small else HBM_MIB
    for dtype in (jnp.float32, jnp.bfloat16):
        item = jnp.dtype(dtype).itemsize
        for mib in sizes:
            shape = (mib * 2**20 // item // 1024, 1024)
            x = jax.ShapeDtypeStruct(shape, dtype)
            s = jax.ShapeDtypeStruct((), dtype)
            size = mib * 2**20
            name = f"{jnp.dtype(dtype).name}_{mib}MiB"
            yield (f"hbm_read_{name}", {"kind": "read", "bytes": size, "dtype": str(x.dtype)},
                   lambda x: jnp.sum(x.astype(jnp.float32)), (x,))
            yield (f"hbm_write_{name}", {"kind": "write", "bytes": size, "dtype": str(x.dtype)},
                   lambda s, shape=shape, dtype=dtype: jnp.full(shape, s, dtype), (s,))
            yield (f"hbm_copy_{name}", {"kind": "copy", "bytes": 2 * size,
                                        "dtype": str(x.dtype)},
                   lambda x: x * 2, (x,))
            yield (f"hbm_add_{name}", {"kind": "add", "bytes": 3 * size, "dtype": str(x.dtype)},
                   lambda x, y: x + y, (x, x))
            yield (f"hbm_transpose_{name}", {"kind": "transpose", "bytes": 2 * size,
                                             "dtype": str(x.dtype)},
                   lambda x: x.T, (x,))


def vector_cases(small: bool):
    """Work for the vector unit, not the MXU or HBM: the data a vector-unit rate would be
    fitted to. Elementwise chains of k multiply-adds or transcendentals over one array read
    once and written once; a one-hot compare-select-reduce over a tensor generated in registers
    (a cross-entropy's gradient); softmax-like reductions along the minor and the major
    dimension; scatter-adds of embedding rows with ids spread over the table or piled on two."""
    rows, cols = (64, 128) if small else (8192, 8192)
    x = jax.ShapeDtypeStruct((rows, cols), jnp.float32)
    for k in (1, 4, 16, 64):
        def fma(x, k=k):
            for _ in range(k):
                x = x * 1.0001 + 0.5
            return x
        yield (f"vpu_fma_{k}", {"kind": "fma", "elements": rows * cols, "ops": 2 * k,
                                "bytes": 2 * rows * cols * 4}, fma, (x,))
    for k in (1, 4, 16):
        for fname, f in (("exp", jnp.exp), ("tanh", jnp.tanh)):
            def chain(x, k=k, f=f):
                for _ in range(k):
                    x = f(x) * 0.5
                return x
            yield (f"vpu_{fname}_{k}", {"kind": fname, "elements": rows * cols, "ops": k,
                                        "bytes": 2 * rows * cols * 4}, chain, (x,))
    tokens, vocab = (64, 1000) if small else (4096, 128256)
    ids = jax.ShapeDtypeStruct((tokens,), jnp.int32)

    def onehot_reduce(ids):
        hit = ids[:, None] == jnp.arange(vocab)[None, :]
        return jnp.sum(jnp.where(hit, -0.25, 0.0), axis=1)

    yield ("vpu_onehot_reduce", {"kind": "generated", "elements": tokens * vocab, "ops": 3,
                                 "bytes": tokens * 8, "int_high": vocab}, onehot_reduce, (ids,))
    b, s = (2, 128) if small else (16, 4096)
    for dtype in (jnp.float32, jnp.bfloat16):
        scores = jax.ShapeDtypeStruct((b, s, s), dtype)
        name = jnp.dtype(dtype).name
        yield (f"softmax_minor_{name}", {"kind": "softmax", "elements": b * s * s,
                                         "bytes": 2 * b * s * s * jnp.dtype(dtype).itemsize},
               lambda z: jax.nn.softmax(z, axis=-1), (scores,))
        yield (f"softmax_major_{name}", {"kind": "softmax", "elements": b * s * s,
                                         "bytes": 2 * b * s * s * jnp.dtype(dtype).itemsize},
               lambda z: jax.nn.softmax(z, axis=1), (scores,))
    v, d, n = (1000, 32, 256) if small else (128256, 2048, 32768)
    table = jax.ShapeDtypeStruct((v, d), jnp.bfloat16)
    rows_ids = jax.ShapeDtypeStruct((n,), jnp.int32)
    upd = jax.ShapeDtypeStruct((n, d), jnp.bfloat16)
    for spread, high in (("spread", v), ("piled", 2)):
        yield (f"scatter_add_{spread}", {"kind": "scatter", "updates": n, "row_bytes": d * 2,
                                         "bytes": 2 * n * d * 2, "int_high": high},
               lambda t, i, u: t.at[i].add(u), (table, rows_ids, upd))


class Results:
    def __init__(self, out: str):
        self.out = out
        self.path = os.path.join(out, "chip_measurements.json")
        dev = jax.devices()[0]
        self.data = {"date": datetime.date.today().isoformat(), "jax": jax.__version__,
                     "device_kind": dev.device_kind, "platform": dev.platform,
                     "platform_version": getattr(dev.client, "platform_version", ""),
                     "script": "benchmarks/tpu_measure.py", "rates": [], "programs": [],
                     "vector": []}

    def add(self, section: str, rec: dict) -> None:
        self.data[section].append(rec)
        with open(self.path, "w") as f:
            json.dump(self.data, f, indent=1)


def measure_cases(results: Results, section: str, cases, hlo_dir: str | None = None,
                  keep_ops: bool = True) -> None:
    """Run each (name, meta, fn, abstract args) case on random inputs (integers below
    meta["int_high"], 2 by default) and add its record to `section`; a failure is recorded."""
    for name, meta, fn, abstract in cases:
        try:
            args = materialize(abstract, meta.get("int_high", 2))
            rec = {**meta, **run_case(name, fn, args, hlo_dir=hlo_dir)}
            if not keep_ops:
                rec.pop("op_ns_per_call", None)
            del args
        except Exception as e:  # noqa: BLE001
            rec = {**meta, "name": name, "error": repr(e)[:2000]}
        results.add(section, rec)
        print(name, f"{rec.get('module_ns')} ns" if "error" not in rec else rec["error"][:200],
              flush=True)


def measure_rates(results: Results, small: bool) -> None:
    # One fusion or two per case: the module's time says it all.
    measure_cases(results, "rates", [*matmul_cases(small), *hbm_cases(small)], keep_ops=False)


def measure_vector(results: Results, small: bool, art: str) -> None:
    measure_cases(results, "vector", vector_cases(small), hlo_dir=os.path.join(art, "hlo"))


def measure_programs(results: Results, small: bool, only: list[str], art: str) -> None:
    platform = jax.devices()[0].platform
    for program in programs(small):
        if only and program.name not in only:
            continue
        if program.tpu_only and platform != "tpu":
            results.add("programs", {"name": program.name, "skipped": "needs a TPU"})
            continue
        keep = os.path.join(art, "profiles", program.name) \
            if program.name in KEEP_PROFILES else None
        try:
            args = materialize(program.args, program.int_high)
            rec = run_case(program.name, program.fn, args, keep, os.path.join(art, "hlo"))
            del args
        except Exception as e:  # noqa: BLE001
            rec = {"name": program.name, "error": repr(e)[:3000],
                   "traceback": traceback.format_exc()[-3000:]}
        rec["kind"] = program.kind
        results.add("programs", rec)
        print(program.name, f"{rec.get('module_ns')} ns" if "error" not in rec
              else rec["error"][:300], flush=True)


def pack(art: str, out: str) -> None:
    """One archive per folder of artifacts (hlo, profiles), so one too large loses no other."""
    for folder in sorted(os.listdir(art)):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            tar.add(os.path.join(art, folder), arcname=folder)
        with open(os.path.join(out, f"chip_{folder}.tar.gz"), "wb") as f:
            f.write(buf.getvalue())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for the JSON and the artifacts")
    ap.add_argument("--part", choices=("rates", "programs", "vector", "all"), default="all")
    ap.add_argument("--only", nargs="*", default=[], help="program names to run (default all)")
    ap.add_argument("--small", action="store_true", help="toy sizes, to test the script")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    art = tempfile.mkdtemp()
    results = Results(args.out)
    print("devices:", jax.devices(), flush=True)
    try:
        if args.part in ("rates", "all"):
            measure_rates(results, args.small)
        if args.part in ("programs", "all"):
            measure_programs(results, args.small, args.only, art)
        if args.part in ("vector", "all"):
            measure_vector(results, args.small, art)
    finally:
        pack(art, args.out)
    return 0


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    sys.exit(main())
