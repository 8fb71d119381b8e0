"""Source files as people name them: a notebook cell as its prompt ("In [3]", `cell_name`),
and a function shipped to a compile worker with its own file names.

Every program is traced where it is asked for (explorer/compile/lowering.py), and its module
names the cells it came from by `cell_name`; no analysis ships a function. `pickle_function`
is for a program that must run inside a worker (the fault tests show that what it does there
is contained), and may be a closure. cloudpickle pickles a function by value when it cannot be
imported by name (one defined inside another function, `__main__` or a cell) and then sets
every code object's `co_filename` to "<dynamic-code>" (cloudpickle 3.1, `_code_reduce`, to
make the bytes the same wherever a function is defined); jax takes file and line from the code
objects it traces, so every collective's source would read `<dynamic-code>:LINE`. The pickler
here keeps the real file name in each code object it writes (nested functions, closures,
partials and globals pickled by value included, since they all pass through the same reducer).
"""

from __future__ import annotations

import functools
import io
import linecache
import re
import sys
import types
from collections import ChainMap

import cloudpickle

from explorer.errors import InputError

_DYNAMIC = "<dynamic-code>"


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


def _reduce_code(code: types.CodeType):
    """cloudpickle's reduction of a code object, with the file name put back."""
    constructor, args = _STOCK_REDUCE_CODE(code)
    if _DYNAMIC not in args:     # a cloudpickle that keeps file names already: leave it be
        return constructor, args
    i = args.index(_DYNAMIC)
    return constructor, (*args[:i], cell_name(code.co_filename) or code.co_filename,
                         *args[i + 1:])


_STOCK_REDUCE_CODE = cloudpickle.Pickler.dispatch_table[types.CodeType]


class _SourceKeepingPickler(cloudpickle.Pickler):
    """cloudpickle, except that code objects keep their file name. (The C pickler reads
    `dispatch_table` when it is created, so it is set on the class.)"""

    dispatch_table = ChainMap({types.CodeType: _reduce_code}, cloudpickle.Pickler.dispatch_table)


def pickle_function(fn) -> bytes:
    """`fn` as bytes for the worker, its code objects keeping their files (see the module doc).

    Raises an InputError that names what cannot be shipped (a lock, an open file, a client
    held in a closure or a global) and how to restructure the function."""
    try:
        return _dumps(fn)
    except Exception as e:
        found = _find_unpicklable(fn, (), set())
        trail, culprit, error = found or ((), fn, e)
        what = type(culprit).__name__
        where = " → ".join(trail) or "it"
        raise InputError(
            f"cannot send {_describe_callable(fn)} to the compile worker: {where} holds a "
            f"{what}, which cannot be pickled ({type(error).__name__}: {error}). The worker "
            "traces the function in its own process, so everything the function refers to is "
            f"pickled and sent. Create the {what} inside the function, or pass the data it "
            "holds (arrays, numbers, configs) instead of the object") from e


def _dumps(obj) -> bytes:
    with io.BytesIO() as f:
        _SourceKeepingPickler(f).dump(obj)
        return f.getvalue()


def _describe_callable(fn) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return f"function {name!r}" if name else f"callable {type(fn).__name__}"


def _parts(obj):
    """(how to name it, value) for what pickling `obj` by value pickles too."""
    if isinstance(obj, functools.partial):
        yield "the wrapped function", obj.func
        for i, a in enumerate(obj.args):
            yield f"bound argument {i}", a
        for k, v in (obj.keywords or {}).items():
            yield f"bound argument {k!r}", v
    elif isinstance(obj, types.MethodType):
        yield "self", obj.__self__
        yield "the method's function", obj.__func__
    elif isinstance(obj, types.FunctionType):
        code = obj.__code__
        for name, cell in zip(code.co_freevars, obj.__closure__ or (), strict=False):
            try:
                yield f"closure variable {name!r}", cell.cell_contents
            except ValueError:      # an empty cell
                continue
        for name in dict.fromkeys(_global_names(code)):
            if name in obj.__globals__:
                yield f"global {name!r}", obj.__globals__[name]
        for i, d in enumerate(obj.__defaults__ or ()):
            yield f"default argument {i}", d
        for k, v in (obj.__kwdefaults__ or {}).items():
            yield f"default argument {k!r}", v
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield f"item {k!r}", v
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield f"item {i}", v
    elif hasattr(obj, "__dict__") and not isinstance(obj, type | types.ModuleType):
        for k, v in vars(obj).items():
            yield f"attribute {k!r}", v


def _global_names(code: types.CodeType):
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _global_names(const)


def _find_unpicklable(obj, trail: tuple[str, ...], seen: set[int]):
    """The innermost part of `obj` that fails to pickle, as (trail of names, object, error),
    or None if no part fails on its own."""
    if id(obj) in seen or len(trail) > 6:
        return None
    seen.add(id(obj))
    for name, part in _parts(obj):
        try:
            _dumps(part)
        except Exception as e:
            here = (*trail, name)
            return _find_unpicklable(part, here, seen) or (here, part, e)
    return None
