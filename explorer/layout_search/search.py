"""explorer.search: the best shardings of a program on a target, found with the real compiler.

`search` checks its arguments, enumerates the space and hands it to one of two searches:

- rules or specs (space.py): the intra-operator branch and bound over the distinct candidates
  (branch_and_bound.py), which compiles the replicated reference first, skips candidates whose
  bounds (bounds.py) show they cannot win, and compiles the others in the surrogate's order
  (surrogate.py). With `prune=False` every candidate is compiled (the exhaustive search the
  tests compare against). Where the target's own compiler would compile, those compiles are a
  screen on CPU devices, or, where CPU compiles would not pay, an estimate of each candidate
  with no compile (estimate_screen.py), and the best are confirmed by that compiler
  (confirm.py).
- pipeline: the inter-operator search of the `pipeline` workload (pipeline_search.py), Alpa's
  stage construction over compiled per-layer costs (pipeline.py).

Candidates compile on this process's worker pool, or as Ray tasks on a cluster (cluster.py). A
budget bounds the wall time; a threading.Event or a progress callback that returns False
cancels; a candidate that fails is recorded with its error.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import Any

from explorer.api.analysis_request import CompileForName, PartitionerName, Request
from explorer.api.pytrees import flat_call, named_inputs, tensor_leaves
from explorer.api.request import (
    check_flag,
    check_function,
    check_inputs,
    check_mesh,
    check_partitioner,
    check_target,
    check_timeout,
)
from explorer.api.targeting import check_compile_for
from explorer.compile.caller_context import CallerContext, bind_context
from explorer.cost.catalog.names import get_target
from explorer.errors import InputError, TargetError, WorkloadError, choices
from explorer.layout_search.branch_and_bound import BranchAndBound
from explorer.layout_search.cluster import make_runner
from explorer.layout_search.confirm import screening_for
from explorer.layout_search.connect import PROBE_TIMEOUT_S
from explorer.layout_search.pipeline import DEFAULT_MAX_MICROBATCHES, MICROBATCHES
from explorer.layout_search.pipeline_search import PipelineSearch
from explorer.layout_search.result import Progress, SearchPhase, SearchResult, SearchSpace
from explorer.layout_search.space import (
    FunctionProblem,
    Problem,
    WorkloadProblem,
    check_names,
    check_replaceable,
    check_tensors,
    enumerate_space,
    mesh_factorisations,
)
from explorer.layout_search.state import CompileSettings, SearchState
from explorer.spec.bounds import show
from explorer.spec.mesh import MeshSpec
from explorer.spec.tensor import TensorSpec
from explorer.workloads.registry import get_workload


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
            inputs, the mesh, target, mapping, partitioner, timeout and compile_for (its
            layout is what the search varies, so its specs, preset and rules are not used).
        mesh: the mesh axes and sizes, e.g. "data=2,model=4".
        target: the hardware to predict on (see explorer.targets()); `mapping` places mesh
            axes on its links.
        space: "rules" (a workload's default: one mesh axis or none per logical name in
            `names`, default every name it uses), "specs" (a function's default: every spec of
            the input tensors in `tensors`, default all; the others keep theirs) or "pipeline"
            (the pipeline workload's default: stages, cuts and microbatches).
        mesh_shapes: also try every other factorisation of the device count into the mesh's
            axes (kept fixed when a `mapping` is given).
        budget_s: stop starting compiles after this many seconds; what is left is counted as
            not evaluated.
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
            installed: a rules or specs search screens the candidates on fake CPU devices,
            priced on the target, or, where CPU compiles cannot screen them in the budget or
            are no faster, by an estimate from the traced program with no compile; then
            compiles the best 3 (with the estimate, while the budget lasts and they improve)
            again with the target's own compiler, which ranks them (each Candidate's
            `compiled_by` says whose numbers it holds; `stats.confirmed` counts them); a
            pipeline search compiles with the target's compiler throughout. "cpu" compiles
            every candidate on fake CPU devices (faster, approximate), with no confirmation.

    Returns:
        A SearchResult: candidates ranked best first, the Pareto front of time against memory,
        why the winner beats the runner-up, and the counts (docs/search.md).
    """
    started = time.perf_counter()
    if isinstance(program, Request):
        program, args, mesh, target, mapping, params, partitioner, timeout, compile_for = (
            _request_fields(program, args, mesh, target, mapping, params))
    if callable(program) and not isinstance(program, str):
        # Each candidate traces the function again: under the contexts of this call.
        program = bind_context(program)
    problem = _problem(program, args, params)
    mesh_spec = check_mesh(mesh)
    _check_target(target, mapping, mesh_spec)
    partitioner = check_partitioner(partitioner)
    node_timeout = _check_node_timeout(node_timeout, cluster)
    settings = CompileSettings(target, mapping, partitioner, check_timeout(timeout),
                               check_compile_for(compile_for), context=CallerContext.here())
    prune = check_flag(prune, "prune")
    mesh_shapes = check_flag(mesh_shapes, "mesh_shapes")
    budget_s = _check_budget(budget_s)
    _check_callbacks(cancel, progress)
    chosen = _check_space(space, problem)
    verify = _check_verify(verify)
    state = SearchState(started, budget_s=budget_s, cancel=cancel, progress=progress,
                        prune=prune, patience=_check_patience(patience))
    where = partial(_runner, cluster, pool, node_timeout)
    if chosen is SearchSpace.PIPELINE:
        return _pipeline_search(problem, mesh_spec, settings, state, where, verify,
                                max_microbatches, names=names, tensors=tensors, mapping=mapping)
    return _branch_and_bound(problem, chosen, mesh_spec, settings, state, where, names, tensors,
                             max_microbatches, vary_mesh=mesh_shapes and mapping is None)


