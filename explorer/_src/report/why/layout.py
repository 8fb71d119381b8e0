"""Layouts as mesh axes per dimension, read from HLO sharding text, and written as specs."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from explorer._src.hlo.sharding import tiling_from_hlo
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import Entry

# The mesh axes splitting each dimension of a tensor, major first, as `dim_axes` reads them
# from a sharding: (("data",), ()).
DimAxes = tuple[tuple[str, ...], ...]


def dim_axes(sharding: str | None, rank: int, mesh: MeshSpec) -> DimAxes | None:
    """The mesh axes splitting each dimension of a tensor with this HLO sharding, major first;
    None when the sharding is absent or names no device layout. Manual (shard_map) and partial
    subgroups are not dimensions, so they are left out."""
    if not sharding or sharding.startswith("{{"):
        return None
    try:
        tiling = tiling_from_hlo(sharding, rank, mesh.device_count)
    except ValueError:
        return None
    sizes = mesh.sizes
    coords = np.stack(np.unravel_index(tiling.device_array(), sizes), axis=-1)
    out = []
    for d, k in enumerate(tiling.tiles):
        if k == 1:
            out.append(())
            continue
        # The mesh coordinates that change as one steps along dimension d.
        line = coords[tuple(slice(None) if i == d else 0 for i in range(rank + 1))]
        changed = line != line[0]
        axes = [a for a in range(len(sizes)) if sizes[a] > 1 and changed[:, a].any()]
        if math.prod(sizes[a] for a in axes) != k:
            return None           # not a split over whole mesh axes: say nothing
        axes.sort(key=lambda a: -int(np.argmax(changed[:, a])))
        out.append(tuple(mesh.names[a] for a in axes))
    return tuple(out)


def spec_text(axes: Iterable[tuple[str, ...]] | None) -> str:
    """A layout as the spec grammar writes it: `data,None`, `(data,model),None`, `replicated`."""
    if axes is None:
        return "(no mesh layout)"
    axes = tuple(axes)
    if not any(axes):
        return "replicated"
    return ",".join("None" if not a else a[0] if len(a) == 1 else "(" + ",".join(a) + ")"
                    for a in axes)


def layout_spec(axes: Iterable[tuple[str, ...]] | None) -> tuple[Entry, ...] | None:
    """A layout as spec entries, one per dimension (`(("data",), ())` -> `("data", None)`);
    None where there is no mesh layout. `spec_text` writes the same layout as text."""
    if axes is None:
        return None
    return tuple(None if not a else a[0] if len(a) == 1 else tuple(a) for a in axes)


def shard_dims(dims: Iterable[int], axes: DimAxes, mesh: MeshSpec) -> tuple[int, ...]:
    """The per-device shape of a tensor of `dims` laid out as `axes` (a split rounds up)."""
    sizes = dict(zip(mesh.names, mesh.sizes, strict=True))
    return tuple(-(-n // math.prod(sizes[x] for x in ax)) for n, ax in
                 zip(dims, axes, strict=False))


