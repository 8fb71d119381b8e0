"""The small workloads: a matmul, an MLP, and one SGD step of the MLP.

Functions are module-level (and bound with functools.partial) and their params plain data, so
that equal requests are one program (workloads/base.py: WorkloadProgram) and hit the caches.
"""

from __future__ import annotations

import functools

from explorer._src.workloads.base import (
    BATCH,
    D_FF,
    D_MODEL,
    DONATE_OPTIONS,
    DONATE_STATE,
    LR,
    ConstraintPoint,
    Range,
    TensorKind,
    Workload,
)
from explorer._src.workloads.models import constrain


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
_MLP_BOUNDS = {"batch": BATCH, "d_model": D_MODEL, "d_ff": D_FF}
_MLP_LOGICAL = {"x": ("batch", "embed"), "w1": ("embed", "mlp"), "w2": ("mlp", "embed")}


def _mlp_points(p, train: bool) -> dict[str, ConstraintPoint]:
    points = {"hidden": ConstraintPoint((p["batch"], p["d_ff"]), ("batch", "mlp"),
                                        TensorKind.ACT)}
    if train:
        points["grad.w1"] = ConstraintPoint((p["d_model"], p["d_ff"]), _MLP_LOGICAL["w1"],
                                            TensorKind.GRAD)
        points["grad.w2"] = ConstraintPoint((p["d_ff"], p["d_model"]), _MLP_LOGICAL["w2"],
                                            TensorKind.GRAD)
    return points



MATMUL = Workload(
    "matmul", "y = x @ w", {"m": 256, "k": 1024, "n": 4096, "dtype": "float32"},
    lambda p: {"x": (p["m"], p["k"]), "w": (p["k"], p["n"])},
    lambda p: matmul,
    logical=lambda p: {"x": ("batch", "embed"), "w": ("embed", "mlp")},
    kinds=lambda p: {"x": TensorKind.INPUT},
    # m like a batch of tokens; k and n like a hidden or a vocab dimension (2**20).
    bounds={"m": BATCH, "k": Range(1, 2 ** 20), "n": Range(1, 2 ** 20)},
    intermediates=lambda p: {"y": (p["m"], p["n"])})

MLP = Workload(
    "mlp", "y = gelu(x @ w1) @ w2", _MLP_DEFAULTS, _mlp_shapes,
    lambda p: mlp, logical=lambda p: _MLP_LOGICAL,
    kinds=lambda p: {"x": TensorKind.INPUT}, points=lambda p: _mlp_points(p, False),
    bounds=_MLP_BOUNDS)

MLP_TRAIN = Workload(
    "mlp_train", "one SGD step of the mlp on mean(y**2): forward, backward, update; returns "
    "the new w1, w2", {**_MLP_DEFAULTS, "lr": 0.1, **DONATE_STATE},
    _mlp_shapes, lambda p: functools.partial(mlp_train, lr=p["lr"]),
    logical=lambda p: _MLP_LOGICAL, kinds=lambda p: {"x": TensorKind.INPUT},
    points=lambda p: _mlp_points(p, True), bounds={**_MLP_BOUNDS, "lr": LR},
    options=DONATE_OPTIONS, donates=r"^w[12]$")
