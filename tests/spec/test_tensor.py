"""Mesh and spec text parsing, and the spec checks. No compile needed."""

import json

import pytest

from explorer import (
    AxisType,
    DivisibilityError,
    DuplicateAxisError,
    MeshError,
    MeshSpec,
    RankError,
    SpecError,
    TensorError,
    TensorSpec,
    UnknownAxisError,
    parse_mesh,
    parse_spec,
)
from explorer._src.spec.bounds import MAX_ELEMENTS, MAX_MESH_DEVICES, MAX_RANK, show
from explorer._src.spec.tensor import check_spec, format_spec


@pytest.mark.parametrize("text, expected", [
    ("None,model", (None, "model")),
    ("_,model", (None, "model")),
    ("(data,fsdp),None", (("data", "fsdp"), None)),
    ("P('data', None)", ("data", None)),
    ('PartitionSpec("data", ("fsdp", "model"))', ("data", ("fsdp", "model"))),
    ("P()", ()),
    ("", ()),
    ("  data , None ", ("data", None)),
    ("(model,),None", ("model", None)),   # a one-axis tuple is that axis
    ("(),data", (None, "data")),          # an empty tuple is not split
])
def test_parse_spec(text, expected):
    assert parse_spec(text) == expected


@pytest.mark.parametrize("text", ["data,,", "P('data'", "(data,None", "data model", "1,2",
                                  "__import__('os')", "data;rm", "data=2", "a:b", None, 5,
                                  ("data",)])
def test_parse_spec_rejects_with_the_text(text):
    with pytest.raises(SpecError) as e:
        parse_spec(text)
    assert repr(text) in str(e.value) or str(text).strip() in str(e.value)


def test_format_spec_round_trips():
    for spec in [(None, "model"), (("data", "fsdp"), None), ("data",)]:
        assert parse_spec(format_spec(spec)) == spec
    assert format_spec(()) == "replicated"
    assert format_spec((None, None)) == "replicated"


def test_parse_mesh_text_and_mapping():
    m = parse_mesh("data=2, model=4")
    assert m.names == ("data", "model") and m.sizes == (2, 4) and m.device_count == 8
    assert parse_mesh({"data": 2, "model": 4}) == m
    assert m.axis_type == "auto"
    assert parse_mesh("x=8", axis_type="explicit").axis_type == "explicit"


def test_axis_type_text_is_read_as_its_member_and_written_back_as_that_text():
    explicit = MeshSpec(("x",), (8,), "explicit")
    assert explicit.axis_type is AxisType.EXPLICIT
    assert json.loads(json.dumps(explicit.to_dict())) == {"axes": {"x": 8}, "devices": 8,
                                                           "axis_type": "explicit"}
    # Text and member give one mesh: equal, and one key in a cache.
    auto = MeshSpec(("x",), (8,), "auto")
    assert auto.axis_type is AxisType.AUTO
    assert auto == MeshSpec(("x",), (8,), AxisType.AUTO) == MeshSpec(("x",), (8,))
    assert len({auto, MeshSpec(("x",), (8,))}) == 1
    with pytest.raises(MeshError, match="axis type 'Auto' is not one of 'auto', 'explicit'"):
        MeshSpec(("x",), (8,), "Auto")


@pytest.mark.parametrize("text, fragment", [
    ("data=0", "size 0"),
    ("data=-2", "size -2"),
    ("data=two", "'two'"),
    ("data=2.5", "'2.5'"),
    ("data", "no '='"),
    ("data=2,data=4", "appears twice"),
    ("1x=2", "'1x'"),
    ("", "no axes"),
])
def test_bad_mesh_names_the_value(text, fragment):
    with pytest.raises(MeshError) as e:
        parse_mesh(text)
    assert fragment in str(e.value)


def test_mesh_over_the_device_limit():
    with pytest.raises(MeshError, match="4096 devices, more than the limit of 2048"):
        parse_mesh("a=64,b=64").check_device_limit(2048)


MESH = parse_mesh("data=2,model=4")


def test_unknown_axis_lists_valid_axes():
    with pytest.raises(UnknownAxisError) as e:
        check_spec(TensorSpec("w1", (1024, 4096), spec="None,modle"), MESH)
    assert "'modle'" in str(e.value) and "'data', 'model'" in str(e.value)
    assert e.value.tensor == "w1" and e.value.axis == "modle" and e.value.mesh == MESH


