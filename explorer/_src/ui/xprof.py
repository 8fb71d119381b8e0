"""Open in XProf: write the result shown as a run of a log folder (explorer.write_xprof) and
say the command that opens it, the run's folder, and what could not be written. A folder that
cannot be written is said on the panel, as every input error is said next to its widget."""

from __future__ import annotations

import html
from collections.abc import Callable

import ipywidgets as w

from explorer._src.errors import InputError
from explorer._src.report.report import Report
from explorer._src.report.xprof import XprofRun, write_xprof

DEFAULT_LOGDIR = "xprof-logs"


def run_html(run: XprofRun) -> str:
    """What was written, as escaped HTML: the command, the run's folder, the notes."""
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in run.notes)
    return (f"<div>Run <code>{html.escape(run.run)}</code> written to "
            f"<code>{html.escape(run.folder)}</code>. Open it with "
            f"<code class='explorer-xprof-command'>{html.escape(run.command)}</code>.</div>"
            + (f"<ul class='explorer-note'>{notes}</ul>" if notes else ""))


class XprofPanel:
    """A log folder, a button writing the shown result there, and what was written."""

    def __init__(self, report: Callable[[], Report | None], guard):
        self._report = report
        self.logdir = w.Text(value=DEFAULT_LOGDIR, description="log folder",
                             continuous_update=False, layout=w.Layout(width="360px"))
        self.button = w.Button(description="Open in XProf", icon="external-link",
                               tooltip="write this result as a run that xprof --logdir lists "
                                       "(its memory, graph and trace viewers)")
        self.error = w.HTML()
        self.error.add_class("explorer-error")
        self.result = w.HTML()
        self.run: XprofRun | None = None
        self.button.on_click(guard(lambda _: self.write()))
        self.widget = w.VBox([w.HBox([self.button, self.logdir]), self.error, self.result])

    def write(self) -> XprofRun | None:
        """Write the result shown to the log folder; an InputError is shown, not raised."""
        report = self._report()
        self.error.value = self.result.value = ""
        if report is None:
            return None
        try:
            self.run = write_xprof(report, self.logdir.value.strip() or DEFAULT_LOGDIR)
        except InputError as e:
            self.run = None
            self.error.value = html.escape(str(e))
            return None
        self.result.value = run_html(self.run)
        return self.run
