"""The app's plotly bundle (explorer/_src/ui/static/plotly_widget.js) draws the app's kinds of
figure as
plotly's own bundle does: in headless Chromium (Debian's /usr/bin/chromium), each figure is drawn
through each bundle's widget code (plotly's FigureWidget view, given a stand-in for the widget
model), and the two drawings' DOM must be the same, but for plotly's random plot id."""

import json
import re

import plotly
import plotly.graph_objects as go
import pytest

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser

from explorer._src.ui.figure import APP_BUNDLE_FILE, PLOTLY_BUNDLE_FILE, FigureWidget  # noqa: E402

# Imports both bundles into the page once (as two modules, as a page holding figures of both
# does) and draws one figure with `draw(bundle, figure)`: its DOM and its traces as drawn.
SETUP = """async ([app, plotlys]) => {
  const load = async (src) => import(URL.createObjectURL(new Blob([src],
                                                                  {type: 'text/javascript'})));
  const bundles = {app: await load(app), plotly: await load(plotlys)};
  window.draw = async (name, fig) => {
    const el = document.createElement('div');
    el.style.width = '900px';
    document.body.appendChild(el);
    const state = {_widget_data: fig.data, _widget_layout: fig.layout, _config: {},
                   _last_layout_edit_id: 0, _last_trace_edit_id: 0};
    const model = {get: (k) => state[k], set: (k, v) => { state[k] = v; }, on() {},
                   save_changes() {}};
    const drawn = new Promise((resolve) => {
      const done = (e) => {
        if (e.detail.element !== el) return;
        document.removeEventListener('plotlywidget-after-render', done);
        resolve();
      };
      document.addEventListener('plotlywidget-after-render', done);
    });
    const widget = bundles[name].default();
    widget.initialize({model});
    widget.render({el});
    await drawn;
    const out = {html: el.innerHTML, traces: el._fullData.map((t) => [t.type, t.visible])};
    el.remove();
    return out;
  };
}"""


# What plotly draws for a trace of each type: a heatmap's image, a bar's path, a scatter layer.
DRAWN = {"heatmap": '<g class="hm">', "bar": 'class="point"', "scatter": 'class="scatterlayer'}


