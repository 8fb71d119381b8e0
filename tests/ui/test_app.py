"""The explorer's widget logic without a browser: set values, click, assert on the model and on
what the widgets display (the hyperspy way). Edits compile at once here (no event loop)."""

from html import unescape

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from explorer.report.compare import Metric  # noqa: E402
from explorer.ui import Explorer  # noqa: E402
from explorer.ui.app import TAB_TITLES  # noqa: E402

MEGATRON = {"x": "data,None", "w1": "None,model", "w2": "model,None"}


@pytest.fixture
def app():
    a = Explorer(workload="mlp", mesh="data=2,model=4", specs=MEGATRON, debounce=None)
    yield a
    a.close()


def show(app, title):
    """Select a tab, as a user clicks it: only the visible tab is drawn."""
    app.tabs.selected_index = TAB_TITLES.index(title)


def mesh_size(app, axis, value):
    row = next(r for r in app.mesh_editor.rows.children if r.children[0].value == axis)
    row.children[1].value = value


def test_initial_result_is_the_megatron_all_reduce(app):
    [c] = app.report.collectives
    assert (c.kind, c.axes, c.bytes) == ("all-reduce", ("model",), 128 * 1024 * 4)
    show(app, "Collectives")
    assert "all-reduce" in app.collectives.table.value
    assert "<td>model</td>" in app.collectives.table.value
    assert app.status.value.count("compiled") == 1 and "8 devices" in app.status.value


def test_changing_a_spec_picker_recompiles(app):
    # Replicate w1 and w2: the data-parallel forward pass needs no collective at all.
    show(app, "Collectives")
    app.spec_rows["w1"].pickers[1].value = "None"
    app.spec_rows["w2"].pickers[0].value = "None"
    assert app.report.collectives == ()
    assert "No collectives" in app.collectives.table.value
    # Shard w1's rows over model (x split over data): x @ w1 contracts a model-split dimension,
    # so each device holds a partial sum of its [256/2, 4096] block of h, all-reduced over
    # model: V = 128 × 4096 × 4 bytes.
    app.spec_rows["w1"].pickers[0].value = "model"
    assert [(c.kind, c.axes, c.bytes) for c in app.report.collectives] == \
        [("all-reduce", ("model",), 128 * 4096 * 4)]


def test_invalid_mesh_size_shows_inline_error_and_keeps_last_result(app):
    good = app.report
    mesh_size(app, "model", 3)
    # 4096 columns of w1 over model=3 do not divide: the error sits on w1's row.
    assert "not divisible by model=3" in app.spec_rows["w1"].error.value
    assert app.report is good
    assert "explorer-stale" in app.tabs._dom_classes
    assert "error" in app.status.value
    mesh_size(app, "model", 4)
    assert app.spec_rows["w1"].error.value == ""
    assert "explorer-stale" not in app.tabs._dom_classes
    assert app.report.timing.cached          # the same request as before: from the cache


def test_zero_size_and_duplicate_axis_name_errors_name_the_value(app):
    mesh_size(app, "data", 0)
    assert "size 0" in app.mesh_editor.error.value
    mesh_size(app, "data", 2)
    app.mesh_editor.rows.children[1].children[0].value = "data"
    assert "'data' appears twice" in unescape(app.mesh_editor.error.value)
    app.mesh_editor.rows.children[1].children[0].value = "model"
    assert app.mesh_editor.error.value == "" and app.error is None


def test_add_and_remove_axes(app):
    app.mesh_editor.add.click()
    assert [n for n, _ in app.mesh_editor.axes] == ["data", "model", "axis0"]
    assert "16 devices" in app.mesh_editor.count.value
    assert app.report.mesh.device_count == 16
    # The new axis is offered in every spec picker.
    assert "axis0" in [v for _, v in app.spec_rows["x"].pickers[0].options]
    remove_model = app.mesh_editor.rows.children[1].children[2]
    remove_model.click()
    assert [n for n, _ in app.mesh_editor.axes] == ["data", "axis0"]
    # Pickers that named the removed axis fall back to "not split".
    assert app.spec_rows["w1"].spec == (None, None)
    assert app.report.mesh.names == ("data", "axis0")


def test_switching_workload_rebuilds_params_and_specs(app):
    app.workload_w.value = "matmul"
    assert set(app.spec_rows) == {"x", "w"}
    assert [c.description for c in app.params_box.children] == ["m", "k", "n", "dtype"]
    app.spec_rows["x"].pickers[1].value = "model"
    app.spec_rows["w"].pickers[0].value = "model"
    assert [(c.kind, c.axes) for c in app.report.collectives] == [("all-reduce", ("model",))]


