"""The device mesh as plain data: ordered axis names with sizes, parsed from text or a mapping.

Logical devices are numbered row-major over the mesh
(device id = np.arange(n).reshape(sizes)[coords]);
the compile workers build their jax Mesh in that order, so HLO device ids read back the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from math import prod

from explorer.errors import MeshError, choices

AXIS_TYPES = ("auto", "explicit")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class MeshSpec:
    """An N-d device mesh. `axis_type` "auto" lets GSPMD/Shardy propagate shardings; "explicit"
    makes jax's sharding-in-types check every op (jax.make_mesh's default, which rejects e.g. a
    contracting-dim-sharded matmul, so it is opt-in here)."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    axis_type: str = "auto"

    def __post_init__(self):
        if len(self.names) != len(self.sizes):
            raise MeshError(f"mesh has {len(self.names)} names but {len(self.sizes)} sizes")
        if not self.names:
            raise MeshError("mesh has no axes; write it as name=size pairs, e.g. 'data=2,model=4'")
        for name, size in zip(self.names, self.sizes, strict=True):
            if not isinstance(name, str) or not _NAME.match(name):
                raise MeshError(f"mesh axis name {name!r} is not an identifier "
                                "(letters, digits and '_', not starting with a digit)", axis=name)
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise MeshError(f"mesh axis {name!r} has size {size!r}; sizes are whole "
                                "numbers >= 1", axis=name)
        seen = set()
        for name in self.names:
            if name in seen:
                raise MeshError(f"mesh axis {name!r} appears twice in {self.text()!r}; "
                                "axis names must be unique", axis=name)
            seen.add(name)
        if self.axis_type not in AXIS_TYPES:
            raise MeshError(f"axis type {self.axis_type!r} is not one of {choices(AXIS_TYPES)}")

    @property
    def device_count(self) -> int:
        return prod(self.sizes)

    @property
    def shape(self) -> dict[str, int]:
        return dict(zip(self.names, self.sizes, strict=True))

    def size(self, axis: str) -> int:
        return self.shape[axis]

    def text(self) -> str:
        return ",".join(f"{n}={s}" for n, s in zip(self.names, self.sizes, strict=True))

    def to_dict(self) -> dict:
        return {"axes": self.shape, "devices": self.device_count, "axis_type": self.axis_type}

    def check_device_limit(self, limit: int) -> None:
        if self.device_count > limit:
            raise MeshError(
                f"mesh {self.text()!r} has {self.device_count} devices, more than the limit of "
                f"{limit} fake CPU devices (the CPU backend fails beyond 2048); shrink an axis")


def parse_mesh(mesh: str | Mapping[str, int] | MeshSpec, axis_type: str = "auto") -> MeshSpec:
    """A MeshSpec from `'data=2,model=4'`, `{'data': 2, 'model': 4}` or a MeshSpec."""
    if isinstance(mesh, MeshSpec):
        return mesh
    if isinstance(mesh, Mapping):
        return MeshSpec(tuple(mesh.keys()), tuple(mesh.values()), axis_type)
    if not isinstance(mesh, str):
        raise MeshError(f"mesh {mesh!r} is neither text like 'data=2,model=4' nor a mapping")
    names, sizes = [], []
    for part in mesh.split(","):
        part = part.strip()
        if not part:
            continue
        name, eq, size = (p.strip() for p in part.partition("="))
        if not eq:
            raise MeshError(f"mesh entry {part!r} in {mesh!r} has no '='; write name=size, "
                            "e.g. 'data=2,model=4'")
        if not re.fullmatch(r"[+-]?\d+", size):
            raise MeshError(f"mesh axis {name!r} has size {size!r}, which is not a whole number",
                            axis=name)
        names.append(name)
        sizes.append(int(size))
    return MeshSpec(tuple(names), tuple(sizes), axis_type)
