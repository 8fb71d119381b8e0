"""The devices of several TPU slices laid out as a hybrid mesh, as multi-slice programs lay them.

A multi-slice target (`tpu-v5e-16x16-4slices`) joins slices by the data-center network (DCN).
Its mesh is a hybrid one, as `jax.experimental.mesh_utils.create_hybrid_device_mesh` and MaxText
build it: each mesh axis is a DCN part (how many slices it spans, from the axis mapping's
`slice` axis) times an ICI part (inside a slice); every slice holds the same ICI block of the
mesh, and along an axis with both parts the slices are the outer one. Inside a slice the devices
keep libtpu's order, reshaped row-major, as a one-slice compile lays them
(explorer/_src/compile/backend.py `build_mesh`).

No jax import: the devices are any objects with jax's `slice_index`.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

import numpy as np


def ici_shape(sizes: Sequence[int], slices_per_axis: Sequence[int]) -> tuple[int, ...]:
    """Each mesh axis's part inside one slice: its size over the slices it spans. ValueError
    where an axis's size is not a whole number of its slices."""
    if len(sizes) != len(slices_per_axis):
        raise ValueError(f"{len(slices_per_axis)} slice counts for a mesh of {len(sizes)} axes")
    if any(n < 1 or size % n for size, n in zip(sizes, slices_per_axis, strict=True)):
        raise ValueError(f"mesh axes of sizes {tuple(sizes)} cannot span "
                         f"{tuple(slices_per_axis)} slices each")
    return tuple(size // n for size, n in zip(sizes, slices_per_axis, strict=True))


def hybrid_device_array(devices: Sequence, sizes: Sequence[int],
                        slices_per_axis: Sequence[int]) -> np.ndarray:
    """The mesh's device array: slice k (in row-major order over `slices_per_axis`, as
    create_hybrid_device_mesh numbers its granules) fills the block at its coordinates, with
    its own devices in their order reshaped to the ICI shape."""
    inner = ici_shape(sizes, slices_per_axis)
    by_slice: dict[int, list] = {}
    for d in devices:
        by_slice.setdefault(int(d.slice_index), []).append(d)
    slices, per_slice = prod(slices_per_axis), prod(inner)
    if sorted(by_slice) != list(range(slices)) or any(
            len(v) != per_slice for v in by_slice.values()):
        raise ValueError(f"the devices are {len(by_slice)} slices of "
                         f"{sorted({len(v) for v in by_slice.values()})} chips, not {slices} "
                         f"of {per_slice}")
    array = np.empty(tuple(sizes), dtype=object)
    for k in range(slices):
        corner = np.unravel_index(k, tuple(slices_per_axis))
        block = tuple(slice(c * n, (c + 1) * n) for c, n in zip(corner, inner, strict=True))
        part = np.empty(per_slice, dtype=object)
        part[:] = by_slice[k]
        array[block] = part.reshape(inner)
    return array