def figures() -> dict[str, go.FigureWidget]:
    """The app's kinds of figure: its own where they need no compile, and the trace features
    the others use (explorer/ui: views, memory, timeline, graph, suggest)."""
    from explorer._src.ui.grids import Grid
    from explorer._src.ui.timeline import schedule_figure
    from explorer._src.ui.views import grid_figure

    out = {}
    out["placement heatmap"] = grid_figure(
        Grid([[0, 1], [2, 3]], [["b0", "b1"], ["b2", "b3"]],
             [["block 0", "block 1"], ["block 2", "block 3"]], ["0:4", "4:8"], ["0:4", "4:8"],
             "x", x_title="dim 1", y_title="dim 0"), 4)
    out["pipeline schedule"] = schedule_figure(
        {"schedule": [{"phase": p, "start": s, "end": s + 1, "stage": st, "microbatch": m}
                      for p, s, st, m in (("F", 0, 0, 0), ("F", 1, 1, 0), ("B", 2, 1, 0),
                                          ("B", 3, 0, 0))],
         "params": {}, "bubble_fraction": 0.5})
    heat = FigureWidget(go.Heatmap(z=[[1, 20], [300, 4000]], x=["a", "b"], y=["c", "d"],
                                   colorscale="Viridis", colorbar=dict(title="bytes"),
                                   text=[["1", "2"], ["3", "4"]], texttemplate="%{text}"))
    heat.update_layout(title="heatmap with a colour bar", yaxis=dict(autorange="reversed"))
    out["heatmap with a colour bar"] = heat
    bars = FigureWidget()
    for name, x in (("arguments", [3]), ("temporaries", [2]), ("empty", [0])):
        bars.add_bar(name=name, x=x, y=["XLA buffers"], orientation="h", text=[f"{x[0]} MiB"],
                     textposition="inside", hovertemplate="%{x}<extra></extra>")
    bars.update_layout(barmode="stack", yaxis=dict(type="category", autorange="reversed"),
                       shapes=[dict(type="line", x0=4, x1=4, y0=0, y1=1, yref="paper")],
                       annotations=[dict(x=4, y=1, yref="paper", text="capacity",
                                         showarrow=False)], title="stacked bars")
    out["stacked bars, a shape and an annotation"] = bars
    curve = FigureWidget()
    for name, y in (("arguments", [1, 1, 1]), ("temporaries", [0, 2, 0])):
        curve.add_scatter(x=[0, 1, 2], y=y, name=name, stackgroup="held", mode="lines")
    curve.add_scatter(x=[1], y=[3], name="peak", mode="markers+text", text=["peak"],
                      textposition="top center", marker=dict(symbol="diamond", size=10))
    curve.update_layout(title="stacked areas and a marker")
    out["stacked areas"] = curve
    roof = FigureWidget()
    roof.add_scatter(name="roof", mode="lines+text", x=[0.1, 10, 1000], y=[1e11, 1e13, 1e13],
                     text=["", "ridge", ""])
    roof.add_scatter(name="point", mode="markers", x=[20], y=[5e12],
                     marker=dict(size=12, symbol="star"))
    roof.update_layout(xaxis=dict(type="log"), yaxis=dict(type="log", exponentformat="SI"),
                       title="log axes")
    out["log axes"] = roof
    graph = FigureWidget()
    graph.add_scatter(mode="lines", x=[0, 1, None, 1, 2], y=[0, 1, None, 1, 0],
                      hoverinfo="skip", showlegend=False)
    graph.add_scatter(mode="markers+text", x=[0, 1, 2], y=[0, 1, 0], text=["x", "dot", "y"],
                      textposition="middle right", marker=dict(symbol="square"))
    graph.add_scatter(mode="markers", x=[], y=[], name="no points")
    graph.update_layout(xaxis=dict(visible=False), yaxis=dict(visible=False),
                        title="a graph of lines and labelled markers")
    out["graph"] = graph
    return out


def plain(fig: go.FigureWidget) -> dict:
    """The figure as the page gets it, each trace with a fixed uid (plotly.js draws a random one
    into the ids of some elements, e.g. a colour bar's gradient, where a trace has none)."""
    out = json.loads(plotly.io.to_json(fig))
    for i, trace in enumerate(out["data"]):
        trace["uid"] = f"trace{i}"
    return out


def test_the_app_bundle_draws_as_plotlys_own(chromium, artifacts):
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(**chromium)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        try:
            page.goto("about:blank")
            page.evaluate(SETUP, [APP_BUNDLE_FILE.read_text(encoding="utf-8"),
                                  PLOTLY_BUNDLE_FILE.read_text(encoding="utf-8")])
            for name, fig in figures().items():
                figure = plain(fig)
                drawn = {b: page.evaluate("([b, f]) => window.draw(b, f)", [b, figure])
                         for b in ("app", "plotly")}
                uid = {b: re.search(r'defs-(\w+)"', d["html"]).group(1)
                       for b, d in drawn.items()}
                app, plotlys = (drawn[b]["html"].replace(uid[b], "UID") for b in drawn)
                assert app == plotlys, name
                types = [t.get("type", "scatter") for t in figure["data"]]
                assert [t for t, _ in drawn["app"]["traces"]] == types, name
                assert drawn["app"]["traces"] == drawn["plotly"]["traces"], name
                # Each trace type is drawn, not only the axes.
                for kind in set(types):
                    assert DRAWN[kind] in app, (name, kind)
            assert errors == []
        finally:
            page.screenshot(path=str(artifacts / "figure-bundles.png"))
            browser.close()
