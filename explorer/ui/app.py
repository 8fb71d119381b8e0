"""The explorer app: sidebar editors on the left, views in tabs, recompiling as the user edits.

One app for every program: a source (explorer.ui.sources) says what is compiled, a built-in
workload (`Explorer`) or the user's own function (`explorer.ui.explore`); the mesh, the spec
editor, the partitioner and target, and the views are the same for both.

The state behind the app is an explorer.Session (`App.session`). Edits are validated at once in
the widgets (errors sit next to the widget at fault, and the last good result stays on screen,
greyed as stale); a valid one becomes the session's next explorer.Request, which the session
answers from the cache or compiles in a background thread so the kernel stays responsive (an
isolated edit compiles at once; edits made while one compiles become one compile after it).
Results from superseded edits are dropped. With live updates off, edits are checked but not
compiled until Apply.

Every result shown gets a new id (`result_id`), and every view records the id of the result it
drew (its figures carry it in their layout, its HTML in a `data-result` attribute). A tab is
drawn when shown, and a tab whose views drew an older result is hidden (`explorer-outdated`)
until they are drawn again, so a view of an earlier result is never on screen beside the
current one.
"""

from __future__ import annotations

import asyncio
import functools
import html
import logging
import re
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import ipywidgets as w

from explorer._search.result import Candidate as SearchCandidate
from explorer.api.exploration import Exploration, load
from explorer.api.request import check_inputs, check_mesh, check_partitioner, check_target
from explorer.api.session import COLD_WORKER_QUIET_S, Session
from explorer.api.targeting import CompileFor, check_compile_for, compile_plan
from explorer.api.what_if import candidates, confirmed_changes, why_untried
from explorer.compile.pool import default_pool
from explorer.compile.protocol import Backend
from explorer.cost.hardware import get_target, targets, targets_with_chips
from explorer.errors import (
    ExplorerError,
    InputError,
    MeshError,
    SpecError,
    TensorError,
    WorkloadError,
    choices,
)
from explorer.report.compare import compare
from explorer.report.provenance import provenance
from explorer.report.report import Report, TensorRole
from explorer.spec.mesh import MeshSpec, parse_mesh
from explorer.spec.tensor import TensorSpec, normalize_spec
from explorer.strategy.presets import PRESETS, get_preset
from explorer.strategy.rules import LOGICAL_NAMES, Rules, parse_rules
from explorer.ui.capacity import CapacityView
from explorer.ui.code import CodePanel
from explorer.ui.compare import CompareView
from explorer.ui.editors import MeshEditor, SpecRow, check_row_spec
from explorer.ui.figure import drawn_result
from explorer.ui.graph import GraphView
from explorer.ui.grids import mesh_grid, placement_grid
from explorer.ui.memory import MemoryView
from explorer.ui.origins import OriginsPanel
from explorer.ui.share import SharePanel
from explorer.ui.sources import GROUP_OF_KIND, Request, Source, WorkloadSource
from explorer.ui.specs import KeptPicks, SpecsEditor, carried_renames, renamed_spec
from explorer.ui.suggest import SearchJob, SuggestView, candidate_specs
from explorer.ui.timeline import TimingView, timing_html
from explorer.ui.views import (
    CollectivesView,
    PlacementView,
    TargetOffer,
    collectives_html,
    hlo_html,
    legend_html,
    mapping_placeholder,
    matching_target,
    stamped,
    tensor_options,
)
from explorer.ui.why import Candidate, WhyPanel
from explorer.ui.xprof import XprofPanel

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
mark.explorer-hlo-collective { background: #dbeafe; }
mark.explorer-hlo-selected { background: #fde047; }
.explorer-status { font-size: 13px; }
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


MEASURE_LABEL = "measure a real run (this CPU)"


TAB_TITLES = ["Placement", "Collectives", "Memory", "Timing", "HLO", "Compare", "Suggest"]


_log = logging.getLogger(__name__)

# Errors from the core sometimes suggest a CLI flag; in the app the same fix is a widget.
_APP_WORDS = [
    (re.compile(r"\(--spec NAME=\.\.\.\)"), "(pick a spec for each tensor under Specs)"),
    (re.compile(r"--spec (\w+)=\.\.\."), r"the spec picker of \1"),
    (re.compile(r"--activation (\w+)=\.\.\."), r"an activation spec for \1 (Python API)"),
    (re.compile(r"use --workload (\w+)"), r"pick workload \1"),
    (re.compile(r"--workload (\w+)"), r"workload \1"),
    (re.compile(r"e\.g\. --mesh (\S+)"), r"e.g. the mesh \1"),
    (re.compile(r"--mesh (\S+)"), r"the mesh \1"),
    (re.compile(r"--(preset|rules|target|mapping|partitioner) "), r"the \1 "),
]


def app_language(message: str) -> str:
    """`message` with CLI flags (`--spec w1=...`) put as the app's widgets."""
    for pattern, replacement in _APP_WORDS:
        message = pattern.sub(replacement, message)
    return message


def target_options(devices: int, current: str = "") -> list[tuple[str, str]]:
    """Every target with `devices` devices (explorer.cost.hardware.targets_with_chips: by
    family, GPUs first where the count is whole nodes of 8), then the catalog's others of that
    count (the IPU machine), and `current` kept (marked) when it does not match, so that a
    selection is never lost."""
    fitting = [get_target(name) for name in targets_with_chips(devices)]
    fitting += [t for t in targets().values() if t.chips == devices and t not in fitting]
    options = [("— none —", "")] + [(f"{t.family.upper()} · {t.name}", t.name) for t in fitting]
    if current and current not in [v for _, v in options]:
        chips = get_target(current).chips
        options.append((f"{current} ({chips} devices, not {devices})", current))
    return options


def _running_loop():
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class _Rows(Mapping):
    """`app.spec_rows`: every input's spec row by name, built (and its section opened) when
    asked for; the editor builds only the rows in view."""

    def __init__(self, editor: SpecsEditor):
        self._editor = editor

    def __getitem__(self, name: str) -> SpecRow:
        if name not in self._editor.tensors:
            raise KeyError(name)
        return self._editor.open(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._editor.tensors)

    def __len__(self) -> int:
        return len(self._editor.tensors)


class App:
    """An interactive view of what the partitioner did to one program.

    `source` says what is compiled (explorer.ui.sources). Display it in a notebook cell;
    `App.widget` is the ipywidgets AppLayout and `App.report` the current Report. With
    `debounce=None`, or when no event loop runs (plain Python, tests), edits compile at once.
    Every widget callback is guarded: an unexpected error is shown in the app, never raised into
    the kernel, and the next edit starts afresh.
    """

    def __init__(self, source: Source, mesh="data=2,model=4", *, specs=None,
                 partitioner: str = "shardy", target: str = "", mapping: str = "",
                 preset: str = "", rules: str = "", debounce: float | None = 0.3, pool=None,
                 compile_for: str = "target"):
        self.source = source
        self.debounce, self.pool = debounce, pool
        self.report: Report | None = None
        self.request: Request | None = None          # the request the shown report answers
        self.error: str | None = None
        self.unexpected: BaseException | None = None     # the last error that was a bug
        self.prediction_note: str | None = None          # why the last request has no target
        self.matching_target: str | None = None          # then, a target that would fit
        self.unavailable: str | None = None              # why the shown report has none
        self.selected: int | None = None
        self.result_id = 0              # the id of the result shown; each new one gets the next
        self._generation = 0            # the number of the latest edit
        self._edited_at = time.perf_counter()    # when it was made
        self._muted = 0
        # Only the visible tab is drawn; the others when shown. Tab index -> the result id its
        # views drew (a tab drawn for an older result is hidden until drawn again).
        self._drawn: dict[int, int] = {}
        self._waiting: Request | None = None     # checked while live updates were off
        # The state behind the app (explorer.Session): the current explorer.Request and its
        # edits, the compile scheduling and the results; made with the first valid request.
        self.session: Session | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="explorer")
        self._compiling: int | None = None      # the edit whose compile is in flight
        # What-if compiles run on their own thread, one at a time, so an edit's compile never
        # queues behind them in this executor (the worker pool still runs one per worker).
        self._what_if_executor = ThreadPoolExecutor(max_workers=1,
                                                    thread_name_prefix="explorer-what-if")
        self._applied: tuple[Candidate, Report] | None = None   # a what-if being applied
        self._applied_rules: str | None = None     # the rules the Suggest tab's Apply loaded
        check_partitioner(partitioner)
        mesh_spec = parse_mesh(mesh)
        # The axes of the last valid mesh: what the spec pickers offer.
        self._axis_names: tuple[str, ...] = mesh_spec.names
        # Each axis the app opened with, renamed (its new name) or removed (None) since: the
        # specs the source gives (a TensorSpec's own, a pattern's) follow it as the picks do.
        self._carried: dict[str, str | None] = {}
        guard = self._guard

        self.mesh_editor = MeshEditor(list(zip(mesh_spec.names, mesh_spec.sizes, strict=True)),
                                      guard(self._edited))
        self.mesh_editor.commit()
        self.specs_editor = SpecsEditor(guard(self._picked), guard)
        if preset:
            get_preset(preset)
        self.preset_w = w.Dropdown(options=[("— none —", "")] + [(n, n) for n in PRESETS],
                                   value=preset, description="preset")
        self.rules_w = w.Text(value=rules, description="rules", continuous_update=False,
                              placeholder="e.g. batch=data,mlp=model,opt:embed=data")
        self.rules_note = w.HTML()
        self.rules_note.add_class("explorer-note")
        self.layout_error = w.HTML()
        self.layout_error.add_class("explorer-error")
        self.kept_picks = KeptPicks(guard(self._release_picks))
        self.partitioner_w = w.ToggleButtons(options=[("Shardy", "shardy"), ("GSPMD", "gspmd")],
                                             value=partitioner, description="partitioner",
                                             style={"button_width": "70px"})
        target = get_target(target).name if target else ""
        self.target_w = w.Dropdown(options=target_options(mesh_spec.device_count, target),
                                   value=target, description="target")
        self.mapping_w = w.Text(value=mapping, description="mapping", continuous_update=False,
                                placeholder=mapping_placeholder(target, mesh_spec))
        self.measure_w = w.Checkbox(value=False, description=MEASURE_LABEL, indent=False)
        # Off: edits are checked as they are made but compiled only on Apply (a burst of edits
        # to set up a large model becomes one compile).
        self.live_w = w.Checkbox(value=True, indent=False, layout=w.Layout(width="auto"),
                                 description="live updates (compile after each edit)")
        self.live_w.add_class("explorer-live")
        self.apply_w = w.Button(description="Apply edits", icon="play", button_style="primary",
                                layout=w.Layout(width="130px", display="none"),
                                tooltip="compile the sidebar as it is now")
        self.apply_w.add_class("explorer-apply")
        # The one switch back to the CPU's program, priced on the target (approximate).
        self.cpu_w = w.Checkbox(value=check_compile_for(compile_for) is CompileFor.CPU,
                                description="compile on CPU devices, not for the target",
                                indent=False)
        self.target_error = w.HTML()
        self.target_error.add_class("explorer-error")
        self.target_offer = TargetOffer(guard(self._use_target))
        self.status = w.HTML()
        self.status.add_class("explorer-status")
        # Which compiler wrote the program shown, and whether its numbers are the target's own.
        self.compiled_for = w.HTML()
        self.compiled_for.add_class("explorer-note")
        self.warnings_w = w.HTML()
        self.warnings_w.add_class("explorer-warnings-box")
        self.error_w = w.HTML()
        self.error_w.add_class("explorer-error")

        self.placement = PlacementView(guard(lambda _: self._tensor_picked()),
                                       guard(lambda _: self._list_tensors()))
        # Why the picked tensor is laid out so: asking recompiles with origins read.
        self.origins = OriginsPanel(guard(lambda _: self._edited()),
                                    guard(lambda _: self._show_origin_path()))
        self.placement.widget.children = (*self.placement.widget.children, self.origins.widget)
        self.collectives = CollectivesView(guard(self._select_collective),
                                           guard(self._use_target))
        self.why = WhyPanel(guard(self._apply_what_if))
        self.collectives.widget.children = (*self.collectives.widget.children, self.why.widget)
        self.memory = MemoryView()
        self.timing = TimingView()
        self.hlo_which = w.ToggleButtons(options=["optimized", "propagated", "stablehlo"])
        self.hlo_which.observe(guard(lambda _: self._redraw("HLO")), "value")
        self.hlo = w.HTML()
        self.code = CodePanel(guard)          # Copy as code: the layout as plain JAX
        self.xprof = XprofPanel(lambda: self.report, guard)     # the result as an XProf run
        self.graph = GraphView()
        self.compare = CompareView(lambda: self.report)
        self.suggest = SuggestView(lambda: self.source, self._search_snapshot,
                                   self._apply_suggestion, pool, lambda: self.request)
        self.capacity = CapacityView(self._search_snapshot, pool)
        self.tabs = w.Tab(children=[self.placement.widget, self.collectives.widget,
                                    self.memory.widget, self.timing.widget,
                                    w.VBox([self.hlo_which, self.code.widget,
                                            self.xprof.widget, self.graph.widget, self.hlo]),
                                    self.compare.widget,
                                    w.VBox([self.suggest.widget, self.capacity.widget])])
        for i, title in enumerate(TAB_TITLES):
            self.tabs.set_title(i, title)
        self.tabs.observe(guard(lambda change: self._draw_tab(change["new"])), "selected_index")
        self.share = SharePanel(self, guard)     # the result shown as a link and as a file

        if not source.uses_preset:
            self.preset_w.layout.display = "none"
        if not source.uses_rules:
            self.rules_w.layout.display = "none"
            self.rules_note.value = f"<div>{html.escape(source.rules_note)}</div>"
        sidebar = w.VBox([source.sidebar, self.mesh_editor.widget, self.preset_w, self.rules_w,
                          self.rules_note, self.layout_error, self.kept_picks.widget,
                          self.specs_editor.widget,
                          self.partitioner_w, self.target_w, self.mapping_w,
                          self.target_error, self.target_offer.button,
                          self.cpu_w, self.measure_w, w.HBox([self.live_w, self.apply_w]),
                          w.HBox([self.status, self.warnings_w]),
                          self.compiled_for, self.error_w, self.share.widget],
                         layout=w.Layout(width="440px"))
        header = w.HTML(STYLE + "<h3 style='margin:4px 0'>sharding-explorer · "
                        f"<code>{html.escape(source.title)}</code></h3>")
        self.header = header
        self.widget = w.AppLayout(header=header, left_sidebar=sidebar, center=self.tabs,
                                  pane_widths=["460px", 1, 0], pane_heights=["50px", 1, 0])
        self.widget.add_class("explorer-app")

        self.target_w.observe(guard(lambda c: source.set_target(c["new"] or None)), "value")
        source.set_target(target or None)
        for wid in (self.partitioner_w, self.target_w, self.mapping_w, self.measure_w,
                    self.cpu_w):
            wid.observe(guard(lambda _: self._edited()), "value")
        for wid in (self.preset_w, self.rules_w):
            wid.observe(guard(lambda _: self._layout_changed()), "value")
        self.live_w.observe(guard(lambda _: self._live_changed()), "value")
        self.apply_w.on_click(guard(lambda _: self._edited(apply=True)))
        source.bind(guard(self._inputs_changed), guard(self._source_reset), guard)
        self._load_tensors(self._initial_specs(specs or {}, mesh_spec))
        # The first result is computed before the cell returns, so the app appears complete.
        self._edited(wait=True)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    @property
    def spec_rows(self) -> Mapping[str, SpecRow]:
        return _Rows(self.specs_editor)

    @property
    def pinned(self) -> set[str]:
        return self.specs_editor.pinned

    # ------------------------------------------------------------------ guarding callbacks

    def _guard(self, fn):
        """`fn` as a widget callback: an error it raises is shown, never raised to the widget
        (where ipywidgets would print it to the kernel log and leave the app half-updated)."""

        @functools.wraps(fn)
        def guarded(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except ExplorerError as e:
                self._show_error(str(e))
            except Exception as e:      # a bug: say so in the app, keep it for a report
                self._show_unexpected(e)
            return None

        return guarded

    def _show_unexpected(self, e: BaseException) -> None:
        _log.exception("explorer: unexpected error in a widget callback", exc_info=e)
        self.unexpected = e
        self._show_error(f"unexpected error (a bug in the explorer; please report it): "
                         f"{type(e).__name__}: {e}", force=True)

    # ------------------------------------------------------------------ sidebar state

    def _initial_specs(self, specs: Mapping, mesh: MeshSpec) -> dict:
        """The specs the app was opened with, checked against the tensors and the mesh as a
        picker would check them, so that a bad one is refused naming the tensor."""
        specs = {n: normalize_spec(s, tensor=n) for n, s in specs.items()}
        try:
            tensors = {t.name: t for t in self.source.tensors()}
        except ExplorerError:
            return specs          # the source shows its own error; the request stops there
        unknown = [n for n in specs if n not in tensors]
        if unknown:
            raise WorkloadError(f"specs name tensor {unknown[0]!r}, which is not an input of "
                                f"{self.source.title}; its inputs: {choices(tensors)}")
        for n, spec in specs.items():
            check_row_spec(n, tensors[n].shape, mesh.names, spec)
        return specs

    def _load_tensors(self, pinned: Mapping | None = None) -> None:
        """The editor's rows for the source's tensors now; `pinned` specs are set as picks."""
        self._muted += 1
        try:
            try:
                tensors = self.source.tensors()
            except ExplorerError:
                return          # _request reports it on the source's error line
            self.specs_editor.set_tensors(tensors, self._axis_names, pinned)
            self.specs_editor.pinned |= set(pinned or {})
            for n in pinned or {}:
                if n in self.specs_editor.rows:
                    self.specs_editor.rows[n].widget.add_class("explorer-pinned")
        finally:
            self._muted -= 1

    def _picked(self, tensor: str | None) -> None:
        if self._muted:
            return
        self._edited()

    def _layout_changed(self) -> None:
        """A new preset or rules re-place every tensor the user did not pick: a pick is the
        user's, which no rule replaces (the kept-picks note names those the rules would)."""
        self._edited()

    def _release_picks(self, names: list[str]) -> None:
        """Hand `names` back to the preset and rules (the kept-picks note's button)."""
        self.specs_editor.release(names)
        self._edited()

    def _kept_over_rules(self, mesh, pinned, preset, rules) -> dict:
        """The picks the preset or rules would place otherwise: name -> (pick, theirs)."""
        if not pinned or not (preset or rules):
            return {}
        try:
            theirs = self.source.place(mesh, {}, preset, rules).specs
        except ExplorerError:
            return {}
        def layout(spec) -> tuple:          # () and (None, None) are one layout
            spec = tuple(spec)
            while spec and spec[-1] is None:
                spec = spec[:-1]
            return spec

        return {n: (tuple(spec), tuple(theirs[n])) for n, spec in pinned.items()
                if n in theirs and layout(theirs[n]) != layout(spec)}

    def _source_reset(self) -> None:
        """A different program (another workload): nothing the user picked applies, nor the
        rules a searched candidate put in the rules box (rules the user typed stay)."""
        if self._applied_rules and self.rules_w.value == self._applied_rules:
            self._muted += 1
            try:
                self.rules_w.value = ""
            finally:
                self._muted -= 1
        self._applied_rules = None
        self.specs_editor.release()
        self.specs_editor.set_tensors([], self._axis_names)
        self._load_tensors()
        self.header.value = (STYLE + "<h3 style='margin:4px 0'>sharding-explorer · "
                             f"<code>{html.escape(self.source.title)}</code></h3>")
        self._edited()

    def _inputs_changed(self) -> None:
        """The source's params moved: rows at the new sizes, keeping specs where ranks hold."""
        if self._muted:
            return
        self._load_tensors()            # picks of tensors whose rank held stay picked
        self._edited()

    # ------------------------------------------------------------------ edit -> compile

    def _clear_errors(self) -> None:
        self.specs_editor.clear_errors()
        for r in self.mesh_editor.rows:
            r.error.value = ""
        self.mesh_editor.error.value = self.source.error.value = self.error_w.value = ""
        self.target_error.value = self.layout_error.value = ""
        self.target_offer.offer(None)

    @staticmethod
    def _put(where: w.HTML, e: ExplorerError):
        where.value = html.escape(app_language(str(e)))
        return e

    def _mesh(self) -> MeshSpec:
        """The edited mesh, checked by the request validator; on success the spec pickers move
        to its axes (a renamed axis keeps its picks) and the targets to its device count."""
        mesh = self.mesh_editor.mesh()          # errors sit on the row at fault
        try:
            mesh = check_mesh(mesh)
        except MeshError as e:
            raise self._put(self.mesh_editor.error, e) from None
        renames = self.mesh_editor.renames()
        self.specs_editor.set_axes(mesh.names, renames)
        self._carried = carried_renames(self._carried, self._axis_names, mesh.names, renames)
        self._rename_in_rules(mesh.names, renames)
        self.mesh_editor.commit()
        self._axis_names = mesh.names
        options = target_options(mesh.device_count, self.target_w.value)
        if self.target_w.options != tuple(options):
            value = self.target_w.value
            self.target_w.options = options
            self.target_w.value = value
        return mesh

    def _removed_axes(self) -> set[str]:
        """The axes the app opened with (or added) that the user has removed since."""
        return {first for first, now in self._carried.items() if now is None}

    def _rename_in_rules(self, names: tuple[str, ...], renames: Mapping[str, str]) -> None:
        """Carry renamed mesh axes into the rules box. Rules that do not parse are left as
        they are (their error shows under the box)."""
        text = self.rules_w.value.strip()
        if not renames or not text:
            return
        known = LOGICAL_NAMES + tuple(d for t in self._tensors_or_none() for d in t.logical or ()
                                      if d)
        try:
            table = parse_rules(text, known)
        except ExplorerError:
            return
        renamed = Rules(tuple(replace(r, entry=renamed_spec((r.entry,), names, renames)[0])
                              for r in table.rules))
        if renamed != table:
            self._muted += 1
            try:
                self.rules_w.value = renamed.text()
            finally:
                self._muted -= 1

    def _tensors_or_none(self) -> list:
        try:
            return self.source.tensors()
        except ExplorerError:
            return []

    def _request(self) -> Request:
        """Validate the edited state with explorer.api.request, as the API and the CLI do;
        each error is shown next to the widget at fault and raised."""
        self._clear_errors()
        mesh = self._mesh()
        try:
            tensors = self.source.tensors()
        except ExplorerError as e:
            raise self._put(self.source.error, e) from None
        editor = self.specs_editor
        pinned = {n: editor.spec(n) for n in editor.tensors if n in editor.pinned}
        preset, rules = self.preset_w.value or None, self.rules_w.value.strip() or None
        try:
            placement = self.source.place(mesh, pinned, preset, rules)
        except ExplorerError as e:
            raise self._put(self.layout_error, e) from None
        self.kept_picks.show(self._kept_over_rules(mesh, pinned, preset, rules))
        if self._carried:
            # A spec the source gives (a TensorSpec's own, a pattern's) follows the axes renamed
            # in the editor, as the picks do; a removed axis leaves it.
            renames = {a: b for a, b in self._carried.items() if b is not None}
            specs = {n: spec if n in pinned else renamed_spec(spec, mesh.names, renames,
                                                              dropped=self._removed_axes())
                     for n, spec in placement.specs.items()}
            placement = replace(placement, specs=specs)
        failed = None
        for n, spec in placement.specs.items():
            if n not in pinned:
                try:
                    editor.set_spec(n, spec)
                except SpecError as e:     # the row shows the error; its pickers keep theirs
                    editor.show_error(n, app_language(str(e)))
                    failed = failed or e
        inputs = [TensorSpec(t.name, t.shape, t.dtype, placement.specs[t.name]) for t in tensors]
        for t in inputs:            # one at a time, so that every row at fault shows its error
            if t.name in editor.errors:
                continue
            try:
                check_inputs([t], mesh)
            except (SpecError, TensorError) as e:
                editor.show_error(t.name, app_language(str(e)))
                failed = failed or e
        if failed:
            raise failed
        try:
            self.source.check(placement, inputs, mesh)
        except MeshError as e:
            raise self._put(self.mesh_editor.error, e) from None
        except SpecError as e:
            raise self._put(self.layout_error, e) from None
        except ExplorerError as e:
            raise self._put(self.source.error, e) from None
        partitioner = check_partitioner(self.partitioner_w.value)
        target, mapping = self.target_w.value or None, self.mapping_w.value.strip() or None
        self.prediction_note = self.matching_target = None
        self.mapping_w.placeholder = mapping_placeholder(target, mesh)
        try:
            check_target(target, mapping, mesh)
        except ExplorerError as e:
            if mapping is not None:
                # A mapping the user typed is an input like any other: refused at its box,
                # the last result kept, never a silent switch to a compile without it.
                raise self._put(self.target_error, e) from None
            # A target that does not fit the mesh: the program still compiles; only the
            # prediction needs a target that fits.
            self.prediction_note = app_language(str(e))
            self.target_error.value = html.escape(
                f"no prediction: {self.prediction_note}")
            self.matching_target = matching_target(self.target_w.value, mesh.device_count)
            self.target_offer.offer(self.matching_target)
            target = mapping = None
        params = self.source.resolved() if isinstance(self.source, WorkloadSource) else {}
        compile_for = CompileFor.CPU if self.cpu_w.value else CompileFor.TARGET
        measurable = self._offer_measure(mesh, target, compile_for)
        return Request(mesh=mesh, specs=dict(placement.specs), pinned=pinned,
                       placement=placement, params=params, preset=preset, rules=rules,
                       partitioner=partitioner, target=target, mapping=mapping,
                       measure=self.measure_w.value and measurable,
                       unavailable=self.prediction_note, compile_for=compile_for,
                       origins=self.origins.ask.value)

    def _offer_measure(self, mesh: MeshSpec, target: str | None,
                       compile_for: CompileFor) -> bool:
        """Whether this request's program can run here (a compile on CPU devices can; one
        for a GPU or TPU, made ahead of time, cannot): the measure box is offered only then,
        and says so otherwise."""
        runs_here = compile_plan(mesh, target, compile_for).worker.backend is Backend.FAKE_CPU
        self.measure_w.disabled = not runs_here
        self.measure_w.description = (MEASURE_LABEL if runs_here else
                                      MEASURE_LABEL + ": only a compile on CPU devices runs "
                                      "here; tick the box above")
        return runs_here

    def _use_target(self, name: str) -> None:
        """Pick `name` (a target offered because it fits the mesh); the pick recompiles."""
        if name not in [v for _, v in self.target_w.options]:
            self.target_w.options = [*self.target_w.options, (name, name)]
        self.target_w.value = name

    def _edited(self, wait: bool = False, apply: bool = False) -> None:
        """An edit: check the sidebar, then show its result from the cache, compile it (the
        scheduler decides when), or with live updates off keep it for Apply. `wait`: compile
        now and block (the first result); `apply`: the Apply button."""
        if self._muted:
            return
        self._generation += 1
        self._edited_at = time.perf_counter()      # the status says how long the answer took
        # Said before any work: validating, planning and the cache lookup of a large model take
        # seconds, and a widget's new value reaches the page as soon as it is set.
        self._set_status("◌ working…")
        self._muted += 1      # set_axes and set_spec in _request touch pickers
        try:
            request = self._request()
        except ExplorerError as e:
            self._discard()
            self._show_error(str(e))
            return
        finally:
            self._muted -= 1
        self.error = None
        if not (self.live_w.value or apply or wait):
            self._discard()
            self._waiting = request
            self.tabs.add_class("explorer-stale")
            self._set_status("⏸ live updates off: the edits are checked, not compiled; press "
                             "Apply edits" + ("; showing the last result, greyed" if self.report
                                              else ""))
            return
        self._waiting = None
        try:
            session = self._session_for(request)
        except ExplorerError as e:
            self._show_error(str(e))
            return
        generation = self._generation
        loop = _running_loop()
        if loop is None or self.debounce is None or wait:
            session.discard()
            self._finish(generation, request, self._run(session, request))
            return
        analysis = session.request
        if session.busy:
            self._set_status("◌ waiting for the compile in flight (an earlier edit); this edit "
                             "compiles next, with any made meanwhile")
        hit = session.schedule(loop, self._guard(functools.partial(self._answered, generation,
                                                                   request)),
                               self._guard(lambda _: self._compile_started(generation)))
        if hit is None and not session.busy and \
                session.quiet_before(analysis) >= COLD_WORKER_QUIET_S:
            self._set_status(f"◌ starting a compile worker in {COLD_WORKER_QUIET_S:.1f} s, "
                             "unless the edit changes again meanwhile")

    def _busy(self) -> bool:
        return self.session is not None and self.session.busy

    def _discard(self) -> None:
        """Forget an edit waiting to compile: a newer one needs none."""
        if self.session is not None:
            self.session.discard()

    def _session_for(self, request: Request) -> Session:
        """The session, its current request made from the checked app request `request`."""
        analysis = self.source.analysis(request)
        if self.session is None:
            self.session = Session(analysis, pool=self.pool, debounce=self.debounce or 0.0,
                                   executor=self._executor)
        else:
            self.session.set_request(analysis)
        return self.session

    def _answered(self, generation: int, request: Request, result) -> None:
        """The session answered edit `generation` (a Result, or the error its compile
        raised)."""
        if isinstance(result, Exception):
            self._finish(generation, request, result)
        else:
            self._finish(generation, request, self.source.describe(result.report, request))

    def _live_changed(self) -> None:
        """Live updates on: compile what was edited while they were off; off: show Apply."""
        self.apply_w.layout.display = "none" if self.live_w.value else ""
        if self.live_w.value and self._waiting is not None:
            self._edited()

    def _compile(self, request: Request, cache_only=False):
        return self.source.compile(request, self.pool, cache_only)

    def _run(self, session: Session, request: Request):
        """The Report of the session's current request (made from `request`), compiled here,
        or the error it raised (shown by _finish)."""
        try:
            result = session.analyze()
        except Exception as e:
            return e
        return self.source.describe(result.report, request)

    def _compile_started(self, generation: int) -> None:
        """Say that edit `generation`'s compile runs, and for how long, while the app's latest
        edit waits on it."""
        self._compiling = generation
        loop, started = _running_loop(), time.perf_counter()

        def tick():
            if self._compiling != generation or not self._busy():
                return
            took = time.perf_counter() - started
            if generation == self._generation:
                # "starting a compile worker for 8 devices" while a worker's jax loads (the
                # first compile, or the first after an idle worker was closed), else compiling.
                activity = (self.pool or default_pool()).activity()
                self._set_status(f"◌ {activity}… {took:.1f} s")
            elif self.session is not None and self.session.waiting:
                self._set_status(f"◌ compiling an earlier edit… {took:.1f} s; the latest "
                                 "compiles next (one compile for the edits made meanwhile)")
            if loop is not None:
                loop.call_later(0.2, tick)

        tick()

    def _finish(self, generation, request, result) -> None:
        self._compiling = None
        if generation != self._generation:
            return            # a newer edit was made: its result (or error) is shown instead
        if isinstance(result, ExplorerError):
            self._show_error(str(result))
        elif isinstance(result, Exception):
            self._show_unexpected(result)
        else:
            self._show(result, request)

    # ------------------------------------------------------------------ drawing

    def _set_status(self, text: str) -> None:
        self.status.value = (f"<span data-result='{self.result_id}'>{html.escape(text)}"
                             "</span>")

    def _show_error(self, message: str, force: bool = False) -> None:
        """Show `message` unless an inline error already says it (`force`: show it anyway)."""
        message = app_language(message)
        self.error = message
        at_fault = self._inputs_at_fault()
        if force or not at_fault:
            self.error_w.value = html.escape(message)
        self.tabs.add_class("explorer-stale")
        stale = "; showing the last good result, greyed" if self.report else ""
        # The input is named: in a long sidebar its red message may be below the fold.
        self._set_status((f"⚠ error: fix the highlighted input ({', '.join(at_fault)})"
                          if at_fault and not force else "⚠ error: see the message below")
                         + stale)

    def _inputs_at_fault(self) -> list[str]:
        """The sidebar inputs showing an error, as the status line names them."""
        mesh = any(r.error.value for r in self.mesh_editor.rows) or self.mesh_editor.error.value
        specs = list(self.specs_editor.errors)
        boxes = [("the mesh", mesh), ("the workload or its inputs", self.source.error.value),
                 ("the preset or rules", self.layout_error.value),
                 ("the specs" + (" of " + ", ".join(specs[:3]) if specs else "")
                  + (" …" if len(specs) > 3 else ""),
                  specs or self.specs_editor.error_summary.value),
                 # The target box's note is an error only when no prediction note is shown.
                 ("the target or mapping",
                  self.target_error.value and self.prediction_note is None)]
        return [name for name, shown in boxes if shown]

    def _show(self, report: Report, request: Request | None = None) -> None:
        """Show `report`, the answer to `request`: it becomes the current result, the visible
        tab is drawn for it and the others are hidden until they are."""
        unavailable = request.unavailable if request is not None else None
        self.report, self.request, self.error, self.unexpected = report, request, None, None
        self.unavailable = unavailable
        self.result_id += 1
        self.tabs.remove_class("explorer-stale")
        self._set_status(status_text(report, time.perf_counter() - self._edited_at,
                                     unavailable))
        self.compiled_for.value = compiled_for_html(report)
        self.warnings_w.value = warnings_html(report)
        self.selected = None
        self._muted += 1
        try:
            self._list_tensors(redraw=False)
            self.collectives.pick.options = self.collectives.options(report)
            self.collectives.pick.value = -1
        finally:
            self._muted -= 1
        self.why.clear()
        if self._applied is not None:
            candidate, before = self._applied
            self._applied = None
            if request is not None and request.specs.get(candidate.tensor) == candidate.spec:
                self.why.show_applied(candidate, compare(before, report))
        self.collectives.target_offer.offer(self.matching_target if unavailable else None)
        # The cheap text views are kept current in hidden tabs too (a page can read them); their
        # tabs stay hidden until their figures are drawn.
        self.collectives.table.value = stamped(collectives_html(report, unavailable=unavailable),
                                               self.result_id)
        self.collectives.result = self.result_id
        self.timing.text.value = stamped(timing_html(report, unavailable) + self._spent_html(),
                                         self.result_id)
        self.share.update()
        self._drawn = {}
        for index, child in enumerate(self.tabs.children):
            # Suggest's search is not this result's; the visible tab is drawn next, in place:
            # hidden first, a reader would see it blank between the two messages (a flicker).
            if TAB_TITLES[index] != "Suggest" and index != self.tabs.selected_index:
                child.add_class("explorer-outdated")
        drawing = time.perf_counter()
        self._draw_tab(self.tabs.selected_index)
        if self.session is not None:
            self.session.drawn(self.session.generation, time.perf_counter() - drawing)

    def _spent_html(self) -> str:
        """Where the wait for the session's current result went, under the Timing tab's text
        (drawing is counted in the session after the tab is drawn)."""
        result = self.session.result if self.session is not None else None
        if result is None or result.generation != self.session.generation:
            return ""
        return (f"<p class='explorer-note'>This answer took {html.escape(result.spent.text())}"
                "</p>")

    def _draw_tab(self, index) -> None:
        """Draw tab `index` for the current result, unless its views drew it already."""
        if self.report is None or index is None:
            return
        title = TAB_TITLES[index]
        if title == "Suggest":
            self.suggest.refresh()
            return
        if self._drawn.get(index) == self.result_id:
            return
        result = self.result_id
        if title == "Placement":
            self._draw_placement()
        elif title == "Collectives":
            self.collectives.draw(self.report, self.selected, self.unavailable, result)
        elif title == "Memory":
            self.memory.update(self.report, result)
        elif title == "Timing":
            self.timing.update(self.report, self.unavailable, result)
        elif title == "HLO":
            self.hlo.value = stamped(hlo_html(self.report, self.hlo_which.value, self.selected),
                                     result)
            self.graph.update(self.report, self.selected, result)
            self.code.update(self.report)
        elif title == "Compare":
            self.compare.update(self.report)
        self._drawn[index] = result
        self.tabs.children[index].remove_class("explorer-outdated")

    def _redraw(self, title: str) -> None:
        """Draw tab `title` again (now if it is visible, else when it is next shown)."""
        index = TAB_TITLES.index(title)
        self._drawn.pop(index, None)
        if index != self.tabs.selected_index:
            self.tabs.children[index].add_class("explorer-outdated")
        self._draw_tab(self.tabs.selected_index)

    def drawn_results(self, title: str | None = None) -> dict[str, int | None]:
        """The id of the result each view of tab `title` (the visible one by default) drew,
        by view: its figures' stamps and its text's. A view with nothing to draw (no
        collective picked, no timeline without a target) is left out."""
        title = title or TAB_TITLES[self.tabs.selected_index]
        tab = self._drawn.get(TAB_TITLES.index(title))
        if title == "Placement":
            figs = {"blocks": self.placement.blocks, "device grid": self.placement.mesh}
            text = {"legend": tab}
        elif title == "Collectives":
            figs = {"device groups": self.collectives.groups,
                    **{f"why layout {k}": f for k, f in enumerate(self.why.figs)}}
            text = {"table": self.collectives.result}
        elif title == "Memory":
            figs, text = {"chart": self.memory.fig}, {"numbers": tab}
        elif title == "Timing":
            figs = {"timeline": self.timing.trace_fig, "roofline": self.timing.roofline,
                    "schedule": self.timing.schedule}
            text = {"text": self.timing.result}
        elif title == "HLO":
            figs, text = {"dataflow graph": self.graph.fig}, {"module text": tab}
        else:
            figs, text = {}, {title.lower(): tab}
        return {**{k: drawn_result(f) for k, f in figs.items() if f is not None}, **text}

    def _tensor_picked(self) -> None:
        if not self._muted:
            self._redraw("Placement")

    def _list_tensors(self, redraw: bool = True) -> None:
        """The placement picker's entries for the current report, keeping the selection; the
        tab is drawn again when the picked tensor changes (`redraw`)."""
        if self.report is None:
            return
        options = tensor_options(self.report, self.placement.plumbing.value)
        keep = self.placement.tensor.value
        names = [v for _, v in options]
        self._muted += 1
        try:
            self.placement.tensor.options = options
            self.placement.tensor.value = keep if keep in names else self._default_tensor(names)
        finally:
            self._muted -= 1
        if redraw and self.placement.tensor.value != keep:
            self._redraw("Placement")

    def _default_tensor(self, names: list[str]) -> str:
        """The tensor the Placement tab opens on: the program's data (an input the sidebar
        lists under "inputs", as a batch), else its first input of two or more dimensions,
        else the first listed. A model's parameters come first, and its first is often a bias,
        the least telling picture of a layout."""
        data = [t.name for t in self._tensors_or_none() if t.group == GROUP_OF_KIND["input"]]
        ranked = [t.name for t in self.report.tensors
                  if t.kind == TensorRole.INPUT and len(t.shape) >= 2]
        return next((n for n in data + ranked if n in names), names[0])

    def _draw_placement(self) -> None:
        if self.report is None or self.placement.tensor.value is None:
            return
        name = self.placement.tensor.value
        blocks = placement_grid(self.report, name, self.source.dim_names(self.report, name))
        legend = legend_html(blocks, f"block of {name}: a block and the devices holding it "
                                     "share a colour")
        self.placement.draw(blocks, mesh_grid(self.report, name),
                            stamped(legend, self.result_id), self.result_id)
        self.origins.draw(self.report, name, self.result_id)
        self._show_origin_path()

    def _show_origin_path(self) -> None:
        """The HLO tab's graph draws the path of the tensor the Placement tab explains, when
        asked there (drawn again when it changes)."""
        tensor = self.origins.path_tensor
        if tensor != self.graph.path_tensor:
            self.graph.path_tensor = tensor
            self._redraw("HLO")

    def _select_collective(self, index) -> None:
        if self._muted or self.report is None:
            return
        self.selected = index
        self._redraw("HLO")                     # its highlighted line follows
        self._redraw("Collectives")
        if index is None:
            self.why.clear()
        else:
            self.why.show(self.report, index, self.result_id)
            self._search_what_ifs(index)

    # ------------------------------------------------------------------ what-ifs

    def _search_what_ifs(self, index: int) -> None:
        """Compile the single-input spec changes that might remove or shrink collective
        `index` (in the background where an event loop runs), and offer those whose report
        moves fewer bytes on its source line: only what a compile confirmed. Each confirmed
        change to a layer's tensor is then compiled once more as a pattern over every layer's
        copy of it, offered where it leaves less of the collective's repeats."""
        report, request = self.report, self.request
        if request is None:
            return
        shapes = {t.name: t.shape for t in self.specs_editor.tensors.values()}
        found = candidates(report, index, request.specs, shapes, request.mesh)
        untried = why_untried(report.collectives[index], found)
        if untried:
            self.why.offer([], untried)
            return
        generation = self._generation

        def compiled(cand: Candidate) -> Report | None:
            variant = replace(request, specs={**request.specs, **cand.specs},
                              pinned={**request.pinned, **cand.specs})
            try:
                return self._compile(variant)
            except ExplorerError:
                return None                       # the change does not compile: not offered

        def job():
            kept = confirmed_changes(
                found, report, index, request.specs, shapes, compiled,
                stop=lambda: generation != self._generation or self.selected != index)
            return None if kept is None else [change for change, _ in kept]

        def done(confirmed):
            if confirmed is None or generation != self._generation or self.selected != index:
                return
            self.why.offer(confirmed, f"tried {len(found)} single-input change"
                                      f"{'s' if len(found) != 1 else ''}; none moves fewer "
                                      "bytes on this line")

        loop = _running_loop()
        if loop is None or self.debounce is None:
            done(job())
            return
        self.why.searching(len(found))
        future = loop.run_in_executor(self._what_if_executor, job)
        future.add_done_callback(self._guard(lambda f: done(f.result())))

    def _apply_what_if(self, candidate: Candidate) -> None:
        """Set the candidate's specs as the user's picks (one compile for a pattern's many);
        the next result is compared with the one shown now (the variant was compiled already,
        so it comes from the cache)."""
        self._applied = (candidate, self.report)
        self._muted += 1
        try:
            for tensor, spec in candidate.specs.items():
                self.specs_editor.pick(tensor, spec)
        finally:
            self._muted -= 1
        self._edited()

    # ------------------------------------------------------------------ API for scripts

    def set_spec(self, tensor: str, spec) -> None:
        """Set `tensor`'s spec as the user's pick, and recompile."""
        self.specs_editor.pick(tensor, normalize_spec(spec, tensor=tensor))

    def load_layout(self, mesh: MeshSpec, *, rules: str = "", specs: Mapping | None = None,
                    params: Mapping | None = None) -> None:
        """Load a layout into the sidebar and recompile once: a workload's `params` first, the
        mesh, then `rules` (the preset cleared, the picks released) and each of `specs` as a
        pick. The Suggest tab's Apply."""
        self._muted += 1
        try:
            if params and isinstance(self.source, WorkloadSource):
                for key, wid in zip(self.source.workload.defaults,
                                    self.source.params_box.children, strict=True):
                    if key in params and wid.value != params[key]:
                        wid.value = params[key]
                self._load_tensors()
            self.mesh_editor.set_axes(list(zip(mesh.names, mesh.sizes, strict=True)))
            self.mesh_editor.commit()
            self.specs_editor.set_axes(mesh.names, {})
            self._axis_names = mesh.names
            self._carried = {}              # a new mesh, not an edit of the one before
            self.preset_w.value = ""
            self.rules_w.value = rules
            self.specs_editor.release()
            for name, spec in (specs or {}).items():
                self.specs_editor.pick(name, normalize_spec(spec, tensor=name))
        finally:
            self._muted -= 1
        self._edited()

    def _search_snapshot(self) -> tuple[Source, Request]:
        """The source and its checked request now: what a search started now searches."""
        if self.error is not None:
            raise InputError(self.error)
        self._muted += 1
        try:
            return self.source, self._request()
        finally:
            self._muted -= 1

    def _apply_suggestion(self, job: SearchJob, candidate: SearchCandidate) -> None:
        """Load a searched candidate: rules (and a pipeline's params) or every input's spec."""
        params = None
        if job.workload is not None:
            if not isinstance(self.source, WorkloadSource) or self.source.title != job.workload:
                raise WorkloadError(f"this search was of workload {job.workload!r}, and the app "
                                    f"now shows {self.source.title!r}; pick workload "
                                    f"{job.workload} again, or search again")
            params = {**job.request.params, **candidate.params}
        if job.space == "specs":
            self.load_layout(candidate.mesh, specs=candidate_specs(candidate), params=params)
        else:
            self.load_layout(candidate.mesh, rules=candidate.rules, params=params)
            self._applied_rules = candidate.rules

    def close(self) -> None:
        self.suggest.close()
        if self.session is not None:
            self.session.close()
        self._executor.shutdown(wait=False)
        self._what_if_executor.shutdown(wait=False)
        self.widget.close()


def status_text(report: Report, waited_s: float, unavailable: str | None = None) -> str:
    """The status line for `report`, shown `waited_s` after the edit it answers: how long the
    user waited and what took the time (the compile, the compile worker's start, an earlier
    edit's compile or the debounce), so that a 23 s wait never reads as "0.36 s"."""
    t = report.timing
    if t.cached:
        took = (f"cached: answered in {t.lookup_s:.2f} s (compiled earlier in "
                f"{t.lower_s + t.compile_s:.2f} s)")
    else:
        took = f"compiled in {t.lower_s + t.compile_s:.2f} s"
        if t.worker_start_s >= 0.05:
            took += f" after {t.worker_start_s:.1f} s starting the compile worker"
        accounted = t.lower_s + t.compile_s + t.worker_start_s
        if waited_s - accounted >= 1.0:
            # The rest: the pause before a compile starts, an earlier edit's compile in
            # flight, reading the result.
            took += f"; {waited_s:.1f} s since the edit"
    collectives = len(report.collectives)
    text = (f"● {took} · {report.mesh.device_count} devices · {collectives} collective"
            f"{'s' if collectives != 1 else ''}")
    if unavailable:
        text += " · no prediction (see the target)"
    return text


def compiled_for_html(report: Report) -> str:
    """What compiled the program shown, one line under the status; an approximate one (a CPU
    compile priced on a GPU or TPU) is marked so."""
    text = html.escape(provenance(report))
    mark = "⚠ " if report.approximation else ""
    return f"<div>{mark}{text}</div>"


def warnings_html(report: Report) -> str:
    """What XLA printed and what the explorer could not read, as a badge with its count; the
    list opens on a click and shows on hover."""
    items = [("XLA", str(w)) for w in report.warnings] + [("note", text)
                                                          for text in report.notes]
    if not items:
        return ""
    hover = html.escape("\n".join(f"{who}: {text}" for who, text in items), quote=True)
    n_warn, n_note = len(report.warnings), len(report.notes)
    label = " · ".join(part for part in (
        f"{n_warn} warning{'s' if n_warn != 1 else ''}" if n_warn else "",
        f"{n_note} note{'s' if n_note != 1 else ''}" if n_note else "") if part)
    rows = "".join(f"<li><b>{who}</b>: {html.escape(text)}</li>" for who, text in items)
    return (f"<details class='explorer-warnings'><summary title='{hover}'>"
            f"<span class='explorer-badge'>⚠ {label}</span></summary><ul>{rows}</ul></details>")


class Explorer(App):
    """The app on a built-in workload (explorer.WORKLOADS): a picker, its params, presets and
    logical-axis rules, and a spec per tensor."""

    def __init__(self, workload: str = "mlp", mesh="data=2,model=4", specs=None, params=None,
                 partitioner: str = "shardy", target: str = "", mapping: str = "",
                 preset: str = "", rules: str = "", debounce: float | None = 0.3, pool=None,
                 compile_for: str = "target"):
        super().__init__(WorkloadSource(workload, params), mesh, specs=specs,
                         partitioner=partitioner, target=target, mapping=mapping, preset=preset,
                         rules=rules, debounce=debounce, pool=pool, compile_for=compile_for)

    @classmethod
    def load(cls, path, *, debounce: float | None = 0.3, pool=None) -> Explorer:
        """The app on the exploration saved in `path` (Exploration.save): its workload,
        params, mesh, specs, preset, rules, partitioner, compile_for, target and mapping, and
        the tab and tensor it showed.

        Raises:
            InputError: the file is not a valid exploration (explorer.load_exploration), or it
                holds what the app does not carry: a user's function (the file has neither it
                nor its inputs), pinned activations, explicit axes or peak rates.
        """
        return cls.from_exploration(load(path), debounce=debounce, pool=pool)

    @classmethod
    def from_exploration(cls, e: Exploration, *, debounce: float | None = 0.3,
                         pool=None) -> Explorer:
        """The app on exploration `e` (see `load`)."""
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
            ("peak rates", e.peak)) if given]
        if missing:
            raise InputError(f"this exploration sets {', '.join(missing)}, which the app does "
                             "not carry; analyse it with exploration.analyze() instead")
        app = cls(workload=e.workload, mesh=e.mesh, specs=dict(e.specs), params=dict(e.params),
                  partitioner=e.partitioner, target=e.target or "", mapping=e.mapping or "",
                  preset=e.preset or "", rules=e.rules, debounce=debounce, pool=pool,
                  compile_for=e.compile_for)
        app.tabs.selected_index = TAB_TITLES.index(e.app.tab)
        if e.app.tensor in [v for _, v in app.placement.tensor.options]:
            app.placement.tensor.value = e.app.tensor
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
