"""The Placement tab's "why is it laid out so?": ticking the box recompiles with origins read,
and the picked tensor's sentences (or the note saying why there are none) show under the
heatmaps. The function is defined here and traced in this process."""

import re
from html import unescape

import jax
import pytest

pytest.importorskip("ipywidgets")

from explorer import TensorSpec  # noqa: E402
from explorer.ui import Explorer, explore  # noqa: E402

T = TensorSpec


def two_layers(x, w1, w2):
    h = jax.nn.relu(x @ w1)
    return h @ w2


def two_layers_app():
    """The app on two_layers: x's rows over data, w1's columns and w2's rows over model."""
    return explore(two_layers, T("x", (256, 1024), spec="data,None"),
                   T("w1", (1024, 4096), spec="None,model"),
                   T("w2", (4096, 1024), spec="model,None"), mesh="data=2,model=4",
                   debounce=None)


def shown_lines(app) -> list[str]:
    """The origins panel's text as the user reads it, one entry per line."""
    body = app.origins.text.value
    items = re.findall(r"<li>(.*?)</li>", body)
    if items:       # names are set as code: read back as the sentences write them, `x`
        return [unescape(re.sub(r"</?code>", "`", i)) for i in items]
    text = unescape(re.sub(r"<[^>]+>", "", body)).strip()
    return [text] if text else []


def pick(app, prefix: str) -> str:
    """Pick the first tensor whose name starts with `prefix`, as the dropdown offers it."""
    name = next(v for _, v in app.placement.tensor.options if v.startswith(prefix))
    app.placement.tensor.value = name
    return name


@pytest.mark.slow
def test_asking_why_recompiles_and_shows_the_picked_tensors_sentences():
    app = two_layers_app()
    try:
        assert app.request.origins is False and shown_lines(app) == []
        app.origins.ask.value = True
        assert app.request.origins is True
        name = pick(app, "dot_general")
        shown = shown_lines(app)
        assert shown == app.report.tensor(name).origins.text.splitlines()
        # x @ w1 with x's rows over data and w1's columns over model: both dims of the
        # product are split, each because of the input that carried the axis in.
        line = two_layers.__code__.co_firstlineno + 1
        assert shown == [
            f"dim 0 split over `data` because input `x` is, through `dot_general` at line {line}",
            f"dim 1 split over `model` because input `w1` is, through `dot_general` at line "
            f"{line}"]
        # Headed by the tensor, its layout and where it was made; and its bare line numbers
        # are said to be lines of this file.
        text = unescape(re.sub(r"<[^>]+>", "", app.origins.text.value))
        here = f"tests/ui/test_origins_view.py:{line}"
        assert text.startswith(f"Why {name} is laid out data,model (dot_general at ")
        assert f"{here})" in text and "“line N” below is a line of " in text
        assert f"data-result='{app.result_id}'" in app.origins.text.value
    finally:
        app.close()


@pytest.mark.slow
def test_under_gspmd_the_note_says_origins_need_shardy():
    app = Explorer(workload="mlp", mesh="data=2,model=4", partitioner="gspmd",
                   specs={"w1": "None,model"}, debounce=None)
    try:
        app.origins.ask.value = True
        pick(app, "w1")
        [shown] = shown_lines(app)
        assert shown == app.report.tensor("w1").origins.note
        assert shown.startswith("origins are not available under GSPMD")
    finally:
        app.close()


@pytest.mark.slow
def test_show_on_graph_draws_the_picked_tensors_path_on_the_hlo_tabs_graph():
    from explorer._src.ui.app import TAB_TITLES

    app = two_layers_app()
    try:
        assert app.origins.on_graph.layout.display == "none"      # nothing to show yet
        app.origins.ask.value = True
        assert app.origins.on_graph.layout.display == ""
        name = pick(app, "dot_general")
        app.origins.on_graph.value = True
        assert app.graph.path_tensor == name
        app.tabs.selected_index = TAB_TITLES.index("HLO")
        # x @ w1's result: x's rows over data and w1's columns over model came in through the
        # one matmul: the two inputs and that matmul, ringed on the graph.
        labels = sorted(app.graph.graph.nodes[i].label for i in app.graph.path)
        assert labels == ["dot_general", "w1", "x"]
        names = [t.name for t in app.graph.fig.data]
        assert len(app.graph.fig.data[names.index("on the origin path")].x) == 3
        # Another tensor picked: the graph follows it; the box off: no path.
        app.tabs.selected_index = TAB_TITLES.index("Placement")
        pick(app, "w2")
        assert app.graph.path_tensor == "w2"
        app.origins.on_graph.value = False
        assert app.graph.path_tensor is None
    finally:
        app.close()
