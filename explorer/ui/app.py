"""The explorer app: sidebar editors on the left, views in tabs, recompiling as the user edits.

State lives here and in the editors; edits are validated at once (errors sit next to the widget
at fault, and the last good result stays on screen, greyed as stale), then compiled in a
background thread so the kernel stays responsive. An isolated edit compiles at once; edits made
while one waits or compiles are merged after a short debounce. Results from superseded edits
are dropped.
"""

from __future__ import annotations

import asyncio
import functools
import html
import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor

import ipywidgets as w

from explorer.api.request import check_inputs, check_mesh, check_partitioner, check_target
from explorer.api.workload import analyze_workload
from explorer.cost.hardware import get_target, targets
from explorer.errors import ExplorerError, MeshError, SpecError, TensorError, WorkloadError
from explorer.report.report import Report
from explorer.spec.mesh import MeshSpec, parse_mesh
from explorer.spec.tensor import normalize_spec
from explorer.strategy.plan import check_planned, plan
from explorer.strategy.presets import PRESETS, get_preset
from explorer.ui.compare import CompareView
from explorer.ui.editors import MeshEditor, SpecRow
from explorer.ui.graph import GraphView
from explorer.ui.grids import group_grid, mesh_grid, placement_grid
from explorer.ui.views import (
    CollectivesView,
    MemoryView,
    PlacementView,
    TimingView,
    collectives_html,
    draw_grid,
    hlo_html,
    legend_html,
    tensor_options,
    timing_html,
)
from explorer.workloads.registry import WORKLOADS, get_workload

STYLE = """<style>
.explorer-error { color: #b00020; font-size: 12px; }
.explorer-stale { opacity: 0.45; filter: grayscale(0.6); }
.explorer-table-wrap { max-width: 100%; overflow-x: auto; }
.explorer-table { border-collapse: collapse; font-size: 12px; }
.explorer-table th, .explorer-table td { border-bottom: 1px solid #ddd; padding: 2px 6px;
  text-align: left; white-space: nowrap; }
.explorer-table td.explorer-where { white-space: normal; }
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
</style>"""


TAB_TITLES = ["Placement", "Collectives", "Memory", "Timing", "HLO", "Compare"]


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
    """The targets with `devices` devices, grouped by family (GPU, TPU, then the rest), and
    `current` kept (marked) when it does not match, so that a selection is never lost."""
    family_order = {"gpu": 0, "tpu": 1}
    fitting = [t for t in targets().values() if t.chips == devices]
    fitting.sort(key=lambda t: family_order.get(t.family, 2))      # stable: catalog order within
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


