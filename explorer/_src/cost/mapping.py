"""Where each mesh axis lives on a target: mesh axes mapped onto physical axes (links).

A mapping places every mesh axis on one or more physical axes of the target (torus dimensions,
the GPUs of a node, nodes, slices); the time formulas in explorer/_src/cost/collectives.py read
which links a collective crosses from it. Rules and examples: docs/cost-model.md, "Mapping mesh
axes onto the machine". Pure data and validation; no jax.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from math import gcd, prod

from explorer._src.cost.catalog.gpu import NODE_AXIS
from explorer._src.cost.catalog.names import get_target, targets_with_chips
from explorer._src.cost.catalog.types import PhysicalAxis, Target, TargetFamily
from explorer._src.errors import MappingError, choices
from explorer._src.spec.bounds import show


class Tier(StrEnum):
    """Which of the links a collective's mesh axes are mapped onto it uses.

    A collective of a one-program compile uses them all (ALL): a collective over a mesh axis
    that spans both slices (or nodes) and the ICI (or NVLink) inside them crosses both tiers.
    libtpu splits a multi-slice program's collectives at the slices' edges (its MegaScale
    transfers): the part inside each slice uses the inside links only (INSIDE), the DCN leg the
    links between slices only (ACROSS). A Report's Collective says which in its `tier`."""

    ALL = ""
    INSIDE = "inside"     # ICI, NVLink: inside a slice or node
    ACROSS = "across"     # DCN, InfiniBand: between slices or nodes


@dataclass(frozen=True)
class Segment:
    """The part of one physical axis that one mesh axis occupies.

    On a physical axis shared by several mesh axes, the later mesh axis (inner, as in row-major
    device order) takes neighbouring chips (stride 1); an earlier one steps over it (stride =
    the inner factors), so its traffic crosses `stride` links per logical hop.
    """

    mesh_axis: str
    axis: PhysicalAxis
    factor: int
    stride: int = 1

    @property
    def wraps(self) -> bool:
        """A closed ring: the physical axis wraps and this segment goes all the way round."""
        return (self.axis.wraparound and not self.axis.link.switched
                and self.factor * self.stride == self.axis.size)

    def text(self) -> str:
        return self.axis.name if self.factor == self.axis.size else \
            f"{self.axis.name}:{self.factor}"


@dataclass(frozen=True)
class AxisMapping:
    """Where each mesh axis lives on a target. Build it with default_mapping/check_mapping.

    explorer.analyze's ``mapping=`` takes one as well as text or a dict; `text` writes it back
    as text.

    Attributes:
        target: the target's name.
        names: the mesh axis names, in mesh order.
        sizes: the mesh axis sizes.
        placement: per mesh axis, the Segments of physical axes it occupies (each a physical
            axis, how many of its chips, and the stride between them); () for an axis of size
            1 left unmapped, and for every axis on the CPU host.
    """

    target: str
    names: tuple[str, ...]
    sizes: tuple[int, ...]
    placement: tuple[tuple[Segment, ...], ...]     # per mesh axis, in mesh order

    def segments(self, mesh_axis: str, tier: Tier = Tier.ALL) -> tuple[Segment, ...]:
        """The Segments of `mesh_axis`, those of one `tier` of links only when given; a
        MappingError when the mesh has no such axis."""
        if mesh_axis not in self.names:
            raise MappingError(f"collective names mesh axis {mesh_axis!r}, which the mesh "
                               f"lacks; mesh axes: {choices(self.names)}", axis=mesh_axis,
                               target=self.target)
        segments = self.placement[self.names.index(mesh_axis)]
        if tier is Tier.ALL:
            return segments
        return tuple(s for s in segments if s.axis.link.across == (tier is Tier.ACROSS))

    def to_dict(self) -> dict[str, str]:
        """Mesh axis -> its physical axes as text (``"x+y:2"``), ``"-"`` for none."""
        return {n: "+".join(s.text() for s in segs) or "-"
                for n, segs in zip(self.names, self.placement, strict=True)}

    def text(self) -> str:
        """The mapping as check_mapping/parse_mapping accept it, e.g. 'data=slice,model=x+y'."""
        return ",".join(f"{n}={t}" for n, t in self.to_dict().items())


