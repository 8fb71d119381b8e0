"""The sidebar's checks at the edge: what its editors hold (explorer._src.ui.sidebar.widgets builds
them) turned into a checked request (explorer._src.ui.sources.AppRequest, from which the source
makes the explorer.Request the session compiles), and each error mapped to the widget at fault.

The checks are the API's own (explorer._src.api.request), run as each edit is made: every error is
shown next to the widget at fault, in the app's words rather than the CLI's flags
(`app_language`), and the edit goes no further. A renamed mesh axis is carried into the spec
pickers, the rules box and the specs the source gives, so that renaming `model` to `tensor`
changes nothing else. The time limit's box is read here too, with its default by what compiles
(`default_timeout`). No widget is built here: `SidebarChecks` reads the values of those
`Sidebar` builds and writes their errors.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping
from dataclasses import replace

import ipywidgets as w

from explorer._src.api.request import (
    DEFAULT_FROM,
    LAYER_PARAMS,
    MAX_TIMEOUT,
    check_inputs,
    check_mesh,
    check_partitioner,
    check_target,
    check_timeout,
)
from explorer._src.api.targeting import CompileFor, compile_plan
from explorer._src.compile.pool import DEFAULT_TIMEOUT_S
from explorer._src.compile.protocol import Backend
from explorer._src.cost.catalog.names import get_target, targets, targets_with_chips
from explorer._src.errors import (
    ExplorerError,
    InputError,
    MeshError,
    RuleError,
    SpecError,
    TargetError,
    TensorError,
    WorkloadError,
    choices,
)
from explorer._src.spec.bounds import check_served, served_timeout
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import Spec, TensorSpec, normalize_spec
from explorer._src.strategy.rules import LOGICAL_NAMES, Rules, parse_rules
from explorer._src.ui.callbacks import Mute
from explorer._src.ui.editors import MeshEditor, check_row_spec
from explorer._src.ui.sources import AppRequest, InputTensor, Placement, Source, WorkloadSource
from explorer._src.ui.specs import KeptPicks, SpecsEditor, carried_renames, renamed_spec
from explorer._src.ui.views import TargetOffer, mapping_placeholder, matching_target

MEASURE_LABEL = "measure a real run (this CPU)"
EXTRAPOLATE_LABEL = (f"estimate from {DEFAULT_FROM[0]} and {DEFAULT_FROM[1]} layers "
                     "(extrapolated), not a full compile")

# The compile time limit the app gives a compile when its box is left empty, by what compiles
# it. The pool's own default (explorer._src.compile.pool.DEFAULT_TIMEOUT_S, 120 s) suits a compile
# on fake CPU devices, which takes seconds. An ahead-of-time libtpu compile of a real model
# takes minutes: a 4-layer d_model 1024 train step took 144 s for tpu-v5e-4x4 and 326 s for
# tpu-v5e-2x4-2slices (on a loaded 2-core machine), and an 8B-shaped Llama for
# tpu-v5e-8x16-2slices ran past 120 s twice, so that in the app it never finished. A TPU
# target gets 600 s: the slowest measured with room for a larger model; an edit that is
# wrong shows its error long before, and the user can lower it. XLA's GPU compiler was faster
# (a large model in 32-35 s): 300 s keeps a like margin. Past 75% of it the status says so.
# The rest (fake CPU devices, the machine's own) get the pool's DEFAULT_TIMEOUT_S.
DEFAULT_TIMEOUTS = {Backend.TPU_AOT: 600.0, Backend.GPU_AOT: 300.0}
_COMPILERS = {Backend.TPU_AOT: "a TPU target", Backend.GPU_AOT: "a GPU target"}


def default_timeout(backend: Backend) -> float:
    """The seconds a compile for `backend` gets when the time-limit box is empty."""
    return DEFAULT_TIMEOUTS.get(backend, DEFAULT_TIMEOUT_S)


def timeout_placeholder(backend: Backend) -> str:
    return (f"{default_timeout(backend):g} (the default for "
            f"{_COMPILERS.get(backend, 'CPU devices')})")


def parse_timeout(text: str) -> float | None:
    """The time-limit box's seconds: None where it is empty (the target's default), else a
    number within the bounds explorer.analyze's `timeout` takes (explorer._src.api.request).

    Raises:
        InputError: not a number, or out of bounds."""
    text = text.strip().removesuffix("s").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT):
        raise InputError(f"the time limit {text[:40]!r} is not a number of seconds above 0 and "
                         f"at most {MAX_TIMEOUT} (a day); e.g. 600, or leave it empty for the "
                         "target's default")
    return check_timeout(value)

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
    (re.compile(r"or raise the timeout"), "or raise the time limit (in the sidebar)"),
]


def app_language(message: str) -> str:
    """`message` with CLI flags (`--spec w1=...`) put as the app's widgets."""
    for pattern, replacement in _APP_WORDS:
        message = pattern.sub(replacement, message)
    return message


