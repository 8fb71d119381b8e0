"""The sidebar's spec editor: one row of axis pickers per input tensor, for a handful of tensors
or for hundreds.

A few tensors are listed as they are. More than GROUP_AT are put in collapsible sections, by
what they are (parameters, optimizer state, inputs, or the function's argument) and within that
by layer (the name up to its layer index: `layers.3`, `m.l3`); a section's rows are built when
it is first opened, so a large model costs only the rows the user looks at. A filter box lists
the tensors whose names match, and "same as" gives every tensor matching a pattern the spec of
one tensor.

The editor holds every tensor's spec (the rows show them); `pinned` are those the user set,
which win over what the preset, rules or patterns place.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import ipywidgets as w

from explorer._src.errors import SpecError, choices
from explorer._src.spec.tensor import Spec, entry_axes, format_spec
from explorer._src.ui.editors import SpecRow
from explorer._src.ui.sources import InputTensor

GROUP_AT = 16          # more tensors than this are put in sections
MAX_LISTED = 60        # rows one filter lists at once
_LAYER_PART = re.compile(r"[A-Za-z_]*\d+")


def layer_prefix(name: str) -> str | None:
    """The name up to its layer index: `layers.3.attn.q.kernel` -> `layers.3`, `m.l3.wq` ->
    `m.l3`; None when no part before the last is a layer index (`embed`, `up.kernel`)."""
    parts = name.split(".")
    for i, part in enumerate(parts[:-1]):
        if _LAYER_PART.fullmatch(part):
            return ".".join(parts[: i + 1])
    return None


def _natural(text: str) -> list:
    """Sort key reading digit runs as numbers: `l2` before `l10`."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


@dataclass(frozen=True)
class Section:
    """A collapsible part of the editor: its title and tensors, or sub-sections by layer."""

    title: str
    names: tuple[str, ...]
    parts: tuple[Section, ...] = ()


def sections(tensors: Sequence[InputTensor], group_at: int = GROUP_AT) -> list[Section]:
    """Sections by what the tensors are, in order of first appearance; a section with more than
    `group_at` tensors in more than one layer is split by layer (tensors outside any layer
    first, then the layers in numeric order)."""
    groups: dict[str, list[str]] = {}
    for t in tensors:
        groups.setdefault(t.group, []).append(t.name)
    out = []
    for group, names in groups.items():
        parts: tuple[Section, ...] = ()
        if len(names) > group_at:
            layers: dict[str, list[str]] = {}
            for n in names:
                layers.setdefault(layer_prefix(n) or "", []).append(n)
            if len(layers) > 1:
                keys = sorted(layers, key=lambda k: (k != "", _natural(k)))
                parts = tuple(Section(f"{k or 'not in a layer'} ({len(layers[k])})",
                                      tuple(layers[k])) for k in keys)
        out.append(Section(f"{group} ({len(names)})", tuple(names), parts))
    return out


def names_matching(names: Sequence[str], pattern: str) -> list[str]:
    """The names `pattern` finds (re.search, case-insensitive); text that is not a regular
    expression is matched literally."""
    try:
        compiled = re.compile(pattern, re.IGNORECASE)
    except re.error:
        compiled = re.compile(re.escape(pattern), re.IGNORECASE)
    return [n for n in names if compiled.search(n)]


def renamed_spec(spec: Spec, axis_names: Sequence[str], renames: Mapping[str, str],
                 dropped: Collection[str] | None = None) -> Spec:
    """`spec` on a new mesh: renamed axes renamed, and the axes in `dropped` left out (by
    default every axis `axis_names` lacks; a spec given from outside the editor keeps an axis the
    mesh never had, so that its check names it)."""
    out = []
    for e in spec:
        axes = [renames.get(a, a) for a in entry_axes(e)]
        axes = [a for a in axes if (a in axis_names if dropped is None else a not in dropped)]
        out.append(None if not axes else axes[0] if len(axes) == 1 else tuple(axes))
    return tuple(out)


def carried_renames(carried: Mapping[str, str | None], before: Sequence[str],
                    after: Sequence[str], renames: Mapping[str, str]) -> dict[str, str | None]:
    """What became of each mesh axis, after one valid mesh edit from axes `before` to `after`
    in which `renames` (old name -> new) were made: `carried` maps an axis's first name to its
    name now (None once removed), leaving out those still under their first name."""
    def step(name: str) -> str | None:
        new = renames.get(name, name)
        return new if new in after else None

    out = {first: None if now is None else step(now) for first, now in carried.items()}
    for name in before:                       # axes still under their first name
        if name not in carried and name not in carried.values():
            out[name] = step(name)
    # An axis added under the name of one removed earlier is that axis again.
    current = set(out.values())
    for first, now in out.items():
        if now is None and first in after and first not in current:
            out[first] = first
    return {first: now for first, now in out.items() if first != now}