class Explorer:
    """An interactive view of what the partitioner did, for one built-in workload.

    Display it in a notebook cell; `Explorer.widget` is the ipywidgets AppLayout. With
    `debounce=None`, or when no event loop runs (plain Python, tests), edits compile at once.
    Every widget callback is guarded: an unexpected error is shown in the app, never raised into
    the kernel, and the next edit starts afresh.
    """

    def __init__(self, workload: str = "mlp", mesh="data=2,model=4", specs=None, params=None,
                 partitioner: str = "shardy", target: str = "", mapping: str = "",
                 preset: str = "", rules: str = "", debounce: float | None = 0.3, pool=None):
        self.debounce, self.pool = debounce, pool
        self.report: Report | None = None
        self.error: str | None = None
        self.unexpected: BaseException | None = None     # the last error that was a bug
        self.prediction_note: str | None = None          # why the last request has no target
        self.unavailable: str | None = None              # why the shown report has none
        self.selected: int | None = None
        self._generation = 0
        self._muted = 0
        # Only the visible tab is drawn; the others are drawn when shown (indices drawn for the
        # current report are kept here). It keeps an edit's redraw short, and a plotly view
        # restyled while its tab was hidden was seen (Voila, plotly 7) to draw wrong axes or
        # stale data when the tab was shown again.
        self._drawn: set[int] = set()
        self._timer = None          # the scheduled start of a compile, while one waits
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="explorer")
        get_workload(workload)
        check_partitioner(partitioner)
        mesh_spec = parse_mesh(mesh)
        # The axes of the last valid mesh: what the spec pickers offer.
        self._axis_names: tuple[str, ...] = mesh_spec.names
        guard = self._guard

        self.workload_w = w.Dropdown(options=list(WORKLOADS), value=workload,
                                     description="workload")
        self.params_box = w.VBox()
        self.params_error = w.HTML()
        self.params_error.add_class("explorer-error")
        self.mesh_editor = MeshEditor(list(zip(mesh_spec.names, mesh_spec.sizes, strict=True)),
                                      guard(self._edited))
        self.mesh_editor.commit()
        self.specs_box = w.VBox()
        self.spec_rows: dict[str, SpecRow] = {}
        # Tensors whose picker the user set: their spec wins over the preset and rules; the
        # other pickers show what the preset and rules resolve to.
        self.pinned: set[str] = set(specs or {})
        if preset:
            get_preset(preset)
        self.preset_w = w.Dropdown(options=[("— none —", "")] + [(n, n) for n in PRESETS],
                                   value=preset, description="preset")
        self.rules_w = w.Text(value=rules, description="rules", continuous_update=False,
                              placeholder="e.g. batch=data,mlp=model,opt:embed=data")
        self.layout_error = w.HTML()
        self.layout_error.add_class("explorer-error")
        self.partitioner_w = w.ToggleButtons(options=[("Shardy", "shardy"), ("GSPMD", "gspmd")],
                                             value=partitioner, description="partitioner",
                                             style={"button_width": "70px"})
        target = get_target(target).name if target else ""
        self.target_w = w.Dropdown(options=target_options(mesh_spec.device_count, target),
                                   value=target, description="target")
        self.mapping_w = w.Text(value=mapping, description="mapping", continuous_update=False,
                                placeholder="default, e.g. data=node,model=gpu")
        self.measure_w = w.Checkbox(value=False, description="measure a real run (this CPU)",
                                    indent=False)
        self.target_error = w.HTML()
        self.target_error.add_class("explorer-error")
        self.status = w.HTML()
        self.status.add_class("explorer-status")
        self.error_w = w.HTML()
        self.error_w.add_class("explorer-error")

        self.placement = PlacementView(guard(lambda _: self._draw_placement()),
                                       guard(lambda _: self._list_tensors()))
        self.collectives = CollectivesView(guard(self._select_collective))
        self.memory = MemoryView()
        self.timing = TimingView()
        self.hlo_which = w.ToggleButtons(options=["optimized", "propagated", "stablehlo"])
        self.hlo_which.observe(guard(lambda _: self._redraw("HLO")), "value")
        self.hlo = w.HTML()
        self.graph = GraphView()
        self.compare = CompareView(lambda: self.report)
        self.tabs = w.Tab(children=[self.placement.widget, self.collectives.widget,
                                    self.memory.widget, self.timing.widget,
                                    w.VBox([self.hlo_which, self.graph.widget, self.hlo]),
                                    self.compare.widget])
        for i, title in enumerate(TAB_TITLES):
            self.tabs.set_title(i, title)
        self.tabs.observe(guard(lambda change: self._draw_tab(change["new"])), "selected_index")

        sidebar = w.VBox([self.workload_w, self.params_box, self.params_error,
                          self.mesh_editor.widget, self.preset_w, self.rules_w,
                          self.layout_error, w.HTML("<b>Specs</b> (mesh axes per dimension)"),
                          self.specs_box, self.partitioner_w, self.target_w, self.mapping_w,
                          self.target_error, self.measure_w, self.status, self.error_w],
                         layout=w.Layout(width="440px"))
        header = w.HTML(STYLE + "<h3 style='margin:4px 0'>sharding-explorer</h3>")
        self.widget = w.AppLayout(header=header, left_sidebar=sidebar, center=self.tabs,
                                  pane_widths=["460px", 1, 0], pane_heights=["50px", 1, 0])
        self.widget.add_class("explorer-app")

        self.workload_w.observe(guard(lambda _: self._workload_changed()), "value")
        for wid in (self.partitioner_w, self.target_w, self.mapping_w, self.measure_w):
            wid.observe(guard(lambda _: self._edited()), "value")
        for wid in (self.preset_w, self.rules_w):
            wid.observe(guard(lambda _: self._layout_changed()), "value")
        specs = {n: normalize_spec(s, tensor=n) for n, s in (specs or {}).items()}
        self._build_workload(params or {}, specs)
        # The first result is computed before the cell returns, so the app appears complete.
        self._edited(wait=True)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

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

    def _build_workload(self, params: dict, specs: dict) -> None:
        workload = get_workload(self.workload_w.value)
        self._muted += 1
        try:
            widgets = []
            for key, default in workload.defaults.items():
                value = params.get(key, default)
                if isinstance(default, str):
                    wid = w.Text(value=str(value), description=key, continuous_update=False)
                elif isinstance(default, int):
                    wid = w.IntText(value=int(value), description=key)
                else:
                    wid = w.FloatText(value=float(value), description=key)
                wid.layout.width = "220px"
                wid.observe(self._guard(lambda _: self._params_changed()), "value")
                widgets.append(wid)
            self.params_box.children = widgets
            self._build_specs(specs)
        finally:
            self._muted -= 1

    def _build_specs(self, specs: dict) -> None:
        """Spec rows for the workload's tensors at the current sizes, keeping picked specs.

        The pickers offer the axes of the last valid mesh, never a name still being typed."""
        workload = get_workload(self.workload_w.value)
        try:
            shapes = workload.shapes(workload.resolve(self.params))
        except ExplorerError:
            return           # _request reports it on the params
        old = {n: r.spec for n, r in self.spec_rows.items()}
        rows = {}
        for n, shape in shapes.items():
            spec = specs.get(n)
            if spec is None:
                spec = old.get(n, ())
                if len(spec) != len(shape):
                    spec = ()    # a rank that changed with the params: start unsplit
            rows[n] = SpecRow(n, shape, self._axis_names, spec,
                              self._guard(lambda n=n: self._picked(n)))
            if n in self.pinned:
                rows[n].widget.add_class("explorer-pinned")
        self.spec_rows = rows
        self.specs_box.children = [r.widget for r in self.spec_rows.values()]

    @property
    def params(self) -> dict:
        workload = get_workload(self.workload_w.value)
        return {k: wid.value for k, wid in zip(workload.defaults, self.params_box.children,
                                                strict=True)}

    def _picked(self, tensor: str) -> None:
        if self._muted:
            return
        self.pinned.add(tensor)
        self.spec_rows[tensor].widget.add_class("explorer-pinned")
        self._edited()

    def _layout_changed(self) -> None:
        """A new preset or rules re-place every tensor: the user's picks are released."""
        self.pinned.clear()
        for row in self.spec_rows.values():
            row.widget.remove_class("explorer-pinned")
        self._edited()

    def _workload_changed(self) -> None:
        self.pinned.clear()
        self.spec_rows = {}
        self._build_workload({}, {})
        self._edited()

    def _params_changed(self) -> None:
        if self._muted:
            return
        self._muted += 1
        try:
            self._build_specs({})
        finally:
            self._muted -= 1
        self._edited()

    # ------------------------------------------------------------------ edit -> compile

    def _clear_errors(self) -> None:
        for row in self.spec_rows.values():
            row.error.value = ""
        for r in self.mesh_editor.rows:
            r.error.value = ""
        self.mesh_editor.error.value = self.params_error.value = self.error_w.value = ""
        self.target_error.value = self.layout_error.value = ""

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
        for row in self.spec_rows.values():
            row.set_axes(mesh.names, renames)
        self.mesh_editor.commit()
        self._axis_names = mesh.names
        options = target_options(mesh.device_count, self.target_w.value)
        if self.target_w.options != tuple(options):
            value = self.target_w.value
            self.target_w.options = options
            self.target_w.value = value
        return mesh

    def _request(self):
        """Validate the edited state with explorer.api.request, as the API and the CLI do;
        each error is shown next to the widget at fault and raised."""
        self._clear_errors()
        mesh = self._mesh()
        workload = get_workload(self.workload_w.value)
        try:
            params = workload.resolve(self.params)
        except ExplorerError as e:
            raise self._put(self.params_error, e) from None
        specs = {n: r.spec for n, r in self.spec_rows.items() if n in self.pinned}
        preset, rules = self.preset_w.value or None, self.rules_w.value.strip() or None
        try:
            layout = plan(workload, params, mesh, specs, preset, rules)
        except ExplorerError as e:
            raise self._put(self.layout_error, e) from None
        for n, row in self.spec_rows.items():
            if n not in self.pinned:
                row.set_spec(layout.specs.get(n, ()))
        tensors = workload.tensors(params, layout.specs)
        failed = None
        for t in tensors:           # one at a time, so that every row at fault shows its error
            try:
                check_inputs([t], mesh)
            except (SpecError, TensorError) as e:
                failed = failed or self._put(self.spec_rows[t.name].error, e)
        if failed:
            raise failed
        try:
            check_planned(tensors, layout, mesh)   # the constraint points the rules place
        except SpecError as e:
            raise self._put(self.layout_error, e) from None
        try:
            if workload.check is not None:
                workload.check(params, mesh)
        except MeshError as e:
            raise self._put(self.mesh_editor.error, e) from None
        except WorkloadError as e:
            raise self._put(self.params_error, e) from None
        partitioner = check_partitioner(self.partitioner_w.value)
        target, mapping = self.target_w.value or None, self.mapping_w.value.strip() or None
        self.prediction_note = None
        try:
            check_target(target, mapping, mesh)
        except ExplorerError as e:
            # The program still compiles; only the prediction needs a target that fits.
            self.prediction_note = app_language(str(e))
            self.target_error.value = html.escape(
                f"no prediction: {self.prediction_note}")
            target = mapping = None
        return dict(name=self.workload_w.value, mesh=mesh, specs=specs, params=params,
                    preset=preset, rules=rules, partitioner=partitioner,
                    target=target, mapping=mapping, measure=self.measure_w.value,
                    unavailable=self.prediction_note)

    def _edited(self, wait: bool = False) -> None:
        if self._muted:
            return
        self._generation += 1
        self._muted += 1      # set_axes and set_spec in _request touch pickers
        try:
            request = self._request()
        except ExplorerError as e:
            self._show_error(str(e))
            return
        finally:
            self._muted -= 1
        hit = self._compile(request, cache_only=True)
        if hit is not None:
            self._show(hit, request["unavailable"])
            return
        loop = _running_loop()
        if loop is None or self.debounce is None or wait:
            self._finish(self._generation, request, self._run(request))
            return
        # Leading-edge debounce: an edit while nothing is waiting or compiling starts at once;
        # edits that arrive meanwhile (typing, dragging) are merged into one compile that
        # starts `debounce` seconds after the last of them.
        quiet = self._timer is None and not self._busy
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_later(0 if quiet else self.debounce, self._guard(self._start),
                                      self._generation, request, loop)

    def _compile(self, request, cache_only=False):
        return analyze_workload(request["name"], request["mesh"], specs=request["specs"],
                                params=request["params"], preset=request["preset"],
                                rules=request["rules"], partitioner=request["partitioner"],
                                target=request["target"], mapping=request["mapping"],
                                measure=request["measure"],
                                pool=self.pool, cache_only=cache_only)

    def _run(self, request):
        """The compile's Report, or the error it raised (shown by _finish, never lost in the
        executor's thread)."""
        try:
            return self._compile(request)
        except Exception as e:
            return e

    def _start(self, generation, request, loop) -> None:
        self._timer = None
        if generation != self._generation:
            return
        started = time.perf_counter()

        def tick():
            if generation == self._generation and self._busy:
                self._set_status(f"◌ compiling… {time.perf_counter() - started:.1f} s")
                loop.call_later(0.2, tick)

        self._busy = True
        tick()
        future = loop.run_in_executor(self._executor, self._run, request)
        future.add_done_callback(
            self._guard(lambda f: self._finish(generation, request, f.result())))

    _busy = False

    def _finish(self, generation, request, result) -> None:
        self._busy = False
        if generation != self._generation:
            return            # a newer edit is on its way; its result will be shown
        if isinstance(result, ExplorerError):
            self._show_error(str(result))
        elif isinstance(result, Exception):
            self._show_unexpected(result)
        else:
            self._show(result, request["unavailable"])

    # ------------------------------------------------------------------ drawing

    def _set_status(self, text: str) -> None:
        self.status.value = f"<span>{html.escape(text)}</span>"

    def _show_error(self, message: str, force: bool = False) -> None:
        """Show `message` unless an inline error already says it (`force`: show it anyway)."""
        message = app_language(message)
        self.error = message
        inline = [*(r.error for r in self.spec_rows.values()),
                  *(r.error for r in self.mesh_editor.rows), self.mesh_editor.error,
                  self.params_error, self.layout_error]
        if force or not any(e.value for e in inline):
            self.error_w.value = html.escape(message)
        self.tabs.add_class("explorer-stale")
        self._set_status("⚠ error: fix the highlighted input"
                         + ("; showing the last good result, greyed" if self.report else ""))

    def _show(self, report: Report, unavailable: str | None = None) -> None:
        """Show `report`; `unavailable` says why it has no prediction, if a target was picked."""
        self.report, self.error, self.unexpected = report, None, None
        self.unavailable = unavailable
        self.tabs.remove_class("explorer-stale")
        t = report.timing
        self._set_status(f"● {'cached' if t.cached else 'compiled'} in "
                         f"{(t.lower_s + t.compile_s):.2f} s · {report.mesh.device_count} "
                         f"devices · {len(report.collectives)} collectives")
        self.selected = None
        self._muted += 1
        try:
            self._list_tensors(draw=False)
            self.collectives.pick.options = self.collectives.options(report)
            self.collectives.pick.value = -1
        finally:
            self._muted -= 1
        # The HTML parts are cheap and always current; figures wait for their tab (_draw_tab).
        self.collectives.table.value = collectives_html(report)
        self.timing.text.value = timing_html(report, unavailable)
        self._drawn = set()
        self._draw_tab(self.tabs.selected_index)

    def _draw_tab(self, index) -> None:
        if self.report is None or index is None or index in self._drawn:
            return
        self._drawn.add(index)
        title = TAB_TITLES[index]
        if title == "Placement":
            self._draw_placement()
        elif title == "Collectives":
            self.collectives.table.value = collectives_html(self.report, self.selected)
            self._draw_groups()
        elif title == "Memory":
            self.memory.update(self.report)
        elif title == "Timing":
            self.timing.update(self.report, self.unavailable)
        elif title == "HLO":
            self.hlo.value = hlo_html(self.report, self.hlo_which.value, self.selected)
            self.graph.update(self.report, self.selected)
        elif title == "Compare":
            self.compare.update(self.report)

    def _redraw(self, title: str) -> None:
        """Draw tab `title` again (now if it is visible, else when it is next shown)."""
        self._drawn.discard(TAB_TITLES.index(title))
        self._draw_tab(self.tabs.selected_index)

    def _list_tensors(self, draw: bool = True) -> None:
        """The placement picker's entries for the current report, keeping the selection."""
        if self.report is None:
            return
        options = tensor_options(self.report, self.placement.plumbing.value)
        keep = self.placement.tensor.value
        names = [v for _, v in options]
        self._muted += 1
        try:
            self.placement.tensor.options = options
            self.placement.tensor.value = keep if keep in names else names[0]
        finally:
            self._muted -= 1
        if draw and self.placement.tensor.value != keep:
            self._draw_placement()

    def _dim_names(self, tensor: str) -> tuple[str | None, ...] | None:
        """The logical names of a workload input's dimensions (("batch", "embed")), if any."""
        info = self.report.workload if self.report is not None else None
        if info is None or info.name not in WORKLOADS:
            return None
        workload = get_workload(info.name)
        if workload.logical is None:
            return None
        return workload.logical(dict(info.params)).get(tensor)

    def _draw_placement(self) -> None:
        if self.report is None or self.placement.tensor.value is None:
            return
        name = self.placement.tensor.value
        blocks = placement_grid(self.report, name, self._dim_names(name))
        n_blocks = len(blocks.legend)
        draw_grid(self.placement.blocks, blocks, n_blocks)
        draw_grid(self.placement.mesh, mesh_grid(self.report, name), n_blocks)
        self.placement.legend.value = legend_html(
            blocks, f"block of {name}: a block and the devices holding it share a colour")

    def _draw_groups(self) -> None:
        shown = self.report is not None and self.selected is not None
        self.collectives.groups_box.layout.display = "" if shown else "none"
        if shown:
            grid = group_grid(self.report, self.selected)
            draw_grid(self.collectives.groups, grid,
                      max(len(self.report.collectives[self.selected].groups), 1))
            self.collectives.legend.value = legend_html(grid, "device group")

    def _select_collective(self, index) -> None:
        if self._muted or self.report is None:
            return
        self.selected = index
        self._drawn.discard(TAB_TITLES.index("HLO"))     # its highlighted line follows
        self._redraw("Collectives")

    # ------------------------------------------------------------------ API for scripts

    def set_spec(self, tensor: str, spec) -> None:
        self.spec_rows[tensor].set_spec(normalize_spec(spec, tensor=tensor))

    def close(self) -> None:
        self._executor.shutdown(wait=False)
        self.widget.close()
