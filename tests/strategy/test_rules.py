"""strategy/rules.py: logical-axis rules from a mapping, joined tables, checks against the mesh,
and flax's priority rule for tensors whose rules compete for one mesh axis; (logical name, mesh
axes) pairs as flax and MaxText write them, resolved as flax's own logical_to_mesh_axes does.
(The text grammar of NAME=AXES rules and its errors are tested in
tests/workloads/test_workloads.py.)"""

import pytest

from explorer._src.errors import RuleError
from explorer._src.spec.mesh import parse_mesh
from explorer._src.strategy.rules import Rule, logical_spec, parse_rules


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
    # (logical name, mesh axes) pairs, as Python and as text
    (["batch"], "rules[0] = 'batch' is not a (logical name, mesh axes) pair such as "
                "('batch', 'data'), ('embed', ('fsdp', 'tensor')) or ('kv', None)"),
    ([("batch", "data"), ("embed",)], "rules[1] = ('embed',) is not a (logical name, mesh axes)"),
    ([("batch", "data", "fsdp")], "rules[0] = ('batch', 'data', 'fsdp') is not a"),
    ([(1, "data")], "rules[0] = (1, 'data') is not a (logical name"),
    ([("", "data")], "rules[0] = ('', 'data') is not a (logical name"),
    ([("batch", 5)], "rules[0] = ('batch', 5): mesh axes 5 are not None, an axis name or a tuple"),
    ([("batch", ["data", None])], "rules[0] = ('batch', ['data', None]): mesh axes ['data', "
                                  "None] are not None"),
    ([("optim:embed", "data")], "rules[0] = ('optim:embed', 'data') is scoped to tensor kind "
                                "'optim', which is unknown; kinds: 'param', 'grad'"),
    ([("activation_batch", "data"), ("norm", None)],
     "the (logical name, mesh axes) pairs name no logical dimension the tensors have "
     "('activation_batch', 'norm'), so they would place nothing; logical names: 'batch', "),
    ("(batch data)", "expected ',' after 'batch' in a (NAME,AXES) pair, found 'data'"),
    ("(batch,data", "expected ')' closing the pair for 'batch' at the end"),
    ("(batch,data]", "expected ')' closing the pair for 'batch', found ']'"),
    ("[(batch,data)", "a '[' around the pairs is not closed"),
    ("(batch,(data,fsdp", "a '(' is not closed"),
    ("(batch,data)(embed,fsdp)", "expected ',' between rules, found '('"),
    ("(foo,data)", "pairs name no logical dimension the tensors have ('foo')"),
    ("(optim:batch,data)", "rule '(optim:batch,data)' is scoped to tensor kind 'optim'"),
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


# --- (logical name, mesh axes) pairs, as flax and MaxText write them ----------------------------

NAMES = ("batch", "seq", "embed", "mlp", "heads", "kv", "vocab")
AXES = ("data", "fsdp", "tensor", "seq_ax")


def _plain(entry):
    """A flax PartitionSpec entry as the explorer writes it: a 1-tuple is its axis, () None."""
    if isinstance(entry, tuple | list):
        entry = tuple(entry)
        return None if not entry else entry[0] if len(entry) == 1 else entry
    return entry


def _flax(dims, pairs, present=None):
    """flax's own resolution; with `present`, the axes not in it then dropped (size 1)."""
    flax_linen = pytest.importorskip("flax.linen")
    out = [_plain(e) for e in flax_linen.logical_to_mesh_axes(dims, pairs)]
    if present is not None:
        out = [_plain(tuple(a for a in (e if isinstance(e, tuple) else (e,)) if a in present))
               if e is not None else None for e in out]
    return tuple(out)


def _cases(n, seed=0):
    """(dims, pairs) with names repeated, tuples, lists, None and [] among the mesh axes."""
    import random
    rng = random.Random(seed)
    values = [None, [], *AXES, *[tuple(rng.sample(AXES, k)) for k in (1, 2, 3) for _ in range(3)]]
    for _ in range(n):
        pairs = [(rng.choice(NAMES), rng.choice(values)) for _ in range(rng.randint(1, 9))]
        pairs = [(name, list(v)) if isinstance(v, tuple) and rng.random() < 0.3 else (name, v)
                 for name, v in pairs]
        dims = tuple(rng.sample(NAMES, rng.randint(1, 4)))
        if rng.random() < 0.2:
            dims = (*dims, None)                          # an unnamed dimension
        yield dims, pairs


HAND = [
    # flax's docstring example: features loses X to batch; heads gets Y; batch's Z never fits.
    (("batch", "length", "heads", "features"),
     [("batch", "X"), ("features", "X"), ("heads", "Y"), ("batch", "Z")]),
    # A repeated name falls back to its next pair when the first's axis is taken.
    (("embed", "mlp"), [("mlp", "tensor"), ("embed", "tensor"), ("embed", "fsdp")]),
    (("mlp", "embed"), [("embed", ("fsdp", "tensor")), ("embed", "fsdp"), ("mlp", "tensor")]),
    # None (or []) claims the dimension: the later pair for it never applies.
    (("batch", "kv"), [("kv", None), ("kv", "tensor"), ("batch", [])]),
    # A tuple is all or nothing.
    (("batch", "mlp"), [("batch", ["data", "tensor"]), ("mlp", "tensor"), ("mlp", "data")]),
]


