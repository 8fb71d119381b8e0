"""The meshes and devices a user's objects hold, shipped to the compile worker as stand-ins.

Model libraries keep a `jax.sharding.Mesh` in their configs, so a Flax model's GraphDef, a
closure or a NamedSharding may hold one; a Mesh holds `Device`s of the process that made it,
which cannot be pickled and do not exist in the worker. Each is pickled here as what it is
(axis names, sizes and types; a device's id) and rebuilt, while the worker unpickles the
function, over the devices the worker compiles for:
- a Mesh with the compiled mesh's axis names is the compiled mesh itself (a config's mesh is
  the mesh the model runs on, which is the one being explored); where its sizes differ, a note
  says which sizes were compiled;
- a Mesh over other axes (an expert mesh a model's own shard_map runs over) is a mesh of its
  own sizes over the same devices, in the compiled mesh's device order;
- a Device is the compiled device with its id.

The parent side (`reduce`) never imports jax: a Mesh or Device can only exist where jax
already is.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from math import prod
from typing import Any

from explorer.errors import InputError

# The mesh being compiled and the notes for the Report, while a function is unpickled.
_compiling: dict[str, Any] = {}


def _jax_classes() -> tuple[type, type] | None:
    """jax's Mesh and Device classes once jax is imported (the pickler asks for every object
    it writes, so they are looked up once)."""
    if "classes" not in _jax:
        if "jax" not in sys.modules:
            return None
        import jax
        from jax.sharding import Mesh

        _jax["classes"] = (Mesh, jax.Device)
    return _jax["classes"]


_jax: dict[str, tuple[type, type]] = {}


def reduce(obj: Any) -> tuple | None:
    """The pickle reduction of a jax Mesh or Device, or None for anything else."""
    classes = _jax_classes()
    if classes is None:
        return None
    mesh_class, device_class = classes
    if isinstance(obj, mesh_class):
        types = tuple(t.name for t in obj.axis_types)
        return _rebuild_mesh, (tuple(obj.axis_names), tuple(obj.devices.shape), types)
    if isinstance(obj, device_class):
        return _rebuild_device, (int(obj.id),)
    return None


@contextmanager
def compiling_on(mesh, notes: list[str]) -> Iterator[None]:
    """Rebuild meshes and devices over `mesh` while a function is unpickled in the worker;
    what the rebuild changed is appended to `notes`."""
    _compiling.update(mesh=mesh, notes=notes)
    try:
        yield
    finally:
        _compiling.clear()


class _Pending:
    """A mesh or device unpickled outside a compile (a search's Ray task, which calls
    explorer.analyze in turn): pickled again as it came, it is rebuilt in the worker."""

    def __init__(self, rebuild, args: tuple):
        self.rebuild, self.args = rebuild, args

    def __reduce__(self):
        return self.rebuild, self.args


def load_function(data: bytes, mesh, notes: list[str]):
    """The function the parent pickled, its meshes and devices rebuilt over `mesh`."""
    import cloudpickle

    with compiling_on(mesh, notes):
        return cloudpickle.loads(data)


def _mesh_text(names, sizes) -> str:
    return ",".join(f"{n}={s}" for n, s in zip(names, sizes, strict=True))


def _rebuild_mesh(names: tuple[str, ...], sizes: tuple[int, ...], types: tuple[str, ...]):
    from jax.sharding import AxisType, Mesh

    mesh = _compiling.get("mesh")
    if mesh is None:
        return _Pending(_rebuild_mesh, (names, sizes, types))
    if names == tuple(mesh.axis_names):
        if sizes != tuple(mesh.devices.shape):
            _compiling["notes"].append(
                f"the program holds a Mesh of its own ({_mesh_text(names, sizes)}); it was "
                f"compiled on the explored mesh of the same axes "
                f"({_mesh_text(names, mesh.devices.shape)}), since a Mesh's devices belong to "
                "the process that made it")
        return mesh
    devices = list(mesh.devices.flat)
    if prod(sizes) > len(devices):
        raise InputError(f"the program holds a Mesh {_mesh_text(names, sizes)} of "
                         f"{prod(sizes)} devices, more than the {len(devices)} of the explored "
                         f"mesh {_mesh_text(mesh.axis_names, mesh.devices.shape)}; explore it "
                         "on a mesh with at least as many devices")
    import numpy as np

    array = np.array(devices[:prod(sizes)], dtype=object).reshape(sizes)
    return Mesh(array, names, axis_types=tuple(getattr(AxisType, t) for t in types))


def _rebuild_device(device_id: int):
    mesh = _compiling.get("mesh")
    if mesh is None:
        return _Pending(_rebuild_device, (device_id,))
    devices = list(mesh.devices.flat)
    by_id = {d.id: d for d in devices}
    return by_id.get(device_id, devices[device_id % len(devices)])
