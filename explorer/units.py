"""Quantities as the explorer writes them for people: bytes.

One function formats every byte count the explorer shows (the CLI, the app, the search and
capacity tables, error messages), so that a figure reads the same wherever it appears. Units
are 1024-based, as memory is sized: XLA's memory analysis, the chips' HBM (an H100's 80 GB is
79.1 GiB usable), and jax's own messages count in GiB.
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