def _request_fields(request: Request, args: tuple, mesh, target, mapping, params) -> tuple:
    """What search takes from a Request in place of its arguments: the program and its
    arguments (a workload's name, or a function and its inputs), params, mesh, target,
    mapping, partitioner, timeout and compile_for; its layout is what the search varies."""
    if args or any(v is not None for v in (mesh, target, mapping, params)):
        raise InputError("search(request, ...) takes the program, mesh, target and mapping "
                         "from the Request; give only the search's own options")
    r = request
    program, args = (r.workload, ()) if r.fn is None else (r.fn, r.planned.inputs)
    params = r.params if r.fn is None else None
    return (program, args, r.planned.mesh, r.target, r.mapping, params, r.partitioner,
            r.timeout, r.compile_for)


# Opens where the candidates compile (_runner), once every argument has been checked.
_Where = Callable[[], AbstractContextManager[Any]]


def _pipeline_search(problem: Problem, mesh: MeshSpec, settings: CompileSettings,
                     state: SearchState, where: _Where, verify: int, max_microbatches,
                     **intra_options) -> SearchResult:
    """The inter-operator search of the pipeline workload (pipeline_search.py), which refuses
    the options of the intra-operator searches (`intra_options`)."""
    limit = _check_microbatches(max_microbatches)
    _check_pipeline_options(**intra_options)
    with where() as runner:
        return PipelineSearch(problem, mesh, settings, state, runner, limit, verify).run()


def _branch_and_bound(problem: Problem, space: SearchSpace, mesh: MeshSpec,
                      settings: CompileSettings, state: SearchState, where: _Where, names,
                      tensors, max_microbatches, vary_mesh: bool) -> SearchResult:
    """A rules or specs search: enumerate the candidates (over the other factorisations of the
    mesh too, with `vary_mesh`), then the branch and bound over them (branch_and_bound.py)."""
    if max_microbatches is not None:
        raise InputError("max_microbatches applies to the pipeline search (space='pipeline')")
    searched_names, searched_tensors = _searched(problem, space, names, tensors)
    if isinstance(problem, FunctionProblem):
        check_inputs(problem.inputs, mesh)
    meshes = mesh_factorisations(mesh, vary_mesh)
    state.report(SearchPhase.ENUMERATE)
    found = enumerate_space(problem, meshes, space, searched_names, searched_tensors,
                            state.out_of_time)
    state.should_stop()       # records a cancel or a budget that cut the enumeration short
    with where() as runner:
        return BranchAndBound(problem, space, found, settings, state, runner,
                              screening_for(settings, mesh)).run()


@contextmanager
def _runner(cluster: str | None, pool, node_timeout: float):
    """Where the candidates compile (cluster.py), closed when the search ends."""
    runner = make_runner(cluster, pool, node_timeout=node_timeout)
    try:
        yield runner
    finally:
        runner.close()


# ---------------------------------------------------------------------------------------------
# Checks.

