"""The Compare tab: pin one result as A, keep editing, and see what changed in B.

The comparison itself is explorer._src.report.compare (pure, with a plain-text form); this module
draws it as HTML and holds the pin/clear widget.
"""

from __future__ import annotations

import html
from collections.abc import Callable

import ipywidgets as w

from explorer._src.report.compare import (
    CollectiveRow,
    Delta,
    ReportComparison,
    compare,
    report_title,
)
from explorer._src.report.report import Report
from explorer._src.units import format_bytes

ADDED_COLOUR = "#dcfce7"      # green-100: in B, not in A
REMOVED_COLOUR = "#fee2e2"    # red-100: in A, not in B


# ---------------------------------------------------------------------------------- HTML

_CSS = ("<style>.explorer-compare table{border-collapse:collapse;font-size:12px;margin:4px 0 10px}"
        ".explorer-compare th,.explorer-compare td{border-bottom:1px solid #ddd;padding:2px 8px;"
        "text-align:left}.explorer-compare td.explorer-num{text-align:right;"
        "font-variant-numeric:tabular-nums}.explorer-compare th.explorer-side{"
        "border-left:2px solid #999}.explorer-compare td.explorer-side{border-left:2px solid #999}"
        ".explorer-compare .explorer-better{color:#15803d}"
        ".explorer-compare .explorer-worse{color:#b91c1c}"
        ".explorer-compare td{white-space:nowrap}</style>")


def _delta_cell(m: Delta) -> str:
    d = m.delta
    # Less is better for every number shown here (bytes, memory, seconds, collective count).
    cls = "" if not d else (" explorer-worse" if d > 0 else " explorer-better")
    return f"<td class='explorer-num{cls}'>{html.escape(m.delta_text())}</td>"


def _status_text(r: CollectiveRow) -> str:
    if r.status == "unchanged" or 0 in (r.count_a, r.count_b):
        return r.status
    return f"{r.status} {r.count_b - r.count_a:+d}".replace("-", "−")


def _indent(m: Delta) -> str:
    """A part of a total (arguments under memory/device) is indented under it."""
    return f" style='padding-left:{8 + 16 * m.depth}px;color:#555'" if m.depth else ""


def comparison_html(c: ReportComparison) -> str:
    e = html.escape
    head = (f"<p><b>A</b> (pinned): {e(c.a_title)}<br><b>B</b> (current): {e(c.b_title)}<br>"
            f"<b>changed</b>: {e('; '.join(c.changes)) if c.changes else 'nothing'}</p>")
    metric_rows = "".join(
        f"<tr data-metric='{m.metric}'><td{_indent(m)}>{e(m.label)}</td>"
        f"<td class='explorer-num'>{e(m.format(m.a))}</td>"
        f"<td class='explorer-num'>{e(m.format(m.b))}</td>{_delta_cell(m)}</tr>"
        for m in c.metrics)
    metrics = ("<table class='explorer-compare-metrics'><tr><th></th><th>A</th><th>B</th>"
               f"<th>B − A</th></tr>{metric_rows}</table>")
    summary = (f"<p class='explorer-compare-summary'>Collectives: <b>{len(c.removed)}</b> removed, "
               f"<b>{len(c.added)}</b> added, {c.unchanged} unchanged.</p>")
    if c.rows:
        body = []
        # What changed first: with dozens of collectives the one added is otherwise below the
        # fold, under the unchanged ones (a stable sort keeps the report's order within each).
        first = {"added": 0, "removed": 1}
        for r in sorted(c.rows, key=lambda r: first.get(r.status, 2)):
            status = r.status
            colour = {"added": ADDED_COLOUR, "removed": REMOVED_COLOUR}.get(status)
            style = f" style='background:{colour}'" if colour else ""
            side = [(r.count_a, r.bytes_a), (r.count_b, r.bytes_b)]
            cells = "".join(
                f"<td class='explorer-num explorer-side'>{n or '—'}</td>"
                f"<td class='explorer-num'>{format_bytes(nb) if n else ''}</td>"
                for n, nb in side)
            body.append(
                f"<tr class='explorer-compare-{status}'{style} data-kind='{e(r.kind)}'>"
                f"<td>{_status_text(r)}</td><td>{e(r.kind)}</td>"
                f"<td>{e(','.join(r.axes) or '?')}</td>"
                f"<td>{e(r.dtype)}[{','.join(map(str, r.shape))}]</td>"
                f"<td><code title='{e(r.source, quote=True)}'>"
                f"{e(r.source.rsplit('/', 1)[-1] or '—')}</code></td>{cells}</tr>")
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
        self.comparison: ReportComparison | None = None
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
