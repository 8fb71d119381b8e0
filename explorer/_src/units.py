"""Quantities as the explorer writes them for people: bytes and seconds.

One function formats every byte count the explorer shows (the CLI, the app, the search and
capacity tables, error messages), and one every time, so that a figure reads the same wherever
it appears. Byte units are 1024-based, as memory is sized: XLA's memory analysis, the chips'
HBM (an H100's 80 GB is 79.1 GiB usable), and jax's own messages count in GiB. Times take the
SI unit that keeps the figure at or above 1, microseconds written "µs".
"""

from __future__ import annotations


def format_bytes(n: float | None) -> str:
    """`n` bytes in B, KiB, MiB, GiB or TiB: "512 B", "16.0 MiB", "79.1 GiB"; "n/a" for None
    (no figure), as a report without a memory analysis has."""
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


# Time units, largest first: (seconds per unit, symbol).
TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def time_unit(seconds: float) -> tuple[float, str]:
    """(scale, unit) to show times up to `seconds`: (1e-6, "µs") for a 40 µs step; ns below
    a microsecond."""
    for scale, unit in TIME_UNITS[:-1]:
        if seconds >= scale:
            return scale, unit
    return TIME_UNITS[-1]


def format_seconds(s: float | None) -> str:
    """`s` seconds to 3 significant figures in the unit `time_unit` picks: "1.37 ms",
    "27 µs", "0 s"; "?" for None (no figure)."""
    if s is None:
        return "?"
    if s == 0:
        return "0 s"
    scale, unit = time_unit(s)
    if float(f"{s / scale:.3g}") >= 1000 and scale < 1.0:
        scale, unit = time_unit(scale * 1000)     # 999.7 µs rounds up: "1 ms", not "1e+03 µs"
    return f"{s / scale:.3g} {unit}"
