"""Source files as people name them: a notebook cell as its prompt ("In [3]", `cell_name`).

Every program is traced where it is asked for (explorer/_src/compile/lowering.py), and its module
names the cells it came from by `cell_name`; no function travels to a compile worker.
"""

from __future__ import annotations

import linecache
import re
import sys


def cell_name(filename: str) -> str | None:
    """"In [3]" for the file IPython compiled cell 3 into (ipykernel's /tmp/ipykernel_PID/HASH.py,
    terminal IPython's <ipython-input-3-...>), None for any other file or outside IPython."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None     # never import IPython (a UI library): outside it there are no cells
    shell = ipython.get_ipython()
    compiler = getattr(shell, "compile", None)
    format_code_name = getattr(compiler, "format_code_name", None)   # IPython >= 8
    if format_code_name is None:
        return None
    named = format_code_name(filename)       # ("Cell", "In[3]") for a cell's file
    if not named:
        return None
    m = re.fullmatch(r"In\[(\d+)\]", named[1])
    if not m:
        return None
    name = f"In [{m.group(1)}]"
    _remember_cell(name, filename)
    return name


def _remember_cell(name: str, filename: str) -> None:
    """Make the cell's text readable by its prompt name ("In [3]") through linecache, as the
    Report reads every source line (`source_text`): IPython keeps it under the temporary file's
    name only."""
    lines = linecache.getlines(filename)
    if lines:
        linecache.cache[name] = (sum(map(len, lines)), None, lines, name)
