"""strategy/rules.py: logical-axis rules from a mapping, joined tables, checks against the mesh,
and flax's priority rule for tensors whose rules compete for one mesh axis. (The text grammar
and its errors are tested in tests/workloads/test_workloads.py.)"""

import pytest

from explorer.errors import RuleError
from explorer.spec.mesh import parse_mesh
from explorer.strategy.rules import Rule, logical_spec, parse_rules


def test_a_mapping_of_rules_drops_none_entries_from_tuples_and_keeps_kind_scopes():
    rules = parse_rules({"batch": ["data", "None"], "mlp": (), "embed": ["_", "model"],
                         "opt:embed": "None"})
    # ['data', 'None'] is just data; () and ('_',) are no axes at all, i.e. None.
    assert rules.rules == (Rule(None, "batch", "data"), Rule(None, "mlp", None),
                           Rule(None, "embed", "model"), Rule("opt", "embed", None))


@pytest.mark.parametrize("rules, message", [
    ({1: "data"}, "rule key 1 is not a logical dimension name such as 'batch' or 'opt:embed'"),
    ({"batch": 5}, "rule 'batch=5': mesh axes 5 are not None, an axis name or a tuple"),
    ({"batch": ["data", 3]}, "mesh axes ['data', 3] are not None, an axis name or a tuple"),
    (42, "rules 42 are neither text like 'batch=data,mlp=model' nor a mapping"),
    ("batch=", "expected mesh axes (an axis, None or a tuple) after batch= at the end"),
    ("opt:", "expected a logical dimension name after ':' at the end"),
])
def test_rules_that_are_not_names_to_axes_are_refused_with_the_form_expected(rules, message):
    with pytest.raises(RuleError) as e:
        parse_rules(rules)
    assert message in str(e.value)


def test_a_workload_may_add_its_own_logical_names():
    assert parse_rules("custom=data", known=("custom",)).rules == (Rule(None, "custom", "data"),)
    with pytest.raises(RuleError, match="logical dimension 'custom', which is unknown"):
        parse_rules("custom=data")


def test_a_joined_table_lets_the_later_rules_win_and_scopes_apply_to_their_kind_only():
    preset, user = parse_rules("batch=data,mlp=model"), parse_rules("mlp=None,opt:embed=data")
    joined = preset + user
    assert joined.text() == "batch=data,mlp=model,mlp=None,opt:embed=data"
    assert joined.table() == {"batch": "data", "mlp": None}
    assert joined.table("opt") == {"batch": "data", "mlp": None, "embed": "data"}
    assert joined.table("param") == joined.table()


def test_a_rule_over_an_axis_the_mesh_lacks_names_the_rule_and_the_mesh_axes():
    with pytest.raises(RuleError) as e:
        parse_rules("mlp=(model,expert)").check_mesh(parse_mesh("data=2,model=4"))
    assert str(e.value) == (
        "rule 'mlp=(model,expert)' names mesh axis 'expert', which mesh 'data=2,model=4' "
        "lacks; mesh axes: 'data', 'model'. Rename a mesh axis to 'expert' or change the rule")
    assert e.value.axis == "expert"


def test_an_earlier_rule_takes_its_axes_first_even_for_a_later_dimension():
    # b's rule comes first and takes x and y; a's rule wants x, already used: a stays whole.
    assert logical_spec(("a", "b"), {"b": ("x", "y"), "a": "x"}) == (None, ("x", "y"))
    # The other priority: a takes x, and b's tuple, needing x too, gets nothing.
    assert logical_spec(("a", "b"), {"a": "x", "b": ("x", "y")}) == ("x", None)


def test_a_name_repeated_in_a_tensor_is_split_at_its_first_dimension_only():
    # A mesh axis splits one dimension: [batch, batch] gets data on the first.
    assert logical_spec(("batch", "batch"), {"batch": "data"}) == ("data", None)
