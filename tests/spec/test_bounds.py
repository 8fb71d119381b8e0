"""spec/bounds.py: the size bounds leave room under XLA's int64 byte counts, each is written as
people read it, and show() prints any user value for a message without ever raising.
(The validators that enforce the bounds are tested with their own modules: tests/spec,
tests/api/test_request.py.)"""

import pytest

from explorer._src.spec.bounds import (
    MAX_ELEMENTS,
    MAX_MESH_DEVICES,
    MAX_RANK,
    MAX_TENSORS,
    MAX_TOTAL_ELEMENTS,
    power_text,
    show,
)
from explorer._src.spec.tensor import DTYPE_BYTES

INT64_MAX = 2**63 - 1


def test_the_largest_inputs_in_the_widest_dtype_leave_room_under_int64_bytes():
    widest = max(DTYPE_BYTES.values())                  # 4 bytes (float32, int32, uint32)
    # All inputs together: 2**50 elements · 4 bytes = 2**52 bytes, 2**11 times under int64, so
    # intermediates a few times larger than the inputs still have a byte count XLA can hold.
    assert MAX_TOTAL_ELEMENTS * widest == 2**52 and MAX_TOTAL_ELEMENTS * widest * 2**10 < INT64_MAX
    # One tensor is bounded below all of them: 2**48 ≤ 2**50.
    assert MAX_ELEMENTS <= MAX_TOTAL_ELEMENTS and MAX_TENSORS <= MAX_TOTAL_ELEMENTS


def test_the_bounds_are_above_real_models_and_machines():
    # A 70B LLM's logits [1024, 8192, 128256] are about 2**40 elements; rank 5 or 6 at most.
    assert 1024 * 8192 * 128256 < MAX_ELEMENTS and MAX_RANK >= 6
    # The largest machines: a v5p pod's 8960 chips, GPU clusters of 10**5.
    assert 10**5 < MAX_MESH_DEVICES


@pytest.mark.parametrize("n, text", [
    (2**48, "2**48"), (2**20, "2**20"), (2048, "2**11"),   # powers of two over 1024
    (1024, "1024"), (16, "16"),                            # small ones as they are
    (4096 + 1, "4097"), (10**6, "1000000"),                # not powers of two
])
def test_a_bound_is_written_as_a_power_of_two_when_it_is_a_large_one(n, text):
    assert power_text(n) == text


def test_show_is_repr_cut_to_the_limit_with_an_ellipsis():
    assert show("data") == "'data'"
    # 100 characters and the quotes: 102, cut to 77 and "...".
    shown = show("x" * 100)
    assert len(shown) == 80 and shown == "'" + "x" * 76 + "..."
    assert show([1, 2, 3], limit=5) == "[1..."


def test_show_never_raises_on_an_int_python_will_not_print():
    huge = 10**5000                # more than 4300 digits: repr() raises ValueError
    assert show(huge) == f"<an int of {huge.bit_length()} bits>"
    # Inside a tuple or list, the items around it are still shown.
    assert show((1, huge)) == f"(1, <an int of {huge.bit_length()} bits>)"
    assert show([huge]).startswith("[<an int of ")


class BrokenRepr:
    def __repr__(self):
        raise RuntimeError("no repr")


def test_show_names_the_type_of_an_object_whose_repr_fails():
    assert show(BrokenRepr()) == "<a BrokenRepr>"


@pytest.mark.parametrize("mesh", ["a" * 100_000, "data=2," + "b" * 100_000,
                                  "x" * 50_000 + "=0"])
def test_a_huge_mesh_text_gives_a_short_error(mesh):
    # Issue 43: a mesh string of N characters gave an error of 2N (200 KB for 100,000).
    from explorer._src.errors import MeshError
    from explorer._src.spec.mesh import parse_mesh

    with pytest.raises(MeshError) as e:
        parse_mesh(mesh)
    assert len(str(e.value)) < 400
