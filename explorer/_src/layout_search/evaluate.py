"""One candidate through the real compiler: its Request, made from the search's Request with the
candidate's layout (`candidate_request`), and the function that answers it with explorer.analyze
(cache on). The same function runs in this process, on the local worker pool, and in a Ray task
on a cluster node, on that node's pool, so both ways give the same Report for the same Request.

The Request is made where the search runs: the candidate's program is traced and lowered there,
under the contexts of the search's Request (explorer/_src/compile/lowering.py), and a Ray task gets
the Request with its program lowered (pickling keeps the module, not the program), so a node
compiles the module and never traces the program."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

from explorer._src.api.analysis_request import Request
from explorer._src.api.analyze import analyze
from explorer._src.api.targeting import CompileFor
from explorer._src.errors import ExplorerError, WorkerError, WorkerLost
from explorer._src.layout_search.space import Problem, SearchLayout, WorkloadProblem
from explorer._src.report.report import Report


def candidate_request(request: Request, problem: Problem, layout: SearchLayout,
                      timeout: float | None, compile_for: CompileFor,
                      params: Mapping | None = None, rules: str | None = None) -> Request:
    """The Request of one candidate of a search of `request`: its program (`problem`, read
    from `request`) with `layout`'s mesh and layout, compiled for `compile_for` under
    `timeout`, with `request`'s target, mapping, partitioner and contexts. A workload takes the
    layout's rules and specs (or `params` and `rules` in their stead, for a pipeline plan); a
    function takes its arguments with the layout's specs. What else `request` holds (its own
    layout, donate, measure, origins ...) is not the search's: a candidate is compiled as
    explorer.search has always compiled one.

    Raises:
        ExplorerError: the Request's own errors, the program's failure to trace among them.
    """
    shared = dict(mesh=layout.mesh, target=request.target, mapping=request.mapping,
                  partitioner=request.partitioner, timeout=timeout, compile_for=compile_for,
                  context=request.context)
    if isinstance(problem, WorkloadProblem):
        return Request(workload=problem.name,
                       params=dict(problem.params if params is None else params),
                       rules=(layout.rules_text if rules is None else rules) or None,
                       specs={n: s for n, s in layout.specs} or None, **shared)
    specs = dict(problem.resolve(layout)[0])
    return Request(fn=problem.fn, inputs=tuple(problem.args_with(specs)), **shared)


@dataclass(frozen=True)
class Outcome:
    report: Report | None
    error: str                           # "ErrorType: message"; "" when it compiled
    seconds: float                       # wall time of the evaluation
    error_type: type[Exception] | None = None    # the class of the error `error` describes
    retries: int = 0                     # times it was sent again after a Ray worker was lost

    @classmethod
    def failed(cls, error: ExplorerError, started: float) -> Outcome:
        """The outcome of a candidate that `error` stopped, `started` (time.perf_counter())
        when its evaluation began."""
        return cls(None, f"{type(error).__name__}: {error}", time.perf_counter() - started,
                   type(error))

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


def compile_candidate(request: Request, pool=None) -> Outcome:
    """Compile and predict one candidate's Request. A failed compile comes back as an error,
    so that one candidate never stops a search."""
    t0 = time.perf_counter()
    try:
        report = analyze(request, pool=pool)
    except ExplorerError as e:
        return Outcome.failed(e, t0)
    return Outcome(compact(report), "", time.perf_counter() - t0)
