"""Plain jax's compile of a library's program, read the way the examples compare it with the
explorer's Report: collectives by kind (count and bytes per device, read from the optimized HLO
by opcode, with no explorer code), input names and layouts. Shared by examples/maxtext_model.py
and examples/easydel_model.py, which import it from their own folder."""

from __future__ import annotations

import re
from collections import Counter

import jax

_BYTES = {"f32": 4, "bf16": 2, "s32": 4, "u32": 4, "pred": 1, "s8": 1, "u8": 1}
_COLLECTIVE = re.compile(
    r"= (\(.*?\)|\w+\[[\d,]*\](?:\{[^}]*\})?) (all-reduce|all-gather|reduce-scatter|all-to-all|"
    r"collective-permute)\((.*?)\)(?:, |$)")
_SHAPE = re.compile(r"(\w+)\[([\d,]*)\]")


def _bytes(text: str) -> int:
    total = 0
    for dtype, dims in _SHAPE.findall(text):
        n = 1
        for d in dims.split(","):
            n *= int(d) if d else 1
        total += _BYTES[dtype] * n
    return total


def plain_collectives(text: str) -> dict[str, list[int]]:
    """Each kind's count and bytes per device (the larger of operands and result), read from
    the optimized HLO by opcode."""
    found: Counter = Counter()
    size: Counter = Counter()
    for line in text.splitlines():
        m = _COLLECTIVE.search(line)
        if m:
            result, kind, operands = m.groups()
            found[kind] += 1
            size[kind] += max(_bytes(result), _bytes(operands))
    return {k: [found[k], size[k]] for k in sorted(found)}


def report_collectives(report) -> dict[str, list[int]]:
    """Each kind's count and bytes per device, as the explorer's Report has them."""
    found: Counter = Counter()
    size: Counter = Counter()
    for c in report.collectives:
        found[str(c.kind)] += 1
        size[str(c.kind)] += c.bytes
    return {k: [found[k], size[k]] for k in sorted(found)}


def explorer_name(path) -> str:
    """A key path as the explorer names an input: its parts dotted, without the argument's
    position (the examples' arguments share no names)."""
    parts = [str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k)))) for k in path[1:]]
    return ".".join(parts)


def padded(spec, rank: int) -> tuple:
    """A spec's entries (lists as tuples), None-padded to `rank` dimensions."""
    entries = tuple(tuple(e) if isinstance(e, list) else e for e in spec)
    return entries + (None,) * (rank - len(entries))


def trimmed(spec) -> tuple:
    """A spec without its trailing replicated dimensions: () and (None, None) are one layout."""
    spec = tuple(spec or ())
    while spec and spec[-1] is None:
        spec = spec[:-1]
    return spec


def kept_inputs(args, compiled) -> list:
    """The input leaves jax kept (it drops those the program never reads)."""
    leaves = jax.tree.leaves(args)
    kept = compiled._executable._kept_var_idx if hasattr(compiled, "_executable") else None
    return [leaf for i, leaf in enumerate(leaves) if kept is None or i in kept]