def target_options(devices: int, current: str = "") -> list[tuple[str, str]]:
    """Every target with `devices` devices (explorer._src.cost.catalog.names.targets_with_chips: by
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


class SidebarChecks:
    """The edge's checks of the sidebar's editors, which `Sidebar`
    (explorer._src.ui.sidebar.widgets)
    extends: `request()` makes the checked request, or shows each error next to its widget and
    raises; `inputs_at_fault()` names those showing one."""

    # What the checks read and write, declared here and built by Sidebar.__init__: the checks
    # need the widgets' values and their error lines, never how they are laid out.
    source: Source
    mesh_editor: MeshEditor
    specs_editor: SpecsEditor
    kept_picks: KeptPicks
    preset_w: w.Dropdown
    rules_w: w.Text
    partitioner_w: w.ToggleButtons
    target_w: w.Dropdown
    mapping_w: w.Text
    cpu_w: w.Checkbox
    measure_w: w.Checkbox
    extrapolate_w: w.Checkbox
    timeout_w: w.Text
    layout_error: w.HTML
    target_error: w.HTML
    timeout_error: w.HTML
    error_w: w.HTML
    target_offer: TargetOffer
    axis_names: tuple[str, ...]
    carried: dict[str, str | None]
    prediction_note: str | None
    matching_target: str | None
    default_timeout_s: float
    _muted: Mute

    def initial_specs(self, specs: Mapping, mesh: MeshSpec) -> dict:
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

    def tensors_or_none(self) -> list[InputTensor]:
        try:
            return self.source.tensors()
        except ExplorerError:
            return []

    def clear_errors(self) -> None:
        self.specs_editor.clear_errors()
        for r in self.mesh_editor.rows:
            r.error.value = ""
        self.mesh_editor.error.value = self.source.error.value = self.error_w.value = ""
        self.target_error.value = self.layout_error.value = self.timeout_error.value = ""
        self.target_offer.offer(None)

    @staticmethod
    def _put(where: w.HTML, e: ExplorerError) -> ExplorerError:
        where.value = html.escape(app_language(str(e)))
        return e

    def inputs_at_fault(self) -> list[str]:
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
                  self.target_error.value and self.prediction_note is None),
                 ("the time limit", self.timeout_error.value)]
        return [name for name, shown in boxes if shown]

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
        self.carried = carried_renames(self.carried, self.axis_names, mesh.names, renames)
        self._rename_in_rules(mesh.names, renames)
        self.mesh_editor.commit()
        self.axis_names = mesh.names
        options = target_options(mesh.device_count, self.target_w.value)
        if self.target_w.options != tuple(options):
            value = self.target_w.value
            self.target_w.options = options
            self.target_w.value = value
        return mesh

    def _rename_in_rules(self, names: tuple[str, ...], renames: Mapping[str, str]) -> None:
        """Carry renamed mesh axes into the rules box. Rules that do not parse are left as
        they are (their error shows under the box)."""
        text = self.rules_w.value.strip()
        if not renames or not text:
            return
        known = LOGICAL_NAMES + tuple(d for t in self.tensors_or_none() for d in t.logical or ()
                                      if d)
        try:
            table = parse_rules(text, known)
        except ExplorerError:
            return
        renamed = Rules(tuple(replace(r, entry=renamed_spec((r.entry,), names, renames)[0])
                              for r in table.rules))
        if renamed != table:
            with self._muted:
                self.rules_w.value = renamed.text()

    def request(self, origins: bool = False) -> AppRequest:
        """Validate the edited state by making the explorer Request it describes, as the API
        and the CLI do (one Request per edit: a workload's layout is planned once, by it); each
        error is shown next to the widget at fault and raised. `origins`: the request reads why
        each tensor is laid out so (the Placement tab's question)."""
        self.clear_errors()
        mesh = self._mesh()
        editor = self.specs_editor
        pinned = {n: editor.spec(n) for n in editor.tensors if n in editor.pinned}
        preset, rules = self.preset_w.value or None, self.rules_w.value.strip() or None
        # A workload's Request plans its layout (and resolves its params): the pickers show
        # that plan. A function places its inputs here, before its Request traces it.
        plans_itself = isinstance(self.source, WorkloadSource)
        placement = None if plans_itself else self._placed(mesh, pinned, preset, rules)
        partitioner = check_partitioner(self.partitioner_w.value)
        target, mapping = self._target(mesh)
        compile_for = CompileFor.CPU if self.cpu_w.value else CompileFor.TARGET
        backend = compile_plan(mesh, target, compile_for).worker.backend
        measurable = self._offer_measure(backend)
        self.timeout_w.placeholder = timeout_placeholder(backend)
        self.default_timeout_s = default_timeout(backend)
        try:
            given = parse_timeout(self.timeout_w.value)
            check_served("the time limit", timeout_s=given)       # a served app's most
        except InputError as e:
            raise self._put(self.timeout_error, e) from None
        made = AppRequest(mesh=mesh, specs=dict(placement.specs) if placement else {},
                          pinned=pinned, placement=placement or Placement({}),
                          params=self.source.params,
                          preset=preset, rules=rules, partitioner=partitioner, target=target,
                          mapping=mapping, measure=self.measure_w.value and measurable,
                          unavailable=self.prediction_note, compile_for=compile_for,
                          origins=origins,
                          timeout=served_timeout(given, default_timeout(backend)),
                          timeout_given=given is not None)
        try:
            analysis = self.source.analysis(made)
            planned = analysis.planned            # a served app's most (spec/bounds.py)
            check_served("this program", tensors=len(planned.leaves),
                         layers=planned.params.get("layers"),
                         devices=planned.mesh.device_count)
        except InputError as e:
            raise self._at_fault(e) from None
        if not plans_itself:
            return replace(made, analysis=analysis)
        placement = self.carry_renames(self.source.planned(analysis), pinned, mesh)
        layout = analysis.planned.layout
        self._show_placement(placement, pinned,
                             layout.by_rules if layout and layout.rules.rules else None)
        # Offered only where the workload counts its layers (the box keeps its tick while
        # hidden, for a workload switched back to).
        layered = any(p in analysis.planned.params for p in LAYER_PARAMS)
        self.extrapolate_w.layout.display = None if layered else "none"
        extrapolate = layered and self.extrapolate_w.value
        if extrapolate:
            # A field of the Request the session runs; known to fit only now (a workload
            # that counts its layers), so set on the Request planned (its layout kept).
            analysis = replace(analysis, extrapolate=True)
        return replace(made, specs=dict(placement.specs), placement=placement,
                       params=dict(analysis.planned.params), analysis=analysis,
                       extrapolate=extrapolate)

    def _placed(self, mesh: MeshSpec, pinned: Mapping[str, Spec], preset: str | None,
                rules: str | None) -> Placement:
        """A source that places its inputs itself (a function): its placement, shown in the
        pickers, every row at fault showing its error, then the source's own checks."""
        try:
            tensors = self.source.tensors()
        except ExplorerError as e:
            raise self._put(self.source.error, e) from None
        try:
            placement = self.source.place(mesh, pinned, preset, rules)
        except ExplorerError as e:
            raise self._put(self.layout_error, e) from None
        placement = self.carry_renames(placement, pinned, mesh)
        ruled = None
        if pinned and (preset or rules):       # what the rules place without the picks
            try:
                ruled = self.source.place(mesh, {}, preset, rules).specs
            except ExplorerError:
                ruled = None
        failed = self._show_placement(placement, pinned, ruled)
        inputs = [TensorSpec(t.name, t.shape, t.dtype, placement.specs[t.name]) for t in tensors]
        for t in inputs:            # one at a time, so that every row at fault shows its error
            if t.name in self.specs_editor.errors:
                continue
            try:
                check_inputs([t], mesh)
            except (SpecError, TensorError) as e:
                self.specs_editor.show_error(t.name, app_language(str(e)))
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
        return placement

    def _show_placement(self, placement: Placement, pinned: Mapping[str, Spec],
                        ruled: Mapping[str, Spec] | None) -> SpecError | None:
        """The pickers of the inputs the user did not pin set to `placement`; the picks the
        preset or rules would place otherwise (`ruled`: what they give each input they split;
        None without a preset or rules) listed. The first spec a
        picker cannot show, whose row shows it."""
        kept = {} if ruled is None else {
            n: (tuple(spec), tuple(ruled.get(n, ()))) for n, spec in pinned.items()
            if _trimmed(ruled.get(n, ())) != _trimmed(spec)}
        self.kept_picks.show(kept)
        failed = None
        for n, spec in placement.specs.items():
            if n not in pinned:
                try:
                    self.specs_editor.set_spec(n, spec)
                except SpecError as e:     # the row shows the error; its pickers keep theirs
                    self.specs_editor.show_error(n, app_language(str(e)))
                    failed = failed or e
        return failed

    def _at_fault(self, e: ExplorerError) -> ExplorerError:
        """An error of the explorer Request shown next to the widget at fault: a spec at its
        tensor's row, the mesh, the preset or rules, the target or mapping, the time limit,
        else the workload's params."""
        tensor = getattr(e, "tensor", None)
        if isinstance(e, SpecError | TensorError) and tensor in self.specs_editor.tensors:
            self.specs_editor.show_error(tensor, app_language(str(e)))
            return e
        if isinstance(e, MeshError):
            return self._put(self.mesh_editor.error, e)
        if isinstance(e, RuleError | SpecError):
            return self._put(self.layout_error, e)
        if isinstance(e, TargetError):
            return self._put(self.target_error, e)
        return self._put(self.source.error, e)

    def carry_renames(self, placement: Placement, pinned: Mapping[str, Spec],
               mesh: MeshSpec) -> Placement:
        """A spec the source gives (a TensorSpec's own, a pattern's) follows the axes renamed
        in the editor, as the picks do; a removed axis leaves it."""
        if not self.carried:
            return placement
        renames = {a: b for a, b in self.carried.items() if b is not None}
        removed = {first for first, now in self.carried.items() if now is None}
        specs = {n: spec if n in pinned else renamed_spec(spec, mesh.names, renames,
                                                          dropped=removed)
                 for n, spec in placement.specs.items()}
        return replace(placement, specs=specs)

    def _target(self, mesh: MeshSpec) -> tuple[str | None, str | None]:
        """The target and mapping the request is priced on: none, with a note saying why and
        a target that fits offered, when the picked one does not fit the mesh."""
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
            self.target_error.value = html.escape(f"no prediction: {self.prediction_note}")
            self.matching_target = matching_target(self.target_w.value, mesh.device_count)
            self.target_offer.offer(self.matching_target)
            return None, None
        return target, mapping

    def _offer_measure(self, backend: Backend) -> bool:
        """Whether this request's program can run here (a compile on CPU devices can; one
        for a GPU or TPU, made ahead of time, cannot): the measure box is offered only then,
        and says so otherwise."""
        runs_here = backend is Backend.FAKE_CPU
        self.measure_w.disabled = not runs_here
        self.measure_w.description = (MEASURE_LABEL if runs_here else
                                      MEASURE_LABEL + ": only a compile on CPU devices runs "
                                      "here; tick the box above")
        return runs_here


def _trimmed(spec) -> tuple:
    """A spec without its trailing unsplit dimensions: () and (None, None) are one layout."""
    spec = tuple(spec)
    while spec and spec[-1] is None:
        spec = spec[:-1]
    return spec
