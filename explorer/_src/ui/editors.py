"""Sidebar editors: the mesh (add, remove, rename axes, set sizes and types) and one spec row
per tensor.

Each editor owns its widgets and reports edits through one callback; it never compiles. Both
hold structured values (axis names and sizes; per dimension, a tuple of mesh axes), so nothing
the user types is ever joined into text and parsed again.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence

import ipywidgets as w

from explorer._src.errors import MeshError, RankError, UnknownAxisError, choices
from explorer._src.spec.mesh import AXIS_TYPES, AxisType, MeshSpec
from explorer._src.spec.tensor import Entry, entry_axes

# The app edits meshes of at most this many axes: each axis is a row here and a choice in every
# spec picker, and beyond a handful neither reads. The Python API takes any number.
MAX_AXES = 8
# A tensor name longer than this (or of rank 4 and more) is put on a line of its own above its
# pickers; a shorter one of rank 3 or less sits beside them, on one line (rank 3: three pickers
# leave room for a shorter name).
LABEL_CHARS = 14
LABEL_CHARS_RANK_3 = 11


def css_name(tensor: str) -> str:
    """A tensor name as a CSS class suffix (letters, digits, '-', '_')."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in tensor)


class AxisRow:
    """One mesh axis: its name, its size, its type (jax's per-axis AxisType: auto, explicit,
    manual), a remove button and the row's own error."""

    def __init__(self, name: str, size: int, on_change: Callable[[], None],
                 on_remove: Callable[[AxisRow], None], kind: AxisType | str = AxisType.AUTO):
        self.name_w = w.Text(value=name, layout=w.Layout(width="90px"), continuous_update=False)
        self.size_w = w.IntText(value=size, layout=w.Layout(width="70px"))
        # A closed set: a dropdown, so no text is parsed.
        self.type_w = w.Dropdown(options=[str(t) for t in AXIS_TYPES], value=str(kind),
                                 layout=w.Layout(width="92px"),
                                 tooltip="how jax treats this axis: auto (the partitioner "
                                 "propagates), explicit (sharding in types), manual")
        self.remove = w.Button(description="✕", layout=w.Layout(width="36px"),
                               tooltip="remove this axis")
        self.error = w.HTML()
        self.error.add_class("explorer-error")
        # The name this row had in the last valid mesh: a rename carries spec picks over.
        self.committed: str | None = None
        self.widget = w.VBox([w.HBox([self.name_w, self.size_w, self.type_w, self.remove]),
                              self.error])
        self.widget.add_class("explorer-mesh-axis")
        self.name_w.observe(lambda _: on_change(), "value")
        self.size_w.observe(lambda _: on_change(), "value")
        self.type_w.observe(lambda _: on_change(), "value")
        self.remove.on_click(lambda _: on_remove(self))

    @property
    def name(self) -> str:
        return self.name_w.value.strip()

    @property
    def size(self) -> int:
        return self.size_w.value

    @property
    def kind(self) -> AxisType:
        return AxisType(self.type_w.value)

    def check(self) -> None:
        """This row alone: a valid axis name and size (MeshSpec's own rule), shown on the row."""
        try:
            MeshSpec((self.name,), (self.size,))
        except MeshError as e:
            self.error.value = html.escape(str(e))
            raise
        self.error.value = ""


