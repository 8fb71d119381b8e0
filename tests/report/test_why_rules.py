# ruff: noqa: E501 -- the HLO lines are kept as the compiler prints them
"""Each rule of the why reader on module text: an optimized and a propagated module, small
excerpts of what `explorer.analyze(...)` compiled on data=4 (`Report.optimized_hlo` and
`.propagated_hlo`), with source lines written as `source_file=... source_line=...`.

Every expected reason, axis and sentence is worked out by hand from the shardings in the text:
on data=4, `{devices=[4,1]<=[4]}` splits dimension 0 over `data` (`data,None`) and
`{devices=[1,4]<=[4]}` dimension 1 (`None,data`); `{{0,1,2,3}}` is a group over `data`.
"""

import pytest

from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.hlo.module import parse_module
from explorer._src.report.why import Reason, explain_collectives
from explorer._src.report.why.context import Context
from explorer._src.report.why.rules import RULES
from explorer._src.report.why.rules.explicit import explicit
from explorer._src.report.why.rules.gather import gather, gather_exact
from explorer._src.report.why.rules.indexing import indexing
from explorer._src.report.why.rules.partial_sum import partial_sum
from explorer._src.report.why.rules.reshard import reshard_operand, reshard_result
from explorer._src.report.why.targets import CollectiveToExplain, targets_to_explain
from explorer._src.spec.mesh import parse_mesh

SUM = """
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
"""


def hlo(entry: str, called: str = "") -> str:
    """A module: the computations `entry` calls, then the entry computation of these lines."""
    return f"HloModule m, num_partitions=4\n{called}\nENTRY %main () -> f32[] {{\n{entry}}}\n"


def read(optimized: str, propagated: str, inputs=()) -> Context:
    return Context.of(parse_module(optimized), parse_module(propagated), parse_mesh("data=4"),
                      inputs)


def target(ctx: Context, collective: str) -> CollectiveToExplain:
    [t] = targets_to_explain(ctx, ctx.opt_names[collective])
    return t


# --- partial-sum ------------------------------------------------------------------------------

# x [8,16] split over `data` on its columns times w [16,4] split on its rows: the matmul
# contracts the split dimension, so each device holds a partial [8,4] (the scaling book's
# case 3), and the all-reduce over `data` adds them.
MATMUL_OPT = hlo("""
  %param = f32[8,4]{1,0} parameter(0), sharding={devices=[1,4]<=[4]}, metadata={op_name="x"}
  %param.1 = f32[4,4]{1,0} parameter(1), sharding={devices=[4,1]<=[4]}, metadata={op_name="w"}
  %dot = f32[8,4]{1,0} dot(%param, %param.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(matmul)/dot_general" source_file="model.py" source_line=8}
  ROOT %all-reduce = f32[8,4]{1,0} all-reduce(%dot), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=%sum, metadata={op_name="jit(matmul)/dot_general" source_file="model.py" source_line=8}
""", SUM)
MATMUL_PROP = hlo("""
  %x.0 = f32[8,16]{1,0} parameter(0), sharding={devices=[1,4]<=[4]}, metadata={op_name="x"}
  %w.0 = f32[16,4]{1,0} parameter(1), sharding={devices=[4,1]<=[4]}, metadata={op_name="w"}
  ROOT %dot_general.0 = f32[8,4]{1,0} dot(%x.0, %w.0), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}, metadata={op_name="jit(matmul)/dot_general" source_file="model.py" source_line=8}
""")


def test_a_matmul_contracting_a_dimension_split_in_both_operands_is_a_partial_sum():
    ctx = read(MATMUL_OPT, MATMUL_PROP, ["x", "w"])
    t = target(ctx, "all-reduce")
    assert (t.kind, t.axes, t.dims) == ("all-reduce", ("data",), (8, 4))
    why = partial_sum(ctx, t)
    assert why.reason == Reason.PARTIAL_SUM
    assert why.text == (
        "`dot_general` at line 8 contracts dimension 1 of input `x` with dimension 0 of input "
        "`w`, which is sharded over `data` in both: each device holds a partial sum, and the "
        "all-reduce over `data` adds them.")
    assert why.evidence.sharding_before == "lhs None,data; rhs data,None"
    assert why.evidence.sharding_after == "replicated"
    assert why.evidence.consumer == "%dot_general.0 = f32[8,4] dot(%x.0, %w.0) [jit(matmul)/dot_general]"


