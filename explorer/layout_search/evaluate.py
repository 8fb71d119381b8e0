"""One candidate through the real compiler: a picklable request, and the function that answers
it with explorer.analyze of its Request (cache on). The same function runs in this
process, on the local worker pool, and in a Ray task on a cluster node, on that node's pool, so
both ways give the same Report for the same request."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from explorer.api.analysis_request import Request
from explorer.api.analyze import analyze
from explorer.api.targeting import CompileFor
from explorer.compile.caller_context import CallerContext
from explorer.compile.protocol import Partitioner
from explorer.errors import ExplorerError, WorkerError, WorkerLost
from explorer.report.report import Report
from explorer.spec.mesh import MeshSpec
from explorer.spec.tensor import Entry


@dataclass(frozen=True)
class CompileJob:
    """What to compile: a workload with rules or specs, or a function with its arguments."""

    mesh: MeshSpec
    target: str
    mapping: Any = None
    partitioner: Partitioner = Partitioner.SHARDY
    timeout: float | None = None
    workload: str | None = None
    params: Mapping[str, Any] | None = None
    rules: str | None = None
    specs: Mapping[str, tuple[Entry, ...]] | None = None
    fn: Callable | None = None
    args: tuple = ()
    # The Request, made where the search runs (`planned_here`): its program traced and lowered
    # there, under the caller's contexts. What a Ray task gets instead of the program.
    planned: Request | None = None
    compile_for: CompileFor = CompileFor.TARGET   # as explorer.analyze takes it
    # The contexts the program is traced under: those where the search was called.
    context: CallerContext | None = None


@dataclass(frozen=True)
class Outcome:
    report: Report | None
    error: str                           # "ErrorType: message"; "" when it compiled
    seconds: float                       # wall time of the evaluation
    error_type: type[Exception] | None = None    # the class of the error `error` describes
    retries: int = 0                     # times it was sent again after a Ray worker was lost

    @property
    def worker_lost(self) -> bool:
        """The compile worker died or was killed under it (not a time limit): compiled again,
        it may still get a verdict."""
        return self.error_type is not None and issubclass(self.error_type, WorkerLost)

    @property
    def worker_failed(self) -> bool:
        """The compile worker crashed, was killed or ran past its time limit: no verdict of
        the compiler on the candidate."""
        return self.error_type is not None and issubclass(self.error_type, WorkerError)


def compact(report: Report) -> Report:
    """The Report without its program texts and timeline: what a search keeps of each
    candidate (and ships back from a cluster). The estimate keeps the trace's step time."""
    return replace(report, stablehlo="", propagated_hlo="", optimized_hlo="", trace=None)


def planned_here(job: CompileJob) -> CompileJob:
    """The job with its Request made in this process (the program traced and lowered here,
    under the job's contexts, explorer/compile/lowering.py) in place of the program, for a
    compile elsewhere: a Ray task compiles the module and never traces the program.

    Raises:
        ExplorerError: the request's own errors, the program's failure to trace among them.
    """
    if job.planned is not None:
        return job
    # The contexts stay here: the module carries what they meant, and they may hold meshes of
    # this process's devices.
    return replace(job, fn=None, args=(), workload=None, context=None, planned=_request(job))


def _request(job: CompileJob) -> Request:
    common = dict(mesh=job.mesh, target=job.target, mapping=job.mapping,
                  partitioner=job.partitioner, timeout=job.timeout,
                  compile_for=job.compile_for, context=job.context)
    if job.workload is not None:
        return Request(workload=job.workload, specs=job.specs, params=job.params,
                       rules=job.rules or None, **common)
    return Request(fn=job.fn, inputs=tuple(job.args), **common)


def compile_candidate(request: CompileJob, pool=None) -> Outcome:
    """Compile and predict one candidate. A failed compile (or any bad input the checks find)
    comes back as an error, so that one candidate never stops a search."""
    t0 = time.perf_counter()
    try:
        report = analyze(planned_here(request).planned, pool=pool)
    except ExplorerError as e:
        return Outcome(None, f"{type(e).__name__}: {e}", time.perf_counter() - t0, type(e))
    return Outcome(compact(report), "", time.perf_counter() - t0)
