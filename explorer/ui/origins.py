"""The Placement tab's answer to "why is this tensor laid out so?": a checkbox that asks the
compile to read every tensor's origins (off by default: reading them costs 10-20% of a
compile), and under the heatmaps the picked tensor's sentences, one per dimension and one per
layout conflict, or the note saying why there are none (GSPMD, or not asked)."""

from __future__ import annotations

import html

import ipywidgets as w

from explorer.report.report import Report


def origins_html(report: Report, tensor: str) -> str:
    """`tensor`'s origins in `report` as escaped HTML: each sentence on its line, or the note
    in grey when there are none."""
    origins = report.tensor(tensor).origins
    if not origins.dims:
        return f"<div class='explorer-note'>{html.escape(origins.note)}</div>"
    lines = "".join(f"<li>{html.escape(line)}</li>" for line in origins.text.splitlines())
    return f"<ul class='explorer-origins'>{lines}</ul>"


class OriginsPanel:
    """The checkbox (its change recompiles, through `on_toggle`) and the picked tensor's
    origins."""

    def __init__(self, on_toggle):
        self.ask = w.Checkbox(value=False, indent=False, layout=w.Layout(width="auto"),
                              description="why is it laid out so? (recompiles reading each "
                                          "tensor's origins, 10-20% slower)")
        self.ask.observe(lambda c: on_toggle(c["new"]), "value")
        self.text = w.HTML()
        self.widget = w.VBox([self.ask, self.text])
        self.widget.add_class("explorer-origins-panel")

    def draw(self, report: Report, tensor: str, result: int) -> None:
        """`tensor`'s origins in `report`, stamped with `result` (shown only when asked)."""
        body = origins_html(report, tensor) if self.ask.value else ""
        self.text.value = f"<div data-result='{result}'>{body}</div>"
