"""The one place that validates a request, before any work is done: the API, the CLI and the app
all call these. Each check raises the explorer error that names the offending value and the
valid choices, so that every caller reports bad input the same way."""

from __future__ import annotations

import math
from collections.abc import Iterable

from explorer.compile.pool import MAX_DEVICES
from explorer.compile.tpu import check_topology
from explorer.cost.hardware import get_target
from explorer.cost.mapping import AxisMapping, check_mapping, default_mapping
from explorer.errors import ExplorerError, TensorError, choices
from explorer.spec.mesh import MeshSpec, parse_mesh
from explorer.spec.tensor import TensorSpec, check_spec

PARTITIONERS = ("shardy", "gspmd")


def check_partitioner(partitioner) -> str:
    if partitioner not in PARTITIONERS:
        raise ExplorerError(f"partitioner {partitioner!r} is not one of {choices(PARTITIONERS)}")
    return partitioner


def check_timeout(timeout) -> float | None:
    """None (the pool's default) or a positive, finite number of seconds."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) \
            or not math.isfinite(timeout) or timeout <= 0:
        raise ExplorerError(f"timeout {timeout!r} is not a positive, finite number of seconds; "
                            "pass e.g. timeout=120, or None for the default")
    return float(timeout)


def check_mesh(mesh, axis_type: str = "auto", *, tpu_topology: str | None = None,
               real_devices: bool = False) -> MeshSpec:
    """The parsed mesh, checked against what will compile it: the fake CPU devices' limit, a TPU
    topology's chip count, or (real devices) nothing, since the machine's own count decides."""
    if real_devices and tpu_topology:
        raise ExplorerError("real_devices and tpu_topology exclude each other: compile for "
                            "this machine's devices or for a TPU topology, not both")
    mesh_spec = parse_mesh(mesh, axis_type)
    if tpu_topology:
        check_topology(tpu_topology, mesh_spec)
    elif not real_devices:
        mesh_spec.check_device_limit(MAX_DEVICES)
    return mesh_spec


def check_target(target: str | None, mapping, mesh: MeshSpec) -> AxisMapping | None:
    """The axis mapping a prediction on `target` will use (None without a target): a known
    target, and a mapping (or the default one) that fits the mesh."""
    if target is None:
        if mapping is not None:
            raise ExplorerError("a mapping places mesh axes on a target's links; choose a "
                                "target too (see explorer.targets())")
        return None
    get_target(target)
    if mapping is None:
        return default_mapping(target, mesh.names, mesh.sizes)
    return check_mapping(target, mesh.names, mesh.sizes, mapping)


def check_inputs(leaves: Iterable[TensorSpec], mesh: MeshSpec) -> None:
    """Every input named once, and each spec fits its tensor and the mesh."""
    seen = set()
    for t in leaves:
        if t.name in seen:
            raise TensorError(f"two inputs are named {t.name!r}; give each tensor its own name",
                              tensor=t.name)
        seen.add(t.name)
        check_spec(t, mesh)
