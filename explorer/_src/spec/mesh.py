"""The device mesh as plain data: ordered axis names with sizes, parsed from text or a mapping.

Logical devices are numbered row-major over the mesh
(device id = np.arange(n).reshape(sizes)[coords]);
the compile workers build their jax Mesh in that order, so HLO device ids read back the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from math import prod

from explorer._src.errors import MeshError, choices
from explorer._src.spec.bounds import MAX_MESH_AXES, MAX_MESH_DEVICES, power_text, show


class AxisType(StrEnum):
    """How jax treats the mesh axes (jax.sharding.AxisType, by the names users write)."""

    AUTO = "auto"            # GSPMD/Shardy propagate shardings
    EXPLICIT = "explicit"    # sharding in types: jax checks every op


AXIS_TYPES = tuple(AxisType)

# Words that spec text gives a meaning of its own (explorer._src.spec.tensor.parse_spec).
RESERVED_AXIS_NAMES = {"None": "a dimension that is not split",
                       "_": "a dimension that is not split",
                       "replicated": "a tensor split over no axis"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class MeshSpec:
    """An N-d device mesh. `axis_type` "auto" lets GSPMD/Shardy propagate shardings; "explicit"
    makes jax's sharding-in-types check every op (jax.make_mesh's default, which rejects e.g. a
    contracting-dim-sharded matmul, so it is opt-in here).

    Logical device ids are row-major positions in the mesh: on ``data=2,model=4`` device 5 is
    at ``data=1, model=1``. Build one with parse_mesh; the constructor checks every field.

    Attributes:
        names: the axis names, outermost first; identifiers, unique, none of the words spec
            text reserves (``None``, ``_``, ``replicated``).
        sizes: the number of devices along each axis, each at least 1.
        axis_type: ``"auto"`` or ``"explicit"``, for every axis.

    Raises:
        MeshError: names and sizes of different lengths, no axes or too many, a name that is
            not an identifier or is used twice, a size below 1, or more devices than any
            machine has.
    """

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    axis_type: AxisType = AxisType.AUTO     # the text "auto" or "explicit" is read as one

    def __post_init__(self):
        if not isinstance(self.names, tuple) or not isinstance(self.sizes, tuple):
            raise MeshError(f"mesh names {show(self.names)} and sizes {show(self.sizes)} must be "
                            "tuples; build a mesh with parse_mesh('data=2,model=4')")
        if len(self.names) != len(self.sizes):
            raise MeshError(f"mesh has {len(self.names)} names but {len(self.sizes)} sizes")
        if not self.names:
            raise MeshError("mesh has no axes; write it as name=size pairs, e.g. 'data=2,model=4'")
        if len(self.names) > MAX_MESH_AXES:
            raise MeshError(f"mesh has {len(self.names)} axes; the limit is {MAX_MESH_AXES}")
        for name, size in zip(self.names, self.sizes, strict=True):
            if not isinstance(name, str) or not _NAME.match(name):
                raise MeshError(f"mesh axis name {show(name)} is not an identifier "
                                "(letters, digits and '_', not starting with a digit)",
                                axis=name if isinstance(name, str) else None)
            if name in RESERVED_AXIS_NAMES:
                raise MeshError(f"mesh axis name {show(name)} is reserved: spec text reads it as "
                                f"{RESERVED_AXIS_NAMES[name]}; choose another name, e.g. "
                                "'data' or 'model'", axis=name)
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise MeshError(f"mesh axis {show(name)} has size {show(size)}; sizes are whole "
                                "numbers >= 1", axis=name)
            if size > MAX_MESH_DEVICES:
                raise MeshError(f"mesh axis {show(name)} has size {show(size)}, more devices than "
                                f"any machine has; the limit is {power_text(MAX_MESH_DEVICES)}",
                                axis=name)
        seen = set()
        for name in self.names:
            if name in seen:
                raise MeshError(f"mesh axis {show(name)} appears twice in {show(self.text())}; "
                                "axis names must be unique", axis=name)
            seen.add(name)
        if self.device_count > MAX_MESH_DEVICES:
            raise MeshError(f"mesh {show(self.text())} has {self.device_count} devices, more "
                            f"than any machine has; the limit is {power_text(MAX_MESH_DEVICES)}")
        if not isinstance(self.axis_type, str) or self.axis_type not in AXIS_TYPES:
            raise MeshError(f"axis type {show(self.axis_type)} is not one of "
                            f"{choices(AXIS_TYPES)}")
        object.__setattr__(self, "axis_type", AxisType(self.axis_type))   # frozen: set once

    @property
    def device_count(self) -> int:
        """The number of devices, the product of the sizes."""
        return prod(self.sizes)

    @property
    def shape(self) -> dict[str, int]:
        """Axis name -> size, in mesh order."""
        return dict(zip(self.names, self.sizes, strict=True))

    def size(self, axis: str) -> int:
        return self.shape[axis]

    def text(self) -> str:
        """The mesh as parse_mesh reads it, e.g. ``data=2,model=4``."""
        return ",".join(f"{n}={s}" for n, s in zip(self.names, self.sizes, strict=True))

    def to_dict(self) -> dict:
        return {"axes": self.shape, "devices": self.device_count, "axis_type": self.axis_type}

    def check_device_limit(self, limit: int) -> None:
        if self.device_count > limit:
            raise MeshError(
                f"mesh {show(self.text())} has {self.device_count} devices, more than the limit of "
                f"{limit} fake CPU devices (the CPU backend fails beyond 2048); shrink an axis")


def parse_mesh(mesh: str | Mapping[str, int] | MeshSpec,
               axis_type: AxisType | str = AxisType.AUTO) -> MeshSpec:
    """A MeshSpec from `'data=2,model=4'`, `{'data': 2, 'model': 4}` or a MeshSpec.

    Args:
        mesh: text of comma-separated ``name=size`` pairs, a mapping of axis name to size (in
            mesh order), or a MeshSpec, returned as it is (its own axis type kept).
        axis_type: ``"auto"`` or ``"explicit"``, for a mesh given as text or a mapping.

    Returns:
        The checked MeshSpec.

    Raises:
        MeshError: an entry without ``=``, a size that is not a whole number, or any of the
            MeshSpec checks.

    Example:
        >>> from explorer import parse_mesh
        >>> mesh = parse_mesh("data=2, model=4")
        >>> mesh.names, mesh.sizes, mesh.device_count
        (('data', 'model'), (2, 4), 8)
        >>> parse_mesh({"data": 2, "model": 4}) == mesh
        True
    """
    if isinstance(mesh, MeshSpec):
        return mesh
    if isinstance(mesh, Mapping):
        if len(mesh) > MAX_MESH_AXES:
            raise MeshError(f"mesh has {len(mesh)} axes; the limit is {MAX_MESH_AXES}")
        return MeshSpec(tuple(mesh.keys()), tuple(mesh.values()), axis_type)
    if not isinstance(mesh, str):
        raise MeshError(f"mesh {show(mesh)} is neither text like 'data=2,model=4' nor a "
                        "mapping")
    names, sizes = [], []
    for part in mesh.split(","):
        part = part.strip()
        if not part:
            continue
        name, eq, size = (p.strip() for p in part.partition("="))
        if not eq:
            raise MeshError(f"mesh entry {show(part)} in {show(mesh)} has no '='; write name=size, "
                            "e.g. 'data=2,model=4'")
        if not re.fullmatch(r"[+-]?\d+", size):
            raise MeshError(f"mesh axis {show(name)} has size {show(size)}, which is not a whole "
                            "number", axis=name)
        if len(size.lstrip("+-0")) > len(str(MAX_MESH_DEVICES)):   # int() of 5000 digits fails
            raise MeshError(f"mesh axis {show(name)} has size {show(size)}, more devices than any "
                            f"machine has; the limit is {power_text(MAX_MESH_DEVICES)}",
                            axis=name)
        names.append(name)
        sizes.append(int(size))
    return MeshSpec(tuple(names), tuple(sizes), axis_type)
