"""When the served Voila calls itself ready (served_voila.preheated): every preheated kernel has
run the notebook to the end, as Voila 0.5 keeps them (`_pools`: per notebook, tasks that start a
kernel and return {"task": the run of the notebook, ...})."""

import asyncio
from types import SimpleNamespace

import pytest

pytest.importorskip("voila")

from explorer._src.ui.served_voila import preheated  # noqa: E402


def _pool_item(loop, run: asyncio.Future) -> asyncio.Future:
    started = loop.create_future()
    started.set_result({"task": run, "renderer": None, "kernel_id": "k"})
    return started


def test_ready_only_once_every_preheated_kernel_has_run_the_notebook():
    loop = asyncio.new_event_loop()
    try:
        first, second = loop.create_future(), loop.create_future()
        manager = SimpleNamespace(_pools={"app.ipynb": [_pool_item(loop, first),
                                                        _pool_item(loop, second)]})
        assert not preheated(manager)                 # both still running the notebook
        first.set_result(([], None))
        assert not preheated(manager)                 # one of two
        second.set_result(([], None))
        assert preheated(manager)
        starting = loop.create_future()               # a kernel still starting
        manager._pools["app.ipynb"].append(starting)
        assert not preheated(manager)
    finally:
        loop.close()


def test_a_kernel_that_failed_is_not_ready_and_an_empty_pool_is_not_either():
    loop = asyncio.new_event_loop()
    try:
        failed = loop.create_future()
        failed.set_exception(RuntimeError("the kernel died"))
        assert not preheated(SimpleNamespace(_pools={"app.ipynb": [_pool_item(loop, failed)]}))
        assert not preheated(SimpleNamespace(_pools={"app.ipynb": []}))
    finally:
        loop.close()


def test_without_preheated_kernels_the_server_is_ready_as_it_listens():
    assert preheated(SimpleNamespace())               # Voila's manager without a pool
