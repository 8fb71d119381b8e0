"""Undo and Redo in the app: the sidebar stepped through its session's edits.

The session records every edit the app makes (explorer._src.api.session). To undo one, the
sidebar's widgets are set to the Request before it (its extrapolate field too), with the app's
callbacks muted, and checked to make exactly that Request again; only then is the session
stepped and the app told, as Apply tells it: it finds the widgets' request the same as the
session's, records no edit, and shows that request's result, normally from the cache. Redo
is the same, forward. A Request the widgets cannot make (one made by a script's session.edit,
say) is refused with a message, and nothing changes.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import ipywidgets as w
from traitlets import TraitError

from explorer._src.api.analysis_request import Request
from explorer._src.api.request import check_partitioner, check_target
from explorer._src.api.session import Edit, Session, same_request
from explorer._src.api.targeting import CompileFor, check_compile_for
from explorer._src.errors import ExplorerError, InputError
from explorer._src.spec.bounds import served_timeout
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import Spec, normalize_spec
from explorer._src.strategy.rules import rules_text
from explorer._src.ui.callbacks import Mute
from explorer._src.ui.sidebar.checks import app_language, default_timeout, target_options
from explorer._src.ui.sources import AppRequest, WorkloadSource
from explorer._src.ui.specs import carried_renames

if TYPE_CHECKING:
    from explorer._src.ui.sidebar.widgets import Sidebar


class EditHistory:
    """Undo and Redo over `sidebar`: `edit(apply=True)` is the app's edit (it compiles even
    with live updates off), `muted` the app's mute of its own widget callbacks."""

    def __init__(self, sidebar: Sidebar, edit: Callable[..., None], muted: Mute):
        self.sidebar, self.edit, self.muted = sidebar, edit, muted

    def changed(self, session: Session | None) -> None:
        """Undo and Redo follow what `session` can step to (after every edit, undo, redo)."""
        self.sidebar.undo_w.disabled = session is None or not session.can_undo
        self.sidebar.redo_w.disabled = session is None or not session.can_redo

    def step(self, session: Session | None, origins: w.Checkbox, back: bool) -> None:
        """Undo (`back`) or redo `session`'s last edit in the widgets: they are set to the
        Request it restores (`origins` too: the Placement tab's box is part of the request),
        checked to make exactly that Request again, and only then is the session stepped and
        the app told, as Apply does: it finds the widgets' request the same as the session's,
        records no edit, and shows its result (normally from the cache). Where the widgets
        cannot make it (an InputError), they are set back, `error_w` says why and the session
        is left as it was."""
        word = "undo" if back else "redo"
        if session is None or not (session.can_undo if back else session.can_redo):
            self.sidebar.error_w.value = html.escape(f"nothing to {word}")
            return
        target = session.history[-2] if back else session.undone_edit
        assert target is not None
        current = session.history[-1]
        try:
            restored = self._restore(target, origins)
        except InputError as e:
            try:        # the widgets made the current request: they can again
                self._restore(current, origins)
            except InputError:
                pass    # the message below still says what failed
            self.sidebar.error_w.value = html.escape(
                f"cannot {word}: {app_language(str(e))}; nothing was changed")
            return
        if back:
            session.undo()
        else:
            session.redo()
        self.edit(apply=True, restored=restored)

    def _restore(self, edit: Edit, origins: w.Checkbox) -> AppRequest:
        """Set every widget to what makes `edit`'s request (its extrapolate field too), muted
        (no edit), then check that the widgets make exactly them (the app request they make,
        returned, is the edit: it is not made again); an InputError where they cannot."""
        request = edit.request
        shown = self._as_the_sidebar_holds(request)
        with self.muted:
            try:
                self._restore_program(shown)
                mesh = shown.planned.mesh
                self._restore_mesh(mesh)
                self._restore_layout(shown, mesh)
                self._restore_compile(shown, mesh)
                origins.value = bool(shown.origins)
                # The box holds on or off; "auto" or other layer counts (a script's
                # session.edit) it cannot, which the check below refuses.
                self.sidebar.extrapolate_w.value = bool(shown.extrapolate)
            except TraitError as e:      # a value a widget does not offer
                raise InputError(f"the sidebar cannot show that request ({e})") from None
            made = self.sidebar.request(origins=origins.value)
        if made.analysis is None or not same_request(made.analysis, shown):
            raise InputError("the sidebar cannot make that request exactly (was it made "
                             "outside the app, e.g. by session.edit?)")
        # The session steps to `request` itself: the same rules in another form are no edit.
        return made if shown is request else replace(made, analysis=request)

    def _as_the_sidebar_holds(self, request: Request) -> Request:
        """`request` with a workload's layout as the sidebar writes it: (logical name, mesh
        axes) pairs or a mapping of rules (session.edit takes both) as the text of the same
        rules, and each hand-set spec (text such as "model,None") as its tuple."""
        if not isinstance(self.sidebar.source, WorkloadSource):
            return request
        rules = rules_text(request.rules) or None
        specs = request.specs
        if isinstance(specs, Mapping):
            specs = {n: normalize_spec(s, tensor=n) for n, s in specs.items()}
        if same_request(rules, request.rules) and same_request(specs, request.specs):
            return request
        return replace(request, rules=rules, specs=specs)

    def _restore_program(self, request: Request) -> None:
        """The workload and its params (a workload switched back forgets the picks, as the
        picker does), or the check that a function's request is of this app's function."""
        source = self.sidebar.source
        if not isinstance(source, WorkloadSource):
            if request.fn is None or request.fn is not getattr(source, "fn", None):
                raise InputError(f"that request is not of {source.title}, the program this "
                                 "app shows")
            return
        if request.workload is None:
            raise InputError("that request is of a function, not of a built-in workload")
        if request.workload != source.workload_w.value:
            source.workload_w.value = request.workload
        params = request.planned.params
        for key, wid in zip(source.workload.defaults, source.params_box.children, strict=True):
            value = params.get(key, wid.value)
            if isinstance(wid, w.Dropdown) and value not in wid.options:
                wid.options = [*wid.options, value]     # a dtype the target does not compute in
            if wid.value != value:
                wid.value = value
        self.sidebar.load_tensors()

    def _restore_mesh(self, mesh: MeshSpec) -> None:
        """The mesh's rows; the pickers offer its axes. A new mesh, not a rename: an axis the
        last one had and this one lacks counts as removed for the specs the source gives."""
        axes = list(zip(mesh.names, mesh.sizes, strict=True))
        editor = self.sidebar.mesh_editor
        if editor.axes != axes or tuple(editor.types) != mesh.axis_types:
            editor.set_axes(axes, mesh.axis_types)
        self.sidebar.mesh_editor.commit()
        sidebar = self.sidebar
        if mesh.names != sidebar.axis_names:
            sidebar.specs_editor.set_axes(mesh.names, {})
            sidebar.carried = carried_renames(sidebar.carried, sidebar.axis_names, mesh.names, {})
            sidebar.axis_names = mesh.names

    def _restore_layout(self, request: Request, mesh: MeshSpec) -> None:
        """The preset, the rules and the hand-set specs, every other pick released."""
        if isinstance(self.sidebar.source, WorkloadSource):
            if not isinstance(request.specs, Mapping | None):
                raise InputError("its specs are not what the sidebar holds (a spec per "
                                 "tensor)")
            self.sidebar.preset_w.value = request.preset or ""
            self.sidebar.rules_w.value = request.rules or ""
            hand_set = {n: normalize_spec(s, tensor=n) for n, s in (request.specs or {}).items()}
        else:
            hand_set = self._function_picks(request, mesh)
        self.sidebar.specs_editor.release()
        unknown = [n for n in hand_set if n not in self.sidebar.specs_editor.tensors]
        if unknown:
            raise InputError(f"it sets the spec of {unknown[0]!r}, which is not an input of "
                             f"{self.sidebar.source.title}")
        for name, spec in hand_set.items():
            self.sidebar.specs_editor.pick(name, spec)

    def _function_picks(self, request: Request, mesh: MeshSpec) -> dict[str, Spec]:
        """A function's request carries every input's spec, not which were set by hand: those
        the source would not place so itself (its given specs, patterns and rules) are."""
        sidebar = self.sidebar
        rules = sidebar.rules_w.value.strip() or None
        placed = sidebar.carry_renames(sidebar.source.place(mesh, {}, None, rules), {}, mesh).specs
        return {t.name: tuple(t.spec) for t in request.planned.leaves
                if tuple(t.spec) != tuple(placed.get(t.name, ()))}

    def _restore_compile(self, request: Request, mesh: MeshSpec) -> None:
        """The partitioner, the target and mapping, the compile switches and the time limit.
        A request with no target keeps a picked one that does not fit its mesh (it gave no
        target then)."""
        if not isinstance(request.mapping, str | None):
            raise InputError("its mapping is not text, as the sidebar holds it")
        self.sidebar.partitioner_w.value = check_partitioner(request.partitioner).value
        target = request.target
        if target is None and request.mapping is None and self.sidebar.target_w.value:
            try:
                check_target(self.sidebar.target_w.value, None, mesh)
            except ExplorerError:
                target = self.sidebar.target_w.value        # does not fit: no target, as before
        self.sidebar.target_w.options = target_options(mesh.device_count, target or "")
        self.sidebar.target_w.value = target or ""
        self.sidebar.mapping_w.value = request.mapping or ""
        self.sidebar.cpu_w.value = check_compile_for(request.compile_for) is CompileFor.CPU
        self.sidebar.measure_w.value = bool(request.measure)
        self.sidebar.timeout_w.value = limit_text(request)


def limit_text(request: Request) -> str:
    """The time limit box's text that makes `request`'s limit: empty where it is the default
    of what compiles it (as the sidebar fills it in: explorer._src.ui.sidebar.checks), else its
    seconds, so that a restored default still follows the target."""
    backend = request.planned.compile_plan.worker.backend
    if request.timeout is None or request.timeout == served_timeout(None, default_timeout(backend)):
        return ""
    return f"{request.timeout:g}"

