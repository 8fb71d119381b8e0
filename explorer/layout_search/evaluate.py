"""One candidate through the real compiler: a picklable request, and the function that answers
it with explorer.analyze or explorer.analyze_workload (cache on). The same function runs in this
process, on the local worker pool, and in a Ray task on a cluster node, on that node's pool, so
both ways give the same Report for the same request."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from explorer.api.analysis_request import Request
from explorer.api.analyze import analyze
from explorer.api.workload import analyze_workload
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
    partitioner: str = "shardy"
    timeout: float | None = None
    workload: str | None = None
    params: Mapping[str, Any] | None = None
    rules: str | None = None
    specs: Mapping[str, tuple[Entry, ...]] | None = None
    fn: Callable | None = None
    args: tuple = ()
    # The function's Request, made where the search runs (`planned_here`): its program traced
    # and lowered there, under the caller's contexts. What a Ray task gets instead of `fn`.
    planned: Request | None = None
    compile_for: str = "target"          # as explorer.analyze takes it


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
    """A function's job with its Request made in this process (the function traced and
    lowered here, explorer/compile/lowering.py) in place of the function, for a compile
    elsewhere: a Ray task compiles the module and never traces the function.

    Raises:
        ExplorerError: the request's own errors, the function's failure to trace among them.
    """
    if job.fn is None:
        return job
    request = Request(fn=job.fn, inputs=tuple(job.args), mesh=job.mesh, target=job.target,
                      mapping=job.mapping, partitioner=job.partitioner, timeout=job.timeout,
                      compile_for=job.compile_for)
    return replace(job, fn=None, args=(), planned=request)


def run(request: CompileJob, pool=None) -> Outcome:
    """Compile and predict one candidate. A failed compile (or any bad input the checks find)
    comes back as an error, so that one candidate never stops a search."""
    t0 = time.perf_counter()
    common = dict(mesh=request.mesh, target=request.target, mapping=request.mapping,
                  partitioner=request.partitioner, timeout=request.timeout, pool=pool,
                  compile_for=request.compile_for)
    try:
        if request.workload is not None:
            report = analyze_workload(request.workload, specs=request.specs,
                                      params=request.params, rules=request.rules or None,
                                      **common)
        elif request.planned is not None:
            report = analyze(request.planned, pool=pool)
        else:
            report = analyze(request.fn, *request.args, **common)
    except ExplorerError as e:
        return Outcome(None, f"{type(e).__name__}: {e}", time.perf_counter() - t0, type(e))
    return Outcome(compact(report), "", time.perf_counter() - t0)
