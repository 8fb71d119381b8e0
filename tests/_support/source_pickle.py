"""A function pickled by value with its own file names, for a program that the tests run inside
a compile worker (tests/_support/in_worker.py). No analysis ships a function: every program is
traced where it is asked for (explorer/_src/compile/lowering.py).

cloudpickle pickles a function by value when it cannot be imported by name (one defined inside
another function, `__main__` or a cell) and then sets every code object's `co_filename` to
"<dynamic-code>" (cloudpickle 3.1, `_code_reduce`, to make the bytes the same wherever a
function is defined); jax takes file and line from the code objects it traces, and a traceback
from the worker names them, so every source line would read `<dynamic-code>:LINE`. The pickler
here keeps the real file name in each code object it writes (nested functions, closures,
partials and globals pickled by value included, since they all pass through the same reducer).
"""

from __future__ import annotations

import io
import types
from collections import ChainMap

import cloudpickle

_DYNAMIC = "<dynamic-code>"
_STOCK_REDUCE_CODE = cloudpickle.Pickler.dispatch_table[types.CodeType]


def _reduce_code(code: types.CodeType):
    """cloudpickle's reduction of a code object, with the file name put back."""
    constructor, args = _STOCK_REDUCE_CODE(code)
    if _DYNAMIC not in args:     # a cloudpickle that keeps file names already: leave it be
        return constructor, args
    i = args.index(_DYNAMIC)
    return constructor, (*args[:i], code.co_filename, *args[i + 1:])


class _SourceKeepingPickler(cloudpickle.Pickler):
    """cloudpickle, except that code objects keep their file name. (The C pickler reads
    `dispatch_table` when it is created, so it is set on the class.)"""

    dispatch_table = ChainMap({types.CodeType: _reduce_code}, cloudpickle.Pickler.dispatch_table)


def pickle_function(fn) -> bytes:
    """`fn` as bytes for the worker (cloudpickle.loads reads them), its code objects keeping
    their files."""
    with io.BytesIO() as f:
        _SourceKeepingPickler(f).dump(fn)
        return f.getvalue()