class MeshEditor:
    """Rows of (name, size, type, remove) and an add button, up to MAX_AXES rows."""

    def __init__(self, axes: Sequence[tuple[str, int]], on_change: Callable[[], None],
                 types: Sequence[AxisType | str] | None = None):
        self._on_change = on_change
        self.rows: list[AxisRow] = []
        self.box = w.VBox()
        self.count = w.HTML()
        self.add = w.Button(description="+ axis", layout=w.Layout(width="80px"),
                            tooltip=f"add a mesh axis (at most {MAX_AXES})")
        self.add.on_click(lambda _: self._add())
        self.error = w.HTML()
        self.error.add_class("explorer-error")
        self.widget = w.VBox([w.HTML("<b>Mesh</b> (axis name, size, type)"), self.box,
                              w.HBox([self.add, self.count]), self.error])
        self.widget.add_class("explorer-mesh")
        self.set_axes(axes, types)

    def set_axes(self, axes: Sequence[tuple[str, int]],
                 types: Sequence[AxisType | str] | None = None) -> None:
        """Rows for `axes` ((name, size) pairs), of `types` (one per axis; auto where None)."""
        if len(axes) > MAX_AXES:
            raise MeshError(f"the app edits meshes of at most {MAX_AXES} axes; this one has "
                            f"{len(axes)}. Merge axes, or use explorer.analyze for more")
        kinds = list(types) if types is not None else [AxisType.AUTO] * len(axes)
        self.rows = [AxisRow(n, s, self._changed, self._remove, k)
                     for (n, s), k in zip(axes, kinds, strict=True)]
        self._layout()

    def _layout(self) -> None:
        self.box.children = [r.widget for r in self.rows]
        self.add.disabled = len(self.rows) >= MAX_AXES
        n = 1
        for r in self.rows:
            n *= max(r.size, 0)
        self.count.value = f"<span class='explorer-device-count'>{n} devices</span>"

    def _add(self) -> None:
        if len(self.rows) >= MAX_AXES:
            return
        taken = {r.name for r in self.rows}
        name = next(f"axis{i}" for i in range(len(taken) + 1) if f"axis{i}" not in taken)
        self.rows.append(AxisRow(name, 2, self._changed, self._remove))
        self._changed()

    def _remove(self, row: AxisRow) -> None:
        self.rows = [r for r in self.rows if r is not row]
        self._changed()

    def _changed(self) -> None:
        self._layout()
        self._on_change()

    @property
    def axes(self) -> list[tuple[str, int]]:
        return [(r.name, r.size) for r in self.rows]

    @property
    def types(self) -> list[AxisType]:
        """Each row's axis type, in order."""
        return [r.kind for r in self.rows]

    def row(self, name: str) -> AxisRow:
        return next(r for r in self.rows if r.name == name)

    def mesh(self) -> MeshSpec:
        """The mesh of the rows, built from their names, sizes and types; a bad row gets the
        error."""
        self.error.value = ""
        failed = None
        for r in self.rows:
            try:
                r.check()
            except MeshError as e:
                failed = failed or e
        if failed:
            raise failed
        seen: set[str] = set()
        for r in self.rows:
            if r.name in seen:
                message = f"mesh axis {r.name!r} appears twice; axis names must be unique"
                r.error.value = html.escape(message)
                raise MeshError(message, axis=r.name)
            seen.add(r.name)
        try:
            return MeshSpec(tuple(r.name for r in self.rows), tuple(r.size for r in self.rows),
                            tuple(r.kind for r in self.rows))
        except MeshError as e:          # no rows at all
            self.error.value = html.escape(str(e))
            raise

    def renames(self) -> dict[str, str]:
        """Old name -> new name of each row renamed since the last commit."""
        return {r.committed: r.name for r in self.rows
                if r.committed is not None and r.committed != r.name}

    def commit(self) -> None:
        """The rows' names are those of a valid mesh now."""
        for r in self.rows:
            r.committed = r.name


def entry_of(tags: Sequence[str]) -> Entry:
    """A picker's tags as a spec entry: none -> None, one axis -> its name, more -> a tuple."""
    tags = tuple(tags)
    return None if not tags else tags[0] if len(tags) == 1 else tags


def picker_width(rank: int) -> int:
    """Pixels per axis picker, so that a row of `rank` pickers fits a section of the 440 px
    sidebar (about 400 px inside) beside its label (rank 3 and less: two tags such as
    `data × model ×` on one line, the app's style making tags compact) or on a line of its own,
    24 px in (rank 4: one tag each); rank 5 and up wrap onto a second line rather than shrink
    the tags."""
    return 110 if rank <= 2 else 100 if rank == 3 else 84 if rank == 4 else 80