def test_axis_used_twice():
    with pytest.raises(DuplicateAxisError, match="'model' is used for dimensions 0 and 1"):
        check_spec(TensorSpec("w", (8, 8), spec="model,model"), MESH)
    with pytest.raises(DuplicateAxisError):
        check_spec(TensorSpec("w", (8, 8), spec="(data,model),model"), MESH)


def test_entry_count_must_match_rank():
    with pytest.raises(RankError, match="3 entries but the tensor has rank 2"):
        check_spec(TensorSpec("w", (8, 8), spec="data,None,None"), MESH)
    check_spec(TensorSpec("w", (8, 8), spec=""), MESH)   # empty = replicated, any rank


def test_a_short_spec_leaves_the_rest_unsplit_as_jax_reads_it():
    # jax pads a PartitionSpec shorter than the array's rank with None: the shard shape of
    # P('data') on an (8, 6, 4) array is plain jax's own.
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    t = TensorSpec("x", (8, 6, 4), spec=P("data"))
    assert t.spec == ("data", None, None)
    mesh = Mesh(np.array(jax.devices()[:2]), ("data",))
    assert NamedSharding(mesh, P("data")).shard_shape((8, 6, 4)) == (4, 6, 4)
    assert TensorSpec("x", (8, 6, 4), spec="data").spec == t.spec


def test_divisibility_names_dim_and_axes():
    # 4096 rows over data×model = 8 is fine; 4098 is not (4098 = 8*512 + 2).
    check_spec(TensorSpec("w2", (4096, 8), spec="(data,model),None"), MESH)
    with pytest.raises(DivisibilityError) as e:
        check_spec(TensorSpec("w2", (4098, 8), spec="(data,model),None"), MESH)
    assert "dimension 0 (size 4098) is not divisible by data×model=8" in str(e.value)


@pytest.mark.parametrize("shape, fragment", [((0, 4), "dimension 0"), ((-1, 4), "dimension -1"),
                                              (("a", 4), "dimension 'a'"),
                                              ("big", "a shape is a sequence of whole numbers")])
def test_bad_shapes(shape, fragment):
    with pytest.raises(TensorError, match=fragment):
        TensorSpec("x", shape)


def test_unknown_dtype_lists_choices():
    with pytest.raises(TensorError) as e:
        TensorSpec("x", (4,), dtype="float128")
    assert "'float128'" in str(e.value) and "'bfloat16'" in str(e.value)
    assert TensorSpec("x", (4,), dtype="bf16").dtype == "bfloat16"


def test_spec_accepts_jax_partitionspec():
    from jax.sharding import PartitionSpec as P

    assert TensorSpec("x", (4, 4), spec=P("data", None)).spec == ("data", None)
    assert TensorSpec("x", (4, 4), spec=P(("data", "model"), None)).spec == \
        (("data", "model"), None)


# --- bounds: every shape, spec and mesh that passes here fits what XLA computes with ---------

@pytest.mark.parametrize("shape, fragment", [
    ((2 ** 70,), "the limit is 2**48 elements per tensor"),         # beyond int64 alone
    ((2 ** 40, 2 ** 40), "the limit is 2**48 elements per tensor"),  # each dim fits, not both
    ((2 ** 62,), "the limit is 2**48 elements per tensor"),         # its bytes overflow int64
    ((1,) * 17, "more than 16 dimensions; the limit is 16"),
    ((True, 4), "dimension True"),
    ((4.0, 4), "dimension 4.0"),
    ((4, None), "dimension None"),
    ((0,), "dimension 0"),
    (5.5, "shape 5.5"),
    (None, "shape None"),
])
def test_shapes_beyond_the_bounds_name_the_value_and_the_limit(shape, fragment):
    with pytest.raises(TensorError) as e:
        TensorSpec("x", shape)
    assert fragment in str(e.value) and e.value.tensor == "x"


def test_shapes_at_the_bounds_pass_and_numpy_ints_are_ints():
    import numpy as np

    assert TensorSpec("x", (2 ** 24, 2 ** 24)).shape == (2 ** 24, 2 ** 24)   # = MAX_ELEMENTS
    assert 2 ** 24 * 2 ** 24 == MAX_ELEMENTS
    assert TensorSpec("x", (1,) * MAX_RANK).rank == MAX_RANK
    shape = TensorSpec("x", (np.int64(4), np.int32(8))).shape
    assert shape == (4, 8) and all(type(d) is int for d in shape)
    with pytest.raises(TensorError, match="dimension np.True_"):
        TensorSpec("x", (np.bool_(True),))