def test_a_partial_sum_names_the_one_operand_whose_contracting_dimension_is_split():
    # w replicated: only x's columns are split, so only x is named.
    ctx = read(MATMUL_OPT, MATMUL_PROP.replace(
        'sharding={devices=[4,1]<=[4]}, metadata={op_name="w"}',
        'sharding={replicated}, metadata={op_name="w"}'), ["x", "w"])
    why = partial_sum(ctx, target(ctx, "all-reduce"))
    assert "which is sharded over `data` in input `x`: each device" in why.text
    assert why.evidence.sharding_before == "lhs None,data; rhs replicated"


def test_a_backward_matmul_over_the_split_batch_is_the_gradient_summed_over_the_batch():
    # dw = x^T · dy contracts dimension 0 of both, each a program input's dimension 0 split
    # over `data`: the batch dimension, by the convention of jax models.
    opt = hlo("""
  %param = f32[4,8]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  %param.1 = f32[4,2]{1,0} parameter(1), sharding={devices=[4,1]<=[4]}, metadata={op_name="dy"}
  %dot = f32[8,2]{1,0} dot(%param, %param.1), lhs_contracting_dims={0}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/transpose(jvp(f))/dot_general" source_file="model.py" source_line=5}
  ROOT %all-reduce = f32[8,2]{1,0} all-reduce(%dot), channel_id=1, replica_groups={{0,1,2,3}}, to_apply=%sum, metadata={op_name="jit(f)/transpose(jvp(f))/dot_general" source_file="model.py" source_line=5}
""", SUM)
    prop = hlo("""
  %x.0 = f32[16,8]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  %dy.0 = f32[16,2]{1,0} parameter(1), sharding={devices=[4,1]<=[4]}, metadata={op_name="dy"}
  ROOT %dot.3 = f32[8,2]{1,0} dot(%x.0, %dy.0), lhs_contracting_dims={0}, rhs_contracting_dims={0}, sharding={replicated}, metadata={op_name="jit(f)/transpose(jvp(f))/dot_general" source_file="model.py" source_line=5}
""")
    ctx = read(opt, prop, ["x", "dy"])
    why = partial_sum(ctx, target(ctx, "all-reduce"))
    assert why.reason == Reason.PARTIAL_SUM
    assert why.text == (
        "Backward pass: `dot_general` at line 5 computes a gradient by contracting dimension 0 "
        "of input `x`, the batch dimension; the gradient is summed over the batch dimension, "
        "sharded over `data`, so each device holds the sum over its own part of the batch and "
        "the all-reduce over `data` adds the parts.")


def test_a_max_over_a_split_dimension_is_a_partial_maximum():
    # x [8,4] split on its rows; the max over the rows leaves each device the max of its own.
    maximum = """
%max (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}
"""
    opt = hlo("""
  %param = f32[2,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  %constant = f32[] constant(-inf)
  %reduce = f32[4]{0} reduce(%param, %constant), dimensions={0}, to_apply=%max, metadata={op_name="jit(colmax)/reduce_max" source_file="model.py" source_line=11}
  ROOT %all-reduce = f32[4]{0} all-reduce(%reduce), channel_id=1, replica_groups={{0,1,2,3}}, to_apply=%max, metadata={op_name="jit(colmax)/reduce_max" source_file="model.py" source_line=11}
""", maximum)
    prop = hlo("""
  %x.0 = f32[8,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  %constant.0 = f32[] constant(-inf)
  ROOT %reduce_max.6 = f32[4]{0} reduce(%x.0, %constant.0), dimensions={0}, to_apply=%max, sharding={replicated}, metadata={op_name="jit(colmax)/reduce_max" source_file="model.py" source_line=11}
""", maximum)
    ctx = read(opt, prop, ["x"])
    why = partial_sum(ctx, target(ctx, "all-reduce"))
    assert why.reason == Reason.PARTIAL_SUM
    assert why.text == (
        "`reduce_max` at line 11 takes the maximum over dimension 0 of input `x`, sharded over "
        "`data`: each device holds a partial maximum, and the all-reduce over `data` combines "
        "them.")
    assert (why.evidence.sharding_before, why.evidence.sharding_after) == ("data,None",
                                                                           "replicated")


