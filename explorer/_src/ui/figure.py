"""plotly's FigureWidget, with plotly.js sent to the page once instead of once per figure, and
the slot that shows one figure per drawing, stamped with the result it draws.

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

The bundle sent is, by default, `static/plotly_widget.js` (1.3 MB, built by
tools/build_plotly_bundle.py): plotly's widget code, from the sources that rebuild plotly's own
bundle byte for byte, bundled with a plotly.js of the three trace types the app draws (heatmap,
scatter, bar) instead of all of them; evaluating plotly's full 5 MB bundle was most of a page
load's time to its first heatmap (docs/performance.md). plotly's own bundle is sent instead where
that file is missing, where it was built for another plotly than the one installed, where
`EXPLORER_PLOTLY_BUNDLE=plotly` is set, and for a figure that draws another trace type: such a
figure names plotly's bundle from the moment that trace is given to it (a figure already on the
page then keeps the code it was drawn with until the page is reloaded; the app draws every
result as a new figure).

A `FigureSlot` holds one figure at a time. Every drawing is a new figure whose first state is the
whole drawing, never an old figure restyled in place: a browser view of a figure restyled in
place was seen to keep drawing an earlier result (issue 22: heatmaps of the previous workload
under a current legend, on a loaded machine), while the views drawn anew each time (Memory, the
dataflow graph) were current. Each figure carries the id of the result it draws in its layout
(`meta.result`), so that a test, or a reader of the page, can check it against the app's.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from collections.abc import Iterable
from copy import deepcopy
from functools import cache
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
import ipywidgets as w  # noqa: E402
import plotly  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import traitlets  # noqa: E402

PLOTLY_BUNDLE_FILE = Path(plotly.__file__).parent / "package_data" / "widgetbundle.js"
APP_BUNDLE_FILE = Path(__file__).parent / "static" / "plotly_widget.js"
# The first line of APP_BUNDLE_FILE (tools/build_plotly_bundle.py writes it).
_APP_BUNDLE_HEADER = re.compile(r"/\* sharding-explorer plotly widget bundle (\{.*\}) \*/")

# The loader: anywidget calls the default export once per figure model; `initialize` fetches the
# bundle widget named in `_explorer_bundle` and imports its source once per page. A figure made
# in a live kernel may name another bundle a moment after it was opened (a trace type outside the
# app's bundle added before it was shown): the name is read again once the import is done.
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

function plotlyModule(model, id) {
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
      let id, module;
      do {
        id = ctx.model.get("_explorer_bundle");
        module = await plotlyModule(ctx.model, id);
      } while (ctx.model.get("_explorer_bundle") !== id);
      widget = module.default();
      return widget.initialize?.(ctx);
    },
    render(ctx) {
      const cleanup = widget.render(ctx);
      // plotly's widget sizes a figure to its box once, when drawn (700 px wide where the box
      // was hidden or not yet on the page, wider than a notebook cell's pane), and again only
      // on Lumino's messages, which an anywidget view never gets: the figure is fitted to its
      // box once drawn and each time the box's size changes, by the handler plotly.js keeps
      // for a responsive figure (FigureWidget's config).
      const plot = () => ctx.el.classList.contains("js-plotly-plot") ? ctx.el :
        ctx.el.querySelector(".js-plotly-plot");
      // Whether it was fitted: plotly draws asynchronously, and may not have drawn yet.
      const fit = () => {
        const handler = plot()?._responsiveChartHandler;
        if (!handler || ctx.el.clientWidth === 0) return false;
        handler();
        return true;
      };
      const drawn = (e) => {
        if (e.detail?.element && ctx.el.contains(e.detail.element)) fit();
      };
      document.addEventListener("plotlywidget-after-render", drawn);
      const observer = new ResizeObserver(fit);
      observer.observe(ctx.el);
      // Until first fitted (for up to about ten seconds of frames): the box may have taken its
      // size before the figure was drawn in it, and change no more.
      let frames = 0, stopped = false;
      const first = () => {
        if (!stopped && !fit() && frames++ < 600) requestAnimationFrame(first);
      };
      requestAnimationFrame(first);
      return () => {
        stopped = true;
        observer.disconnect();
        document.removeEventListener("plotlywidget-after-render", drawn);
        if (typeof cleanup === "function") cleanup();
      };
    },
  };
};
"""


class PlotlyBundle(anywidget.AnyWidget):
    """Carries a plotly widget bundle to the page; never displayed."""

    _esm = "export default {};"
    source = traitlets.Unicode().tag(sync=True)


@cache
def app_bundle() -> tuple[str, frozenset[str]] | None:
    """The app's bundle (APP_BUNDLE_FILE) and the trace types it draws; None where the file is
    missing or unreadable, or was built for another plotly than the one installed (its widget
    code must be the one plotly's Python side talks to)."""
    try:
        source = APP_BUNDLE_FILE.read_text(encoding="utf-8")
        info = json.loads(_APP_BUNDLE_HEADER.match(source).group(1))
        if info["plotly"] != plotly.__version__:
            return None
        return source, frozenset(info["traces"])
    except (OSError, AttributeError, ValueError, KeyError, TypeError):
        return None


def _app_bundle_draws(trace_types: Iterable[str]) -> bool:
    """Whether the app's bundle is to be sent for figures of these trace types."""
    app = app_bundle()
    return (app is not None and os.environ.get("EXPLORER_PLOTLY_BUNDLE", "") != "plotly"
            and set(trace_types) <= app[1])


_bundles: dict[str, PlotlyBundle] = {}


