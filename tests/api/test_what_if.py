"""explorer.what_if: the spec changes a compile confirmed would remove a collective, for a
built-in workload, a user's function (flat or of pytrees, its layers widened to every layer's
copy of a tensor) and an Exploration; and the inputs it refuses. The expected bytes are worked
out from the shapes; the functions are defined here, and traced in this process."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest

import explorer
from explorer import TensorSpec as T

MESH = "data=2,model=4"
# The MLP (x [256, 1024], w1 [1024, 4096], w2 [4096, 1024], f32) with w2 split by columns, as w1
# is: each device holds 128 rows of x and h = gelu(x @ w1) split by columns over model, which
# h @ w2 then needs whole: an all-gather over model of h's [128, 4096] block.
GATHERED = {"x": "data,None", "w1": "None,model", "w2": "None,model"}
GATHER_BYTES = 128 * 4096 * 4          # 2 MiB
# w2 split by rows instead (Megatron): each device's h columns times w2's matching rows is a
# partial sum of the [128, 1024] result, all-reduced over model.
REDUCE_BYTES = 128 * 1024 * 4          # 512 KiB


def mlp(x, w1, w2):
    h = jax.nn.gelu(x @ w1)
    return h @ w2


def layered_mlp(x, layers):
    # Every layer reads a value the program computed (reading the input x itself, Shardy would
    # reshard x at layer 0 by an all-to-all rather than all-reduce).
    h = jnp.tanh(x)
    for w_up, w_down in layers:
        up = jax.nn.relu(h @ w_up)
        h = up @ w_down
    return h


def layered_inputs():
    """x, and two layers whose w_up and w_down are split over model on their contracting
    dimension, so each layer's two matmuls are partial sums, all-reduced (Megatron's rows)."""
    return T("x", (256, 512), spec="data,None"), [
        (T(f"layers.{i}.w_up", (512, 2048), spec="model,None"),
         T(f"layers.{i}.w_down", (2048, 512), spec="model,None")) for i in range(2)]


# Per device, layered_mlp's h [128, ...] (x's rows over data): the all-reduce of h @ w_up's
# partial sums, [128, 2048] f32, and of up @ w_down's, [128, 512].
UP_BYTES = 128 * 2048 * 4              # 1 MiB
DOWN_BYTES = 128 * 512 * 4             # 256 KiB


@pytest.fixture(scope="module")
def gathered():
    return explorer.analyze_workload("mlp", MESH, specs=GATHERED)


@pytest.fixture(scope="module")
def layered():
    x, layers = layered_inputs()
    return explorer.analyze(layered_mlp, x, layers, mesh=MESH)


def _megatron_change(found, source):
    """The change that splits w2 by rows, checked against the bytes worked out by hand."""
    assert found and all(set(x.specs) == {"w2"} for x in found)
    megatron = next(x for x in found if x.specs == {"w2": "model,None"})
    assert (megatron.line_bytes_before, megatron.line_bytes_after) == (GATHER_BYTES,
                                                                       REDUCE_BYTES)
    assert (megatron.total_bytes_before, megatron.total_bytes_after) == (GATHER_BYTES,
                                                                         REDUCE_BYTES)
    assert megatron.source == source
    assert not megatron.across_layers and megatron.pattern == ""
    assert [(c.kind, c.axes, c.bytes) for c in megatron.report.collectives] == [
        ("all-reduce", ("model",), REDUCE_BYTES)]
    assert megatron.report.tensor("w2").spec == ("model", None)
    return megatron


def test_the_mlps_gathered_activation_is_confirmed_removed_by_splitting_w2_by_rows(gathered):
    [c] = gathered.collectives
    assert (c.kind, c.axes, c.bytes) == ("all-gather", ("model",), GATHER_BYTES)
    found = explorer.what_if(gathered, 0)
    # The reason names w2, the input not split as h is: every confirmed change is to w2 alone,
    # and each moves fewer bytes on h @ w2's line.
    megatron = _megatron_change(found, c.source)
    assert all(x.line_bytes_after < x.line_bytes_before == GATHER_BYTES for x in found)
    assert "this line 2.0 MiB → 512.0 KiB" in megatron.description
    assert megatron.label in megatron.description
    totals = [(x.total_bytes_after, x.line_bytes_after) for x in found]
    assert totals == sorted(totals)                               # best first
    with pytest.raises(dataclasses.FrozenInstanceError):
        megatron.specs = {}
    # The same request as an Exploration finds the same changes (answered from the cache).
    again = explorer.what_if(explorer.Exploration.from_report(gathered), 0)
    assert [x.specs for x in again] == [x.specs for x in found]


def test_a_flat_function_is_compiled_again_from_the_reports_inputs():
    report = explorer.analyze(mlp, T("x", (256, 1024), spec="data,None"),
                              T("w1", (1024, 4096), spec="None,model"),
                              T("w2", (4096, 1024), spec="None,model"), mesh=MESH)
    [c] = report.collectives
    assert c.source_text == "return h @ w2"
    _megatron_change(explorer.what_if(report, 0, fn=mlp), c.source)


def test_a_layers_fix_is_widened_to_every_layers_copy_of_the_tensor(layered):
    # By hand, before: per layer a 1 MiB all-reduce (h @ w_up) and a 256 KiB one (up @ w_down).
    assert layered.cost.collective_bytes == 2 * (UP_BYTES + DOWN_BYTES)
    index = next(i for i, c in enumerate(layered.collectives)
                 if c.why is not None and "`layers.0.w_up`" in c.why.text)
    x, layers = layered_inputs()
    found = explorer.what_if(layered, index, fn=layered_mlp, inputs=(x, layers))
    singles = [f for f in found if not f.across_layers]
    wide = [f for f in found if f.across_layers]
    # A change to layer 0's w_up removes its all-reduce and leaves layer 1's on the same line.
    assert singles and all(set(f.specs) == {"layers.0.w_up"} for f in singles)
    assert all((f.line_bytes_before, f.line_bytes_after) == (2 * UP_BYTES, UP_BYTES)
               for f in singles)
    # Made to both layers' w_up, neither is left; each layer's up @ w_down all-reduce is.
    assert wide and wide[0].pattern == "layers.*.w_up"
    assert set(wide[0].specs) == {"layers.0.w_up", "layers.1.w_up"}
    assert len(set(wide[0].specs.values())) == 1                 # the same change to each
    assert wide[0].line_bytes_before == 2 * UP_BYTES
    assert wide[0].total_bytes_after == 2 * DOWN_BYTES
    assert found[0].across_layers                                # best first: fewest in all


# ------------------------------------------------------------------------ refused


@pytest.mark.parametrize("collective", [1, -1, 7])
def test_an_index_past_the_collectives_names_it_and_the_range(gathered, collective):
    with pytest.raises(explorer.InputError) as e:
        explorer.what_if(gathered, collective)
    assert str(e.value) == (f"collective {collective} is out of range: the Report has 1 "
                            "collective, number 0")


@pytest.mark.parametrize("collective", [True, "0", 0.0])
def test_an_index_that_is_no_whole_number_is_refused(gathered, collective):
    with pytest.raises(explorer.InputError, match="is not a whole number; the Report has 1"):
        explorer.what_if(gathered, collective)


def test_a_report_with_no_collectives_has_nothing_to_remove():
    report = explorer.analyze_workload("mlp", MESH)            # every tensor replicated
    assert report.collectives == ()
    with pytest.raises(explorer.InputError, match="this Report has no collectives"):
        explorer.what_if(report, 0)


def test_a_functions_report_needs_the_function_and_a_pytree_function_its_inputs(layered):
    with pytest.raises(explorer.InputError, match=r"pass it: what_if\(report, collective, "
                                                  r"fn=your_function\)"):
        explorer.what_if(layered, 0)
    # layered_mlp takes x and a list of layers, not its 5 inputs one by one.
    with pytest.raises(explorer.InputError, match="does not take the Report's 5 inputs as one "
                                                  "argument each; pass its arguments"):
        explorer.what_if(layered, 0, fn=layered_mlp)


def test_a_workloads_report_takes_no_function(gathered):
    with pytest.raises(explorer.InputError, match="built-in workload 'mlp'; it takes no fn"):
        explorer.what_if(gathered, 0, fn=mlp)


def test_an_exploration_of_a_function_needs_the_function_and_its_inputs():
    exploration = explorer.Exploration(mesh=MESH, specs={"x": "data,None"})
    for kwargs in ({}, {"fn": mlp}):
        with pytest.raises(explorer.InputError, match="pass them: what_if"):
            explorer.what_if(exploration, 0, **kwargs)


def test_only_a_report_or_an_exploration_is_asked():
    with pytest.raises(explorer.InputError,
                       match="takes a Report, a Request or an Exploration, not str"):
        explorer.what_if("mlp", 0)


def test_a_session_offers_the_what_ifs_of_its_current_result():
    # The session's current request is the gathered mlp; its what-ifs are explorer.what_if's
    # of the same request: splitting w2 by rows turns the 2 MiB all-gather of h into an
    # all-reduce of 512 KiB (hand-computed above).
    session = explorer.Session(workload="mlp", mesh=MESH, specs=GATHERED)
    try:
        found = session.what_if(0)
        [c] = session.report.collectives
        _megatron_change(found, c.source)
        with pytest.raises(explorer.InputError, match="collective 1"):
            session.what_if(1)
    finally:
        session.close()


def test_a_requests_variant_keeps_its_other_fields_and_places_every_input_itself():
    # A function's request placed by patterns: the variant replicates w1, which the pattern
    # splits, and keeps every other input's spec, its timeout and its out_specs.
    from explorer._src.api.what_if import changed_request

    request = explorer.Request(fn=mlp, inputs=(T("x", (256, 1024)), T("w1", (1024, 4096)),
                                               T("w2", (4096, 1024))),
                               specs={"^x$": "data,None", "^w": "None,model"}, mesh=MESH,
                               timeout=30, out_specs="data,None")
    variant = changed_request(request, {"w1": (None, None)})
    assert {t.name: t.spec for t in variant.planned.leaves} == {
        "x": ("data", None), "w1": (None, None), "w2": (None, "model")}
    assert (variant.timeout, variant.out_specs, variant.specs) == (30, "data,None", None)
    # A workload's: the change as a hand-set spec, over its preset's.
    megatron = explorer.Request(workload="mlp", mesh=MESH, preset="megatron")
    variant = changed_request(megatron, {"w2": ("data", None)})
    assert (variant.preset, variant.specs) == ("megatron", {"w2": ("data", None)})
    assert {t.name: t.spec for t in variant.planned.leaves}["w2"] == ("data", None)
