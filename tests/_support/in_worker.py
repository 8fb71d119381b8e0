"""A program run inside a compile worker, for the tests that show the worker pool contains what
a program does there (a crash, a hang, a thread left running, a child in a session of its own).

No analysis runs a program there: a user's function and a built-in workload's program are both
traced and lowered in the caller's process (explorer/_src/compile/lowering.py), and the worker only
compiles the module. So the program travels in a test-only message, `RunInWorker`: the function
pickled by value with its own file names (source_pickle.py), which this module, the worker's
test hook (explorer/_src/compile/worker.py, HOOK_VARIABLE), unpickles, traces and lowers inside the
worker as the caller would, then compiles through the worker's own `compile_request`, answering
the CompileResult any analysis gets. The worker treats it as it treats a CompileRequest: an
error is a Failure, and a program that leaves a thread or a process running retires it.

The hook also answers worker_faults.py's messages, so that one worker can serve both in a test.
Workers see the hook only if it was set before they started (the pool gives each the
environment of the moment it starts it): `run_in_workers(monkeypatch)` first, then the pool.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import worker_faults
from source_pickle import pickle_function

from explorer._src.compile.pool import WorkerPool
from explorer._src.compile.protocol import Partitioner, Reply, WorkerKey
from explorer._src.compile.worker import HOOK_VARIABLE
from explorer._src.report.build import build_report
from explorer._src.report.report import Report
from explorer._src.spec.mesh import MeshSpec, parse_mesh
from explorer._src.spec.tensor import TensorSpec


@dataclass(frozen=True)
class RunInWorker:
    """Trace `fn` (pickle_function's bytes) on the TensorSpecs `args` over `mesh` inside the
    worker, and compile it there. `sys_path`: the caller's, so that the worker can import what
    `fn` refers to by name, even from a folder added after the worker started."""

    fn: bytes
    args: tuple[TensorSpec, ...]
    mesh: MeshSpec
    partitioner: Partitioner = Partitioner.SHARDY
    sys_path: tuple[str, ...] = ()


def answer(message) -> Reply | None:
    """The hook: a RunInWorker's CompileResult, worker_faults' answer to its messages, None for
    any other message. What the program raises propagates: the worker reports it."""
    if not isinstance(message, RunInWorker):
        return worker_faults.answer(message)
    import cloudpickle
    import jax

    from explorer._src.compile.backend import compile_request
    from explorer._src.compile.lowering import trace_and_lower

    for path in message.sys_path:
        if path not in sys.path:
            sys.path.append(path)
    fn = cloudpickle.loads(message.fn)
    # Traced as the caller traces a function (not lower_program: its memo would keep every
    # program's function alive in the worker, and no two requests share one).
    program = trace_and_lower(fn, message.args, message.mesh, jax.devices()[0].platform,
                              message.partitioner)
    return compile_request(program, message.args, message.mesh, message.partitioner)


def run_in_workers(monkeypatch) -> None:
    """Have the workers the test starts from now on answer RunInWorker (and worker_faults'
    messages); those started before answer them with a Failure."""
    monkeypatch.setenv(HOOK_VARIABLE, __name__)


def analyze_in_worker(fn, *args: TensorSpec, mesh, pool: WorkerPool,
                      timeout: float | None = None) -> Report:
    """The Report of `fn` on the TensorSpecs `args` over `mesh` (text or {axis: size}),
    traced and compiled inside `pool`'s worker, which must have started with this hook
    (`run_in_workers`)."""
    if os.environ.get(HOOK_VARIABLE) != __name__:
        raise RuntimeError(f"the workers run no program unless ${HOOK_VARIABLE} names "
                           f"{__name__!r} when they start: call run_in_workers(monkeypatch) "
                           "before the pool starts them")
    spec = parse_mesh(mesh)
    message = RunInWorker(fn=pickle_function(fn), args=args, mesh=spec,
                          sys_path=tuple(sys.path))
    # Counted as a compile (pool.run: every message but a Ping runs a program).
    result = pool.run(WorkerKey.fake_cpu(spec.device_count), message, timeout)
    return build_report(result, spec, Partitioner.SHARDY, {t.name: t.spec for t in args})