@pytest.mark.parametrize("dims, pairs", [*HAND, *_cases(300)])
def test_pairs_resolve_exactly_as_flax_resolves_them(dims, pairs):
    rules = parse_rules(pairs, known=NAMES + ("length", "features"))
    assert all(r.first_fit for r in rules.rules)
    assert logical_spec(dims, rules.pairs()) == _flax(dims, pairs)
    # The text form reads back as the same rules, so a Report's text reproduces the layout.
    assert parse_rules(rules.text(), known=NAMES + ("length", "features")) == rules


@pytest.mark.parametrize("dims, pairs", list(_cases(200, seed=1)))
def test_a_mesh_axis_the_mesh_lacks_counts_as_one_of_size_1(dims, pairs):
    # As MaxText's mesh holds every axis its rules name: resolved with it, then dropped.
    present = {"data", "tensor"}
    assert logical_spec(dims, parse_rules(pairs).pairs(), present) == _flax(dims, pairs, present)


def test_hand_computed_specs_of_repeated_names():
    rules = parse_rules([("mlp", "tensor"), ("embed", "tensor"), ("embed", "fsdp"),
                         ("batch", ("data", "fsdp")), ("batch", "data")])
    assert logical_spec(("embed", "mlp"), rules.pairs()) == ("fsdp", "tensor")
    assert logical_spec(("embed", "vocab"), rules.pairs()) == ("tensor", None)
    # embed takes tensor; batch's (data, fsdp) still fits; on a mesh without fsdp it is data.
    assert logical_spec(("batch", "embed"), rules.pairs()) == (("data", "fsdp"), "tensor")
    assert logical_spec(("batch", "embed"), rules.pairs(), {"data", "tensor"}) == \
        ("data", "tensor")
    # embed's first pair takes fsdp (size 1 where absent): embed stays whole, as in MaxText.
    absent = parse_rules([("embed", "fsdp"), ("embed", "tensor")])
    assert logical_spec(("embed",), absent.pairs(), {"data", "tensor"}) == (None,)


@pytest.mark.parametrize("text", [
    "(mlp,tensor),(embed,tensor),(embed,fsdp),(batch,(data,fsdp)),(kv,None)",
    "[('mlp', 'tensor'), ('embed', 'tensor'), ('embed', 'fsdp'), ('batch', ('data', 'fsdp')),"
    " ('kv', None)]",
    "(('mlp', 'tensor'), ('embed', 'tensor'), ('embed', 'fsdp'), ('batch', ('data', 'fsdp')),"
    " ('kv', None),)",
    # MaxText's base.yml writes lists, and [] for no axes.
    "[['mlp', 'tensor'], ['embed', 'tensor'], ['embed', 'fsdp'], ['batch', ['data', 'fsdp',]],"
    " ['kv', []]]",
])
def test_pairs_read_as_the_explorer_python_or_maxtexts_yaml_write_them(text):
    rules = parse_rules(text)
    assert rules == parse_rules([("mlp", "tensor"), ("embed", "tensor"), ("embed", "fsdp"),
                                 ("batch", ["data", "fsdp"]), ("kv", [])])
    assert rules.text() == "(mlp,tensor),(embed,tensor),(embed,fsdp),(batch,(data,fsdp)),(kv,None)"


def test_pairs_may_name_logical_names_the_tensors_lack_and_are_kept_in_the_text():
    # MaxText's tables name dozens of names; those the tensors lack never apply.
    rules = parse_rules([("activation_batch", ("data", "fsdp")), ("embed", "fsdp"),
                         ("q lora", None)])
    assert rules.text() == "(activation_batch,(data,fsdp)),(embed,fsdp),('q lora',None)"
    assert parse_rules(rules.text()) == rules
    assert logical_spec(("batch", "embed"), rules.pairs()) == (None, "fsdp")


def test_pairs_and_name_rules_mix_the_pairs_come_first_and_own_their_names():
    rules = parse_rules("batch=data,mlp=tensor,(embed,tensor),(embed,data),opt:embed=fsdp,"
                        "(opt:batch,fsdp)")
    assert rules.pairs("param") == (("embed", "tensor"), ("embed", "data"), ("batch", "data"),
                                    ("mlp", "tensor"))
    assert rules.pairs("opt") == (("embed", "tensor"), ("embed", "data"), ("batch", "fsdp"),
                                  ("mlp", "tensor"))
    assert parse_rules(rules.text()) == rules
    # mlp's table rule comes after embed's pairs: embed takes tensor first.
    assert logical_spec(("embed", "mlp"), rules.pairs("param")) == ("tensor", None)


def test_a_preset_joined_with_pairs_keeps_its_text_first_and_the_pairs_win():
    preset = parse_rules("batch=data,mlp=model,embed=None")
    joined = preset + parse_rules([("embed", "model"), ("embed", "data")])
    assert joined.text().startswith(preset.text() + ",")
    assert joined.pairs() == (("embed", "model"), ("embed", "data"), ("batch", "data"),
                              ("mlp", "model"))
    assert parse_rules(joined.text()) == joined
    # The table form is unchanged by the pairs beside it.
    assert joined.table() == preset.table()


def test_a_pairs_mesh_axis_the_mesh_lacks_is_no_error():
    parse_rules([("embed", ("fsdp", "model"))]).check_mesh(parse_mesh("data=2,model=4"))
    with pytest.raises(RuleError, match="names mesh axis 'fsdp'"):
        parse_rules("embed=(fsdp,model)").check_mesh(parse_mesh("data=2,model=4"))


def test_existing_text_keeps_its_meaning_a_later_rule_replaces_in_place():
    rules = parse_rules("embed=data,mlp=model,embed=model")
    assert not any(r.first_fit for r in rules.rules)
    assert rules.pairs() == (("embed", "model"), ("mlp", "model"))
