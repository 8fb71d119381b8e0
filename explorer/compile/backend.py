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

from explorer.compile.protocol import CompileResult, Measurement, TensorLayout
from explorer.spec.tensor import TensorSpec

# Dump only the partitioner's passes: the module just before spmd-partitioning carries the
# propagated `sharding={...}` of every instruction, which compiled.as_text() no longer has.
_DUMP_OPTIONS = {"xla_dump_hlo_pass_re": "spmd-partitioning", "xla_dump_hlo_as_text": True}


def _is_spec(x) -> bool:
    return isinstance(x, TensorSpec)


def tpu_devices(topology: str):
    """The devices of a TPU topology such as "v5e:4x4", for compiling without a TPU (libtpu)."""
    from jax.experimental import topologies

    # v4 chips have two TensorCores; "megacore" makes each chip one device, as jax does on v4.
    extra = {"chip_config_name": "megacore"} if topology.startswith("v4:") else {}
    return list(topologies.get_topology_desc(topology, "tpu", **extra).devices)


def build_mesh(mesh_spec, devices=None):
    import jax
    import numpy as np
    from jax.sharding import AxisType, Mesh

    devices = jax.devices() if devices is None else devices
    if len(devices) < mesh_spec.device_count:
        raise RuntimeError(f"mesh {mesh_spec.text()!r} needs {mesh_spec.device_count} devices "
                           f"but this worker has {len(devices)} ({devices[0].platform}); "
                           "make the mesh match the machine's devices")
    kind = AxisType.Explicit if mesh_spec.axis_type == "explicit" else AxisType.Auto
    array = np.array(devices[:mesh_spec.device_count]).reshape(mesh_spec.sizes)
    return Mesh(array, mesh_spec.names, axis_types=(kind,) * len(mesh_spec.names))


def _struct(spec: TensorSpec, mesh):
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    sharding = NamedSharding(mesh, PartitionSpec(*spec.spec))
    return jax.ShapeDtypeStruct(spec.shape, jnp.dtype(spec.dtype), sharding=sharding)


def _hlo_sharding_text(sharding, ndim: int) -> str | None:
    """XLA's HloSharding text of a jax sharding, or None when it has no HLO form: the Report
    then says the placement is unknown rather than guessing one."""
    try:
        return str(sharding._to_xla_hlo_sharding(ndim))
    except Exception:
        return None


def compile_request(fn, args, mesh_spec, partitioner: str, tpu_topology: str | None = None,
                    measure: bool = False, measure_cap: int = 1 << 30) -> CompileResult:
    import jax

    mesh = build_mesh(mesh_spec, tpu_devices(tpu_topology) if tpu_topology else None)
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
        # CPU: "...before_spmd-partitioning.txt"; TPU: "...before_tpu-spmd-partitioning.txt".
        propagated = _read_first(dump, "*before_*spmd-partitioning.txt")
    finally:
        shutil.rmtree(dump, ignore_errors=True)

    leaves = jax.tree.leaves(args, is_leaf=_is_spec)
    in_shardings = jax.tree.leaves(compiled.input_shardings[0])
    inputs = tuple(TensorLayout(s.name, s.shape, s.dtype, _hlo_sharding_text(sh, s.rank))
                   for s, sh in zip(leaves, in_shardings, strict=True))
    out_info = jax.tree_util.tree_flatten_with_path(lowered.out_info)[0]
    out_shardings = jax.tree.leaves(compiled.output_shardings)
    outputs = []
    for (path, info), sh in zip(out_info, out_shardings, strict=True):
        name = "out" + jax.tree_util.keystr(path)
        outputs.append(TensorLayout(name, tuple(info.shape), str(info.dtype),
                                    _hlo_sharding_text(sh, len(info.shape))))
    if tpu_topology:
        measured = Measurement(note="not measured: compiled ahead of time for a TPU that is "
                                    "not here")
    elif measure:
        measured = _measure(compiled, args, mesh, measure_cap)
    else:
        measured = None
    return CompileResult(
        measured=measured,
        stablehlo=lowered.as_text(),
        propagated=propagated,
        optimized=compiled.as_text(),
        inputs=inputs,
        outputs=tuple(outputs),
        memory=_memory(compiled),
        cost=_cost(compiled),
        lower_s=t1 - t0,
        compile_s=t2 - t1,
        backend=f"tpu {tpu_topology}" if tpu_topology else jax.devices()[0].platform,
    )


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


MEASURE_WARMUP = 2
MEASURE_RUNS = 5


def _measure(compiled, args, mesh, cap: int) -> Measurement:
    """Run the compiled program on random inputs: warm-up, then the median of several runs.

    On fake CPU devices this times the CPU, and says so; it is never a prediction."""
    import statistics

    import jax

    leaves = jax.tree.leaves(args, is_leaf=_is_spec)
    per_device = sum(s.nbytes // _split(s, mesh) for s in leaves)
    devices = mesh.devices.flat
    where = f"{mesh.devices.size} {next(iter(devices)).platform} device(s) of this host"
    if per_device > cap:
        return Measurement(note=f"not measured: inputs need {per_device} bytes per device, "
                                f"over the cap of {cap} bytes")
    key = iter(jax.random.split(jax.random.key(0), max(len(leaves), 1)))
    arrays = jax.tree.map(lambda s: _random(s, mesh, next(key)), args, is_leaf=_is_spec)
    for _ in range(MEASURE_WARMUP):
        jax.block_until_ready(compiled(*arrays))
    times = []
    for _ in range(MEASURE_RUNS):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*arrays))
        times.append(time.perf_counter() - t0)
    return Measurement(seconds=statistics.median(times), runs=MEASURE_RUNS, on=where)


def _split(spec: TensorSpec, mesh) -> int:
    """Into how many pieces the spec splits the tensor on this mesh."""
    from explorer.spec.tensor import entry_axes

    n = 1
    for entry in spec.spec:
        for axis in entry_axes(entry):
            n *= mesh.shape[axis]
    return n


def _random(spec: TensorSpec, mesh, key):
    """A random array made directly in its sharded layout (never whole on the host)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    sharding = NamedSharding(mesh, PartitionSpec(*spec.spec))
    dtype = jnp.dtype(spec.dtype)
    if jnp.issubdtype(dtype, jnp.floating):
        make = lambda k: jax.random.normal(k, spec.shape, dtype)  # noqa: E731
    elif dtype == jnp.bool_:
        make = lambda k: jax.random.bernoulli(k, 0.5, spec.shape)  # noqa: E731
    else:   # integers are often indices (token ids): keep them small and valid
        make = lambda k: jax.random.randint(k, spec.shape, 0, 2, dtype)  # noqa: E731
    return jax.jit(make, out_shardings=sharding)(key)
