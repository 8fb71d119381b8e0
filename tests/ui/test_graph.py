"""The dataflow graph's plotly view: captions, pixel positions, sizes, the layers toggle, a fresh
figure per program; the HLO text view and the mapping box's hint. The graph itself is tested in
tests/report/test_dataflow.py. No browser."""

import html
import inspect
import re

import pytest

pytest.importorskip("plotly")

import explorer  # noqa: E402
from explorer._src.api.request import check_target  # noqa: E402
from explorer._src.report.dataflow import (  # noqa: E402
    Graph,
    Node,
    NodeRole,
    dataflow,
    layers,
    origin_path,
)
from explorer._src.spec.mesh import parse_mesh  # noqa: E402
from explorer._src.ui.app import Explorer  # noqa: E402
from explorer._src.ui.graph import _MAX_WIDTH, _WIDTH, LAYERS_FROM, GraphView, draw  # noqa: E402
from explorer._src.ui.views import hlo_html, mapping_placeholder  # noqa: E402


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


def chain_with_fan_in(depth: int, fan: int) -> Graph:
    """A chain of `depth` ops, and `fan` inputs all read by the last op (as a train step's
    optimizer reads every moment): one layer of `fan` nodes."""
    def op(i):
        return Node(name=f"op{i}", opcode="add", role=NodeRole.OP, kind="add", label="add",
                    shape="f32[8]")

    def inp(i):
        return Node(name=f"p{i}", opcode="parameter", role=NodeRole.INPUT, kind="parameter",
                    label=f"layer{i}.weight", shape="f32[8]")

    nodes = [op(i) for i in range(depth)] + [inp(i) for i in range(fan)]
    edges = [(i, i + 1) for i in range(depth - 1)] + [(depth + k, depth - 1) for k in range(fan)]
    rows = layers(len(nodes), edges)
    return Graph("main", tuple(nodes), tuple(edges), (), tuple(tuple(r) for r in rows),
                 len(nodes))


def test_figure_grows_with_depth_and_wraps_a_wide_layer_within_the_width_cap():
    shallow, deep = draw(chain_with_fan_in(10, 3)), draw(chain_with_fan_in(100, 3))
    assert deep.size()[1] > shallow.size()[1]
    assert deep.rows == 100 and shallow.rows == 10          # a chain: one node per row
    wide = draw(chain_with_fan_in(10, 300))
    # 300 captioned inputs in one layer: wrapped onto several rows, so the figure stays within
    # its width cap instead of squeezing the drawing (before: 300 x 22 px in a 940 px plot).
    assert wide.rows > 10
    width, _ = wide.size()
    assert width <= _MAX_WIDTH
    left, right = wide.extent()
    assert right - left <= _WIDTH + 1
    # Every edge still points down the drawing.
    for a, b in wide.graph.edges:
        assert wide.positions[a][1] < wide.positions[b][1]


def test_toggle_draws_one_node_per_group(megatron):
    view = GraphView()
    view.update(megatron)
    assert view.mode.value == "ops"                  # small: every op
    view.mode.value = "layers"
    roles = {n.role for n in view.graph.nodes}
    assert NodeRole.GROUP in roles and "one per layer" in view.fig.layout.title.text
    # mlp's inputs x, w1, w2 name no layer: their ops are grouped under them.
    assert {n.label for n in view.graph.nodes if n.role == NodeRole.GROUP} <= {"x", "w1", "w2"}
    assert sum(len(m) for m in view.graph.groups) == view.graph.total


def test_hlo_text_starts_with_an_instruction_then_the_ops(megatron):
    page = hlo_html(megatron, "optimized")
    text = html.unescape(re.sub(r"<[^>]+>", "\n", page))
    first = next(line for line in text.splitlines() if line.strip())
    assert first.startswith("The per-device program's computations")
    # The first line of the shown program (after the folded header) is a computation, not a
    # metadata table; the tables are still there, inside the <details>.
    body = page.split("</details>", 1)[1]
    shown = re.sub(r"<[^>]+>", "", body).splitlines()[0]
    assert shown.rstrip().endswith("{") and "FileNames" not in body
    head = page.split("</details>", 1)[0]
    assert "<details" in head and "FileNames" in head and "StackFrames" in head
    assert "HloModule" in head


