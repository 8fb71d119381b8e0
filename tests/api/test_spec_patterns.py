"""analyze(specs=...): regular expression -> spec, matched with re.search against the input
names joined with '.' or '/', first match wins (MaxText's, t5x's and the model zoos' partition
rules); a spec given with the tensor wins over every pattern."""

from collections import namedtuple

import pytest
from jax.sharding import PartitionSpec as P

from explorer import RankError, SpecError, TensorSpec, analyze
from explorer._src.api.patterns import apply_spec_patterns, match_spec_patterns

T = TensorSpec


def test_first_matching_pattern_wins_and_unmatched_names_keep_their_spec():
    names = ["layers.0.up.kernel", "layers.0.up.bias", "layers.0.down.kernel", "embed"]
    specs = {r"up\.kernel": "None,model", r"up": "model", r"down.*kernel": "model,None"}
    assert match_spec_patterns(names, specs) == {
        "layers.0.up.kernel": (r"up\.kernel", (None, "model")),   # the first of two matches
        "layers.0.up.bias": ("up", ("model",)),
        "layers.0.down.kernel": (r"down.*kernel", ("model", None)),
    }


def test_patterns_place_the_leaves_of_any_pytree_by_name():
    Pair = namedtuple("Pair", "a b")
    args = ({"up": T("up", (8, 16)), "down": T("down", (16, 8), spec="data,None")},
            [T("x", (4, 8))], Pair(T("p", (8,)), None))
    placed = apply_spec_patterns(args, {"^up$": "None,model", "^x$": ("data", None)})
    assert placed[0]["up"].spec == (None, "model")
    assert placed[0]["down"].spec == ("data", None)          # no pattern: its own spec
    assert placed[1][0].spec == ("data", None)
    assert isinstance(placed[2], Pair) and placed[2].a.spec == () and placed[2].b is None


def test_bad_patterns_are_named():
    x = T("up.bias", (16,))
    with pytest.raises(RankError, match=r"pattern 'up' gives 'None,model' \(2 entries\) to "
                                        r"tensor 'up.bias' of rank 1"):
        apply_spec_patterns((x,), {"up": "None,model"})
    with pytest.raises(SpecError, match=r"spec pattern '\(' is not a regular expression"):
        apply_spec_patterns((x,), {"(": "model"})
    with pytest.raises(SpecError, match="neither a mapping of regular expression to spec nor "
                                        r"a sequence of \(regular expression, spec\) pairs"):
        apply_spec_patterns((x,), ["up", "model"])
    with pytest.raises(SpecError, match="the spec of pattern 'up'"):
        apply_spec_patterns((x,), {"up": 3})


def mlp(x, w1, w2):
    return (x @ w1) @ w2


def test_analyze_applies_the_patterns_before_compiling():
    # Megatron MLP from patterns: w1 split by columns and w2 by rows over model, so x @ w1 @ w2
    # ends in partial sums of the [256/2, 1024] output block per device, all-reduced over
    # model: V = 128 × 1024 × 4 bytes.
    r = analyze(mlp, T("x", (256, 1024), spec="data,None"), T("w1", (1024, 4096)),
                T("w2", (4096, 1024)), mesh="data=2,model=4",
                specs={"w1": "None,model", "w2": "model,None"})
    assert r.tensor("w1").spec == (None, "model") and r.tensor("w2").spec == ("model", None)
    assert [(c.kind, c.axes, c.bytes) for c in r.collectives] == [
        ("all-reduce", ("model",), 128 * 1024 * 4)]


# A model zoo's table, as its rules are written: '/'-joined paths, PartitionSpecs, and a final
# catch-all. The explorer names the same parameters with dots.
ZOO_RULES = [
    (r"model/layers/\d+/mlp/up_proj/kernel", P(None, "model")),
    (r"model/layers/\d+/mlp/down_proj/kernel", P("model", None)),
    (".*", P()),
]


def test_slash_joined_rules_find_dot_named_parameters():
    names = ["model.layers.0.mlp.up_proj.kernel", "model.layers.11.mlp.down_proj.kernel",
             "model.embed.embedding"]
    assert match_spec_patterns(names, ZOO_RULES) == {
        "model.layers.0.mlp.up_proj.kernel": (ZOO_RULES[0][0], (None, "model")),
        "model.layers.11.mlp.down_proj.kernel": (ZOO_RULES[1][0], ("model", None)),
        "model.embed.embedding": (".*", ()),
    }


def test_a_spec_given_with_the_tensor_wins_over_a_catch_all():
    args = (T("input_ids", (8, 16), "int32", spec="data,None"), T("w", (16, 4)))
    placed = apply_spec_patterns(args, [(".*", P()), ("w", P("data", None))])
    assert placed[0].spec == ("data", None)       # its own spec, not the catch-all's P()
    assert placed[1].spec == ()                   # no spec of its own: the first match, P()


def test_a_pattern_that_matches_nothing_is_named_in_the_notes():
    r = analyze(mlp, T("x", (256, 1024), spec="data,None"), T("w1", (1024, 4096)),
                T("w2", (4096, 1024)), mesh="data=2,model=4",
                specs=[("model/layers/\\d+/up/kernel", "None,model"), ("w2", "model,None")])
    notes = [n for n in r.notes if "matched no input tensor" in n]
    assert len(notes) == 1, r.notes                 # w2's pattern found w2: not named
    assert notes[0].startswith("spec pattern 'model/layers/\\\\d+/up/kernel' matched no ")
    assert "e.g. 'x', 'w1', 'w2'" in notes[0]       # the names to write patterns against
    # w2 placed by its pattern: w1 replicated, so the model-split w2 contraction leaves partial
    # sums of the [256/2, 1024] block, all-reduced over model: 128 × 1024 × 4 bytes.
    assert r.tensor("w2").spec == ("model", None)
    assert [(c.kind, c.axes, c.bytes) for c in r.collectives] == [
        ("all-reduce", ("model",), 128 * 1024 * 4)]


def test_a_size_one_axis_the_user_named_stays_in_the_reported_spec_and_the_code():
    # fsdp=4, sp=1, tp=2: ('fsdp','sp') splits dim 0 four ways, as 'fsdp' alone would, but the
    # user named sp so that the layout follows once sp grows; the Report and to_code keep it.
    w = T("w", (64, 32), spec=P(("fsdp", "sp"), "tp"))
    r = analyze(lambda w: w * 2, w, mesh="fsdp=4,sp=1,tp=2")
    t = r.tensor("w")
    assert t.spec == (("fsdp", "sp"), "tp")
    assert t.shard_shape == (64 // 4, 32 // 2)
    assert "P(('fsdp', 'sp'), 'tp')" in r.to_code()


def test_a_short_pattern_spec_leaves_the_rest_unsplit_as_jax_reads_it():
    # Libraries' tables give P('data') to token arrays of any rank; jax pads it with None.
    placed = apply_spec_patterns((T("tokens", (16, 1024)), T("ids", (16,))),
                                 {"tokens|ids": P("data")})
    assert placed[0].spec == ("data", None) and placed[1].spec == ("data",)
