"""explorer._src.hlo.sharding: HLO sharding text read into Tilings, checked by hand and against
XLA's own HloSharding parser (jax._src.lib.xla_client) on forms jax does not emit."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer._src.hlo.sharding import tiling_from_hlo
from explorer._src.spec.layout import Tiling, shard_ranges, spec_from_tiling, tiling_from_spec

try:
    from jax._src.lib import xla_client as _xc
except ImportError:  # pragma: no cover - private module moved
    _xc = None


def test_explicit_device_list():
    # {devices=[2,2]0,2,1,3}: tile (0,0)->0, (0,1)->2, (1,0)->1, (1,1)->3.
    # On a 2x2 mesh (a,b), device 2 = (a=1, b=0): dim 1 follows 'a', dim 0 follows 'b'.
    t = tiling_from_hlo("{devices=[2,2]0,2,1,3}", 2, 4)
    assert t == Tiling((2, 2), 1, (0, 2, 1, 3))
    assert shard_ranges(t, (4, 6))[2] == ((0, 2), (3, 6))
    assert spec_from_tiling(t, ("a", "b"), (2, 2)) == ("b", "a")
    # Same placement written as an iota.
    assert tiling_from_hlo("{devices=[2,2]<=[2,2]T(1,0)}", 2, 4) == t
    # A permutation no mesh ordering produces.
    odd = tiling_from_hlo("{devices=[2,2]0,3,1,2}", 2, 4)
    assert spec_from_tiling(odd, ("a", "b"), (2, 2)) is None
    # Replica order is not part of a placement.
    assert tiling_from_hlo("{devices=[2,2]1,0,3,2 last_tile_dim_replicate}", 1, 4) == (
        tiling_from_spec(("a",), ("a", "b"), (2, 2), 1)
    )


def test_whole_tensor_forms():
    assert tiling_from_hlo("{replicated}", 2, 8) == Tiling((1, 1), 8, tuple(range(8)))
    assert tiling_from_hlo("replicated", 0, 4) == Tiling((), 4, (0, 1, 2, 3))
    m = tiling_from_hlo("{maximal device=3}", 2, 8)
    assert m == Tiling((1, 1), 1, (3,))
    assert shard_ranges(m, (5, 7)) == {3: ((0, 5), (0, 7))}
    assert spec_from_tiling(m, ("x",), (8,)) is None
    assert tiling_from_hlo("{manual}", 1, 8).manual == 8
    assert tiling_from_hlo("{unreduced}", 1, 8).unreduced == 8
    assert spec_from_tiling(tiling_from_hlo("{manual}", 1, 8), ("x",), (8,)) is None
    with pytest.raises(ValueError, match="unknown"):
        tiling_from_hlo("{unknown shard_as 1}", 1, 8)


def test_gspmd_shard_map_forms():
    # Seen in GSPMD-partitioned shard_map over 'model' of data=2 x model=4, rank 2:
    # [1,1,4,2]<=[2,4]T(1,0) = arange(8).reshape(2,4).T -> rows (0,4) (1,5) (2,6) (3,7);
    # manual index = model coordinate, the 2 copies are the 'data' devices.
    t = tiling_from_hlo(
        "{devices=[1,1,4,2]<=[2,4]T(1,0) last_tile_dims={manual, replicated}}", 2, 8
    )
    assert (t.tiles, t.replicas, t.manual, t.unreduced, t.copies) == ((1, 1), 8, 4, 1, 2)
    assert t.devices == (0, 4, 1, 5, 2, 6, 3, 7)
    # Subgroup order in the text does not matter: XLA reorders to manual-first.
    a = tiling_from_hlo("{devices=[2,1,2,2]<=[8] last_tile_dims={replicated, manual}}", 2, 8)
    b = tiling_from_hlo(
        "{devices=[2,1,2,2]<=[2,2,2]T(0,2,1) last_tile_dims={manual, replicated}}", 2, 8
    )
    assert a == b and a.manual == 2 and a.copies == 2
    # Scalar inside a shard_map body.
    s = tiling_from_hlo("{devices=[4,2]<=[2,4]T(1,0) last_tile_dims={manual, replicated}}", 0, 8)
    assert s.tiles == () and s.manual == 4


def test_text_noise_is_ignored():
    base = tiling_from_hlo("{devices=[2,1,4]<=[8] last_tile_dim_replicate}", 2, 8)
    for text in [
        'sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate metadata={op_name="a {b} c"}}',
        "devices=[2,1,4]<=[8] last_tile_dim_replicate",
        "{devices=[2,1,4]<=[8] last_tile_dims={replicated}}",
        "{devices=[2,1,4]<=[8] last_tile_dim_replicate shard_like 3}",
        '{devices=[2,1,4]<=[8] last_tile_dim_replicate metadata={{op_name="x"}, {op_name="y"}}}',
        "  {devices=[2,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}  ",
    ]:
        assert tiling_from_hlo(text, 2, 8) == base, text


@pytest.mark.parametrize(
    ("text", "rank", "n"),
    [
        ("{devices=[2,4]<=[8]}", 1, 8),  # rank mismatch
        ("{devices=[2,4]<=[8]}", 2, 4),  # ids beyond num_devices
        ("{devices=[2,2]0,1,2}", 2, 4),  # too few ids
        ("{devices=[2,2]<=[3]}", 2, 4),  # iota size mismatch
        ("{{replicated}, {replicated}}", 1, 8),  # tuple
        ("{devices=[2,2]<=[4] last_tile_dims={bogus}}", 1, 4),
        ("{devices=[2,2]<=[4] frobnicate}", 2, 4),
        ("{maximal device=9}", 1, 8),
        ('{mesh["a"=2], [{"a"}]}', 1, 2),
        ("{devices=[2,2]<=[4]", 2, 4),  # unbalanced
    ],
)
def test_malformed_hlo_raises(text, rank, n):
    with pytest.raises(ValueError):
        tiling_from_hlo(text, rank, n)


# --------------------------------------------------------------------------- XLA's parser

_TYPE_NAMES = {}
if _xc is not None:
    _T = _xc.OpSharding.Type
    _TYPE_NAMES = {_T.MANUAL: "manual", _T.REPLICATED: "replicated", _T.UNREDUCED: "unreduced"}


def _xla_tiling(text, rank, n) -> Tiling:
    """Tiling built from XLA's own parse of `text` (normalised by XLA)."""
    h = _xc.HloSharding.from_string(text)
    whole = (1,) * rank
    if h.is_replicated():
        return Tiling(whole, n, range(n))
    if h.is_manual():
        return Tiling(whole, n, range(n), manual=n)
    if h.is_unreduced():
        return Tiling(whole, n, range(n), unreduced=n)
    if h.is_maximal():
        return Tiling(whole, 1, h.tile_assignment_devices()[:1])
    dims, devs = h.tile_assignment_dimensions(), list(h.tile_assignment_devices())
    types = [_TYPE_NAMES[t] for t in h.subgroup_types()]
    if h.replicate_on_last_tile_dim():
        types.append("replicated")
    group = {
        name: math.prod(dims[rank + j] for j, t in enumerate(types) if t == name)
        for name in ("manual", "unreduced", "replicated")
    }
    if math.prod(dims[:rank]) == 1 and sum(g > 1 for g in group.values()) == 1:
        # One group over all devices: XLA treats this as {manual}/{unreduced}, so
        # the order is immaterial; _layout sorts it, XLA sometimes keeps it.
        devs = sorted(devs)
    return Tiling(
        dims[:rank],
        math.prod(group.values()),
        devs,
        manual=group["manual"],
        unreduced=group["unreduced"],
    )


