"""The Suggest tab: search the app's program for the fastest layout on its target, show the
ranked candidates, and load one into the editors.

The search is explorer.search, run on a thread of its own so that the kernel stays responsive;
it reports through its progress callback and stops through its cancel event, and the widget
updates it causes are handed to the kernel's event loop (where one runs; in plain Python they
are made on the search's thread). A search runs against the app's request as it was when Start
was pressed: edits made meanwhile change neither the search nor its results, and the tab says
what was searched. Apply loads a candidate's mesh, rules or specs (and the workload params it
was searched with) into the editors, which then recompile as after any edit.

The candidates compile on this machine's worker pool, or, with an address in the cluster box, as
Ray tasks on that cluster (explorer.search's `cluster=`, the same address rule and the same
search); progress and cancel work alike on both, and the results say where they were compiled.
"""

from __future__ import annotations

import html
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import ipywidgets as w
import plotly.graph_objects as go

from explorer.errors import ExplorerError, InputError, TargetError, choices
from explorer.layout_search.connect import check_address
from explorer.layout_search.result import (
    Candidate,
    CandidateStatus,
    CompiledBy,
    Progress,
    SearchPhase,
    SearchResult,
    SearchStats,
    memory_text,
)
from explorer.layout_search.search import search
from explorer.layout_search.space import WorkloadProblem
from explorer.spec.bounds import show
from explorer.spec.layout import tiling_from_spec
from explorer.spec.tensor import Spec, normalize_spec
from explorer.ui.background import BackgroundTab
from explorer.ui.figure import FigureWidget, keep_state
from explorer.ui.memory import binary_ticks
from explorer.ui.sources import AppRequest, FunctionSource, Source, WorkloadSource
from explorer.units import format_bytes, format_seconds

SPACE_LABELS = {"rules": "rules (logical names → mesh axes)",
                "specs": "specs (every spec of chosen tensors)",
                "pipeline": "pipeline (stages, cuts, microbatches)"}
DEFAULT_BUDGET_S = "60"
MAX_ROWS = 100                 # table rows drawn; the rest are counted

CANDIDATE_COLOUR = "#94a3b8"   # slate-400: a compiled candidate
FRONT_COLOUR = "#2563eb"       # blue-600: the Pareto front
WINNER_COLOUR = "#f59e0b"      # amber-500: the winner
NO_FIT_COLOUR = "#dc2626"      # red-600: does not fit the chip's memory

_CSS = """<style>
.explorer-suggest-table .explorer-table-wrap { max-height: 330px; overflow-y: auto; }
.explorer-suggest-table .explorer-table th { position: sticky; top: 0; background: #fff; }
.explorer-suggest-table td.explorer-num { text-align: right;
  font-variant-numeric: tabular-nums; }
.explorer-suggest-table tr.explorer-winner { background: #fef3c7; }
.explorer-suggest-table td.explorer-layout { white-space: normal; overflow-wrap: anywhere;
  min-width: 200px; }
.explorer-suggest-table tr.explorer-current td { border-top: 2px solid #2563eb;
  border-bottom: 2px solid #2563eb; }
.explorer-current-badge { background: #dbeafe; color: #1e3a8a; border-radius: 8px;
  padding: 0 6px; font-size: 11px; margin-left: 6px; white-space: nowrap; }
.explorer-suggest-why ul { margin: 2px 0 0 0; padding-left: 18px; font-size: 12px; }
.explorer-suggest-why li, .explorer-suggest-why p { overflow-wrap: break-word;
  word-break: normal; }
.explorer-doc summary { cursor: pointer; color: #1d4ed8; text-decoration: underline;
  display: inline; }
.explorer-doc-body { max-height: 420px; overflow: auto; border: 1px solid #ddd;
  padding: 4px 10px; font-size: 12px; margin-top: 4px; }
.explorer-doc-body pre { white-space: pre-wrap; word-break: normal; }
.explorer-suggest-table tr.explorer-failed td { color: #b00020; }
.explorer-suggest-table tr.explorer-no-fit td { color: #9a3412; }
.explorer-suggest-progress { font-size: 12px; }
.explorer-suggest .widget-html-content { line-height: 1.35; }
.explorer-suggest-table small.explorer-bounds { color: #555; display: block; }
</style>"""


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


