"""explorer.spec.layout against jax/XLA as the oracle, plus hand-computed cases.

jax's NamedSharding.devices_indices_map and _to_xla_hlo_sharding give an
independent answer for where every shard lives; XLA's own HloSharding parser
(jax._src.lib.xla_client) checks the text parser on forms jax does not emit.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import itertools
import math
import time

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from explorer.spec.layout import (
    Tiling,
    UnknownShardingError,
    shard_ranges,
    shard_shape,
    spec_from_tiling,
    split_tuple_sharding,
    tiling_from_hlo,
    tiling_from_spec,
)

try:
    from jax._src.lib import xla_client as _xc
except ImportError:  # pragma: no cover - private module moved
    _xc = None

MESHES = [
    (("x",), (8,)),
    (("data", "model"), (2, 4)),
    (("a", "b", "c"), (2, 2, 2)),
]


# --------------------------------------------------------------------------- helpers


def _jax_mesh(names, sizes) -> Mesh:
    n = math.prod(sizes)
    devices = jax.devices()
    if len(devices) < n:
        pytest.skip(f"needs {n} jax devices, have {len(devices)}")
    return Mesh(
        np.array(devices[:n]).reshape(sizes), names, axis_types=(AxisType.Auto,) * len(names)
    )


def _jax_ranges(mesh: Mesh, spec, shape):
    """jax's devices_indices_map in our terms: logical id -> ((start, stop), ...)."""
    logical = {d: i for i, d in enumerate(mesh.devices.flat)}
    out = {}
    for dev, index in NamedSharding(mesh, spec).devices_indices_map(shape).items():
        out[logical[dev]] = tuple(
            (sl.start or 0, dim if sl.stop is None else sl.stop)
            for sl, dim in zip(index, shape, strict=True)
        )
    return dict(sorted(out.items()))


def _jax_hlo(mesh: Mesh, spec, rank: int) -> str:
    return str(NamedSharding(mesh, spec)._to_xla_hlo_sharding(rank))


def _all_specs(names, rank):
    """Every valid spec: each axis unused or on one dim, in every order within a dim."""
    specs = set()
    for owner in itertools.product(range(-1, rank), repeat=len(names)):
        groups = [[n for n, o in zip(names, owner, strict=True) if o == d] for d in range(rank)]
        for orders in itertools.product(*(itertools.permutations(g) for g in groups)):
            entries = [None if not o else o[0] if len(o) == 1 else tuple(o) for o in orders]
            specs.add(tuple(entries))
    return sorted(specs, key=repr)


def _canonical(spec, names, sizes):
    """What spec_from_tiling should give back: no size-1 axes, no 1-tuples, no trailing None."""
    size = dict(zip(names, sizes, strict=True))
    out = []
    for e in spec:
        axes = () if e is None else (e,) if isinstance(e, str) else tuple(e)
        axes = tuple(a for a in axes if size[a] > 1)
        out.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    while out and out[-1] is None:
        out.pop()
    return tuple(out)


def _shape_for(rank):
    return (16, 24, 8)[:rank]  # every dim divisible by any tile count <= 8


def _check_against_jax(names, sizes, spec, rank):
    mesh = _jax_mesh(names, sizes)
    shape = _shape_for(rank)
    tiling = tiling_from_spec(spec, names, sizes, rank)
    assert shard_ranges(tiling, shape) == _jax_ranges(mesh, P(*spec), shape), spec
    assert tiling_from_hlo(_jax_hlo(mesh, P(*spec), rank), rank, mesh.size) == tiling, spec
    back = spec_from_tiling(tiling, names, sizes)
    assert back == _canonical(spec, names, sizes), (spec, back)
    assert tiling_from_spec(back, names, sizes, rank) == tiling


# --------------------------------------------------------------------------- jax oracle

CASES = [
    (names, sizes, spec, rank)
    for names, sizes in MESHES
    for rank in (1, 2, 3)
    for spec in _all_specs(names, rank)
]


@pytest.mark.parametrize(("names", "sizes", "spec", "rank"), CASES, ids=lambda v: repr(v))
def test_spec_matches_jax(names, sizes, spec, rank):
    _check_against_jax(names, sizes, spec, rank)


@pytest.mark.parametrize(
    "spec",
    [
        ("data",),  # trailing dims omitted
        (("data",), None),  # 1-tuple entry
        ((), "model"),  # empty tuple means not split
        (None, None),
        (),
    ],
)
def test_spec_spellings_match_jax(spec):
    names, sizes = ("data", "model"), (2, 4)
    mesh = _jax_mesh(names, sizes)
    tiling = tiling_from_spec(spec, names, sizes, 2)
    assert shard_ranges(tiling, (16, 24)) == _jax_ranges(mesh, P(*spec), (16, 24))
    assert tiling_from_hlo(_jax_hlo(mesh, P(*spec), 2), 2, 8) == tiling


