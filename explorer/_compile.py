"""Inside a compile worker: lower and compile one request with jax, return raw text and numbers.

This is the only module that touches jax objects. It returns plain data (strings, numbers,
tuples) so that everything after it, the readers and the Report, is pure and testable.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
import time

from ._spec import TensorSpec

# Dump only the partitioner's passes: the module just before spmd-partitioning carries the
# propagated `sharding={...}` of every instruction, which compiled.as_text() no longer has.
_DUMP_OPTIONS = {"xla_dump_hlo_pass_re": "spmd-partitioning", "xla_dump_hlo_as_text": True}


def _is_spec(x) -> bool:
    return isinstance(x, TensorSpec)


def build_mesh(mesh_spec):
    import jax
    import numpy as np
    from jax.sharding import AxisType, Mesh

    devices = jax.devices()
    if len(devices) < mesh_spec.device_count:
        raise RuntimeError(f"worker has {len(devices)} devices, mesh needs "
                           f"{mesh_spec.device_count}")
    kind = AxisType.Explicit if mesh_spec.axis_type == "explicit" else AxisType.Auto
    array = np.array(devices[:mesh_spec.device_count]).reshape(mesh_spec.sizes)
    return Mesh(array, mesh_spec.names, axis_types=(kind,) * len(mesh_spec.names))


def _struct(spec: TensorSpec, mesh):
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    sharding = NamedSharding(mesh, PartitionSpec(*spec.spec))
    return jax.ShapeDtypeStruct(spec.shape, jnp.dtype(spec.dtype), sharding=sharding)


def _hlo_sharding_text(sharding, ndim: int) -> str:
    try:
        return str(sharding._to_xla_hlo_sharding(ndim))
    except Exception:  # a sharding type without an HLO form: say replicated, the safe reading
        return "{replicated}"


def compile_request(fn, args, mesh_spec, partitioner: str) -> dict:
    import jax

    mesh = build_mesh(mesh_spec)
    jax.config.update("jax_use_shardy_partitioner", partitioner == "shardy")
    structs = jax.tree.map(lambda s: _struct(s, mesh), args, is_leaf=_is_spec)
    # keep_unused so that HLO parameter i is always the i-th input tensor.
    jitted = jax.jit(fn, keep_unused=True)
    t0 = time.perf_counter()
    with jax.set_mesh(mesh):
        lowered = jitted.lower(*structs)
    t1 = time.perf_counter()
    dump = tempfile.mkdtemp(prefix="explorer-dump-", dir="/dev/shm" if os.path.isdir(
        "/dev/shm") else None)
    try:
        compiled = lowered.compile(compiler_options={"xla_dump_to": dump, **_DUMP_OPTIONS})
        t2 = time.perf_counter()
        propagated = _read_first(dump, "*before_spmd-partitioning.txt")
    finally:
        shutil.rmtree(dump, ignore_errors=True)

    leaves = jax.tree.leaves(args, is_leaf=_is_spec)
    in_shardings = jax.tree.leaves(compiled.input_shardings[0])
    inputs = [(s.name, s.shape, s.dtype, _hlo_sharding_text(sh, s.rank))
              for s, sh in zip(leaves, in_shardings, strict=True)]
    out_info = jax.tree_util.tree_flatten_with_path(lowered.out_info)[0]
    out_shardings = jax.tree.leaves(compiled.output_shardings)
    outputs = []
    for (path, info), sh in zip(out_info, out_shardings, strict=True):
        name = "out" + jax.tree_util.keystr(path)
        outputs.append((name, tuple(info.shape), str(info.dtype),
                        _hlo_sharding_text(sh, len(info.shape))))
    return {
        "stablehlo": lowered.as_text(),
        "propagated": propagated,
        "optimized": compiled.as_text(),
        "inputs": inputs,
        "outputs": outputs,
        "memory": _memory(compiled),
        "cost": _cost(compiled),
        "lower_s": t1 - t0,
        "compile_s": t2 - t1,
        "backend": jax.devices()[0].platform,
    }


def _read_first(folder: str, pattern: str) -> str:
    files = sorted(glob.glob(os.path.join(folder, pattern)))
    if not files:
        return ""
    with open(files[0]) as f:
        return f.read()


def _memory(compiled) -> dict | None:
    try:
        m = compiled.memory_analysis()
    except Exception:
        return None
    if m is None:
        return None
    return {"arguments": m.argument_size_in_bytes, "outputs": m.output_size_in_bytes,
            "aliased": m.alias_size_in_bytes, "temporaries": m.temp_size_in_bytes,
            "generated_code": m.generated_code_size_in_bytes}


def _cost(compiled) -> dict | None:
    try:
        c = compiled.cost_analysis()
    except Exception:
        return None
    if isinstance(c, list | tuple):  # older jax returned one dict per program
        c = c[0] if c else None
    return {k: float(v) for k, v in c.items()} if c else None
