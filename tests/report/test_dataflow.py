"""The HLO dataflow graph: nodes, collapsed plumbing, collectives, eliding, layers. Pure: no
plotting library is needed."""

import json

import pytest

import explorer
from explorer._src.report.dataflow import (
    NodeRole,
    collapsed,
    dataflow,
    layer_of_name,
    layers,
    sliced_all_reduces,
)
from explorer._src.report.report import Collective, Cost, Report, Timing
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import entry_axes
from explorer._src.workloads.registry import get_workload


@pytest.fixture(scope="module")
def transformer():
    # Unrolled layers: every collective in the entry computation, where the graph draws it.
    return explorer.analyze_workload("transformer_train", "data=2,model=4", preset="fsdp_tp",
                                     params={"scan_layers": False})


def check_layers(g):
    """Every edge points down at least one layer; every node sits in exactly one layer."""
    for a, b in g.edges + g.elided_edges:
        assert g.layer_of(a) < g.layer_of(b), (g.nodes[a].name, g.nodes[b].name)
    assert sorted(i for row in g.layers for i in row) == list(range(len(g.nodes)))


def test_layers_of_a_hand_drawn_dag():
    # a -> b -> d, a -> c -> d, and an input p read only by d. Longest path puts a, {b, c}, d
    # on layers 0, 1, 2; p, computed from nothing, floats to just above its first reader.
    a, b, c, d, p = range(5)
    rows = layers(5, [(a, b), (a, c), (b, d), (c, d), (p, d)])
    assert [sorted(r) for r in rows] == [[a], [b, c, p], [d]]
    # A chain stays a chain, one node per layer, in order.
    assert layers(3, [(0, 1), (1, 2)]) == [[0], [1], [2]]
    assert layers(0, []) == []


def test_barycenter_order_removes_a_crossing():
    # Two chains, 0 -> 3 and 1 -> 2. In index order the second row, [2, 3], would draw the
    # edges crossed; ordering it by the producers' x puts 3 under 0 and 2 under 1.
    assert layers(4, [(0, 3), (1, 2)]) == [[0, 1], [3, 2]]
    assert layers(4, [(0, 2), (1, 3)]) == [[0, 1], [2, 3]]


def test_megatron_mlp_graph(megatron):
    g = dataflow(megatron)
    check_layers(g)
    # x, w1 -> dot -> gelu -> dot (with w2) -> all-reduce over model: the partial sums of the
    # second matmul, a per-device [128, 1024] f32 block = 512 KiB.
    assert [sorted(g.nodes[i].text for i in layer) for layer in g.layers] == [
        ["w1 f32[1024,1024]", "x f32[128,1024]"],
        ["dot_general f32[128,1024]"],
        ["mul f32[128,1024]", "w2 f32[1024,1024]"],
        ["dot_general f32[128,1024]"],
        ["all-reduce model 512.0 KiB"],
    ]
    inputs = {n.label: g.index(n.name) for n in g.nodes if n.role == NodeRole.INPUT}
    assert set(inputs) == {"x", "w1", "w2"}
    dots = [i for i, n in enumerate(g.nodes) if n.fused == "dot"]
    assert len(dots) == 2 and all(g.nodes[i].opcode == "fusion" for i in dots)
    assert all(g.nodes[i].is_landmark for i in dots)
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


def hand_report(hlo: str = HLO) -> Report:
    ar = Collective(kind="all-reduce", axes=("model",), group_size=2, shape=(8, 4),
                    dtype="float32", bytes=128, hlo_name="ar", computation="main")
    return Report(mesh=MeshSpec(("model",), (2,)), partitioner="shardy", backend="cpu",
                  collectives=(ar,), tensors=(), memory=None,
                  cost=Cost(None, None, None, 128), timing=Timing(0.0, 0.0),
                  optimized_hlo=hlo)