class _Sections(w.Accordion):
    """An Accordion that knows which Section each of its children shows."""

    def __init__(self, parts: Sequence[Section], **kwargs):
        super().__init__(**kwargs)
        self.parts = tuple(parts)


class SpecsEditor:
    """Spec rows for the program's inputs, in sections when there are many.

    `on_pick(name)` is called when the user sets a tensor's spec (name None: several at once,
    by "same as"); programmatic changes (set_spec, set_axes) call nothing."""

    def __init__(self, on_pick: Callable[[str | None], None],
                 guard: Callable[[Callable], Callable] = lambda f: f, group_at: int = GROUP_AT):
        self._on_pick, self._guard, self.group_at = on_pick, guard, group_at
        self.tensors: dict[str, InputTensor] = {}
        self.specs: dict[str, Spec] = {}
        self.pinned: set[str] = set()
        self.errors: dict[str, str] = {}
        self.rows: dict[str, SpecRow] = {}            # the rows built so far
        self.axis_names: tuple[str, ...] = ()
        self._sections: list[Section] = []
        self._quiet = 0

        self.count = w.HTML()
        self.filter_w = w.Text(placeholder="filter by name (regular expression)",
                               continuous_update=False, layout=w.Layout(width="300px"))
        self.filter_w.add_class("explorer-spec-filter")
        self.filter_w.observe(guard(lambda _: self._draw()), "value")
        self.same_from = w.Combobox(placeholder="copy from tensor", ensure_option=True,
                                    layout=w.Layout(width="150px"))
        self.same_to = w.Text(placeholder="to names matching (regex)", continuous_update=False,
                              layout=w.Layout(width="180px"))
        self.same_apply = w.Button(description="apply", layout=w.Layout(width="64px"),
                                   tooltip="give every tensor whose name matches the pattern "
                                           "(same rank) the spec of the chosen tensor")
        self.same_apply.add_class("explorer-same-as")
        self.same_apply.on_click(guard(lambda _: self.same_as(self.same_from.value,
                                                              self.same_to.value)))
        self.same_note = w.HTML()
        same_head = w.HTML("<small><b>Same as</b>: copy one tensor's spec to every name "
                           "matching a pattern</small>")
        same_head.add_class("explorer-same-head")
        self.same_box = w.VBox([
            same_head,
            w.HBox([self.same_from, self.same_to, self.same_apply]), self.same_note])
        self.error_summary = w.HTML()
        self.error_summary.add_class("explorer-error")
        self.body = w.VBox()
        self.widget = w.VBox([self.count, self.filter_w, self.same_box, self.error_summary,
                              self.body])
        self.widget.add_class("explorer-specs")

    # ------------------------------------------------------------------ the tensors

    def set_tensors(self, tensors: Sequence[InputTensor], axis_names: Sequence[str],
                    specs: Mapping[str, Spec] | None = None) -> None:
        """A new tensor list (a new workload, new params). A tensor keeps its spec and pin when
        its rank is unchanged; `specs` are placed (not pinned) where given."""
        specs = dict(specs or {})
        old, old_tensors = self.specs, self.tensors
        self.tensors = {t.name: t for t in tensors}
        self.axis_names = tuple(axis_names)
        self.specs = {}
        for t in tensors:
            kept = old.get(t.name)
            same_rank = t.name in old_tensors and len(old_tensors[t.name].shape) == len(t.shape)
            spec = specs.get(t.name, kept if same_rank else ())
            self.specs[t.name] = tuple(spec) + (None,) * (len(t.shape) - len(spec))
        self.pinned = {n for n in self.pinned if n in self.tensors
                       and len(old_tensors[n].shape) == len(self.tensors[n].shape)}
        self.errors = {}
        self.rows = {}
        self._sections = sections(tensors, self.group_at)
        self.same_from.options = list(self.tensors)
        n = len(self.tensors)
        self.count.value = (f"<b>Specs</b> (mesh axes per dimension) · {n} tensor"
                            f"{'s' if n != 1 else ''}")
        self._draw()

    @property
    def grouped(self) -> bool:
        return len(self.tensors) > self.group_at

    def _row(self, name: str) -> SpecRow:
        row = self.rows.get(name)
        if row is None:
            t = self.tensors[name]
            row = SpecRow(name, t.shape, self.axis_names, self.specs[name],
                          self._guard(lambda n=name: self._picked(n)))
            if name in self.pinned:
                row.widget.add_class("explorer-pinned")
            row.error.value = html.escape(self.errors.get(name, ""))
            self.rows[name] = row
        return row

    def _draw(self) -> None:
        """The body: every row (few tensors), the filter's matches, or the sections."""
        self.same_box.layout.display = "" if self.tensors else "none"
        pattern = self.filter_w.value.strip()
        if pattern:
            names = names_matching(list(self.tensors), pattern)
            shown = names[:MAX_LISTED]
            more = (f"<small>… {len(names) - len(shown)} more: narrow the filter</small>"
                    if len(names) > len(shown) else "")
            head = f"<small>{len(names)} of {len(self.tensors)} tensors match</small>"
            self.body.children = [w.HTML(head), *(self._row(n).widget for n in shown),
                                  *([w.HTML(more)] if more else [])]
        elif not self.grouped:
            self.body.children = [self._row(n).widget for n in self.tensors]
        else:
            self.body.children = [self._accordion(self._sections)]
        self._show_error_summary()

    def _accordion(self, parts: Sequence[Section]) -> _Sections:
        """Collapsed sections whose rows are built when a section is first opened."""
        acc = _Sections(parts, children=[w.VBox() for _ in parts],
                        titles=tuple(self._title(s) for s in parts))
        acc.selected_index = None
        acc.add_class("explorer-spec-sections")

        def opened(change):
            i = change["new"]
            if i is not None and not acc.children[i].children:
                self._fill(acc.children[i], parts[i])
            self._show_error_summary()

        acc.observe(self._guard(opened), "selected_index")
        return acc

    def _fill(self, box: w.VBox, section: Section) -> None:
        box.children = ([self._accordion(section.parts)] if section.parts
                        else [self._row(n).widget for n in section.names])

    def _title(self, section: Section) -> str:
        bad = sum(n in self.errors for n in section.names)
        return section.title + (f" ⚠ {bad}" if bad else "")

    def open(self, name: str) -> SpecRow:
        """The row of `name`, built and shown: its sections opened (or the filter cleared)."""
        if name not in self.tensors:
            raise SpecError(f"no input tensor named {name!r}; inputs: {choices(self.tensors)}",
                            tensor=name)
        if self.filter_w.value.strip() and name not in names_matching(list(self.tensors),
                                                                      self.filter_w.value.strip()):
            self.filter_w.value = ""
        if self.grouped and not self.filter_w.value.strip():
            node = self.body.children[0]
            while isinstance(node, _Sections):
                parts = node.parts
                i = next(k for k, s in enumerate(parts) if name in s.names)
                node.selected_index = i
                box = node.children[i]
                if not box.children:
                    self._fill(box, parts[i])
                node = box.children[0] if parts[i].parts else None
        return self._row(name)

    # ------------------------------------------------------------------ specs

    def spec(self, name: str) -> Spec:
        return self.specs[name]

    def set_spec(self, name: str, spec: Spec) -> None:
        """Show `spec` for `name` (placed by the preset, rules or patterns; not a pick)."""
        spec = tuple(spec) + (None,) * (len(self.tensors[name].shape) - len(spec))
        self.specs[name] = spec
        row = self.rows.get(name)
        if row is not None:
            self._quiet += 1
            try:
                row.set_spec(spec)
            finally:
                self._quiet -= 1

    def pick(self, name: str, spec: Spec) -> None:
        """Set `name`'s spec as the user does: pinned, and the app told."""
        self._pin(name)
        self.set_spec(name, spec)
        self._on_pick(name)

    def _pin(self, name: str) -> None:
        self.pinned.add(name)
        if name in self.rows:
            self.rows[name].widget.add_class("explorer-pinned")

    def release(self, names: Collection[str] | None = None) -> None:
        """Forget the user's picks, of `names` or of every tensor, so that the preset, rules or
        patterns place them again."""
        released = set(self.pinned) if names is None else set(names) & self.pinned
        self.pinned -= released
        for name in released:
            if name in self.rows:
                self.rows[name].widget.remove_class("explorer-pinned")

    def _picked(self, name: str) -> None:
        if self._quiet:
            return
        self.specs[name] = self.rows[name].spec
        self._pin(name)
        self._on_pick(name)

    def set_axes(self, axis_names: Sequence[str], renames: Mapping[str, str]) -> None:
        """The mesh's axes changed: pickers offer the new ones, and every spec follows a
        renamed axis and drops a removed one."""
        self.axis_names = tuple(axis_names)
        self._quiet += 1
        try:
            for name, spec in self.specs.items():
                self.specs[name] = renamed_spec(spec, self.axis_names, renames)
            for row in self.rows.values():
                row.set_axes(self.axis_names, renames)
        finally:
            self._quiet -= 1

    def same_as(self, source: str, pattern: str) -> tuple[list[str], list[str]]:
        """Give every tensor whose name `pattern` finds (re.search) the spec of `source`;
        those of another rank are skipped. Returns (set, skipped)."""
        if source not in self.tensors:
            raise SpecError(f"same as: pick the tensor to copy from; {source!r} is not an "
                            f"input (inputs: {choices(self.tensors)})", tensor=source or None)
        try:
            compiled = re.compile(pattern)
        except re.error as e:
            raise SpecError(f"same as: {pattern!r} is not a regular expression ({e})") from None
        if not pattern.strip():
            raise SpecError("same as: give a pattern of the names to set, e.g. "
                            r"'layers\.\d+\.up\.kernel'")
        rank = len(self.tensors[source].shape)
        spec = self.specs[source]
        names = [n for n in self.tensors if n != source and compiled.search(n)]
        done = [n for n in names if len(self.tensors[n].shape) == rank]
        skipped = [n for n in names if n not in done]
        for n in done:
            self._pin(n)
            self.set_spec(n, spec)
        note = (f"set {len(done)} tensor{'s' if len(done) != 1 else ''} to "
                f"<code>{html.escape(format_spec(spec))}</code>")
        if skipped:
            note += (f"; skipped {len(skipped)} of another rank than {rank} "
                     f"({html.escape(', '.join(skipped[:4]))}{'…' if len(skipped) > 4 else ''})")
        if not names:
            note = f"no tensor name matches <code>{html.escape(pattern)}</code>"
        self.same_note.value = f"<small class='explorer-same-note'>{note}</small>"
        if done:
            self._on_pick(None)
        return done, skipped

    # ------------------------------------------------------------------ errors

    def show_error(self, name: str, message: str) -> None:
        self.errors[name] = message
        if name in self.rows:
            self.rows[name].error.value = html.escape(message)
        self._show_error_summary()

    def clear_errors(self) -> None:
        for name in self.errors:
            if name in self.rows:
                self.rows[name].error.value = ""
        self.errors = {}
        self._show_error_summary()

    def _show_error_summary(self) -> None:
        """Errors on rows the user cannot see (in a closed section, outside the filter) are
        named here; section titles count them."""
        visible = self._visible()
        hidden = [n for n in self.errors if n not in visible]
        self.error_summary.value = (
            f"{html.escape(hidden[0])}: {html.escape(self.errors[hidden[0]])}"
            + (f" (and {len(hidden) - 1} more tensors)" if len(hidden) > 1 else "")
            if hidden else "")
        for child in self.body.children:
            self._retitle(child)

    def _visible(self) -> set[str]:
        """The tensors whose rows are on screen now."""
        out: set[str] = set()
        rows = {id(r.widget): n for n, r in self.rows.items()}

        def walk(node):
            if id(node) in rows:
                out.add(rows[id(node)])
            elif isinstance(node, _Sections):
                if node.selected_index is not None:
                    walk(node.children[node.selected_index])
            elif isinstance(node, w.Box):
                for c in node.children:
                    walk(c)

        walk(self.body)
        return out

    def _retitle(self, node) -> None:
        if isinstance(node, _Sections):
            titles = tuple(self._title(s) for s in node.parts)
            if tuple(node.titles) != titles:
                node.titles = titles
            for c in node.children:
                for grandchild in c.children:
                    self._retitle(grandchild)


