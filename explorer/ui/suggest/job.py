"""What a search of the app's program is, from the Suggest tab's text: the budget and cluster
boxes read (`parse_budget`, `parse_cluster`), the spaces and choices the program offers
(`spaces_of`, `choices_of`), the search itself (`SearchJob`, made by `make_job` from the app's
checked request at Start), and a candidate's layout read back: its specs (`candidate_specs`)
and whether it is the app's layout now (`current_candidate`). No widgets."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from explorer.errors import ExplorerError, InputError, TargetError, choices
from explorer.layout_search.connect import check_address
from explorer.layout_search.result import Candidate, SearchResult
from explorer.layout_search.space import WorkloadProblem
from explorer.spec.bounds import show
from explorer.spec.layout import tiling_from_spec
from explorer.spec.tensor import Spec, normalize_spec
from explorer.ui.sources import AppRequest, FunctionSource, Source, WorkloadSource

DEFAULT_BUDGET_S = "60"


def parse_budget(text: str) -> float | None:
    """The budget box's text as seconds; empty means no limit. Nothing is evaluated."""
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"budget {text!r} is not a positive number of seconds; type e.g. "
                         f"{DEFAULT_BUDGET_S}, or leave it empty for no limit")
    return value


def parse_cluster(text: str) -> str | None:
    """The cluster box's text as explorer.search's `cluster=`: empty means this machine's
    worker pool; anything else must be a Ray address (one InputError naming it otherwise)."""
    if not text.strip():
        return None
    return check_address(text, instead="leave the box empty to compile on this machine")

def spaces_of(source: Source) -> list[str]:
    """The spaces explorer.search offers for the source's program."""
    if isinstance(source, WorkloadSource):
        workload = source.workload
        out = ["rules"] if workload.logical is not None else []
        out.append("specs")
        if workload.name == "pipeline":
            out.insert(0, "pipeline")
        return out
    return ["specs"]


def choices_of(source: Source, space: str) -> list[str]:
    """What a search of `space` chooses among: logical names (rules) or input tensors
    (specs); nothing for the pipeline, which chooses its stages itself."""
    if space == "rules" and isinstance(source, WorkloadSource):
        return WorkloadProblem(source.workload, source.resolved()).names()
    if space == "specs":
        return [t.name for t in source.tensors()]
    return []


@dataclass(frozen=True)
class SearchJob:
    """One search: the program and the app's checked request at Start, and the tab's choices.

    `program` is a workload's name or the user's function; `args` the function's arguments
    with the specs the app had (tensors not searched keep them)."""

    program: str | Callable
    args: tuple
    request: AppRequest
    space: str
    chosen: tuple[str, ...]           # names (rules) or tensors (specs); () for all
    mesh_shapes: bool
    budget_s: float | None
    title: str                        # the program as the app names it
    cluster: str | None = None        # a Ray cluster's address; None: this machine's pool

    @property
    def workload(self) -> str | None:
        return self.program if isinstance(self.program, str) else None

    def kwargs(self) -> dict:
        """explorer.search's keyword arguments for this job."""
        r = self.request
        kw = dict(mesh=r.mesh, target=r.target, mapping=r.mapping, partitioner=r.partitioner,
                  space=self.space, mesh_shapes=self.mesh_shapes, budget_s=self.budget_s,
                  cluster=self.cluster, compile_for=r.compile_for)
        if self.workload is not None:
            kw["params"] = dict(r.params)
        if self.chosen:
            kw["names" if self.space == "rules" else "tensors"] = list(self.chosen)
        return kw

    def describe(self) -> str:
        r = self.request
        what = {"rules": "logical names", "specs": "tensors"}.get(self.space)
        over = (f" over {', '.join(self.chosen) if self.chosen else 'all ' + what}" if what
                else "")
        shapes = (f" and the other shapes of its {r.mesh.device_count} devices"
                  if self.mesh_shapes and self.space != "pipeline" else "")
        budget = (f"budget {self.budget_s:g} s" if self.budget_s is not None
                  else "no time budget")
        where = (f"compiled on the Ray cluster at {self.cluster}" if self.cluster is not None
                 else "compiled on this machine")
        return (f"{self.title}: {self.space}{over}, on mesh {r.mesh.text()}{shapes}, ranked "
                f"for {r.target} ({r.partitioner}); {budget}; {where}")


def make_job(source: Source, request: AppRequest, space: str, chosen, mesh_shapes: bool,
             budget_s: float | None, cluster: str | None = None) -> SearchJob:
    """A search of the app's program for `request` (compiled on the Ray cluster at `cluster`,
    or on this machine), or an ExplorerError saying what is missing (a target to rank on, a
    space the program has)."""
    if request.target is None:
        why = f" ({request.unavailable})" if request.unavailable else ""
        raise TargetError("a search ranks layouts by their predicted step time, which needs a "
                          f"target: pick one under target in the sidebar{why}")
    offered = spaces_of(source)
    if space not in offered:
        raise InputError(f"space {show(space)} is not one this program offers; choose "
                         f"{choices(offered)}")
    chosen = tuple(chosen)
    if isinstance(source, WorkloadSource):
        return SearchJob(source.workload_w.value, (), request, space, chosen, mesh_shapes,
                         budget_s, source.title, cluster)
    if isinstance(source, FunctionSource):
        return SearchJob(source.fn, source.inputs(request.specs), request, space, chosen,
                         mesh_shapes, budget_s, f"{source.title}()", cluster)
    raise InputError(f"the Suggest tab searches built-in workloads and functions, not a "
                     f"{type(source).__name__}")


def candidate_specs(candidate: Candidate) -> dict[str, Spec]:
    """Every input's spec of a candidate, read back from its spec texts."""
    return {name: normalize_spec(text, tensor=name) for name, text in candidate.specs.items()}


def current_candidate(result: SearchResult, request: AppRequest | None,
                      shapes: Mapping[str, tuple[int, ...]]) -> int | None:
    """The index of the first candidate that lays out every input as the app's `request` does
    (the same devices hold the same blocks, on whatever mesh shape: the search keeps one of
    equivalent layouts), with the params a pipeline plan chose; None when none does. `shapes`:
    each input's shape."""
    if request is None:
        return None

    def tilings(mesh, specs):
        return {n: tiling_from_spec(specs[n], mesh.names, mesh.sizes, len(shape))
                for n, shape in shapes.items()}

    try:
        now = tilings(request.mesh, request.specs)
    except (ExplorerError, KeyError):
        return None
    for i, c in enumerate(result.candidates):
        if c.mesh.device_count != request.mesh.device_count or set(c.specs) != set(now):
            continue
        if any(request.params.get(k) != v for k, v in c.params.items()):
            continue
        try:
            if tilings(c.mesh, candidate_specs(c)) == now:
                return i
        except ExplorerError:
            continue
    return None
