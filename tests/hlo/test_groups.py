"""Tests for explorer._src.hlo.groups: replica-group parsing and mesh-axis identification.

The "real" lines below were captured from `jax.jit(f).lower(x).compile().as_text()` with jax 0.10.2
on CPU (`--xla_force_host_platform_device_count`), for programs whose collective axes are known
by construction: a sum / reshard / roll over an array sharded on those axes (Shardy partitioner,
"auto"), the same under GSPMD, and `jax.shard_map` collectives over an explicit `axis_name`.
Modes: default (mesh form with synthetic axes), rgv2 (`--xla_enable_rgv3_materialization=false`,
iota form), v3 (`--xla_enable_hlo_sharding_v3=true`, mesh form with the user's axis names).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer._src.hlo.groups import (
    axes_of_groups,
    axes_of_pairs,
    device_groups,
    ring_direction,
    source_target_pairs,
)

# --- explicit form --------------------------------------------------------------------------


def test_explicit_groups_keep_hlo_order():
    line = "%ar = f32[8] all-reduce(%p), replica_groups={{0,4,1,5},{2,6,3,7}}, to_apply=%add"
    assert device_groups(line, 8) == [[0, 4, 1, 5], [2, 6, 3, 7]]


def test_explicit_empty_means_all_devices():
    line = "%ar = f32[8] all-reduce(%p), replica_groups={}, to_apply=%add"
    assert device_groups(line, 4) == [[0, 1, 2, 3]]


def test_explicit_singletons():
    assert device_groups("x = all-reduce(a), replica_groups={{0},{1},{2}}", 3) == [[0], [1], [2]]


def test_no_replica_groups_is_none():
    line = "%cp = f32[8] collective-permute(%p), channel_id=1, source_target_pairs={{0,1},{1,0}}"
    assert device_groups(line, 2) is None
    assert device_groups("%a = f32[] add(%x, %y)", 8) is None


# --- iota form ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        # arange(8).reshape(2,4): the rows
        ("[2,4]<=[8]", [[0, 1, 2, 3], [4, 5, 6, 7]]),
        # arange(8).reshape(2,4).T = [[0,4],[1,5],[2,6],[3,7]]
        ("[4,2]<=[2,4]T(1,0)", [[0, 4], [1, 5], [2, 6], [3, 7]]),
        # arange(8).reshape(2,4).T flattened = 0,4,1,5,2,6,3,7 as one group
        ("[1,8]<=[2,4]T(1,0)", [[0, 4, 1, 5, 2, 6, 3, 7]]),
        # arange(8).reshape(2,2,2).transpose(2,1,0)[i,j,k] = 4k+2j+i; flattened over (i,j,k):
        # 0,4,2,6,1,5,3,7
        ("[4,2]<=[2,2,2]T(2,1,0)", [[0, 4], [2, 6], [1, 5], [3, 7]]),
        # arange(8).reshape(2,2,2).transpose(0,2,1)[i,j,k] = 4i+2k+j: 0,2,1,3,4,6,5,7
        ("[2,4]<=[2,2,2]T(0,2,1)", [[0, 2, 1, 3], [4, 6, 5, 7]]),
    ],
)
def test_iota_form(text, expected):
    line = f"%ag = f32[8] all-gather(%p), channel_id=1, replica_groups={text}, dimensions={{0}}"
    assert device_groups(line, 8) == expected


def test_iota_that_does_not_cover_its_devices_raises():
    with pytest.raises(ValueError):
        device_groups("x = all-reduce(a), replica_groups=[2,3]<=[8]", 8)


# --- mesh form ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        # device array arange(8).reshape(2,4); {'b'} holds a, walks b: the rows
        ("mesh['a'=2,'b'=4] {'b'}", [[0, 1, 2, 3], [4, 5, 6, 7]]),
        # {'a'} holds b, walks a: the columns
        ("mesh['a'=2,'b'=4] {'a'}", [[0, 4], [1, 5], [2, 6], [3, 7]]),
        # both axes, a slowest
        ("mesh['a'=2,'b'=4] {'a','b'}", [[0, 1, 2, 3, 4, 5, 6, 7]]),
        # both axes, listed b first so b is slowest: transpose then flatten
        ("mesh['a'=2,'b'=4] {'b','a'}", [[0, 4, 1, 5, 2, 6, 3, 7]]),
        # no axes: every device alone
        ("mesh['a'=2,'b'=4] {}", [[d] for d in range(8)]),
        # device_ids = arange(8).reshape(2,4).T flattened = 0,4,1,5,2,6,3,7, as a (4,1,2) array
        # [i,0,k] = ids[2i+k]; walking axis_0 with k fixed: k=0 -> 0,1,2,3; k=1 -> 4,5,6,7
        (
            "mesh['axis_0'=4,'axis_1'=1,'axis_2'=2], device_ids=([2,4]T(1,0)) {'axis_0'}",
            [[0, 1, 2, 3], [4, 5, 6, 7]],
        ),
        # explicit device_ids [[3,1],[2,0]]; walking a down each column
        ("mesh['a'=2,'b'=2], device_ids=(3,1,2,0) {'a'}", [[3, 2], [1, 0]]),
        # sub-axis x:(1)2 of x=4: x = 2i+j, walk i (major half). ids = 2x+y = 4i+2j+y
        ("mesh['x'=4,'y'=2] {'x':(1)2}", [[0, 4], [1, 5], [2, 6], [3, 7]]),
        # sub-axis x:(2)2: walk j (minor half)
        ("mesh['x'=4,'y'=2] {'x':(2)2}", [[0, 2], [1, 3], [4, 6], [5, 7]]),
        # two sub-axes of x=8 with a gap: x = 4i+2p+k, walk i then k, hold p
        ("mesh['x'=8] {'x':(1)2,'x':(4)2}", [[0, 1, 4, 5], [2, 3, 6, 7]]),
        # same sub-axes listed the other way round: k slowest within a group
        ("mesh['x'=8] {'x':(4)2,'x':(1)2}", [[0, 4, 1, 5], [2, 6, 3, 7]]),
        # unquoted names parse too
        ("mesh[a=2,b=4] {b}", [[0, 1, 2, 3], [4, 5, 6, 7]]),
    ],
)
def test_mesh_form(text, expected):
    line = f"%ar = f32[8] all-reduce(%p), channel_id=1, replica_groups={text}, to_apply=%add"
    assert device_groups(line, 8) == expected


def test_mesh_form_unknown_axis_raises():
    with pytest.raises(ValueError):
        device_groups("x = all-reduce(a), replica_groups=mesh['a'=2] {'b'}", 2)


def test_unknown_form_raises():
    with pytest.raises(ValueError):
        device_groups("x = all-reduce(a), replica_groups=maximal_mesh[device_id=0] {}", 1)


# --- source_target_pairs --------------------------------------------------------------------


def test_source_target_pairs():
    line = "%cp = f32[8] collective-permute(%p), channel_id=1, source_target_pairs={{0,1},{1,2}}"
    assert source_target_pairs(line) == [(0, 1), (1, 2)]
    assert source_target_pairs("%cp = collective-permute(%p), source_target_pairs={}") == []
    assert source_target_pairs("%ar = all-reduce(%p), replica_groups={{0,1}}") is None


# --- axes_of_groups / axes_of_pairs ---------------------------------------------------------

# Mesh a=2, b=3, c=4 (24 devices): id = 12a + 4b + c.
SIZES3 = (2, 3, 4)
NAMES3 = ("a", "b", "c")


@pytest.mark.parametrize(
    "groups, expected",
    [
        ([list(range(24))], ("a", "b", "c")),
        ([list(range(12)), list(range(12, 24))], ("b", "c")),
        ([[4 * k + c for k in range(6)] for c in range(4)], ("a", "b")),  # fix c
        ([[0, 12, 4, 16]], ()),  # varies along a and b but covers only part of the mesh
        ([[r * 4 + c for c in range(4)] for r in range(6)], ("c",)),
        ([[b * 4 + c + 12 * a for a in range(2)] for b in range(3) for c in range(4)], ("a",)),
        # same set of groups in another order, groups reversed inside: still ("a", "c")
        ([[4 * b + c + 12 * a for a in (1, 0) for c in (3, 2, 1, 0)] for b in (2, 0, 1)],
         ("a", "c")),
        ([[d] for d in range(24)], ()),  # all singletons
        ([[0, 1], [2, 3], [4, 5]], ()),  # pairs inside c: a sub-axis, no whole-axis match
        ([[0, 99]], ()),  # not a device of this mesh
        ([], ()),
    ],
)
def test_axes_of_groups(groups, expected):
    assert axes_of_groups(groups, SIZES3, NAMES3) == expected


def test_axes_of_groups_never_reports_size_one_axes():
    # Mesh p=2, q=1, r=4: id = 4p + r. Groups over (p, q) are groups over p.
    groups = [[r, 4 + r] for r in range(4)]
    assert axes_of_groups(groups, (2, 1, 4), ("p", "q", "r")) == ("p",)
    assert axes_of_groups([list(range(8))], (2, 1, 4), ("p", "q", "r")) == ("p", "r")
    assert axes_of_groups([[d] for d in range(8)], (2, 1, 4), ("p", "q", "r")) == ()


@pytest.mark.parametrize(
    "pairs, expected",
    [
        ([(0, 4), (4, 0)], ("b",)),  # (0,0,0) <-> (0,1,0)
        ([(0, 1), (1, 2), (2, 3), (3, 0)], ("c",)),
        ([(0, 12), (12, 0)], ("a",)),
        ([(0, 17)], ("a", "b", "c")),  # (0,0,0) -> (1,1,1)
        ([(5, 5), (6, 6)], ()),  # nobody moves
        ([(5, 5), (0, 13)], ("a", "c")),  # (0,0,0) -> (1,0,1)
        ([], ()),
    ],
)
def test_axes_of_pairs(pairs, expected):
    assert axes_of_pairs(pairs, SIZES3, NAMES3) == expected


# SIZES3 = (2, 3, 4): device (a, b, c) is 12a + 4b + c.
@pytest.mark.parametrize(
    "pairs, expected",
    [
        ([(0, 1), (1, 2), (2, 3), (3, 0)], "+"),            # c + 1 round the ring of 4
        ([(0, 3), (1, 0), (2, 1), (3, 2)], "-"),            # c - 1
        ([(12, 13), (13, 14), (14, 15), (15, 12), (0, 1)], "+"),   # two rings, same way
        ([(0, 4), (4, 8), (8, 0)], "+"),                    # b + 1 round the ring of 3
        ([(0, 8), (4, 0), (8, 4)], "-"),                    # b - 1
        ([(0, 2), (2, 0)], ""),                             # c + 2: two hops
        ([(0, 12), (12, 0)], ""),                           # a: a ring of two is both ways
        ([(0, 1), (1, 0), (2, 3)], ""),                     # one way and the other
        ([(0, 5)], ""),                                     # two axes
        ([(3, 3)], ""),                                     # nobody moves
    ],
)
def test_ring_direction(pairs, expected):
    assert ring_direction(pairs, SIZES3, NAMES3) == expected


def test_axes_of_pairs_outside_mesh_raises():
    with pytest.raises(ValueError):
        axes_of_pairs([(0, 24)], SIZES3, NAMES3)


# --- real captured lines ----------------------------------------------------------------------

# (line, num_devices, mesh sizes, mesh names, axes the program's collective runs over)
REAL_CASES = [
    # default: auto sum ('data',)
    (
        (
            'ROOT %all-reduce = f32[512]{0} all-reduce(%ynn_fusion), channel_id=1, '
            "replica_groups=mesh['axis_0'=2,'axis_1'=1,'axis_2'=4] {'axis_0'}, "
            'use_global_device_ids=true, to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        8, (2, 4), ('data', 'model'), ('data',),
    ),
    # default: auto sum ('model',)
    (
        (
            'ROOT %all-reduce = f32[512]{0} all-reduce(%ynn_fusion), channel_id=1, '
            "replica_groups=mesh['axis_0'=4,'axis_1'=1,'axis_2'=2], "
            "device_ids=([2,4]T(1,0)) {'axis_0'}, use_global_device_ids=true, "
            'to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        8, (2, 4), ('data', 'model'), ('model',),
    ),
    # default: auto sum ('data', 'model')
    (
        (
            'ROOT %all-reduce = f32[512]{0} all-reduce(%ynn_fusion), channel_id=1, '
            "replica_groups=mesh['axis_0'=8,'axis_1'=1] {'axis_0'}, "
            'use_global_device_ids=true, to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        8, (2, 4), ('data', 'model'), ('data', 'model'),
    ),
    # default: auto sum ('model', 'data')
    (
        (
            'ROOT %all-reduce = f32[512]{0} all-reduce(%ynn_fusion), channel_id=1, '
            "replica_groups=mesh['axis_0'=8,'axis_1'=1], "
            "device_ids=([2,4]T(1,0)) {'axis_0'}, use_global_device_ids=true, "
            'to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        8, (2, 4), ('data', 'model'), ('data', 'model'),
    ),
    # default: auto gather ('model',)
    (
        (
            'ROOT %all-gather = f32[512,512]{1,0} all-gather(%param), channel_id=1, '
            "replica_groups=mesh['axis_0'=4,'axis_1'=1,'axis_2'=2], "
            "device_ids=([2,4]T(1,0)) {'axis_0'}, dimensions={0}, "
            'use_global_device_ids=true, '
            'metadata={op_name="jit(<lambda>)/sharding_constraint" stack_frame_id=3}'
        ),
        8, (2, 4), ('data', 'model'), ('model',),
    ),
    # default: auto a2a ('model',)
    (
        (
            '%all-to-all.1 = (f32[128,1,128]{2,1,0}, f32[128,1,128]{2,1,0}, '
            'f32[128,1,128]{2,1,0}, '
            'f32[128,1,128]{2,1,0}) all-to-all(%bitcast_slice_fusion.3, '
            '%bitcast_slice_fusion.2, %bitcast_slice_fusion.1, %bitcast_slice_fusion), '
            "channel_id=1, replica_groups=mesh['axis_0'=1,'axis_1'=4,'axis_2'=2], "
            "device_ids=([2,4]T(1,0)) {'axis_1'}, "
            'metadata={op_name="jit(<lambda>)/sharding_constraint" stack_frame_id=3}'
        ),
        8, (2, 4), ('data', 'model'), ('model',),
    ),
    # rgv2: auto sum ('data',)
    (
        (
            'ROOT %all-reduce = f32[512]{0} all-reduce(%ynn_fusion), channel_id=1, '
            'replica_groups=[4,2]<=[2,4]T(1,0), use_global_device_ids=true, '
            'to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        8, (2, 4), ('data', 'model'), ('data',),
    ),
    # rgv2: auto sum ('model',)
    (
        (
            'ROOT %all-reduce = f32[512]{0} all-reduce(%ynn_fusion), channel_id=1, '
            'replica_groups=[2,4]<=[8], use_global_device_ids=true, '
            'to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        8, (2, 4), ('data', 'model'), ('model',),
    ),
    # rgv2: auto sum ('model', 'data')
    (
        (
            'ROOT %all-reduce = f32[512]{0} all-reduce(%ynn_fusion), channel_id=1, '
            'replica_groups=[1,8]<=[2,4]T(1,0), use_global_device_ids=true, '
            'to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        8, (2, 4), ('data', 'model'), ('data', 'model'),
    ),
    # v3: auto sum ('model',)
    (
        (
            'ROOT %all-reduce = f32[512]{0} all-reduce(%ynn_fusion), channel_id=1, '
            "replica_groups=mesh['data'=2,'model'=4] {'model'}, "
            'use_global_device_ids=true, to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        8, (2, 4), ('data', 'model'), ('model',),
    ),
    # v3: auto sum ('model', 'data')
    (
        (
            'ROOT %all-reduce = f32[512]{0} all-reduce(%ynn_fusion), channel_id=1, '
            "replica_groups=mesh['data'=2,'model'=4] {'model','data'}, "
            'use_global_device_ids=true, to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        8, (2, 4), ('data', 'model'), ('data', 'model'),
    ),
    # gspmd: auto a2a ('data',)
    (
        (
            '%all-to-all.1 = (f32[256,1,256]{2,1,0}, '
            'f32[256,1,256]{2,1,0}) all-to-all(%bitcast_slice_fusion.1, '
            '%bitcast_slice_fusion), channel_id=1, '
            "replica_groups=mesh['axis_0'=1,'axis_1'=2,'axis_2'=4] {'axis_1'}, "
            'metadata={op_name="jit(<lambda>)/sharding_constraint" stack_frame_id=3}'
        ),
        8, (2, 4), ('data', 'model'), ('data',),
    ),
    # default: sm psum ('data',)
    (
        (
            'ROOT %psum.7 = f32[64,512]{1,0} all-reduce(%param.1), channel_id=1, '
            'replica_groups={{0,4},{1,5},{2,6},{3,7}}, use_global_device_ids=true, '
            'to_apply=%region_0.0, '
            'metadata={op_name="jit(<lambda>)/shard_map/psum" stack_frame_id=5}'
        ),
        8, (2, 4), ('data', 'model'), ('data',),
    ),
    # default: sm all_gather ('model', 'data')
    (
        (
            'ROOT %all_gather.3 = f32[512,512]{1,0} all-gather(%param.1), channel_id=1, '
            'replica_groups={{0,4,1,5,2,6,3,7}}, dimensions={0}, '
            'use_global_device_ids=true, '
            'metadata={op_name="jit(<lambda>)/shard_map/all_gather" stack_frame_id=4}'
        ),
        8, (2, 4), ('data', 'model'), ('data', 'model'),
    ),
    # default: sm psum_scatter ('model',)
    (
        (
            'ROOT %reduce_scatter.7 = f32[16,512]{1,0} reduce-scatter(%param.1), '
            'channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, '
            'use_global_device_ids=true, dimensions={0}, to_apply=%region_0.0, '
            'metadata={op_name="jit(<lambda>)/shard_map/reduce_scatter" stack_frame_id=5}'
        ),
        8, (2, 4), ('data', 'model'), ('model',),
    ),
    # default: sm all_to_all ('data',)
    (
        (
            '%all-to-all = (f32[32,512]{1,0}, f32[32,512]{1,0}) all-to-all(%wrapped_slice, '
            '%wrapped_slice.1), channel_id=1, replica_groups={{0,4},{1,5},{2,6},{3,7}}, '
            'metadata={op_name="jit(<lambda>)/shard_map/all_to_all" stack_frame_id=4}'
        ),
        8, (2, 4), ('data', 'model'), ('data',),
    ),
    # default: auto sum ('a', 'c')
    (
        (
            'ROOT %all-reduce = f32[512]{0} all-reduce(%ynn_fusion), channel_id=1, '
            "replica_groups=mesh['axis_0'=4,'axis_1'=1,'axis_2'=2], "
            "device_ids=([2,2,2]T(0,2,1)) {'axis_0'}, use_global_device_ids=true, "
            'to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        8, (2, 2, 2), ('a', 'b', 'c'), ('a', 'c'),
    ),
    # default: auto sum ('c', 'b')
    (
        (
            'ROOT %all-reduce = f32[512]{0} all-reduce(%ynn_fusion), channel_id=1, '
            "replica_groups=mesh['axis_0'=4,'axis_1'=1,'axis_2'=2], "
            "device_ids=([2,2,2]T(2,1,0)) {'axis_0'}, use_global_device_ids=true, "
            'to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        8, (2, 2, 2), ('a', 'b', 'c'), ('b', 'c'),
    ),
    # rgv2: auto sum ('a', 'c')
    (
        (
            'ROOT %all-reduce = f32[512]{0} all-reduce(%ynn_fusion), channel_id=1, '
            'replica_groups=[2,4]<=[2,2,2]T(1,0,2), use_global_device_ids=true, '
            'to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        8, (2, 2, 2), ('a', 'b', 'c'), ('a', 'c'),
    ),
    # v3: auto sum ('c', 'a')
    (
        (
            'ROOT %all-reduce = f32[512]{0} all-reduce(%ynn_fusion), channel_id=1, '
            "replica_groups=mesh['a'=2,'b'=2,'c'=2] {'c','a'}, use_global_device_ids=true, "
            'to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        8, (2, 2, 2), ('a', 'b', 'c'), ('a', 'c'),
    ),
    # default: auto sum ('y',)
    (
        (
            'ROOT %all-reduce = f32[2048]{0} all-reduce(%ynn_fusion), channel_id=1, '
            "replica_groups=mesh['axis_0'=2,'axis_1'=1,'axis_2'=16], "
            "device_ids=([4,2,4]T(1,0,2)) {'axis_0'}, use_global_device_ids=true, "
            'to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        32, (4, 2, 4), ('x', 'y', 'z'), ('y',),
    ),
    # default: auto sum ('z', 'x')
    (
        (
            'ROOT %all-reduce = f32[2048]{0} all-reduce(%ynn_fusion), channel_id=1, '
            "replica_groups=mesh['axis_0'=16,'axis_1'=1,'axis_2'=2], "
            "device_ids=([8,4]T(1,0)) {'axis_0'}, use_global_device_ids=true, "
            'to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        32, (4, 2, 4), ('x', 'y', 'z'), ('x', 'z'),
    ),
    # default: auto a2a ('x', 'z')
    (
        (
            '%all-to-all.1 = (f32[128,1,128]{2,1,0}, f32[128,1,128]{2,1,0}, '
            'f32[128,1,128]{2,1,0}, f32[128,1,128]{2,1,0}, f32[128,1,128]{2,1,0}, '
            '/*index=5*/f32[128,1,128]{2,1,0}, f32[128,1,128]{2,1,0}, '
            'f32[128,1,128]{2,1,0}, f32[128,1,128]{2,1,0}, f32[128,1,128]{2,1,0}, '
            '/*index=10*/f32[128,1,128]{2,1,0}, f32[128,1,128]{2,1,0}, '
            'f32[128,1,128]{2,1,0}, f32[128,1,128]{2,1,0}, f32[128,1,128]{2,1,0}, '
            '/*index=15*/f32[128,1,128]{2,1,0}) all-to-all(%bitcast_slice_fusion.15, '
            '%bitcast_slice_fusion.14, %bitcast_slice_fusion.13, %bitcast_slice_fusion.12, '
            '%bitcast_slice_fusion.11, /*index=5*/%bitcast_slice_fusion.10, '
            '%bitcast_slice_fusion.9, %bitcast_slice_fusion.8, %bitcast_slice_fusion.7, '
            '%bitcast_slice_fusion.6, /*index=10*/%bitcast_slice_fusion.5, '
            '%bitcast_slice_fusion.4, %bitcast_slice_fusion.3, %bitcast_slice_fusion.2, '
            '%bitcast_slice_fusion.1, /*index=15*/%bitcast_slice_fusion), channel_id=1, '
            "replica_groups=mesh['axis_0'=1,'axis_1'=16,'axis_2'=2], "
            "device_ids=([4,2,4]T(0,2,1)) {'axis_1'}, "
            'metadata={op_name="jit(<lambda>)/sharding_constraint" stack_frame_id=3}'
        ),
        32, (4, 2, 4), ('x', 'y', 'z'), ('x', 'z'),
    ),
    # default: auto gather ('z', 'y', 'x')
    (
        (
            'ROOT %all-gather = f32[2048,2048]{1,0} all-gather(%param), channel_id=1, '
            "replica_groups=mesh['axis_0'=32,'axis_1'=1], "
            "device_ids=([4,2,4]T(2,1,0)) {'axis_0'}, dimensions={0}, "
            'use_global_device_ids=true, '
            'metadata={op_name="jit(<lambda>)/sharding_constraint" stack_frame_id=3}'
        ),
        32, (4, 2, 4), ('x', 'y', 'z'), ('x', 'y', 'z'),
    ),
    # rgv2: auto sum ('x', 'z')
    (
        (
            'ROOT %all-reduce = f32[2048]{0} all-reduce(%ynn_fusion), channel_id=1, '
            'replica_groups=[2,16]<=[4,2,4]T(1,0,2), use_global_device_ids=true, '
            'to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        32, (4, 2, 4), ('x', 'y', 'z'), ('x', 'z'),
    ),
    # rgv2: auto sum ('z', 'y')
    (
        (
            'ROOT %all-reduce = f32[2048]{0} all-reduce(%ynn_fusion), channel_id=1, '
            'replica_groups=[4,8]<=[4,2,4]T(0,2,1), use_global_device_ids=true, '
            'to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        32, (4, 2, 4), ('x', 'y', 'z'), ('y', 'z'),
    ),
    # v3: auto sum ('z', 'x')
    (
        (
            'ROOT %all-reduce = f32[2048]{0} all-reduce(%ynn_fusion), channel_id=1, '
            "replica_groups=mesh['x'=4,'y'=2,'z'=4] {'z','x'}, use_global_device_ids=true, "
            'to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        32, (4, 2, 4), ('x', 'y', 'z'), ('x', 'z'),
    ),
    # gspmd_rgv2: auto sum ('y', 'x')
    (
        (
            'ROOT %all-reduce = f32[2048]{0} all-reduce(%ynn_fusion), channel_id=1, '
            'replica_groups=[4,8]<=[4,2,4]T(2,1,0), use_global_device_ids=true, '
            'to_apply=%region_0.1.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        32, (4, 2, 4), ('x', 'y', 'z'), ('x', 'y'),
    ),
    # default: sm psum ('x', 'z')
    (
        (
            'ROOT %psum.7 = f32[64,2048]{1,0} all-reduce(%param.1), channel_id=1, '
            'replica_groups={{0,1,2,3,8,9,10,11,16,17,18,19,24,25,26,27},'
            '{4,5,6,7,12,13,14,15,20,21,22,23,28,29,30,31}}, '
            'use_global_device_ids=true, to_apply=%region_0.0, '
            'metadata={op_name="jit(<lambda>)/shard_map/psum" stack_frame_id=5}'
        ),
        32, (4, 2, 4), ('x', 'y', 'z'), ('x', 'z'),
    ),
    # default: auto sum ('r', 'p')
    (
        (
            'ROOT %all-reduce = f32[1024]{0} all-reduce(%ynn_fusion), channel_id=1, '
            "replica_groups=mesh['axis_0'=16,'axis_1'=1], "
            "device_ids=([4,4]T(1,0)) {'axis_0'}, use_global_device_ids=true, "
            'to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        16, (4, 1, 4), ('p', 'q', 'r'), ('p', 'r'),
    ),
    # v3: auto sum ('p', 'q', 'r')
    (
        (
            'ROOT %all-reduce = f32[1024]{0} all-reduce(%ynn_fusion), channel_id=1, '
            "replica_groups=mesh['p'=4,'q'=1,'r'=4] {'p','r'}, use_global_device_ids=true, "
            'to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        16, (4, 1, 4), ('p', 'q', 'r'), ('p', 'r'),
    ),
    # default: sm psum ('q',)
    (
        (
            'ROOT %psum.7 = f32[64,1024]{1,0} all-reduce(%param.1), channel_id=1, '
            'replica_groups={{0},{1},{2},{3},{4},{5},{6},{7},'
            '{8},{9},{10},{11},{12},{13},{14},{15}}, '
            'use_global_device_ids=true, to_apply=%region_0.0, '
            'metadata={op_name="jit(<lambda>)/shard_map/psum" stack_frame_id=5}'
        ),
        16, (4, 1, 4), ('p', 'q', 'r'), (),
    ),
    # default: auto sum ('model',)
    (
        (
            'ROOT %all-reduce = f32[512]{0} all-reduce(%ynn_fusion), channel_id=1, '
            "replica_groups=mesh['axis_0'=4,'axis_1'=1,'axis_2'=2], "
            "device_ids=([2,4]T(1,0)) {'axis_0'}, use_global_device_ids=true, "
            'to_apply=%region_0.0.clone, '
            'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
        ),
        8, (2, 4), ('data', 'model'), ('model',),
    ),
]


@pytest.mark.parametrize("line, n, sizes, names, expected", REAL_CASES)
def test_real_lines_map_to_known_axes(line, n, sizes, names, expected):
    groups = device_groups(line, n)
    assert sorted(d for g in groups for d in g) == list(range(n))
    assert axes_of_groups(groups, sizes, names) == expected


# One collective (sum over an array sharded P(("model", "data")) on a data=2,model=4 mesh, and the
# shard_map psum over ("model", "data")) printed in all forms: groups must agree, order included.
SAME_COLLECTIVE = [
    (
        'ROOT %all-reduce = f32[512]{0} all-reduce(%ynn_fusion), channel_id=1, '
        "replica_groups=mesh['axis_0'=8,'axis_1'=1], "
        "device_ids=([2,4]T(1,0)) {'axis_0'}, use_global_device_ids=true, "
        'to_apply=%region_0.0.clone, '
        'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
    ),
    (
        'ROOT %all-reduce = f32[512]{0} all-reduce(%ynn_fusion), channel_id=1, '
        'replica_groups=[1,8]<=[2,4]T(1,0), use_global_device_ids=true, '
        'to_apply=%region_0.0.clone, '
        'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
    ),
    (
        'ROOT %all-reduce = f32[512]{0} all-reduce(%ynn_fusion), channel_id=1, '
        "replica_groups=mesh['data'=2,'model'=4] {'model','data'}, "
        'use_global_device_ids=true, to_apply=%region_0.0.clone, '
        'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
    ),
    (
        'ROOT %psum.7 = f32[64,512]{1,0} all-reduce(%param.1), channel_id=1, '
        'replica_groups={{0,4,1,5,2,6,3,7}}, use_global_device_ids=true, '
        'to_apply=%region_0.0, '
        'metadata={op_name="jit(<lambda>)/shard_map/psum" stack_frame_id=5}'
    ),
]


@pytest.mark.parametrize("line", SAME_COLLECTIVE)
def test_same_collective_in_every_form(line):
    assert device_groups(line, 8) == [[0, 4, 1, 5, 2, 6, 3, 7]]


# A reshape (R, 16) -> (2, R/2, 16) of an array sharded over x (size 4) of an x=4,y=2,z=4 mesh puts
# the major half of x, the sub-axis x:(1)2, on the new dim 0; summing that dim reduces over it.
# id = 8x + 4y + z and x = 2i + j, so each group is {k, k + 16}: x in {j, 2 + j}.
SUB_AXIS_MAJOR = [
    (
        '%all-reduce = f32[512,16]{1,0} all-reduce(%param), channel_id=1, '
        "replica_groups=mesh['axis_0'=2,'axis_1'=2,'axis_2'=1,'axis_3'=8] {'axis_0'}, "
        'use_global_device_ids=true, to_apply=%region_0.0.clone, '
        'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
    ),
    (
        '%all-reduce = f32[512,16]{1,0} all-reduce(%param), channel_id=1, '
        "replica_groups=mesh['x'=4,'y'=2,'z'=4] {'x':(1)2}, "
        'use_global_device_ids=true, to_apply=%region_0.0.clone, '
        'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
    ),
    (
        '%all-reduce = f32[512,16]{1,0} all-reduce(%param), channel_id=1, '
        'replica_groups=[16,2]<=[2,16]T(1,0), use_global_device_ids=true, '
        'to_apply=%region_0.0.clone, '
        'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
    ),
]
# Summing dim 1 instead reduces over the minor half x:(2)2: groups {x=2i, x=2i+1} = {k, k + 8}.
SUB_AXIS_MINOR = [
    (
        '%all-reduce = f32[1,16]{1,0} all-reduce(%ynn_fusion), channel_id=1, '
        "replica_groups=mesh['x'=4,'y'=2,'z'=4] {'x':(2)2}, "
        'use_global_device_ids=true, to_apply=%region_0.0.clone, '
        'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
    ),
    (
        '%all-reduce = f32[1,16]{1,0} all-reduce(%ynn_fusion), channel_id=1, '
        'replica_groups=[16,2]<=[2,2,8]T(0,2,1), use_global_device_ids=true, '
        'to_apply=%region_0.0.clone, '
        'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
    ),
    (
        '%all-reduce = f32[1,16]{1,0} all-reduce(%ynn_fusion), channel_id=1, '
        "replica_groups=mesh['axis_0'=2,'axis_1'=2,'axis_2'=1,'axis_3'=8] {'axis_1'}, "
        'use_global_device_ids=true, to_apply=%region_0.0.clone, '
        'metadata={op_name="jit(<lambda>)/reduce_sum" stack_frame_id=3}'
    ),
]


@pytest.mark.parametrize("line", SUB_AXIS_MAJOR)
def test_sub_axis_major(line):
    groups = device_groups(line, 32)
    assert groups == [[k, k + 16] for k in range(16)]
    assert axes_of_groups(groups, (4, 2, 4), ("x", "y", "z")) == ()


@pytest.mark.parametrize("line", SUB_AXIS_MINOR)
def test_sub_axis_minor(line):
    groups = device_groups(line, 32)
    assert groups == [[k + 16 * i, k + 16 * i + 8] for i in range(2) for k in range(8)]
    assert axes_of_groups(groups, (4, 2, 4), ("x", "y", "z")) == ()


# (line, mesh sizes, mesh names, axes the permute moves data along)
REAL_PERMUTES = [
    # jnp.roll along dim 0 sharded over "model" of data=2,model=4 (Shardy)
    (
        '%collective-permute = f32[1,512]{1,0} collective-permute(%wrapped_slice), '
        'channel_id=1, '
        'source_target_pairs={{0,1},{4,5},{1,2},{5,6},{2,3},{6,7},{3,0},{7,4}}, '
        'metadata={op_name="jit(<lambda>)/jit(_roll_static)/concatenate" stack_frame_id=3}',
        (2, 4), ("data", "model"), ("model",),
    ),
    # shard_map ppermute over "data", perm [(0,1),(1,0)]
    (
        'ROOT %ppermute.3 = f32[64,512]{1,0} collective-permute(%param.1), '
        'channel_id=1, '
        'source_target_pairs={{0,4},{4,0},{1,5},{5,1},{2,6},{6,2},{3,7},{7,3}}, '
        'metadata={op_name="jit(<lambda>)/shard_map/ppermute" stack_frame_id=4}',
        (2, 4), ("data", "model"), ("data",),
    ),
    # jnp.roll along dim 0 sharded over "y" of x=4,y=2,z=4
    (
        '%collective-permute = f32[1,2048]{1,0} collective-permute(%wrapped_slice), '
        'channel_id=1, '
        'source_target_pairs={{0,4},{1,5},{2,6},{3,7},{8,12},{9,13},{10,14},{11,15},'
        '{16,20},{17,21},{18,22},{19,23},{24,28},{25,29},{26,30},{27,31},{4,0},{5,1},'
        '{6,2},{7,3},{12,8},{13,9},{14,10},{15,11},{20,16},{21,17},{22,18},{23,19},'
        '{28,24},{29,25},{30,26},{31,27}}, '
        'metadata={op_name="jit(<lambda>)/jit(_roll_static)/concatenate" stack_frame_id=3}',
        (4, 2, 4), ("x", "y", "z"), ("y",),
    ),
    # shard_map ppermute over the size-1 axis "q" of p=4,q=1,r=4: everyone sends to itself
    (
        'ROOT %ppermute.3 = f32[64,1024]{1,0} collective-permute(%param.1), '
        'channel_id=1, '
        'source_target_pairs={{0,0},{1,1},{2,2},{3,3},{4,4},{5,5},{6,6},{7,7},'
        '{8,8},{9,9},{10,10},{11,11},{12,12},{13,13},{14,14},{15,15}}, '
        'metadata={op_name="jit(<lambda>)/shard_map/ppermute" stack_frame_id=4}',
        (4, 1, 4), ("p", "q", "r"), (),
    ),
    # Partitioner-made permute (a transposing reshard) on data=2,model=4: 4=(1,0) -> 2=(0,2)
    # moves along both axes; {0,0},{1,1},... stay put.
    (
        "%cp = collective-permute(%x), channel_id=2, "
        "source_target_pairs={{0,0},{1,1},{4,2},{5,3},{2,4},{3,5},{6,6},{7,7}}",
        (2, 4), ("data", "model"), ("data", "model"),
    ),
]


@pytest.mark.parametrize("line, sizes, names, expected", REAL_PERMUTES)
def test_real_permutes(line, sizes, names, expected):
    pairs = source_target_pairs(line)
    assert device_groups(line, int(np.prod(sizes))) is None
    assert axes_of_pairs(pairs, sizes, names) == expected


# --- property: groups built independently with numpy, in all three textual forms ---------------


@st.composite
def mesh_and_subset(draw):
    sizes = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    names = tuple(f"m{i}" for i in range(len(sizes)))
    chosen = draw(st.permutations(range(len(sizes))))
    k = draw(st.integers(0, len(sizes)))
    return sizes, names, list(chosen[:k])


def _reference_groups(sizes, chosen):
    """Groups of a collective over `chosen` (in that order): move those axes last, flatten."""
    ids = np.arange(int(np.prod(sizes))).reshape(sizes)
    moved = np.moveaxis(ids, chosen, list(range(len(sizes) - len(chosen), len(sizes))))
    size = int(np.prod([sizes[a] for a in chosen]))
    return moved.reshape(-1, size).tolist()


@settings(max_examples=300, deadline=None)
@given(mesh_and_subset())
def test_property_all_forms_round_trip(case):
    sizes, names, chosen = case
    n = int(np.prod(sizes))
    expected_groups = _reference_groups(sizes, chosen)
    expected_axes = tuple(nm for i, nm in enumerate(names) if i in chosen and sizes[i] > 1)

    explicit = "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in expected_groups) + "}"
    held = [a for a in range(len(sizes)) if a not in chosen]
    iota = (
        f"[{len(expected_groups)},{len(expected_groups[0])}]<=[{','.join(map(str, sizes))}]"
        f"T({','.join(map(str, held + chosen))})"
    )
    mesh = (
        "mesh[" + ",".join(f"'{nm}'={s}" for nm, s in zip(names, sizes, strict=True)) + "] {"
        + ",".join(f"'{names[a]}'" for a in chosen) + "}"
    )
    for text in (explicit, iota, mesh):
        line = f"%c = f32[4] all-reduce(%p), channel_id=1, replica_groups={text}, to_apply=%add"
        groups = device_groups(line, n)
        assert groups == expected_groups, text
        assert axes_of_groups(groups, sizes, names) == expected_axes, text


@settings(max_examples=200, deadline=None)
@given(mesh_and_subset(), st.randoms(use_true_random=False))
def test_property_mesh_form_with_device_ids(case, rnd):
    """A mesh form with an explicit device_ids permutation walks the permuted array."""
    sizes, names, chosen = case
    n = int(np.prod(sizes))
    perm = list(range(n))
    rnd.shuffle(perm)
    ids = np.array(perm).reshape(sizes)
    moved = np.moveaxis(ids, chosen, list(range(len(sizes) - len(chosen), len(sizes))))
    expected = moved.reshape(-1, int(np.prod([sizes[a] for a in chosen]))).tolist()
    mesh = (
        "mesh[" + ",".join(f"'{nm}'={s}" for nm, s in zip(names, sizes, strict=True)) + "], "
        f"device_ids=({','.join(map(str, perm))}) {{"
        + ",".join(f"'{names[a]}'" for a in chosen) + "}"
    )
    assert device_groups(f"x = all-gather(p), replica_groups={mesh}, dimensions={{0}}", n) == (
        expected
    )


# A multi-slice mesh data=4,model=2 on 2 TPU slices, data split 2 (slices, outer) x 2 (inside):
# position 2d+m, slice 0 holds data 0-1 (positions 0-3), slice 1 data 2-3 (positions 4-7).
SLICES = ((0, 1, 2, 3), (4, 5, 6, 7))
PEERS = ((0, 4), (1, 5), (2, 6), (3, 7))     # the same chip of each slice


def test_a_collective_over_the_part_of_an_axis_inside_each_slice_is_over_that_axis():
    # The all-gather over data, as libtpu runs it inside each slice: data 0-1 and data 2-3.
    inside = [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert axes_of_groups(inside, (4, 2), ("data", "model")) == ()
    assert axes_of_groups(inside, (4, 2), ("data", "model"), within=SLICES) == ("data",)


def test_a_collective_over_the_part_of_an_axis_between_slices_is_over_that_axis():
    # Its DCN leg: data 0 with data 2, data 1 with data 3.
    across = [[0, 4], [2, 6], [1, 5], [3, 7]]
    assert axes_of_groups(across, (4, 2), ("data", "model")) == ()
    assert axes_of_groups(across, (4, 2), ("data", "model"), within=PEERS) == ("data",)


def test_cut_groups_must_still_be_an_axis_cut_by_the_blocks():
    # Half of the in-slice pairs: no collective over data gives only these.
    assert axes_of_groups([[0, 2], [4, 6]], (4, 2), ("data", "model"), within=SLICES) == ()
    # Pairs over data inside the slices are no cut of data between them.
    assert axes_of_groups([[0, 2], [1, 3], [4, 6], [5, 7]], (4, 2), ("data", "model"),
                          within=PEERS) == ()
    # A whole axis inside every slice is still that axis.
    assert axes_of_groups([[0, 1], [2, 3], [4, 5], [6, 7]], (4, 2), ("data", "model"),
                          within=SLICES) == ("model",)
