"""explorer._src.spec.layout against jax as the oracle, plus hand-computed cases.

jax's NamedSharding.devices_indices_map and _to_xla_hlo_sharding give an
independent answer for where every shard lives. The HLO text reader has its own
tests in tests/hlo/test_sharding.py.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import itertools
import math

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from explorer._src.hlo.sharding import tiling_from_hlo
from explorer._src.spec.layout import (
    Tiling,
    shard_ranges,
    shard_shape,
    spec_from_tiling,
    tiling_from_spec,
)

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


# --------------------------------------------------------------------------- 2048 devices


def test_spec_from_tiling_round_trips_on_2048_devices():
    # The largest mesh the CPU backend allows: spec recovery is exact there too, and a
    # near-miss (two devices swapped) is recognised as no spec at all. (No time is asserted:
    # this machine is shared and noisy.)
    names, sizes = ("a", "b", "c"), (8, 16, 16)
    cases = [
        (("b", None, ("c", "a")), 3),
        ((("a", "b", "c"),), 3),
        ((None, "c"), 3),
        ((), 3),
    ]
    for spec, rank in cases:
        tiling = tiling_from_spec(spec, names, sizes, rank)
        assert spec_from_tiling(tiling, names, sizes) == _canonical(spec, names, sizes)
    devs = list(tiling_from_spec(("b", None, "c"), names, sizes, 3).devices)
    devs[0], devs[-1] = devs[-1], devs[0]
    broken = Tiling((16, 1, 16), 8, devs)
    assert spec_from_tiling(broken, names, sizes) is None
