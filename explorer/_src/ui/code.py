"""Copy as code: the shown layout as plain JAX (`Report.to_code`) in a text box the user copies
from. The box is read-only in effect: an edit is put back, so what is copied is always the
code of the result shown."""

from __future__ import annotations

import ipywidgets as w

from explorer._src.report.report import Report


class CodePanel:
    """A button that opens the code of the result shown, and the box that holds it."""

    def __init__(self, guard):
        self.button = w.Button(description="Copy as code", icon="code",
                               tooltip="the layout as plain JAX: the mesh, a NamedSharding per "
                                       "input and output, jax.jit")
        self.box = w.Textarea(layout=w.Layout(width="100%", height="320px", display="none"))
        self.box.add_class("explorer-code")
        self._code = ""
        self._report: Report | None = None
        self.button.on_click(guard(lambda _: self.open()))
        self.box.observe(guard(lambda _: self._keep()), "value")
        self.widget = w.VBox([self.button, self.box])

    @property
    def is_open(self) -> bool:
        return self.box.layout.display != "none"

    def open(self) -> None:
        """Show the code of the result last given to `update`."""
        self.box.layout.display = ""
        self._fill()

    def update(self, report: Report) -> None:
        """The result shown now; its code replaces the box's when the box is open."""
        self._report = report
        if self.is_open:
            self._fill()

    def _fill(self) -> None:
        self._code = self._report.to_code() if self._report is not None else ""
        self.box.value = self._code

    def _keep(self) -> None:
        if self.box.value != self._code:         # the user typed in it: put the code back
            self.box.value = self._code
