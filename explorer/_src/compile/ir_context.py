"""One MLIR context for the lowerings of a thread, in place of a new one for each.

jax makes a new MLIR context, with every dialect loaded, for each lowering (jax 0.10's
`mlir.make_ir_context`): about 4-5 ms, a twentieth of a small program's whole analysis, paid
by the caller's lowering of each program (explorer/_src/compile/lowering.py) and by the worker's
parse of its module (explorer/_src/compile/jax_private.py). Inside
`shared_ir_context()`, the lowerings of the thread that entered it use one context of that
thread's instead.

`mlir.make_ir_context` is replaced once per process by a function that gives the held context
only to a thread inside the block and a new one, as jax does, to every other: the user's own
lowerings on other threads, and this thread's outside the block, are untouched, and two threads
in the block at once never share a context. A context keeps what its modules interned (types,
attributes, locations) for as long as it lives, so each thread's is renewed after USES programs,
as many as the worker lets jax's caches hold (explorer/_src/compile/worker.py, CLEAR_CACHES_EVERY).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

USES = 8

_held = threading.local()          # this thread's: context, uses, depth (in the block)
_installed: list[Callable[[], Any]] = []     # jax's own make_ir_context, once replaced
_lock = threading.Lock()


def _jax_make_ir_context() -> Callable[[], Any]:
    """jax's make_ir_context, after putting in its place the one that hands a thread in the
    block its held context (done once per process)."""
    with _lock:
        if not _installed:
            from explorer._src.compile import jax_private

            original = jax_private.ir_context_maker()

            def make_ir_context():
                if getattr(_held, "depth", 0) > 0:
                    return _held.context
                return original()

            make_ir_context.__doc__ = original.__doc__
            jax_private.replace_ir_context_maker(make_ir_context)
            _installed.append(original)
        return _installed[0]


@contextmanager
def shared_ir_context() -> Iterator[None]:
    """jax's lowerings in this thread, in the block, use this thread's held MLIR context."""
    make = _jax_make_ir_context()
    if getattr(_held, "depth", 0) == 0:
        if getattr(_held, "context", None) is None or _held.uses >= USES:
            _held.context, _held.uses = make(), 0
        _held.uses += 1
    _held.depth = getattr(_held, "depth", 0) + 1
    try:
        yield
    finally:
        _held.depth -= 1
