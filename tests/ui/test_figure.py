"""plotly.js once per page (explorer/ui/figure.py): a figure's widget state names the shared
bundle widget instead of carrying plotly.js itself. (That the page draws from it is
tests/ui/test_app_browser.py's business: every heatmap there is such a figure.)"""

import os
import subprocess
import sys
from pathlib import Path

import plotly
import plotly.graph_objects as go
import pytest

from explorer.ui.figure import FigureWidget, plotly_bundle

WIDGET_BUNDLE = Path(plotly.__file__).parent / "package_data" / "widgetbundle.js"


def test_figures_name_one_shared_bundle_instead_of_carrying_it():
    a = FigureWidget(go.Heatmap(z=[[1, 2]]))
    b = FigureWidget()
    bundle = plotly_bundle()
    assert a.get_state()["_explorer_bundle"] == b.get_state()["_explorer_bundle"] == \
        bundle.model_id
    # The bundle travels once, as plotly ships it; a figure's own code is a small loader.
    assert bundle.get_state()["source"] == WIDGET_BUNDLE.read_text(encoding="utf-8")
    assert len(a.get_state()["_esm"]) < 4096 < WIDGET_BUNDLE.stat().st_size
    assert "import(" in a.get_state()["_esm"]
    # Still plotly's figure in every other respect.
    assert isinstance(a, go.FigureWidget) and [list(row) for row in a.data[0].z] == [[1, 2]]


def test_a_closed_bundle_widget_is_replaced():
    old = plotly_bundle()
    old_id = old.model_id
    old.close()
    fig = FigureWidget()
    assert fig._explorer_bundle == plotly_bundle().model_id != old_id


def test_the_app_builds_its_figures_from_the_shared_bundle():
    pytest.importorskip("voila")
    from explorer.ui.grids import Grid
    from explorer.ui.memory import MemoryView
    from explorer.ui.timeline import schedule_figure
    from explorer.ui.views import grid_figure

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
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                         timeout=120)
    assert out.stdout.strip().endswith("ok"), out.stderr


def test_a_slot_shows_each_drawing_as_a_new_figure_stamped_with_its_result():
    from explorer.ui.figure import FigureSlot, drawn_result

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
