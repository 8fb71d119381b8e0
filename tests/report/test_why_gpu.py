# ruff: noqa: E501 -- the HLO lines are kept as the compiler prints them
"""The why reader on GPU programs, whose collectives XLA's GPU pipeline combines: one
all-reduce of a concatenation that names nothing (`scheduling_name` only), tuple
reduce-scatters that name nothing, and tuple all-gathers whose op_name lists each part's.

The module excerpts are trimmed from what `explorer.analyze(..., target="h100-8")` compiled
(`Report.optimized_hlo` and `.propagated_hlo`), shrunk to data=4 and written with
`source_file=... source_line=...`; every expected reason and sentence is worked out by hand
from the shardings in the text: `{devices=[4,1]<=[4]}` splits dimension 0 over `data`
(`data,None`), `{devices=[4]<=[4]}` a vector, and a group of all 4 devices is one over `data`.
"""

import jax
import jax.numpy as jnp
import pytest

import explorer
from explorer import TensorSpec as T
from explorer._src.compile.gpu import gpu_plugin_installed
from explorer._src.hlo.module import parse_module
from explorer._src.report.why import Reason, explain_collectives
from explorer._src.report.why.context import Context
from explorer._src.report.why.targets import targets_to_explain
from explorer._src.spec.mesh import parse_mesh

ADD = """
%add.clone (x.3: bf16[], y.1: bf16[]) -> bf16[] {
  %x.3 = bf16[] parameter(0), metadata={scheduling_name="x.3"}
  %y.1 = bf16[] parameter(1), metadata={scheduling_name="y.1"}
  ROOT %add.5.0 = bf16[] add(%x.3, %y.1), metadata={scheduling_name="add.5.0"}
}
"""
PROP_ADD = """
%add (a: bf16[], b: bf16[]) -> bf16[] {
  %a = bf16[] parameter(0)
  %b = bf16[] parameter(1)
  ROOT %s = bf16[] add(%a, %b)
}
"""


def hlo(entry: str, called: str = "") -> str:
    """A module: the computations `entry` calls, then the entry computation of these lines."""
    return f"HloModule m, num_partitions=4\n{called}\nENTRY %main.0_spmd () -> f32[] {{\n{entry}}}\n"


def read(optimized: str, propagated: str, inputs) -> Context:
    return Context.of(parse_module(optimized), parse_module(propagated), parse_mesh("data=4"),
                      inputs)


def why_of(optimized: str, propagated: str, inputs, collective: str):
    return explain_collectives(parse_module(optimized), parse_module(propagated),
                               parse_mesh("data=4"), inputs)[collective]


def batch_sum(line: int, verb: str, dim_of: str, kind: str) -> str:
    """The sentence of a backward-pass reduction over the split batch (rules/partial_sum.py)."""
    return (f"Backward pass: `{verb[0]}` at line {line} computes a gradient by {verb[1]} "
            f"dimension 0 of input `{dim_of}`, the batch dimension; the gradient is summed over "
            f"the batch dimension, sharded over `data`, so each device holds the sum over its own "
            f"part of the batch and the {kind} over `data` adds the parts.")


# --- the all-reduce combiner: one all-reduce of a concatenation, named nowhere ---------------

