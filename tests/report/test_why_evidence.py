"""The why's evidence as fields (explorer.Operand): the roles, instructions, shapes, inputs and
layouts of known collectives, worked out by hand from the shapes and specs each test gives;
and explorer.what_if reading those fields, not the text (a Why without them, as an older
explorer wrote it, gives no candidates rather than an error)."""

import dataclasses

import explorer
from explorer import Operand, OperandRole, Reason
from explorer import TensorSpec as T
from explorer._src.api.what_if import candidates, evidence_layouts, involved_inputs, why_untried


def matmul(x, w):
    return x @ w


def test_the_megatron_mlps_all_reduce_rests_on_the_hidden_activation_and_w2():
    # x [256, 1024] by data, w1 [1024, 4096] by columns, w2 [4096, 1024] by rows over model:
    # h = x @ w1 is [256, 4096] split (data, model) (the preset's `hidden` constraint), and
    # h @ w2 contracts its model-split columns with w2's model-split rows.
    r = explorer.analyze_workload("mlp", "data=2,model=4", preset="megatron")
    [c] = r.collectives
    assert (c.kind, c.axes, c.why.reason) == ("all-reduce", ("model",), Reason.PARTIAL_SUM)
    ev = c.why.evidence
    lhs, rhs = ev.operands
    assert (lhs.role, lhs.dtype, lhs.shape, lhs.spec, lhs.input) == (
        OperandRole.LHS, "f32", (256, 4096), ("data", "model"), "")
    assert lhs.op_name.endswith("hidden/sharding_constraint")
    assert rhs == Operand(OperandRole.RHS, rhs.instruction, "f32", (4096, 1024),
                          ("model", None), "w2", 2, "w2")
    # The consumer is the dot itself: its result [256, 1024], by data, is the layout after.
    assert (ev.user.role, ev.user.shape, ev.user.spec, ev.user.input) == (
        OperandRole.CONSUMER, (256, 1024), ("data", None), "")
    assert ev.spec_after == ("data", None)
    assert ev.inputs == ("w2",)                 # the sentence names `w2`, and the constraint
    # The text the views show is the fields written out.
    assert ev.sharding_before == "lhs data,model; rhs model,None"
    assert ev.sharding_after == "data,None"
    assert involved_inputs(r, c) == ["w2"]


def test_a_split_contraction_is_a_partial_sum_of_both_inputs():
    # x [16, 64] and w [64, 32] both split over data on the contracted dimension of 64: each
    # device multiplies its 32 columns of x by its 32 rows of w, a partial [16, 32] sum.
    r = explorer.analyze(matmul, T("x", (16, 64), "float32", "None,data"),
                         T("w", (64, 32), "float32", "data,None"), mesh="data=2,model=4")
    [c] = r.collectives
    assert (c.kind, c.axes, c.why.reason) == ("all-reduce", ("data",), Reason.PARTIAL_SUM)
    ev = c.why.evidence
    assert [(o.role, o.shape, o.spec, o.input, o.parameter) for o in ev.operands] == [
        (OperandRole.LHS, (16, 64), (None, "data"), "x", 0),
        (OperandRole.RHS, (64, 32), ("data", None), "w", 1)]
    assert ev.user.shape == (16, 32)
    # The dot's result holds the partial sums, which no split over whole mesh axes describes:
    # no layout after, in the fields as in the text.
    assert (ev.user.spec, ev.spec_after, ev.sharding_after) == (None, None, "(no mesh layout)")
    assert ev.inputs == ("x", "w")
    assert [(lay.role, lay.what, lay.shape, lay.sharding) for lay in evidence_layouts(r, c)] == [
        ("before, left operand", "input x", (16, 64), "None,data"),
        ("before, right operand", "input w", (64, 32), "data,None"),
        ("after", "the result of dot_general", (16, 32), "")]


def test_a_gathered_weight_is_the_one_operand_and_its_needed_layout_a_candidate():
    # FSDP: w [64, 32] split over data by rows while x [16, 64] is split by rows too (its
    # columns whole): the dot contracts w's rows with x's whole columns, so it needs w whole,
    # and w is all-gathered over data to (None, None).
    r = explorer.analyze(matmul, T("x", (16, 64), "float32", "data,None"),
                         T("w", (64, 32), "float32", "data,None"), mesh="data=2")
    [c] = r.collectives
    assert (c.kind, c.why.reason) == ("all-gather", Reason.GATHER_OPERAND)
    ev = c.why.evidence
    [w] = ev.operands
    assert (w.role, w.shape, w.spec, w.input) == (OperandRole.OPERAND, (64, 32),
                                                  ("data", None), "w")
    assert ev.spec_after == (None, None)
    assert ev.inputs == ("w", "x")      # the sentence names w, then x (not split there)
    specs = {"x": ("data", None), "w": ("data", None)}
    shapes = {"x": (16, 64), "w": (64, 32)}
    labels = [x.label for x in candidates(r, 0, specs, shapes, r.mesh)]
    assert labels[0] == "lay w out as replicated (what its consumer needs)"


def test_a_why_without_the_fields_gives_no_candidates():
    # A Why an older explorer wrote (a cached Report): its text names the inputs, but what_if
    # reads only the fields, so it offers nothing rather than failing.
    r = explorer.analyze_workload("mlp", "data=2,model=4", preset="megatron")
    c = r.collectives[0]
    old = dataclasses.replace(c.why.evidence, operands=(), user=None, spec_after=None,
                              inputs=())
    report = dataclasses.replace(r, collectives=(dataclasses.replace(
        c, why=dataclasses.replace(c.why, evidence=old)),))
    specs = {t.name: t.spec for t in r.tensors if t.kind == explorer.TensorRole.INPUT}
    shapes = {t.name: t.shape for t in r.tensors if t.kind == explorer.TensorRole.INPUT}
    found = candidates(report, 0, specs, shapes, r.mesh)
    assert found == []
    assert "none of the tensors it moves or reduces is an input" in why_untried(c, found)
    assert [lay.missing != "" for lay in evidence_layouts(report, report.collectives[0])] == [
        True, True]
