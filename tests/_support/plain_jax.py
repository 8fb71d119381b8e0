"""Plain jax as the ground truth: the collectives of an optimized HLO text, read by opcode.

Each collective's bytes are taken from the shapes printed on its line: per device, the larger
of its operands and its result, as the textbook V of a collective's cost is."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

_BYTES = {"f32": 4, "bf16": 2, "s32": 4, "u32": 4, "pred": 1}
_COLLECTIVE = re.compile(
    r"= (\(.*?\)|\w+\[[\d,]*\](?:\{[^}]*\})?) (all-reduce|all-gather|reduce-scatter|all-to-all|"
    r"collective-permute)\((.*?)\)(?:, |$)")
_SHAPE = re.compile(r"(\w+)\[([\d,]*)\]")


def _shape_bytes(text: str) -> int:
    return sum(_BYTES[dtype] * int(np.prod([int(d) for d in dims.split(",") if d]))
               for dtype, dims in _SHAPE.findall(text))


def collectives_of_hlo(text: str) -> Counter:
    """(kind, bytes per device) of each collective in an optimized HLO text of the CPU (which
    runs every collective synchronously)."""
    assert "-start(" not in text
    found = Counter()
    for line in text.splitlines():
        m = _COLLECTIVE.search(line)
        if m:
            result, kind, operands = m.groups()
            found[kind, max(_shape_bytes(result), _shape_bytes(operands))] += 1
    return found


def collectives_of_report(report) -> Counter:
    """The same count from an explorer Report."""
    return Counter((str(c.kind), c.bytes) for c in report.collectives)
