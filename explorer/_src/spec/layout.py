"""Where each piece of a tensor lives on a device mesh, as plain data.

The views need to draw two kinds of sharding the same way: ones the user is
still designing (a PartitionSpec over a mesh that was never compiled) and ones
read back from compiled HLO text (explorer._src.hlo.sharding).  Both are reduced to one small value,
a :class:`Tiling`, and everything drawn is computed from that.

Only numpy and the standard library are imported, on purpose: the layout
arithmetic must work (and be testable) where jax is not importable or not yet
initialised, e.g. in the front-end process that renders a sharding picked in a
widget.  The tests use jax as the oracle instead.

Conventions
-----------
* A mesh is ``axis_names`` + ``axis_sizes``.  Its logical devices are
  ``0..N-1`` laid out row-major, i.e. ``np.arange(N).reshape(axis_sizes)``;
  these are the ids HLO shardings use.
* A spec has one entry per tensor dim: ``None`` (not split), an axis name, or a
  tuple of axis names (split over their product, major-to-minor).  Trailing
  entries may be omitted.  A jax ``PartitionSpec`` works as-is; its
  ``unreduced`` axes are honoured (they become ``Tiling.unreduced``).
* Uneven dims follow XLA (``HloSharding::TileOffsetForDevice``): every shard is
  ``ceil(dim / tiles)`` long except that shards are clipped to the dim, so the
  last ones may be short or empty.

The HLO sharding text that compiled programs carry is read into a Tiling by
:mod:`explorer._src.hlo.sharding`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np

__all__ = [
    "Tiling",
    "shard_ranges",
    "shard_shape",
    "spec_from_tiling",
    "tiling_from_spec",
]


@dataclass(frozen=True)
class Tiling:
    """How a tensor's dims are cut into tiles and which device holds each tile.

    ``devices`` lists device ids row-major over ``tiles + (replicas,)``: the
    ``replicas`` devices holding tile ``t`` are
    ``device_array()[t]``.  The replica axis is itself split, major-to-minor,
    into ``(manual, unreduced, copies)``:

    * ``manual``: devices that run a manually partitioned (shard_map) body and
      hold *independent* data of the tile's shape;
    * ``unreduced``: devices holding partial sums that add up to the tile;
    * ``copies``: true replicas with identical values.

    For drawing, only ``tiles``/``replicas``/``devices`` matter (every one of
    the ``replicas`` devices holds a buffer covering the tile); the split says
    what the values in those buffers mean.  The order of the ``copies``
    devices carries no meaning, so construction sorts it ascending, which
    makes ``==`` compare placements rather than spellings.
    """

    tiles: tuple[int, ...]
    replicas: int
    devices: tuple[int, ...]
    manual: int = 1
    unreduced: int = 1

    def __post_init__(self) -> None:
        # Coerce so that lists / numpy ints from callers still hash and compare
        # equal to tilings built here.
        object.__setattr__(self, "tiles", tuple(int(t) for t in self.tiles))
        object.__setattr__(self, "devices", tuple(int(d) for d in self.devices))
        for name in ("replicas", "manual", "unreduced"):
            object.__setattr__(self, name, int(getattr(self, name)))
        if any(t < 1 for t in self.tiles) or min(self.replicas, self.manual, self.unreduced) < 1:
            raise ValueError(f"tile counts and replica counts must be >= 1: {self}")
        if len(self.devices) != math.prod(self.tiles) * self.replicas:
            raise ValueError(
                f"{len(self.devices)} devices listed but tiles {self.tiles} x "
                f"{self.replicas} replicas need {math.prod(self.tiles) * self.replicas}"
            )
        if self.replicas % (self.manual * self.unreduced):
            raise ValueError(
                f"replicas={self.replicas} is not a multiple of "
                f"manual*unreduced={self.manual * self.unreduced}"
            )
        if len(set(self.devices)) != len(self.devices):
            raise ValueError(f"a device appears twice in {self.devices}")
        if self.copies > 1:
            grouped = np.sort(np.asarray(self.devices).reshape(-1, self.copies), axis=1)
            object.__setattr__(self, "devices", tuple(int(d) for d in grouped.ravel()))

    @property
    def copies(self) -> int:
        """Identical replicas per (manual, unreduced) slot."""
        return self.replicas // (self.manual * self.unreduced)

    def device_array(self) -> np.ndarray:
        """``devices`` as an array of shape ``tiles + (replicas,)``."""
        return np.asarray(self.devices, dtype=np.int64).reshape(self.tiles + (self.replicas,))


# --------------------------------------------------------------------------- specs


def _check_mesh(axis_names: Sequence[str], axis_sizes: Sequence[int]):
    names = tuple(axis_names)
    sizes = tuple(int(s) for s in axis_sizes)
    if len(names) != len(sizes):
        raise ValueError(f"mesh has {len(names)} axis names but {len(sizes)} sizes")
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate mesh axis names in {names}")
    if any(s < 1 for s in sizes):
        raise ValueError(f"mesh axis sizes must be >= 1, got {sizes}")
    return names, sizes


def _spec_entries(spec) -> tuple:
    # jax refuses to iterate a PartitionSpec that carries unreduced/reduced axes
    # (to stop them being dropped silently); its per-dim entries are `.partitions`.
    return tuple(spec.partitions if hasattr(spec, "partitions") else spec)


def _entry_axes(entry) -> tuple[str, ...]:
    """One spec entry as the tuple of axis names it splits over."""
    if entry is None:
        return ()
    if isinstance(entry, str):
        return (entry,)
    if isinstance(entry, (tuple, list)) and all(isinstance(a, str) for a in entry):
        return tuple(entry)
    # e.g. jax's P.UNCONSTRAINED: it names no layout, so there is nothing to draw.
    raise ValueError(f"spec entry {entry!r} is not None, an axis name or a tuple of axis names")


def tiling_from_spec(
    spec, axis_names: tuple[str, ...], axis_sizes: tuple[int, ...], rank: int
) -> Tiling:
    """The tiling a spec produces on a mesh, with jax's device order.

    Replicas are the mesh axes the spec does not use, in mesh order; jax's
    ``unreduced`` axes (if ``spec`` is a PartitionSpec carrying them) come
    before the replicated ones, as in XLA's ``last_tile_dims={unreduced,
    replicated}``.
    """
    names, sizes = _check_mesh(axis_names, axis_sizes)
    entries = [_entry_axes(e) for e in _spec_entries(spec)]
    if len(entries) > rank:
        raise ValueError(f"spec {spec!r} has {len(entries)} entries for rank {rank}")
    entries += [()] * (rank - len(entries))
    index = {n: i for i, n in enumerate(names)}
    unreduced_names = tuple(getattr(spec, "unreduced", None) or ())
    seen: set[str] = set()
    for name in [a for axes in entries for a in axes] + list(unreduced_names):
        if name not in index:
            raise ValueError(f"spec {spec!r} uses unknown mesh axis {name!r}")
        if name in seen:
            raise ValueError(f"spec {spec!r} uses mesh axis {name!r} twice")
        seen.add(name)

    dim_axes = [index[a] for axes in entries for a in axes]
    red_axes = sorted(index[a] for a in unreduced_names)
    rep_axes = [i for i in range(len(names)) if names[i] not in seen]
    tiles = tuple(math.prod(sizes[index[a]] for a in axes) for axes in entries)
    unreduced = math.prod(sizes[i] for i in red_axes)
    replicas = unreduced * math.prod(sizes[i] for i in rep_axes)
    ids = np.arange(math.prod(sizes)).reshape(sizes)
    # Putting a dim's axes first, major-to-minor, and the rest after makes the
    # row-major flattening walk tiles in order and replicas within a tile.
    devs = ids.transpose(dim_axes + red_axes + rep_axes).reshape(tiles + (replicas,))
    return Tiling(tiles, replicas, tuple(devs.ravel()), unreduced=unreduced)


def spec_from_tiling(tiling: Tiling, axis_names, axis_sizes) -> tuple | None:
    """The spec over this mesh that yields exactly ``tiling``, or None.

    "Exactly" means the same tiles and the same set of devices on every tile.
    The result never mentions size-1 axes and has trailing Nones stripped, so
    for a given tiling it is unique.  Manual and unreduced tilings return None:
    a plain spec cannot express them.

    Rather than searching over axis assignments, the spec is read off the
    device ids: an axis that belongs to tensor dim ``d`` is exactly one whose
    mesh coordinate changes when stepping along ``d``, and the more minor an
    axis is within a dim, the sooner (at tile index = product of the sizes
    minor to it) it first changes.  That candidate is then checked by
    rebuilding its tiling, so the cost is O(devices x axes) for any mesh.
    """
    names, sizes = _check_mesh(axis_names, axis_sizes)
    n = math.prod(sizes)
    if tiling.manual != 1 or tiling.unreduced != 1 or len(tiling.devices) != n:
        return None
    if sorted(tiling.devices) != list(range(n)):
        return None
    rank = len(tiling.tiles)
    grid = tiling.device_array()
    if sizes:
        coords = np.stack(np.unravel_index(grid, sizes), axis=-1)
    else:  # a mesh with no axes (one device) has nothing to split over
        coords = np.zeros(grid.shape + (0,), dtype=np.int64)
    spec: list = []
    used: set[int] = set()
    for d, k in enumerate(tiling.tiles):
        if k == 1:
            spec.append(None)
            continue
        # Coordinates along dim d, with every other tile index and the replica at 0.
        line = coords[tuple(slice(None) if i == d else 0 for i in range(rank + 1))]
        changed = line != line[0]
        axes = [a for a in range(len(sizes)) if sizes[a] > 1 and changed[:, a].any()]
        axes.sort(key=lambda a: -int(np.argmax(changed[:, a])))
        if math.prod(sizes[a] for a in axes) != k or used.intersection(axes):
            return None
        used.update(axes)
        spec.append(names[axes[0]] if len(axes) == 1 else tuple(names[a] for a in axes))
    while spec and spec[-1] is None:
        spec.pop()
    candidate = tuple(spec)
    # Tilings sort their copies, so equality is "same devices on every tile".
    return candidate if tiling_from_spec(candidate, names, sizes, rank) == tiling else None


# --------------------------------------------------------------------------- shards


def _check_shape(tiling: Tiling, shape) -> tuple[int, ...]:
    shape = tuple(int(s) for s in shape)
    if len(shape) != len(tiling.tiles):
        raise ValueError(f"shape {shape} has rank {len(shape)}; tiling has {len(tiling.tiles)}")
    if any(s < 0 for s in shape):
        raise ValueError(f"negative dimension in shape {shape}")
    return shape


def shard_shape(tiling: Tiling, shape) -> tuple[int, ...]:
    """The per-device buffer shape XLA allocates: ``ceil(dim / tiles)`` per dim."""
    shape = _check_shape(tiling, shape)
    return tuple(-(-s // k) for s, k in zip(shape, tiling.tiles, strict=True))


def shard_ranges(tiling: Tiling, shape) -> dict[int, tuple[tuple[int, int], ...]]:
    """Per device holding data: the half-open ``[start, stop)`` index range per dim.

    Keys are in ascending device order.  Short or empty last shards follow XLA
    (``start == stop`` for a device whose tile lies wholly in the padding).
    """
    shape = _check_shape(tiling, shape)
    step = shard_shape(tiling, shape)
    grid = tiling.device_array()
    out: dict[int, tuple[tuple[int, int], ...]] = {}
    for tile in product(*(range(k) for k in tiling.tiles)):
        rng = tuple(
            (min(i * c, s), min((i + 1) * c, s)) for i, c, s in zip(tile, step, shape, strict=True)
        )
        for dev in grid[tile]:
            out[int(dev)] = rng
    return dict(sorted(out.items()))