def test_plumbing_collapses_into_edges():
    g = dataflow(hand_report())
    check_layers(g)
    # The constant is dropped; get-tuple-element, bitcast and the root tuple become edges.
    assert [n.name for n in g.nodes] == ["p0", "p1", "dot", "cb", "mul", "ar"]
    edges = {(g.nodes[a].name, g.nodes[b].name) for a, b in g.edges}
    assert edges == {("p0", "dot"), ("p1", "dot"), ("dot", "mul"), ("cb", "mul"),
                     ("mul", "ar")}
    assert {n.name for n in g.nodes if n.is_output} == {"ar", "p1"}
    assert g.node("ar").text == "all-reduce model 128 B"
    assert g.node("ar").role == NodeRole.COLLECTIVE and g.node("p0").role == NodeRole.INPUT
    assert g.node("p1").shape == "(f32[4,4], f32[4])"
    assert g.node("dot").label == "dot_general" and g.node("dot").is_landmark
    assert not g.node("mul").is_landmark


@pytest.mark.slow
def test_max_nodes_keeps_every_collective(transformer):
    full = dataflow(transformer, max_nodes=100_000)
    g = dataflow(transformer, max_nodes=60)
    check_layers(g)
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


@pytest.mark.slow
def test_transformer_train_graph_fits_the_default_budget_with_every_collective(transformer):
    g = dataflow(transformer)
    check_layers(g)
    assert len(g.nodes) <= 200 and len(g.collectives) == len(transformer.collectives)


def gram_split_by_rows(x):
    """x.T @ x with the rows of the result split over data: the partial sums over the batch
    are reduced and scattered, a reduce-scatter."""
    import jax
    from jax.sharding import PartitionSpec

    return jax.lax.with_sharding_constraint(x.T @ x, PartitionSpec("data", None))


def gram_replicated(x):
    import jax
    from jax.sharding import PartitionSpec

    return jax.lax.with_sharding_constraint(x.T @ x, PartitionSpec(None, None))


def test_an_all_reduce_only_sliced_is_found_as_a_reduce_scatter():
    x = explorer.TensorSpec("x", (8, 16), spec="data,None")
    # Batch split over data=4: each device holds a partial [16, 16] sum. Wanting rows split
    # over data is a reduce-scatter; the CPU backend writes an all-reduce and a dynamic-slice.
    r = explorer.analyze(gram_split_by_rows, x, mesh="data=4")
    [c] = r.collectives
    assert (c.kind, c.axes) == ("all-reduce", ("data",))
    assert sliced_all_reduces(r) == {0: (1, 1)}
    # Replicated, the whole sum is wanted: a real all-reduce.
    r = explorer.analyze(gram_replicated, x, mesh="data=4")
    assert [(c.kind, c.axes) for c in r.collectives] == [("all-reduce", ("data",))]
    assert sliced_all_reduces(r) == {}


def test_sliced_parts_of_a_combined_all_reduce_are_counted(transformer):
    # fsdp_tp's gradient all-reduce over data combines the gradients of every weight; those of
    # the data-split weights are then sliced to each device's shard, the others used whole.
    # Every one of its weights is split over data here (fsdp), so each weight's gradient is
    # sliced: as many sliced parts as weights. The rest (the loss) is used whole.
    workload = get_workload("transformer_train")
    kinds = workload.kinds(dict(transformer.workload.params))
    weights = [t for t in transformer.tensors
               if t.kind == "input" and kinds.get(t.name, "param") == "param"]
    split = [t for t in weights if any("data" in entry_axes(e) for e in t.spec)]
    assert len(split) == len(weights) == 19
    [(i, (n, parts))] = sliced_all_reduces(transformer).items()
    c = transformer.collectives[i]
    assert (c.kind, c.axes, c.parts) == ("all-reduce", ("data",), parts)
    assert n == len(split) and parts > n


# ------------------------------------------------------------------ tensor names and layers

