"""Mesh axes mapped onto a target's physical axes: the segments and strides of a shared axis,
when a segment closes a ring, the forms a mapping may be written in, the default mapping's
greedy rule, and errors that name the limit or the choices.

(The mapping errors of a mesh too large for an axis and the text round trip are in
tests/cost/test_model.py.)"""

import pytest

from explorer._src.cost.mapping import MAX_FACTOR, check_mapping, default_mapping, parse_mapping
from explorer._src.errors import MappingError


def placement(mapping):
    """Mesh axis -> [(physical axis, factor, stride, wraps)]."""
    return {n: [(s.axis.name, s.factor, s.stride, s.wraps) for s in mapping.segments(n)]
            for n in mapping.names}


def test_mesh_axes_sharing_a_physical_axis_get_strides_inner_first():
    # tpu-v4-4x4x4 (wraparound on every axis of a whole cube): a and b share x, 2 chips each.
    # b, the inner mesh axis, takes neighbouring chips (stride 1); a steps over b's 2.
    m = check_mapping("tpu-v4-4x4x4", ("a", "b", "c", "d"), (2, 2, 4, 4),
                      "a=x:2,b=x:2,c=y,d=z")
    # a's 2 chips at stride 2 go round all 4 of x (2·2 = 4): a closed ring; b's 2 neighbours
    # (2·1 = 2 of 4) are not.
    assert placement(m) == {"a": [("x", 2, 2, True)], "b": [("x", 2, 1, False)],
                            "c": [("y", 4, 1, True)], "d": [("z", 4, 1, True)]}
    assert m.to_dict() == {"a": "x:2", "b": "x:2", "c": "y", "d": "z"}


def test_a_mesh_axis_may_span_several_physical_axes_and_a_part_of_one():
    # tpu-v5p-16x16x24 has 6144 chips = 3·2048: b spans x (16), y (16) and 8 of z; a takes the
    # other 3 of z at stride 8, which goes round z's 24 (3·8 = 24, whole cubes wrap).
    m = check_mapping("tpu-v5p-16x16x24", ("a", "b"), (3, 2048), "a=z:3,b=x+y+z:8")
    assert placement(m) == {"a": [("z", 3, 8, True)],
                            "b": [("x", 16, 1, True), ("y", 16, 1, True), ("z", 8, 1, False)]}


def test_the_default_mapping_is_greedy_and_says_so_when_it_cannot_place_an_axis():
    # From the inner mesh axis b = 2048 and the inner physical axis z = 24: gcd(2048, 24) = 8
    # of z, leaving 256 to place on z's remaining 3, which share no factor with it.
    with pytest.raises(MappingError) as e:
        default_mapping("tpu-v5p-16x16x24", ("a", "b"), (3, 2048))
    assert "mesh axis 'b' still needs 256 devices but the next free physical axis is 'z'" \
        in str(e.value)
    assert "give a mapping such as 'b=...' over 'x', 'y', 'z'" in str(e.value)
    assert e.value.axis == "b"


def test_an_axis_of_size_one_and_every_axis_on_the_cpu_map_onto_nothing():
    assert default_mapping("h100-8", ("a", "b"), (1, 8)).to_dict() == {"a": "-", "b": "gpu"}
    cpu = default_mapping("cpu", ("a", "b"), (2, 4))
    assert cpu.to_dict() == {"a": "-", "b": "-"} and cpu.placement == ((), ())


@pytest.mark.parametrize("mapping", [
    "m=node+gpu",
    {"m": ["node", "gpu"]},
    {"m": [("node", 2), "gpu"]},
    {"m": ["node:2", ("gpu", 8)]},
])
def test_a_mapping_may_be_text_a_dict_of_names_or_name_factor_pairs(mapping):
    # h100-8x2: 2 nodes of 8 GPUs; a mesh axis of 16 spans both.
    m = check_mapping("h100-8x2", ("m",), (16,), mapping)
    assert m.to_dict() == {"m": "node+gpu"}
    # An AxisMapping is taken as it is written.
    assert check_mapping("h100-8x2", ("m",), (16,), m) == m


def test_parse_mapping_reads_each_mesh_axis_and_its_physical_axes():
    assert parse_mapping(" data = node , model=gpu:4+node:2 ,") == {
        "data": ("node",), "model": ("gpu:4", "node:2")}


@pytest.mark.parametrize("mapping, message", [
    ("data", "mapping entry 'data' in 'data' is not mesh_axis=physical axes; write e.g. "
             "'data=slice,model=x+y'"),
    ("a=gpu:abc", f"'gpu:abc' has factor 'abc', not a whole number from 1 to {MAX_FACTOR}"),
    ("q=gpu", "mapping names mesh axis 'q', which the mesh lacks; mesh axes: 'a'"),
    ("a=x", "mapped to 'x', which h100-8 lacks; its axes: 'gpu' (NVLink, 8 GPUs in a node)"),
    ({}, "mesh axis 'a' (size 8) is not mapped; map it onto 'gpu' (NVLink, 8 GPUs in a node)"),
    ({"a": 3}, "mapping of mesh axis 'a': 3 is not a physical axis name, 'name:k', (name, k)"),
    (5, "mapping 5 is not text like 'data=node,model=gpu'"),
    ("a=gpu:3", "takes 3 from 'gpu' but a node has 8 GPUs on NVLink; a factor must divide 8"),
])
def test_a_bad_mapping_names_what_is_wrong_and_what_would_do(mapping, message):
    with pytest.raises(MappingError) as e:
        check_mapping("h100-8", ("a",), (8,), mapping)
    assert message in str(e.value)


def test_a_mesh_whose_device_count_is_not_the_targets_names_targets_that_fit():
    # 16 devices: the 4x4 TPU slices and the GPU pairs of nodes have 16.
    with pytest.raises(MappingError) as e:
        default_mapping("h100-8", ("a",), (16,))
    assert ("has 16 devices but h100-8 has 8 chips; targets with 16 devices: 'h100-8x2', "
            "'h200-8x2', 'a100-8x2', 'b200-8x2', 'tpu-v5e-4x4'") in str(e.value)


def test_a_long_list_of_fitting_targets_is_cut_short():
    # 256 devices fit 25 targets (32 nodes of each GPU, the TPU pods and their multi-slice
    # forms): the first 8 are named, and how many more.
    with pytest.raises(MappingError, match=r"targets with 256 devices: 'h100-8x32', .*, "
                                           r"'tpu-v5e-4x8-8slices' and 17 more"):
        default_mapping("h100-8", ("a",), (256,))


def test_segments_of_an_axis_the_mesh_lacks_names_the_mesh_axes():
    m = default_mapping("h100-8", ("a", "b"), (2, 4))
    with pytest.raises(MappingError, match="mesh axis 'zz', which the mesh lacks; mesh axes: "
                                           "'a', 'b'"):
        m.segments("zz")
