"""Where in the user's code an HLO instruction came from: its file:line as people read it, and
that line of code. Read from the module's stack-frame tables, in the parent process."""

from __future__ import annotations

import linecache

from explorer._src.compile.protocol import CELL_NAME
from explorer._src.hlo.module import HloModule, Instruction, short_path


def source_of(module: HloModule, instr: Instruction) -> str:
    """"model.py:42", "In [3], line 2" for a notebook cell, or "" when the metadata is silent."""
    src = module.source(instr)
    if not src:
        return ""
    if CELL_NAME.match(src[0]):     # a notebook cell, named as its prompt: "In [3], line 2"
        return f"{src[0]}, line {src[1]}"
    return f"{short_path(src[0])}:{src[1]}"


def line_of_code(module: HloModule, instr: Instruction) -> str:
    """The line of code at the instruction's source location, stripped; read here, in the
    parent process, from the absolute path the compiler recorded ("" for a file that is not
    readable, such as `<dynamic-code>`)."""
    src = module.source(instr)
    if not src or not src[1]:
        return ""
    return linecache.getline(src[0], src[1]).strip()