def test_size_one_axes_are_never_used():
    names, sizes = ("a", "b", "c"), (2, 1, 4)
    mesh = _jax_mesh(names, sizes)
    for spec in [(("a", "b"), "c"), ("b",), (("b", "c", "a"),), (None, ("c", "b"))]:
        rank = max(len(spec), 1)
        hlo = tiling_from_hlo(_jax_hlo(mesh, P(*spec), rank), rank, 8)
        assert hlo == tiling_from_spec(spec, names, sizes, rank)
        back = spec_from_tiling(hlo, names, sizes)
        assert back == _canonical(spec, names, sizes)
        assert "b" not in repr(back)


def test_unreduced_partition_spec_matches_jax():
    names, sizes = ("a", "b", "c"), (2, 2, 2)
    n = math.prod(sizes)
    if len(jax.devices()) < n:
        pytest.skip("needs 8 devices")
    mesh = Mesh(np.array(jax.devices()[:n]).reshape(sizes), names, (AxisType.Explicit,) * 3)
    for spec in [P("b", unreduced={"a"}), P("b", unreduced={"c"}), P(None, unreduced={"b", "c"})]:
        text = _jax_hlo(mesh, spec, 1)
        tiling = tiling_from_spec(spec, names, sizes, 1)
        assert tiling_from_hlo(text, 1, n) == tiling, (spec, text)
        assert tiling.unreduced == math.prod(sizes[names.index(a)] for a in spec.unreduced)
        assert spec_from_tiling(tiling, names, sizes) is None  # a plain tuple can't say it


@st.composite
def _mesh_and_spec(draw):
    sizes = tuple(draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=4)))
    if math.prod(sizes) > 8:
        sizes = sizes[:1]
    names = tuple(f"ax{i}" for i in range(len(sizes)))
    rank = draw(st.integers(0, 3))
    owner = [draw(st.integers(-1, rank - 1)) for _ in names]
    entries = []
    for d in range(rank):
        axes = draw(st.permutations([n for n, o in zip(names, owner, strict=True) if o == d]))
        style = draw(st.sampled_from(["str", "tuple"]))
        if not axes:
            entries.append(None)
        elif len(axes) == 1 and style == "str":
            entries.append(axes[0])
        else:
            entries.append(tuple(axes))
    keep = draw(st.integers(0, rank))  # drop some trailing Nones (or not)
    while len(entries) > keep and entries[-1] is None:
        entries.pop()
    return names, sizes, tuple(entries), rank


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mesh_and_spec())
def test_random_specs_match_jax(case):
    names, sizes, spec, rank = case
    _check_against_jax(names, sizes, spec, rank)


# --------------------------------------------------------------------------- hand examples


def test_hand_example_column_split():
    # f32[1024,4096], spec (None,'model') on data=2 x model=4.
    # dim 1 has 4 tiles of 4096/4 = 1024 columns; 'data' is unused, so 2 replicas.
    # Device ids: arange(8).reshape(2,4) -> device 5 is (data=1, model=1) -> tile 1
    # -> columns [1*1024, 2*1024) = [1024, 2048), all 1024 rows.
    t = tiling_from_spec((None, "model"), ("data", "model"), (2, 4), 2)
    assert t.tiles == (1, 4) and t.replicas == 2
    assert t.devices == (0, 4, 1, 5, 2, 6, 3, 7)  # tile j holds {j, 4 + j}
    assert shard_shape(t, (1024, 4096)) == (1024, 1024)
    assert shard_ranges(t, (1024, 4096))[5] == ((0, 1024), (1024, 2048))


def test_hand_example_transposed_tuple_entry():
    # (('model','data'),) on data=2 x model=4: 8 tiles, 'model' major.
    # tile i = model*2 + data; device = data*4 + model.
    # tile 1 = (model 0, data 1) -> device 4; tile 2 = (model 1, data 0) -> device 1.
    t = tiling_from_spec((("model", "data"),), ("data", "model"), (2, 4), 1)
    assert t.devices == (0, 4, 1, 5, 2, 6, 3, 7)
    assert t.replicas == 1
    assert shard_ranges(t, (80,))[4] == ((10, 20),)
    assert spec_from_tiling(t, ("data", "model"), (2, 4)) == (("model", "data"),)


