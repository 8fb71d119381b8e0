"""The compiler's warnings linked to the code they are about.

XLA's SPMD partitioner names the instruction it could not partition well ("... efficiently for
HLO operation %param = f32[16,16,16]{2,1,0} parameter(0), sharding=..."). That instruction is
looked up in the propagated module (whose names the partitioner printed) and then in the
optimized one, and its source line is read from the module's stack-frame tables; for an
instruction with no line of its own (a parameter), the line of its first user that has one.
"""

from __future__ import annotations

import re
from math import prod

from explorer._src.hlo.compiler_costs import UNCOSTABLE_SEEN_SLOWER, emitter, uncostable
from explorer._src.hlo.module import HloModule, Instruction, ints
from explorer._src.report.report import CompilerWarning
from explorer._src.report.source import line_of_code, source_of

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
                                       line_of_code(module, at))
        return CompilerWarning(text, instr.name)
    return CompilerWarning(text, name)


# An array of a shape with its layout: f32[2,8,8192,8192]{2,3,1,0:T(8,128)} -> the type, the
# dims and the minor-to-major order.
_ARRAY_LAYOUT = re.compile(r"(\w+)\[([\d,]*)\]\{([\d,]*)")
# How an uncostable fusion's warning starts, for the views that show it beside the timing.
UNCOSTABLE_WARNING = "libtpu could not estimate the cost of"
UNCOSTABLE_HELP = ("What usually helps: the reduction in bfloat16 (a bf16 softmax), a layout "
                   "with the reduced dimension minor-most, or a flash-attention kernel that "
                   "never writes the whole scores out")


def uncostable_warnings(module: HloModule) -> tuple[CompilerWarning, ...]:
    """A warning per instruction libtpu marked uncostable (estimated cycles INT64_MAX), linked
    to its source line, with what is known of it and what usually helps."""
    out = []
    for instr in module.instructions():
        if not uncostable(instr):
            continue
        how = ", ".join(part for part in (_largest_array(instr), emitter(instr) and
                                          f"emitter {emitter(instr)}") if part)
        text = (f"{UNCOSTABLE_WARNING} {instr.name}"
                + (f" ({how})" if how else "")
                + ": its estimated cycles are unknown (INT64_MAX), and such a fusion can run far "
                f"slower than the predicted step counts it (one ran {UNCOSTABLE_SEEN_SLOWER}x "
                "slower on a TPU v5e). "
                + UNCOSTABLE_HELP)
        out.append(CompilerWarning(text, instr.name, source_of(module, instr),
                                   line_of_code(module, instr)))
    return tuple(out)


def _largest_array(instr: Instruction) -> str:
    """`f32[2,8,8192,8192] in layout {2,3,1,0}`: the largest array of its shape."""
    arrays = [(t, dims, layout) for t, dims, layout in _ARRAY_LAYOUT.findall(instr.shape)]
    if not arrays:
        return ""
    t, dims, layout = max(arrays, key=lambda a: prod(ints(a[1])))
    return f"{t}[{dims}] in layout {{{layout}}}"


def _by_op_name(module: HloModule, text: str):
    m = _OP_NAME.search(text)
    if not m:
        return None
    return next((i for i in module.instructions() if i.op_name == m.group(1)), None)


def _users(module: HloModule, name: str):
    return [i for i in module.instructions() if name in i.operands]