def where_text(stats: SearchStats) -> str:
    """Where a search compiled its candidates: 'on the Ray cluster at 127.0.0.1:6390, 2 nodes,
    4 CPUs', or 'on this machine's worker pool'."""
    if stats.cluster is None:
        return "on this machine's worker pool"
    size = f", {stats.cluster_size.text()}" if stats.cluster_size is not None else ""
    return f"on the Ray cluster at {stats.cluster}{size}"


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


# ------------------------------------------------------------------------------- drawing

def progress_text(p: Progress) -> str:
    """'evaluated k of N, best so far: <label> <time>', and what is compiling."""
    if p.phase == "enumerate":
        return "enumerating the space…"
    best = (f"best so far: <b>{html.escape(p.best)}</b> {format_seconds(p.best_seconds)}"
            if p.best_seconds is not None else "no candidate timed yet")
    # The screen's best are compiled again by the target's own compiler at the end: the search
    # is then confirming, not looking further.
    doing = {SearchPhase.CONFIRM: "confirming",
             SearchPhase.ESTIMATE: "estimating (no compile)"}.get(p.phase, "compiling")
    target = " with the target's compiler" if p.phase == SearchPhase.CONFIRM else ""
    now = (f" · {doing} <code>{html.escape(p.current)}</code>{target}"
           if p.current and p.phase != "done" else "")
    extra = ", ".join(part for part in (f"{p.estimated} estimated" if p.estimated else "",
                                        f"{p.pruned} pruned" if p.pruned else "",
                                        f"{p.failed} failed" if p.failed else "") if part)
    return (f"evaluated {p.done} of {p.total}{f' ({extra})' if extra else ''}, {best}{now} · "
            f"{p.elapsed_s:.1f} s")


def _status_cell(c: Candidate) -> str:
    if c.status is CandidateStatus.FAILED:
        first = c.error.splitlines()[0] if c.error else "failed"
        return (f"<td title='{html.escape(c.error, quote=True)}'>failed: "
                f"{html.escape(first[:160])}</td>")
    if c.status is CandidateStatus.DOES_NOT_FIT:
        return "<td>does not fit the chip's memory</td>"
    if c.status is CandidateStatus.ESTIMATED:
        how = ("from the traced program" if c.compiled_by is CompiledBy.ESTIMATE
               else "by the stage model")
        return f"<td title='estimated {how}, not compiled'>estimated</td>"
    if c.retries:
        return (f"<td>ok (sent again {c.retries}× after its Ray worker was lost)</td>")
    return "<td>ok</td>"


def _bounds(c: Candidate) -> str:
    """The estimate's bounds on the step: communication fully overlapped, and not at all."""
    if c.lower_seconds is None and c.upper_seconds is None:
        return ""
    return (f"<small class='explorer-bounds'>bounds {format_seconds(c.lower_seconds)} – "
            f"{format_seconds(c.upper_seconds)}</small>")


FRONT_NOTE = ("<b>Pareto front</b> (●): no other candidate is both faster and smaller in "
              "memory per device; the plot below joins them.")