def _check_node_timeout(node_timeout, cluster: str | None) -> float:
    checked = check_timeout(node_timeout, "node_timeout")
    if checked is not None and cluster is None:
        raise InputError(f"node_timeout={show(node_timeout)} applies to a search on a Ray "
                         "cluster; give cluster= as well (e.g. cluster='127.0.0.1:6379'), or "
                         "leave node_timeout out")
    return PROBE_TIMEOUT_S if checked is None else checked


def _check_target(target, mapping, mesh: MeshSpec) -> None:
    if target is None:
        raise TargetError("a search ranks by predicted step time, which needs a target; "
                          "choose one of explorer.targets() (e.g. target='h100-8')")
    check_target(target, mapping, mesh)
    if get_target(target).chip.peak_flops == {} or get_target(target).family == "cpu":
        raise TargetError(f"target {target!r} has no sourced speeds, so nothing can be "
                          "ranked on it; choose a GPU or TPU target (see explorer.targets())",
                          target=target)


def _check_budget(budget_s) -> float | None:
    if budget_s is None:
        return None
    if isinstance(budget_s, bool) or not isinstance(budget_s, int | float) \
            or not math.isfinite(budget_s) or budget_s <= 0:
        raise InputError(f"budget_s={show(budget_s)} is not a positive number of seconds; "
                         "pass e.g. budget_s=60, or None for no limit")
    return float(budget_s)


def _check_microbatches(limit) -> int:
    if limit is None:
        return DEFAULT_MAX_MICROBATCHES
    if isinstance(limit, bool) or not isinstance(limit, int) \
            or not 1 <= limit <= MICROBATCHES.high:
        raise InputError(f"max_microbatches={show(limit)} is not a whole number from 1 to "
                         f"{MICROBATCHES.high}")
    return limit


def _check_space(space, problem: Problem) -> SearchSpace:
    is_pipeline = isinstance(problem, WorkloadProblem) and problem.name == "pipeline"
    has_rules = isinstance(problem, WorkloadProblem) and bool(problem.logical)
    if space is None:
        if is_pipeline:
            return SearchSpace.PIPELINE
        return SearchSpace.RULES if has_rules else SearchSpace.SPECS
    codes = [s.value for s in SearchSpace]
    if not isinstance(space, str) or space not in codes:
        raise InputError(f"space {show(space)} is not one of {choices(codes)}")
    if space == SearchSpace.PIPELINE and not is_pipeline:
        raise InputError(f"space 'pipeline' chooses the stages of workload 'pipeline', not of "
                         f"{problem.name!r}; use space 'rules' or 'specs'")
    if space == SearchSpace.RULES and not has_rules:
        raise InputError(f"{problem.name!r} names no logical dimensions, so it has no rules "
                         "to search; use space 'specs'")
    return SearchSpace(space)


def _problem(program, args: tuple, params: Mapping | None) -> Problem:
    """What is searched: a built-in workload by name (its params resolved), or a function and
    its arguments."""
    if isinstance(program, str):
        workload = get_workload(program)
        if args:
            raise WorkloadError(f"search of workload {program!r} takes no positional "
                                f"arguments (got {len(args)}); give its params as params={{...}}")
        return WorkloadProblem(workload, workload.resolve(params))
    check_function(program)
    if params is not None:
        raise InputError("params are a built-in workload's; a function's sizes are its "
                         "TensorSpecs' shapes")
    # Arrays and ShapeDtypeStructs become named TensorSpecs; the user's own pytree classes
    # (an Equinox module) go flat, since the search rebuilds the inputs with new specs.
    program, args = flat_call(program, named_inputs(program, args))
    check_replaceable(args)
    return FunctionProblem(program, args, tensor_leaves(args))


def _check_callbacks(cancel, progress) -> None:
    if cancel is not None and not callable(getattr(cancel, "is_set", None)):
        raise InputError(f"cancel {show(cancel)} is not a threading.Event (anything with "
                         "is_set())")
    if progress is not None and not callable(progress):
        raise InputError(f"progress {show(progress)} is not a function of a Progress")


def _check_verify(verify) -> int:
    if isinstance(verify, bool) or not isinstance(verify, int) or not 1 <= verify <= 100:
        raise InputError(f"verify={show(verify)} is not a whole number from 1 to 100")
    return verify


def _check_patience(patience) -> int | None:
    if patience is not None and (isinstance(patience, bool) or not isinstance(patience, int)
                                 or patience < 1):
        raise InputError(f"patience={show(patience)} is not a whole number >= 1 (compiles "
                         "without improvement before the search stops), or None")
    return patience


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
