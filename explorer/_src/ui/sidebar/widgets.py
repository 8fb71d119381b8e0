"""The app's sidebar, its widgets: the editors of one request (the source's part, the mesh, the
preset and rules, a spec per input, the partitioner, the target and its mapping, the compile
switches) built and laid out (`Sidebar`), and what the app loads into them: the tensors of the
source, a layout the Suggest tab's Apply picked, a larger time limit.

The checks that turn what they hold into a checked request are explorer._src.ui.sidebar.checks's
(`SidebarChecks`, which `Sidebar` extends).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator, Mapping

import ipywidgets as w

from explorer._src.api.analysis_request import CompileForName, PartitionerName
from explorer._src.api.request import check_timeout
from explorer._src.api.targeting import CompileFor, check_compile_for
from explorer._src.compile.pool import DEFAULT_TIMEOUT_S
from explorer._src.compile.protocol import Backend
from explorer._src.cost.catalog.names import get_target
from explorer._src.errors import ExplorerError, WorkloadError
from explorer._src.layout_search.result import Candidate
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import normalize_spec
from explorer._src.strategy.presets import PRESETS, get_preset
from explorer._src.ui.callbacks import Mute
from explorer._src.ui.editors import MeshEditor, SpecRow
from explorer._src.ui.sidebar.checks import (
    EXTRAPOLATE_LABEL,
    MEASURE_LABEL,
    SidebarChecks,
    target_options,
    timeout_placeholder,
)
from explorer._src.ui.sources import Source, WorkloadSource
from explorer._src.ui.specs import KeptPicks, SpecsEditor, renamed_spec
from explorer._src.ui.suggest.job import SearchJob, candidate_specs
from explorer._src.ui.views import TargetOffer, mapping_placeholder


def _history_button(label: str, icon: str, tooltip: str, css: str,
                    clicked: Callable[[w.Button], None]) -> w.Button:
    """Undo or Redo: small, and off until the session has an edit to step to."""
    button = w.Button(description=label, icon=icon, tooltip=tooltip, disabled=True,
                      layout=w.Layout(width="76px"))
    button.add_class(css)
    button.on_click(clicked)
    return button


class SpecRows(Mapping):
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


class Sidebar(SidebarChecks):
    """The sidebar's editors over `source`, opened on `mesh` and the rest. `edit()` is called
    for each edit the user makes (the app checks and compiles it; `edit(apply=True)` compiles
    even with live updates off); the app's own changes to these widgets are made `muted`, and
    call nothing. `steps`: the app's undo and redo, which the Undo and Redo buttons call."""

    def __init__(self, source: Source, mesh: MeshSpec, *, partitioner: PartitionerName,
                 target: str, mapping: str, preset: str, rules: str,
                 compile_for: CompileForName,
                 timeout: float | None = None, extrapolate: bool = False,
                 edit: Callable[..., None],
                 guard: Callable[[Callable], Callable], muted: Mute,
                 steps: tuple[Callable[[], None], Callable[[], None]]):
        self.source = source
        self._edit, self._muted = edit, muted
        # The axes of the last valid mesh: what the spec pickers offer.
        self.axis_names: tuple[str, ...] = mesh.names
        # Each axis the app opened with, renamed (its new name) or removed (None) since: the
        # specs the source gives (a TensorSpec's own, a pattern's) follow it as the picks do.
        self.carried: dict[str, str | None] = {}
        self.prediction_note: str | None = None      # why the last request has no target
        self.matching_target: str | None = None      # then, a target that would fit
        self.applied_rules: str | None = None        # the rules the Suggest tab's Apply loaded
        self.default_timeout_s = DEFAULT_TIMEOUT_S   # the last request's target's default
        # The specs the app was opened with, by the program they were given for: a workload
        # switched away from and back to comes back with them (`forget_picks`).
        self.opening_specs: dict[str, dict] = {}

        self.mesh_editor = MeshEditor(list(zip(mesh.names, mesh.sizes, strict=True)),
                                      guard(edit), mesh.axis_types)
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
        self.target_w = w.Dropdown(options=target_options(mesh.device_count, target),
                                   value=target, description="target")
        self.mapping_w = w.Text(value=mapping, description="mapping", continuous_update=False,
                                placeholder=mapping_placeholder(target, mesh))
        self.measure_w = w.Checkbox(value=False, description=MEASURE_LABEL, indent=False)
        # explorer.analyze's extrapolate: shown for a workload that counts its layers (the
        # checks show it), offered too when a full compile passes its time limit.
        self.extrapolate_w = w.Checkbox(
            value=bool(extrapolate), description=EXTRAPOLATE_LABEL, indent=False,
            layout=w.Layout(width="auto", display="none"),
            tooltip="compile the model at 3 and 4 layers and carry its collectives, memory "
            "and times on linearly to its own layer count (explorer.analyze's extrapolate)")
        self.extrapolate_w.add_class("explorer-extrapolate")
        # Off: edits are checked as they are made but compiled only on Apply (a burst of edits
        # to set up a large model becomes one compile).
        self.live_w = w.Checkbox(value=True, indent=False, layout=w.Layout(width="auto"),
                                 description="live updates (compile after each edit)")
        self.live_w.add_class("explorer-live")
        self.apply_w = w.Button(description="Apply edits", icon="play", button_style="primary",
                                layout=w.Layout(width="130px", display="none"),
                                tooltip="compile the sidebar as it is now")
        self.apply_w.add_class("explorer-apply")
        # Step through the session's edits (`step`); the app enables them as it records edits.
        undo, redo = steps
        self.undo_w = _history_button("Undo", "undo", "Undo the last edit", "explorer-undo",
                                      guard(lambda _: undo()))
        self.redo_w = _history_button("Redo", "repeat", "Redo the edit undone last",
                                      "explorer-redo", guard(lambda _: redo()))
        # The one switch back to the CPU's program, priced on the target (approximate).
        self.cpu_w = w.Checkbox(value=check_compile_for(compile_for) is CompileFor.CPU,
                                description="compile on CPU devices, not for the target",
                                indent=False)
        self.target_error = w.HTML()
        self.target_error.add_class("explorer-error")
        # The seconds each compile may take: empty for the target's default (default_timeout).
        self.timeout_w = w.Text(value="" if timeout is None else f"{check_timeout(timeout):g}",
                                description="time limit", continuous_update=False,
                                tooltip="seconds the compile in its worker may take before "
                                "it is stopped (a measured run's runs on the chip included; "
                                "the worker's start and the trace have their own time)",
                                placeholder=timeout_placeholder(Backend.FAKE_CPU))
        self.timeout_w.add_class("explorer-timeout")
        self.timeout_error = w.HTML()
        self.timeout_error.add_class("explorer-error")
        self.target_offer = TargetOffer(guard(self.use_target))
        self.error_w = w.HTML()          # an error no widget owns, under the status
        self.error_w.add_class("explorer-error")
        if not source.uses_preset:
            self.preset_w.layout.display = "none"
        if not source.uses_rules:
            self.rules_w.layout.display = "none"
            self.rules_note.value = f"<div>{html.escape(source.rules_note)}</div>"

        # The source hears of a new target first: what it offers may depend on it.
        self.target_w.observe(guard(lambda c: source.set_target(c["new"] or None)), "value")
        source.set_target(target or None)
        for wid in (self.partitioner_w, self.target_w, self.mapping_w, self.measure_w,
                    self.cpu_w, self.timeout_w, self.extrapolate_w):
            wid.observe(guard(lambda _: edit()), "value")
        for wid in (self.preset_w, self.rules_w):
            wid.observe(guard(lambda _: self._layout_changed()), "value")

    def box(self, *below: w.Widget) -> w.VBox:
        """The sidebar: the editors, then `below` (the status, the Share section)."""
        return w.VBox([self.source.sidebar, self.mesh_editor.widget, self.preset_w,
                       self.rules_w, self.rules_note, self.layout_error, self.kept_picks.widget,
                       self.specs_editor.widget, self.partitioner_w, self.target_w,
                       self.mapping_w, self.target_error, self.target_offer.button, self.cpu_w,
                       self.timeout_w, self.timeout_error, self.extrapolate_w,
                       self.measure_w,
                       w.HBox([self.live_w, self.apply_w, self.undo_w, self.redo_w],
                              layout=w.Layout(flex_flow="row wrap", align_items="center")),
                       *below],
                      layout=w.Layout(width="440px"))

    # ------------------------------------------------------------------ the tensors and picks

    def load_tensors(self, pinned: Mapping | None = None) -> None:
        """The editor's rows for the source's tensors now; `pinned` specs are set as picks (the
        first ones given for a program are its opening specs)."""
        if pinned:
            self.opening_specs.setdefault(self.source.title, dict(pinned))
        with self._muted:
            try:
                tensors = self.source.tensors()
            except ExplorerError:
                return          # `request` reports it on the source's error line
            self.specs_editor.set_tensors(tensors, self.axis_names, pinned)
            self.specs_editor.pinned |= set(pinned or {})
            for n in pinned or {}:
                if n in self.specs_editor.rows:
                    self.specs_editor.rows[n].widget.add_class("explorer-pinned")

    def _picked(self, tensor: str | None) -> None:
        if not self._muted:
            self._edit()

    def _layout_changed(self) -> None:
        """A new preset or rules re-place every tensor the user did not pick: a pick is the
        user's, which no rule replaces (the kept-picks note names those the rules would)."""
        self._edit()

    def _release_picks(self, names: list[str]) -> None:
        """Hand `names` back to the preset and rules (the kept-picks note's button)."""
        self.specs_editor.release(names)
        self._edit()

    def inputs_changed(self) -> None:
        """The source's params moved: rows at the new sizes, keeping specs where ranks hold."""
        if self._muted:
            return
        self.load_tensors()            # picks of tensors whose rank held stay picked
        self._edit()

    def forget_picks(self) -> None:
        """A different program (another workload): nothing the user picked applies, nor the
        rules a searched candidate put in the rules box (rules the user typed stay)."""
        if self.applied_rules and self.rules_w.value == self.applied_rules:
            with self._muted:
                self.rules_w.value = ""
        self.applied_rules = None
        self.specs_editor.release()
        self.specs_editor.set_tensors([], self.axis_names)
        self.load_tensors(self._opening_specs_now())

    def _opening_specs_now(self) -> dict:
        """The specs the app was opened with for the source's program (a workload switched
        back to), on the mesh as it is now: a renamed axis under its new name, a removed one
        left out (as a spec the source gives follows them, `carry_renames`)."""
        renames = {a: b for a, b in self.carried.items() if b is not None}
        return {n: renamed_spec(spec, self.axis_names, renames)
                for n, spec in self.opening_specs.get(self.source.title, {}).items()}

    def use_target(self, name: str) -> None:
        """Pick `name` (a target offered because it fits the mesh); the pick recompiles."""
        if name not in [v for _, v in self.target_w.options]:
            self.target_w.options = [*self.target_w.options, (name, name)]
        self.target_w.value = name

    def load_layout(self, mesh: MeshSpec, *, rules: str = "", specs: Mapping | None = None,
                    params: Mapping | None = None) -> None:
        """Load a layout into the sidebar and recompile once: a workload's `params` first, the
        mesh, then `rules` (the preset cleared, the picks released) and each of `specs` as a
        pick. The Suggest tab's Apply."""
        with self._muted:
            if params and isinstance(self.source, WorkloadSource):
                for key, wid in zip(self.source.workload.defaults,
                                    self.source.params_box.children, strict=True):
                    if key in params and wid.value != params[key]:
                        wid.value = params[key]
                self.load_tensors()
            self.mesh_editor.set_axes(list(zip(mesh.names, mesh.sizes, strict=True)),
                                      mesh.axis_types)
            self.mesh_editor.commit()
            self.specs_editor.set_axes(mesh.names, {})
            self.axis_names = mesh.names
            self.carried = {}              # a new mesh, not an edit of the one before
            self.preset_w.value = ""
            self.rules_w.value = rules
            self.specs_editor.release()
            for name, spec in (specs or {}).items():
                self.specs_editor.pick(name, normalize_spec(spec, tensor=name))
        self._edit()

    def apply_suggestion(self, job: SearchJob, candidate: Candidate) -> None:
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
            self.applied_rules = candidate.rules

    def raise_timeout(self, seconds: float) -> None:
        """Set the time limit to `seconds`; the edit compiles again with it (the offer an
        error of a compile stopped at its limit makes)."""
        self.timeout_w.value = f"{check_timeout(seconds):g}"

    def extrapolate_layers(self) -> None:
        """Tick the extrapolate box; the edit compiles the model at 3 and 4 layers and carries
        it on (the other offer an error of a compile stopped at its limit makes)."""
        self.extrapolate_w.value = True
