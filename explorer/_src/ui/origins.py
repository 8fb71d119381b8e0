"""The Placement tab's answer to "why is this tensor laid out so?": a checkbox that asks the
compile to read every tensor's origins (off by default: reading them costs 10-20% of a
compile), and under the heatmaps the picked tensor's sentences, one per dimension and one per
layout conflict, or the note saying why there are none (GSPMD, or not asked); and a second box
that draws the path those sentences name on the HLO tab's dataflow graph
(explorer._src.ui.graph)."""

from __future__ import annotations

import html
import re
from collections import Counter

import ipywidgets as w

from explorer._src.report.report import Report
from explorer._src.spec.tensor import format_spec
from explorer._src.ui.views import short_op
from explorer._src.ui.why import code_spans


def _file_of(source: str) -> str:
    """The file of `file.py:12` or of a notebook's `In [3], line 2`."""
    m = re.fullmatch(r"(.*), line \d+", source) or re.fullmatch(r"(.*):\d+", source)
    return m.group(1) if m else ""


def home_file(report: Report, tensor: str) -> str:
    """The file a sentence's bare `line N` is in: the tensor's own (an intermediate's), else the
    one most of the program's tensors come from (as explorer._src.report.origins chooses it)."""
    own = _file_of(report.tensor(tensor).source)
    if own:
        return own
    files = Counter(f for t in report.tensors if (f := _file_of(t.source)))
    return files.most_common(1)[0][0] if files else ""


def origins_html(report: Report, tensor: str) -> str:
    """`tensor`'s origins in `report` as escaped HTML: a heading naming it, its layout and the
    file its lines are in, then each sentence on its line (names as code); or the note in grey
    when there are none."""
    info = report.tensor(tensor)
    origins = info.origins
    if not origins.dims:
        return f"<div class='explorer-note'>{html.escape(origins.note)}</div>"
    e = html.escape
    made = f" ({e(short_op(info.op_name))} at {e(info.source)})" if info.source else ""
    home = home_file(report, tensor)
    layout = format_spec(info.spec) if info.spec is not None else info.sharding
    lines_in = (f" · <span class='explorer-note'>“line N” below is a line of "
                f"<code>{e(home)}</code></span>"
                if home and re.search(r"\bline \d", origins.text) else "")
    head = (f"<div class='explorer-origins-head'><b>Why <code>{e(tensor)}</code> is laid out "
            f"<code>{e(layout)}</code></b>{made}{lines_in}</div>")
    lines = "".join(f"<li>{code_spans(line)}</li>" for line in origins.text.splitlines())
    return f"{head}<ul class='explorer-origins'>{lines}</ul>"


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
                                   description="and show its path on the HLO tab's dataflow graph")
        self.on_graph.observe(lambda c: on_graph(c["new"]), "value")
        self.on_graph.add_class("explorer-origin-path")
        self.text = w.HTML()
        self._tensor: str | None = None         # the tensor drawn last
        # The two boxes on one line: the second is found where the question is asked.
        self.widget = w.VBox([w.HBox([self.ask, self.on_graph]), self.text])
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
