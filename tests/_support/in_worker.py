"""A program run in the compile worker, as a built-in workload's program runs there: pickled,
then traced by the worker. A user's function is traced in the caller's process
(explorer/compile/lowering.py) and never runs in a worker; what a program does inside the worker
(a crash, a thread left running, a child in a session of its own), which the worker must
survive, is a workload's."""

from __future__ import annotations

from explorer.compile.pool import WorkerPool
from explorer.compile.protocol import CompileRequest, Partitioner, WorkerKey
from explorer.compile.sources import pickle_function
from explorer.report.build import build_report
from explorer.report.report import Report
from explorer.spec.mesh import parse_mesh


def analyze_in_worker(fn, *args, mesh, pool: WorkerPool, timeout: float | None = None) -> Report:
    """`fn` on the TensorSpecs `args` over `mesh` (text or {axis: size}), compiled by `pool`'s
    worker, which traces it."""
    spec = parse_mesh(mesh)
    message = CompileRequest(fn=pickle_function(fn), args=args, mesh=spec,
                             partitioner=Partitioner.SHARDY)
    result = pool.compile(WorkerKey.fake_cpu(spec.device_count), message, timeout)
    return build_report(result, spec, Partitioner.SHARDY, {t.name: t.spec for t in args})