def results_html(result: SearchResult, current: int | None = None) -> str:
    """The candidates best first: layout, predicted step and its bounds, memory and collective
    bytes per device, whether it is on the Pareto front, and its status (a failure's error).
    Candidate number `current` (0-based) is marked as the app's layout now."""
    front = {id(c) for c in result.pareto}
    rows = []
    for i, c in enumerate(result.candidates[:MAX_ROWS], 1):
        cls = ("explorer-winner" if c is result.best and i == 1 else
               "explorer-failed" if c.status is CandidateStatus.FAILED else
               "explorer-no-fit" if c.status is CandidateStatus.DOES_NOT_FIT else "")
        badge = ""
        if current == i - 1:
            cls += " explorer-current"
            badge = "<span class='explorer-current-badge'>◀ the sidebar's layout now</span>"
        source = f" <small>({html.escape(c.time_source)})</small>" if c.time_source else ""
        time = format_seconds(c.seconds) if c.seconds is not None else "—"
        mem = memory_text(c, missing="—")
        coll = format_bytes(c.collective_bytes) if c.collective_bytes is not None else "—"
        rows.append(
            f"<tr class='{cls}' data-label='{html.escape(c.label, quote=True)}'>"
            f"<td class='explorer-num'>{i}</td><td class='explorer-layout'><code>"
            f"{html.escape(c.label)}</code>{badge}</td>"
            f"<td class='explorer-num'>{time}{source}{_bounds(c)}</td>"
            f"<td class='explorer-num'>{mem}</td><td class='explorer-num'>{coll}</td>"
            f"<td>{'●' if id(c) in front else ''}</td>{_status_cell(c)}</tr>")
    more = len(result.candidates) - MAX_ROWS
    tail = (f"<p class='explorer-note'>… {more} more candidates, ranked after these.</p>"
            if more > 0 else "")
    if current is not None and current >= MAX_ROWS:
        tail += (f"<p class='explorer-note'>The sidebar's layout now is #{current + 1}, "
                 "beyond the rows shown.</p>")
    elif current is None:
        tail += ("<p class='explorer-note'>The sidebar's layout now is not in the table: the "
                 "search pruned it, did not reach it, or it is outside the space searched.</p>")
    where = (f"<p class='explorer-note explorer-where'>Compiled "
             f"{html.escape(where_text(result.stats))}.</p>")
    if not result.candidates:
        return f"{where}<p>No candidate was evaluated (the search stopped before the first).</p>"
    return (f"{where}<div class='explorer-table-wrap'><table class='explorer-table'><tr><th>#</th>"
            "<th>layout (mesh: rules or specs)</th>"
            "<th title='bounds: communication fully overlapped – nothing overlapped'>"
            "predicted step</th><th>memory / device</th><th>collectives / device</th>"
            "<th title='on the Pareto front: no other candidate is both faster and smaller'>"
            "Pareto front</th><th>status</th></tr>"
            f"{''.join(rows)}</table></div><p class='explorer-note'>{FRONT_NOTE}</p>{tail}")


def summary_html(job: SearchJob, result: SearchResult) -> str:
    s = result.stats
    stopped = {"budget": "the time budget ran out, so the winner is the best found, not "
                         "proven best",
               "cancelled": "cancelled, so the winner is the best found before that",
               "patience": "stopped after compiles that did not improve the best"}.get(s.stopped)
    # The result's own headline, as the CLI prints it: it names no best from a handful of
    # candidates, and says which compiler the best's numbers come from.
    head = f"<b>{html.escape(result.headline())}</b>"
    return (f"<p>{head}<br><small>Searched {html.escape(job.describe())}. Edits made since Start "
            "do not change this result.</small></p>"
            f"<p class='explorer-note'>{html.escape(s.text())}."
            f"{' <b>' + html.escape(stopped) + '</b>.' if stopped else ''} Candidates pruned "
            "by a bound (shown not to win without compiling) or not evaluated are counted here, "
            "not listed.</p>")


def comparison_html(comparison) -> str:
    """Why the winner beats the runner-up: the first line as a sentence, the rest as a list
    (in a proportional font, wrapped at spaces only)."""
    if comparison is None:
        return ("<p class='explorer-note'>No comparison: fewer than two candidates were timed, "
                "or none fits.</p>")
    head, *rest = comparison.text.splitlines()
    items = "".join(f"<li>{html.escape(line.strip())}</li>" for line in rest if line.strip())
    return (f"<b>Why the winner beats the runner-up</b><p>{html.escape(head)}</p>"
            f"<ul>{items}</ul>")


