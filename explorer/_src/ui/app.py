"""The explorer app: sidebar editors on the left, views in tabs, recompiling as the user edits.

One app for every program: a source (explorer._src.ui.sources) says what is compiled, a built-in
workload (`Explorer`) or the user's own function (`explorer.ui.explore`); the mesh, the spec
editor, the partitioner and target, and the views are the same for both.

The state behind the app is an explorer.Session (`App.session`); the app builds the widgets,
forwards each edit to the session and draws what it answers. An edit's path: the sidebar
(explorer._src.ui.sidebar) checks it at the edge, each error next to the widget at fault (the last
good result stays on screen, greyed as stale); a valid one becomes the session's next
explorer.Request, which the session answers from the cache or compiles in a background thread so
the kernel stays responsive (an isolated edit compiles at once; edits made while one compiles
become one compile after it). Results from superseded edits are dropped. With live updates off,
edits are checked but not compiled until Apply. The status line (explorer._src.ui.status) says what
runs meanwhile. Undo and Redo step through the session's edits: the sidebar is set to the request
restored and its result shown, with no edit recorded (explorer._src.ui.history).

The result on screen is the session's (`App.result`, an explorer._src.api.session.Result: the
Report the session holds is the one the app shows, a function's named by its source's
`describe`), and the what-ifs of the why panel are the session's too (explorer._src.ui.what_ifs).
The app keeps its own count of edits (`generation`) only because it counts what the session never
sees: an edit the sidebar refused, one held for Apply with live updates off, one that asks what
the current request asks; an answer to an earlier edit than the app's latest is dropped.

Every result shown gets a new id (`result_id`), and every view records the id of the result it
drew (its figures carry it in their layout, its HTML in a `data-result` attribute). The tabs
(explorer._src.ui.tabs, one class per tab in its registry) are drawn when shown, and a tab whose
views drew an older result is hidden until they are drawn again, so a view of an earlier result
is never on screen beside the current one.
"""

from __future__ import annotations

import functools
import html
import logging
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

import ipywidgets as w

from explorer._src.api.analysis_request import CompileForName, PartitionerName, RulesLike
from explorer._src.api.exploration import AppTab, Exploration, load
from explorer._src.api.request import check_partitioner
from explorer._src.api.session import COLD_WORKER_QUIET_S, Result, Session
from explorer._src.api.targeting import check_compile_for
from explorer._src.errors import ExplorerError, InputError, choices
from explorer._src.report.report import Report
from explorer._src.spec.mesh import MeshSpec, parse_mesh
from explorer._src.spec.tensor import normalize_spec
from explorer._src.strategy.rules import rules_text
from explorer._src.ui.background import running_loop
from explorer._src.ui.callbacks import Mute, guarded
from explorer._src.ui.editors import SpecRow
from explorer._src.ui.graph import GraphView
from explorer._src.ui.history import EditHistory
from explorer._src.ui.share import SharePanel
from explorer._src.ui.sidebar.checks import app_language
from explorer._src.ui.sidebar.widgets import Sidebar, SpecRows
from explorer._src.ui.sources import AppRequest, Source, WorkloadSource
from explorer._src.ui.status import (
    WAITING_FOR_EARLIER,
    WORKING,
    CompileTicker,
    LimitOffer,
    StatusLine,
    cold_worker_text,
    error_text,
    extrapolable,
    larger_limit,
    live_off_text,
    status_text,
    stopped_at_limit,
)
from explorer._src.ui.tabs import (
    TAB_TITLES,
    CollectivesTab,
    CompareTab,
    HloTab,
    MemoryTab,
    PlacementTab,
    SuggestTab,
    TabContext,
    Tabs,
    TimingTab,
)
from explorer._src.ui.what_ifs import WhatIfs

