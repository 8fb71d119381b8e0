"""Whether a program's bytes per device fit one chip of the target: `MemoryFit`, `memory_fit`.

Pure numbers over the hardware catalog (explorer/_src/cost/catalog/); no jax.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from explorer._src.cost.catalog.names import get_target
from explorer._src.cost.catalog.types import Target
from explorer._src.units import format_bytes


@dataclass(frozen=True)
class MemoryFit:
    """Per-device bytes against one chip's memory.

    Attributes:
        bytes: the program's bytes per device (Memory.total).
        capacity: what one program may hold of a chip's memory (`Chip.capacity`), bytes.
        fraction: bytes / capacity.
        fits: bytes <= capacity.
        text: the verdict in words, e.g. ``"uses 9.5 MiB of 79.1 GiB HBM per H100 SXM (0%):
            fits"``.
        checked_by: the compiler check the verdict is, where it is not `bytes` against
            `capacity` (``"libtpu's memory check"``: libtpu refuses a program over the chip's
            available HBM, so one it compiled fits); "" otherwise.
    """

    bytes: int
    capacity: float
    fraction: float
    fits: bool
    text: str
    checked_by: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def memory_fit(memory_bytes: float | None, target: str | Target) -> MemoryFit | None:
    target = get_target(target)
    # What one program may hold (libtpu's available HBM, CUDA's total), not the vendor's
    # whole capacity: the bytes the compiler and the driver would let it have.
    cap, kind = target.chip.capacity, target.chip.memory_kind
    if memory_bytes is None or cap is None:
        return None
    frac = memory_bytes / cap
    fits = memory_bytes <= cap
    # In binary units, as the capacities are (a "80GB" H100 has 80 GiB, of which CUDA gives a
    # program 79.1 GiB).
    if fits:
        text = (f"uses {format_bytes(memory_bytes)} of {format_bytes(cap)} "
                f"{kind} per {target.chip.name} ({frac:.0%}): fits")
    else:
        text = (f"needs {format_bytes(memory_bytes)} per device but a "
                f"{target.chip.name} gives a program {format_bytes(cap)} {kind} "
                f"({frac:.0%}): does not fit; shard more or pick a chip with more memory")
    return MemoryFit(int(memory_bytes), cap, frac, fits, text)

