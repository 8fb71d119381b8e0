"""plotly.js once per page (explorer/_src/ui/figure.py): a figure's widget state names the shared
bundle widget instead of carrying plotly.js itself, and that bundle is the app's
(explorer/_src/ui/static/plotly_widget.js: plotly's widget code with a plotly.js of the trace types
the app draws), or plotly's own where the app's cannot draw a figure. (That the page draws from
it is tests/ui/test_app_browser.py's business: every heatmap there is such a figure; that it
draws as plotly's own bundle does, tests/ui/test_figure_bundle_browser.py's.)"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import plotly
import plotly.graph_objects as go
import pytest

from explorer._src.ui import figure
from explorer._src.ui.figure import APP_BUNDLE_FILE, FigureWidget, plotly_bundle

ROOT = Path(__file__).resolve().parents[2]
WIDGET_BUNDLE = Path(plotly.__file__).parent / "package_data" / "widgetbundle.js"


def registered_traces(source: str) -> set[str]:
    """The trace types a plotly.js bundle registers (each trace module's name, as minified)."""
    return set(re.findall(r'moduleType:"trace",name:"(\w+)"', source))


def test_figures_name_one_shared_bundle_instead_of_carrying_it():
    a = FigureWidget(go.Heatmap(z=[[1, 2]]))
    b = FigureWidget()
    bundle = plotly_bundle()
    assert a.get_state()["_explorer_bundle"] == b.get_state()["_explorer_bundle"] == \
        bundle.model_id
    # The bundle travels once: the app's vendored one; a figure's own code is a small loader.
    assert bundle.get_state()["source"] == APP_BUNDLE_FILE.read_text(encoding="utf-8")
    assert len(a.get_state()["_esm"]) < 4096 < APP_BUNDLE_FILE.stat().st_size
    assert "import(" in a.get_state()["_esm"]
    # Still plotly's figure in every other respect.
    assert isinstance(a, go.FigureWidget) and [list(row) for row in a.data[0].z] == [[1, 2]]


def app_trace_types() -> set[str]:
    """Every trace type explorer/ui draws: its go.<Trace>(...) and fig.add_<trace>(...) calls."""
    from plotly.basedatatypes import BaseTraceType

    classes = {n: getattr(go, n) for n in dir(go)}
    traces = {n: c._path_str for n, c in classes.items()
              if isinstance(c, type) and issubclass(c, BaseTraceType)}
    types = set()
    for path in (ROOT / "explorer" / "_src" / "ui").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        types |= {traces[n] for n in re.findall(r"\bgo\.(\w+)\(", text) if n in traces}
        types |= {m for m in re.findall(r"\.add_(\w+)\(", text) if m in traces.values()}
    return types


def test_the_vendored_bundle_draws_every_trace_type_the_app_draws():
    source = APP_BUNDLE_FILE.read_text(encoding="utf-8")
    info = json.loads(re.match(r"/\* sharding-explorer plotly widget bundle (\{.*\}) \*/",
                               source).group(1))
    drawn = app_trace_types()
    assert drawn >= {"heatmap", "scatter", "bar"}, drawn        # the reader finds the app's
    # Built for the plotly installed (its widget code talks to plotly's Python side), with a
    # plotly.js that registers those trace types, as the header says, and no others.
    assert info["plotly"] == plotly.__version__, \
        "rebuild it for this plotly: .venv/bin/python tools/build_plotly_bundle.py"
    assert set(info["traces"]) == registered_traces(source) >= drawn
    assert registered_traces(WIDGET_BUNDLE.read_text(encoding="utf-8")) > drawn
    # plotly's widget code: the module anywidget imports, with plotly's exports.
    assert re.search(r"export\{\w+ as FigureModel,\w+ as FigureView,\w+ as default\};", source)
    assert figure.app_bundle() == (source, frozenset(info["traces"]))
    # A third of plotly's bundle, or less.
    assert APP_BUNDLE_FILE.stat().st_size < WIDGET_BUNDLE.stat().st_size / 3


def test_a_figure_of_another_trace_type_names_plotlys_own_bundle():
    plotlys = plotly_bundle(["pie"])
    assert plotlys.get_state()["source"] == WIDGET_BUNDLE.read_text(encoding="utf-8")
    assert plotlys is not plotly_bundle() and plotlys is plotly_bundle(["pie", "bar"])
    made_with = FigureWidget(go.Pie(values=[1, 2]))
    given_later = FigureWidget()
    given_later.add_bar(y=[1])
    assert given_later._explorer_bundle == plotly_bundle().model_id
    given_later.add_pie(values=[1])
    restyled = FigureWidget(go.Scatter(y=[1]))
    restyled.plotly_restyle({"type": "box"})
    for fig in (made_with, given_later, restyled):
        assert fig.get_state()["_explorer_bundle"] == plotlys.model_id


@pytest.mark.parametrize("how", ["missing", "other plotly", "asked"])
def test_without_a_usable_app_bundle_figures_name_plotlys(how, monkeypatch, tmp_path):
    if how == "missing":
        monkeypatch.setattr(figure, "APP_BUNDLE_FILE", tmp_path / "plotly_widget.js")
    elif how == "other plotly":
        other = tmp_path / "plotly_widget.js"
        other.write_text(APP_BUNDLE_FILE.read_text(encoding="utf-8").replace(
            f'"plotly": "{plotly.__version__}"', '"plotly": "0.0.1"', 1), encoding="utf-8")
        monkeypatch.setattr(figure, "APP_BUNDLE_FILE", other)
    else:
        monkeypatch.setenv("EXPLORER_PLOTLY_BUNDLE", "plotly")
    figure.app_bundle.cache_clear()
    try:
        fig = FigureWidget(go.Heatmap(z=[[1]]))
        assert fig._explorer_bundle == plotly_bundle().model_id == plotly_bundle(["pie"]).model_id
        assert plotly_bundle().source == WIDGET_BUNDLE.read_text(encoding="utf-8")
    finally:
        monkeypatch.undo()
        figure.app_bundle.cache_clear()
    assert plotly_bundle().source == APP_BUNDLE_FILE.read_text(encoding="utf-8")


def test_a_closed_bundle_widget_is_replaced():
    old = plotly_bundle()
    old_id = old.model_id
    old.close()
    fig = FigureWidget()
    assert fig._explorer_bundle == plotly_bundle().model_id != old_id


def test_the_app_builds_its_figures_from_the_shared_bundle():
    pytest.importorskip("voila")
    from explorer._src.ui.grids import Grid
    from explorer._src.ui.memory import MemoryView
    from explorer._src.ui.timeline import schedule_figure
    from explorer._src.ui.views import grid_figure

    # Figures are made when their tab is drawn; each is made from the shared bundle.
    assert isinstance(MemoryView._new_figure(), FigureWidget)
    one_stage = {"schedule": [{"phase": "F", "start": 0, "end": 1, "stage": 0,
                               "microbatch": 0}], "params": {}, "bubble_fraction": 0.0}
    assert isinstance(schedule_figure(one_stage), FigureWidget)
    grid = Grid([[0]], [["b0"]], [["block 0"]], ["0:4"], ["0:4"], "x")
    assert isinstance(grid_figure(grid, 1), FigureWidget)


@pytest.mark.slow
def test_the_app_imports_without_nbformat_and_plotly_can_still_show_a_figure():
    """Importing the app skips nbformat (and its slow jsonschema import); plotly's own
    `fig.show()` with a mime renderer still finds nbformat when it needs it."""
    code = (
        "import sys, explorer.ui\n"
        "assert 'jsonschema' not in sys.modules and 'nbformat' not in sys.modules\n"
        "import plotly.graph_objects as go, plotly.io as pio\n"
        "shown = []\n"
        "pio._renderers.ipython_display = type('D', (), {'display': staticmethod("
        "lambda b, raw: shown.append(b))})\n"
        "pio.show(go.Figure(go.Bar(y=[1])), renderer='json')\n"
        "assert shown and 'application/json' in shown[0], shown\n"
        "assert 'nbformat' in sys.modules\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         timeout=120)
    assert out.stdout.strip().endswith("ok"), out.stderr


def test_a_slot_shows_each_drawing_as_a_new_figure_stamped_with_its_result():
    from explorer._src.ui.figure import FigureSlot, drawn_result

    slot = FigureSlot()
    assert slot.result is None and slot.box.layout.display == "none"
    first = slot.show(FigureWidget(), 3)
    assert drawn_result(first) == 3 and slot.box.children == (first,)
    assert first._widget_layout["meta"] == {"result": 3}      # in the synced state too
    second = slot.show(FigureWidget(), 4)
    assert slot.fig is second and slot.result == 4 and second is not first
    assert first.comm is None                   # the figure replaced is closed, views and all
    slot.clear()
    assert slot.fig is None and slot.result is None and slot.box.layout.display == "none"