# Data parallelism: x [16,8] split over `data` on its rows (the batch), the two gradients
# dw = x^T·dy (line 5) and dv = x^T·dz (line 6) contract the split batch, so each device holds
# a partial sum of each. XLA's GPU pipeline flattens both ([8,2] -> 16, [8,4] -> 32),
# concatenates them into one all-reduce of 48 elements whose metadata names nothing, and
# slices the result back; only the gemm fusions that computed the gradients carry op_names.
COMBINED_OPT = hlo("""
  %param = bf16[4,8]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x" scheduling_name="param"}
  %param.1 = bf16[4,2]{1,0} parameter(1), sharding={devices=[4,1]<=[4]}, metadata={op_name="dy" scheduling_name="param.1"}
  %param.2 = bf16[4,4]{1,0} parameter(2), sharding={devices=[4,1]<=[4]}, metadata={op_name="dz" scheduling_name="param.2"}
  %gemm_fusion_dot.5 = bf16[8,2]{1,0} fusion(%param, %param.1), kind=kCustom, calls=%gemm_fusion_dot.5_computation, metadata={op_name="jit(step)/transpose(jvp())/transpose" scheduling_name="gemm_fusion_dot.5" source_file="model.py" source_line=5}
  %gemm_fusion_dot.6 = bf16[8,4]{1,0} fusion(%param, %param.2), kind=kCustom, calls=%gemm_fusion_dot.6_computation, metadata={op_name="jit(step)/transpose(jvp())/transpose" scheduling_name="gemm_fusion_dot.6" source_file="model.py" source_line=6}
  %bitcast.10 = bf16[16]{0} bitcast(%gemm_fusion_dot.5), metadata={scheduling_name="bitcast.10"}
  %bitcast.11 = bf16[32]{0} bitcast(%gemm_fusion_dot.6), metadata={scheduling_name="bitcast.11"}
  %wrapped_concatenate = bf16[48]{0} fusion(%bitcast.10, %bitcast.11), kind=kLoop, calls=%wrapped_concatenate_computation, metadata={scheduling_name="wrapped_concatenate"}
  %all-reduce-start = bf16[48]{0} all-reduce-start(%wrapped_concatenate), channel_id=1, replica_groups=mesh['axis_0'=4,'axis_1'=1] {'axis_0'}, use_global_device_ids=true, to_apply=%add.clone, metadata={scheduling_name="all-reduce-start"}
  %all-reduce-done = bf16[48]{0} all-reduce-done(%all-reduce-start), metadata={scheduling_name="all-reduce-done"}
  %wrapped_slice = bf16[16]{0} fusion(%all-reduce-done), kind=kLoop, calls=%wrapped_slice_computation, metadata={scheduling_name="wrapped_slice"}
  %wrapped_slice.1 = bf16[32]{0} fusion(%all-reduce-done), kind=kLoop, calls=%wrapped_slice_computation.1, metadata={scheduling_name="wrapped_slice.1"}
  %bitcast.12 = bf16[8,2]{1,0} bitcast(%wrapped_slice), metadata={op_name="jit(step)/transpose(jvp())/transpose" scheduling_name="bitcast.12"}
  %bitcast.13 = bf16[8,4]{1,0} bitcast(%wrapped_slice.1), metadata={op_name="jit(step)/transpose(jvp())/transpose" scheduling_name="bitcast.13"}
  ROOT %tuple.2.0 = (bf16[8,2]{1,0}, bf16[8,4]{1,0}) tuple(%bitcast.12, %bitcast.13), metadata={scheduling_name="tuple.2.0"}
""", ADD + """
%wrapped_concatenate_computation (param_0.63: bf16[16], param_1.77: bf16[32]) -> bf16[48] {
  %param_0.63 = bf16[16]{0} parameter(0), metadata={scheduling_name="param_0.63"}
  %param_1.77 = bf16[32]{0} parameter(1), metadata={scheduling_name="param_1.77"}
  ROOT %concatenate.1 = bf16[48]{0} concatenate(%param_0.63, %param_1.77), dimensions={0}, metadata={scheduling_name="concatenate.1"}
}

%wrapped_slice_computation (param_0.64: bf16[48]) -> bf16[16] {
  %param_0.64 = bf16[48]{0} parameter(0), metadata={scheduling_name="param_0.64"}
  ROOT %slice.2 = bf16[16]{0} slice(%param_0.64), slice={[0:16]}, metadata={scheduling_name="slice.2"}
}

%wrapped_slice_computation.1 (param_0.65: bf16[48]) -> bf16[32] {
  %param_0.65 = bf16[48]{0} parameter(0), metadata={scheduling_name="param_0.65"}
  ROOT %slice.3 = bf16[32]{0} slice(%param_0.65), slice={[16:48]}, metadata={scheduling_name="slice.3"}
}
""")
COMBINED_PROP = hlo("""
  %x.0 = bf16[16,8]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  %dy.0 = bf16[16,2]{1,0} parameter(1), sharding={devices=[4,1]<=[4]}, metadata={op_name="dy"}
  %dz.0 = bf16[16,4]{1,0} parameter(2), sharding={devices=[4,1]<=[4]}, metadata={op_name="dz"}
  %transpose.0 = bf16[8,2]{1,0} dot(%x.0, %dy.0), lhs_contracting_dims={0}, rhs_contracting_dims={0}, sharding={replicated}, metadata={op_name="jit(step)/transpose(jvp())/transpose" source_file="model.py" source_line=5}
  %transpose.1 = bf16[8,4]{1,0} dot(%x.0, %dz.0), lhs_contracting_dims={0}, rhs_contracting_dims={0}, sharding={replicated}, metadata={op_name="jit(step)/transpose(jvp())/transpose" source_file="model.py" source_line=6}
  ROOT %tuple.0 = (bf16[8,2]{1,0}, bf16[8,4]{1,0}) tuple(%transpose.0, %transpose.1), sharding={{replicated}, {replicated}}
""")


