"""What a workload is: named input tensors, size params, and a function of the tensors.

Optionally also logical dimension names (for rules), tensor kinds, constraint points and
per-tensor dtypes. The registry of built-in workloads is in registry.py; this module only
defines the shape of one, so that workload modules can define theirs without import cycles.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from explorer.errors import WorkloadError, choices
from explorer.spec.mesh import MeshSpec
from explorer.spec.tensor import TensorSpec, normalize_dtype


@dataclass(frozen=True)
class Point:
    """A constraint point: an intermediate tensor a spec can be pinned on."""

    shape: tuple[int, ...]
    dims: tuple[str | None, ...]    # logical dimension names
    kind: str                       # "act" or "grad", for kind-scoped rules


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
    # tensor name -> kind ("param", "opt", "input"); tensors not named are params.
    kinds: Callable[[dict], dict[str, str]] | None = None
    # constraint point name -> Point, in program order.
    points: Callable[[dict], dict[str, Point]] | None = None
    # tensor name -> dtype, where it differs from the `dtype` param.
    dtypes: Callable[[dict], dict[str, str]] | None = None
    # True when the function returns its state (params, optimizer state) under the input names:
    # the state then comes out in the layout it went in, as a training loop needs.
    returns_state: bool = False

    def tensors(self, params: Mapping, specs: Mapping | None = None) -> list[TensorSpec]:
        specs = dict(specs or {})
        shapes = self.shapes(params)
        unknown = [n for n in specs if n not in shapes]
        if unknown:
            raise WorkloadError(f"workload {self.name!r} has no tensor {unknown[0]!r}; its "
                                f"tensors are {choices(shapes)}")
        dtypes = self.dtypes(params) if self.dtypes is not None else {}
        default = params.get("dtype", "float32")
        return [TensorSpec(n, s, dtypes.get(n, default), specs.get(n))
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


