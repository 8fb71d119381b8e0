"""The HLO dataflow graph: nodes, collapsed plumbing, collectives, eliding, layout. No browser."""

import json
import time

import pytest

pytest.importorskip("plotly")

import explorer  # noqa: E402
from explorer.report.report import Collective, Cost, Report, Timing  # noqa: E402
from explorer.spec.mesh import MeshSpec  # noqa: E402
from explorer.ui.graph import GraphView, dataflow  # noqa: E402

MEGATRON = {"x": "data,None", "w1": "None,model", "w2": "model,None"}


@pytest.fixture(scope="module")
def megatron():
    return explorer.analyze_workload("mlp", "data=2,model=4", specs=MEGATRON)


@pytest.fixture(scope="module")
def transformer():
    return explorer.analyze_workload("transformer_train", "data=2,model=4", preset="fsdp_tp",
                                     params={"scan_layers": False})


def _check_layout(g):
    for a, b in g.edges + g.elided_edges:
        assert g.layer_of(a) < g.layer_of(b), (g.nodes[a].name, g.nodes[b].name)
    for row in g.layers:
        xs = [g.positions[i][0] for i in row]
        assert xs == sorted(xs) and len(set(xs)) == len(xs)
    assert sorted(i for row in g.layers for i in row) == list(range(len(g.nodes)))


def test_megatron_mlp_graph(megatron):
    g = dataflow(megatron)
    _check_layout(g)
    # x, w1 -> dot -> gelu -> dot (with w2) -> all-reduce over model: the partial sums of the
    # second matmul, a per-device [128, 1024] f32 block = 512 KiB.
    assert [sorted(g.nodes[i].text for i in layer) for layer in g.layers] == [
        ["w1 f32[1024,1024]", "x f32[128,1024]"],
        ["dot_general f32[128,1024]"],
        ["mul f32[128,1024]", "w2 f32[1024,1024]"],
        ["dot_general f32[128,1024]"],
        ["all-reduce model 512.0 KiB"],
    ]
    inputs = {n.label: g.index(n.name) for n in g.nodes if n.role == "input"}
    assert set(inputs) == {"x", "w1", "w2"}
    dots = [i for i, n in enumerate(g.nodes) if n.fused == "dot"]
    assert len(dots) == 2 and all(g.nodes[i].opcode == "fusion" for i in dots)
    first, second = sorted(dots, key=g.layer_of)
    assert sorted(g.preds(first)) == sorted([inputs["x"], inputs["w1"]])
    assert inputs["w2"] in g.preds(second)
    for i in inputs.values():                    # every parameter feeds a dot fusion
        assert set(g.succs(i)) & set(dots)
    [ar] = g.collectives
    assert (ar.kind, ar.axes, ar.bytes, ar.text) == (
        "all-reduce", ("model",), 524288, "all-reduce model 512.0 KiB")
    assert ar.collective == 0 and ar.is_output
    k = g.index(ar.name)
    assert g.preds(k) == [second] and k in g.downstream(second)
    assert g.layer_of(k) == g.layer_of(second) + 1
    assert g.elided == 0 and g.total == len(g.nodes) == 7
    text = g.render_text()
    assert text.splitlines()[0] == f"dataflow of {g.computation}: 7 nodes, 6 edges, 5 layers"
    assert f"{ar.name} = all-reduce model 512.0 KiB [output] <- {g.nodes[second].name}" in text
    json.dumps(g.to_dict())


HLO = """HloModule m, entry_computation_layout={(f32[8,4]{1,0})->f32[8,4]{1,0}}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (p0: f32[8,4], p1: (f32[4,4], f32[4])) -> (f32[8,4], f32[4]) {
  %p0 = f32[8,4]{1,0} parameter(0), metadata={op_name="x"}
  %p1 = (f32[4,4]{1,0}, f32[4]{0}) parameter(1), metadata={op_name="params"}
  %w = f32[4,4]{1,0} get-tuple-element(%p1), index=0
  %bias = f32[4]{0} get-tuple-element(%p1), index=1
  %c = f32[] constant(2)
  %wb = f32[4,4]{1,0} bitcast(%w)
  %dot = f32[8,4]{1,0} dot(%p0, %wb), lhs_contracting_dims={1}, rhs_contracting_dims={0}, \
metadata={op_name="jit(f)/dot_general"}
  %cb = f32[8,4]{1,0} broadcast(%c), dimensions={}
  %mul = f32[8,4]{1,0} multiply(%dot, %cb), metadata={op_name="jit(f)/mul"}
  %ar = f32[8,4]{1,0} all-reduce(%mul), replica_groups={{0,1}}, to_apply=%add
  ROOT %out = (f32[8,4]{1,0}, f32[4]{0}) tuple(%ar, %bias)
}
"""


