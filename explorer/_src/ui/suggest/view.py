"""The Suggest tab: search the app's program for the fastest layout on its target, show the
ranked candidates, and load one into the editors.

The search is explorer.search of the explorer Request the app compiles (its layout what varies,
each compile under the sidebar's time limit), with the tab's choices as its options
(explorer._src.layout_search.search.search_request), run on a thread of its own so that the kernel
stays responsive; it reports through its progress callback and stops through its cancel event,
and the widget updates it causes are handed to the kernel's event loop (where one runs; in
plain Python they are made on the search's thread). A search runs against the app's request as
it was when Start was pressed: edits made meanwhile change neither the search nor its results,
and the tab says what was searched. Apply loads a candidate's mesh, rules or specs (and the
workload params it was searched with) into the editors, which then recompile as after any
edit.

The candidates compile on this machine's worker pool, or, where the server's configuration lists
Ray clusters (EXPLORER_CLUSTERS, in the environment `sharding-explorer app` or the Jupyter
server starts with), as Ray tasks on the one chosen (explorer.search's `cluster=`, the same
search); progress and cancel work alike on both, and the results say where they were compiled.
A page chooses among the listed clusters and cannot name one: Ray's client unpickles its
server's replies, so an address from a page would let its user run code on this server.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from dataclasses import replace

import ipywidgets as w
import plotly.graph_objects as go

from explorer._src.errors import ExplorerError, InputError
from explorer._src.layout_search.result import Candidate, CandidateStatus, Progress, SearchResult
from explorer._src.layout_search.search import search_request
from explorer._src.ui.background import BackgroundTab
from explorer._src.ui.sources import AppRequest, Source
from explorer._src.ui.suggest.job import (
    DEFAULT_BUDGET_S,
    THIS_MACHINE,
    SearchJob,
    choices_of,
    chosen_cluster,
    cluster_options,
    current_candidate,
    make_job,
    parse_budget,
    spaces_of,
)
from explorer._src.ui.suggest.pareto import pareto_figure
from explorer._src.ui.suggest.tables import (
    _CSS,
    MAX_ROWS,
    doc_html,
    progress_text,
    results_html,
    summary_html,
    winner_comparison_html,
)
from explorer._src.units import format_seconds

SPACE_LABELS = {"rules": "rules (logical names → mesh axes)",
                "specs": "specs (every spec of chosen tensors)",
                "pipeline": "pipeline (stages, cuts, microbatches)"}


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
        self.cluster_w = w.Dropdown(options=[], description="compile on",
                                    layout=w.Layout(width="300px"))
        self.cluster_note = cluster_note = w.HTML()
        self._offer_clusters()
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

    def _offer_clusters(self) -> None:
        """Offer this machine and the Ray clusters the server's configuration lists now; a
        malformed list offers this machine only and says what is wrong with it."""
        try:
            options = cluster_options()
            problem = ""
        except InputError as e:
            options, problem = [(THIS_MACHINE, None)], str(e)
        if list(self.cluster_w.options) != options:
            keep = self.cluster_w.value
            values = [v for _, v in options]
            self.cluster_w.options = options
            # By index, not value: this machine's value is None, which a Dropdown reads as "no
            # selection" (index and label None: a blank box), not as the option whose value it
            # is.
            self.cluster_w.index = values.index(keep) if keep in values else 0
        self.cluster_w.disabled = len(options) == 1
        self.cluster_note.value = (
            f"<span class='explorer-note'>{html.escape(problem)}</span>" if problem else
            "<span class='explorer-note'>or a Ray cluster this server offers (its operator "
            "lists them in EXPLORER_CLUSTERS; docs/search.md)</span>" if len(options) > 1 else
            "<span class='explorer-note'>no Ray cluster is offered on this server (its operator "
            "lists them in EXPLORER_CLUSTERS; docs/search.md)</span>")

    def refresh(self) -> None:
        """Offer the spaces and choices of the app's program now (its workload may have
        changed), and the clusters the server lists; the running search and the shown result
        are left alone."""
        self._offer_clusters()
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
        cluster = chosen_cluster(self.cluster_w.value)
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
            outcome: SearchResult | BaseException = search_request(
                job.analysis, replace(job.options, progress=progress, cancel=cancel,
                                      pool=self.pool))
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
        # The counts are the result's own (SearchStats.evaluated_text), as the summary and the
        # CLI give them.
        pruned = s.pruned_bound + s.pruned_memory
        self.progress_w.value = (f"{s.stopped}: {s.evaluated_text()}"
                                 f"{f', {pruned:,} pruned by a bound' if pruned else ''} in "
                                 f"{s.seconds:.1f} s")

    def _draw(self, job: SearchJob, result: SearchResult) -> None:
        self.summary.value = summary_html(job, result)
        self.table.value = results_html(result, self._current_index(result))
        old, self.fig = self.fig, pareto_figure(result)
        self.plot_box.children = (self.fig,)
        if old is not None:
            old.close()
        self.why.value = winner_comparison_html(result.comparison, result)
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