def doc_html(name: str = "search.md") -> str:
    """docs/`name` as a link that opens it in the tab (the page may not reach the files the
    kernel can): its markdown, where this copy of the project has it."""
    path = Path(__file__).resolve().parents[3] / "docs" / name
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return f"<code>docs/{html.escape(name)}</code> in the project's repository"
    return (f"<details class='explorer-doc'><summary>docs/{html.escape(name)}</summary>"
            f"<div class='explorer-doc-body'><pre>{html.escape(text)}</pre></div></details>")


def pareto_figure(result: SearchResult) -> go.FigureWidget:
    """Predicted step time against memory per device, one point per compiled candidate; the
    Pareto front joined, the winner starred, candidates that do not fit crossed."""
    timed = [c for c in result.candidates
             if c.seconds is not None and c.memory_bytes is not None]
    front = [c for c in result.pareto if c.memory_bytes is not None]
    best = result.best
    fig = FigureWidget()

    def add(cands, name, colour, symbol, size, mode="markers"):
        if not cands:
            return
        # Candidates of the same time and memory (often one program on mirrored mesh shapes,
        # 2x4 and 4x2) are one point, whose hover names them all.
        same: dict[tuple, list[Candidate]] = {}
        for c in cands:
            same.setdefault((c.seconds, c.memory_bytes), []).append(c)
        cands = [group[0] for group in same.values()]
        labels = ["<br>".join(html.escape(x.label) for x in group) for group in same.values()]
        fig.add_scatter(
            x=[c.seconds for c in cands], y=[c.memory_bytes for c in cands], name=name,
            mode=mode, marker=dict(color=colour, symbol=symbol, size=size,
                                   line=dict(color="#1f2937", width=1)),
            line=dict(color=colour, width=2),
            customdata=[[label, format_seconds(c.seconds), format_bytes(c.memory_bytes),
                         format_bytes(c.collective_bytes)] for c, label in zip(cands, labels,
                                                                             strict=True)],
            hovertemplate=("<b>%{customdata[0]}</b><br>predicted step %{customdata[1]}<br>"
                           "memory per device %{customdata[2]}<br>collectives per device "
                           "%{customdata[3]}<extra>" + name + "</extra>"))

    on_front = {id(c) for c in front}
    fits = [c for c in timed if c.status is not CandidateStatus.DOES_NOT_FIT]
    add([c for c in fits if id(c) not in on_front], "other candidates", CANDIDATE_COLOUR,
        "circle", 8)
    add([c for c in timed if c.status is CandidateStatus.DOES_NOT_FIT],
        "does not fit the chip's memory", NO_FIT_COLOUR, "x", 9)
    add(sorted(front, key=lambda c: c.seconds), "Pareto front (nothing is both faster and "
        "smaller)", FRONT_COLOUR, "circle", 10, mode="lines+markers")
    if best is not None and best.memory_bytes is not None:
        add([best], "winner (fastest that fits)", WINNER_COLOUR, "star", 18)
    times = [c.seconds for c in timed if c.seconds > 0]
    log_x = bool(times) and max(times) / min(times) > 20
    top = max([c.memory_bytes for c in timed] or [1]) * 1.1
    ticks = binary_ticks(top)
    fig.update_layout(
        title=f"predicted step time against memory per device on {result.target}: "
              f"{len(timed)} compiled candidate{'s' if len(timed) != 1 else ''} "
              "(lower left is better)",
        height=470, width=820, margin=dict(l=90, r=20, t=50, b=90),
        xaxis=dict(title="predicted step time" + (" (log scale)" if log_x else ""),
                   type="log" if log_x else "linear", exponentformat="SI", ticksuffix="s",
                   rangemode="tozero" if not log_x else "normal"),
        yaxis=dict(title="memory per device", range=[0, top], tickvals=ticks,
                   ticktext=[format_bytes(t) if t else "0" for t in ticks]),
        legend=dict(orientation="h", x=0, y=-0.2, yanchor="top", font=dict(size=11)))
    keep_state(fig)
    return fig


