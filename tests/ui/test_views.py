"""Heatmap cell labels that fit their cells (views.fitted_text, draw_grid)."""

import pytest

pytest.importorskip("plotly")

from explorer.ui.grids import Grid  # noqa: E402
from explorer.ui.views import _heatmap, draw_grid, fitted_text  # noqa: E402

# A 1-D tensor over 4 devices groups of 4 (the why panel's "before" of an all-gather of a
# [256] vector split over data=4 on a 4x4 mesh): one row, four blocks.
FOUR = [["b0: d0…d3 ×4", "b1: d4…d7 ×4", "b2: d8…d11 ×4", "b3: d12…d15 ×4"]]


def test_labels_that_fit_are_kept():
    # 4 columns in 800 px: 200 px a cell; the longest label, 14 characters at 7 px, is 98 px.
    assert fitted_text(FOUR, 800) == FOUR


def test_labels_too_wide_for_their_cells_are_cut_to_the_block():
    # 270 px / 4 = 67.5 px a cell: 98 px does not fit, "b3" (14 px) does.
    assert fitted_text(FOUR, 270) == [["b0", "b1", "b2", "b3"]]


def test_labels_dropped_when_even_the_block_does_not_fit():
    # 16 columns in 100 px: 6.25 px a cell, less than one character.
    row = [[f"b{i}: d{i}" for i in range(16)]]
    assert fitted_text(row, 100) == [[""] * 16]


def test_draw_grid_fits_labels_to_a_fixed_width_figure_and_keeps_the_hover():
    fig = _heatmap(300)
    fig.update_layout(width=360, margin=dict(l=80, r=10))     # as the why panel's layouts
    hover = [[f"block {i}" for i in range(4)]]
    grid = Grid(z=[[0, 1, 2, 3]], text=FOUR, hover=hover,
                x_labels=["0:64", "64:128", "128:192", "192:256"], y_labels=[""],
                title="dim 0 (256): 4 blocks over data")
    draw_grid(fig, grid, 4)
    # plot area 360 - 80 - 10 = 270 px, so the labels are cut as above.
    assert [list(r) for r in fig.data[0].text] == [["b0", "b1", "b2", "b3"]]
    assert [list(r) for r in fig.data[0].customdata] == hover


def test_a_combined_collective_expands_to_its_parts():
    # mlp_train under dp on data=8: XLA combines the two weight gradients' all-reduces into one
    # tuple-shaped all-reduce. Its parts are the gradients of w2 [4096, 1024] and w1
    # [1024, 4096], float32: 4096·1024·4 bytes = 16 MiB each.
    import re

    from explorer import analyze_workload
    from explorer.ui.views import collectives_html
    r = analyze_workload("mlp_train", "data=8", preset="dp")
    [c] = r.collectives
    assert c.parts == 2 and sorted(c.part_shapes) == [(1024, 4096), (4096, 1024)]
    rows = re.findall(r"<tr class='explorer-part-row'>(.*?)</tr>", collectives_html(r))
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows]
    assert [(x[1], x[3], x[4]) for x in cells] == [
        (f"↳ part {k + 1}", f"float32[{','.join(map(str, s))}]", "16.0 MiB")
        for k, s in enumerate(c.part_shapes)]
    assert "×2" in collectives_html(r)
