"""A program the tests run inside a compile worker (tests/_support/in_worker.py) is pickled by
value with its own file names (tests/_support/source_pickle.py), so that what the worker
reports of it (a traceback, a collective's source line) names the test's file, not
cloudpickle's `<dynamic-code>`."""

import functools
import inspect
import os
import sys
from pathlib import Path

import cloudpickle
import jax.numpy as jnp
import pytest

from explorer import TensorSpec, WorkerPool

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_support"))
from in_worker import analyze_in_worker, run_in_workers  # noqa: E402
from source_pickle import pickle_function  # noqa: E402


def _codes(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, type(code)):
            yield from _codes(const)


def test_every_code_object_shipped_by_value_keeps_its_file():
    scale = 3.0

    def inner(y):
        return y * scale               # a closure over a float

    def outer(x, k):
        def nested(y):                 # a code object among outer's constants
            return inner(y) + k
        return nested(x)

    shipped = pickle_function(functools.partial(outer, k=1))
    assert b"<dynamic-code>" not in shipped
    loaded = cloudpickle.loads(shipped)
    inner_copy = loaded.func.__closure__[0].cell_contents
    codes = [*_codes(loaded.func.__code__), inner_copy.__code__]
    assert len(codes) == 3
    assert {c.co_filename for c in codes} == {__file__}
    assert loaded(2.0) == outer(2.0, 1) == 7.0


def _module_level_helper(x):
    return x - 1


def test_a_global_function_pickled_by_value_keeps_its_file():
    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)
    try:
        shipped = pickle_function(lambda x: _module_level_helper(x) * 2)
    finally:
        cloudpickle.unregister_pickle_by_value(module)
    loaded = cloudpickle.loads(shipped)
    helper = loaded.__globals__["_module_level_helper"]
    assert helper is not _module_level_helper          # it travelled by value
    assert helper.__code__.co_filename == __file__
    assert helper.__code__.co_firstlineno == inspect.getsourcelines(_module_level_helper)[1]


@pytest.mark.slow
def test_a_program_traced_in_the_worker_names_this_file_and_line(monkeypatch):
    run_in_workers(monkeypatch)
    pool = WorkerPool(timeout=60)

    def step(x, w):                    # pickled by value: defined inside the test
        h = jnp.tanh(x)
        return h @ w       # contracts the dimension split over d: an all-reduce over d

    x = TensorSpec("x", (8, 16), spec="None,d")
    w = TensorSpec("w", (16, 4), spec="d,None")
    try:
        [c] = analyze_in_worker(step, x, w, mesh="d=4", pool=pool).collectives
    finally:
        pool.close()
    lines, first = inspect.getsourcelines(step)
    line = first + next(i for i, text in enumerate(lines) if "h @ w" in text)
    assert (c.kind, c.axes) == ("all-reduce", ("d",))
    assert c.source == f"{os.path.relpath(__file__)}:{line}"
