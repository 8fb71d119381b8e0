"""One candidate through the real compiler: a picklable request, and the function that answers
it with explorer.analyze or explorer.analyze_workload (cache on). The same function runs in this
process, on the local worker pool, and in a Ray task on a cluster node, on that node's pool, so
both ways give the same Report for the same request."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from explorer.api.analyze import analyze
from explorer.api.workload import analyze_workload
from explorer.errors import ExplorerError, WorkerError
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
    fn_bytes: bytes | None = None        # the function as explorer.compile.sources pickles it
    args: tuple = ()
    compile_for: str = "target"          # as explorer.analyze takes it


@dataclass(frozen=True)
class Outcome:
    report: Report | None
    error: str                           # "ErrorType: message"; "" when it compiled
    seconds: float                       # wall time of the evaluation
    error_type: type[Exception] | None = None    # the class of the error `error` describes
    retries: int = 0                     # times it was sent again after a Ray worker was lost

    @property
    def worker_failed(self) -> bool:
        """The compile worker crashed, was killed or ran past its time limit: no verdict of
        the compiler on the candidate."""
        return self.error_type is not None and issubclass(self.error_type, WorkerError)


def compact(report: Report) -> Report:
    """The Report without its program texts and timeline: what a search keeps of each
    candidate (and ships back from a cluster). The estimate keeps the trace's step time."""
    return replace(report, stablehlo="", propagated_hlo="", optimized_hlo="", trace=None)


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
        else:
            fn = request.fn
            if fn is None:
                import cloudpickle

                fn = cloudpickle.loads(request.fn_bytes)
            report = analyze(fn, *request.args, **common)
    except ExplorerError as e:
        return Outcome(None, f"{type(e).__name__}: {e}", time.perf_counter() - t0, type(e))
    return Outcome(compact(report), "", time.perf_counter() - t0)