STYLE = """<style>
.explorer-error { color: #b00020; font-size: 12px; }
.explorer-stale { opacity: 0.45; filter: grayscale(0.6); }
.explorer-app pre { word-break: normal; overflow-wrap: break-word; }
.explorer-outdated { visibility: hidden; }
.explorer-table-wrap { max-width: 100%; overflow-x: auto; }
.explorer-collectives .explorer-table-wrap { max-height: 430px; overflow-y: auto; }
.explorer-collectives .explorer-table th { position: sticky; top: 0; background: #fff; }
.explorer-table { border-collapse: collapse; font-size: 12px; }
.explorer-table th, .explorer-table td { border-bottom: 1px solid #ddd; padding: 2px 6px;
  text-align: left; white-space: nowrap; }
.explorer-table td.explorer-where { white-space: normal; }
.explorer-table td.explorer-kind { white-space: normal; min-width: 150px; }
.explorer-table tr.explorer-note-row td { white-space: normal; color: #555; font-size: 11px;
  border-bottom: 1px solid #ddd; }
.explorer-latency { color: #9a3412; font-size: 11px; }
.explorer-op { color: #666; }
.explorer-table tr.explorer-selected { background: #fff3c4; }
.explorer-app pre.explorer-hlo-text { font-size: 11px; max-height: 520px; overflow: auto;
  line-height: 1.3; white-space: pre; }
.explorer-error, .explorer-timing-body p { line-height: 1.35; }
.explorer-caution { border-left: 3px solid #f59e0b; background: #fffbeb; padding: 4px 8px;
  margin: 4px 0; }
.explorer-caution code { font-size: 11px; }
mark.explorer-hlo-collective { background: #dbeafe; }
mark.explorer-hlo-selected { background: #fde047; }
.explorer-status { font-size: 13px; }
.explorer-status-bar { position: sticky; top: 0; z-index: 5; background: #fff;
  border-bottom: 1px solid #ddd; padding: 2px 4px 4px 4px; }
.explorer-status-bar .explorer-error:empty { display: none; }
.widget-container:has(.explorer-status-bar), .jp-OutputArea:has(.explorer-status-bar),
.jp-OutputArea-child:has(.explorer-status-bar),
.jp-OutputArea-output:has(.explorer-status-bar) { overflow: visible !important; }
.explorer-pinned code { font-weight: bold; }
.explorer-legend { font-size: 12px; line-height: 1.8; }
.explorer-legend-item { margin-right: 12px; white-space: nowrap; }
.explorer-swatch { display: inline-block; width: 11px; height: 11px; margin-right: 4px;
  vertical-align: -1px; border-radius: 2px; }
.explorer-warnings summary { cursor: pointer; font-size: 12px; list-style: none; }
.explorer-badge { background: #fef3c7; color: #92400e; border: 1px solid #f59e0b;
  border-radius: 10px; padding: 0 7px; font-size: 12px; white-space: nowrap; }
.explorer-warnings ul { font-size: 11px; margin: 4px 0 0 0; padding-left: 16px; color: #444;
  max-height: 200px; overflow: auto; }
.explorer-function-head { font-size: 13px; line-height: 1.4; }
.explorer-function-head ul { margin: 2px 0 4px 0; padding-left: 18px; font-size: 12px; }
.explorer-source-note { color: #555; }
.explorer-note { color: #555; font-size: 12px; }
.explorer-note .widget-html-content, .explorer-same-head .widget-html-content,
.explorer-function .widget-html-content { line-height: 1.35; }
.explorer-why { border-left: 3px solid #f59e0b; padding: 2px 0 2px 10px; margin-top: 6px; }
.explorer-why pre { background: #f6f8fa; padding: 4px 6px; font-size: 12px; margin: 2px 0;
  white-space: pre-wrap; }
.explorer-reason { display: inline-block; background: #e0e7ff; color: #1e3a8a;
  border-radius: 4px; padding: 0 6px; font-size: 12px; font-family: monospace; }
.explorer-offers { font-size: 12px; }
.explorer-specs .widget-accordion { max-width: 430px; }
.explorer-specs .jupyter-widget-Collapse-contents { padding: 4px 6px; }
.explorer-specs .jupyter-widget-tag { padding: 0 2px 0 4px; font-size: 11px; }
.explorer-specs .jupyter-widget-tag-close { margin-left: 1px; }
.explorer-specs input.jupyter-widget-taginput { min-width: 0; width: 8px; }
.explorer-specs input.jupyter-widget-taginput:placeholder-shown { width: calc(100% - 6px);
  box-sizing: border-box; }
.explorer-section-note { font-size: 11px; color: #555; }
</style>"""


