"""One MLIR context per thread for the explorer's lowerings (explorer/_src/compile/ir_context.py):
the
text a lowering gives is the same as with jax's new context each time (the cache keys are that
text), the lowerings share the context only in the block and only within the thread that
entered it, and the context is renewed after USES programs."""

from __future__ import annotations

import contextlib
import threading

import jax
import jax.numpy as jnp
import pytest
from jax._src import config as jax_config
from jax._src.interpreters import mlir

from explorer._src.compile import ir_context
from explorer._src.compile.ir_context import USES, shared_ir_context


def _lowered(n: int):
    return jax.jit(lambda x: jnp.tanh(x) @ x.T).lower(jax.ShapeDtypeStruct((n, n), jnp.float32))


def _texts(shared: bool) -> list[str]:
    """Three lowerings' texts with their locations, each op's innermost frame only (as the
    explorer lowers: explorer/_src/compile/lowering.py), so that where this is called from is not
    in them."""
    with jax_config.traceback_in_locations_limit(1), \
            shared_ir_context() if shared else contextlib.nullcontext():
        return [_lowered(n).as_text(debug_info=True) for n in (8, 16, 8)]


def test_the_text_is_the_text_of_a_lowering_in_a_new_context():
    alone = _texts(shared=False)
    assert _texts(shared=True) == alone
    assert _texts(shared=True) == alone      # a context that held these programs already


def test_the_context_is_shared_in_the_block_in_its_thread_alone():
    seen_elsewhere: list = []

    def another_thread():
        seen_elsewhere.extend(mlir.make_ir_context() for _ in range(2))

    with shared_ir_context():
        first, second = mlir.make_ir_context(), mlir.make_ir_context()
        other = threading.Thread(target=another_thread)
        other.start()
        other.join()
    after = mlir.make_ir_context()
    assert first is second
    # Another thread, while this one is in the block, and this one after it: jax's new ones.
    assert len({id(c) for c in seen_elsewhere}) == 2 and first not in seen_elsewhere
    assert after is not first


@pytest.mark.parametrize("before", range(USES + 1))
def test_the_context_is_renewed_after_uses_programs(before):
    """Whatever the thread lowered before (`before` programs), the next USES programs see one
    renewal, and the count starts again from it. In a thread of its own, so that the count
    before is known."""
    seen: dict = {}

    def thread():
        for _ in range(before):
            with shared_ir_context():
                pass
        seq = []
        for _ in range(USES):
            with shared_ir_context():
                seq.append(mlir.make_ir_context())
                with shared_ir_context():               # nested: the same program, not another
                    assert mlir.make_ir_context() is seq[-1]
        seen.update(seq=seq, held=ir_context._held.uses)

    worker = threading.Thread(target=thread)
    worker.start()
    worker.join()
    seq, held = seen["seq"], seen["held"]
    changed = [k for k in range(1, len(seq)) if seq[k] is not seq[k - 1]]
    # The renewal falls on the program that finds USES uses counted: the (USES - before)-th
    # after `before` programs, the first after USES (not a change within seq), none in a new
    # thread (its first program makes the thread's context).
    renewed_at = 0 if before in (0, USES) else USES - before
    assert changed == ([renewed_at] if renewed_at else [])
    assert held == USES - renewed_at
