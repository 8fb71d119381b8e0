"""The collective opcodes of HLO, as one enum that every stage shares.

Adding a collective kind: add a member here, teach `collective_kind` its opcode if it differs,
and give it a formula in explorer/_src/cost/collectives.py (an unknown kind raises there, never
guessed).
"""

from __future__ import annotations

from enum import StrEnum


class CollectiveKind(StrEnum):
    """A collective as XLA names its opcode. A StrEnum: it compares equal to the opcode text
    and writes to JSON as that text."""

    ALL_REDUCE = "all-reduce"
    ALL_GATHER = "all-gather"
    REDUCE_SCATTER = "reduce-scatter"
    ALL_TO_ALL = "all-to-all"
    # A dropless MoE's token exchange (jax.lax.ragged_all_to_all): each device sends chunks
    # of its input, of sizes known only at run time, into the others' output buffers.
    RAGGED_ALL_TO_ALL = "ragged-all-to-all"
    COLLECTIVE_PERMUTE = "collective-permute"


# Opcode -> kind: a dict lookup, as the readers ask it of every instruction of a module.
_KINDS = {str(k): k for k in CollectiveKind}


def collective_kind(opcode: str) -> tuple[CollectiveKind | None, bool]:
    """(the kind, whether it is the start of an async pair) of an HLO opcode; (None, False) for
    an instruction that is not a collective."""
    if opcode.endswith("-start"):
        kind = _KINDS.get(opcode[: -len("-start")])
        return kind, kind is not None
    return _KINDS.get(opcode), False
