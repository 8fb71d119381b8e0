"""Programs compiled for NVIDIA GPUs in tests/compile/test_gpu_compile.py, and their plain-jax
reference: run as a script (`python gpu_programs.py NAME`), this module compiles NAME with
jax alone, deviceless for the GPUs of the target, and prints what jax's compiled object says
(the optimized module's collective lines, and memory_analysis()) as JSON.

The explorer's side traces these same functions here and compiles them in its GPU worker."""

from __future__ import annotations

import json
import os
import re
import sys

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

BF16 = "bfloat16"


def megatron_mlp(x, w1, w2):
    return jax.nn.gelu(x @ w1) @ w2


def fsdp_grads(x, w1, w2):
    def loss(w1, w2):
        return jnp.mean((jax.nn.gelu(x @ w1) @ w2).astype(jnp.float32) ** 2)

    # FSDP keeps each gradient sharded as its weight is: a reduce-scatter on the GPU.
    return [jax.lax.with_sharding_constraint(g, P("data", None))
            for g in jax.grad(loss, argnums=(0, 1))(w1, w2)]


def expert_all_to_all(x):
    mesh = jax.sharding.get_abstract_mesh()
    return jax.shard_map(lambda b: jax.lax.all_to_all(b, "expert", 0, 0, tiled=True), mesh=mesh,
                         in_specs=P("expert"), out_specs=P("expert"))(x)


def ring_permute(x):
    mesh = jax.sharding.get_abstract_mesh()
    n = mesh.shape["x"]
    return jax.shard_map(lambda b: jax.lax.ppermute(b, "x", [(i, (i + 1) % n) for i in range(n)]),
                         mesh=mesh, in_specs=P("x"), out_specs=P("x"))(x)


# name -> (function, mesh axes, target, inputs as (name, shape, spec))
PROGRAMS = {
    "megatron_mlp": (megatron_mlp, {"data": 2, "model": 4}, "h100-8", [
        ("x", (256, 1024), ("data", None)), ("w1", (1024, 4096), (None, "model")),
        ("w2", (4096, 1024), ("model", None))]),
    "fsdp_grads": (fsdp_grads, {"data": 8}, "h100-8", [
        ("x", (256, 1024), ("data", None)), ("w1", (1024, 4096), ("data", None)),
        ("w2", (4096, 1024), ("data", None))]),
    "expert_all_to_all": (expert_all_to_all, {"expert": 8}, "a100-8", [
        ("x", (64, 128), ("expert", None))]),
    "ring_permute": (ring_permute, {"x": 8}, "h200-8", [("x", (64, 128), ("x", None))]),
}

_COLLECTIVE = re.compile(r"^\s*(?:ROOT )?%\S+ = .*? ((?:all-reduce|all-gather|reduce-scatter|"
                         r"all-to-all|collective-permute)(?:-start)?)\(")


def reference(name: str) -> dict:
    """Compile program `name` with plain jax for its target's GPUs; what jax says of it."""
    import numpy as np
    from jax.sharding import AxisType, Mesh, NamedSharding

    from explorer._src.compile.gpu import gpu_devices, gpu_topology

    fn, axes, target, inputs = PROGRAMS[name]
    devices = gpu_devices(gpu_topology(target))
    mesh = Mesh(np.array(devices).reshape(tuple(axes.values())), tuple(axes),
                axis_types=(AxisType.Auto,) * len(axes))
    args = [jax.ShapeDtypeStruct(shape, jnp.bfloat16, sharding=NamedSharding(mesh, P(*spec)))
            for _, shape, spec in inputs]
    with jax.set_mesh(mesh):
        compiled = jax.jit(fn, keep_unused=True).lower(*args).compile()
    lines = [line.strip() for line in compiled.as_text().splitlines() if _COLLECTIVE.match(line)]
    m = compiled.memory_analysis()
    return {"device_kind": devices[0].device_kind,
            "collectives": [_COLLECTIVE.match(line).group(1) for line in lines],
            "lines": lines,
            "memory": {"arguments": m.argument_size_in_bytes, "outputs": m.output_size_in_bytes,
                       "temporaries": m.temp_size_in_bytes}}


if __name__ == "__main__":
    # Deviceless: no CUDA client is opened, and the plugin's driver check is skipped.
    assert os.environ.get("JAX_PLATFORMS") == "cpu"
    print(json.dumps(reference(sys.argv[1])))