def header_html(title: str) -> str:
    """The app's header, naming the program shown (with the app's style sheet)."""
    return (STYLE + "<h3 style='margin:4px 0'>sharding-explorer · "
            f"<code>{html.escape(title)}</code></h3>")


_log = logging.getLogger(__name__)


class App:
    """An interactive view of what the partitioner did to one program.

    `source` says what is compiled: a built-in workload's name (explorer.WORKLOADS), as
    `Explorer` takes it; the app on the user's function or Flax module is made by
    explorer.ui.explore and explore_module, which pass their own source. Display it in a
    notebook cell;
    `App.widget` is the ipywidgets AppLayout, `App.result` the session's Result shown and
    `App.report` its Report. With
    `debounce=None`, or when no event loop runs (plain Python, tests), edits compile at once.
    Every widget callback is guarded: an unexpected error is shown in the app, never raised into
    the kernel, and the next edit starts afresh.
    """

    def __init__(self, source: str | Source, mesh="data=2,model=4", *, specs=None,
                 partitioner: PartitionerName = "shardy", target: str = "", mapping: str = "",
                 preset: str = "", rules: RulesLike = "", debounce: float | None = 0.3, pool=None,
                 compile_for: CompileForName = "target", timeout: float | None = None,
                 wait: bool = True, extrapolate: bool = False):
        self.source = source = WorkloadSource(source) if isinstance(source, str) else source
        self.debounce, self.pool = debounce, pool
        # The session's Result shown (the last one while a later edit is refused, compiles or
        # waits for Apply); `report` is its Report.
        self.result: Result | None = None
        # A tensor the Placement tab picks when a result first lists it (an exploration opened
        # before its first result), in place of its default.
        self.wanted_tensor: str | None = None
        self.request: AppRequest | None = None          # the request the shown report answers
        self.error: str | None = None
        self.unexpected: BaseException | None = None     # the last error that was a bug
        self.unavailable: str | None = None              # why the shown report has no target
        self.selected: int | None = None                 # the collective picked
        self.result_id = 0              # the id of the result shown; each new one gets the next
        # The number of the latest edit in the widgets: the session's `generation` counts only
        # the edits it records, not one the sidebar refused, one held for Apply, or one that
        # asks what the current request asks, each of which makes an answer on its way moot.
        self.generation = 0
        self._edited_at = time.perf_counter()    # when it was made
        self._muted = Mute()            # the app changing its own widgets: not an edit
        self._waiting: AppRequest | None = None     # checked while live updates were off
        # The state behind the app (explorer.Session): the current explorer.Request and its
        # edits, the compile scheduling and the results; made with the first valid request.
        self.session: Session | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="explorer")
        # Bad input is refused here, before any widget, each with its choices named.
        partitioner, compile_for = check_partitioner(partitioner), check_compile_for(compile_for)
        rules = rules_text(rules)          # pairs or a mapping, as the API takes them
        mesh_spec = parse_mesh(mesh)
        guard = self._guard

        self.sidebar = sidebar = Sidebar(
            source, mesh_spec, partitioner=partitioner, target=target, mapping=mapping,
            preset=preset, rules=rules, compile_for=compile_for, timeout=timeout,
            edit=self._edited, extrapolate=extrapolate,
            guard=guard, muted=self._muted, steps=(self.undo, self.redo))
        self.history = EditHistory(sidebar, self._edited, self._muted)
        self.status_line = StatusLine()
        self._ticker = CompileTicker(lambda text: self._set_status(text),
                                     lambda: self.generation, pool)
        self.views = Tabs(TabContext(
            app=self, guard=guard, muted=self._muted, edit=self._edited,
            redraw=lambda title: self.views.redraw(title), inputs=sidebar.tensors_or_none,
            select_collective=self._select_collective, use_target=sidebar.use_target,
            offered_target=lambda: sidebar.matching_target,
            apply_what_if=lambda candidate: self.what_ifs.apply(candidate),
            snapshot=self._search_snapshot, apply_suggestion=sidebar.apply_suggestion,
            graph=GraphView()))
        self.tabs = self.views.widget
        # drawn_results(title): the id of the result each view of a tab drew, by view.
        self.drawn_results = self.views.drawn_results
        self._name_the_widgets()
        self.what_ifs = WhatIfs(self, self.why, self.specs_editor, self._edited, guard,
                                self._muted)
        self.share = SharePanel(self, guard)     # the result shown as a link and as a file
        self.header = w.HTML(header_html(source.title))
        # Offered under an error of a compile stopped at its time limit: a larger limit, and
        # for a workload that counts its layers, their extrapolation from 3 and 4.
        self.limit_offer = LimitOffer(guard(sidebar.raise_timeout),
                                      guard(sidebar.extrapolate_layers))
        left = sidebar.box(self.share.widget)
        # The status and the error no input owns, above the tabs: on screen at 1400×900
        # whatever the sidebar's length (explorer._src.ui.status), and kept there as the page
        # scrolls (sticky: every box around it lets it out, the style sheet's :has rule).
        center = w.VBox([self.status_line.bar(sidebar.error_w, self.limit_offer.widget),
                         self.tabs])
        self.widget = w.AppLayout(header=self.header, left_sidebar=left, center=center,
                                  pane_widths=["460px", 1, 0], pane_heights=["50px", 1, 0])
        self.widget.add_class("explorer-app")

        self.live_w.observe(guard(lambda _: self._live_changed()), "value")
        self.apply_w.on_click(guard(lambda _: self._edited(apply=True)))
        source.bind(guard(sidebar.inputs_changed), guard(self._source_reset), guard)
        sidebar.load_tensors(sidebar.initial_specs(specs or {}, mesh_spec))
        # The first result is computed before the cell returns, so the app appears complete;
        # `wait=False` (a page opening a link, explorer._src.ui.page): compiled like an edit's, the
        # status line ticking, where an event loop runs.
        self._edited(wait=wait)

    def _name_the_widgets(self) -> None:
        """The sidebar's and the tabs' widgets and views by their names on the app, as scripts,
        tests and the Share section reach them (`app.rules_w`, `app.placement`)."""
        s, status, tab = self.sidebar, self.status_line, self.views.of
        self.mesh_editor, self.specs_editor = s.mesh_editor, s.specs_editor
        self.preset_w, self.rules_w, self.rules_note = s.preset_w, s.rules_w, s.rules_note
        self.layout_error, self.kept_picks, self.error_w = s.layout_error, s.kept_picks, s.error_w
        self.partitioner_w, self.target_w, self.mapping_w = s.partitioner_w, s.target_w, s.mapping_w
        self.target_error, self.target_offer = s.target_error, s.target_offer
        self.measure_w, self.cpu_w, self.live_w, self.apply_w, self.undo_w, self.redo_w = (
            s.measure_w, s.cpu_w, s.live_w, s.apply_w, s.undo_w, s.redo_w)
        self.status, self.compiled_for = status.status, status.compiled_for
        self.warnings_w = status.warnings
        self.placement, self.origins = tab(PlacementTab).placement, tab(PlacementTab).origins
        self.collectives, self.why = tab(CollectivesTab).collectives, tab(CollectivesTab).why
        self.memory, self.timing = tab(MemoryTab).memory, tab(TimingTab).timing
        hlo = tab(HloTab)
        self.hlo_which, self.hlo, self.code = hlo.hlo_which, hlo.hlo, hlo.code
        self.xprof, self.graph = hlo.xprof, hlo.graph
        self.compare = tab(CompareTab).compare
        self.suggest, self.capacity = tab(SuggestTab).suggest, tab(SuggestTab).capacity

    @property
    def report(self) -> Report | None:
        """The Report shown: the session's Result's (`result`); None before the first."""
        return self.result.report if self.result is not None else None

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    @property
    def spec_rows(self) -> Mapping[str, SpecRow]:
        return SpecRows(self.specs_editor)

    @property
    def pinned(self) -> set[str]:
        return self.specs_editor.pinned

    # ------------------------------------------------------------------ guarding callbacks

    def _guard(self, fn):
        """`fn` as a widget callback: an error it raises is shown in the app, never raised to
        the widget (explorer._src.ui.callbacks)."""
        return guarded(fn, self._show_error, self._show_unexpected)

    def _show_unexpected(self, e: BaseException) -> None:
        _log.exception("explorer: unexpected error in a widget callback", exc_info=e)
        self.unexpected = e
        self._show_error(f"unexpected error (a bug in the explorer; please report it): "
                         f"{type(e).__name__}: {e}", force=True)

    # ------------------------------------------------------------------ edit -> compile

    def _source_reset(self) -> None:
        """A different program (another workload): nothing the user picked applies."""
        self.sidebar.forget_picks()
        self.header.value = header_html(self.source.title)
        self._edited()

    def _request(self) -> AppRequest:
        """The sidebar's checked request (explorer._src.ui.sidebar); each error is shown next to
        the widget at fault and raised."""
        return self.sidebar.request(origins=self.origins.ask.value)

    def _edited(self, wait: bool = False, apply: bool = False,
                restored: AppRequest | None = None) -> None:
        """An edit: check the sidebar, then show its result from the cache, compile it (the
        scheduler decides when), or with live updates off keep it for Apply. `wait`: compile
        now and block (the first result); `apply`: the Apply button; `restored`: the request
        an Undo or Redo set the widgets to, made by them already (not made again)."""
        if self._muted:
            return
        self.generation += 1
        self._edited_at = time.perf_counter()      # the status says how long the answer took
        self.limit_offer.offer(None)
        # Said before any work (the checks, the plan and the cache lookup), so that the status
        # changes as soon as a widget's new value reaches the page.
        self._set_status(WORKING)
        with self._muted:      # the sidebar's checks set the spec pickers
            try:
                request = restored or self._request()
            except ExplorerError as e:
                self._discard()
                self._show_error(str(e))
                return
        self.error = None
        if not (self.live_w.value or apply or wait):
            self._discard()
            self._waiting = request
            self.tabs.add_class("explorer-stale")
            self._set_status(live_off_text(greyed=self.report is not None))
            return
        self._waiting = None
        try:
            session = self._session_for(request)
        except ExplorerError as e:
            self._show_error(str(e))
            return
        generation = self.generation
        # The session holds the Report as the app shows it (a function's named, its specs).
        describe = functools.partial(self.source.describe, request=request)
        loop = running_loop()
        if loop is None or self.debounce is None or wait:
            session.discard()
            try:            # compiled here; an error is shown as the session's answer
                result = session.analyze(describe=describe)
            except Exception as e:
                result = e
            self._finish(generation, request, result)
            return
        analysis = session.request
        if session.busy:
            self._set_status(WAITING_FOR_EARLIER)
        hit = session.schedule(loop, self._guard(functools.partial(self._finish, generation,
                                                                   request)),
                               self._guard(lambda _: self._ticker.start(generation, session)),
                               describe=describe)
        if hit is None and not session.busy and \
                session.quiet_before(analysis) >= COLD_WORKER_QUIET_S:
            self._set_status(cold_worker_text(COLD_WORKER_QUIET_S))

    def _discard(self) -> None:
        """Forget an edit waiting to compile: a newer one needs none."""
        if self.session is not None:
            self.session.discard()

    def _session_for(self, request: AppRequest) -> Session:
        """The session, its current request made from the checked app request `request`."""
        analysis = request.analysis or self.source.analysis(request)
        if self.session is None:
            self.session = Session(analysis, pool=self.pool, debounce=self.debounce or 0.0,
                                   executor=self._executor)
        else:
            self.session.set_request(analysis)
        self.history.changed(self.session)
        return self.session

    def _live_changed(self) -> None:
        """Live updates on: compile what was edited while they were off; off: show Apply."""
        self.apply_w.layout.display = "none" if self.live_w.value else ""
        if self.live_w.value and self._waiting is not None:
            self._edited()

    def _finish(self, generation: int, request: AppRequest, result: Result | Exception) -> None:
        """The session answered edit `generation` (a Result, or the error its compile
        raised): shown, unless a newer edit was made in the widgets meanwhile."""
        self._ticker.stop()
        if generation != self.generation:
            return            # a newer edit was made: its result (or error) is shown instead
        if isinstance(result, ExplorerError):
            self._show_error(str(result))
        elif isinstance(result, Exception):
            self._show_unexpected(result)
        else:
            self._show(result, request)

    # ------------------------------------------------------------------ drawing

    def _set_status(self, text: str) -> None:
        self.status_line.say(text, self.result_id)

    def _show_error(self, message: str, force: bool = False) -> None:
        """Show `message` unless an inline error already says it (`force`: show it anyway)."""
        message = app_language(message)
        self.error = message
        at_fault = self.sidebar.inputs_at_fault()
        if force or not at_fault:
            self.error_w.value = html.escape(message)
        limit = stopped_at_limit(message)
        session = self.session
        self.limit_offer.offer(
            None if limit is None else larger_limit(limit, self.sidebar.default_timeout_s),
            # The request stopped is the session's (a compile's error is the session's answer).
            extrapolable(session.request) if session is not None
            else None)
        self.tabs.add_class("explorer-stale")
        self._set_status(error_text(at_fault, force, greyed=self.report is not None))

    def _show(self, result: Result, request: AppRequest | None = None) -> None:
        """Show the session's `result`, the answer to `request`: it becomes the current result,
        the visible tab is drawn for it and the others are hidden until they are."""
        report = result.report
        unavailable = request.unavailable if request is not None else None
        self.result, self.request, self.error, self.unexpected = result, request, None, None
        self.unavailable = unavailable
        self.result_id += 1
        # The earlier result's figures hidden before the status names this one (issue 53).
        self.views.outdate()
        self.share.outdate()
        self.tabs.remove_class("explorer-stale")
        self._set_status(status_text(report, time.perf_counter() - self._edited_at,
                                     unavailable))
        self.status_line.describe(report)
        self.selected = None
        self.views.new_result()
        self.what_ifs.shown(request, report)
        self.share.update()
        drawing = time.perf_counter()
        self.views.draw(self.tabs.selected_index)
        if self.session is not None:
            counted = self.session.drawn(result.generation, time.perf_counter() - drawing)
            if counted is not None and counted.report is report:
                self.result = counted       # the same answer, with its drawing's time

    def _select_collective(self, index: int | None) -> None:
        if self._muted or self.report is None:
            return
        self.selected = index
        self.views.redraw(AppTab.HLO)                  # its highlighted line follows
        self.views.redraw(AppTab.COLLECTIVES)
        self.what_ifs.explain(index)

    # ------------------------------------------------------------------ API for scripts

    def set_spec(self, tensor: str, spec) -> None:
        """Set `tensor`'s spec as the user's pick, and recompile."""
        self.specs_editor.pick(tensor, normalize_spec(spec, tensor=tensor))

    def undo(self) -> None:
        """Back to the request before the last edit, its result shown; no edit recorded."""
        self.history.step(self.session, self.origins.ask, back=True)

    def redo(self) -> None:
        """The edit undone last, again, its result shown; no edit recorded."""
        self.history.step(self.session, self.origins.ask, back=False)

    def load_layout(self, mesh: MeshSpec, *, rules: str = "", specs: Mapping | None = None,
                    params: Mapping | None = None) -> None:
        """Load a layout into the sidebar and recompile once (explorer._src.ui.sidebar): a
        workload's `params`, the mesh, `rules` and `specs` as picks."""
        self.sidebar.load_layout(mesh, rules=rules, specs=specs, params=params)

    def _search_snapshot(self) -> tuple[Source, AppRequest]:
        """The source and its checked request now: what a search started now searches."""
        if self.error is not None:
            raise InputError(self.error)
        with self._muted:
            return self.source, self._request()

    def close(self) -> None:
        self.views.close()
        if self.session is not None:
            self.session.close()
        self._executor.shutdown(wait=False)
        self.what_ifs.close()
        self.widget.close()


