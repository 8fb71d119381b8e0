"""Built-in workloads: small, model-shaped programs whose collectives the literature predicts.

Each workload has named tensors, size params with defaults that compile in about a second on
8 fake devices, and a function of those tensors. Functions are module-level (and bound with
functools.partial), so they pickle by reference and equal requests hit the cache. The
model-shaped ones (transformer, transformer_train, moe) are in _models.py, the pipeline in
_pipeline.py.

`analyze_workload` places tensors by per-tensor specs, by a strategy preset (_presets.py) or by
logical-axis rules (_rules.py), and pins activations at the workload's constraint points.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace

from ._errors import WorkloadError, choices
from ._mesh import parse_mesh
from ._models import MOE, TRANSFORMER, TRANSFORMER_TRAIN, ModelWorkload, Point, constrain
from ._pipeline import PIPELINE
from ._workload import Workload


def matmul(x, w):
    return x @ w


def mlp(x, w1, w2, *, constraints=()):
    import jax

    h = constrain(jax.nn.gelu(x @ w1), dict(constraints), "hidden")
    return h @ w2


def _mlp_loss(w1, w2, x, constraints=()):
    import jax.numpy as jnp

    return jnp.mean(mlp(x, w1, w2, constraints=constraints) ** 2)


def mlp_train(x, w1, w2, *, lr, constraints=()):
    """One SGD step on the mean squared output: forward, backward, update; returns new weights."""
    import jax

    cons = dict(constraints)
    g1, g2 = jax.grad(_mlp_loss, argnums=(0, 1))(w1, w2, x, constraints)
    g1, g2 = constrain(g1, cons, "grad.w1"), constrain(g2, cons, "grad.w2")
    return w1 - lr * g1, w2 - lr * g2


def _mlp_shapes(p):
    return {"x": (p["batch"], p["d_model"]), "w1": (p["d_model"], p["d_ff"]),
            "w2": (p["d_ff"], p["d_model"])}


_MLP_DEFAULTS = {"batch": 256, "d_model": 1024, "d_ff": 4096, "dtype": "float32"}
_MLP_LOGICAL = {"x": ("batch", "embed"), "w1": ("embed", "mlp"), "w2": ("mlp", "embed")}


def _mlp_points(p, train: bool) -> dict[str, Point]:
    points = {"hidden": Point((p["batch"], p["d_ff"]), ("batch", "mlp"), "act")}
    if train:
        points["grad.w1"] = Point((p["d_model"], p["d_ff"]), _MLP_LOGICAL["w1"], "grad")
        points["grad.w2"] = Point((p["d_ff"], p["d_model"]), _MLP_LOGICAL["w2"], "grad")
    return points


WORKLOADS: dict[str, Workload] = {
    w.name: w for w in (
        ModelWorkload("matmul", "y = x @ w", {"m": 256, "k": 1024, "n": 4096,
                                              "dtype": "float32"},
                      lambda p: {"x": (p["m"], p["k"]), "w": (p["k"], p["n"])},
                      lambda p: matmul,
                      logical=lambda p: {"x": ("batch", "embed"), "w": ("embed", "mlp")},
                      kinds=lambda p: {"x": "input"}),
        ModelWorkload("mlp", "y = gelu(x @ w1) @ w2", _MLP_DEFAULTS, _mlp_shapes,
                      lambda p: mlp, logical=lambda p: _MLP_LOGICAL,
                      kinds=lambda p: {"x": "input"}, points=lambda p: _mlp_points(p, False)),
        ModelWorkload("mlp_train", "one SGD step of the mlp on mean(y**2): forward, backward, "
                      "update; returns the new w1, w2", {**_MLP_DEFAULTS, "lr": 0.1},
                      _mlp_shapes, lambda p: functools.partial(mlp_train, lr=p["lr"]),
                      logical=lambda p: _MLP_LOGICAL, kinds=lambda p: {"x": "input"},
                      points=lambda p: _mlp_points(p, True)),
        TRANSFORMER,
        TRANSFORMER_TRAIN,
        MOE,
        PIPELINE,
    )
}


def get_workload(name: str) -> Workload:
    if name not in WORKLOADS:
        raise WorkloadError(f"workload {name!r} is unknown; choose one of {choices(WORKLOADS)}")
    return WORKLOADS[name]


def analyze_workload(name: str, mesh, specs: Mapping | None = None,
                     params: Mapping | None = None, *, preset: str | None = None, rules=None,
                     activations: Mapping | None = None, **kwargs):
    """Analyze a built-in workload on `mesh`.

    specs: tensor name -> spec (text, tuple or PartitionSpec); wins over preset and rules.
    preset: a strategy from explorer.PRESETS (`"zero3"`, `"megatron"`, ...): logical-axis rules
        for every tensor and constraint point, checked against the mesh axes it expects.
    rules: logical-axis rules, text (`"batch=data,mlp=model,opt:embed=data"`) or a mapping;
        applied after the preset's, so they win where both name a logical dimension.
    activations: constraint point -> spec, pinned in the program with
        jax.lax.with_sharding_constraint (e.g. {"layer0": "data,None,None",
        "layer1": "None,None,model"}); wins over rules; None or "free" leaves a point to
        propagation. See the workload's points (`sharding-explorer workloads`).
    Other keyword arguments go to explorer.analyze (partitioner, axis_type, timeout,
    cache_only, ...).
    """
    from ._analyze import analyze
    from ._presets import check_planned, plan

    workload = get_workload(name)
    resolved = workload.resolve(params)
    mesh_spec = parse_mesh(mesh, kwargs.pop("axis_type", "auto"))
    if workload.check is not None:
        workload.check(resolved, mesh_spec)
    layout = plan(workload, resolved, mesh_spec, specs, preset, rules, activations)
    tensors = workload.tensors(resolved, {**dict(specs or {}), **layout.specs})
    check_planned(tensors, layout, mesh_spec)
    fn = workload.build(resolved)
    if layout.constraints:
        fn = functools.partial(fn, constraints=layout.constraints)
    report = analyze(fn, *tensors, mesh=mesh_spec, **kwargs)
    info = {"name": name, "params": resolved, "preset": preset, **layout.info()}
    if workload.info is not None:
        info.update(workload.info(resolved))
    return None if report is None else replace(report, workload=info)   # None: cache_only miss
