"""explorer.search: the best shardings of a program on a target, found with the real compiler.

`search` makes (or takes) the explorer Request of the program, which checks and plans it once,
and its own options beside it (options.py); `search_request` then checks what the search adds
(a target to rank on, a space the program has), enumerates the space and hands it to one of
two searches, which compile each candidate as a Request of its own (evaluate.py):

- rules or specs (space.py): the intra-operator branch and bound over the distinct candidates
  (branch_and_bound.py), which compiles the replicated reference first, skips candidates whose
  bounds (bounds.py) show they cannot win, and compiles the others in the surrogate's order
  (surrogate.py). With `prune=False` every candidate is compiled (the exhaustive search the
  tests compare against). Where the target's own compiler would compile, every candidate is
  first estimated with no compile (estimate_screen.py), before any compile, and the best are
  then confirmed by that compiler (confirm.py); a program the estimate cannot trace is
  screened on CPU devices where that pays.
- pipeline: the inter-operator search of the `pipeline` workload (pipeline_search.py), Alpa's
  stage construction over compiled per-layer costs (pipeline.py).

Candidates compile on this process's worker pool, or as Ray tasks on a cluster (cluster.py). A
budget bounds the wall time, work in flight at its end included (deadline.py); a
threading.Event or a progress callback that returns False cancels, as promptly; a candidate that
fails is recorded with its error.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import Any

from explorer._src.api.analysis_request import CompileForName, PartitionerName, Request
from explorer._src.api.pytrees import flat_call, tensor_leaves
from explorer._src.api.request import check_function, check_mesh
from explorer._src.cost.catalog.names import get_target
from explorer._src.errors import InputError, TargetError, WorkloadError
from explorer._src.layout_search.branch_and_bound import BranchAndBound
from explorer._src.layout_search.cluster import make_runner
from explorer._src.layout_search.confirm import screening_for
from explorer._src.layout_search.options import SearchOptions
from explorer._src.layout_search.pipeline import DEFAULT_MAX_MICROBATCHES, profile_mesh
from explorer._src.layout_search.pipeline_search import PipelineSearch
from explorer._src.layout_search.result import Progress, SearchPhase, SearchResult, SearchSpace
from explorer._src.layout_search.space import (
    FunctionProblem,
    Problem,
    WorkloadProblem,
    check_names,
    check_replaceable,
    check_tensors,
    enumerate_space,
    mesh_factorisations,
)
from explorer._src.layout_search.state import SearchState
from explorer._src.spec.tensor import TensorSpec
from explorer._src.workloads.registry import get_workload


def search(program, *args, mesh=None, target: str | None = None, mapping=None,
           params: Mapping | None = None,
           space: str | None = None, names=None, tensors=None, mesh_shapes: bool = True,
           budget_s: float | None = None, prune: bool = True,
           progress: Callable[[Progress], Any] | None = None, cancel=None,
           cluster: str | None = None, node_timeout: float | None = None,
           timeout: float | None = None, partitioner: PartitionerName = "shardy", pool=None,
           max_microbatches: int | None = None,
           verify: int = 3, patience: int | None = None,
           compile_for: CompileForName = "target") -> SearchResult:
    """Search the shardings of `program` on `mesh` for the fastest predicted step on `target`.

    Args:
        program: a built-in workload's name (its params in `params`), or a function followed
            by its arguments as explorer.analyze takes them: TensorSpecs, arrays or
            ShapeDtypeStructs in any pytree (an Equinox module, an optax state), each named
            by its key path; or an explorer.Request, which gives the program, its params or
            inputs, the mesh, target, mapping, partitioner, timeout, compile_for and the
            contexts its program is traced under (its layout is what the search varies, so its
            specs, preset and rules are not used). Given keywords, the search makes that
            Request of them; either way each candidate is a Request of its own, the search's
            with the candidate's layout, and the search's own options (the keywords below)
            sit beside it.
        mesh: the mesh axes and sizes, e.g. "data=2,model=4".
        target: the hardware to predict on (see explorer.targets()); `mapping` places mesh
            axes on its links.
        space: "rules" (a workload's default: one mesh axis or none per logical name in
            `names`, default every name it uses), "specs" (a function's default: every spec of
            the input tensors in `tensors`, default all; the others keep theirs) or "pipeline"
            (the pipeline workload's default: stages, cuts and microbatches).
        mesh_shapes: also try every other factorisation of the device count into the mesh's
            axes (kept fixed when a `mapping` is given).
        budget_s: the seconds the search may take: it starts no compile once they are spent,
            and returns without waiting for a compile or a trace still in flight (left to end
            by its own time limit in the background); what is left is counted as not
            evaluated, and `stats.cut_short` names the phases the budget cut short.
        prune: skip candidates that their bounds show cannot win (False: compile every one).
        progress: called with a Progress after each candidate; returning False cancels.
        cancel: a threading.Event that cancels the search when set.
        cluster: compile on a Ray cluster ("HOST:PORT", "ray://HOST:PORT", "auto", "local";
            needs the `cluster` extra) instead of this machine's worker pool.
        node_timeout: with `cluster`, the seconds each node gets to answer the check made
            before the search (its Ray worker started, the explorer and jax imported);
            default 120. A node that does not answer in time is named in the error.
        timeout: the time limit of one compile, seconds.
        max_microbatches: pipeline: the most microbatches to try (default 32).
        verify: pipeline: how many of the best plans that fit to compile (default 3).
        patience: stop after this many compiles in a row that do not improve the best (a
            heuristic stop: the winner is then the best found, not proven best).
        compile_for: "target" (the default), on a GPU or TPU target whose compiler is
            installed: a rules or specs search screens every candidate by an estimate from
            the traced program, with no compile, before it compiles anything (a program that
            cannot be traced: on fake CPU devices, priced on the target, where that is twice
            as fast as the target's compiler); then compiles the best 3 (with the estimate,
            while the budget lasts and they improve) with the target's own compiler, which
            ranks them (each Candidate's
            `compiled_by` says whose numbers it holds; `stats.confirmed` counts them); a
            pipeline search compiles with the target's compiler throughout. "cpu" compiles
            every candidate on fake CPU devices (faster, approximate), with no confirmation.

    Returns:
        A SearchResult: candidates ranked best first, the Pareto front of time against memory,
        why the winner beats the runner-up, and the counts (docs/search.md).
    """
    started = time.perf_counter()
    options = SearchOptions(space=space, names=names, tensors=tensors, mesh_shapes=mesh_shapes,
                            budget_s=budget_s, prune=prune, patience=patience,
                            progress=progress, cancel=cancel, cluster=cluster,
                            node_timeout=node_timeout, pool=pool,
                            max_microbatches=max_microbatches, verify=verify)
    if isinstance(program, Request):
        if args or any(v is not None for v in (mesh, target, mapping, params)):
            raise InputError("search(request, ...) takes the program, mesh, target and mapping "
                             "from the Request; give only the search's own options")
        request = program
    else:
        request = _request_of(program, args, options.space, mesh=mesh, params=params,
                              target=target, mapping=mapping, partitioner=partitioner,
                              timeout=timeout, compile_for=compile_for)
    return search_request(request, options, started)


def search_request(request: Request, options: SearchOptions,
                   started: float | None = None) -> SearchResult:
    """explorer.search of `request`, whose layout is what varies, with the search's own
    `options` beside it: each candidate is a Request of `request`'s program with the
    candidate's layout (evaluate.py's candidate_request), made where the search runs and
    shipped to the runner.

    The Request was checked and planned when it was made, so what the search reads of it (the
    program, its params or inputs, the mesh, target, mapping, partitioner, timeout,
    compile_for and contexts) is not checked again; what the search adds is checked here: a
    target it can rank on, a space the program has, the names or tensors searched. `started`
    (time.perf_counter()) is when the search began, where that was before this call: its
    budget counts from then."""
    started = time.perf_counter() if started is None else started
    _check_target(request.target)
    problem = _problem(request)
    space = _check_space(options.space, problem)
    state = SearchState(started, budget_s=options.budget_s, cancel=options.cancel,
                        progress=options.progress, prune=options.prune,
                        patience=options.patience)
    where = partial(_runner, options)
    if space is SearchSpace.PIPELINE:
        return _pipeline_search(problem, request, options, state, where)
    return _branch_and_bound(problem, space, request, options, state, where)


def _request_of(program, args: tuple, space: SearchSpace | None, *, mesh, params, target,
                mapping, **compiling) -> Request:
    """The Request that search(program, *args, ...) is of, checked as it is made: a built-in
    workload by name (its params in `params`), or a function and its arguments (the specs they
    carry), on `mesh`. The pipeline search chooses the stages, microbatches and cuts and the
    mesh (stage x data over the mesh's devices) itself, so its Request is the pipeline at one
    stage and one microbatch on all the mesh's devices, whatever the axes and params given."""
    _needs_target(target)
    if isinstance(program, str):
        workload = get_workload(program)
        if args:
            raise WorkloadError(f"search of workload {program!r} takes no positional "
                                f"arguments (got {len(args)}); give its params as params={{...}}")
        if workload.name == "pipeline" and space in (None, SearchSpace.PIPELINE) and (
                params is None or isinstance(params, Mapping)):
            _check_pipeline_options(mapping=mapping)
            given = check_mesh(mesh)
            mesh = profile_mesh(given.device_count, 1, given.axis_type)
            params = {**(params or {}), "stages": 1, "microbatches": 1, "cuts": ""}
        return Request(workload=program, params=params, mesh=mesh, target=target,
                       mapping=mapping, **compiling)
    check_function(program)    # neither a workload's name nor a function (None included)
    if params is not None:
        raise InputError("params are a built-in workload's; a function's sizes are its "
                         "TensorSpecs' shapes")
    return Request(fn=program, inputs=args, mesh=mesh, target=target, mapping=mapping,
                   **compiling)


# Opens where the candidates compile (_runner), once every argument has been checked.
_Where = Callable[[], AbstractContextManager[Any]]


def _pipeline_search(problem: Problem, request: Request, options: SearchOptions,
                     state: SearchState, where: _Where) -> SearchResult:
    """The inter-operator search of the pipeline workload (pipeline_search.py), which refuses
    the options of the intra-operator searches."""
    _check_pipeline_options(names=options.names, tensors=options.tensors,
                            mapping=request.mapping)
    limit = options.max_microbatches or DEFAULT_MAX_MICROBATCHES
    assert isinstance(problem, WorkloadProblem)     # only the pipeline workload has the space
    with where() as runner:
        return PipelineSearch(problem, request, state, runner, limit, options.verify).run()


def _branch_and_bound(problem: Problem, space: SearchSpace, request: Request,
                      options: SearchOptions, state: SearchState,
                      where: _Where) -> SearchResult:
    """A rules or specs search: enumerate the candidates (over the other factorisations of the
    mesh too, with `mesh_shapes` and no mapping), then the branch and bound over them
    (branch_and_bound.py)."""
    if options.max_microbatches is not None:
        raise InputError("max_microbatches applies to the pipeline search (space='pipeline')")
    searched_names, searched_tensors = _searched(problem, space, options.names, options.tensors)
    meshes = mesh_factorisations(request.planned.mesh,
                                 options.mesh_shapes and request.mapping is None)
    state.report(SearchPhase.ENUMERATE)
    found = enumerate_space(problem, meshes, space, searched_names, searched_tensors,
                            state.out_of_time)
    state.should_stop()       # records a cancel or a budget that cut the enumeration short
    with where() as runner:
        return BranchAndBound(problem, space, found, request, state, runner,
                              screening_for(request)).run()


@contextmanager
def _runner(options: SearchOptions):
    """Where the candidates compile (cluster.py), closed when the search ends."""
    runner = make_runner(options.cluster, options.pool, node_timeout=options.probe_timeout)
    try:
        yield runner
    finally:
        runner.close()


def _problem(request: Request) -> Problem:
    """What is searched: the Request's built-in workload (its params resolved when the Request
    was made), or its function and arguments."""
    planned = request.planned
    if planned.workload is not None:
        return WorkloadProblem(planned.workload, dict(planned.params))
    # The user's own pytree classes (an Equinox module) go flat, since the search rebuilds the
    # inputs with new specs.
    fn, args = flat_call(request.fn, planned.inputs)
    check_replaceable(args)
    return FunctionProblem(fn, args, tensor_leaves(args))


# ---------------------------------------------------------------------------------------------
# The search's own checks: what it adds to the Request's.

def _needs_target(target) -> None:
    if target is None:
        raise TargetError("a search ranks by predicted step time, which needs a target; "
                          "choose one of explorer.targets() (e.g. target='h100-8')")


def _check_target(target: str | None) -> None:
    """A target the search can rank on: one (a Request may have none) with sourced speeds.
    The Request checked that it is a target and that its mapping fits the mesh."""
    _needs_target(target)
    if get_target(target).chip.peak_flops == {} or get_target(target).family == "cpu":
        raise TargetError(f"target {target!r} has no sourced speeds, so nothing can be "
                          "ranked on it; choose a GPU or TPU target (see explorer.targets())",
                          target=target)


def _check_space(space: SearchSpace | None, problem: Problem) -> SearchSpace:
    """The space to search: `space` (SearchOptions checked its name) where the program has
    it, else the program's own."""
    is_pipeline = isinstance(problem, WorkloadProblem) and problem.name == "pipeline"
    has_rules = isinstance(problem, WorkloadProblem) and bool(problem.logical)
    if space is None:
        if is_pipeline:
            return SearchSpace.PIPELINE
        return SearchSpace.RULES if has_rules else SearchSpace.SPECS
    if space == SearchSpace.PIPELINE and not is_pipeline:
        raise InputError(f"space 'pipeline' chooses the stages of workload 'pipeline', not of "
                         f"{problem.name!r}; use space 'rules' or 'specs'")
    if space == SearchSpace.RULES and not has_rules:
        raise InputError(f"{problem.name!r} names no logical dimensions, so it has no rules "
                         "to search; use space 'specs'")
    return SearchSpace(space)


def _check_pipeline_options(**options) -> None:
    """The options of the intra-operator searches, which the pipeline search does not take."""
    for what, value in options.items():
        if value is not None:
            raise InputError(f"{what}= does not apply to the pipeline search, which "
                             "chooses the mesh (stage x data), the stages, the cuts and "
                             "the microbatches itself")


def _searched(problem: Problem, space: SearchSpace, names,
              tensors) -> tuple[list[str], list[TensorSpec]]:
    """The logical names a rules search maps, or the tensors a specs search places."""
    if space is SearchSpace.RULES:
        searched = check_names(problem, names)
        if tensors is not None:
            raise InputError("tensors= chooses the tensors of a specs search; a rules search "
                             "takes names= (the logical names to map to mesh axes)")
        return searched, []
    if names is not None:
        raise InputError("names= chooses the logical names of a rules search; a specs "
                         "search takes tensors= (the tensors whose specs to search)")
    return [], check_tensors(problem, tensors)