def test_bad_param_value_is_reported_on_the_params(app):
    app.params_box.children[3].value = "float128"      # dtype
    assert "'float128'" in unescape(app.params_error.value)
    app.params_box.children[3].value = "bfloat16"
    assert app.params_error.value == ""
    assert app.report.tensor("w1").dtype == "bfloat16"


def test_selecting_a_collective_colours_its_groups_and_marks_its_hlo_line(app):
    show(app, "Collectives")
    app.collectives.pick.value = 0
    assert app.collectives.groups_box.layout.display == ""
    z = app.collectives.groups.data[0].z
    # Two all-reduce groups over model: the rows of the 2x4 device grid.
    assert [list(r) for r in z] == [[0, 0, 0, 0], [1, 1, 1, 1]]
    assert "explorer-selected" in app.collectives.table.value
    show(app, "HLO")
    assert "explorer-hlo-selected" in app.hlo.value


def test_placement_heatmap_colours_blocks_by_device(app):
    app.placement.tensor.value = "w1"
    t = app.placement.blocks.data[0]
    # w1 split over model on columns: one row of 4 blocks, first holders d0..d3.
    assert [list(r) for r in t.z] == [[0, 1, 2, 3]]
    assert [list(r) for r in t.text] == [["d0,d4", "d1,d5", "d2,d6", "d3,d7"]]
    mesh = app.placement.mesh.data[0]
    assert [list(r) for r in mesh.z] == [[0, 1, 2, 3], [0, 1, 2, 3]]
    # The figure's synced state matches, so a view opened later draws the same.
    assert [list(r) for r in app.placement.blocks._widget_data[0]["z"]] == [[0, 1, 2, 3]]


def test_memory_and_timing_views(app):
    m = app.report.memory
    assert app.memory.fig.data[0].x == (0,)          # not drawn while its tab is hidden
    show(app, "Memory")
    assert app.memory.fig.data[0].x == (m.arguments,)
    assert "total" in app.memory.text.value
    show(app, "Timing")
    assert "compile" in app.timing.text.value and "flops" in app.timing.text.value
    assert "Pick a target" in app.timing.text.value


def test_partitioner_toggle(app):
    app.partitioner_w.value = "gspmd"
    assert app.report.partitioner == "gspmd"
    assert [(c.kind, c.axes) for c in app.report.collectives] == [("all-reduce", ("model",))]


def test_target_adds_predictions_and_a_wrong_size_target_is_flagged():
    app = Explorer(workload="mlp", mesh="data=2,model=4", specs=MEGATRON, target="h100-8",
                   debounce=None)
    try:
        assert app.report.estimate.target == "h100-8"
        show(app, "Collectives")
        assert "est (h100-8)" in app.collectives.table.value
        show(app, "Timing")
        assert "Predicted on h100-8" in app.timing.text.value
        assert app.timing.box.layout.display == ""            # the roofline is shown
        show(app, "Memory")
        assert "Fits" in app.memory.text.value
        # 16 devices do not fit one 8-GPU node: the error names the targets that would.
        mesh_size(app, "data", 4)
        assert "h100-8x2" in unescape(app.target_error.value)
        app.target_w.value = "h100-8x2"
        assert app.target_error.value == "" and app.report.mesh.device_count == 16
        app.mapping_w.value = "data=gpu"
        assert "data" in unescape(app.target_error.value)
        app.mapping_w.value = ""
        assert app.target_error.value == ""
    finally:
        app.close()


def test_preset_places_unpinned_tensors_and_picks_win():
    app = Explorer(workload="transformer", mesh="data=2,model=4", preset="megatron",
                   debounce=None)
    try:
        # Megatron: q/k/v split by heads over model, the output projection by heads too,
        # the MLP column- then row-parallel (rules heads=model, mlp=model, batch=data).
        assert app.spec_rows["wq"].spec == (None, "model", None)
        assert app.spec_rows["w1"].spec == (None, "model")
        assert app.spec_rows["w2"].spec == ("model", None)
        assert ("all-reduce", ("model",)) in {(c.kind, c.axes) for c in app.report.collectives}
        # A pick pins that tensor: it survives recompiles and wins over the preset.
        app.spec_rows["w2"].pickers[0].value = "None"
        assert "w2" in app.pinned and app.report.tensor("w2").spec == (None, None)
        assert app.report.tensor("w1").spec == (None, "model")
        # A new preset releases the picks.
        app.preset_w.value = "dp"
        assert not app.pinned and app.spec_rows["w1"].spec == (None, None)
        # A preset needing an axis the mesh lacks is reported on the preset.
        app.preset_w.value = "ep"
        assert "expert" in unescape(app.layout_error.value)
        assert "explorer-stale" in app.tabs._dom_classes
        app.preset_w.value = ""
        app.rules_w.value = "batch=data,mlp=model"
        assert app.spec_rows["w1"].spec == (None, "model")
        app.rules_w.value = "batch=dta"
        assert "dta" in unescape(app.layout_error.value)
    finally:
        app.close()


