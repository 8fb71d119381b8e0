"""The answer of the why reader: a reason code, one sentence, and the evidence it rests on."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from explorer._src.spec.tensor import Entry


class Reason(StrEnum):
    """Why a collective exists. A StrEnum: it writes to JSON as its code."""

    PARTIAL_SUM = "partial-sum"
    GATHER_OPERAND = "gather-operand"
    RESHARD = "reshard"
    INDEXING = "indexing"
    EXPLICIT = "explicit"
    UNKNOWN = "unknown"


class OperandRole(StrEnum):
    """What an instruction of the evidence is to the reason: an operand of a contraction (its
    left or right), the one operand moved or reduced, or the consumer that needed the
    collective."""

    LHS = "lhs"
    RHS = "rhs"
    OPERAND = "operand"
    CONSUMER = "consumer"


@dataclass(frozen=True)
class Operand:
    """One instruction of the propagated module that a reason rests on, as fields.

    Attributes:
        role: what it is to the reason (`lhs`, `rhs`, `operand`, `consumer`).
        instruction: its HLO name.
        dtype: its element type as HLO writes it (`f32`); "" where it holds no array.
        shape: its dimensions; None where it holds no array.
        spec: its layout as spec entries, one per dimension (`("data", None)`); None where it
            has no layout over whole mesh axes (or is a tuple).
        input: the program input it is (an entry parameter), by name; "" where it is none.
        parameter: its parameter number where it is a parameter (of any computation).
        op_name: its op_name metadata (the jax op that made it); "" where there is none.
    """

    role: OperandRole
    instruction: str
    dtype: str = ""
    shape: tuple[int, ...] | None = None
    spec: tuple[Entry, ...] | None = None
    input: str = ""
    parameter: int | None = None
    op_name: str = ""


@dataclass(frozen=True)
class Evidence:
    """What a reason rests on, read from the propagated module, as text and as fields (""
    or empty where it does not apply).

    `consumer` is the instruction whose partitioning needed the collective; `producer` the one
    whose result the collective moves or reduces (for a partial sum, the operands of the
    contraction). Shardings are mesh-axis specs in the spec grammar (`data,None`), one per
    dimension: `sharding_before` is the producer's, `sharding_after` the one the consumer needs
    (for a partial sum, the operands' layout before and the result's after).

    The same as fields, for code that acts on the evidence (explorer.what_if): `operands`, the
    producers (an `lhs` and an `rhs`, or one `operand`) with their layouts before; `user`, the
    consumer; `spec_after`, the layout after as spec entries (None where unknown); `inputs`,
    the program inputs the sentence names, in its order. A Why read by an explorer older than
    these fields has them empty."""

    consumer: str = ""
    producer: str = ""
    sharding_before: str = ""
    sharding_after: str = ""
    # For a reshard, where Shardy took each of the two layouts from (an input, a constraint,
    # ...), e.g. "input `x` (`data` on its dim 0)"; "" where its record does not say.
    origin_before: str = ""
    origin_after: str = ""
    operands: tuple[Operand, ...] = ()
    user: Operand | None = None
    spec_after: tuple[Entry, ...] | None = None
    inputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Why:
    """Why one collective exists: a code, one sentence naming the tensors, lines and mesh
    axes, and the instructions and shardings it was read from."""

    reason: Reason
    text: str
    evidence: Evidence = Evidence()
