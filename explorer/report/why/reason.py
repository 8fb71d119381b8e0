"""The answer of the why reader: a reason code, one sentence, and the evidence it rests on."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Reason(StrEnum):
    """Why a collective exists. A StrEnum: it writes to JSON as its code."""

    PARTIAL_SUM = "partial-sum"
    GATHER_OPERAND = "gather-operand"
    RESHARD = "reshard"
    INDEXING = "indexing"
    EXPLICIT = "explicit"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Evidence:
    """What a reason rests on, read from the propagated module ("" where it does not apply).

    `consumer` is the instruction whose partitioning needed the collective; `producer` the one
    whose result the collective moves or reduces (for a partial sum, the operands of the
    contraction). Shardings are mesh-axis specs in the spec grammar (`data,None`), one per
    dimension: `sharding_before` is the producer's, `sharding_after` the one the consumer needs
    (for a partial sum, the operands' layout before and the result's after)."""

    consumer: str = ""
    producer: str = ""
    sharding_before: str = ""
    sharding_after: str = ""
    # For a reshard, where Shardy took each of the two layouts from (an input, a constraint,
    # ...), e.g. "input `x` (`data` on its dim 0)"; "" where its record does not say.
    origin_before: str = ""
    origin_after: str = ""


@dataclass(frozen=True)
class Why:
    """Why one collective exists: a code, one sentence naming the tensors, lines and mesh
    axes, and the instructions and shardings it was read from."""

    reason: Reason
    text: str
    evidence: Evidence = Evidence()