def parse_mapping(text: str) -> dict[str, tuple[str, ...]]:
    """`'data=slice,model=x+y:2'` -> {'data': ('slice',), 'model': ('x', 'y:2')}.

    Each mesh axis names the physical axes it spans, joined by '+'; ':k' takes k of that
    axis's chips instead of all of them.
    """
    out: dict[str, tuple[str, ...]] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, eq, rhs = (p.strip() for p in part.partition("="))
        if not eq or not rhs:
            raise MappingError(f"mapping entry {part!r} in {text!r} is not mesh_axis=physical "
                               "axes; write e.g. 'data=slice,model=x+y' or 'model=gpu+node:2'")
        out[name] = tuple(p.strip() for p in rhs.split("+"))
    return out


def _check_mesh(target: Target, names, sizes) -> tuple[tuple[str, ...], tuple[int, ...]]:
    names, sizes = tuple(names), tuple(int(s) for s in sizes)
    if len(names) != len(sizes):
        raise MappingError(f"mesh has {len(names)} axis names but {len(sizes)} sizes")
    n = prod(sizes)
    if target.chips is not None and n != target.chips:
        same = targets_with_chips(n)
        shown = choices(same[:8]) + (f" and {len(same) - 8} more" if len(same) > 8 else "")
        hint = (f"; targets with {n} devices: {shown}" if same else
                f"; no target has {n} devices")
        mesh = ",".join(f"{a}={s}" for a, s in zip(names, sizes, strict=True))
        raise MappingError(f"mesh {mesh!r} has {n} devices but {target.name} has "
                           f"{target.chips} chips{hint}", target=target.name)
    return names, sizes


def _limit(target: Target, axis: PhysicalAxis) -> str:
    """The physical limit of an axis, in words, for error messages."""
    if axis.name == "gpu":
        return f"a node has {axis.size} GPU{'s' if axis.size > 1 else ''} on NVLink"
    if axis.name == "node":
        return f"{target.name} has {axis.size} nodes on InfiniBand"
    if axis.name == "slice":
        return f"{target.name} has {axis.size} slices on DCN"
    if axis.name == "ipu":
        return f"a Bow-2000 has {axis.size} IPUs"
    return f"{target.name}'s ICI dimension {axis.name!r} has {axis.size} chips"


def _hint(target: Target, axis: PhysicalAxis, mesh_axis: str, size: int) -> str:
    others = [a for a in target.axes if a.name != axis.name]
    if not others:
        return ""
    rest = size // axis.size if size % axis.size == 0 else None
    if rest and any(a.size % rest == 0 for a in others):
        nxt = next(a for a in others if a.size % rest == 0)
        return f"; map the rest elsewhere, e.g. {mesh_axis}={axis.name}+{nxt.name}:{rest}"
    return f"; other axes: {', '.join(a.describe() for a in others)}"


_MAPPING_FORMS = ("text like 'data=node,model=gpu', a dict {mesh axis: physical axes} whose "
                  "values are a name, 'name:k', (name, k) or a list of those, or an AxisMapping")
# A physical axis has at most this many chips (a 4096-chip pod's longest axis is 16); larger
# factors are refused before any arithmetic.
MAX_FACTOR = 2**20


def _check_mapping_form(mapping) -> None:
    """The mapping's structure, checked before its entries are read: a mapping of mesh axes to
    a name, 'name:k', (name, k) or a list of those."""
    if isinstance(mapping, AxisMapping | str):
        return
    if not isinstance(mapping, Mapping):
        raise MappingError(f"mapping {show(mapping)} is not {_MAPPING_FORMS}")
    for axis, value in mapping.items():
        entries = (value,) if isinstance(value, str) or _is_pair(value) else value
        if not isinstance(entries, tuple | list) \
                or not all(isinstance(e, str) or _is_pair(e) for e in entries):
            raise MappingError(f"mapping of mesh axis {show(axis)}: {show(value)} is not a "
                               "physical axis name, 'name:k', (name, k) or a list of those, "
                               "e.g. 'gpu', 'node:2', ('node', 2) or ['gpu', 'node:2']",
                               axis=axis if isinstance(axis, str) else None)