def test_measure_checkbox_shows_a_labelled_measured_time(app):
    show(app, "Timing")
    app.measure_w.value = True
    assert app.report.timing.measured_s > 0
    assert "Measured" in app.timing.text.value
    assert "8 cpu device(s) of this host" in app.timing.text.value


def test_pipeline_schedule_is_drawn_with_its_bubble():
    app = Explorer(workload="pipeline", mesh="stage=4", preset="pp", debounce=None,
                   params={"microbatches": 4})
    try:
        show(app, "Timing")
        assert app.timing.schedule_box.layout.display == ""
        fwd = app.timing.schedule.data[0]
        # GPipe, S=4 stages, M=4 microbatches: 16 forwards; bubble (S-1)/(M+S-1) = 3/7.
        assert len(fwd.x) == 16
        assert "bubble 43%" in app.timing.schedule.layout.title.text
        app.params_box.children[5].value = "1f1b"          # schedule
        assert app.report.workload.params["schedule"] == "1f1b"
        assert "1f1b schedule" in app.timing.schedule.layout.title.text
    finally:
        app.close()


def test_hlo_tab_draws_the_dataflow_graph_and_compare_tab_diffs_a_pin(app):
    assert app.graph.graph is None                       # drawn when its tab is shown
    show(app, "HLO")
    [c] = app.graph.graph.collectives
    assert (c.kind, c.axes) == ("all-reduce", ("model",))
    show(app, "Compare")
    app.compare.pin_button.click()                       # pin the Megatron result as A
    app.spec_rows["w1"].pickers[1].value = "None"
    app.spec_rows["w2"].pickers[0].value = "None"        # B: replicated weights
    comparison = app.compare.comparison
    assert [x.kind for x in comparison.removed] == ["all-reduce"] and not comparison.added
    # The all-reduce's V, 128 × 1024 × 4 bytes, is gone.
    assert comparison.metric(Metric.COLLECTIVE_BYTES).delta == -524288


def test_rank_3_tensors_are_drawn_as_small_multiples():
    from explorer import TensorSpec, analyze
    from explorer.ui.grids import placement_grid

    # x[8,4,16] split over data on dim 0 and model on dim 2: two panels (dim-0 blocks 0 and 1),
    # each one row of 4 column blocks; devices are row-major over data=2 × model=4, so panel 0
    # holds d0..d3 and panel 1 d4..d7, with an empty separator column between them.
    r = analyze(lambda x: x * 2, TensorSpec("x", (8, 4, 16), spec="data,None,model"),
                mesh="data=2,model=4")
    g = placement_grid(r, "x")
    assert g.z == [[0, 1, 2, 3, None, 4, 5, 6, 7]]
    assert len(set(g.x_labels)) == len(g.x_labels)       # category labels stay distinct
    assert g.hover[0][5].startswith("[1] block [4:8, 0:4, 0:4]")


def test_debounce_starts_an_isolated_edit_at_once_and_merges_a_burst():
    import asyncio
    import time

    async def scenario():
        # Created inside a running event loop, as in a kernel: edits compile in the background.
        app = Explorer(workload="mlp", mesh="data=2,model=4", specs=MEGATRON, debounce=0.3,
                       params={"batch": 64})
        compiles = []
        run = app._run
        app._run = lambda request: (compiles.append((time.perf_counter(), request)),
                                    run(request))[1]
        try:
            # A burst: two edits in one go compile once, for the last of them, after the delay.
            t0 = time.perf_counter()
            app.spec_rows["w1"].pickers[1].value = "None"
            app.spec_rows["w2"].pickers[0].value = "None"
            while app.report.collectives:                 # Megatron's all-reduce goes away
                await asyncio.sleep(0.02)
            assert len(compiles) == 1 and compiles[0][0] - t0 >= 0.3
            assert compiles[0][1]["specs"]["w2"] == (None, None)
            # An isolated edit, with nothing waiting or compiling, starts at once.
            t1 = time.perf_counter()
            app.spec_rows["w1"].pickers[0].value = "model"
            while not app.report.collectives:
                await asyncio.sleep(0.02)
            assert len(compiles) == 2 and compiles[1][0] - t1 < 0.3
        finally:
            app.close()

    asyncio.run(scenario())


def test_a_target_name_spelled_unlike_the_listing_is_offered():
    # A 32-chip mesh on the v5e 8x4 slice: the catalog lists it as tpu-v5e-4x8.
    app = Explorer(workload="mlp", mesh="data=4,model=8", target="tpu-v5e-8x4", debounce=None)
    try:
        assert app.target_w.value == "tpu-v5e-8x4"
        assert app.report.estimate.target == "tpu-v5e-8x4"
    finally:
        app.close()
