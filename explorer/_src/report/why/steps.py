"""Collectives of the optimized module that move one tensor in several steps (a permute, then
an all-gather, for one resharding): each step exists for the reason the last one does."""

from __future__ import annotations

from collections.abc import Mapping

from explorer._src.hlo.collectives import CollectiveKind, collective_kind
from explorer._src.hlo.module import HloModule, Instruction
from explorer._src.report.why.metadata import EXPLICIT_PRIMITIVES, primitive

StepChain = tuple[Instruction, ...]

MOVES = (CollectiveKind.ALL_GATHER, CollectiveKind.ALL_TO_ALL,
         CollectiveKind.RAGGED_ALL_TO_ALL, CollectiveKind.COLLECTIVE_PERMUTE)
# Optimized-module ops between two steps of one resharding.
_BETWEEN_STEPS = {"fusion", "bitcast", "copy", "reshape", "transpose", "slice", "dynamic-slice",
                  "concatenate", "get-tuple-element", "async-done", "all-gather-done",
                  "collective-permute-done", "all-to-all-done"}


def find_chains(optimized: HloModule, names: Mapping[str, Instruction]) -> dict[str, StepChain]:
    """Collectives that move one tensor in several steps: a gather, all-to-all or permute
    whose operand comes (through slicing, copies, fusions) from another with the same
    op_name. Each maps to its chain, first step first. `names` indexes `optimized`."""
    before: dict[str, Instruction] = {}
    for instr in optimized.instructions():
        kind, _ = collective_kind(instr.opcode)
        if kind not in MOVES or not instr.op_name:
            continue
        todo = list(instr.operands)
        for _ in range(8):
            if not todo:
                break
            name = todo.pop(0)
            src = names.get(name)
            if src is None:
                continue
            src_kind, _ = collective_kind(src.opcode)
            if src_kind in MOVES and src.op_name == instr.op_name and \
                    optimized.source(src) == optimized.source(instr) and \
                    primitive(instr.op_name) not in EXPLICIT_PRIMITIVES:
                before[instr.name] = src
                break
            if src.opcode in _BETWEEN_STEPS:
                todo += list(src.operands)
    chains: dict[str, StepChain] = {}
    after = {b.name: i for i, b in before.items()}
    for name in before:
        if name in after:
            continue                      # not the last step
        chain = [names[name]]
        while chain[0].name in before:
            chain.insert(0, before[chain[0].name])
        for c in chain:
            chains[c.name] = tuple(chain)
    return chains