def test_each_piece_of_a_concatenated_all_reduce_is_named_by_the_gemm_that_computed_it():
    ctx = read(COMBINED_OPT, COMBINED_PROP, ["x", "dy", "dz"])
    parts = targets_to_explain(ctx, ctx.opt_names["all-reduce-start"])
    # The pieces in concatenation order, in the gradients' own shapes (not the flat 16 and
    # 32), under the op_name and line of the gemm behind each bitcast.
    assert [(t.operand.name, t.dims, t.location) for t in parts] == [
        ("bitcast.10", (8, 2), ("model.py", 5)), ("bitcast.11", (8, 4), ("model.py", 6))]
    assert {t.op_name for t in parts} == {"jit(step)/transpose(jvp())/transpose"}
    assert [[a.name for a in t.anchors] for t in parts] == [["transpose.0"], ["transpose.1"]]
    assert [t.axes for t in parts] == [("data",), ("data",)]


def test_a_concatenated_gradient_all_reduce_is_a_partial_sum_over_the_batch():
    why = why_of(COMBINED_OPT, COMBINED_PROP, ["x", "dy", "dz"], "all-reduce-start")
    assert why.reason == Reason.PARTIAL_SUM
    # Both gradients contract dimension 0 of x with dimension 0 of dy (dz): each traces to a
    # program input's dimension 0 and the two share none, so the first, x, is named.
    assert why.text == ("XLA combined 2 all-reduces into one, each for the same reason; the "
                        "first: " + batch_sum(5, ("transpose", "contracting"), "x", "all-reduce"))
    assert why.evidence.consumer == (
        "%transpose.0 = bf16[8,2] dot(%x.0, %dy.0) [jit(step)/transpose(jvp())/transpose]")
    assert why.evidence.sharding_before == "lhs data,None; rhs data,None"


def test_a_collective_that_names_nothing_and_has_no_producer_is_still_unknown():
    # The same all-reduce with the gemms' metadata gone: nothing says what the pieces are
    # (the bitcasts after the slices name what uses the sums, not what computed them), and
    # each part, like the whole, says so rather than guess.
    opt = COMBINED_OPT.replace('op_name="jit(step)/transpose(jvp())/transpose" scheduling_name="gemm', 'scheduling_name="gemm')
    why = why_of(opt, COMBINED_PROP, ["x", "dy", "dz"], "all-reduce-start")
    assert why.reason == Reason.UNKNOWN
    assert why.text == ("No reason found: the all-reduce's metadata (op_name '') matches no "
                        "instruction of the propagated module.")


# --- a tuple reduce-scatter that names nothing -----------------------------------------------

