"""The dataflow graph's plotly view: captions, pixel positions, a fresh figure per program.
The graph itself is tested in tests/report/test_dataflow.py. No browser."""

import pytest

pytest.importorskip("plotly")

import explorer  # noqa: E402
from explorer.report.dataflow import NodeRole, dataflow  # noqa: E402
from explorer.ui.graph import GraphView, draw  # noqa: E402


def test_drawing_keeps_row_order_and_room_for_captions(megatron):
    d = draw(dataflow(megatron))
    g = d.graph
    for k, row in enumerate(g.layers):
        xs = [d.positions[i][0] for i in row]
        assert all(d.positions[i][1] == k for i in row)
        assert xs == sorted(xs) and len(set(xs)) == len(xs)
    # A 7-node graph captions every node; a collective by kind, axes and bytes.
    ar = g.index(g.collectives[0].name)
    assert d.captions[ar] == "all-reduce model 512.0 KiB"
    assert sorted(c for i, c in enumerate(d.captions)
                  if g.nodes[i].role == NodeRole.INPUT) == ["w1", "w2", "x"]
    left, right = d.extent()
    assert left <= min(x for x, _ in d.positions) and right >= max(x for x, _ in d.positions)


def test_view_draws_each_program_on_a_fresh_figure(megatron):
    replicated = explorer.analyze_workload(
        "mlp", "data=2,model=4", specs={"x": "data,None", "w1": "None,None", "w2": "None,None"})
    view = GraphView()
    assert "explorer-graph" in view.widget._dom_classes
    view.update(megatron)
    fig = view.fig
    assert view.box.children[-1] is fig
    names = [t.name for t in fig.data]
    ar = fig.data[names.index("all-reduce")]
    assert list(ar.text) == ["all-reduce model 512.0 KiB"] and ar.showlegend
    assert "jit(mlp)/dot_general" in ar.customdata[0] and "all-reduce(" in ar.customdata[0]
    assert list(fig.data[0].x).count(None) == len(view.graph.edges)
    assert sorted(fig.data[names.index("input")].text) == ["w1", "w2", "x"]
    assert not fig.data[names.index("all-gather")].showlegend
    # The synced state carries the drawing, so the browser's new view draws the same.
    assert fig._widget_data[names.index("all-reduce")]["text"] == ["all-reduce model 512.0 KiB"]

    view.update(replicated)
    # A new figure replaces the old one in the container; the old widget is closed.
    assert view.fig is not fig and view.box.children[-1] is view.fig
    assert fig.comm is None
    new = view.fig
    assert len(new.data[names.index("all-reduce")].x) == 0
    assert not new.data[names.index("all-reduce")].showlegend
    assert "0 collectives" in new.layout.title.text