@st.composite
def _hlo_text(draw):
    n = draw(st.sampled_from([2, 4, 6, 8, 12, 16]))
    parts, rest = [], n
    while rest > 1:  # a random ordered factorisation of n, with some 1s
        d = draw(st.sampled_from([f for f in range(2, rest + 1) if rest % f == 0]))
        parts.append(d)
        rest //= d
    parts += [1] * draw(st.integers(0, 2))
    parts = draw(st.permutations(parts))
    n_sub = draw(st.integers(0, min(3, len(parts))))
    rank = len(parts) - n_sub
    types = [draw(st.sampled_from(["manual", "replicated", "unreduced"])) for _ in range(n_sub)]
    if draw(st.booleans()):
        assignment = ",".join(map(str, draw(st.permutations(range(n)))))
    else:
        reshape = list(draw(st.permutations(parts)))
        perm = draw(st.permutations(range(len(reshape))))
        assignment = f"<=[{','.join(map(str, reshape))}]"
        if len(reshape) > 1:  # XLA's parser rejects T(0)
            assignment += f"T({','.join(map(str, perm))})"
    suffix = ""
    if types == ["replicated"] and draw(st.booleans()):
        suffix = " last_tile_dim_replicate"
    elif types:
        suffix = " last_tile_dims={" + ", ".join(types) + "}"
    return "{devices=[" + ",".join(map(str, parts)) + "]" + assignment + suffix + "}", rank, n


