"""Heatmap cell labels that fit their cells (views.fitted_text, draw_grid)."""

import pytest

pytest.importorskip("plotly")

from explorer._src.ui.grids import Grid  # noqa: E402
from explorer._src.ui.views import _heatmap, draw_grid, fitted_text, tick_labels  # noqa: E402

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
    from explorer._src.ui.views import collectives_html
    r = analyze_workload("mlp_train", "data=8", preset="dp")
    [c] = r.collectives
    assert c.parts == 2 and sorted(c.part_shapes) == [(1024, 4096), (4096, 1024)]
    rows = re.findall(r"<tr class='explorer-part-row'>(.*?)</tr>", collectives_html(r))
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows]
    assert [(x[1], x[3], x[4]) for x in cells] == [
        (f"↳ part {k + 1}", f"float32[{','.join(map(str, s))}]", "16.0 MiB")
        for k, s in enumerate(c.part_shapes)]
    assert "×2" in collectives_html(r)


@pytest.mark.tpu
@pytest.mark.slow
def test_the_collectives_table_marks_a_multi_slice_programs_dcn_legs():
    import importlib.util
    import re

    import explorer
    from explorer._src.ui.views import collectives_html

    if importlib.util.find_spec("libtpu") is None:
        pytest.skip("needs libtpu (the tpu extra)")
    # Data parallel over data=4 on two slices of 2x2 chips: data spans 2 chips of a slice and
    # the 2 slices. Each weight's gradient (1024 x 4096 float32 = 16 MiB for w1 and w2) is
    # reduce-scattered over the 2 chips inside a slice, its half (8 MiB) all-reduced across the
    # slices over the DCN, and gathered back inside each slice: each part is over data, on
    # one tier of its links.
    r = explorer.analyze_workload("mlp_train", "data=4,model=2", preset="dp",
                                  target="tpu-v5e-2x2-2slices")
    table = collectives_html(r)
    rows = re.findall(r"<td>(\d+)</td><td class='explorer-kind'>([^<]*)</td><td>([^<]*)</td>"
                      r"<td>[^<]*</td><td>([^<]*)</td>", table)
    # Numbered from 1, as the CLI's table is (issue 43: the app counted from 0).
    assert rows == [
        ("1", "reduce-scatter", "data (2)", "16.0 MiB"),
        ("2", "all-reduce async [DCN, with #1]", "data (2)", "8.0 MiB"),
        ("3", "reduce-scatter", "data (2)", "16.0 MiB"),
        ("4", "all-reduce async [DCN, with #3]", "data (2)", "8.0 MiB"),
        ("5", "all-gather", "data (2)", "16.0 MiB"),
        ("6", "all-gather", "data (2)", "16.0 MiB")]
    assert "[DCN]: the part of a collective that crosses TPU slices" in table


def _combined_report(part_shapes):
    from explorer._src.report.report import Collective, Cost, Memory, Report, Timing
    from explorer._src.spec.mesh import parse_mesh

    sizes = [4 * __import__("math").prod(s) for s in part_shapes]       # float32
    c = Collective("all-reduce", ("data",), 8, part_shapes[0], "float32", sum(sizes),
                   parts=len(part_shapes), groups=(tuple(range(8)),),
                   program_dtypes=("float32",) * len(part_shapes),
                   program_part_bytes=tuple(sizes), part_shapes=tuple(part_shapes))
    return Report(parse_mesh("data=8"), "shardy", "cpu", (c,), (),
                  Memory(0, 0, 0, 0, 0), Cost(None, None, None, sum(sizes)), Timing(0.0, 0.0))


def _combined_row(report):
    import re

    from explorer._src.ui.views import collectives_html
    row = re.search(r"<tr data-kind='all-reduce'[^>]*>(.*?)</tr>", collectives_html(report))
    return re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))


def test_a_combined_collectives_row_shows_every_parts_shape_beside_their_total_bytes():
    # Two parts: [64,64] and [64] float32, 16 KiB + 256 B. The row's shape is the tuple the
    # combined op moves, never its first part alone beside the total.
    from explorer._src.report.summary import collectives_table
    report = _combined_report([(64, 64), (64,)])
    cells = _combined_row(report)
    assert cells[3] == "(float32[64,64], float32[64])"
    assert cells[4] == "16.2 KiB"                     # 16384 + 256 bytes
    # The CLI's table says the same.
    [row] = [line for line in collectives_table(report) if "all-reduce" in line]
    assert "(float32[64,64], float32[64])" in row and "16.2 KiB" in row


def test_a_combined_collective_of_many_parts_is_written_as_their_count():
    # Five parts: the row names the tuple by its count and first shape; the part rows list all.
    shapes = [(64, 64), (64,), (32, 16), (16,), (8, 8)]
    cells = _combined_row(_combined_report(shapes))
    assert cells[3] == "(5 arrays: float32[64,64], …)"
    total = 4 * (64 * 64 + 64 + 32 * 16 + 16 + 64)
    assert cells[4] == f"{total / 1024:.1f} KiB"


# ------------------------------------------------------------ tick labels that never overlap

def test_tick_labels_that_fit_are_all_kept():
    # 4 columns 200 px apart: "192:256" is 7 characters, 49 px + an 8 px gap.
    labels = ["0:64", "64:128", "128:192", "192:256"]
    assert tick_labels(labels, ["0", "1", "2", "3"], 200, across=True) == (labels, labels, False)


def test_tick_labels_too_wide_give_way_to_the_short_ones_then_to_every_kth():
    labels = [f"{256 * i}:{256 * (i + 1)}" for i in range(16)]       # up to "3840:4096"
    short = [str(i) for i in range(16)]
    # 47.5 px a column: "3840:4096" needs 9·7 + 8 = 71 px; "15" needs 2·7 + 8 = 22.
    assert tick_labels(labels, short, 47.5, across=True) == (labels, short, True)
    # 11 px a column: "15" needs 22 px, two columns: every second label.
    assert tick_labels(labels, short, 11, across=True) == (
        labels[::2], short[::2], True)


def test_rows_get_a_label_each_where_they_are_tall_enough_else_every_kth():
    labels = [f"data={i}" for i in range(16)]
    short = [str(i) for i in range(16)]
    # A label is 16 px tall: rows 22 px apart take every one, 6 px apart every third.
    assert tick_labels(labels, short, 22, across=False) == (labels, labels, False)
    assert tick_labels(labels, short, 6, across=False) == (labels[::3], short[::3], True)


def test_a_16_by_16_device_grid_is_labelled_by_axis_index_on_every_row():
    # data=16,model=16: the figure grows to 16 rows of 22 px; the columns, 760 - 80 = 680 px
    # over 16 (42.5 px), take "15" but not "model=15" (8·7 + 8 = 64 px).
    from dataclasses import replace

    from explorer._src.spec.mesh import parse_mesh
    from explorer._src.ui.grids import _device_grid
    from explorer._src.ui.views import grid_figure
    report = replace(_combined_report([(1,)]), mesh=parse_mesh("data=16,model=16"))
    grid = _device_grid(report, list(range(256)), str, str, "devices")
    fig = grid_figure(grid, 256)
    assert list(fig.layout.yaxis.ticktext) == [f"data={i}" for i in range(16)]
    assert list(fig.layout.xaxis.ticktext) == [str(i) for i in range(16)]
    assert fig.layout.xaxis.title.text == "mesh axis model (16) · ticks: index along model"
    assert fig.layout.height >= 110 + 16 * 22
