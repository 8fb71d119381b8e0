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
    """How jax treats a mesh axis (jax.sharding.AxisType, by the names users write)."""

    AUTO = "auto"            # GSPMD/Shardy propagate shardings
    EXPLICIT = "explicit"    # sharding in types: jax checks every op
    MANUAL = "manual"        # the program itself splits the data (as inside a shard_map)


AXIS_TYPES = tuple(AxisType)
# jax's name of each type (jax.sharding.AxisType.Explicit), for text that users copy into jax.
JAX_AXIS_TYPE_NAMES = {AxisType.AUTO: "Auto", AxisType.EXPLICIT: "Explicit",
                       AxisType.MANUAL: "Manual"}

# Words that spec text gives a meaning of its own (explorer._src.spec.tensor.parse_spec).
RESERVED_AXIS_NAMES = {"None": "a dimension that is not split",
                       "_": "a dimension that is not split",
                       "replicated": "a tensor split over no axis"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class MeshSpec:
    """An N-d device mesh. An axis of type "auto" lets GSPMD/Shardy propagate shardings;
    "explicit" makes jax's sharding-in-types check every op over it (jax.make_mesh's default,
    which rejects e.g. a contracting-dim-sharded matmul, so it is opt-in here); "manual" is an
    axis the program splits itself. Each axis has its own type, as jax's meshes do
    (``axis_types=(AxisType.Explicit, AxisType.Auto)``).

    Logical device ids are row-major positions in the mesh: on ``data=2,model=4`` device 5 is
    at ``data=1, model=1``. Build one with parse_mesh; the constructor checks every field.

    Attributes:
        names: the axis names, outermost first; identifiers, unique, none of the words spec
            text reserves (``None``, ``_``, ``replicated``).
        sizes: the number of devices along each axis, each at least 1.
        axis_type: one type for every axis (``"auto"``, ``"explicit"`` or ``"manual"``), or a
            tuple of one per axis; a tuple of one type throughout is kept as that one type, so
            that a mesh has one form (and one cache key). `axis_types` is always per axis.

    Raises:
        MeshError: names and sizes of different lengths, no axes or too many, a name that is
            not an identifier or is used twice, a size below 1, or more devices than any
            machine has.
    """

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    # One type for all axes, or (a mesh of mixed types only) a tuple of one per axis. Kept in
    # this one field, not a second one, so that a mesh of one type pickles, and keys the cache
    # on disk, as it did before axes had types of their own.
    axis_type: AxisType | tuple[AxisType, ...] = AxisType.AUTO

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
        object.__setattr__(self, "axis_type", self._checked_axis_type())   # frozen: set once
        seen = set()
        for name in self.names:
            if name in seen:
                raise MeshError(f"mesh axis {show(name)} appears twice in {show(self.text())}; "
                                "axis names must be unique", axis=name)
            seen.add(name)
        if self.device_count > MAX_MESH_DEVICES:
            raise MeshError(f"mesh {show(self.text())} has {self.device_count} devices, more "
                            f"than any machine has; the limit is {power_text(MAX_MESH_DEVICES)}")

    def _checked_axis_type(self) -> AxisType | tuple[AxisType, ...]:
        """The axis type field as one AxisType, or a tuple of one per axis where they differ."""
        given = self.axis_type
        if isinstance(given, tuple):
            if len(given) != len(self.names):
                raise MeshError(f"mesh {show(self.names)} has {len(self.names)} axes but "
                                f"{len(given)} axis types {show(tuple(given))}; give one per "
                                "axis, or one for all")
            kinds = tuple(check_axis_type(t, axis=n) for t, n in zip(given, self.names,
                                                                     strict=True))
            return kinds[0] if len(set(kinds)) == 1 else kinds
        return check_axis_type(given)

    @property
    def axis_types(self) -> tuple[AxisType, ...]:
        """Each axis's type, in mesh order."""
        if isinstance(self.axis_type, tuple):
            return self.axis_type
        return (self.axis_type,) * len(self.names)

    @property
    def mixed(self) -> bool:
        """The axes are not all of one type."""
        return isinstance(self.axis_type, tuple)

    def axes_of_type(self, kind: AxisType | str) -> tuple[str, ...]:
        """The names of the axes of type `kind`, in mesh order."""
        return tuple(n for n, t in zip(self.names, self.axis_types, strict=True) if t == kind)

    def types_text(self) -> str:
        """The axis types as people read them: ``auto``, or per axis where they differ
        (``data explicit, model auto``)."""
        if not self.mixed:
            return str(self.axis_type)
        return ", ".join(f"{n} {t}" for n, t in zip(self.names, self.axis_types, strict=True))

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
        """The mesh as parse_mesh reads it, e.g. ``data=2,model=4``; a mesh of mixed types
        names every axis's type (``data=2:explicit,model=4:auto``), one of one type none (its
        type is given beside it, as `axis_type`)."""
        if not self.mixed:
            return ",".join(f"{n}={s}" for n, s in zip(self.names, self.sizes, strict=True))
        return ",".join(f"{n}={s}:{t}" for n, s, t in zip(self.names, self.sizes,
                                                          self.axis_types, strict=True))

    def to_dict(self) -> dict:
        kinds = ({"axis_types": dict(zip(self.names, map(str, self.axis_types), strict=True))}
                 if self.mixed else {"axis_type": self.axis_type})
        return {"axes": self.shape, "devices": self.device_count, **kinds}

    def check_device_limit(self, limit: int) -> None:
        if self.device_count > limit:
            raise MeshError(
                f"mesh {show(self.text())} has {self.device_count} devices, more than the limit of "
                f"{limit} fake CPU devices (the CPU backend fails beyond 2048); shrink an axis")


def check_axis_type(kind, axis: str | None = None) -> AxisType:
    """`kind` as an AxisType: one, its name (``"explicit"``), or jax's own
    (``jax.sharding.AxisType.Explicit``, read by its name, as the docs' meshes write it)."""
    name = getattr(kind, "name", None)
    if not isinstance(kind, str) and isinstance(name, str) and name.lower() in AXIS_TYPES:
        kind = name.lower()
    if not isinstance(kind, str) or kind not in AXIS_TYPES:
        where = f" of mesh axis {show(axis)}" if axis is not None else ""
        raise MeshError(f"axis type {show(kind)}{where} is not one of {choices(AXIS_TYPES)}",
                        **({"axis": axis} if axis is not None else {}))
    return AxisType(kind)


def parse_mesh(mesh: str | Mapping[str, int] | MeshSpec,
               axis_type: AxisType | str | tuple = AxisType.AUTO) -> MeshSpec:
    """A MeshSpec from `'data=2,model=4'`, `{'data': 2, 'model': 4}` or a MeshSpec.

    In text an axis may name its own type after a colon: ``data=2:explicit,model=4`` is an
    explicit `data` axis and a `model` axis of `axis_type`.

    Args:
        mesh: text of comma-separated ``name=size`` or ``name=size:type`` entries, a mapping of
            axis name to size (in mesh order), or a MeshSpec, returned as it is (its own axis
            types kept).
        axis_type: ``"auto"``, ``"explicit"`` or ``"manual"`` (or a tuple of one per axis), for
            the axes of a mesh given as text or a mapping that name no type of their own.

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
        >>> [str(t) for t in parse_mesh("data=2:explicit,model=4").axis_types]
        ['explicit', 'auto']
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
    names, sizes, kinds = [], [], []
    for part in mesh.split(","):
        part = part.strip()
        if not part:
            continue
        name, eq, size = (p.strip() for p in part.partition("="))
        if not eq:
            raise MeshError(f"mesh entry {show(part)} in {show(mesh)} has no '='; write name=size, "
                            "e.g. 'data=2,model=4' (or name=size:type, 'data=2:explicit')")
        size, colon, kind = (p.strip() for p in size.partition(":"))
        kinds.append(check_axis_type(kind, axis=name) if colon else None)
        if not re.fullmatch(r"[+-]?\d+", size):
            raise MeshError(f"mesh axis {show(name)} has size {show(size)}, which is not a whole "
                            "number", axis=name)
        if len(size.lstrip("+-0")) > len(str(MAX_MESH_DEVICES)):   # int() of 5000 digits fails
            raise MeshError(f"mesh axis {show(name)} has size {show(size)}, more devices than any "
                            f"machine has; the limit is {power_text(MAX_MESH_DEVICES)}",
                            axis=name)
        names.append(name)
        sizes.append(int(size))
    if all(k is None for k in kinds):
        return MeshSpec(tuple(names), tuple(sizes), axis_type)
    # Some axes name their type: the others take `axis_type`'s.
    default = MeshSpec(tuple(names), tuple(sizes), axis_type).axis_types
    return MeshSpec(tuple(names), tuple(sizes),
                    tuple(k or d for k, d in zip(kinds, default, strict=True)))