@pytest.mark.skipif(_xc is None, reason="jax._src.lib.xla_client not available")
@settings(max_examples=300, deadline=None)
@given(_hlo_text())
@pytest.mark.slow
def test_hlo_parser_matches_xla(case):
    text, rank, n = case
    expected = _xla_tiling(text, rank, n)
    assert tiling_from_hlo(text, rank, n) == expected
    # XLA's normalised re-print must describe the same placement.
    assert tiling_from_hlo(str(_xc.HloSharding.from_string(text)), rank, n) == expected
    # spec_from_tiling is only allowed to answer with a spec that really produces it.
    names = tuple(f"m{i}" for i in range(2))
    for sizes in [(n,), (2, n // 2)]:
        spec = spec_from_tiling(expected, names[: len(sizes)], sizes)
        if spec is not None:
            again = tiling_from_spec(spec, names[: len(sizes)], sizes, rank)
            assert shard_ranges(again, (n,) * rank) == shard_ranges(expected, (n,) * rank)


@pytest.mark.skipif(_xc is None, reason="jax._src.lib.xla_client not available")
@pytest.mark.parametrize(
    ("text", "rank"),
    [
        ("{replicated}", 2),
        ("{manual}", 2),
        ("{unreduced}", 2),
        ("{maximal device=3}", 2),
        ("{devices=[2,4]<=[8]}", 2),
        ("{devices=[2,1,4]<=[8] last_tile_dim_replicate}", 2),
        ("{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}", 2),
        ("{devices=[2,2,2]<=[8] last_tile_dims={manual}}", 2),
        ("{devices=[2,2,2]<=[8] last_tile_dims={unreduced, replicated}}", 1),
        ("{devices=[2,2,2]<=[8] last_tile_dims={replicated, unreduced}}", 1),
        ("{devices=[2,2,2]<=[8] last_tile_dims={manual, manual}}", 1),
        ("{devices=[2,2,2,1]<=[8] last_tile_dims={manual, replicated}}", 2),
        ("{devices=[2,1,4]3,2,1,0,7,6,5,4 last_tile_dim_replicate}", 2),
        ("{devices=[1,1,8]<=[8] last_tile_dim_replicate}", 2),
        ("{devices=[1,1,8]<=[8] last_tile_dims={manual}}", 2),
        ("{devices=[2,4]<=[2,2,2]T(2,0,1)}", 2),
    ],
)
def test_listed_forms_match_xla(text, rank):
    assert tiling_from_hlo(text, rank, 8) == _xla_tiling(text, rank, 8)




# XLA's named form (the XLA of jax 0.12 prints every propagated sharding so), each beside the
# classic form of the same placement, worked out by hand from the mesh's row-major device
# array: a dimension over axes a then b takes a major, b minor; what no dimension is over is
# replicated; a sub-axis 'model':(p)n is the part of size n after the major part of size p.
NAMED = [
    ("{mesh['data'=2,'model'=4], [{'data'}, {}]}", 2,
     "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"),
    ("{mesh['data'=2,'model'=4], [{}, {'model'}]}", 2,
     "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"),
    ("{mesh['data'=2,'model'=4], [{'data'}, {'model'}]}", 2, "{devices=[2,4]<=[8]}"),
    ("{mesh['data'=2,'model'=4], [{'model'}, {'data'}]}", 2, "{devices=[4,2]<=[2,4]T(1,0)}"),
    ("{mesh['data'=2,'model'=4], [{'data', 'model'}, {}]}", 2, "{devices=[8,1]<=[8]}"),
    ("{mesh['data'=2,'model'=4], [{'model', 'data'}, {}]}", 2,
     "{devices=[8,1]<=[2,4]T(1,0)}"),
    ("{mesh[], replicated}", 2, "{replicated}"),
    ("{mesh['data'=2,'model'=4], manual}", 1, "{manual}"),
    # model=4 cut in two halves: devices [data, model_major, model_minor] = arange(8).
    ("{mesh['data'=2,'model'=4], [{'model':(1)2}, {'model':(2)2}, {}]}", 3,
     "{devices=[2,2,1,2]<=[2,2,2]T(1,2,0) last_tile_dim_replicate}"),
    ("{mesh['data'=2,'model'=4], [{'data', ?}, {?}]}", 2,
     "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"),
    ("{mesh['data'=2,'model'=4], [{}, {}], unreduced={'model'}}", 2,
     "{devices=[1,1,4,2]<=[2,4]T(1,0) last_tile_dims={unreduced, replicated}}"),
    ("{mesh['data'=2,'model'=4], [{}], replicated={'data'}}", 1,
     "{replicated}"),
    # devices [[0,4],[1,5],[2,6],[3,7]] transposed: the mesh is [[0,2,4,6],[1,3,5,7]].
    ("{mesh['data'=2,'model'=4], device_ids=([4,2]T(1,0)), [{'data'}, {}]}", 2,
     "{devices=[2,1,4]0,2,4,6,1,3,5,7 last_tile_dim_replicate}"),
]


@pytest.mark.parametrize(("named", "rank", "classic"), NAMED)
def test_the_named_form_is_the_placement_its_classic_form_is(named, rank, classic):
    assert tiling_from_hlo(named, rank, 8) == tiling_from_hlo(classic, rank, 8)


@pytest.mark.parametrize(("text", "rank"), [
    ("{mesh['data'=2,'model'=4], [{'data'}]}", 2),                 # one dim of two
    ("{mesh['data'=2,'model'=4], [{'expert'}, {}]}", 2),           # no such axis
    ("{mesh['data'=2,'model'=4], [{'data'}, {'data'}]}", 2),       # an axis twice
    ("{mesh['data'=2,'model'=4], [{'model':(1)3}, {}]}", 2),       # 3 does not divide 4
    ("{mesh['data'=2,'model'=2], [{'data'}, {}]}", 2),             # 4 devices, not 8
    ("{mesh['data'=2,'model'=4], [{'data'}, {}], frobnicate}", 2),
])
def test_a_named_form_that_does_not_fit_raises(text, rank):
    with pytest.raises(ValueError):
        tiling_from_hlo(text, rank, 8)
