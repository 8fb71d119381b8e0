"""XLA's own measured GEMM rates for a GPU, read from the installed compiler.

XLA's GPU compiler carries, for its analytical cost model (XLA's `MatmulInterpolator`), a table
of the FLOP/s that GEMMs reached on a real H100 (`sm_90`) and B200 (`sm_100_B200`): one entry
per batch size b (1, 2, 4) and M, N, K (256 to 4096, powers of two), per operand dtype. jax's
CUDA plugin (the gpu extra) holds it as text in its binary; this module reads it from there,
so the rates are those measured for the compiler that compiled the program.

Why it matters: a flat fraction of the peak (the MAMF rate, what the largest matmuls reach) is
right for the large GEMMs of a big model's step (4096^3 runs at 780 TFLOP/s on an H100, 79% of
its peak) and far too fast for small ones (256^3: 7 TFLOP/s, under 1%): GEMMs of a few blocks
cannot fill the GPU's 132 SMs, and a kernel's launch and prologue do not shrink with it.

A shape between grid points takes the rate interpolated linearly in log2 of each dimension (a
GEMM's throughput grows by about a constant factor per doubling of a dimension until the GPU
is full). A dimension outside the grid takes the rate at the grid's edge: a GEMM with M, N or K
over 4096 runs at the rate of 4096 (the rate has flattened by there, 780 against 783 TFLOP/s
from 2048 to 4096 cubed with b = 4), a batch over 4 at the rate of 4 (more batches only add
parallel work, so that is a lower bound on the rate), a dimension under 256 at the rate of 256
(an upper bound).
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import mmap
import os
import re
import threading
from dataclasses import dataclass
from functools import cached_property

from explorer._src.hlo.arithmetic import Dot

# The table's key for an operand dtype pair, as XLA writes it (HLO dtype names).
_DTYPE_KEYS = {("bf16", "bf16"): "bf16xbf16->bf16"}
_ENTRY = re.compile(r"b: (\d+)\s+m: (\d+)\s+n: (\d+)\s+k: (\d+)\s+((?:flops \{[^}]*\}\s*)+)")
_FLOPS = re.compile(r'key: "([^"]+)" value: (\d+)')
_DEVICE = re.compile(r'key: "(sm_[^"]+)"')
PLUGIN = "jax_plugins.xla_cuda12"
PLUGIN_BINARY = "xla_cuda_plugin.so"


@dataclass(frozen=True, eq=False)
class GemmTable:
    """One GPU's measured rates: (b, m, n, k) -> FLOP/s per operand dtype key."""

    device: str                                   # XLA's key, e.g. "sm_90"
    grids: dict[str, dict[tuple[int, int, int, int], float]]
    source: str                                   # the file it was read from

    def rate(self, dot: Dot) -> float | None:
        """FLOP/s of a GEMM of `dot`'s shape; None for a dtype the table does not measure."""
        key = _DTYPE_KEYS.get((dot.lhs_dtype, dot.rhs_dtype), "")
        grid = self.grids.get(key)
        if not grid:
            return None
        point = (dot.b, dot.m, dot.n, dot.k)
        cache = self._rates.setdefault(key, {})     # a step repeats few shapes many times
        if point not in cache:
            cache[point] = _interpolate(grid, self._axes[key], point)
        return cache[point]

    @cached_property
    def _axes(self) -> dict[str, list[list[int]]]:
        """Per dtype key, the grid's values along b, m, n and k."""
        return {key: [sorted({p[i] for p in grid}) for i in range(4)]
                for key, grid in self.grids.items()}

    @cached_property
    def _rates(self) -> dict[str, dict[tuple[int, int, int, int], float]]:
        return {}

    def seconds(self, flops: float, dots: tuple[Dot, ...], other_rate: float) -> float:
        """Time for an instruction's `flops` done by `dots`: each dot's share of the FLOPs at
        its shape's rate (`other_rate` for a dtype the table lacks). The shares keep what the
        schedule reader counted off (a causal kernel's skipped half)."""
        whole = sum(d.flops for d in dots)
        if not whole:
            return flops / other_rate
        return sum(flops * d.flops / whole / (self.rate(d) or other_rate) for d in dots)

    def span(self) -> str:
        """The table's bf16 range in words: `7 TFLOP/s at 256³ to 780 TFLOP/s at 4096³`."""
        grid = self.grids.get(_DTYPE_KEYS[("bf16", "bf16")], {})
        ends = [(n, grid.get((1, n, n, n))) for n in (256, 4096)]
        return " to ".join(f"{r / 1e12:.0f} TFLOP/s at {n}³" for n, r in ends if r)

    def describe(self) -> str:
        return (f"bf16 matmuls timed at XLA's measured GEMM rate for their shape ({self.span()}; "
                f"its {self.device} table, read from {os.path.basename(self.source)})")


