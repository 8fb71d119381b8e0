"""The Placement tab's answer to "why is this tensor laid out so?": a checkbox that asks the
compile to read every tensor's origins (off by default: reading them costs 10-20% of a
compile), and under the heatmaps the picked tensor's sentences, one per dimension and one per
layout conflict, or the note saying why there are none (GSPMD, or not asked); and a second box
that draws the path those sentences name on the HLO tab's dataflow graph (explorer.ui.graph)."""

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
    """The checkbox (its change recompiles, through `on_toggle`), the picked tensor's origins,
    and the box that asks for their path on the dataflow graph (its change calls
    `on_graph`)."""

    def __init__(self, on_toggle, on_graph=lambda on: None):
        self.ask = w.Checkbox(value=False, indent=False, layout=w.Layout(width="auto"),
                              description="why is it laid out so? (recompiles reading each "
                                          "tensor's origins, 10-20% slower)")
        self.ask.observe(lambda c: on_toggle(c["new"]), "value")
        self.on_graph = w.Checkbox(value=False, indent=False,
                                   layout=w.Layout(width="auto", display="none"),
                                   description="show this path on the dataflow graph (HLO tab)")
        self.on_graph.observe(lambda c: on_graph(c["new"]), "value")
        self.on_graph.add_class("explorer-origin-path")
        self.text = w.HTML()
        self._tensor: str | None = None         # the tensor drawn last
        self.widget = w.VBox([self.ask, self.text, self.on_graph])
        self.widget.add_class("explorer-origins-panel")

    def draw(self, report: Report, tensor: str, result: int) -> None:
        """`tensor`'s origins in `report`, stamped with `result` (shown only when asked)."""
        self._tensor = tensor
        body = origins_html(report, tensor) if self.ask.value else ""
        self.text.value = f"<div data-result='{result}'>{body}</div>"
        self.on_graph.layout.display = "" if self.ask.value else "none"

    @property
    def path_tensor(self) -> str | None:
        """Whose path the graph should draw: the tensor shown, when the box asks."""
        return self._tensor if self.ask.value and self.on_graph.value else None