class Explorer(App):
    """The app on a built-in workload (explorer.WORKLOADS): a picker, its params, presets and
    logical-axis rules, and a spec per tensor. `rules` as explorer.analyze_workload takes them
    (text, a mapping or (logical name, mesh axes) pairs); the rules box shows them as text."""

    def __init__(self, workload: str = "mlp", mesh="data=2,model=4", specs=None, params=None,
                 partitioner: PartitionerName = "shardy", target: str = "", mapping: str = "",
                 preset: str = "", rules: RulesLike = "", debounce: float | None = 0.3, pool=None,
                 compile_for: CompileForName = "target", timeout: float | None = None,
                 wait: bool = True, extrapolate: bool = False):
        super().__init__(WorkloadSource(workload, params), mesh, specs=specs,
                         partitioner=partitioner, target=target, mapping=mapping, preset=preset,
                         rules=rules, debounce=debounce, pool=pool, compile_for=compile_for,
                         timeout=timeout, wait=wait, extrapolate=extrapolate)

    @classmethod
    def load(cls, path, *, debounce: float | None = 0.3, pool=None) -> Explorer:
        """The app on the exploration saved in `path` (Exploration.save): its workload,
        params, mesh, specs, preset, rules, partitioner, compile_for, target, mapping and
        time limit, and the tab and tensor it showed.

        Raises:
            InputError: the file is not a valid exploration (explorer.load_exploration), or it
                holds what the app does not carry: a user's function (the file has neither it
                nor its inputs), pinned activations, explicit axes or peak rates.
        """
        return cls.from_exploration(load(path), debounce=debounce, pool=pool)

    @classmethod
    def from_exploration(cls, e: Exploration, *, debounce: float | None = 0.3,
                         pool=None, wait: bool = True) -> Explorer:
        """The app on exploration `e` (see `load`); `wait=False`: returned before its first
        result, which compiles as an edit's does (its tensor picked once it is listed)."""
        if e.workload is None:
            where = (f"the user's function {e.function.text()}" if e.function is not None
                     else "a user's function that could not be imported by name")
            raise InputError(f"this exploration is of {where}, which a file does not carry "
                             "(nor its inputs); open it with explorer.ui.explore(fn, *inputs, "
                             f"mesh={e.mesh!r}, specs=...)")
        # Fields the app has no widget for: opening without them would show another program.
        missing = [text for text, given in (
            (f"activations {choices(e.activations)}", bool(e.activations)),
            (f"axis_type {e.axis_type!r}", e.axis_type != "auto"),
            ("peak rates", e.peak),
            # The sidebar's box extrapolates from the default counts, on or off.
            (f"extrapolate {e.extrapolate!r}", not isinstance(e.extrapolate, bool))) if given]
        if missing:
            raise InputError(f"this exploration sets {', '.join(missing)}, which the app does "
                             "not carry; analyse it with exploration.analyze() instead")
        app = cls(workload=e.workload, mesh=e.mesh, specs=dict(e.specs), params=dict(e.params),
                  partitioner=e.partitioner, target=e.target or "", mapping=e.mapping or "",
                  preset=e.preset or "", rules=e.rules, debounce=debounce, pool=pool,
                  compile_for=e.compile_for, timeout=e.timeout, wait=wait,
                  extrapolate=bool(e.extrapolate))
        app.tabs.selected_index = TAB_TITLES.index(e.app.tab)
        picker = app.placement.tensor
        if e.app.tensor in [v for _, v in picker.options]:
            picker.value = e.app.tensor
        else:
            # Picked when a result first lists it (the first compile may still be running),
            # in place of the tab's default.
            app.wanted_tensor = e.app.tensor or None
        return app

    @property
    def workload_w(self) -> w.Dropdown:
        return self.source.workload_w

    @property
    def params_box(self) -> w.VBox:
        return self.source.params_box

    @property
    def params_error(self) -> w.HTML:
        return self.source.error

    @property
    def params(self) -> dict:
        return self.source.params
