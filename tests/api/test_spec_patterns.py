"""analyze(specs=...): regular expression -> spec, matched with re.search against the input
names, first match wins (MaxText's and t5x's partition rules)."""

from collections import namedtuple

import pytest

from explorer import RankError, SpecError, TensorSpec, analyze
from explorer.api.analyze import apply_spec_patterns, match_spec_patterns

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
    with pytest.raises(SpecError, match="not a mapping of regular expression to spec"):
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