def test_an_endless_shape_does_not_hang():
    import itertools

    with pytest.raises(TensorError, match="more than 16 dimensions"):
        TensorSpec("x", itertools.repeat(2))


def test_a_huge_int_in_a_message_is_shown_by_its_size():
    # Python refuses to print an int of more than 4300 digits; the message must still come out.
    with pytest.raises(TensorError, match="an int of 16610 bits"):
        TensorSpec("x", (10 ** 5000,))
    assert show(10 ** 5000) == "<an int of 16610 bits>"
    assert show("a" * 200).endswith("...") and len(show("a" * 200)) == 80


@pytest.mark.parametrize("spec", [5, 1.5, True, {"data"}, object()])
def test_a_spec_that_is_no_spec_form_is_a_spec_error(spec):
    with pytest.raises(SpecError) as e:
        TensorSpec("x", (4,), spec=spec)
    assert show(spec) in str(e.value) and "a jax PartitionSpec" in str(e.value)


@pytest.mark.parametrize("spec, fragment", [((5,), "spec entry 5"), (((1, 2),), "(1, 2)"),
                                            ([None, 2.5], "spec entry 2.5")])
def test_a_bad_spec_entry_names_it(spec, fragment):
    with pytest.raises(SpecError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        TensorSpec("x", (4, 4), spec=spec)


def test_partitionspec_with_unreduced_axes_is_refused():
    from jax.sharding import PartitionSpec as P

    with pytest.raises(SpecError, match="unreduced or reduced axes"):
        TensorSpec("x", (4, 4), spec=P("data", None, unreduced={"model"}))


@pytest.mark.parametrize("dtype", [None, 5, ["float32"], float("nan")])
def test_a_dtype_that_is_no_name_lists_the_choices(dtype):
    with pytest.raises(TensorError, match="is not supported; choose one of 'float32'"):
        TensorSpec("x", (4,), dtype=dtype)


def test_dtype_from_numpy_and_jax_types():
    import jax.numpy as jnp
    import numpy as np

    assert TensorSpec("x", (4,), dtype=np.float32).dtype == "float32"
    assert TensorSpec("x", (4,), dtype=jnp.bfloat16).dtype == "bfloat16"
    assert TensorSpec("x", (4,), dtype=np.dtype("int8")).dtype == "int8"


@pytest.mark.parametrize("mesh, fragment", [
    ({"a": 2 ** 21}, "has size 2097152, more devices than any machine has; the limit is 2**20"),
    ({"a": 2 ** 11, "b": 2 ** 10}, "2097152 devices, more than any machine has"),
    ("a=" + "9" * 5000, "the limit is 2**20"),      # int() of 5000 digits would raise
    ({"a": 10 ** 5000}, "an int of 16610 bits"),
    ({f"a{i}": 1 for i in range(17)}, "17 axes; the limit is 16"),
    ({"a": 2.0}, "has size 2.0"),
    ({"a": True}, "has size True"),
    ({3: 2}, "mesh axis name 3"),
    ("data=2", None),
])
def test_mesh_bounds(mesh, fragment):
    if fragment is None:
        assert parse_mesh(mesh).device_count == 2
        return
    with pytest.raises(MeshError) as e:
        parse_mesh(mesh)
    assert fragment in str(e.value)


def test_largest_mesh_passes():
    assert parse_mesh({"a": 2 ** 10, "b": 2 ** 10}).device_count == MAX_MESH_DEVICES
    with pytest.raises(MeshError, match="axis type 'implicit' is not one of 'auto', 'explicit'"):
        parse_mesh("a=2", axis_type="implicit")
    with pytest.raises(MeshError, match=r"axis type \['auto'\]"):
        parse_mesh("a=2", axis_type=["auto"])


def test_format_spec_text_reads_back_and_reserved_words_are_not_axis_names():
    from explorer._src.spec.tensor import format_spec, parse_spec
    for spec in [(), ("data", None), (("data", "model"), None), (None, None)]:
        assert parse_spec(format_spec(spec)) == (spec if any(spec) else ())
    assert format_spec(()) == "replicated" and parse_spec(" replicated ") == ()
    for word in ("None", "_", "replicated"):
        with pytest.raises(MeshError, match=f"mesh axis name '{word}' is reserved"):
            parse_mesh(f"{word}=2,model=4")