def test_plumbing_collapses_into_edges():
    ar = Collective(kind="all-reduce", axes=("model",), group_size=2, shape=(8, 4),
                    dtype="float32", bytes=128, hlo_name="ar", computation="main")
    report = Report(mesh=MeshSpec(("model",), (2,)), partitioner="shardy", backend="cpu",
                    collectives=(ar,), tensors=(), memory=None,
                    cost=Cost(None, None, None, 128), timing=Timing(0.0, 0.0),
                    optimized_hlo=HLO)
    g = dataflow(report)
    _check_layout(g)
    # The constant is dropped; get-tuple-element, bitcast and the root tuple become edges.
    assert [n.name for n in g.nodes] == ["p0", "p1", "dot", "cb", "mul", "ar"]
    edges = {(g.nodes[a].name, g.nodes[b].name) for a, b in g.edges}
    assert edges == {("p0", "dot"), ("p1", "dot"), ("dot", "mul"), ("cb", "mul"),
                     ("mul", "ar")}
    assert {n.name for n in g.nodes if n.is_output} == {"ar", "p1"}
    assert g.node("ar").text == "all-reduce model 128 B"
    assert g.node("p1").shape == "(f32[4,4], f32[4])"
    assert g.node("dot").label == "dot_general"


def test_max_nodes_keeps_every_collective(transformer):
    full = dataflow(transformer, max_nodes=100_000)
    g = dataflow(transformer, max_nodes=60)
    _check_layout(g)
    assert full.elided == 0 and g.total == len(full.nodes)
    assert g.elided == g.total - len(g.nodes) > 0
    assert f"{g.elided} of {g.total} nodes elided" in g.render_text()
    # The must-keep set (37 collectives and their neighbours: the combined gradient all-reduce
    # alone feeds every optimizer update) is larger than 60; above it the budget holds.
    must = len(g.nodes)
    assert must > 60 and len(dataflow(transformer, max_nodes=must + 7).nodes) == must + 7
    assert sorted(n.collective for n in g.collectives) == list(range(len(transformer.collectives)))
    kept = {n.name for n in g.nodes}
    for c in full.collectives:                   # and every collective's neighbours
        k = full.index(c.name)
        assert {full.nodes[i].name for i in full.preds(k) + full.succs(k)} <= kept
    # Eliding keeps reachability: what a kept node reaches through elided nodes, it still
    # reaches along the (dotted) elided edges.
    for n in g.nodes[::7]:
        want = {full.nodes[i].name for i in full.downstream(full.index(n.name))} & kept
        assert {g.nodes[i].name for i in g.downstream(g.index(n.name))} == want


def test_transformer_train_builds_quickly(transformer):
    start = time.perf_counter()
    g = dataflow(transformer)
    elapsed = time.perf_counter() - start
    print(f"\ntransformer_train graph: {len(g.nodes)} of {g.total} nodes, {len(g.layers)} "
          f"layers, {len(g.collectives)} collectives, built in {elapsed * 1e3:.0f} ms")
    _check_layout(g)
    assert len(g.nodes) <= 200 and len(g.collectives) == len(transformer.collectives)


def test_view_draws_each_program_on_a_fresh_figure(megatron):
    replicated = explorer.analyze_workload(
        "mlp", "data=2,model=4", specs={"x": "data,None", "w1": "None,None", "w2": "None,None"})
    view = GraphView()
    assert "explorer-graph" in view.widget._dom_classes
    view.update(megatron)
    fig = view.fig
    assert view.widget.children[-1] is fig
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
    assert view.fig is not fig and view.widget.children[-1] is view.fig
    assert fig.comm is None
    new = view.fig
    assert len(new.data[names.index("all-reduce")].x) == 0
    assert not new.data[names.index("all-reduce")].showlegend
    assert "0 collectives" in new.layout.title.text