def test_a_matmul_that_contracts_no_split_dimension_is_no_partial_sum():
    ctx = read(MATMUL_OPT, MATMUL_PROP.replace("{devices=[1,4]<=[4]}", "{replicated}")
               .replace("{devices=[4,1]<=[4]}", "{replicated}"), ["x", "w"])
    assert partial_sum(ctx, target(ctx, "all-reduce")) is None


# --- gather-operand ---------------------------------------------------------------------------

# FSDP: w [16,4] is split over `data` on its rows, which the matmul contracts against x, whose
# columns are whole: w is gathered whole (the scaling book's case 4).
FSDP_OPT = hlo("""
  %param = f32[2,16]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  %param.1 = f32[4,4]{1,0} parameter(1), sharding={devices=[4,1]<=[4]}, metadata={op_name="w"}
  %all-gather = f32[16,4]{1,0} all-gather(%param.1), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true, metadata={op_name="jit(fsdp)/dot_general" source_file="model.py" source_line=14}
  ROOT %dot = f32[2,4]{1,0} dot(%param, %all-gather), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(fsdp)/dot_general" source_file="model.py" source_line=14}
""")
FSDP_PROP = hlo("""
  %x.0 = f32[8,16]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  %w.0 = f32[16,4]{1,0} parameter(1), sharding={devices=[4,1]<=[4]}, metadata={op_name="w"}
  ROOT %dot_general.0 = f32[8,4]{1,0} dot(%x.0, %w.0), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={devices=[4,1]<=[4]}, metadata={op_name="jit(fsdp)/dot_general" source_file="model.py" source_line=14}
""")
FSDP_WHY = (
    "`dot_general` at line 14 contracts dimension 0 of input `w` (data,None), sharded over "
    "`data`, while input `x` is not split there: input `w` must be whole along it; the "
    "all-gather over `data` gathers it along dimension 0 before use.")


def test_a_weight_split_on_its_contracting_dimension_is_gathered_before_the_matmul():
    ctx = read(FSDP_OPT, FSDP_PROP, ["x", "w"])
    t = target(ctx, "all-gather")
    assert (t.kind, t.axes, t.dims, t.gather_dim) == ("all-gather", ("data",), (16, 4), 0)
    why = gather_exact(ctx, t)
    assert why.reason == Reason.GATHER_OPERAND
    assert why.text == FSDP_WHY
    assert why.evidence.producer == "%w.0 = f32[16,4] parameter(1) [w]"
    assert (why.evidence.sharding_before, why.evidence.sharding_after) == ("data,None",
                                                                           "replicated")


def test_an_operand_reshaped_on_its_way_is_gathered_only_by_the_lenient_rule():
    # XLA flattened w before the gather: the result [64] is w's 16·4 elements, not its shape.
    opt = FSDP_OPT.replace(
        "%all-gather = f32[16,4]{1,0} all-gather(%param.1)",
        "%flat = f32[16]{0} bitcast(%param.1)\n  %all-gather = f32[64]{0} all-gather(%flat)")
    ctx = read(opt, FSDP_PROP, ["x", "w"])
    t = target(ctx, "all-gather")
    assert gather_exact(ctx, t) is None
    assert gather(ctx, t).text == FSDP_WHY


def test_a_gather_for_an_element_wise_op_is_the_tensor_changing_layout():
    # negate(x) is replicated while x is split on its rows: the op needs nothing of x's
    # layout, so it is x itself that changes layout, with no constraint asking: a conflict.
    opt = hlo("""
  %param = f32[2,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  %all-gather = f32[8,4]{1,0} all-gather(%param), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true, metadata={op_name="jit(f)/neg" source_file="model.py" source_line=3}
  ROOT %neg = f32[8,4]{1,0} negate(%all-gather), metadata={op_name="jit(f)/neg" source_file="model.py" source_line=3}
""")
    prop = hlo("""
  %x.0 = f32[8,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  ROOT %neg.0 = f32[8,4]{1,0} negate(%x.0), sharding={replicated}, metadata={op_name="jit(f)/neg" source_file="model.py" source_line=3}
""")
    ctx = read(opt, prop, ["x"])
    why = gather_exact(ctx, target(ctx, "all-gather"))
    assert why.reason == Reason.RESHARD
    assert why.text == (
        "The layout of input `x` changes from data,None to replicated for `neg` at line 3, "
        "where propagation gave it a different layout from its operand (a conflict between "
        "the layouts around it); the all-gather over `data` gathers dimension 0.")


