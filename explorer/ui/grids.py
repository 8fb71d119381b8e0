"""The numbers behind the placement views, computed from a Report: no plotting library here.

A tensor's blocks form a grid (leading dimensions stacked as row bands, the last dimension as
columns); the mesh view is the device grid (first mesh axis as rows, the rest flattened as
columns). Both are colour-coded by device or by shard, the same way in every view.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from explorer.hlo.sharding import tiling_from_hlo
from explorer.report.report import Report, TensorInfo
from explorer.spec.layout import Tiling, shard_ranges


@dataclass(frozen=True)
class Grid:
    z: list[list[int]]            # colour key per cell (a device id, a shard or a group index)
    text: list[list[str]]         # label drawn in the cell
    hover: list[list[str]]
    x_labels: list[str]
    y_labels: list[str]
    title: str

    def render_text(self) -> str:
        """A plain-text form for tests and terminals: one row per line, cells by their label."""
        width = max(len(t) for row in self.text for t in row)
        lines = [self.title]
        for label, row in zip(self.y_labels, self.text, strict=True):
            lines.append(f"{label:>8} | " + " | ".join(t.ljust(width) for t in row))
        return "\n".join(lines)


def tensor_tiling(report: Report, t: TensorInfo) -> Tiling:
    return tiling_from_hlo(t.sharding, len(t.shape), report.mesh.device_count)


def _devices_label(devices: list[int]) -> str:
    if len(devices) <= 3:
        return ",".join(f"d{d}" for d in devices)
    return f"d{devices[0]}…d{devices[-1]} ×{len(devices)}"


def _range_text(ranges) -> str:
    return "[" + ", ".join(f"{a}:{b}" for a, b in ranges) + "]"


FACETS_PER_ROW = 4


def placement_grid(report: Report, name: str) -> Grid:
    """The blocks of tensor `name`, each coloured by the first device holding it.

    The last two dimensions' blocks form a panel; a rank-3+ tensor gets one panel per block of
    its leading dimensions (small multiples, FACETS_PER_ROW to a row, an empty cell between),
    each labelled with its leading block index."""
    t = report.tensor(name)
    tiling = tensor_tiling(report, t)
    tiles = tiling.tiles or (1,)
    holders = tiling.device_array().reshape(*tiles, -1)      # block index -> its devices
    ranges = shard_ranges(tiling, t.shape)
    panel = ((1,) + tuple(tiles))[-2:]                        # (rows, cols) of one panel
    lead = tiles[:-2]
    facets = list(np.ndindex(*lead)) if lead else [()]
    per_row = min(FACETS_PER_ROW, len(facets))
    n_rows = -(-len(facets) // per_row)
    height, width = n_rows * (panel[0] + 1) - 1, per_row * (panel[1] + 1) - 1
    z = [[None] * width for _ in range(height)]
    text = [[""] * width for _ in range(height)]
    hover = [[""] * width for _ in range(height)]
    for f, facet in enumerate(facets):
        top, left = (f // per_row) * (panel[0] + 1), (f % per_row) * (panel[1] + 1)
        prefix = f"[{','.join(map(str, facet))}] " if lead else ""
        for r, c in np.ndindex(*panel):
            index = facet + ((r, c) if len(tiles) > 1 else (c,))
            devs = sorted(int(d) for d in holders[index])
            rng = ranges.get(devs[0])
            z[top + r][left + c] = devs[0]
            text[top + r][left + c] = _devices_label(devs)
            hover[top + r][left + c] = (
                f"{prefix}block {_range_text(rng) if rng else '[]'}<br>held by "
                f"{len(devs)} device(s): {', '.join(map(str, devs[:16]))}"
                + (" …" if len(devs) > 16 else ""))
    # Category labels must be unique: a panel's rows and columns carry its position.
    y_labels = [_axis_label(i, panel[0], facets[::per_row], lead) for i in range(height)]
    x_labels = [_axis_label(j, panel[1], facets[:per_row], lead, row=False)
                for j in range(width)]
    title = (f"{t.name} {t.dtype}[{','.join(map(str, t.shape))}]  spec {t.spec_text}  "
             f"shard [{','.join(map(str, t.shard_shape))}] ×{t.replicas} replicas")
    return Grid(z, text, hover, x_labels, y_labels, title)


def _axis_label(i: int, size: int, facets, lead, row: bool = True) -> str:
    """Label of grid row/column i: the block index in its panel, prefixed by the panel's."""
    k, j = divmod(i, size + 1)
    if j == size:
        return " " * (k + 1)            # the empty separator between panels
    if not lead:
        return str(j)
    facet = facets[k] if k < len(facets) else ()
    return f"{','.join(map(str, facet))}|{j}" if row else f"{j} ({k})"


def _mesh_shape(report: Report) -> tuple[int, int]:
    sizes = report.mesh.sizes
    return (sizes[0], prod(sizes[1:])) if len(sizes) > 1 else (1, sizes[0])


def _mesh_labels(report: Report):
    names, sizes = report.mesh.names, report.mesh.sizes
    rows, cols = _mesh_shape(report)
    if len(sizes) == 1:
        return [f"{names[0]}=0"], ["" + str(i) for i in range(cols)]
    y = [f"{names[0]}={i}" for i in range(rows)]
    x = [",".join(map(str, idx)) for idx in np.ndindex(*sizes[1:])]
    return y, x


def _device_grid(report: Report, key, text, hover, title: str) -> Grid:
    """The mesh's device grid, cell d coloured by key[d] and labelled by text(d), hover(d)."""
    rows, cols = _mesh_shape(report)
    cells = [[r * cols + c for c in range(cols)] for r in range(rows)]
    y, x = _mesh_labels(report)
    return Grid([[int(key[d]) for d in row] for row in cells],
                [[text(d) for d in row] for row in cells],
                [[hover(d) for d in row] for row in cells], x, y, title)


def mesh_grid(report: Report, name: str) -> Grid:
    """The device grid coloured by which block of tensor `name` each device holds."""
    t = report.tensor(name)
    tiling = tensor_tiling(report, t)
    tile_of = np.zeros(report.mesh.device_count, dtype=int)
    for tile, devs in enumerate(tiling.device_array().reshape(-1, tiling.replicas)):
        tile_of[devs] = tile
    ranges = shard_ranges(tiling, t.shape)
    axes = " × ".join(report.mesh.names)
    return _device_grid(
        report, tile_of, lambda d: f"d{d} b{tile_of[d]}",
        lambda d: f"device {d}: block {tile_of[d]} "
                  f"{_range_text(ranges[d]) if d in ranges else ''}",
        f"mesh ({axes}): block of {t.name} on each device")


def group_grid(report: Report, index: int) -> Grid:
    """The device grid coloured by the device group of collective number `index`."""
    c = report.collectives[index]
    group_of = np.full(report.mesh.device_count, -1)
    for g, devs in enumerate(c.groups):
        group_of[list(devs)] = g
    title = (f"groups of {c.kind} over {','.join(c.axes) or 'no single axis set'} "
             f"({len(c.groups)} groups of {c.group_size})")
    return _device_grid(
        report, group_of, lambda d: f"d{d} g{group_of[d]}" if group_of[d] >= 0 else f"d{d}",
        lambda d: f"device {d}: group {group_of[d]}", title)