def _is_pair(value) -> bool:
    """(name, k): a physical axis and how many of its devices, k a whole number."""
    return (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str)
            and isinstance(value[1], int) and not isinstance(value[1], bool)
            and 1 <= value[1] <= MAX_FACTOR)


def check_mapping(target: str | Target, mesh_names: Sequence[str], mesh_sizes: Sequence[int],
                  mapping: AxisMapping | str | Mapping[str, str | Sequence]) -> AxisMapping:
    """Validate a user mapping of mesh axes onto physical axes; the error names the limit.

    `mapping` is text ('data=slice,model=x+y:2'), a dict {mesh axis: physical axes}, whose
    values are a name, 'name:k', (name, k) or a sequence of those, or an AxisMapping.
    """
    target = get_target(target)
    names, sizes = _check_mesh(target, mesh_names, mesh_sizes)
    _check_mapping_form(mapping)
    if isinstance(mapping, AxisMapping):
        mapping = {n: tuple(s.text() for s in segs)
                   for n, segs in zip(mapping.names, mapping.placement, strict=True)}
    elif isinstance(mapping, str):
        mapping = parse_mapping(mapping)
    for key in mapping:
        if key not in names:
            raise MappingError(f"mapping names mesh axis {key!r}, which the mesh lacks; mesh "
                               f"axes: {choices(names)}", axis=key, target=target.name)
    if target.family is TargetFamily.CPU:
        return AxisMapping(target.name, names, sizes, tuple(() for _ in names))
    raw = [_axis_placement(target, name, size, mapping.get(name, ()))
           for name, size in zip(names, sizes, strict=True)]
    return AxisMapping(target.name, names, sizes, _segments(target, names, raw))


def _axis_placement(target: Target, name: str, size: int,
                    entries) -> list[tuple[PhysicalAxis, int]]:
    """The physical axes mesh axis `name` (of `size` devices) is mapped to, each with how many
    of its devices it takes; `entries` is one of check_mapping's mapping values."""
    if isinstance(entries, str) or (isinstance(entries, tuple) and len(entries) == 2
                                    and isinstance(entries[1], int)):
        entries = (entries,)
    if not entries and size > 1:
        raise MappingError(f"mesh axis {name!r} (size {size}) is not mapped; map it onto "
                           f"{', '.join(a.describe() for a in target.axes)}",
                           axis=name, target=target.name)
    placed = [_physical_factor(target, name, entry) for entry in entries]
    spanned = prod(f for _, f in placed)
    if spanned != size:
        where = " + ".join(f"{a.name}:{f}" for a, f in placed)
        limits = "; ".join(_limit(target, a) for a, _ in placed)
        hint = _hint(target, placed[0][0], name, size) if len(placed) == 1 else ""
        raise MappingError(
            f"mesh axis {name!r} has size {size} but is mapped to {where} = {spanned} "
            f"devices ({limits}){hint}", axis=name, target=target.name)
    return placed


def _physical_factor(target: Target, name: str, entry) -> tuple[PhysicalAxis, int]:
    """One entry of mesh axis `name`'s mapping ('gpu', 'node:2' or ('node', 2)): the physical
    axis and how many of its devices (all of them where no factor is given)."""
    if isinstance(entry, tuple):
        phys_name, factor = entry
    else:
        phys_name, _, f_text = str(entry).partition(":")
        factor = None
        if f_text:
            if not re.fullmatch(r"\d{1,7}", f_text.strip()):
                raise MappingError(
                    f"mesh axis {name!r}: {show(entry)} has factor {show(f_text)}, not "
                    f"a whole number from 1 to {MAX_FACTOR}", axis=name,
                    target=target.name)
            factor = int(f_text)
    phys_name = str(phys_name).strip()
    if phys_name not in [a.name for a in target.axes]:
        raise MappingError(
            f"mesh axis {name!r} is mapped to {phys_name!r}, which {target.name} lacks; "
            f"its axes: {', '.join(a.describe() for a in target.axes) or '(none)'}",
            axis=name, target=target.name)
    axis = target.axis(phys_name)
    factor = axis.size if factor is None else factor
    if factor < 1 or factor > axis.size or axis.size % factor:
        raise MappingError(
            f"mesh axis {name!r} takes {factor} from {phys_name!r} but "
            f"{_limit(target, axis)}; a factor must divide {axis.size}"
            + _hint(target, axis, name, factor), axis=name, target=target.name)
    return axis, factor