# FSDP gradients: db = sum of dy [16,8] over its split rows (line 7) and dw = dy^T·h
# (line 5) over the split batch, each scattered over `data` ([8] -> [2], [8,2] -> [2,2]) by
# one tuple reduce-scatter with no op_name. db is element 0 of a multi-output fusion that
# XLA named after its other element (a negate, line 8), and its tuple element carries no
# metadata (trimmed), so only the fused root's own element names it.
SCATTER_OPT = hlo("""
  %param = bf16[4,8]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="dy"}
  %param.1 = bf16[4,2]{1,0} parameter(1), sharding={devices=[4,1]<=[4]}, metadata={op_name="h"}
  %input_reduce_fusion = (bf16[8]{0}, bf16[4,8]{1,0}) fusion(%param), kind=kInput, calls=%fused_reduce, metadata={op_name="jit(step)/transpose(jvp())/neg" source_file="model.py" source_line=8}
  %get-tuple-element.648 = bf16[8]{0} get-tuple-element(%input_reduce_fusion), index=0
  %get-tuple-element.649 = bf16[4,8]{1,0} get-tuple-element(%input_reduce_fusion), index=1
  %gemm_fusion_dot.9 = bf16[8,2]{1,0} fusion(%param, %param.1), kind=kCustom, calls=%gemm_fusion_dot.9_computation, metadata={op_name="jit(step)/transpose(jvp())/transpose" source_file="model.py" source_line=5}
  %reduce-scatter-start = ((bf16[8]{0}, bf16[8,2]{1,0}), (bf16[2]{0}, bf16[2,2]{1,0})) reduce-scatter-start(%get-tuple-element.648, %gemm_fusion_dot.9), channel_id=2, replica_groups={{0,1,2,3}}, use_global_device_ids=true, dimensions={0}, to_apply=%add.clone, metadata={scheduling_name="reduce-scatter-start"}
  %reduce-scatter-done = (bf16[2]{0}, bf16[2,2]{1,0}) reduce-scatter-done(%reduce-scatter-start), metadata={scheduling_name="reduce-scatter-done"}
  %get-tuple-element.1 = bf16[2]{0} get-tuple-element(%reduce-scatter-done), index=0
  %get-tuple-element.2 = bf16[2,2]{1,0} get-tuple-element(%reduce-scatter-done), index=1
  ROOT %tuple = (bf16[2]{0}, bf16[2,2]{1,0}, bf16[4,8]{1,0}) tuple(%get-tuple-element.1, %get-tuple-element.2, %get-tuple-element.649)
""", ADD + """
%fused_reduce (param_0.1: bf16[4,8]) -> (bf16[8], bf16[4,8]) {
  %param_0.1 = bf16[4,8]{1,0} parameter(0)
  %constant_1 = bf16[] constant(0)
  %reduce.8 = bf16[8]{0} reduce(%param_0.1, %constant_1), dimensions={0}, to_apply=%add.clone, metadata={op_name="jit(step)/transpose(jvp())/reduce_sum" source_file="model.py" source_line=7}
  %negate.1 = bf16[4,8]{1,0} negate(%param_0.1), metadata={op_name="jit(step)/transpose(jvp())/neg" source_file="model.py" source_line=8}
  ROOT %tuple.26 = (bf16[8]{0}, bf16[4,8]{1,0}) tuple(%reduce.8, %negate.1)
}
""")
SCATTER_PROP = hlo("""
  %dy.0 = bf16[16,8]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="dy"}
  %h.0 = bf16[16,2]{1,0} parameter(1), sharding={devices=[4,1]<=[4]}, metadata={op_name="h"}
  %constant.0 = bf16[] constant(0)
  %reduce_sum.0 = bf16[8]{0} reduce(%dy.0, %constant.0), dimensions={0}, to_apply=%add, sharding={devices=[4]<=[4]}, metadata={op_name="jit(step)/transpose(jvp())/reduce_sum" source_file="model.py" source_line=7}
  %transpose.0 = bf16[8,2]{1,0} dot(%dy.0, %h.0), lhs_contracting_dims={0}, rhs_contracting_dims={0}, sharding={devices=[4,1]<=[4]}, metadata={op_name="jit(step)/transpose(jvp())/transpose" source_file="model.py" source_line=5}
  %neg.0 = bf16[16,8]{1,0} negate(%dy.0), sharding={devices=[4,1]<=[4]}, metadata={op_name="jit(step)/transpose(jvp())/neg" source_file="model.py" source_line=8}
  ROOT %tuple.0 = (bf16[8]{0}, bf16[8,2]{1,0}, bf16[16,8]{1,0}) tuple(%reduce_sum.0, %transpose.0, %neg.0), sharding={{devices=[4]<=[4]}, {devices=[4,1]<=[4]}, {devices=[4,1]<=[4]}}
""", PROP_ADD)