# --- reshard ----------------------------------------------------------------------------------

def test_a_constraint_that_moves_the_split_dimension_reshards_its_producer():
    # x * 2 is constrained to `None,data` at line 4; propagation gives `mul` that layout while
    # x is `data,None`: the all-to-all moves x's rows to columns.
    opt = hlo("""
  %param = f32[2,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  %all-to-all = f32[8,1]{1,0} all-to-all(%param), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={1}, metadata={op_name="jit(transposed)/mul" source_file="model.py" source_line=3}
  ROOT %mul = f32[8,1]{1,0} multiply(%all-to-all, %all-to-all), metadata={op_name="jit(transposed)/mul" source_file="model.py" source_line=3}
""")
    prop = hlo("""
  %x.0 = f32[8,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  %constant.0 = f32[] constant(2)
  %mul.0 = f32[8,4]{1,0} broadcast(%constant.0), dimensions={}, sharding={devices=[1,4]<=[4]}, metadata={op_name="jit(transposed)/mul" source_file="model.py" source_line=3}
  %mul.1 = f32[8,4]{1,0} multiply(%x.0, %mul.0), sharding={devices=[1,4]<=[4]}, metadata={op_name="jit(transposed)/mul" source_file="model.py" source_line=3}
  ROOT %sharding_constraint.0 = f32[8,4]{1,0} copy(%mul.1), sharding={devices=[1,4]<=[4]}, metadata={op_name="jit(transposed)/hidden/sharding_constraint" source_file="model.py" source_line=4}
""")
    ctx = read(opt, prop, ["x"])
    t = target(ctx, "all-to-all")
    # Both `mul` ops share op_name and line; the one that uses the moved input x ranks first.
    assert [a.name for a in t.ranked] == ["mul.1", "mul.0"]
    why = reshard_operand(ctx, t)
    assert why.reason == Reason.RESHARD
    assert why.text == (
        "The layout of input `x` changes from data,None to None,data for `mul` at line 3, as "
        "the sharding constraint `hidden` at line 4 asks (propagated back to it); the "
        "all-to-all over `data` moves the data.")
    assert (why.evidence.sharding_before, why.evidence.sharding_after) == ("data,None",
                                                                           "None,data")


def test_a_result_its_user_needs_laid_out_otherwise_is_resharded_after_it():
    # neg(a) keeps a's rows split; the transpose of it is split on its rows too, which are
    # neg's columns: the transpose needs neg as `None,data`.
    opt = hlo("""
  %param = f32[2,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="a"}
  %neg = f32[2,4]{1,0} negate(%param), metadata={op_name="jit(f)/neg" source_file="model.py" source_line=3}
  %all-to-all = f32[8,1]{1,0} all-to-all(%neg), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, metadata={op_name="jit(f)/neg" source_file="model.py" source_line=3}
  ROOT %transpose = f32[1,8]{1,0} transpose(%all-to-all), dimensions={1,0}, metadata={op_name="jit(f)/transpose" source_file="model.py" source_line=4}
""")
    prop = hlo("""
  %a.0 = f32[8,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="a"}
  %neg.0 = f32[8,4]{1,0} negate(%a.0), sharding={devices=[4,1]<=[4]}, metadata={op_name="jit(f)/neg" source_file="model.py" source_line=3}
  ROOT %transpose.0 = f32[4,8]{1,0} transpose(%neg.0), dimensions={1,0}, sharding={devices=[4,1]<=[4]}, metadata={op_name="jit(f)/transpose" source_file="model.py" source_line=4}
""")
    ctx = read(opt, prop, ["a"])
    t = target(ctx, "all-to-all")
    assert reshard_operand(ctx, t) is None        # neg needs a as a is: data,None
    why = reshard_result(ctx, t)
    assert why.reason == Reason.RESHARD
    assert why.text == (
        "The result of `neg` at line 3 is laid out as data,None, but `transpose` at line 4 "
        "needs it as None,data; the all-to-all over `data` moves it.")
    assert why.evidence.consumer.startswith("%transpose.0 = f32[4,8] transpose(%neg.0)")


# --- indexing ---------------------------------------------------------------------------------

