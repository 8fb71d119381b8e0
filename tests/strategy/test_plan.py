"""strategy/plan.py: what a preset, rules, per-tensor specs and activation specs resolve to for
one workload, with the origin of every spec, and the errors that say where a bad spec came from.
Nothing is compiled: a plan is the request's layout before any work.

The mlp workload (explorer/_src/workloads/mlp.py): x [256,1024] (batch, embed) an input, w1
[1024,4096] (embed, mlp) and w2 [4096,1024] (mlp, embed) params, and one constraint point,
`hidden` [256,4096] (batch, mlp), an activation."""

import pytest

from explorer._src.errors import PresetError, RuleError, SpecError, WorkloadError
from explorer._src.spec.mesh import parse_mesh
from explorer._src.strategy.plan import check_planned, plan
from explorer._src.workloads.registry import get_workload

MLP = get_workload("mlp")
PARAMS = MLP.resolve({})
MESH = parse_mesh("data=2,model=4")


def test_the_megatron_preset_places_every_tensor_and_the_hidden_activation_by_its_rules():
    layout = plan(MLP, PARAMS, MESH, preset="megatron")
    # batch=data, mlp=model: x (batch, embed), w1 (embed, mlp), w2 (mlp, embed).
    assert layout.specs == {"x": ("data", None), "w1": (None, "model"), "w2": ("model", None)}
    assert layout.constraints == (("hidden", ("data", "model")),)
    assert layout.point_shapes == {"hidden": (256, 4096)}
    assert set(layout.origin.values()) == {"preset 'megatron'"}


def test_a_spec_or_a_free_activation_wins_over_the_rules():
    layout = plan(MLP, PARAMS, MESH, preset="megatron", rules="mlp=None",
                  specs={"x": "None,None"}, activations={"hidden": "free"})
    # The user's mlp=None replaces the preset's mlp=model: w1 and w2 have no split left, so
    # they are replicated and not listed; x takes its own spec; hidden is left unconstrained.
    assert layout.specs == {"x": (None, None)} and layout.origin == {"x": "spec"}
    assert layout.constraints == () and layout.activations == {}
    assert layout.rules.text() == ("batch=data,heads=model,kv_heads=model,mlp=model,"
                                   "vocab=model,mlp=None")


def test_the_origin_says_preset_and_rules_rules_alone_or_an_activation_spec():
    both = plan(MLP, PARAMS, MESH, preset="dp", rules="mlp=model")
    assert both.origin["w1"] == "preset 'dp' + rules"
    rules = plan(MLP, PARAMS, MESH, rules="batch=data")
    assert rules.origin == {"x": "rule", "hidden": "rule"}
    pinned = plan(MLP, PARAMS, MESH, activations={"hidden": "data,None"})
    assert pinned.origin == {"hidden": "activation"}
    assert pinned.constraints == (("hidden", ("data", None)),)


def test_a_training_step_pins_its_gradients_by_the_grad_rules():
    train = get_workload("mlp_train")
    layout = plan(train, train.resolve({}), MESH, preset="megatron")
    # grad.w1 has w1's logical dims (embed, mlp), grad.w2 w2's (mlp, embed).
    assert dict(layout.constraints) == {"hidden": ("data", "model"),
                                        "grad.w1": (None, "model"), "grad.w2": ("model", None)}


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(preset="pp"), PresetError,
     "preset 'pp' applies only to workload(s) 'pipeline', not 'mlp'; use workload 'pipeline'"),
    (dict(rules="batch=pod"), RuleError,
     "rule 'batch=pod' names mesh axis 'pod', which mesh 'data=2,model=4' lacks; mesh axes: "
     "'data', 'model'"),
    (dict(activations={"lyr0": "data,None"}), WorkloadError,
     "workload 'mlp' has no constraint point 'lyr0'; its points are 'hidden'"),
])
def test_a_bad_layout_request_names_the_value_and_the_choices(kwargs, error, message):
    with pytest.raises(error) as e:
        plan(MLP, PARAMS, MESH, **kwargs)
    assert message in str(e.value)


def test_a_workload_without_points_or_logical_names_says_what_it_lacks():
    matmul = get_workload("matmul")
    with pytest.raises(WorkloadError, match="workload 'matmul' has no constraint points, so "
                                            "activation spec 'h' cannot be applied"):
        plan(matmul, matmul.resolve({}), MESH, activations={"h": "data,None"})


def test_a_spec_from_a_rule_that_does_not_divide_says_which_rule_and_how_to_override_it():
    # On model=3, megatron's mlp=model splits w1's 4096 columns three ways: 4096 % 3 = 1.
    mesh = parse_mesh("data=2,model=3")
    layout = plan(MLP, PARAMS, mesh, preset="megatron")
    with pytest.raises(SpecError) as e:
        check_planned(MLP.tensors(PARAMS, layout.specs), layout, mesh)
    assert "not divisible by model=3" in str(e.value)
    assert ("[tensor 'w1': spec 'None,model' from preset 'megatron': batch=data,heads=model,"
            "kv_heads=model,mlp=model,vocab=model; override it with a spec for tensor 'w1' or "
            "change the rule]") in str(e.value)
    assert e.value.tensor == "w1"


def test_an_activation_spec_that_does_not_divide_names_the_point_not_an_input():
    mesh = parse_mesh("data=2,model=3")
    layout = plan(MLP, PARAMS, mesh, activations={"hidden": "None,model"})
    with pytest.raises(SpecError) as e:
        check_planned(MLP.tensors(PARAMS, layout.specs), layout, mesh)
    assert ("[constraint point 'hidden' (an activation, not an input): spec 'None,model' from "
            "its activation spec; change it with an activation spec for 'hidden']") \
        in str(e.value)


def test_a_users_own_bad_spec_is_reported_as_it_was_written():
    mesh = parse_mesh("data=2,model=3")
    layout = plan(MLP, PARAMS, mesh, specs={"w1": "None,model"})
    with pytest.raises(SpecError) as e:
        check_planned(MLP.tensors(PARAMS, layout.specs), layout, mesh)
    # No origin is appended: the user wrote it, for that tensor.
    assert "not divisible by model=3" in str(e.value) and "override it" not in str(e.value)