def check_row_spec(name: str, shape: Sequence[int], axis_names: Sequence[str], spec) -> None:
    """What a row's pickers can show: one entry per dimension (a shorter spec is padded with
    None), each naming axes of the mesh."""
    spec = tuple(spec) + (None,) * (len(shape) - len(spec))
    if len(spec) != len(shape):
        raise RankError(f"spec of {name!r} has {len(spec)} entries for a tensor of "
                        f"rank {len(shape)} {list(shape)}; give one per dimension", tensor=name)
    for e in spec:
        for a in entry_axes(e):
            if a not in axis_names:
                raise UnknownAxisError(
                    f"spec of {name!r} names mesh axis {a!r}, which the mesh lacks; "
                    f"its axes are {choices(axis_names)}", tensor=name, axis=a)


class SpecRow:
    """One tensor: its name and shape, an axis picker per dimension, and its inline error.

    A picker holds the mesh axes its dimension is split over, in order (major to minor): none
    for not split, one axis, or several. It offers each mesh axis once, so its choices grow with
    the axis count, not with the count of ordered axis tuples."""

    def __init__(self, name: str, shape: tuple[int, ...], axis_names: Sequence[str], spec,
                 on_change: Callable[[], None]):
        self.name, self.shape = name, shape
        self.axis_names = tuple(axis_names)
        spec = tuple(spec) + (None,) * (len(shape) - len(spec))
        self._check_axes(spec)
        self.pickers = [
            w.TagsInput(value=list(entry_axes(e)), allowed_tags=list(self.axis_names),
                        allow_duplicates=False, placeholder="not split",
                        tooltip=f"mesh axes dimension {d} of {name} is split over, major "
                                "first; empty: not split",
                        layout=w.Layout(width=f"{picker_width(len(shape))}px"))
            for d, e in enumerate(spec)]
        for d, p in enumerate(self.pickers):
            p.add_class(f"explorer-dim-{d}")
            p.observe(lambda _: on_change(), "value")
        shape_text = f"[{','.join(map(str, shape))}]"
        self.error = w.HTML()
        self.error.add_class("explorer-error")
        wrap = w.Layout(flex_flow="row wrap")      # pickers that do not fit wrap, never clip
        beside = len(shape) <= 2 and len(name) <= LABEL_CHARS or \
            len(shape) == 3 and len(name) <= LABEL_CHARS_RANK_3
        if beside:
            label = w.HTML(f"<code>{html.escape(name)}</code><br><small>{shape_text}</small>",
                           layout=w.Layout(width="110px" if len(shape) <= 2 else "90px"))
            self.widget = w.VBox([w.HBox([label, *self.pickers], layout=wrap), self.error])
        else:       # a long path (`layers.3.attn.q.kernel`) or many pickers: a line of its own
            label = w.HTML(f"<code>{html.escape(name)}</code> <small>{shape_text}</small>")
            self.widget = w.VBox([label, w.HBox([w.HTML(layout=w.Layout(width="24px")),
                                                 *self.pickers], layout=wrap), self.error])
        self.widget.add_class(f"explorer-spec-{css_name(name)}")

    @property
    def spec(self) -> tuple[Entry, ...]:
        return tuple(entry_of(p.value) for p in self.pickers)

    def _check_axes(self, spec) -> None:
        check_row_spec(self.name, self.shape, self.axis_names, spec)

    def set_axes(self, axis_names: Sequence[str],
                 renames: Mapping[str, str] | None = None) -> None:
        """Offer the new mesh's axes. A renamed axis keeps its place in the picks under its new
        name; an axis the mesh no longer has is dropped from them."""
        axis_names, renames = tuple(axis_names), renames or {}
        for p in self.pickers:
            tags = [renames.get(a, a) for a in p.value]
            tags = [a for a in tags if a in axis_names]
            # Widen the allowed tags first: the picker rejects a value outside them.
            p.allowed_tags = list(dict.fromkeys([*p.allowed_tags, *axis_names]))
            if tags != list(p.value):
                p.value = tags
            p.allowed_tags = list(axis_names)
        self.axis_names = axis_names

    def set_spec(self, spec) -> None:
        spec = tuple(spec) + (None,) * (len(self.shape) - len(spec))
        self._check_axes(spec)
        for p, e in zip(self.pickers, spec, strict=True):
            tags = list(entry_axes(e))
            if tags != list(p.value):
                p.value = tags