def test_a_lookup_into_split_rows_is_indexing_combined_by_the_all_reduce():
    opt = hlo("""
  %param.1 = f32[2,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="table"}
  %param = s32[2,1]{1,0} parameter(1), sharding={replicated}, metadata={op_name="idx"}
  %select = f32[2,4]{1,0} fusion(%param.1, %param), kind=kLoop, calls=%fused, metadata={op_name="jit(lookup)/jit(_take)/gather" source_file="model.py" source_line=21}
  ROOT %all-reduce = f32[2,4]{1,0} all-reduce(%select), channel_id=2, replica_groups={{0,1,2,3}}, to_apply=%sum, metadata={op_name="jit(lookup)/jit(_take)/gather" source_file="model.py" source_line=21}
""", SUM)
    prop = hlo("""
  %table.0 = f32[8,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="table"}
  %idx.0 = s32[2,1]{1,0} parameter(1), sharding={replicated}, metadata={op_name="idx"}
  ROOT %gather.2 = f32[2,4]{1,0} gather(%table.0, %idx.0), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}, sharding={replicated}, metadata={op_name="jit(lookup)/jit(_take)/gather" source_file="model.py" source_line=21}
""")
    ctx = read(opt, prop, ["table", "idx"])
    why = indexing(ctx, target(ctx, "all-reduce"))
    assert why.reason == Reason.INDEXING
    assert why.text == (
        "`gather` at line 21 indexes dimension 0 of input `table`, which is sharded over "
        "`data`: each device handles the indices that fall in its own part and the all-reduce "
        "over `data` combines the parts.")


def test_a_dynamic_slice_of_split_rows_gathers_them_first():
    # A [2,4] window of x's 8 rows, split over `data`: dimension 0 is the one indexed.
    opt = hlo("""
  %param = f32[2,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  ROOT %all-gather = f32[8,4]{1,0} all-gather(%param), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, metadata={op_name="jit(f)/dynamic_slice" source_file="model.py" source_line=6}
""")
    prop = hlo("""
  %x.0 = f32[8,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  %i.0 = s32[] parameter(1), sharding={replicated}, metadata={op_name="i"}
  %zero = s32[] constant(0)
  ROOT %dynamic_slice.0 = f32[2,4]{1,0} dynamic-slice(%x.0, %i.0, %zero), dynamic_slice_sizes={2,4}, sharding={replicated}, metadata={op_name="jit(f)/dynamic_slice" source_file="model.py" source_line=6}
""")
    ctx = read(opt, prop, ["x", "i"])
    why = indexing(ctx, target(ctx, "all-gather"))
    assert why.reason == Reason.INDEXING
    assert why.text == (
        "`dynamic_slice` at line 6 indexes dimension 0 of input `x`, which is sharded over "
        "`data`: the all-gather over `data` brings the indexed dimension together first.")


def test_a_matmul_is_no_indexing():
    ctx = read(MATMUL_OPT, MATMUL_PROP, ["x", "w"])
    assert indexing(ctx, target(ctx, "all-reduce")) is None


# --- explicit ---------------------------------------------------------------------------------

# jax.lax.psum(a, "data") in a shard_map body: the propagated body has the all-reduce itself,
# under the op_name without the outer path.
PSUM_OPT = hlo("""
  %param.1 = f32[2,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  ROOT %psum_invariant.7 = f32[2,4]{1,0} all-reduce(%param.1), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=%sum, metadata={op_name="jit(summed)/shard_map/psum_invariant" source_file="model.py" source_line=24}
""", SUM)
PSUM_PROP = hlo("""
  %x.0 = f32[8,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  %shard_map.8 = f32[2,4]{1,0} custom-call(%x.0), custom_call_target="SPMDFullToShardShape", sharding={manual}, metadata={op_name="jit(summed)/shard_map" source_file="model.py" source_line=26}
  ROOT %shard_map.9 = f32[2,4]{1,0} call(%shard_map.8), to_apply=%body, sharding={manual}, metadata={op_name="jit(summed)/shard_map" source_file="model.py" source_line=26}
""", SUM + """
%body (shard_map.3: f32[2,4]) -> f32[2,4] {
  %shard_map.3 = f32[2,4]{1,0} parameter(0), sharding={manual}, metadata={op_name="shard_map"}
  ROOT %psum_invariant.4 = f32[2,4]{1,0} all-reduce(%shard_map.3), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=%sum, sharding={manual}, metadata={op_name="psum_invariant" source_file="model.py" source_line=24}
}
""")