def _segments(target: Target, names: tuple[str, ...],
              raw: list[list[tuple[PhysicalAxis, int]]]) -> tuple[tuple[Segment, ...], ...]:
    """Each mesh axis's Segments, from the factors `raw` it takes of each physical axis. Each
    physical axis must be shared out exactly; inner (later) mesh axes get stride 1."""
    placement: list[list[Segment]] = [[] for _ in names]
    for axis in target.axes:
        stride = 1
        for i in reversed(range(len(names))):
            for a, f in raw[i]:
                if a.name == axis.name:
                    placement[i].append(Segment(names[i], axis, f, stride))
                    stride *= f
        if stride > axis.size or axis.size % stride:
            users = [names[i] for i in range(len(names)) if any(a.name == axis.name
                                                                 for a, _ in raw[i])]
            raise MappingError(f"mesh axes {choices(users)} ask for {stride} of "
                               f"{axis.name!r} but {_limit(target, axis)}",
                               axis=users[0] if users else None, target=target.name)
    return tuple(tuple(p) for p in placement)


def default_mapping(target: str | Target, mesh_names: Sequence[str],
                    mesh_sizes: Sequence[int]) -> AxisMapping:
    """Innermost mesh axes on the fastest links: walk the mesh from its last axis and the
    machine from its innermost axis (ICI/NVLink before DCN/InfiniBand), giving each mesh axis
    the largest factor of the current physical axis that divides it."""
    target = get_target(target)
    names, sizes = _check_mesh(target, mesh_names, mesh_sizes)
    if target.family is TargetFamily.CPU:
        return AxisMapping(target.name, names, sizes, tuple(() for _ in names))
    remaining = [a.size for a in target.axes]
    j = len(remaining) - 1
    assign: dict[str, list[tuple[str, int]]] = {}
    for i in reversed(range(len(names))):
        need, placed = sizes[i], []
        while need > 1:
            while j >= 0 and remaining[j] == 1:
                j -= 1
            f = gcd(need, remaining[j]) if j >= 0 else 1
            if f == 1:
                left = target.axes[j].describe() if j >= 0 else "nothing"
                raise MappingError(
                    f"no default mapping: mesh axis {names[i]!r} still needs {need} devices "
                    f"but the next free physical axis is {left}; give a mapping such as "
                    f"'{names[i]}=...' over {choices(a.name for a in target.axes)}",
                    axis=names[i], target=target.name)
            placed.append((target.axes[j].name, f))
            need //= f
            remaining[j] //= f
        assign[names[i]] = placed
    return check_mapping(target, names, sizes, assign)


def placed_mapping(target: str | Target, mesh_names: Sequence[str], mesh_sizes: Sequence[int],
                   mapping: AxisMapping | str | Mapping | None = None) -> AxisMapping:
    """The mapping a prediction uses: default_mapping where none is given, else the given one
    checked (check_mapping)."""
    if mapping is None:
        return default_mapping(target, mesh_names, mesh_sizes)
    return check_mapping(target, mesh_names, mesh_sizes, mapping)


def crosses_nodes(mapping: AxisMapping, axes: Sequence[str]) -> bool:
    """Whether a collective over mesh `axes` runs between the nodes of a GPU target under
    `mapping`: one of them lies on the target's `node` axis, the links between nodes
    (InfiniBand) that the cost model prices as the tier across nodes (Tier.ACROSS)."""
    return any(s.axis.name == NODE_AXIS for a in axes for s in mapping.segments(a, Tier.ACROSS))