def test_a_tuple_element_of_a_fusion_is_named_by_the_fused_instruction_that_made_it():
    ctx = read(SCATTER_OPT, SCATTER_PROP, ["dy", "h"])
    parts = targets_to_explain(ctx, ctx.opt_names["reduce-scatter-start"])
    # Not the fusion's own name (the negate, element 1): element 0 is the reduce.
    assert [(t.op_name, t.location, t.dims) for t in parts] == [
        ("jit(step)/transpose(jvp())/reduce_sum", ("model.py", 7), (2,)),
        ("jit(step)/transpose(jvp())/transpose", ("model.py", 5), (2, 2))]
    assert [[a.name for a in t.anchors] for t in parts] == [["reduce_sum.0"], ["transpose.0"]]


def test_a_combined_gradient_reduce_scatter_that_names_nothing_is_a_partial_sum():
    why = why_of(SCATTER_OPT, SCATTER_PROP, ["dy", "h"], "reduce-scatter-start")
    assert why.reason == Reason.PARTIAL_SUM
    # db sums dimension 0 of dy, split over `data`: the batch, as it traces to dy's dim 0.
    assert why.text == ("XLA combined 2 reduce-scatters into one, each for the same reason; "
                        "the first: " + batch_sum(7, ("reduce_sum", "summing"), "dy",
                                                  "reduce-scatter"))
    assert (why.evidence.sharding_before, why.evidence.sharding_after) == ("data,None", "data")


# --- a tuple all-gather whose op_name lists each part's ------------------------------------

