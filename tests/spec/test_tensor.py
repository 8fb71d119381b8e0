"""Mesh and spec text parsing, and the spec checks. No compile needed."""

import pytest

from explorer import (
    DivisibilityError,
    DuplicateAxisError,
    MeshError,
    RankError,
    SpecError,
    TensorError,
    TensorSpec,
    UnknownAxisError,
    parse_mesh,
    parse_spec,
)
from explorer.spec.tensor import check_spec, format_spec


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
                                  "__import__('os')", "data;rm", "data=2", "a:b"])
def test_parse_spec_rejects_with_the_text(text):
    with pytest.raises(SpecError) as e:
        parse_spec(text)
    assert repr(text) in str(e.value) or text.strip() in str(e.value)


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
    with pytest.raises(RankError, match="1 entries but the tensor has rank 2"):
        check_spec(TensorSpec("w", (8, 8), spec="data"), MESH)
    check_spec(TensorSpec("w", (8, 8), spec=""), MESH)   # empty = replicated, any rank


def test_divisibility_names_dim_and_axes():
    # 4096 rows over data×model = 8 is fine; 4098 is not (4098 = 8*512 + 2).
    check_spec(TensorSpec("w2", (4096, 8), spec="(data,model),None"), MESH)
    with pytest.raises(DivisibilityError) as e:
        check_spec(TensorSpec("w2", (4098, 8), spec="(data,model),None"), MESH)
    assert "dimension 0 (size 4098) is not divisible by data×model=8" in str(e.value)


@pytest.mark.parametrize("shape, fragment", [((0, 4), "dimension 0"), ((-1, 4), "dimension -1"),
                                              (("a", 4), "dimension 'a'"), ("big", "dimension")])
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
