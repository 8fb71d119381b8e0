"""Built-in workloads: small, model-shaped programs whose collectives the literature predicts.

Each workload has named tensors, size params with defaults that compile in about a second on
8 fake devices, and a function of those tensors. Functions are module-level (and bound with
functools.partial), so they pickle by reference and equal requests hit the cache.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace

from ._errors import WorkloadError, choices
from ._mesh import parse_mesh
from ._workload import Workload


def matmul(x, w):
    return x @ w


def mlp(x, w1, w2):
    import jax

    h = jax.nn.gelu(x @ w1)
    return h @ w2


def _mlp_loss(w1, w2, x):
    import jax.numpy as jnp

    return jnp.mean(mlp(x, w1, w2) ** 2)


def mlp_train(x, w1, w2, *, lr):
    """One SGD step on the mean squared output: forward, backward, update; returns new weights."""
    import jax

    g1, g2 = jax.grad(_mlp_loss, argnums=(0, 1))(w1, w2, x)
    return w1 - lr * g1, w2 - lr * g2


def _mlp_shapes(p):
    return {"x": (p["batch"], p["d_model"]), "w1": (p["d_model"], p["d_ff"]),
            "w2": (p["d_ff"], p["d_model"])}


_MLP_DEFAULTS = {"batch": 256, "d_model": 1024, "d_ff": 4096, "dtype": "float32"}

WORKLOADS: dict[str, Workload] = {
    w.name: w for w in (
        Workload("matmul", "y = x @ w", {"m": 256, "k": 1024, "n": 4096, "dtype": "float32"},
                 lambda p: {"x": (p["m"], p["k"]), "w": (p["k"], p["n"])},
                 lambda p: matmul),
        Workload("mlp", "y = gelu(x @ w1) @ w2", _MLP_DEFAULTS, _mlp_shapes, lambda p: mlp),
        Workload("mlp_train", "one SGD step of the mlp on mean(y**2): forward, backward, "
                 "update; returns the new w1, w2", {**_MLP_DEFAULTS, "lr": 0.1}, _mlp_shapes,
                 lambda p: functools.partial(mlp_train, lr=p["lr"])),
    )
}


def get_workload(name: str) -> Workload:
    if name not in WORKLOADS:
        raise WorkloadError(f"workload {name!r} is unknown; choose one of {choices(WORKLOADS)}")
    return WORKLOADS[name]


def analyze_workload(name: str, mesh, specs: Mapping | None = None,
                     params: Mapping | None = None, **kwargs):
    """Analyze a built-in workload: `specs` maps tensor names to specs (others replicated)."""
    from ._analyze import analyze

    workload = get_workload(name)
    resolved = workload.resolve(params)
    mesh_spec = parse_mesh(mesh, kwargs.pop("axis_type", "auto"))
    if workload.check is not None:
        workload.check(resolved, mesh_spec)
    report = analyze(workload.build(resolved), *workload.tensors(resolved, specs),
                     mesh=mesh_spec, **kwargs)
    info = {"name": name, "params": resolved}
    if workload.info is not None:
        info.update(workload.info(resolved))
    return replace(report, workload=info)