# FSDP weights: w, v and u [16,4], each split over `data` on its rows, which the matmuls
# x·w (line 14), x·v (line 15) and x·u (line 16) contract against x's whole columns: each is
# gathered whole (the scaling book's case 4), here by one tuple all-gather. Its op_name lists
# the three dots' op_names in operand order; each operand is a parameter, whose op_name is
# the input's name and points at the propagated parameter, not at the dot that needs it.
GATHER_OPT = hlo("""
  %param = bf16[2,16]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  %param.1 = bf16[4,4]{1,0} parameter(1), sharding={devices=[4,1]<=[4]}, metadata={op_name="w"}
  %param.2 = bf16[4,4]{1,0} parameter(2), sharding={devices=[4,1]<=[4]}, metadata={op_name="v"}
  %param.3 = bf16[4,4]{1,0} parameter(3), sharding={devices=[4,1]<=[4]}, metadata={op_name="u"}
  %all-gather-start = ((bf16[4,4]{1,0}, bf16[4,4]{1,0}, bf16[4,4]{1,0}), (bf16[16,4]{1,0}, bf16[16,4]{1,0}, bf16[16,4]{1,0})) all-gather-start(%param.1, %param.2, %param.3), channel_id=3, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true, metadata={op_name="jit(fsdp)/(bd,df->bf/dot_general:bd,dg->bg/dot_general:bd,dh->bh/dot_general)" source_file="model.py" source_line=14}
  %all-gather-done = (bf16[16,4]{1,0}, bf16[16,4]{1,0}, bf16[16,4]{1,0}) all-gather-done(%all-gather-start)
  %get-tuple-element.1 = bf16[16,4]{1,0} get-tuple-element(%all-gather-done), index=0
  %get-tuple-element.2 = bf16[16,4]{1,0} get-tuple-element(%all-gather-done), index=1
  %get-tuple-element.3 = bf16[16,4]{1,0} get-tuple-element(%all-gather-done), index=2
  %gemm_fusion_dot.1 = bf16[2,4]{1,0} fusion(%param, %get-tuple-element.1), kind=kCustom, calls=%gemm_fusion_dot.1_computation, metadata={op_name="jit(fsdp)/bd,df->bf/dot_general" source_file="model.py" source_line=14}
  %gemm_fusion_dot.2 = bf16[2,4]{1,0} fusion(%param, %get-tuple-element.2), kind=kCustom, calls=%gemm_fusion_dot.2_computation, metadata={op_name="jit(fsdp)/bd,dg->bg/dot_general" source_file="model.py" source_line=15}
  %gemm_fusion_dot.3 = bf16[2,4]{1,0} fusion(%param, %get-tuple-element.3), kind=kCustom, calls=%gemm_fusion_dot.3_computation, metadata={op_name="jit(fsdp)/bd,dh->bh/dot_general" source_file="model.py" source_line=16}
  ROOT %tuple = (bf16[2,4]{1,0}, bf16[2,4]{1,0}, bf16[2,4]{1,0}) tuple(%gemm_fusion_dot.1, %gemm_fusion_dot.2, %gemm_fusion_dot.3)
""")
GATHER_PROP = hlo("""
  %x.0 = bf16[8,16]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="x"}
  %w.0 = bf16[16,4]{1,0} parameter(1), sharding={devices=[4,1]<=[4]}, metadata={op_name="w"}
  %v.0 = bf16[16,4]{1,0} parameter(2), sharding={devices=[4,1]<=[4]}, metadata={op_name="v"}
  %u.0 = bf16[16,4]{1,0} parameter(3), sharding={devices=[4,1]<=[4]}, metadata={op_name="u"}
  %dot_general.0 = bf16[8,4]{1,0} dot(%x.0, %w.0), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={devices=[4,1]<=[4]}, metadata={op_name="jit(fsdp)/bd,df->bf/dot_general" source_file="model.py" source_line=14}
  %dot_general.1 = bf16[8,4]{1,0} dot(%x.0, %v.0), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={devices=[4,1]<=[4]}, metadata={op_name="jit(fsdp)/bd,dg->bg/dot_general" source_file="model.py" source_line=15}
  %dot_general.2 = bf16[8,4]{1,0} dot(%x.0, %u.0), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={devices=[4,1]<=[4]}, metadata={op_name="jit(fsdp)/bd,dh->bh/dot_general" source_file="model.py" source_line=16}
  ROOT %tuple.0 = (bf16[8,4]{1,0}, bf16[8,4]{1,0}, bf16[8,4]{1,0}) tuple(%dot_general.0, %dot_general.1, %dot_general.2), sharding={{devices=[4,1]<=[4]}, {devices=[4,1]<=[4]}, {devices=[4,1]<=[4]}}
""")


def gathered(weight: str, line: int) -> str:
    """The FSDP sentence of rules/gather.py for `weight` contracted at `line`."""
    return (f"`dot_general` at line {line} contracts dimension 0 of input `{weight}` (data,None), "
            f"sharded over `data`, while input `x` is not split there: input `{weight}` must be "
            f"whole along it; the all-gather over `data` gathers it along dimension 0 before use.")


def test_each_part_of_a_combined_all_gather_is_named_by_its_element_of_the_op_name():
    ctx = read(GATHER_OPT, GATHER_PROP, ["x", "w", "v", "u"])
    parts = targets_to_explain(ctx, ctx.opt_names["all-gather-start"])
    # Each at the line of the gemm that carries its name, found after the -done.
    assert [(t.op_name.split("/")[1], t.location, t.dims) for t in parts] == [
        ("bd,df->bf", ("model.py", 14), (16, 4)), ("bd,dg->bg", ("model.py", 15), (16, 4)),
        ("bd,dh->bh", ("model.py", 16), (16, 4))]
    assert [[a.name for a in t.anchors] for t in parts] == [
        ["dot_general.0"], ["dot_general.1"], ["dot_general.2"]]


