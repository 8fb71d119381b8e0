"""Sidebar editors: the mesh (add, remove, rename axes, set sizes) and one spec row per tensor.

Each editor owns its widgets and reports edits through one callback; it never compiles.
"""

from __future__ import annotations

from itertools import permutations

import ipywidgets as w

from explorer.spec.tensor import Entry, entry_axes, format_entry, parse_spec


def css_name(tensor: str) -> str:
    """A tensor name as a CSS class suffix (letters, digits, '-', '_')."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in tensor)


class MeshEditor:
    """Rows of (name, size, remove) and an add button; `axes` is the current list of pairs."""

    def __init__(self, axes: list[tuple[str, int]], on_change):
        self._on_change = on_change
        self.rows = w.VBox()
        self.count = w.HTML()
        self.add = w.Button(description="+ axis", layout=w.Layout(width="80px"),
                            tooltip="add a mesh axis")
        self.add.on_click(lambda _: self._add())
        self.error = w.HTML()
        self.error.add_class("explorer-error")
        self.widget = w.VBox([w.HTML("<b>Mesh</b>"), self.rows, w.HBox([self.add, self.count]),
                              self.error])
        self.widget.add_class("explorer-mesh")
        self.set_axes(axes)

    def set_axes(self, axes: list[tuple[str, int]]) -> None:
        self.rows.children = [self._row(n, s) for n, s in axes]
        self._update_count()

    def _row(self, name: str, size: int) -> w.HBox:
        name_w = w.Text(value=name, layout=w.Layout(width="90px"), continuous_update=False)
        size_w = w.IntText(value=size, layout=w.Layout(width="70px"))
        remove = w.Button(description="✕", layout=w.Layout(width="36px"),
                          tooltip="remove this axis")
        row = w.HBox([name_w, size_w, remove])
        row.add_class("explorer-mesh-axis")
        name_w.observe(lambda _: self._changed(), "value")
        size_w.observe(lambda _: self._changed(), "value")
        remove.on_click(lambda _: self._remove(row))
        return row

    def _add(self) -> None:
        taken = {n for n, _ in self.axes}
        name = next(f"axis{i}" for i in range(len(taken) + 1) if f"axis{i}" not in taken)
        self.rows.children = [*self.rows.children, self._row(name, 2)]
        self._changed()

    def _remove(self, row) -> None:
        self.rows.children = [r for r in self.rows.children if r is not row]
        self._changed()

    @property
    def axes(self) -> list[tuple[str, int]]:
        return [(r.children[0].value.strip(), r.children[1].value) for r in self.rows.children]

    @property
    def text(self) -> str:
        return ",".join(f"{n}={s}" for n, s in self.axes)

    def _update_count(self) -> None:
        n = 1
        for _, s in self.axes:
            n *= max(s, 0)
        self.count.value = f"<span class='explorer-device-count'>{n} devices</span>"

    def _changed(self) -> None:
        self._update_count()
        self._on_change()


def entry_options(axis_names: tuple[str, ...], current: Entry = None) -> list[tuple[str, str]]:
    """Choices for one dimension: not split, each axis, and ordered combinations of axes.

    Option values are the entries' text (`None`, `data`, `(data,model)`), never None itself:
    ipywidgets shows a Dropdown whose value is None as having no selection at all."""
    options = [("—", "None")]
    for k in range(1, min(len(axis_names), 3) + 1):
        for combo in permutations(axis_names, k):
            text = format_entry(combo[0] if k == 1 else combo)
            options.append((text, text))
    current_text = format_entry(current)
    if all(v != current_text for _, v in options):
        options.append((current_text, current_text))   # e.g. a preset's 4-axis tuple
    return options


class SpecRow:
    """One tensor: its name and shape, a picker per dimension, and its inline error."""

    def __init__(self, name: str, shape: tuple[int, ...], axis_names, spec, on_change):
        self.name, self.shape = name, shape
        spec = tuple(spec) + (None,) * (len(shape) - len(spec))
        self.pickers = [w.Dropdown(options=entry_options(axis_names, e), value=format_entry(e),
                                   layout=w.Layout(width="110px"),
                                   description_allow_html=False) for e in spec]
        for p in self.pickers:
            p.observe(lambda _: on_change(), "value")
        label = w.HTML(f"<code>{name}</code><br><small>[{','.join(map(str, shape))}]</small>",
                       layout=w.Layout(width="110px"))
        self.error = w.HTML()
        self.error.add_class("explorer-error")
        self.widget = w.VBox([w.HBox([label, *self.pickers]), self.error])
        self.widget.add_class(f"explorer-spec-{css_name(name)}")

    @property
    def spec(self) -> tuple[Entry, ...]:
        return tuple(parse_spec(p.value)[0] for p in self.pickers)

    def set_axes(self, axis_names) -> None:
        """Offer the new mesh's axes; entries naming a removed axis fall back to not split."""
        for p, entry in zip(self.pickers, self.spec, strict=True):
            keep = entry if all(a in axis_names for a in entry_axes(entry)) else None
            options = entry_options(axis_names, keep)
            if tuple(p.options) != tuple(options):
                p.options = options
            p.value = format_entry(keep)

    def set_spec(self, spec) -> None:
        spec = tuple(spec) + (None,) * (len(self.shape) - len(spec))
        for p, e in zip(self.pickers, spec, strict=True):
            text = format_entry(e)
            if text not in [v for _, v in p.options]:
                p.options = [*p.options, (text, text)]
            p.value = text