def test_mapping_placeholder_is_accepted_by_the_target():
    # The app's defaults: mesh data=2,model=4 (Explorer's), target h100-8 (notebooks/app.ipynb).
    mesh = parse_mesh(inspect.signature(Explorer).parameters["mesh"].default)
    hint = mapping_placeholder("h100-8", mesh)
    example = hint.split("e.g. ", 1)[1]
    # Fed to the parser and validator the app uses on the mapping box's text.
    check_target("h100-8", example, mesh)
    # By hand: 8 GPUs on NVLink shared out as 2 x 4, model (inner) on neighbouring chips.
    assert example == "data=gpu:2,model=gpu:4"
    assert mapping_placeholder("", mesh) == "choose a target first"


@pytest.mark.slow
def test_a_train_step_starts_one_node_per_layer():
    # Issue 22: a 12-layer train step opened on 152 mostly unlabelled nodes. Four unrolled
    # layers already make more ops than the graph shows one by one.
    report = explorer.analyze_workload("transformer_train", "data=2,model=4", preset="fsdp_tp",
                                       params={"layers": 4, "scan_layers": "false"})
    every_op = dataflow(report)
    assert len(every_op.nodes) > LAYERS_FROM
    view = GraphView()
    view.update(report)
    assert view.mode.value == "layers" and "one per layer" in view.fig.layout.title.text
    assert len(view.graph.nodes) < len(every_op.nodes)
    # The user's pick is kept for the next program.
    view.mode.value = "ops"
    view.update(report)
    assert view.mode.value == "ops" and len(view.graph.nodes) == len(every_op.nodes)


def three_matmuls(x, w1, w2, w3):
    h = x @ w1
    h = h @ w2
    return h @ w3


def line_of(text: str) -> int:
    lines, first = inspect.getsourcelines(three_matmuls)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.fixture(scope="module")
def chain():
    """x's rows over data, every weight whole: data reaches the output through the three
    matmuls and nothing else, so its origin path is x, then the matmul of each line."""
    return explorer.analyze(three_matmuls, explorer.TensorSpec("x", (256, 512), spec="data,None"),
                            explorer.TensorSpec("w1", (512, 512)),
                            explorer.TensorSpec("w2", (512, 512)),
                            explorer.TensorSpec("w3", (512, 128)), mesh="data=2,model=4",
                            origins=True)


def test_the_origin_path_highlights_the_input_and_the_ops_its_axis_went_through(chain):
    g = dataflow(chain)
    here = inspect.getsourcefile(three_matmuls).rsplit("/", 1)[-1]
    path = [(g.nodes[i].label, g.nodes[i].source.rsplit("/", 1)[-1]) for i in
            origin_path(chain, g, "out")]
    assert path == [("x", ""), ("dot_general", f"{here}:{line_of('x @ w1')}"),
                    ("dot_general", f"{here}:{line_of('h @ w2')}"),
                    ("dot_general", f"{here}:{line_of('h @ w3')}")]
    # The weights carry no split to the output: they are off the path.
    assert not {"w1", "w2", "w3"} & {g.nodes[i].label for i in origin_path(chain, g, "out")}
    # The first matmul's result came only through its own line.
    first = next(t.name for t in chain.tensors if t.source.endswith(f":{line_of('x @ w1')}"))
    assert [g.nodes[i].label for i in origin_path(chain, g, first)] == ["x", "dot_general"]


def test_the_graph_draws_the_path_asked_for_and_dims_the_rest(chain):
    view = GraphView()
    view.path_tensor = "out"
    view.update(chain)
    fig, g = view.fig, view.graph
    names = [t.name for t in fig.data]
    ring = fig.data[names.index("on the origin path")]
    assert len(ring.x) == 4 and list(ring.text)[0] == "x"
    # Its three edges x -> dot -> dot -> dot, each a segment of three points (the last None).
    assert len(fig.data[names.index("origin path")].x) == 3 * 3
    assert {fig.data[k].opacity for k in range(names.index("origin path"))} == {0.25}
    assert "in orange: the path out's layout came along" in html.unescape(view.note.value)
    # Asked for no path: nothing drawn over the graph, nothing dimmed.
    view.path_tensor = None
    view.update(chain)
    names = [t.name for t in view.fig.data]
    assert len(view.fig.data[names.index("on the origin path")].x) == 0
    assert view.fig.data[names.index("op")].opacity == 1.0
    assert view.path == () and len(g.nodes) == len(view.graph.nodes)
