"""A bare jax compile of built-in workload requests for a GPU or TPU target, without the explorer's
worker, pool, dumps or Report: the baseline of bench_app.py --big.

The explorer gives the program only: the workload's function, its inputs' specs (the planner,
as `analyze_workload` plans them: the preset, then the pinned specs) and the donated inputs,
and the target's devices as its worker builds them (compile_plan: jax's deviceless GPU devices
from the target's device description, or the TPU topology's libtpu devices). Plain jax does the
rest, as a user would: `jax.jit(fn, keep_unused=True, donate_argnums=...)` on ShapeDtypeStructs
with NamedShardings, `.lower(...)` under `jax.set_mesh`, then `.compile()`.

Run by hand (one JSON argument; prints one JSON line):
  JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 .venv/bin/python benchmarks/bare_compile.py \
    '{"workload": "transformer_train", "mesh": "data=32,model=8", "target": "h100-8x32",
      "preset": "fsdp_tp", "params": {"layers": 32, ...},
      "requests": [["base", {}], ["edit", {"tokens": "data,model"}]], "dump": ["base"]}'

`requests`: (label, pinned specs) pairs, compiled in order in this one process. `dump`: the
labels also compiled once more with the explorer worker's dump options (explorer/_src/compile/
backend.py's dump_options: the HLO text and protos of the passes it reads), so that the cost
of the dumps alone shows. Times: `start_s` (this process's jax import and the target's devices),
per request `lower_s` and `compile_s`; `peak_rss` (bytes, this process's high-water mark).
"""

from __future__ import annotations

import functools
import json
import os
import re
import resource
import shutil
import sys
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")


# The collectives of an optimized module, by op, as a fingerprint that the explorer's compile
# (Report.optimized_hlo) and this one made the same program.
COLLECTIVE_OP = re.compile(r"\b(all-gather|all-reduce|reduce-scatter|all-to-all|"
                           r"collective-permute)(?:-start)?\(")


def collective_ops(hlo_text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for m in COLLECTIVE_OP.finditer(hlo_text):
        counts[m[1]] = counts.get(m[1], 0) + 1
    return dict(sorted(counts.items()))


def main() -> None:
    t0 = time.perf_counter()
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from explorer._src.api.request import check_donate
    from explorer._src.api.targeting import compile_plan
    from explorer._src.compile.backend import build_mesh, dump_options, tpu_devices
    from explorer._src.compile.gpu import gpu_devices
    from explorer._src.spec.mesh import parse_mesh
    from explorer._src.strategy.plan import plan
    from explorer._src.workloads.registry import get_workload

    case = json.loads(sys.argv[1])
    mesh_spec = parse_mesh(case["mesh"])
    how = compile_plan(mesh_spec, case["target"])
    if how.gpu is not None:
        devices = gpu_devices(how.gpu)
    elif how.tpu_topology and not how.slices_per_axis:
        devices = tpu_devices(how.tpu_topology)
    else:
        sys.exit(f"{case['target']}: not a single-slice TPU or a GPU compiled ahead of time "
                 f"here ({how})")
    mesh = build_mesh(mesh_spec, devices)
    jax.config.update("jax_use_shardy_partitioner", True)     # the explorer's default
    out: dict = {"start_s": time.perf_counter() - t0, "device_kind": devices[0].device_kind}
    workload = get_workload(case["workload"])
    resolved = workload.resolve(case["params"])

    def program(specs):
        layout = plan(workload, resolved, mesh_spec, specs, case.get("preset"), None, None)
        tensors = workload.tensors(resolved, {**specs, **layout.specs})
        fn = workload.build(resolved)
        if layout.constraints:
            fn = functools.partial(fn, constraints=layout.constraints)
        donate = check_donate(workload.donation(resolved), [t.name for t in tensors])
        structs = [jax.ShapeDtypeStruct(t.shape, jnp.dtype(t.dtype),
                                        sharding=NamedSharding(mesh, P(*t.spec)))
                   for t in tensors]
        return jax.jit(fn, keep_unused=True, donate_argnums=donate), structs

    def compile_once(specs, options=None) -> dict:
        jitted, structs = program(specs)
        t1 = time.perf_counter()
        with jax.set_mesh(mesh):
            lowered = jitted.lower(*structs)
        t2 = time.perf_counter()
        compiled = lowered.compile(compiler_options=options) if options else lowered.compile()
        t3 = time.perf_counter()
        text = compiled.as_text()
        return {"lower_s": t2 - t1, "compile_s": t3 - t2, "hlo_chars": len(text),
                "collective_ops": collective_ops(text)}

    for label, specs in case["requests"]:
        out[label] = compile_once(specs)
        if label in case.get("dump", ()):
            folder = tempfile.mkdtemp(prefix="bare-dump-",
                                      dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
            try:
                # As the worker dumps for a GPU or TPU: no module before the CPU's promotions.
                out[label + "+dumps"] = compile_once(specs, dump_options(
                    folder, origins=False, unpromoted=False))
                out[label + "+dumps"]["dump_bytes"] = sum(
                    os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder)
                    for f in fs)
            finally:
                shutil.rmtree(folder, ignore_errors=True)
    out["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(out))


if __name__ == "__main__":
    main()