def test_a_combined_all_gather_of_fsdp_weights_gathers_each_for_its_matmul():
    why = why_of(GATHER_OPT, GATHER_PROP, ["x", "w", "v", "u"], "all-gather-start")
    assert why.reason == Reason.GATHER_OPERAND
    assert why.text == ("XLA combined 3 all-gathers into one, each for the same reason; the "
                        "first: " + gathered("w", 14))


def test_parts_that_xla_left_unnamed_are_named_by_their_consumers_not_by_position():
    # v's all-gather had no op_name, so XLA's merged name lists only w's and u's: read by
    # position, v's part would be u's dot. Each is named by the gemm its result feeds.
    opt = GATHER_OPT.replace("(bd,df->bf/dot_general:bd,dg->bg/dot_general:bd,dh->bh/dot_general)",
                             "(bd,df->bf/dot_general:bd,dh->bh/dot_general)")
    ctx = read(opt, GATHER_PROP, ["x", "w", "v", "u"])
    parts = targets_to_explain(ctx, ctx.opt_names["all-gather-start"])
    assert [t.location for t in parts] == [("model.py", 14), ("model.py", 15), ("model.py", 16)]
    assert [[a.name for a in t.anchors] for t in parts] == [
        ["dot_general.0"], ["dot_general.1"], ["dot_general.2"]]
    assert why_of(opt, GATHER_PROP, ["x", "w", "v", "u"], "all-gather-start").text == (
        "XLA combined 3 all-gathers into one, each for the same reason; the first: "
        + gathered("w", 14))


# --- compiled for 8 H100s --------------------------------------------------------------------

gpu = [pytest.mark.gpu, pytest.mark.skipif(
    not gpu_plugin_installed(), reason="jax's CUDA plugin (the gpu extra) is not installed")]


def _gradient_step(x, w1, w2):
    def loss(w1, w2):
        return jnp.mean((jax.nn.gelu(x @ w1) @ w2).astype(jnp.float32) ** 2)
    return jax.grad(loss, argnums=(0, 1))(w1, w2)


@pytest.mark.parametrize("compile_for", [pytest.param(None, marks=gpu), "cpu"])
def test_a_data_parallel_gradient_all_reduce_is_a_partial_sum_over_the_batch(compile_for):
    # x's batch split over `data`, the weights replicated: both gradients contract the batch,
    # so one all-reduce over `data` (the GPU combines the two) adds the partial sums; the
    # CPU's program, compiled from the same request, is the reference.
    r = explorer.analyze(
        _gradient_step, T("x", (256, 1024), "bfloat16", spec="data,None"),
        T("w1", (1024, 4096), "bfloat16"), T("w2", (4096, 1024), "bfloat16"), mesh="data=8",
        target="h100-8", **({"compile_for": compile_for} if compile_for else {}))
    assert r.backend == ("cpu" if compile_for else "gpu")
    [c] = r.collectives
    assert (c.kind, c.axes) == ("all-reduce", ("data",))
    assert c.why.reason == Reason.PARTIAL_SUM
    assert "dimension 0 of input `x`, the batch dimension" in c.why.text
    if not compile_for:
        assert c.why.text.startswith("XLA combined 2 all-reduces into one, each for the same "
                                     "reason; the first: Backward pass: ")


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_plugin_installed(), reason="jax's CUDA plugin (the gpu extra) "
                    "is not installed")
@pytest.mark.slow
def test_every_collective_of_a_gpu_fsdp_tp_train_step_has_a_reason():
    r = explorer.analyze_workload("transformer_train", "data=2,model=4", preset="fsdp_tp",
                                  params={"layers": 4, "dtype": "bfloat16"}, target="h100-8")
    assert r.backend == "gpu"
    assert r.collectives
    assert [c.hlo_name for c in r.collectives if c.why.reason is Reason.UNKNOWN] == []
    # FSDP gathers weights and sums gradients; tensor parallelism sums partial matmuls:
    # nothing in this step is resharded or indexed across devices.
    assert {c.why.reason for c in r.collectives} == {Reason.GATHER_OPERAND, Reason.PARTIAL_SUM}
