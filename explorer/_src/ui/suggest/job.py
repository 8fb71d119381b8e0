"""What a search of the app's program is, from the Suggest tab's controls: the budget box read
(`parse_budget`), the clusters the server offers (`cluster_options`, `chosen_cluster`), the
spaces and choices the program offers (`spaces_of`, `choices_of`), the search itself
(`SearchJob`, made by `make_job` from the app's checked request at Start: the explorer Request
the app compiles, and the search's options beside it), and a candidate's layout read back: its
specs (`candidate_specs`) and whether it is the app's layout now (`current_candidate`). No
widgets."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from explorer._src.api.analysis_request import Request
from explorer._src.errors import ExplorerError, InputError, TargetError, choices
from explorer._src.layout_search.connect import CLUSTERS_ENV, configured_clusters
from explorer._src.layout_search.options import SearchOptions
from explorer._src.layout_search.result import Candidate, SearchResult, SearchSpace
from explorer._src.layout_search.space import WorkloadProblem
from explorer._src.spec.bounds import show
from explorer._src.spec.layout import tiling_from_spec
from explorer._src.spec.tensor import Spec, normalize_spec
from explorer._src.ui.sources import AppRequest, FunctionSource, Source, WorkloadSource

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


THIS_MACHINE = "this machine"


def cluster_options() -> list[tuple[str, str | None]]:
    """The cluster choice's options: this machine's worker pool (None), then each Ray cluster
    the server's configuration lists (`configured_clusters`, CLUSTERS_ENV). A page picks
    among them and never types an address."""
    return [(THIS_MACHINE, None), *((address, address) for address in configured_clusters())]


def chosen_cluster(value: str | None) -> str | None:
    """The choice's value as explorer.search's `cluster=`, checked again against the server's
    list at Start (the list may have changed, and a value from a page is never trusted): an
    address the server does not offer is an InputError naming it and the choices."""
    if value is None:
        return None
    offered = configured_clusters()
    if value not in offered:
        raise InputError(f"cluster {show(value)} is not one this server offers; choose "
                         f"{choices((THIS_MACHINE, *offered))} (the server's operator lists "
                         f"clusters in {CLUSTERS_ENV})")
    return value

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
    """One search the tab ran: the app's checked request at Start, whose explorer Request
    (`analysis`, made by the sidebar) is what the search ships, its layout what varies; the
    search's options beside it; and the program's title. No request of its own: it holds the
    two the search takes (explorer._src.layout_search.search.search_request), and what the tab says
    and Apply reads with them (the sidebar's Apply: the workload, the params the app had, the
    space)."""

    request: AppRequest
    options: SearchOptions
    title: str                        # the program as the app names it

    @property
    def analysis(self) -> Request:
        """The explorer Request searched (make_job makes sure there is one)."""
        assert self.request.analysis is not None
        return self.request.analysis

    @property
    def workload(self) -> str | None:
        return self.analysis.workload

    @property
    def space(self) -> SearchSpace:
        assert self.options.space is not None        # make_job chooses one
        return self.options.space

    def describe(self) -> str:
        r, o = self.request, self.options
        what = {"rules": "logical names", "specs": "tensors"}.get(self.space)
        chosen = o.names if self.space == "rules" else o.tensors
        over = (f" over {', '.join(chosen) if chosen else 'all ' + what}" if what else "")
        shapes = (f" and the other shapes of its {r.mesh.device_count} devices"
                  if o.mesh_shapes and self.space != "pipeline" else "")
        budget = (f"budget {o.budget_s:g} s" if o.budget_s is not None
                  else "no time budget")
        where = (f"compiled on the Ray cluster at {o.cluster}" if o.cluster is not None
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
    if isinstance(source, WorkloadSource):
        title = source.title
    elif isinstance(source, FunctionSource):
        title = f"{source.title}()"
    else:
        raise InputError(f"the Suggest tab searches built-in workloads and functions, not a "
                         f"{type(source).__name__}")
    chosen = list(chosen) or None
    options = SearchOptions(space=space, names=chosen if space == "rules" else None,
                            tensors=chosen if space != "rules" else None,
                            mesh_shapes=mesh_shapes, budget_s=budget_s, cluster=cluster)
    if request.analysis is None:          # the sidebar makes one with every request it checks
        request = replace(request, analysis=source.analysis(request))
    return SearchJob(request, options, title)


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
