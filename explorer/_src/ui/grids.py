"""The numbers behind the placement views, computed from a Report: no plotting library here.

A tensor's blocks form a grid (the last two dimensions as rows and columns, leading dimensions
as separate panels, each titled with the part of them it shows); the mesh view is the device
grid (first mesh axis as rows, the rest flattened as columns). Both colour by block number, so
a colour means the same piece of the tensor in both: a block and the devices that hold it share
it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

import numpy as np

from explorer._src.hlo.sharding import tiling_from_hlo
from explorer._src.report.report import Report, TensorInfo
from explorer._src.spec.layout import Tiling, shard_ranges
from explorer._src.spec.tensor import entry_axes


@dataclass(frozen=True)
class Grid:
    z: list[list[int | None]]     # colour key per cell (a block or a group index); None: gap
    text: list[list[str]]         # label drawn in the cell
    hover: list[list[str]]
    x_labels: list[str]           # tick labels; unique (plotly category axes merge equal ones)
    y_labels: list[str]
    title: str
    x_title: str = ""
    y_title: str = ""
    # Titles of the panels of a faceted grid: (index of the panel's first column, index of its
    # first row, title, short title), drawn above that row; the short one (the ranges alone)
    # where panels are too narrow for the title, with `panel_note` saying what they are.
    panels: tuple[tuple[int, int, str, str], ...] = ()
    panel_note: str = ""
    # What each colour means: (colour key, text), in key order.
    legend: tuple[tuple[int, str], ...] = ()
    # Shorter tick labels, one per label above (unique as they are), for grids whose labels
    # do not fit their cells (views.tick_labels): a block's number along its dimension, a
    # device's index along its mesh axis; and what they are, said beside the axis title.
    x_short: list[str] = field(default_factory=list)
    y_short: list[str] = field(default_factory=list)
    x_short_note: str = ""
    y_short_note: str = ""

    def render_text(self) -> str:
        """A plain-text form for tests and terminals: one row per line, cells by their label."""
        width = max(len(t) for row in self.text for t in row)
        lines = [self.title]
        if self.x_title or self.y_title:
            lines.append(f"rows: {self.y_title or '-'}; columns: {self.x_title or '-'}")
        for label, row in zip(self.y_labels, self.text, strict=True):
            lines.append(f"{label.strip():>12} | " + " | ".join(t.ljust(width) for t in row))
        return "\n".join(lines)


def tensor_tiling(report: Report, t: TensorInfo) -> Tiling:
    return tiling_from_hlo(t.sharding, len(t.shape), report.mesh.device_count)


def devices_label(devices) -> str:
    devices = list(devices)
    if len(devices) <= 3:
        return ",".join(f"d{d}" for d in devices)
    return f"d{devices[0]}…d{devices[-1]} ×{len(devices)}"


def _range_text(ranges) -> str:
    return "[" + ", ".join(f"{a}:{b}" for a, b in ranges) + "]"


def _unique(label: str, k: int) -> str:
    """`label` made distinct for panel k: plotly merges equal category labels, so later panels
    carry k zero-width spaces, which read the same."""
    return label + "\u200b" * k


FACETS_PER_ROW = 4


def dim_title(t: TensorInfo, dim: int, tiles: int, name: str | None = None) -> str:
    """`dim 0 (batch, 256): 2 blocks over data`, for the axis of a placement grid."""
    what = f"{name}, {t.shape[dim]}" if name else f"{t.shape[dim]}"
    if tiles == 1:
        return f"dim {dim} ({what}): not split"
    over = ""
    if t.spec is not None and dim < len(t.spec) and entry_axes(t.spec[dim]):
        over = " over " + "×".join(entry_axes(t.spec[dim]))
    return f"dim {dim} ({what}): {tiles} blocks{over}"


def panel_title(t: TensorInfo, first, tiles: tuple[int, ...], names) -> tuple[str, str]:
    """A panel's title and short title: the part of each leading dimension it shows, in the
    words of the axis titles (`dim 0 (layers): 0:6 of 12`, `dim 0 (layers, 12): whole` when
    not split), and the ranges alone (`0:6`)."""
    lead = len(tiles) - 2
    short = ", ".join(f"{first[d][0]}:{first[d][1]}" for d in range(lead))
    if lead > 1:                # several leading dimensions: the panels are small
        return f"dims {','.join(map(str, range(lead)))}: {short}", short
    name = names[0]
    if tiles[0] == 1:
        return f"dim 0 ({name + ', ' if name else ''}{t.shape[0]}): whole", short
    return f"dim 0{f' ({name})' if name else ''}: {short} of {t.shape[0]}", short


def placement_grid(report: Report, name: str,
                   dim_names: tuple[str | None, ...] | None = None) -> Grid:
    """The blocks of tensor `name`, each coloured by its block number (the colour the device
    grid of `mesh_grid` gives the devices holding it) and labelled with those devices.

    The last two dimensions' blocks form a panel; a rank-3+ tensor gets one panel per block of
    its leading dimensions (small multiples, FACETS_PER_ROW to a row, a gap between), each
    titled with the leading ranges it shows (drawn above the panel, in the gap or the margin, so
    never over a block). `dim_names` (logical names, e.g. ("batch", "embed")) label axes."""
    t = report.tensor(name)
    return tensor_grid(t, tensor_tiling(report, t), dim_names)


def tensor_grid(t: TensorInfo, tiling: Tiling,
                dim_names: tuple[str | None, ...] | None = None) -> Grid:
    """The blocks of `t` laid out by `tiling`, as placement_grid draws them: a tensor of a
    Report, or any layout (the why panel's before and after)."""
    names = tuple(dim_names or ()) + (None,) * len(t.shape)
    tiles = tiling.tiles or (1,)
    holders = tiling.device_array().reshape(*tiles, -1)      # block index -> its devices
    ranges = shard_ranges(tiling, t.shape)
    panel = ((1,) + tuple(tiles))[-2:]                        # (rows, cols) of one panel
    lead = tiles[:-2]
    facets = list(np.ndindex(*lead)) if lead else [()]
    per_row = min(FACETS_PER_ROW, len(facets))
    n_rows = -(-len(facets) // per_row)
    height, width = n_rows * (panel[0] + 1) - 1, per_row * (panel[1] + 1) - 1
    z: list[list[int | None]] = [[None] * width for _ in range(height)]
    text = [[""] * width for _ in range(height)]
    hover = [[""] * width for _ in range(height)]
    rank = len(t.shape)
    row_dim, col_dim = (rank - 2, rank - 1) if rank >= 2 else (None, 0 if rank else None)
    x_labels, y_labels = [""] * width, [""] * height
    x_short, y_short = [""] * width, [""] * height
    # Gaps between panels are labelled with distinct blanks.
    for k in range(per_row - 1):
        x_labels[(k + 1) * (panel[1] + 1) - 1] = x_short[(k + 1) * (panel[1] + 1) - 1] = \
            " " * (k + 1)
    for k in range(n_rows - 1):
        y_labels[(k + 1) * (panel[0] + 1) - 1] = y_short[(k + 1) * (panel[0] + 1) - 1] = \
            " " * (k + 1)
    panels, legend = [], []
    for f, facet in enumerate(facets):
        fr, fc = divmod(f, per_row)
        top, left = fr * (panel[0] + 1), fc * (panel[1] + 1)
        for r, c in np.ndindex(*panel):
            index = facet + ((r, c) if len(tiles) > 1 else (c,))
            block = int(np.ravel_multi_index(index, tiles))
            devs = sorted(int(d) for d in holders[index])
            rng = ranges.get(devs[0])
            z[top + r][left + c] = block
            text[top + r][left + c] = f"b{block}: {devices_label(devs)}"
            where = _range_text(rng) if rng else "[]"
            hover[top + r][left + c] = (
                f"block {block} {where}<br>held by {len(devs)} device(s): "
                f"{', '.join(map(str, devs[:16]))}" + (" …" if len(devs) > 16 else ""))
            legend.append((block, f"b{block} {where} on {devices_label(devs)}"))
            if rng:
                if col_dim is not None:
                    x_labels[left + c] = _unique(f"{rng[col_dim][0]}:{rng[col_dim][1]}", fc)
                    x_short[left + c] = _unique(str(c), fc)
                if row_dim is not None:
                    y_labels[top + r] = _unique(f"{rng[row_dim][0]}:{rng[row_dim][1]}", fr)
                    y_short[top + r] = _unique(str(r), fr)
        if lead:
            first = ranges.get(sorted(int(d) for d in holders[facet + (0, 0)])[0])
            title, short = panel_title(t, first, tiles, names) if first else (str(facet),) * 2
            panels.append((left, top, title, short))
    if rank == 0:
        x_labels, y_labels = ["scalar"], [""]
        x_short, y_short = x_labels, y_labels
    elif rank == 1:
        y_labels = y_short = [""]
    title = (f"{t.name} {t.dtype}[{','.join(map(str, t.shape))}]  spec {t.spec_text}  "
             f"shard [{','.join(map(str, t.shard_shape))}] ×{t.replicas} replicas")
    x_title = dim_title(t, col_dim, tiles[col_dim], names[col_dim]) if rank else ""
    y_title = dim_title(t, row_dim, tiles[row_dim], names[row_dim]) if rank >= 2 else ""
    # What the panels are, said once where there are several (one panel's title says it).
    note = ("panels: " + "; ".join(dim_title(t, d, tiles[d], names[d]) for d in range(len(lead)))
            if len(facets) > 1 else "")
    # Said beside an axis title where the ranges do not fit (a block's range is in its hover).
    what = "ticks: block number"
    return Grid(z, text, hover, x_labels, y_labels, title, x_title, y_title, tuple(panels),
                panel_note=note, legend=tuple(sorted(legend)), x_short=x_short,
                y_short=y_short, x_short_note=what, y_short_note=what)


def _mesh_shape(report: Report) -> tuple[int, int]:
    sizes = report.mesh.sizes
    return (sizes[0], prod(sizes[1:])) if len(sizes) > 1 else (1, sizes[0])


def _mesh_labels(report: Report):
    """Tick labels and axis titles of the device grid: the first mesh axis down, the others
    (row-major, flattened) across."""
    names, sizes = report.mesh.names, report.mesh.sizes
    if len(sizes) == 1:
        return ([""], [f"{names[0]}={i}" for i in range(sizes[0])],
                "", f"mesh axis {names[0]} ({sizes[0]})")
    y = [f"{names[0]}={i}" for i in range(sizes[0])]
    x = [",".join(f"{n}={i}" for n, i in zip(names[1:], idx, strict=True))
         for idx in np.ndindex(*sizes[1:])]
    across = (f"mesh axis {names[1]} ({sizes[1]})" if len(sizes) == 2 else
              f"mesh axes {' × '.join(names[1:])} ({'×'.join(map(str, sizes[1:]))}, "
              "row-major)")
    return y, x, f"mesh axis {names[0]} ({sizes[0]})", across


def _mesh_short(report: Report) -> tuple[list[str], list[str], str, str]:
    """The device grid's short tick labels, each device's index along its axes (`3`; `3,1`
    for flattened axes), and what they are."""
    names, sizes = report.mesh.names, report.mesh.sizes
    if len(sizes) == 1:
        return [""], [str(i) for i in range(sizes[0])], f"ticks: index along {names[0]}", ""
    y = [str(i) for i in range(sizes[0])]
    x = [",".join(map(str, idx)) for idx in np.ndindex(*sizes[1:])]
    return y, x, f"ticks: index along {','.join(names[1:])}", f"ticks: index along {names[0]}"


def _device_grid(report: Report, key, text, hover, title: str, legend=()) -> Grid:
    """The mesh's device grid, cell d coloured by key[d] and labelled by text(d), hover(d)."""
    rows, cols = _mesh_shape(report)
    cells = [[r * cols + c for c in range(cols)] for r in range(rows)]
    y, x, y_title, x_title = _mesh_labels(report)
    y_short, x_short, x_note, y_note = _mesh_short(report)
    return Grid([[int(key[d]) for d in row] for row in cells],
                [[text(d) for d in row] for row in cells],
                [[hover(d) for d in row] for row in cells], x, y, title, x_title, y_title,
                legend=tuple(legend), x_short=x_short, y_short=y_short, x_short_note=x_note,
                y_short_note=y_note)


def block_of_device(report: Report, t: TensorInfo) -> np.ndarray:
    """Per device, the number of the block of `t` it holds (row-major over the blocks, the
    numbering of placement_grid)."""
    tiling = tensor_tiling(report, t)
    block_of = np.zeros(report.mesh.device_count, dtype=int)
    for block, devs in enumerate(tiling.device_array().reshape(-1, tiling.replicas)):
        block_of[devs] = block
    return block_of


def mesh_grid(report: Report, name: str) -> Grid:
    """The device grid, each device coloured by the block of tensor `name` it holds."""
    t = report.tensor(name)
    block_of = block_of_device(report, t)
    ranges = shard_ranges(tensor_tiling(report, t), t.shape)
    return _device_grid(
        report, block_of, lambda d: f"d{d}: b{block_of[d]}",
        lambda d: f"device {d}: block {block_of[d]} "
                  f"{_range_text(ranges[d]) if d in ranges else ''}",
        f"the mesh: which block of {t.name} each device holds")


def group_grid(report: Report, index: int) -> Grid:
    """The device grid coloured by the device group of collective number `index`."""
    c = report.collectives[index]
    group_of = np.full(report.mesh.device_count, -1)
    for g, devs in enumerate(c.groups):
        group_of[list(devs)] = g
    title = (f"groups of {c.kind} over {','.join(c.axes) or 'no single axis set'} "
             f"({len(c.groups)} groups of {c.group_size})")
    legend = [(g, f"group {g}: {devices_label(sorted(devs))}") for g, devs in enumerate(c.groups)]
    return _device_grid(
        report, group_of, lambda d: f"d{d}: g{group_of[d]}" if group_of[d] >= 0 else f"d{d}",
        lambda d: f"device {d}: group {group_of[d]}", title, legend)