def three_layer_mlp(x, l0_w, l1_w, l2_w):
    """Three dense layers with a tanh between them; each weight's columns split over model."""
    import jax.numpy as jnp

    for w in (l0_w, l1_w, l2_w):
        x = jnp.tanh(x @ w)
    return x


def test_layer_of_name_reads_indexed_containers():
    assert layer_of_name("l3.wq") == "l3"
    assert layer_of_name("m.l3.wq") == "l3"             # Adam's moment of l3.wq: same layer
    assert layer_of_name("layers.0.attn.q.kernel") == "layers.0"
    assert layer_of_name("block_2.w") == "block_2"
    # A leaf names a tensor, not a layer: mlp's w1, a scanned model's stacked norm.
    assert layer_of_name("w1") is None and layer_of_name("layers.ln1") is None
    assert layer_of_name("layers.wq") is None and layer_of_name("embed") is None


def test_inputs_of_a_user_function_are_named_and_collapse_to_its_layers():
    x = explorer.TensorSpec("x", (16, 32), spec="data,None")
    ws = [explorer.TensorSpec(f"l{i}.w", (32, 32), spec="None,model") for i in range(3)]
    r = explorer.analyze(three_layer_mlp, x, *ws, mesh="data=2,model=4")
    g = dataflow(r)
    check_layers(g)
    assert sorted(n.label for n in g.nodes if n.role == NodeRole.INPUT) == \
        ["l0.w", "l1.w", "l2.w", "x"]
    c = collapsed(r)
    check_layers(c)
    # By hand: three layers, l0..l2; x's own ops (if any survive fusion) are grouped under x.
    layer_groups = [n.label for n in c.nodes if n.role == NodeRole.GROUP and n.label != "x"]
    assert sorted(layer_groups) == ["l0", "l1", "l2"]
    # Each layer's group holds its weight, and every node of the program is in one group.
    members = {n.label: set(m) for n, m in zip(c.nodes, c.groups, strict=True)}
    for i in range(3):
        assert g.node(next(n.name for n in g.nodes if n.label == f"l{i}.w")).name \
            in members[f"l{i}"]
    assert sum(len(m) for m in c.groups) == c.total == len(dataflow(r, 10_000).nodes)
    # The chain runs l0 -> l1 -> l2 downward.
    order = {n.label: c.layer_of(i) for i, n in enumerate(c.nodes)}
    assert order["l0"] < order["l1"] < order["l2"]


def test_train_step_inputs_are_named_by_tensor_and_collapse_to_its_layers(transformer):
    full = dataflow(transformer, max_nodes=100_000)
    block = ("ln1", "wq", "wk", "wv", "wo", "ln2", "w1", "w2")       # the sequential gelu block
    params = ["embed", *(f"l{i}.{p}" for i in range(2) for p in block), "final_norm", "unembed"]
    want = {"tokens", "targets", *params, *(f"m.{p}" for p in params),
            *(f"v.{p}" for p in params)}
    labels = [n.label for n in full.nodes if n.role == NodeRole.INPUT]
    assert sorted(labels) == sorted(want)            # every input once, none as state[N]
    assert not any(n.label.startswith("state[") for n in full.nodes)
    c = collapsed(transformer)
    layers_found = sorted(n.label for n in c.nodes
                          if n.role == NodeRole.GROUP and layer_of_name(n.label + ".x"))
    assert layers_found == ["l0", "l1"]              # scan_layers=False, layers=2
    # Collectives stay visible: each layer group counts its own, and every collective of the
    # program is counted once, in a group or as a node of its own.
    counted = sum(k for n in c.nodes if n.role == NodeRole.GROUP for _, k in n.counts)
    alone = sum(1 for n in c.nodes if n.role == NodeRole.COLLECTIVE)
    assert counted + alone == len(full.collectives)
    for name in ("l0", "l1"):
        assert dict(c.node(name).counts).get("all-gather", 0) >= 1   # fsdp gathers its weights
    json.dumps(c.to_dict())
