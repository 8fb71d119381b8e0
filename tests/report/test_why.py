"""Why each collective exists, on programs written here and compiled for real.

Each case is worked out by hand from the shardings the test gives (the scaling book's
sharded-matmul cases, https://jax-ml.github.io/scaling-book/sharding/), not from the code under
test. Lines are found by the marker comments in this file.
"""

import json
import os
import re

import pytest

import explorer
from explorer import TensorSpec as T
from explorer._src.hlo.module import parse_module
from explorer._src.report.why import Reason, dim_axes, explain_collectives
from explorer._src.spec.mesh import parse_mesh

HERE = os.path.abspath(__file__)
with open(HERE) as _f:
    _LINES = _f.read().splitlines()


def line_of(marker: str) -> int:
    """The 1-based line of this file that carries `# <marker>`."""
    hits = [i + 1 for i, text in enumerate(_LINES) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    return hits[0]


def code_of(marker: str) -> str:
    return _LINES[line_of(marker) - 1].strip()


def assert_source(c, marker: str):
    """The collective points at the marked line of this file, and its text is that line's (the
    program is traced in this process, so the compiler records this file's name)."""
    path, line = c.source.rsplit(":", 1)
    assert int(line) == line_of(marker)
    assert os.path.abspath(path) == HERE
    assert c.source_text == code_of(marker)


# --- the programs -------------------------------------------------------------------------------

def megatron_mlp(x, w1, w2):
    import jax

    h = jax.nn.relu(x @ w1)  # MEGATRON_UP
    return h @ w2  # MEGATRON_DOWN


def fsdp_mlp(x, w1, w2):
    import jax

    h = jax.nn.relu(x @ w1)  # FSDP_UP
    return h @ w2  # FSDP_DOWN


def transposed_layout(x):
    import jax
    from jax.sharding import PartitionSpec as P

    y = x * 2  # WSC_PRODUCER
    y = jax.lax.with_sharding_constraint(y, P(None, "data"))  # WSC_CONSTRAINT
    return y + 1


def lookup(table, idx):
    import jax.numpy as jnp

    return jnp.take(table, idx, axis=0)  # TAKE


def summed_in_shard_map(x):
    import jax
    from jax.sharding import PartitionSpec as P

    def body(a):
        return jax.lax.psum(a, "data")  # PSUM

    return jax.shard_map(body, in_specs=P("data", None), out_specs=P(None, None))(x)


def squared_error(w, x):
    import jax.numpy as jnp

    return jnp.mean((x @ w) ** 2)  # DP_FORWARD


def data_parallel_grad(w, x):
    import jax

    return jax.grad(squared_error)(w, x)


# --- the reasons --------------------------------------------------------------------------------

def test_megatron_mlp_all_reduce_is_a_partial_sum_over_model():
    # h = relu(x @ w1) is [16,256] split (data, model); h @ w2 contracts the 256 dimension, which
    # both h and w2 split over `model`: each device holds a [8,64] partial sum (case 3).
    r = explorer.analyze(megatron_mlp, T("x", (16, 64), "float32", "data,None"),
                         T("w1", (64, 256), "float32", "None,model"),
                         T("w2", (256, 64), "float32", "model,None"), mesh="data=2,model=4")
    [c] = r.collectives
    assert (c.kind, c.axes, c.shape) == ("all-reduce", ("model",), (8, 64))
    assert c.why.reason == Reason.PARTIAL_SUM
    assert_source(c, "MEGATRON_DOWN")
    assert "contracts dimension 1" in c.why.text and "dimension 0 of input `w2`" in c.why.text
    assert "sharded over `model` in both" in c.why.text
    assert c.why.evidence.sharding_before == "lhs data,model; rhs model,None"
    assert c.why.evidence.sharding_after == "data,None"


def test_fsdp_weights_are_gathered_before_their_matmuls():
    # w1 and w2 are split over `data` on dimension 0, the contracting dimension of each matmul,
    # while the activations are split over `data` on the batch: each weight is all-gathered
    # whole (w1 [64,256], w2 [256,64]) before its matmul.
    r = explorer.analyze(fsdp_mlp, T("x", (16, 64), "float32", "data,None"),
                         T("w1", (64, 256), "float32", "data,None"),
                         T("w2", (256, 64), "float32", "data,None"), mesh="data=8")
    by_shape = {c.shape: c for c in r.collectives}
    assert set(by_shape) == {(64, 256), (256, 64)}
    for shape, name, marker in (((64, 256), "w1", "FSDP_UP"), ((256, 64), "w2", "FSDP_DOWN")):
        c = by_shape[shape]
        assert (c.kind, c.axes) == ("all-gather", ("data",))
        assert c.why.reason == Reason.GATHER_OPERAND
        assert_source(c, marker)
        assert f"contracts dimension 0 of input `{name}` (data,None)" in c.why.text
        assert (c.why.evidence.sharding_before, c.why.evidence.sharding_after) == (
            "data,None", "replicated")


def test_a_sharding_constraint_that_moves_the_split_dimension_is_a_reshard():
    # x is split over `data` on rows; the constraint asks for columns. Propagation carries the
    # constraint's layout back to `x * 2`, where the rows become columns: an all-to-all.
    r = explorer.analyze(transposed_layout, T("x", (16, 64), "float32", "data,None"),
                         mesh="data=8")
    [c] = r.collectives
    assert (c.kind, c.axes) == ("all-to-all", ("data",))
    assert c.why.reason == Reason.RESHARD
    assert_source(c, "WSC_PRODUCER")
    assert f"sharding constraint at line {line_of('WSC_CONSTRAINT')}" in c.why.text
    assert (c.why.evidence.sharding_before, c.why.evidence.sharding_after) == (
        "data,None", "None,data")


def test_take_along_a_sharded_dimension_is_indexing():
    # The table's rows are split over `data`; each device looks up the indices in its rows and
    # the all-reduce over `data` combines the [16,32] results.
    r = explorer.analyze(lookup, T("table", (64, 32), "float32", "data,None"),
                         T("idx", (16,), "int32", None), mesh="data=8")
    [c] = r.collectives
    assert (c.kind, c.axes, c.shape) == ("all-reduce", ("data",), (16, 32))
    assert c.why.reason == Reason.INDEXING
    assert_source(c, "TAKE")
    assert "indexes dimension 0 of input `table`, which is sharded over `data`" in c.why.text


def test_psum_in_shard_map_is_explicit():
    r = explorer.analyze(summed_in_shard_map, T("x", (16, 64), "float32", "data,None"),
                         mesh="data=8")
    [c] = r.collectives
    assert (c.kind, c.axes) == ("all-reduce", ("data",))
    assert c.why.reason == Reason.EXPLICIT
    assert_source(c, "PSUM")
    assert "`psum`" in c.why.text and "inside a shard_map" in c.why.text


def test_data_parallel_gradient_is_summed_over_the_batch_dimension():
    # dL/dw = x^T · dy contracts the 16 rows of x, split over `data`: each device holds the
    # gradient of its 2 rows; the all-reduce over `data` adds the eight [32,64] partial sums.
    r = explorer.analyze(data_parallel_grad, T("w", (64, 32), "float32", None),
                         T("x", (16, 64), "float32", "data,None"), mesh="data=8")
    [c] = r.collectives
    assert (c.kind, c.axes) == ("all-reduce", ("data",))
    assert c.why.reason == Reason.PARTIAL_SUM
    assert_source(c, "DP_FORWARD")     # the transposed matmul keeps the forward's line
    assert "dimension 0 of input `x`" in c.why.text
    assert "the gradient is summed over the batch dimension, sharded over `data`" in c.why.text


def test_why_is_in_the_json():
    r = explorer.analyze(megatron_mlp, T("x", (16, 64), "float32", "data,None"),
                         T("w1", (64, 256), "float32", "None,model"),
                         T("w2", (256, 64), "float32", "model,None"), mesh="data=2,model=4")
    [d] = json.loads(json.dumps(r.to_dict()))["collectives"]
    assert d["why"]["reason"] == "partial-sum"
    assert set(d["why"]["evidence"]) == {"consumer", "producer", "sharding_before",
                                         "sharding_after", "origin_before", "origin_after",
                                         "operands", "user", "spec_after", "inputs"}
    assert [o["input"] for o in d["why"]["evidence"]["operands"]] == ["", "w2"]
    assert d["why"]["evidence"]["operands"][1]["spec"] == ["model", None]
    assert "source_text" in d


# --- the classifier on text ---------------------------------------------------------------------

# A module written by hand: an all-reduce whose metadata names an op the propagated module
# does not have. No rule can apply, and the classifier says so rather than guessing.
_OPTIMIZED = """HloModule m, num_partitions=8

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}

ENTRY %main (a: f32[8]) -> f32[8] {
  %a = f32[8]{0} parameter(0)
  ROOT %ar = f32[8]{0} all-reduce(%a), channel_id=1, replica_groups=[1,8]<=[8], \
to_apply=%add, metadata={op_name="jit(f)/cumsum"}
}
"""
_PROPAGATED = """HloModule m, num_partitions=8

ENTRY %main (a: f32[8]) -> f32[8] {
  %a = f32[8]{0} parameter(0), sharding={devices=[8]<=[8]}, metadata={op_name="a"}
  ROOT %n = f32[8]{0} negate(%a), sharding={replicated}, metadata={op_name="jit(f)/neg"}
}
"""


def test_no_matching_instruction_is_unknown_and_says_so():
    whys = explain_collectives(parse_module(_OPTIMIZED), parse_module(_PROPAGATED),
                               parse_mesh("data=8"), ["a"])
    why = whys["ar"]
    assert why.reason == Reason.UNKNOWN
    assert why.text.startswith("No reason found")
    assert "'jit(f)/cumsum'" in why.text


def test_no_propagated_module_is_unknown():
    whys = explain_collectives(parse_module(_OPTIMIZED), None, parse_mesh("data=8"))
    assert whys["ar"].reason == Reason.UNKNOWN
    assert "no partitioning pass" in whys["ar"].text


@pytest.mark.parametrize("sharding, rank, expected", [
    ("{replicated}", 2, ((), ())),
    ("{devices=[2,1,4]<=[8] last_tile_dim_replicate}", 2, (("data",), ())),
    ("{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}", 2, ((), ("model",))),
    ("{devices=[2,4]<=[8]}", 2, (("data",), ("model",))),
    ("{devices=[8,1]<=[8]}", 2, (("data", "model"), ())),
    # shard_map bodies: a manual subgroup is not a dimension of the tensor
    ("{devices=[2,1,4]<=[8] last_tile_dims={manual}}", 2, (("data",), ())),
])
def test_dim_axes_reads_mesh_axes_per_dimension(sharding, rank, expected):
    # On data=2,model=4 device d sits at (d // 4, d % 4): iota [2,4]<=[8] splits rows over data
    # and columns over model; the transposed iota [4,2]T(1,0) lists devices column-major.
    assert dim_axes(sharding, rank, parse_mesh("data=2,model=4")) == expected


def test_every_why_names_only_mesh_axes_and_known_codes():
    # A mixed program (Megatron MLP): every collective gets one of the six codes, and a text
    # that names a mesh axis in backquotes.
    r = explorer.analyze(megatron_mlp, T("x", (16, 64), "float32", "data,None"),
                         T("w1", (64, 256), "float32", "None,model"),
                         T("w2", (256, 64), "float32", "model,None"), mesh="data=2,model=4")
    for c in r.collectives:
        assert c.why.reason in set(Reason)
        assert set(re.findall(r"over `(\w+)`", c.why.text)) <= {"data", "model"}


def test_the_summary_shows_the_code_and_the_reason_of_each_collective():
    from explorer._src.report.summary import summary

    r = explorer.analyze(megatron_mlp, T("x", (16, 64), "float32", "data,None"),
                         T("w1", (64, 256), "float32", "None,model"),
                         T("w2", (256, 64), "float32", "model,None"), mesh="data=2,model=4")
    text = summary(r)
    [row] = [line for line in text.splitlines() if line.startswith("1 ")]
    assert "all-reduce" in row and "partial-sum" in row
    assert code_of("MEGATRON_DOWN") in row
    assert "Why each collective exists" in text
    assert f"#1 [partial-sum] {r.collectives[0].why.text}" in text


@pytest.mark.slow
def test_combined_data_parallel_gradients_are_one_partial_sum_over_the_batch():
    # transformer_train under dp on data=8: 19 parameter gradients (embed, 8 per block × 2,
    # final_norm, unembed) and the loss's sum over the batch, each a partial sum over `data`,
    # which XLA combines into one all-reduce of 20 parts.
    r = explorer.analyze_workload("transformer_train", "data=8", preset="dp",
                                  params={"scan_layers": False})
    [c] = r.collectives
    assert (c.kind, c.axes, c.parts) == ("all-reduce", ("data",), 20)
    assert c.why.reason == Reason.PARTIAL_SUM
    assert c.why.text.startswith("XLA combined 20 all-reduces into one, each for the same reason")
    assert "the gradient is summed over the batch dimension, sharded over `data`" in c.why.text
    assert "input `tokens`, the batch dimension" in c.why.text


def test_a_gather_done_in_two_steps_is_explained_once_for_both():
    # moe under fsdp_tp on data=2,model=4: the router [128,8] is split over `data` on its embed
    # dimension, which the router matmul contracts against tokens whose embed is not split.
    # XLA gathers it with a collective-permute and then an all-gather over `model`.
    r = explorer.analyze_workload("moe", "data=2,model=4", preset="fsdp_tp")
    line = r.collectives[0].source
    steps = [c for c in r.collectives if c.source == line and c.kind != "all-reduce"]
    assert [c.kind for c in steps] == ["collective-permute", "all-gather"]
    first, last = steps
    assert last.shape == (128, 8)
    assert last.why.reason == first.why.reason == Reason.GATHER_OPERAND
    assert "contracts dimension 0 of input `router` (data,None)" in last.why.text
    assert first.why.text.startswith("Step 1 of 2 of one data movement")


def test_tuple_shardings_split_into_their_elements():
    from explorer._src.hlo.sharding import tuple_parts

    assert tuple_parts("{{devices=[2,1,4,1]<=[8]}, {devices=[2,4,1,1]<=[8]}, "
                       "/*index=2*/{replicated}}") == [
        "{devices=[2,1,4,1]<=[8]}", "{devices=[2,4,1,1]<=[8]}", "{replicated}"]
    assert tuple_parts("{{devices=[2,1]<=[2] last_tile_dims={manual}}, {maximal device=0}}") \
        == ["{devices=[2,1]<=[2] last_tile_dims={manual}}", "{maximal device=0}"]
