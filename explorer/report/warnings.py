"""The compiler's warnings linked to the code they are about.

XLA's SPMD partitioner names the instruction it could not partition well ("... efficiently for
HLO operation %param = f32[16,16,16]{2,1,0} parameter(0), sharding=..."). That instruction is
looked up in the propagated module (whose names the partitioner printed) and then in the
optimized one, and its source line is read from the module's stack-frame tables; for an
instruction with no line of its own (a parameter), the line of its first user that has one.
"""

from __future__ import annotations

import re

from explorer.hlo.module import HloModule
from explorer.report.report import CompilerWarning
from explorer.report.source import source_line, source_of

# "%name" right after "HLO operation" (XLA's wording) or the first %name in the message.
_OPERATION = re.compile(r"HLO operation\s+%([\w.\-]+)")
_ANY = re.compile(r"%([\w.\-]+)")
# The partitioner's own copy of an instruction has a new name but keeps its metadata.
_OP_NAME = re.compile(r'metadata=\{[^}]*op_name="([^"]*)"')


def link_warning(text: str, *modules: HloModule | None) -> CompilerWarning:
    """`text` with the instruction it names and that instruction's source, where found."""
    m = _OPERATION.search(text) or _ANY.search(text)
    if not m:
        return CompilerWarning(text)
    name = m.group(1)
    for module in modules:
        if module is None:
            continue
        instr = module.by_name().get(name) or _by_op_name(module, text)
        if instr is None:
            continue
        # A parameter has no source line; the line that needed it resharded is its user's.
        for at in [instr, *_users(module, instr.name)]:
            if source_of(module, at):
                return CompilerWarning(text, instr.name, source_of(module, at),
                                       source_line(module, at))
        return CompilerWarning(text, instr.name)
    return CompilerWarning(text, name)


def _by_op_name(module: HloModule, text: str):
    m = _OP_NAME.search(text)
    if not m:
        return None
    return next((i for i in module.instructions() if i.op_name == m.group(1)), None)


def _users(module: HloModule, name: str):
    return [i for i in module.instructions() if name in i.operands]