def _interpolate(grid: dict[tuple[int, int, int, int], float], axes: list[list[int]],
                 point: tuple[int, int, int, int]) -> float:
    corners = []     # per dimension: the grid values around it, with their weights
    for values, x in zip(axes, point, strict=True):
        x = min(max(x, values[0]), values[-1])
        lo = max(v for v in values if v <= x)
        hi = min(v for v in values if v >= x)
        t = 0.0 if lo == hi else math.log2(x / lo) / math.log2(hi / lo)
        corners.append(((lo, 1.0 - t), (hi, t)) if 0.0 < t < 1.0 else ((hi if t else lo, 1.0),))
    combos = list(itertools.product(*corners))
    if len(combos) == 1:                              # on a grid point: its entry as measured
        return grid[tuple(v for v, _ in combos[0])]
    return math.exp(sum(math.prod(w for _, w in combo) * math.log(grid[tuple(v for v, _ in combo)])
                        for combo in combos))


def plugin_binary() -> str | None:
    """Where jax's CUDA plugin binary is; None without the gpu extra."""
    try:
        spec = importlib.util.find_spec(PLUGIN)
    except ModuleNotFoundError:
        # find_spec of a dotted name imports its parent first, and raises (rather than
        # returning None) when there is no `jax_plugins` package at all: the app extra alone.
        return None
    if spec is None or spec.origin is None:
        return None
    path = os.path.join(os.path.dirname(spec.origin), PLUGIN_BINARY)
    return path if os.path.exists(path) else None


def parse_tables(text: str, source: str) -> dict[str, GemmTable]:
    """Device key -> GemmTable from the table's text (XLA's GemmPerfTable, text format)."""
    parts = _DEVICE.split(text)
    tables = {}
    for device, body in zip(parts[1::2], parts[2::2], strict=True):
        grids: dict[str, dict[tuple[int, int, int, int], float]] = {}
        for b, m, n, k, flops in _ENTRY.findall(body):
            for dtype, value in _FLOPS.findall(flops):
                grids.setdefault(dtype, {})[int(b), int(m), int(n), int(k)] = float(value)
        tables[device] = GemmTable(device, grids, source)
    return tables


def read_tables(path: str) -> dict[str, GemmTable]:
    """The tables in the binary at `path` ({} when it holds none): the one NUL-terminated
    string that holds XLA's bf16 entries."""
    marker = _DTYPE_KEYS[("bf16", "bf16")].encode()
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        at = m.find(b'key: "' + marker + b'"')
        if at < 0:
            return {}
        text = m[m.rfind(b"\x00", 0, at) + 1:m.find(b"\x00", at)].decode("utf-8", "replace")
    return parse_tables(text, path)


_tables: dict[str, GemmTable] | None = None
_lock = threading.Lock()


def installed_tables() -> dict[str, GemmTable]:
    """The installed plugin's tables, read once per process; {} without the gpu extra."""
    global _tables
    with _lock:
        if _tables is None:
            path = plugin_binary()
            _tables = read_tables(path) if path else {}
        return _tables


def gemm_table(device: str | None) -> GemmTable | None:
    """The measured table for XLA's device key (`Chip.xla_gemm_table`); None where there is
    none: no key, no gpu extra, or a plugin without that device."""
    return installed_tables().get(device) if device else None
