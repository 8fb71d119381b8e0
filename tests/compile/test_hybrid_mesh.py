"""The hybrid mesh of several TPU slices (explorer/_src/compile/multislice.py), on stand-in devices:
each slice fills one block, the slices numbered row-major over the mesh axes' slice counts
(as jax's create_hybrid_device_mesh numbers its granules), its chips in their order inside.
No jax: tests/compile/test_multislice.py compiles on the real MegaScale devices."""

from typing import NamedTuple

import pytest

from explorer._src.compile.multislice import hybrid_device_array, ici_shape


class Chip(NamedTuple):
    slice_index: int
    chip: int


def chips(slices: int, per_slice: int) -> list[Chip]:
    return [Chip(s, c) for s in range(slices) for c in range(per_slice)]


def layout(array) -> list[list[tuple[int, int]]]:
    return [[(d.slice_index, d.chip) for d in row] for row in array.tolist()]


def test_slices_on_the_outer_axis_stack_whole_slices():
    assert layout(hybrid_device_array(chips(2, 4), (2, 4), (2, 1))) == [
        [(0, 0), (0, 1), (0, 2), (0, 3)], [(1, 0), (1, 1), (1, 2), (1, 3)]]


def test_slices_on_the_inner_axis_sit_side_by_side():
    assert layout(hybrid_device_array(chips(2, 4), (4, 2), (1, 2))) == [
        [(0, 0), (1, 0)], [(0, 1), (1, 1)], [(0, 2), (1, 2)], [(0, 3), (1, 3)]]


def test_an_axis_with_slices_and_chips_has_the_slices_outer():
    # data=4 is 2 slices x 2 chips: rows 0-1 are slice 0, rows 2-3 slice 1.
    assert layout(hybrid_device_array(chips(2, 4), (4, 2), (2, 1))) == [
        [(0, 0), (0, 1)], [(0, 2), (0, 3)], [(1, 0), (1, 1)], [(1, 2), (1, 3)]]


def test_slices_over_two_axes_are_numbered_row_major():
    # 4 slices of 4 chips on a 4x4 mesh, 2 slices along each axis: slice k at block (k//2, k%2).
    array = hybrid_device_array(chips(4, 4), (4, 4), (2, 2))
    for k in range(4):
        r, c = divmod(k, 2)
        block = array[2 * r:2 * r + 2, 2 * c:2 * c + 2]
        assert [[d.chip for d in row] for row in block.tolist()] == [[0, 1], [2, 3]]
        assert {d.slice_index for d in block.flat} == {k}


def test_a_mesh_that_does_not_divide_into_the_slices_is_refused():
    assert ici_shape((4, 2), (2, 1)) == (2, 2)
    with pytest.raises(ValueError, match="cannot span"):
        ici_shape((3, 2), (2, 1))
    with pytest.raises(ValueError, match="not 2 of 4"):
        hybrid_device_array(chips(4, 2), (2, 4), (2, 1))
