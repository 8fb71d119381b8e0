"""The memory verdict of a program the compiler refused for want of memory.

The TPU compiler says it in one of two forms (sizes as tsl's HumanReadableNumBytes prints
them: two decimals and a 1024-based unit letter, "15.75G" = 15.75 GiB):

- ahead of time (libtpu, measured): "RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total
  memory required for HLO temporaries (32.50G) exceeds available HBM (15.75G)."
- on a TPU: "RESOURCE_EXHAUSTED: ... Ran out of memory in memory space hbm. Used 20.51G of
  15.48G hbm. Exceeded hbm capacity by 5.03G." followed by its largest allocations.

A message in neither form still gives a verdict, with its sizes unknown (None).
"""

from __future__ import annotations

import re

from explorer._src.report.report import MemoryVerdict

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_SIZE = r"([\d.]+)\s*([KMGTP]?)i?B?"
_AHEAD = re.compile(r"out of memory on (\w+), the total memory required for (.+?) \("
                    + _SIZE + r"\) exceeds available \w+ \(" + _SIZE + r"\)", re.IGNORECASE)
_ON_DEVICE = re.compile(r"out of memory in memory space (\w+)\.\s*Used " + _SIZE + " of "
                        + _SIZE, re.IGNORECASE)


def _bytes(number: str, unit: str) -> int:
    return round(float(number) * _UNITS[unit.upper()])


def memory_verdict(message: str) -> MemoryVerdict:
    """The verdict in the compiler's out-of-memory `message`."""
    m = _AHEAD.search(message)
    if m:
        memory, what, req, req_unit, avail, avail_unit = m.groups()
        return MemoryVerdict(memory=memory.upper(), required=_bytes(req, req_unit),
                             available=_bytes(avail, avail_unit), what=what, message=message)
    m = _ON_DEVICE.search(message)
    if m:
        memory, used, used_unit, avail, avail_unit = m.groups()
        return MemoryVerdict(memory=memory.upper(), required=_bytes(used, used_unit),
                             available=_bytes(avail, avail_unit), what="the program",
                             message=message)
    return MemoryVerdict(memory="device memory", required=None, available=None, what="",
                         message=message)
