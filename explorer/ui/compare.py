"""Compare two results: pin one as A, keep editing, and see what changed in B.

`compare` is pure (Report in, frozen Comparison out), so its plain-text form can be tested
exactly; `comparison_html` and `CompareView` only draw it.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field

import ipywidgets as w

from explorer.cost.model import format_seconds
from explorer.report.report import Collective, Report
from explorer.report.summary import human_bytes

# What identifies "the same collective" in two programs. Not hlo_name: XLA renumbers
# instructions on every compile, so names say nothing across programs.
CollectiveKey = tuple[str, tuple[str, ...], tuple[int, ...], str, str]

ADDED_COLOUR = "#dcfce7"      # green-100: in B, not in A
REMOVED_COLOUR = "#fee2e2"    # red-100: in A, not in B


def collective_key(c: Collective) -> CollectiveKey:
    return (c.kind, c.axes, c.shape, c.dtype, c.source)


@dataclass(frozen=True)
class Delta:
    """One number measured in A and in B. `unit` is "bytes", "seconds" or "count"."""

    name: str
    a: float | None
    b: float | None
    unit: str

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    def format(self, value: float | None, signed: bool = False) -> str:
        if value is None:
            return "n/a"
        sign = "+" if signed and value > 0 else ""
        if self.unit == "bytes":
            return sign + human_bytes(value)
        if self.unit == "seconds":
            return ("-" if value < 0 else sign) + format_seconds(abs(value))
        return f"{sign}{value:g}"

    def delta_text(self) -> str:
        d = self.delta
        if d is None:
            return "n/a"
        if d == 0:
            return "same"
        text = self.format(d, signed=True)
        return f"{text} ({d / self.a:+.0%})" if self.a else text

    def to_dict(self) -> dict:
        return {"name": self.name, "a": self.a, "b": self.b, "unit": self.unit,
                "delta": self.delta}


@dataclass(frozen=True)
class CollectiveRow:
    """All collectives of one key, counted in A and in B (the multiset view)."""

    kind: str
    axes: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: str
    source: str
    count_a: int
    count_b: int
    bytes_a: int          # summed over A's collectives of this key, per device
    bytes_b: int

    @property
    def status(self) -> str:
        if self.count_a == self.count_b:
            return "unchanged"
        return "added" if self.count_b > self.count_a else "removed"

    def describe(self) -> str:
        axes = ",".join(self.axes) or "?"
        return (f"{self.kind} over {axes} {self.dtype}[{','.join(map(str, self.shape))}]"
                f" from {self.source or 'unknown source'}")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "axes": list(self.axes), "shape": list(self.shape),
                "dtype": self.dtype, "source": self.source, "count_a": self.count_a,
                "count_b": self.count_b, "bytes_a": self.bytes_a, "bytes_b": self.bytes_b,
                "status": self.status}


@dataclass(frozen=True)
class Comparison:
    """What changed from result A (pinned) to result B (current)."""

    a_title: str
    b_title: str
    changes: tuple[str, ...]              # the inputs that differ: mesh, specs, params, ...
    rows: tuple[CollectiveRow, ...]        # one per collective key, in A's order then B's
    added: tuple[Collective, ...]          # in B and not matched in A
    removed: tuple[Collective, ...]        # in A and not matched in B
    unchanged: int                         # collectives matched between A and B
    metrics: tuple[Delta, ...]             # bytes, memory, predictions, compile time
    notes: tuple[str, ...] = field(default=())

    @property
    def identical_collectives(self) -> bool:
        return not self.added and not self.removed

    def metric(self, name: str) -> Delta:
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(f"no metric {name!r}; metrics: {', '.join(m.name for m in self.metrics)}")

    def to_dict(self) -> dict:
        return {"a": self.a_title, "b": self.b_title, "changes": list(self.changes),
                "collectives": [r.to_dict() for r in self.rows],
                "added": [c.to_dict() for c in self.added],
                "removed": [c.to_dict() for c in self.removed],
                "unchanged": self.unchanged,
                "metrics": [m.to_dict() for m in self.metrics], "notes": list(self.notes)}

    def render_text(self) -> str:
        lines = [f"A: {self.a_title}", f"B: {self.b_title}"]
        lines.append("changed: " + ("; ".join(self.changes) if self.changes else "nothing"))
        table = [["", "A", "B", "B - A"]]
        for m in self.metrics:
            table.append([m.name, m.format(m.a), m.format(m.b), m.delta_text()])
        widths = [max(len(r[i]) for r in table) for i in range(4)]
        lines += ["  ".join(c.ljust(wd) for c, wd in zip(r, widths, strict=True)).rstrip()
                  for r in table]
        for title, items in (("removed (in A, not in B)", self.removed),
                             ("added (in B, not in A)", self.added)):
            lines.append(f"{title}: {len(items) or 'none'}")
            lines += [f"  {_collective_text(c)}" for c in items]
        lines.append(f"unchanged: {self.unchanged}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _collective_text(c: Collective) -> str:
    parts = f" x{c.parts}" if c.parts > 1 else ""
    return (f"{c.kind}{parts} over {','.join(c.axes) or '?'}  "
            f"{c.dtype}[{','.join(map(str, c.shape))}]  {human_bytes(c.bytes)}  "
            f"{c.source or '(unknown source)'}")


def report_title(r: Report) -> str:
    """One line naming what was compiled: workload, preset, mesh, partitioner, target."""
    wl = r.workload.to_dict() if r.workload else {}
    name = wl.get("name") or "function"
    preset = f" preset {wl['preset']}" if wl.get("preset") else ""
    target = f" on {r.estimate.target}" if r.estimate is not None else ""
    return f"{name}{preset} · {r.mesh.text()} · {r.partitioner}{target}"


def _dict_changes(label: str, a: dict, b: dict) -> list[str]:
    out = []
    for k in list(a) + [k for k in b if k not in a]:
        va, vb = a.get(k), b.get(k)
        if va != vb:
            out.append(f"{label} {k}: {_show(va)} -> {_show(vb)}")
    return out


def _show(v) -> str:
    return "—" if v is None or v == "" else str(v)


def input_changes(a: Report, b: Report) -> list[str]:
    """The inputs that differ between A and B, as short readable phrases."""
    out = []
    wa = a.workload.to_dict() if a.workload else {}
    wb = b.workload.to_dict() if b.workload else {}
    if wa.get("name") != wb.get("name"):
        out.append(f"workload {_show(wa.get('name'))} -> {_show(wb.get('name'))}")
    if a.mesh != b.mesh:
        out.append(f"mesh {a.mesh.text()} -> {b.mesh.text()}")
    if a.partitioner != b.partitioner:
        out.append(f"partitioner {a.partitioner} -> {b.partitioner}")
    ta = a.estimate.target if a.estimate is not None else None
    tb = b.estimate.target if b.estimate is not None else None
    if ta != tb:
        out.append(f"target {_show(ta)} -> {_show(tb)}")
    if wa.get("name") == wb.get("name"):
        # Params and specs only mean the same thing within one workload.
        for key in ("preset", "rules"):
            if wa.get(key) != wb.get(key):
                out.append(f"{key} {_show(wa.get(key))} -> {_show(wb.get(key))}")
        out += _dict_changes("param", wa.get("params") or {}, wb.get("params") or {})
        out += _dict_changes("spec", wa.get("specs") or {}, wb.get("specs") or {})
        out += _dict_changes("activation", wa.get("activations") or {},
                             wb.get("activations") or {})
    return out


def compare(a: Report, b: Report) -> Comparison:
    """Compare result A with result B: collectives matched as a multiset, and the totals."""
    by_key: dict[CollectiveKey, list[list[Collective]]] = {}
    for side, report in enumerate((a, b)):
        for c in report.collectives:
            by_key.setdefault(collective_key(c), [[], []])[side].append(c)
    rows, added, removed, unchanged = [], [], [], 0
    for key, (in_a, in_b) in by_key.items():
        kind, axes, shape, dtype, source = key
        rows.append(CollectiveRow(kind, axes, shape, dtype, source, len(in_a), len(in_b),
                                  sum(c.bytes for c in in_a), sum(c.bytes for c in in_b)))
        # Matched in program order; the surplus on either side is what was added or removed.
        unchanged += min(len(in_a), len(in_b))
        removed += in_a[len(in_b):]
        added += in_b[len(in_a):]

    metrics = [
        Delta("collectives", len(a.collectives), len(b.collectives), "count"),
        Delta("collective bytes/device", sum(c.bytes for c in a.collectives),
              sum(c.bytes for c in b.collectives), "bytes"),
    ]
    notes = []
    if a.memory is not None and b.memory is not None:
        metrics += [
            Delta("memory/device", a.memory.total, b.memory.total, "bytes"),
            Delta("  arguments", a.memory.arguments, b.memory.arguments, "bytes"),
            Delta("  temporaries", a.memory.temporaries, b.memory.temporaries, "bytes"),
        ]
    else:
        notes.append("memory: a backend reported no memory analysis")
    ea, eb = a.estimate, b.estimate
    if ea is not None and eb is not None:
        metrics += [
            Delta("step (full overlap)", ea.step_lower_seconds, eb.step_lower_seconds, "seconds"),
            Delta("step (no overlap)", ea.step_upper_seconds, eb.step_upper_seconds, "seconds"),
            Delta("communication", ea.comm_seconds, eb.comm_seconds, "seconds"),
        ]
        if ea.target != eb.target:
            notes.append(f"predictions are for different targets: {ea.target} and {eb.target}")
    else:
        notes.append("predicted time: pick a target for both A and B")
    metrics.append(Delta("compile (measured)", a.timing.lower_s + a.timing.compile_s,
                         b.timing.lower_s + b.timing.compile_s, "seconds"))
    return Comparison(report_title(a), report_title(b), tuple(input_changes(a, b)),
                      tuple(rows), tuple(added), tuple(removed), unchanged, tuple(metrics),
                      tuple(notes))


# ---------------------------------------------------------------------------------- HTML

_CSS = ("<style>.explorer-compare table{border-collapse:collapse;font-size:12px;margin:4px 0 10px}"
        ".explorer-compare th,.explorer-compare td{border-bottom:1px solid #ddd;padding:2px 8px;"
        "text-align:left}.explorer-compare td.explorer-num{text-align:right;"
        "font-variant-numeric:tabular-nums}.explorer-compare th.explorer-side{"
        "border-left:2px solid #999}.explorer-compare td.explorer-side{border-left:2px solid #999}"
        ".explorer-compare .explorer-better{color:#15803d}"
        ".explorer-compare .explorer-worse{color:#b91c1c}</style>")


def _delta_cell(m: Delta) -> str:
    d = m.delta
    # Less is better for every number shown here (bytes, memory, seconds, collective count).
    cls = "" if not d else (" explorer-worse" if d > 0 else " explorer-better")
    return f"<td class='explorer-num{cls}'>{html.escape(m.delta_text())}</td>"


def _status_text(r: CollectiveRow) -> str:
    if r.status == "unchanged" or 0 in (r.count_a, r.count_b):
        return r.status
    return f"{r.status} {r.count_b - r.count_a:+d}".replace("-", "−")


def _indent(name: str) -> str:
    """Sub-rows (names starting with spaces, e.g. "  arguments") are indented."""
    depth = len(name) - len(name.lstrip())
    return f" style='padding-left:{8 + 8 * depth}px;color:#555'" if depth else ""


def comparison_html(c: Comparison) -> str:
    e = html.escape
    head = (f"<p><b>A</b> (pinned): {e(c.a_title)}<br><b>B</b> (current): {e(c.b_title)}<br>"
            f"<b>changed</b>: {e('; '.join(c.changes)) if c.changes else 'nothing'}</p>")
    metric_rows = "".join(
        f"<tr><td{_indent(m.name)}>{e(m.name.strip())}</td>"
        f"<td class='explorer-num'>{e(m.format(m.a))}</td>"
        f"<td class='explorer-num'>{e(m.format(m.b))}</td>{_delta_cell(m)}</tr>"
        for m in c.metrics)
    metrics = ("<table class='explorer-compare-metrics'><tr><th></th><th>A</th><th>B</th>"
               f"<th>B − A</th></tr>{metric_rows}</table>")
    summary = (f"<p class='explorer-compare-summary'>Collectives: <b>{len(c.removed)}</b> removed, "
               f"<b>{len(c.added)}</b> added, {c.unchanged} unchanged.</p>")
    if c.rows:
        body = []
        for r in c.rows:
            status = r.status
            colour = {"added": ADDED_COLOUR, "removed": REMOVED_COLOUR}.get(status)
            style = f" style='background:{colour}'" if colour else ""
            side = [(r.count_a, r.bytes_a), (r.count_b, r.bytes_b)]
            cells = "".join(
                f"<td class='explorer-num explorer-side'>{n or '—'}</td>"
                f"<td class='explorer-num'>{human_bytes(nb) if n else ''}</td>"
                for n, nb in side)
            body.append(
                f"<tr class='explorer-compare-{status}'{style} data-kind='{e(r.kind)}'>"
                f"<td>{_status_text(r)}</td><td>{e(r.kind)}</td>"
                f"<td>{e(','.join(r.axes) or '?')}</td>"
                f"<td>{e(r.dtype)}[{','.join(map(str, r.shape))}]</td>"
                f"<td><code>{e(r.source or '—')}</code></td>{cells}</tr>")
        table = ("<table class='explorer-compare-collectives'><tr><th></th><th>kind</th>"
                 "<th>axes</th><th>shape</th><th>source</th>"
                 "<th class='explorer-side'>A count</th><th>A bytes</th>"
                 "<th class='explorer-side'>B count</th><th>B bytes</th></tr>"
                 f"{''.join(body)}</table>")
    else:
        table = "<p>Neither A nor B has a collective.</p>"
    notes = "".join(f"<li>{e(n)}</li>" for n in c.notes)
    notes = f"<ul class='explorer-compare-notes'>{notes}</ul>" if notes else ""
    return (f"{_CSS}<div class='explorer-compare'>{head}{metrics}{summary}{table}{notes}"
            "</div>")


class CompareView:
    """Pin the current result as A; every later result is B, compared with A.

    `get_current` returns the app's current Report (or None before the first result)."""

    EMPTY = ("<p class='explorer-compare-empty'>Pin a result to compare: press <b>Pin current "
             "as A</b>, then keep editing; each new result is B.</p>")

    def __init__(self, get_current: Callable[[], Report | None]):
        self.get_current = get_current
        self.pinned: Report | None = None
        self.current: Report | None = None
        self.comparison: Comparison | None = None
        self.pin_button = w.Button(description="Pin current as A", icon="thumb-tack",
                                   tooltip="keep the current result as A; edits then show as B",
                                   layout=w.Layout(width="170px"))
        self.pin_button.add_class("explorer-compare-pin")
        self.clear_button = w.Button(description="Clear", icon="times", disabled=True,
                                     layout=w.Layout(width="90px"))
        self.clear_button.add_class("explorer-compare-clear")
        self.html = w.HTML(self.EMPTY)
        self.pin_button.on_click(lambda _: self.pin(self.get_current()))
        self.clear_button.on_click(lambda _: self.clear())
        self.widget = w.VBox([w.HBox([self.pin_button, self.clear_button]), self.html])
        self.widget.add_class("explorer-compare")

    def pin(self, report: Report | None) -> None:
        if report is None:
            self.html.value = "<p class='explorer-compare-empty'>No result to pin yet.</p>"
            return
        self.pinned = report
        current = self.get_current()
        self.current = current if current is not None else report
        self.clear_button.disabled = False
        self._draw()

    def clear(self) -> None:
        self.pinned = self.comparison = None
        self.clear_button.disabled = True
        self._draw()

    def update(self, current_report: Report | None) -> None:
        self.current = current_report
        self._draw()

    def _draw(self) -> None:
        if self.pinned is None:
            self.comparison = None
            self.html.value = self.EMPTY
            return
        if self.current is None:
            self.comparison = None
            self.html.value = (f"<p>A (pinned): {html.escape(report_title(self.pinned))}. "
                               "Waiting for a result to compare as B.</p>")
            return
        self.comparison = compare(self.pinned, self.current)
        same = ("<p class='explorer-compare-same'><i>B is the pinned result itself: edit the "
                "inputs to see the differences.</i></p>" if self.current is self.pinned else "")
        self.html.value = same + comparison_html(self.comparison)
