"""What a workload is: named input tensors, size params, and a function of the tensors.

The registry of built-in workloads is in _workloads.py; this module only defines the shape of
one, so that workload modules (e.g. _pipeline.py) can define theirs without import cycles.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ._errors import WorkloadError, choices
from ._mesh import MeshSpec
from ._spec import TensorSpec, normalize_dtype


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    defaults: Mapping[str, int | float | str]
    shapes: Callable[[dict], dict[str, tuple[int, ...]]]   # tensor name -> shape, in arg order
    build: Callable[[dict], Callable]
    # Optional: tensor name -> logical dimension names (for logical-axis rules).
    logical: Callable[[dict], dict[str, tuple[str | None, ...]]] | None = None
    # Optional: raise WorkloadError when params do not fit each other or the mesh.
    check: Callable[[dict, MeshSpec], None] | None = None
    # Optional: extra JSON-able data for the report (e.g. a pipeline schedule).
    info: Callable[[dict], dict] | None = None

    def tensors(self, params: Mapping, specs: Mapping | None = None) -> list[TensorSpec]:
        specs = dict(specs or {})
        shapes = self.shapes(params)
        unknown = [n for n in specs if n not in shapes]
        if unknown:
            raise WorkloadError(f"workload {self.name!r} has no tensor {unknown[0]!r}; its "
                                f"tensors are {choices(shapes)}")
        return [TensorSpec(n, s, params.get("dtype", "float32"), specs.get(n))
                for n, s in shapes.items()]

    def resolve(self, overrides: Mapping | None = None) -> dict:
        """Defaults updated by `overrides`, each checked and converted to the default's type."""
        params = dict(self.defaults)
        for key, value in (overrides or {}).items():
            if key not in self.defaults:
                raise WorkloadError(f"workload {self.name!r} has no param {key!r}; its params "
                                    f"are {choices(self.defaults)}")
            params[key] = _convert(self.name, key, value, self.defaults[key])
        return params


def _convert(workload: str, key: str, value, default):
    if isinstance(default, str):
        return normalize_dtype(value) if key == "dtype" else str(value)
    kind = "whole number" if isinstance(default, int) else "number"
    try:
        if isinstance(value, bool):
            raise ValueError
        number = int(value) if isinstance(default, int) else float(value)
        if isinstance(default, int) and isinstance(value, float) and value != number:
            raise ValueError
    except (TypeError, ValueError):
        raise WorkloadError(f"param {key}={value!r} of workload {workload!r} is not a "
                            f"{kind}") from None
    if number <= 0:
        raise WorkloadError(f"param {key}={value!r} of workload {workload!r} must be > 0")
    return number