# ------------------------------------------------------------------------------- the view

class SuggestView(BackgroundTab):
    """Controls (what to search, a time budget, Start and Cancel), a progress bar, and the
    finished search: its table, its Pareto plot, why the winner wins, and Apply.

    `snapshot()` gives the app's source and its checked request now (or raises an
    ExplorerError saying what to fix); `apply(job, candidate)` loads a candidate into the
    editors. `pool` is the app's compile pool."""

    what = "the Suggest tab"

    def __init__(self, source: Callable[[], Source],
                 snapshot: Callable[[], tuple[Source, AppRequest]],
                 apply: Callable[[SearchJob, Candidate], None], pool=None,
                 current: Callable[[], AppRequest | None] = lambda: None):
        super().__init__()
        self._source, self._snapshot, self._apply, self.pool = source, snapshot, apply, pool
        self._current = current         # the request the app's result answers now
        self.job: SearchJob | None = None           # the running or last search
        self.result: SearchResult | None = None     # the last finished search's result
        self.result_job: SearchJob | None = None    # ...and the job it answers
        self.progress: Progress | None = None
        self._cancel: threading.Event | None = None

        self.space_w = w.ToggleButtons(options=[], style={"button_width": "240px"})
        self.chosen_w = w.TagsInput(value=[], allowed_tags=[], allow_duplicates=False,
                                    placeholder="all", layout=w.Layout(min_width="300px"))
        self.chosen_label = w.HTML(layout=w.Layout(width="260px"))
        self.shapes_w = w.Checkbox(value=True, indent=False,
                                   description="also try the mesh's other shapes")
        self.budget_w = w.Text(value=DEFAULT_BUDGET_S, description="budget (s)",
                               placeholder="empty: no limit", continuous_update=False,
                               layout=w.Layout(width="190px"))
        self.cluster_w = w.Text(value="", description="cluster",
                                placeholder="empty: this machine", continuous_update=False,
                                layout=w.Layout(width="300px"))
        cluster_note = w.HTML(
            "<span class='explorer-note'>or a Ray cluster's address: the HOST:PORT "
            "<code>ray start --head</code> printed, ray://HOST:PORT, auto (the cluster this "
            "machine is in) or local; its nodes need jax and the cluster extra "
            "(docs/search.md)</span>")
        self.start_w = w.Button(description="Start search", icon="play", button_style="primary",
                                layout=w.Layout(width="140px"))
        self.cancel_w = w.Button(description="Cancel", icon="stop", disabled=True,
                                 layout=w.Layout(width="100px"))
        self.bar = w.IntProgress(value=0, min=0, max=1, bar_style="info",
                                 layout=w.Layout(width="300px", visibility="hidden"))
        self.progress_w = w.HTML()
        self.progress_w.add_class("explorer-suggest-progress")
        self.summary = w.HTML()
        self.pick_w = w.Dropdown(options=[], description="candidate",
                                 layout=w.Layout(width="560px"))
        self.apply_w = w.Button(description="Apply to the editors", icon="check",
                                disabled=True, layout=w.Layout(width="170px"),
                                tooltip="load this candidate's mesh and rules or specs into "
                                        "the sidebar; the app recompiles it")
        self.apply_note = w.HTML()
        self.apply_note.add_class("explorer-note")
        self.apply_box = w.VBox([w.HBox([self.pick_w, self.apply_w]), self.apply_note],
                                layout=w.Layout(display="none"))
        self.table = w.HTML()
        self.table.add_class("explorer-suggest-table")
        self.fig: go.FigureWidget | None = None
        self.plot_box = w.VBox()
        self.why = w.HTML()
        self.why.add_class("explorer-suggest-why")

        self.space_w.observe(self._guard(lambda _: self._space_changed()), "value")
        self.start_w.on_click(self._guard(lambda _: self.start()))
        self.cancel_w.on_click(self._guard(lambda _: self.cancel()))
        self.apply_w.on_click(self._guard(lambda _: self.apply_selected()))
        intro = w.HTML(_CSS + "<div class='explorer-note'>Rank the layouts of this program by "
                       "the step time predicted on the sidebar's target (explorer.search): "
                       "each one compiled, or, where compiles are too slow for the budget, "
                       "estimated from the traced program and the best then compiled by the "
                       "target's compiler. The search runs in the background; it searches the "
                       "sidebar as it is when you press Start. How it works: "
                       f"{doc_html()}</div>")
        self.widget = w.VBox([
            intro, w.HTML("<b>What to search</b>"), self.space_w,
            w.HBox([self.chosen_label, self.chosen_w]), self.shapes_w,
            w.HBox([self.cluster_w, cluster_note]),
            w.HBox([self.budget_w, self.start_w, self.cancel_w]), self.message,
            w.HBox([self.bar, self.progress_w]), self.summary, self.table, self.apply_box,
            self.plot_box, self.why])
        self.widget.add_class("explorer-suggest")
        self.refresh()

    # ------------------------------------------------------------------ controls

    def refresh(self) -> None:
        """Offer the spaces and choices of the app's program now (its workload may have
        changed); the running search and the shown result are left alone."""
        try:
            source = self._source()
            spaces = spaces_of(source)
        except ExplorerError:
            return                   # the sidebar shows the source's error
        options = [(SPACE_LABELS[s], s) for s in spaces]
        if list(self.space_w.options) != options:
            keep = self.space_w.value
            self.space_w.options = options
            self.space_w.value = keep if keep in spaces else spaces[0]
        self._space_changed()
        if self.result is not None:          # the mark follows the sidebar's layout
            self.table.value = results_html(self.result, self._current_index(self.result))

    def _space_changed(self) -> None:
        space = self.space_w.value
        try:
            allowed = choices_of(self._source(), space) if space else []
        except ExplorerError:
            return
        shown = space in ("rules", "specs")
        self.chosen_w.layout.display = self.chosen_label.layout.display = (
            "" if shown else "none")
        self.shapes_w.layout.display = "" if space != "pipeline" else "none"
        if list(self.chosen_w.allowed_tags) != allowed:
            self.chosen_w.value = [t for t in self.chosen_w.value if t in allowed]
            self.chosen_w.allowed_tags = allowed
        what = "logical names" if space == "rules" else "tensors"
        self.chosen_label.value = (f"{what} to search<br><small>empty: all {len(allowed)}"
                                   "</small>")

    def _current_index(self, result: SearchResult) -> int | None:
        """Which candidate of `result` is the app's layout now, if any."""
        try:
            shapes = {t.name: t.shape for t in self._source().tensors()}
        except ExplorerError:
            return None
        return current_candidate(result, self._current(), shapes)

    # ------------------------------------------------------------------ running

    def start(self) -> None:
        """Start a search of the app's program as it is now, unless one runs."""
        if self.running:
            self._say("a search is running; cancel it first")
            return
        self._say("")
        budget = parse_budget(self.budget_w.value)
        cluster = parse_cluster(self.cluster_w.value)
        try:
            source, request = self._snapshot()
        except ExplorerError as e:
            raise InputError(f"fix the sidebar first: {e}") from None
        job = make_job(source, request, self.space_w.value, self.chosen_w.value,
                       self.shapes_w.value, budget, cluster)
        self.job, self.progress = job, None
        self._cancel = cancel = threading.Event()
        self.start_w.disabled, self.cancel_w.disabled = True, False
        self.bar.layout.visibility = "visible"
        self.bar.value, self.bar.max, self.bar.bar_style = 0, 1, "info"
        self.progress_w.value = f"starting: {html.escape(job.describe())}"
        if cluster is not None:      # connecting and the nodes' check come before any compile
            self.progress_w.value += (" · connecting to the cluster and checking that its "
                                      "nodes can compile…")
        self._start_thread(self._run, (job, cancel), "explorer-search")

    def cancel(self) -> None:
        """Stop the running search after the compile in flight; its result so far is shown."""
        if self._cancel is not None and self.running:
            self._cancel.set()
            self.cancel_w.disabled = True
            self.progress_w.value += " · cancelling after the compile in flight…"

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the running search ends (scripts and tests, where no event loop draws
        the results); True when it has."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return not self.running

    def _run(self, job: SearchJob, cancel: threading.Event) -> None:
        """The search's thread: every widget update is posted, never made here directly while
        an event loop runs."""
        def progress(p: Progress):
            self._post(lambda: self._show_progress(job, p))
            return not cancel.is_set()

        try:
            outcome: SearchResult | BaseException = search(
                job.program, *job.args, progress=progress, cancel=cancel, pool=self.pool,
                **job.kwargs())
        except Exception as e:              # shown in the tab by _finish
            outcome = e
        self._post(lambda: self._finish(job, outcome))

    def _show_progress(self, job: SearchJob, p: Progress) -> None:
        if job is not self.job:
            return
        self.progress = p
        self.bar.max = max(p.total, 1)
        self.bar.value = min(p.done, self.bar.max)
        self.progress_w.value = progress_text(p)

    def _finish(self, job: SearchJob, outcome) -> None:
        if job is not self.job:
            return
        self.start_w.disabled, self.cancel_w.disabled = False, True
        if isinstance(outcome, BaseException):
            self.bar.bar_style = "danger"
            self.progress_w.value = "search failed"
            self._say_failure(outcome)
            return
        result: SearchResult = outcome
        self.result, self.result_job = result, job
        s = result.stats
        self.bar.bar_style = "success" if s.stopped == "complete" else "warning"
        # The last progress counts what this search settles (a pipeline's profiles and plans
        # checked; a search's compiled and pruned candidates); the stats, where none came.
        p = self.progress
        done, total = ((p.done, p.total) if p is not None and p.total
                       else (s.distinct - s.not_evaluated, s.distinct))
        self.bar.max = max(total, 1)
        self.bar.value = min(done, self.bar.max)
        # The results first: a page (or a test) that sees "complete" finds the table drawn.
        self._draw(job, result)
        self.progress_w.value = f"{s.stopped}: evaluated {done} of {total} in {s.seconds:.1f} s"

    def _draw(self, job: SearchJob, result: SearchResult) -> None:
        self.summary.value = summary_html(job, result)
        self.table.value = results_html(result, self._current_index(result))
        old, self.fig = self.fig, pareto_figure(result)
        self.plot_box.children = (self.fig,)
        if old is not None:
            old.close()
        self.why.value = comparison_html(result.comparison)
        options = [(f"{i}. {c.label} · {format_seconds(c.seconds)}", i - 1)
                   for i, c in enumerate(result.candidates, 1)
                   if c.status is not CandidateStatus.FAILED][:MAX_ROWS]
        self.pick_w.options = options
        self.pick_w.value = options[0][1] if options else None
        self.apply_w.disabled = not options
        self.apply_box.layout.display = ""
        self.apply_note.value = ("Apply loads the candidate's mesh and its rules or specs (and "
                                 "the workload params it was searched with) into the sidebar, "
                                 "replacing the picks there; the app then recompiles it.")

    # ------------------------------------------------------------------ apply

    def apply_selected(self) -> None:
        """Load the picked candidate into the editors."""
        if self.result is None or self.pick_w.value is None:
            raise InputError("no candidate to apply: run a search first")
        self._say("")
        candidate = self.result.candidates[self.pick_w.value]
        self._apply(self.result_job, candidate)
        self.apply_note.value = (f"Applied <code>{html.escape(candidate.label)}</code>: see the "
                                 "other tabs.")

    def close(self) -> None:
        if self._cancel is not None:
            self._cancel.set()
        if self.fig is not None:
            self.fig.close()