def test_uneven_dims_follow_xla():
    # dim 10 over 4 tiles: ceil(10/4) = 3 -> [0,3) [3,6) [6,9) [9,10): sizes 3,3,3,1.
    t = tiling_from_spec(("x",), ("x",), (4,), 1)
    assert shard_shape(t, (10,)) == (3,)
    assert shard_ranges(t, (10,)) == {0: ((0, 3),), 1: ((3, 6),), 2: ((6, 9),), 3: ((9, 10),)}
    # dim 5 over 4 tiles: ceil = 2 -> [0,2) [2,4) [4,5) and an empty [5,5) (all padding).
    assert [r[0] for r in shard_ranges(t, (5,)).values()] == [(0, 2), (2, 4), (4, 5), (5, 5)]
    # dim 0: every shard empty, buffer size 0.
    assert shard_shape(t, (0,)) == (0,)
    assert set(shard_ranges(t, (0,)).values()) == {((0, 0),)}


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
    with pytest.raises(UnknownShardingError):
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


def test_split_tuple_sharding():
    assert split_tuple_sharding("{{replicated}, {devices=[2,1]<=[2]}}") == [
        "{replicated}",
        "{devices=[2,1]<=[2]}",
    ]
    assert split_tuple_sharding("{devices=[2,1]<=[2]}") == ["{devices=[2,1]<=[2]}"]
    assert split_tuple_sharding("{}") == []
    # XLA prints /*index=N*/ every fifth element; metadata may hold braces and commas.
    text = (
        "{{replicated}, {manual}, {maximal device=1}, {replicated}, {replicated}, /*index=5*/"
        '{devices=[2]<=[2] metadata={op_name="f({a}, b)"}}}'
    )
    parts = split_tuple_sharding(text)
    assert len(parts) == 6
    assert parts[5] == '{devices=[2]<=[2] metadata={op_name="f({a}, b)"}}'
    assert tiling_from_hlo(parts[5], 1, 2) == Tiling((2,), 1, (0, 1))


def _brace_group(text: str, start: int) -> str:
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start : i + 1]
    raise AssertionError("unbalanced")


def test_split_jax_tuple_output():
    # The tuple sharding jax puts on a two-output function's ROOT tuple.
    mesh = _jax_mesh(("data", "model"), (2, 4))
    shardings = (NamedSharding(mesh, P("data")), NamedSharding(mesh, P()))
    lowered = jax.jit(lambda x: (x, x.sum()), out_shardings=shardings).lower(
        jax.ShapeDtypeStruct((16, 8), np.float32)
    )
    text = lowered.as_text(dialect="hlo")
    at = text.find("sharding={{")
    if at < 0:
        pytest.skip("lowered HLO carries no tuple sharding in this jax version")
    elements = split_tuple_sharding(_brace_group(text, at + len("sharding=")))
    assert len(elements) == 2
    assert tiling_from_hlo(elements[0], 2, 8) == tiling_from_spec(
        ("data",), ("data", "model"), (2, 4), 2
    )
    assert tiling_from_hlo(elements[1], 0, 8) == Tiling((), 8, tuple(range(8)))


def test_invalid_specs_raise():
    names, sizes = ("data", "model"), (2, 4)
    for spec, rank in [
        (("nope",), 1),
        (("data", "data"), 2),
        ((("data", "data"),), 1),
        (("data", None, None), 2),
        ((3,), 1),
    ]:
        with pytest.raises(ValueError):
            tiling_from_spec(spec, names, sizes, rank)


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


# --------------------------------------------------------------------------- speed


def test_spec_from_tiling_speed_on_2048_devices():
    names, sizes = ("a", "b", "c"), (8, 16, 16)
    cases = [
        (("b", None, ("c", "a")), 3),
        ((("a", "b", "c"),), 3),
        ((None, "c"), 3),
        ((), 3),
    ]
    for spec, rank in cases:
        tiling = tiling_from_spec(spec, names, sizes, rank)
        start = time.perf_counter()
        back = spec_from_tiling(tiling, names, sizes)
        ms = (time.perf_counter() - start) * 1e3
        print(f"spec_from_tiling {spec} on (8,16,16): {ms:.2f} ms")
        assert back == _canonical(spec, names, sizes)
    # A near-miss (two devices swapped) must come back None, also quickly.
    devs = list(tiling_from_spec(("b", None, "c"), names, sizes, 3).devices)
    devs[0], devs[-1] = devs[-1], devs[0]
    broken = Tiling((16, 1, 16), 8, devs)
    start = time.perf_counter()
    assert spec_from_tiling(broken, names, sizes) is None
    print(f"spec_from_tiling near-miss: {(time.perf_counter() - start) * 1e3:.2f} ms")