def plotly_bundle(trace_types: Iterable[str] = ()) -> PlotlyBundle:
    """The kernel's bundle widget for figures of `trace_types`: the app's where it draws them
    all (see the module doc), else plotly's own. Each is created on first use and kept for the
    kernel's life (figures on a reloaded page find it again)."""
    kind = "app" if _app_bundle_draws(trace_types) else "plotly"
    bundle = _bundles.get(kind)
    if bundle is None or bundle.comm is None:
        source = app_bundle()[0] if kind == "app" else \
            PLOTLY_BUNDLE_FILE.read_text(encoding="utf-8")
        bundle = _bundles[kind] = PlotlyBundle(source=source)
    return bundle


def _trace_types(traces) -> set[str]:
    return {t.get("type") or "scatter" for t in traces or () if isinstance(t, dict)}


class FigureWidget(go.FigureWidget):
    """go.FigureWidget whose code comes from a shared PlotlyBundle (see the module doc)."""

    _esm = _LOADER
    _explorer_bundle = traitlets.Unicode().tag(sync=True)

    def __init__(self, *args, **kwargs):
        # Set before the widget opens its comm, so that its first state names the bundle; the
        # traces it is made with, or given later, may name plotly's instead (_check_traces).
        self._explorer_bundle = plotly_bundle().model_id
        super().__init__(*args, **kwargs)
        # Fitted to its box whenever the box changes size (the loader's observer calls the
        # handler plotly.js keeps for a responsive figure); one of a fixed width keeps it.
        self._config = {**self._config, "responsive": True}

    @traitlets.observe("_widget_data", "_py2js_addTraces", "_py2js_restyle", "_py2js_update")
    def _check_traces(self, change) -> None:
        """Name plotly's bundle once a trace type outside the app's bundle reaches the page."""
        new = change["new"]
        if change["name"] == "_widget_data":
            types = _trace_types(new)
        elif change["name"] == "_py2js_addTraces":
            types = _trace_types((new or {}).get("trace_data"))
        else:
            key = "restyle_data" if change["name"] == "_py2js_restyle" else "style_data"
            kind = ((new or {}).get(key) or {}).get("type")
            types = {t for t in (kind if isinstance(kind, list) else [kind])
                     if isinstance(t, str)}
        if types and not _app_bundle_draws(types) and not self._names_plotly_bundle():
            self._explorer_bundle = plotly_bundle(types).model_id

    def _names_plotly_bundle(self) -> bool:
        bundle = _bundles.get("plotly")
        return bundle is not None and bundle.model_id == self._explorer_bundle


def keep_state(fig: go.FigureWidget) -> None:
    """Store the figure's current data and layout in its synced widget state.

    add_trace and batch_update send only transient messages, which a view that does not exist
    yet never sees; a view created later (a page reload in Voila, a figure inside a container
    displayed after it was built) renders the synced state instead, which plotly refreshes only
    when a figure is displayed on its own. Call it after building and after every update."""
    fig._widget_data = deepcopy(fig._data)
    fig._widget_layout = deepcopy(fig._layout_obj._props)


def drawn_result(fig: go.FigureWidget | None) -> int | None:
    """The id of the result `fig` draws (FigureSlot.show stamped it); None for none."""
    if fig is None:
        return None
    meta = fig.layout.meta
    return meta.get("result") if isinstance(meta, dict) else None


SLOT = "explorer-figure-slot"       # a FigureSlot's box
# A slot whose figure draws an earlier result than the app's: the figure is hidden and
# "drawing…" shown in its place (the style is explorer._src.ui.views.VIEWS_STYLE's).
DRAWING = "explorer-drawing"


class FigureSlot:
    """A box showing one figure at a time: each drawing is a new figure, stamped with the id of
    the result it draws; the figure it replaces is closed (its browser views go with it).

    When the app has a new result, the figure shown is of the earlier one until it is drawn
    again, which on a loaded machine took seconds after the status named the new result
    (issue 53): `outdate_figures` hides it, "drawing…" in its place, and `show` reveals the new
    figure in the same message that puts it in the box, so that the page never shows the old
    figure again between the two."""

    def __init__(self, css_class: str = ""):
        self.box = w.Box(layout=w.Layout(display="none"))
        self.box.add_class(SLOT)
        if css_class:
            self.box.add_class(css_class)
        self.fig: go.FigureWidget | None = None

    @property
    def outdated(self) -> bool:
        """Whether the figure shown is hidden as of an earlier result (`outdate_figures`)."""
        return DRAWING in self.box._dom_classes

    @property
    def result(self) -> int | None:
        """The result the figure shown draws; None when none is shown."""
        return drawn_result(self.fig)

    def show(self, fig: go.FigureWidget, result: int | None) -> go.FigureWidget:
        """Show `fig`, drawn for result `result`, in place of the figure shown."""
        fig.layout.meta = {"result": result}
        keep_state(fig)
        old, self.fig = self.fig, fig
        # One message: the page swaps the figures and reveals the box in the same update.
        with self.box.hold_sync():
            self.box.children = (fig,)
            self.box.remove_class(DRAWING)
        self.box.layout.display = ""
        if old is not None:
            old.close()
        return fig

    def clear(self) -> None:
        """Show nothing."""
        old, self.fig = self.fig, None
        with self.box.hold_sync():
            self.box.children = ()
            self.box.remove_class(DRAWING)
        self.box.layout.display = "none"
        if old is not None:
            old.close()


def outdate_figures(widget: w.Widget) -> None:
    """Hide every figure shown in a FigureSlot inside `widget` (its children, theirs, and so
    on) until it is drawn again: the app has a newer result than any of them draws."""
    stack = [widget]
    while stack:
        widget = stack.pop()
        if isinstance(widget, w.Box) and SLOT in widget._dom_classes and widget.children:
            widget.add_class(DRAWING)
        stack.extend(c for c in getattr(widget, "children", ()) if isinstance(c, w.Widget))
