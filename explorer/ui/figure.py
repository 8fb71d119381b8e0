"""plotly's FigureWidget, with plotly.js sent to the page once instead of once per figure.

plotly 6+ draws a FigureWidget with anywidget: every figure's widget state carries the whole
widget bundle (plotly.js and its glue, about 5 MB of JavaScript) as its `_esm`, and the page
evaluates it again for each figure. The app holds seven figures, so a page load moved 36 MB over
the kernel's websocket and evaluated plotly.js seven times before the first heatmap showed
(docs/performance.md, "First result on a page load").

Here the bundle travels once per kernel, in one `PlotlyBundle` widget, and each figure's `_esm`
is a small loader: it fetches that widget's model from the page's widget manager, imports the
bundle once per page (kept in a module-level map keyed by the bundle widget), and hands each
figure its own instance of plotly's widget definition. Drawing and every message are plotly's
own; only the delivery of the code changes.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


class _OnFirstUse:
    """A module imported on first attribute access."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr):
        return getattr(importlib.import_module(self._name), attr)


def _import_plotly_renderers() -> None:
    """Import plotly's renderers without importing nbformat.

    plotly's FigureWidget imports `plotly.io._renderers`, which imports nbformat only to check
    its version when a figure is shown as a static mime bundle (never in the app); importing
    nbformat imports jsonschema, which took 0.5-1.1 s of every kernel's start on the machine
    measured (docs/performance.md, "First result on a page load"). plotly's optional-import
    helper is told nbformat is missing for that one import, and the module then gets a stand-in
    that imports nbformat when plotly first asks it for something. Where nbformat is imported
    already, or plotly's internals differ from the version this was written for (7.1), nothing
    is changed."""
    if "nbformat" in sys.modules or "plotly.io._renderers" in sys.modules:
        return
    try:
        from _plotly_utils import optional_imports
        skipped = optional_imports._not_importable
    except (ImportError, AttributeError):
        return
    fresh = "nbformat" not in skipped
    skipped.add("nbformat")
    try:
        import plotly.io._renderers as renderers
    finally:
        if fresh:
            skipped.discard("nbformat")
    if getattr(renderers, "nbformat", ...) is None:
        renderers.nbformat = _OnFirstUse("nbformat")


_import_plotly_renderers()

import anywidget  # noqa: E402
import plotly  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import traitlets  # noqa: E402

_BUNDLE_FILE = Path(plotly.__file__).parent / "package_data" / "widgetbundle.js"

# The loader: anywidget calls the default export once per figure model; `initialize` fetches the
# bundle widget named in `_explorer_bundle` and imports its source once per page.
_LOADER = """
const modules = (globalThis.__explorerPlotlyModules ??= new Map());

async function bundleModel(manager, id) {
  // The bundle widget was created before any figure, so the page knows it; on a page that is
  // still restoring widgets it may be registered a moment later.
  for (let i = 0; ; i++) {
    try {
      return await manager.get_model(id);
    } catch (e) {
      if (i >= 300) throw new Error(`sharding-explorer: plotly bundle widget ${id} not found`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

function plotlyModule(model) {
  const id = model.get("_explorer_bundle");
  if (!modules.has(id)) {
    modules.set(id, (async () => {
      const source = (await bundleModel(model.widget_manager, id)).get("source");
      const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
      try {
        return await import(/* webpackIgnore: true */ url);
      } finally {
        URL.revokeObjectURL(url);
      }
    })());
  }
  return modules.get(id);
}

export default () => {
  let widget;
  return {
    async initialize(ctx) {
      widget = (await plotlyModule(ctx.model)).default();
      return widget.initialize?.(ctx);
    },
    render(ctx) {
      return widget.render(ctx);
    },
  };
};
"""


class PlotlyBundle(anywidget.AnyWidget):
    """Carries plotly's widget bundle to the page; never displayed."""

    _esm = "export default {};"
    source = traitlets.Unicode().tag(sync=True)


_bundle: PlotlyBundle | None = None


def plotly_bundle() -> PlotlyBundle:
    """The kernel's one bundle widget, created on first use and kept for the kernel's life
    (figures on a reloaded page find it again)."""
    global _bundle
    if _bundle is None or _bundle.comm is None:
        _bundle = PlotlyBundle(source=_BUNDLE_FILE.read_text(encoding="utf-8"))
    return _bundle


class FigureWidget(go.FigureWidget):
    """go.FigureWidget whose code comes from the shared PlotlyBundle (see the module doc)."""

    _esm = _LOADER
    _explorer_bundle = traitlets.Unicode().tag(sync=True)

    def __init__(self, *args, **kwargs):
        # Set before the widget opens its comm, so that its first state names the bundle.
        self._explorer_bundle = plotly_bundle().model_id
        super().__init__(*args, **kwargs)