def test_a_psum_in_a_shard_map_is_explicit_under_the_name_the_program_calls():
    ctx = read(PSUM_OPT, PSUM_PROP, ["x"])
    t = target(ctx, "psum_invariant.7")
    assert [a.name for a in t.anchors] == ["psum_invariant.4"]
    why = explicit(ctx, t)
    assert why.reason == Reason.EXPLICIT
    assert why.text == ("The program asked for it: `psum` at line 24 inside a shard_map is an "
                        "all-reduce over `data`.")
    assert why.evidence.consumer == (
        "%psum_invariant.4 = f32[2,4] all-reduce(%shard_map.3) [psum_invariant]")


def test_a_collective_already_in_the_propagated_module_is_explicit_whatever_its_primitive():
    opt = hlo("""
  %param = f32[2,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  ROOT %all-reduce = f32[2,4]{1,0} all-reduce(%param), channel_id=1, replica_groups={{0,1,2,3}}, to_apply=%sum, metadata={op_name="jit(f)/my_reduce" source_file="model.py" source_line=7}
""", SUM)
    prop = hlo("""
  %x.0 = f32[8,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  ROOT %my_reduce.0 = f32[8,4]{1,0} all-reduce(%x.0), channel_id=1, replica_groups={{0,1,2,3}}, to_apply=%sum, sharding={devices=[4,1]<=[4]}, metadata={op_name="jit(f)/my_reduce" source_file="model.py" source_line=7}
""", SUM)
    ctx = read(opt, prop, ["x"])
    why = explicit(ctx, target(ctx, "all-reduce"))
    assert why.text == ("The program asked for it: `my_reduce` at line 7 in the program is an "
                        "all-reduce over `data`.")


def test_a_matmul_is_not_explicit():
    ctx = read(MATMUL_OPT, MATMUL_PROP, ["x", "w"])
    assert explicit(ctx, target(ctx, "all-reduce")) is None


# --- the table and the driver -----------------------------------------------------------------

def test_every_collective_kind_has_rules_to_try():
    assert set(RULES) == set(CollectiveKind)
    assert all(RULES[k] for k in CollectiveKind)


def test_when_no_rule_fits_the_collective_is_unknown_and_names_its_instruction(monkeypatch):
    monkeypatch.setitem(RULES, CollectiveKind.ALL_REDUCE, ())
    whys = explain_collectives(parse_module(MATMUL_OPT), parse_module(MATMUL_PROP),
                               parse_mesh("data=4"), ["x", "w"])
    assert whys["all-reduce"].reason == Reason.UNKNOWN
    assert whys["all-reduce"].text == (
        "No reason found: `dot_general` at line 8 (dot) shows no layout over `data` that "
        "explains an all-reduce.")


def _broken(ctx, t):
    raise RuntimeError("a rule that crashed")


def test_strict_mode_raises_a_rule_s_exception(monkeypatch):
    monkeypatch.setitem(RULES, CollectiveKind.ALL_REDUCE, (_broken,))
    monkeypatch.setenv("EXPLORER_STRICT", "1")
    with pytest.raises(RuntimeError, match="a rule that crashed"):
        explain_collectives(parse_module(MATMUL_OPT), parse_module(MATMUL_PROP),
                            parse_mesh("data=4"), ["x", "w"])


def test_outside_strict_mode_a_rule_s_exception_is_an_unknown_that_names_it(monkeypatch):
    monkeypatch.setitem(RULES, CollectiveKind.ALL_REDUCE, (_broken,))
    monkeypatch.setenv("EXPLORER_STRICT", "0")
    whys = explain_collectives(parse_module(MATMUL_OPT), parse_module(MATMUL_PROP),
                               parse_mesh("data=4"), ["x", "w"])
    assert whys["all-reduce"].reason == Reason.UNKNOWN
    assert whys["all-reduce"].text == ("No reason found: the reader could not follow this "
                                       "all-reduce (RuntimeError: a rule that crashed).")


def test_an_explicit_collective_is_answered_before_the_layout_rules(monkeypatch):
    monkeypatch.setitem(RULES, CollectiveKind.ALL_REDUCE, (_broken,))
    whys = explain_collectives(parse_module(PSUM_OPT), parse_module(PSUM_PROP),
                               parse_mesh("data=4"), ["x"])
    assert whys["psum_invariant.7"].reason == Reason.EXPLICIT
