"""The registry of built-in workloads: small, model-shaped programs whose collectives the
literature predicts. Each has named tensors, size params with defaults that compile in about a
second on 8 fake devices, and a function of those tensors.

Adding a workload: define a `Workload` in a module of this package and list it here.
"""

from __future__ import annotations

from explorer._src.errors import WorkloadError, choices
from explorer._src.spec.bounds import show
from explorer._src.workloads.base import Workload
from explorer._src.workloads.mlp import MATMUL, MLP, MLP_TRAIN
from explorer._src.workloads.models import MOE, TRANSFORMER, TRANSFORMER_TRAIN
from explorer._src.workloads.pipeline import PIPELINE

WORKLOADS: dict[str, Workload] = {
    w.name: w for w in (MATMUL, MLP, MLP_TRAIN, TRANSFORMER, TRANSFORMER_TRAIN, MOE, PIPELINE)
}


def get_workload(name: str) -> Workload:
    if not isinstance(name, str) or name not in WORKLOADS:
        raise WorkloadError(f"workload {show(name)} is unknown; choose one of "
                            f"{choices(WORKLOADS)}")
    return WORKLOADS[name]