class KeptPicks:
    """Under the rules box: the hand-set specs that the preset or rules would place otherwise.
    A rule never silently replaces what the user picked; this says which tensors the rules did
    not touch, and its button hands them to the rules (`on_release(names)`)."""

    def __init__(self, on_release: Callable[[list[str]], None]):
        self.kept: dict[str, tuple[Spec, Spec]] = {}
        self.note = w.HTML()
        self.note.add_class("explorer-note")
        self.button = w.Button(description="let the rules place them", icon="undo",
                               layout=w.Layout(width="auto", display="none"),
                               tooltip="release these hand-set specs: the preset and rules "
                                       "place them")
        self.button.on_click(lambda _: on_release(list(self.kept)))
        self.widget = w.VBox([self.note, self.button])
        self.widget.add_class("explorer-kept-picks")

    def show(self, kept: Mapping[str, tuple[Spec, Spec]]) -> None:
        """`kept`: tensor -> (its hand-set spec, the spec the rules give it)."""
        self.kept = dict(kept)
        self.button.layout.display = "" if kept else "none"
        if not kept:
            self.note.value = ""
            return
        items = [f"<code>{html.escape(n)}</code> {html.escape(format_spec(mine) or 'replicated')}"
                 f" (the rules: {html.escape(format_spec(theirs) or 'replicated')})"
                 for n, (mine, theirs) in list(kept.items())[:6]]
        more = f" and {len(kept) - 6} more" if len(kept) > 6 else ""
        self.note.value = ("<div>Hand-set specs kept over the rules: " + "; ".join(items)
                           + more + ".</div>")
