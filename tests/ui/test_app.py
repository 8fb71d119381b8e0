"""The explorer's widget logic without a browser: set values, click, assert on the model and on
what the widgets display (the hyperspy way). Edits compile at once here (no event loop)."""

import inspect
from html import unescape

import pytest
from traitlets import TraitError

import explorer
from explorer._src.compile.gpu import gpu_plugin_installed

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

import explorer._src.ui.app as app_module  # noqa: E402
from explorer._src.report.compare import Metric  # noqa: E402
from explorer._src.ui.app import TAB_TITLES  # noqa: E402
from explorer._src.workloads import models  # noqa: E402
from explorer.ui import Explorer

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
    app.mesh_editor.row(axis).size_w.value = value


def rename(app, index, name):
    app.mesh_editor.rows[index].name_w.value = name


def test_initial_result_is_the_megatron_all_reduce():
    explorer.clear_cache()        # other tests may have compiled the same request
    app = Explorer(workload="mlp", mesh="data=2,model=4", specs=MEGATRON, debounce=None)
    try:
        _check_initial_result(app)
    finally:
        app.close()


def _check_initial_result(app):
    [c] = app.report.collectives
    assert (c.kind, c.axes, c.bytes) == ("all-reduce", ("model",), 128 * 1024 * 4)
    show(app, "Collectives")
    assert "all-reduce" in app.collectives.table.value
    assert "<td>model (4)</td>" in app.collectives.table.value       # axes (group size)
    assert app.status.value.count("compiled") == 1 and "8 devices" in app.status.value


def test_changing_a_spec_picker_recompiles(app):
    # Replicate w1 and w2: the data-parallel forward pass needs no collective at all.
    show(app, "Collectives")
    app.spec_rows["w1"].pickers[1].value = []
    app.spec_rows["w2"].pickers[0].value = []
    assert app.report.collectives == ()
    assert "No collectives" in app.collectives.table.value
    # Shard w1's rows over model (x split over data): x @ w1 contracts a model-split dimension,
    # so each device holds a partial sum of its [256/2, 4096] block of h, all-reduced over
    # model: V = 128 × 4096 × 4 bytes.
    app.spec_rows["w1"].pickers[0].value = ["model"]
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
    assert "size 0" in app.mesh_editor.rows[0].error.value
    mesh_size(app, "data", 2)
    rename(app, 1, "data")
    assert "'data' appears twice" in unescape(app.mesh_editor.rows[1].error.value)
    rename(app, 1, "model")
    assert app.mesh_editor.rows[1].error.value == "" and app.error is None


@pytest.mark.slow
def test_add_and_remove_axes(app):
    app.mesh_editor.add.click()
    assert [n for n, _ in app.mesh_editor.axes] == ["data", "model", "axis0"]
    assert "16 devices" in app.mesh_editor.count.value
    assert app.report.mesh.device_count == 16
    # The new axis is offered in every spec picker.
    assert "axis0" in app.spec_rows["x"].pickers[0].allowed_tags
    app.mesh_editor.rows[1].remove.click()         # model
    assert [n for n, _ in app.mesh_editor.axes] == ["data", "axis0"]
    # Pickers that named the removed axis fall back to "not split".
    assert app.spec_rows["w1"].spec == (None, None)
    assert app.report.mesh.names == ("data", "axis0")


def test_switching_workload_rebuilds_params_and_specs(app):
    app.workload_w.value = "matmul"
    assert set(app.spec_rows) == {"x", "w"}
    assert [c.description for c in app.params_box.children] == ["m", "k", "n", "dtype"]
    app.spec_rows["x"].pickers[1].value = ["model"]
    app.spec_rows["w"].pickers[0].value = ["model"]
    assert [(c.kind, c.axes) for c in app.report.collectives] == [("all-reduce", ("model",))]


def test_bad_param_value_is_reported_on_the_params(app):
    app.params_box.children[1].value = 0               # d_model
    assert "d_model=0" in unescape(app.params_error.value)
    app.params_box.children[1].value = 1024
    assert app.params_error.value == ""
    app.params_box.children[3].value = "bfloat16"      # dtype: a picker, no bad value to type
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


def test_placement_colours_mean_the_block_in_both_heatmaps(app):
    app.placement.tensor.value = "w1"
    blocks, mesh = app.placement.blocks, app.placement.mesh
    t = blocks.data[0]
    # w1 [1024, 4096] split over model on columns: one row of 4 blocks of 1024 columns; block
    # k is held by devices k and k+4 (row-major over data=2 × model=4).
    assert [list(r) for r in t.z] == [[0, 1, 2, 3]]
    assert [list(r) for r in t.text] == [["b0: d0,d4", "b1: d1,d5", "b2: d2,d6", "b3: d3,d7"]]
    assert list(t.x) == ["0:1024", "1024:2048", "2048:3072", "3072:4096"]
    assert list(t.y) == ["0:1024"]
    assert blocks.layout.xaxis.title.text == "dim 1 (mlp, 4096): 4 blocks over model"
    assert blocks.layout.yaxis.title.text == "dim 0 (embed, 1024): not split"
    # The device grid colours each device by the block it holds, with the same scale: a colour
    # is one block in both figures.
    m = mesh.data[0]
    assert [list(r) for r in m.z] == [[0, 1, 2, 3], [0, 1, 2, 3]]
    assert m.text[1][2] == "d6: b2"
    assert m.colorscale == t.colorscale and (m.zmin, m.zmax) == (t.zmin, t.zmax) == (-0.5, 3.5)
    assert list(m.y) == ["data=0", "data=1"] and list(m.x)[0] == "model=0"
    assert mesh.layout.yaxis.title.text == "mesh axis data (2)"
    assert mesh.layout.xaxis.title.text == "mesh axis model (4)"
    legend = unescape(app.placement.legend.value)
    assert "Colour = block of w1" in legend
    assert "b2 [0:1024, 2048:3072] on d2,d6" in legend
    # The figure's synced state matches, so a view opened later draws the same.
    assert [list(r) for r in app.placement.blocks._widget_data[0]["z"]] == [[0, 1, 2, 3]]


@pytest.mark.slow
def test_tensor_picker_groups_roles_and_hides_plumbing():
    app = Explorer(workload="transformer_train", mesh="data=2,model=4", preset="fsdp_tp",
                   params={"scan_layers": "false"},
                   debounce=None)
    try:
        options = app.placement.tensor.options
        roles = [label.split(":", 1)[0] for label, _ in options]
        # Grouped: every input, then every output, then the intermediates.
        assert roles == sorted(roles, key=["input", "output", "intermediate"].index)
        report = app.report
        inputs = [t.name for t in report.tensors if t.kind == "input"]
        assert [v for (label, v) in options if label.startswith("input:")] == inputs
        shown = {v for _, v in options}
        plumbing = [t for t in report.tensors if t.kind == "intermediate" and (
            t.name.startswith(("broadcast", "convert_element_type", "eq", "iota"))
            or t.dtype == "bool")]
        assert plumbing and not shown & {t.name for t in plumbing}
        assert " (dot_general " in next(label for label, v in options
                                          if v.startswith("dot_general"))
        app.placement.plumbing.value = True
        assert len(app.placement.tensor.options) == len(report.tensors)
        assert all(label.count("(") == label.count(")")
                   for label, _ in app.placement.tensor.options)
    finally:
        app.close()


def test_memory_and_timing_views(app):
    m = app.report.memory
    assert app.memory.fig is None                     # not drawn while its tab is hidden
    show(app, "Memory")
    # Megatron MLP per device: x [128, 1024] + w1 [1024, 1024] + w2 [1024, 1024] in f32.
    assert m.arguments == (128 * 1024 + 2 * 1024 * 1024) * 4
    bars = {bar.name: bar.x[0] for bar in app.memory.fig.data if bar.visible is not False}
    xla = [bars["arguments"], bars["outputs (not aliased)"], bars["temporaries"]]
    assert xla == [m.arguments, m.outputs - m.aliased, m.temporaries]
    assert sum(xla) == m.total
    # By kind, beside it: the weights w1 [1024, 4096/4] and w2 [4096/4, 1024] are the params;
    # x [128, 1024] and the output [128, 1024] (f32) are other; activations are temporaries.
    assert bars["parameters"] == 2 * 1024 * 1024 * 4
    assert bars["other in/outputs"] == 2 * 128 * 1024 * 4
    assert bars["activations"] == m.temporaries
    assert bars["optimizer state"] == 0
    # A forward pass has no gradients: their row is not drawn.
    assert [b.y[0] for b in app.memory.fig.data if b.visible is not False].count("gradients") == 0
    assert "= <b>total " in app.memory.text.value
    assert "<td>parameters</td><td class='explorer-num'>8.0 MiB</td>" in app.memory.text.value
    show(app, "Timing")
    assert "compile" in app.timing.text.value and "flops" in app.timing.text.value
    assert "Pick a target" in app.timing.text.value


@pytest.mark.slow
def test_memory_axis_reads_in_binary_units_and_a_far_limit_is_named_not_drawn():
    from explorer._src.ui.memory import binary_ticks

    # 0..10 MiB in 5 steps: 2 MiB apart.
    assert binary_ticks(10 * 2**20) == [k * 2 * 2**20 for k in range(6)]
    assert binary_ticks(3000) == [0, 1024, 2048]            # 2.9 KiB: whole KiB apart
    assert binary_ticks(600) == [0, 200, 400, 600]          # 600 / 5 = 120: round up to 200
    app = Explorer(workload="mlp", mesh="data=2,model=4", specs=MEGATRON, target="h100-8",
                   debounce=None)
    try:
        show(app, "Memory")
        m, fig = app.report.memory, app.memory.fig
        assert all(t == "0" or t.endswith(("B", "KiB", "MiB")) for t in fig.layout.xaxis.ticktext)
        # An H100's HBM against ~9 MiB: drawn to scale the bar would vanish, so the axis ends
        # near the total and the limit is named at its end: what CUDA gives a program of an
        # H100 80GB, 84,942,979,072 B = 79.1 GiB.
        assert fig.layout.xaxis.range[1] < 2 * m.total
        assert fig.layout.shapes == ()
        [note] = fig.layout.annotations
        assert note.text.startswith("HBM 79.1 GiB") and "off scale" in note.text
        assert "Fits" in app.memory.text.value and "GB" not in app.memory.text.value
        for bar in fig.data:                # every part is labelled, at least on hover
            assert bar.hovertext[0].endswith(("B", "KiB", "MiB"))
    finally:
        app.close()


@pytest.mark.slow
def test_collectives_table_marks_latency_and_the_cpu_reduce_scatter():
    import re

    from explorer._src.report.dataflow import sliced_all_reduces

    app = Explorer(workload="transformer_train", mesh="data=2,model=4", preset="fsdp_tp",
                   params={"scan_layers": "false"},
                   target="tpu-v5e-2x4", debounce=None, compile_for="cpu")
    try:
        show(app, "Collectives")
        report, table = app.report, app.collectives.table.value
        # Dozens of collectives: the summary line sits above the (scrolling) table.
        assert len(report.collectives) > 30
        assert table.index(f"{len(report.collectives)} collectives, ") < table.index("<table")
        latency = sum(t.bound == "latency" for t in report.estimate.collectives)
        assert latency > 0 and table.count("[latency-bound]") == latency
        # The gradient all-reduce over data is sliced per device afterwards: said beside it.
        [(i, (n, parts))] = sliced_all_reduces(report).items()
        note = re.search(r"<tr class='explorer-note-row'[^>]*>.*?</tr>", table).group(0)
        assert f"{n} of its {parts} parts are then sliced" in note and "reduce-scatter" in note
        row = table.index(f"<td>{i}</td>")
        assert table.index(note) > row                     # right after its row
        # Op names without stray brackets; sources shortened, full path on hover.
        ops = re.findall(r"<span class='explorer-op'>([^<]*)</span>", table)
        assert ops and all(op.count("(") == op.count(")") for op in ops)
        assert "dot_general+reduce_sum" in ops
        # The rms_norm line of the model (its all-reduce of the squared sum over model).
        lines, start = inspect.getsourcelines(models.rms_norm)
        line = start + next(i for i, text in enumerate(lines) if "rsqrt" in text)
        where = f"explorer/_src/workloads/models.py:{line}"
        assert f"<code title='{where}'>models.py:{line}</code>" in table
        assert table.count("<th>") == 7 and "explorer-table-wrap" in table
    finally:
        app.close()


def test_partitioner_toggle(app):
    app.partitioner_w.value = "gspmd"
    assert app.report.partitioner == "gspmd"
    assert [(c.kind, c.axes) for c in app.report.collectives] == [("all-reduce", ("model",))]


@pytest.mark.slow
def test_target_adds_predictions_and_a_wrong_size_target_is_flagged():
    app = Explorer(workload="mlp", mesh="data=2,model=4", specs=MEGATRON, target="h100-8",
                   debounce=None)
    try:
        assert app.report.estimate.target == "h100-8"
        show(app, "Collectives")
        assert "est. h100-8" in app.collectives.table.value
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


@pytest.mark.slow
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
        app.spec_rows["w2"].pickers[0].value = []
        assert "w2" in app.pinned and app.report.tensor("w2").spec == (None, None)
        assert app.report.tensor("w1").spec == (None, "model")
        # A new preset places every tensor but the pick, which stays the user's; the note
        # names it with what the preset would give (dp: w2 replicated too, so it agrees and is
        # not named) until its button hands it to the preset.
        app.preset_w.value = "dp"
        assert app.pinned == {"w2"} and app.spec_rows["w1"].spec == (None, None)
        assert app.kept_picks.kept == {}
        app.preset_w.value = "megatron"
        assert app.kept_picks.kept == {"w2": ((None, None), ("model", None))}
        assert "<code>w2</code> replicated (the rules: model,None)" in \
            app.kept_picks.note.value
        app.kept_picks.button.click()
        assert not app.pinned and app.report.tensor("w2").spec == ("model", None)
        assert app.kept_picks.kept == {} and app.kept_picks.note.value == ""
        app.preset_w.value = "dp"
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


@pytest.mark.slow
def test_measure_checkbox_shows_a_labelled_measured_time(app):
    show(app, "Timing")
    app.measure_w.value = True
    assert app.report.timing.measured_s > 0
    assert "Measured" in app.timing.text.value
    assert "8 cpu device(s) of this host" in app.timing.text.value


@pytest.mark.slow
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
    app.spec_rows["w1"].pickers[1].value = []
    app.spec_rows["w2"].pickers[0].value = []            # B: replicated weights
    comparison = app.compare.comparison
    assert [x.kind for x in comparison.removed] == ["all-reduce"] and not comparison.added
    # The all-reduce's V, 128 × 1024 × 4 bytes, is gone.
    assert comparison.metric(Metric.COLLECTIVE_BYTES).delta == -524288


def test_rank_3_tensors_are_drawn_as_small_multiples():
    from explorer import TensorSpec, analyze
    from explorer._src.ui.grids import placement_grid

    # x[8,4,16] split over data on dim 0 and model on dim 2: two panels (dim-0 blocks 0:4 and
    # 4:8), each one row of 4 column blocks; devices are row-major over data=2 × model=4, so
    # panel 0 holds d0..d3 and panel 1 d4..d7, with a gap column between them.
    r = analyze(lambda x: x * 2, TensorSpec("x", (8, 4, 16), spec="data,None,model"),
                mesh="data=2,model=4")
    g = placement_grid(r, "x", ("batch", "seq", "embed"))
    assert g.z == [[0, 1, 2, 3, None, 4, 5, 6, 7]]
    assert len(set(g.x_labels)) == len(g.x_labels)       # category labels stay distinct
    # Ticks are the index ranges of dim 2 (4 columns each), the same text in both panels.
    assert [x.replace("\u200b", "") for x in g.x_labels] == [
        "0:4", "4:8", "8:12", "12:16", " ", "0:4", "4:8", "8:12", "12:16"]
    assert g.x_title == "dim 2 (embed, 16): 4 blocks over model"
    assert g.y_title == "dim 1 (seq, 4): not split" and g.y_labels == ["0:4"]
    # Each title above its panel's first row and column.
    assert g.panels == ((0, 0, "dim 0 (batch): 0:4 of 8", "0:4"),
                        (5, 0, "dim 0 (batch): 4:8 of 8", "4:8"))
    assert g.panel_note == "panels: dim 0 (batch, 8): 2 blocks over data"
    assert g.hover[0][5].startswith("block 4 [4:8, 0:4, 0:4]")
    assert g.text[0][5] == "b4: d4"
    # A leading dimension not split: one panel, titled so.
    r = analyze(lambda x: x * 2, TensorSpec("x", (12, 4, 16), spec="None,data,model"),
                mesh="data=2,model=4")
    g = placement_grid(r, "x", ("layers", "seq", "embed"))
    assert g.panels == ((0, 0, "dim 0 (layers, 12): whole", "0:12"),)
    assert g.panel_note == ""                      # the one panel's title says it
    assert g.z == [[0, 1, 2, 3], [4, 5, 6, 7]]


def counted_compiles(monkeypatch) -> list:
    """The requests the app's session compiles (cache lookups left out), as they start."""
    from explorer._src.api import session as session_module

    compiles, real = [], session_module.run

    def run(request, **kwargs):
        if not kwargs.get("cache_only"):
            compiles.append(request)
        return real(request, **kwargs)
    monkeypatch.setattr(session_module, "run", run)
    return compiles


def specs_of(request) -> dict:
    return {t.name: t.spec for t in request.planned.leaves}


def test_an_isolated_edit_compiles_at_once_and_edits_during_a_compile_become_one(monkeypatch):
    import asyncio

    async def scenario():
        # Created inside a running event loop, as in a kernel: edits compile in the background.
        app = Explorer(workload="mlp", mesh="data=2,model=4", specs=MEGATRON, debounce=0.3,
                       params={"batch": 64})
        explorer.clear_cache()          # every edit below compiles
        compiles = counted_compiles(monkeypatch)
        try:
            # An isolated edit starts compiling at once.
            app.spec_rows["w1"].pickers[1].value = []
            assert len(compiles) == 1 or app.session.busy
            # Two more edits while it compiles: they wait, and only the last is compiled.
            app.spec_rows["w2"].pickers[0].value = []
            app.spec_rows["w1"].pickers[0].value = ["model"]
            while app.request is None or app.request.specs["w1"] != ("model", None):
                await asyncio.sleep(0.02)
            assert [specs_of(c)["w1"] for c in compiles] == [(None, None), ("model", None)]
            assert specs_of(compiles[1])["w2"] == (None, None)
            # w1's rows over model: the partial sums of h (64 × 4096 floats) are all-reduced.
            assert [(c.kind, c.bytes) for c in app.report.collectives] == \
                [("all-reduce", 64 // 2 * 4096 * 4)]
        finally:
            app.close()

    asyncio.run(scenario())


@pytest.mark.slow
def test_an_edit_that_needs_a_new_worker_waits_and_undone_at_once_starts_none(monkeypatch):
    import asyncio

    from explorer._src.compile.pool import WorkerPool
    from explorer._src.compile.protocol import WorkerKey

    async def scenario():
        pool = WorkerPool()
        explorer.clear_cache()          # the 16-device request below compiles
        app = Explorer(workload="mlp", mesh="data=2,model=4", specs=MEGATRON, debounce=0.3,
                       params={"batch": 64}, pool=pool)
        compiles = counted_compiles(monkeypatch)
        try:
            assert pool.ready(WorkerKey.fake_cpu(8)) and not pool.ready(WorkerKey.fake_cpu(16))
            mesh_size(app, "data", 4)           # 16 devices: no worker for them yet
            assert app.session.waiting and not app.session.busy and compiles == []
            assert "starting a compile worker in 1.5 s, unless the edit changes" in \
                app.status.value
            mesh_size(app, "data", 2)           # undone: answered by the cache
            assert not app.session.waiting and app.request.mesh.device_count == 8
            await asyncio.sleep(2 * app_module.COLD_WORKER_QUIET_S)
            assert compiles == [] and WorkerKey.fake_cpu(16) not in pool._workers
            # Made and left: it compiles once the edits have paused, on a new worker.
            mesh_size(app, "data", 4)
            while app.report.mesh.device_count != 16:
                await asyncio.sleep(0.05)
            assert [c.device_count for c in compiles] == [16]
        finally:
            app.close()
            pool.close()

    asyncio.run(scenario())


@pytest.mark.slow
def test_with_live_updates_off_edits_are_checked_and_compiled_once_on_apply(app, monkeypatch):
    compiles = counted_compiles(monkeypatch)
    shown = app.report
    app.live_w.value = False
    assert app.apply_w.layout.display == ""
    app.params_box.children[0].value = 128           # batch
    mesh_size(app, "model", 3)                       # an error shows at once, paused or not
    assert "not divisible by model=3" in app.spec_rows["w1"].error.value
    mesh_size(app, "model", 2)
    app.spec_rows["w2"].pickers[0].value = []
    assert compiles == [] and app.report is shown and "live updates off" in app.status.value
    assert "explorer-stale" in app.tabs._dom_classes
    app.apply_w.click()
    [request] = compiles
    assert request.planned.mesh.text() == "data=2,model=2"
    assert request.planned.params["batch"] == 128 and specs_of(request)["w2"] == (None, None)
    assert app.session.request is request and "explorer-stale" not in app.tabs._dom_classes


@pytest.mark.slow
def test_a_target_name_spelled_unlike_the_listing_is_offered():
    # A 32-chip mesh on the v5e 8x4 slice: the catalog lists it as tpu-v5e-4x8.
    app = Explorer(workload="mlp", mesh="data=4,model=8", target="tpu-v5e-8x4", debounce=None)
    try:
        assert app.target_w.value == "tpu-v5e-8x4"
        assert app.report.estimate.target == "tpu-v5e-8x4"
    finally:
        app.close()


# ---------------------------------------------------------------------- hardening (issue 14)

def all_errors(app) -> list[str]:
    """Every error text the sidebar shows."""
    shown = [r.error.value for r in app.spec_rows.values()]
    shown += [r.error.value for r in app.mesh_editor.rows]
    shown += [app.mesh_editor.error.value, app.params_error.value, app.layout_error.value,
              app.error_w.value]
    return [unescape(e) for e in shown if e]


def test_an_invalid_axis_name_stays_on_its_row_and_every_edit_path_recovers(app):
    good = app.report
    rename(app, 1, "a b")                                  # model -> "a b"
    assert "'a b' is not an identifier" in unescape(app.mesh_editor.rows[1].error.value)
    assert all_errors(app) == [unescape(app.mesh_editor.rows[1].error.value)]
    assert app.report is good and "explorer-stale" in app.tabs._dom_classes
    # The pickers offer the axes of the last valid mesh only, so 'a b' cannot be picked.
    for row in app.spec_rows.values():
        assert all(p.allowed_tags == ["data", "model"] for p in row.pickers)
    with pytest.raises(TraitError):
        app.spec_rows["x"].pickers[0].value = ["a b"]
    # A size param edit while the mesh is wrong rebuilds the rows at the new size, keeps the
    # picks, and the one error still names the axis.
    app.params_box.children[0].value = 512                 # batch
    assert app.spec_rows["x"].shape == (512, 1024)
    assert app.spec_rows["w1"].spec == (None, "model")
    assert all_errors(app) == [unescape(app.mesh_editor.rows[1].error.value)]
    # Fixing the name recovers everything; w1's pick follows the rename.
    rename(app, 1, "mp")
    assert all_errors(app) == [] and app.error is None
    assert "explorer-stale" not in app.tabs._dom_classes
    assert app.report.mesh.names == ("data", "mp")
    assert app.spec_rows["w1"].spec == (None, "mp") and app.spec_rows["w2"].spec == ("mp", None)
    # batch 512 over data=2: the all-reduce's V is a [256, 1024] f32 block per device.
    assert [(c.kind, c.axes, c.bytes) for c in app.report.collectives] == [
        ("all-reduce", ("mp",), 256 * 1024 * 4)]
    app.params_box.children[0].value = 256                 # and later edits compile as usual
    assert app.report.collectives[0].bytes == 128 * 1024 * 4 and all_errors(app) == []


def test_an_axis_name_holding_mesh_text_is_rejected_not_parsed(app):
    good = app.report
    rename(app, 1, "model=4,extra")
    error = unescape(app.mesh_editor.rows[1].error.value)
    assert "'model=4,extra' is not an identifier" in error
    # Nothing was compiled from it: the editor and the last result agree on 2 axes, 8 devices.
    assert "8 devices" in app.mesh_editor.count.value
    assert app.report is good and app.report.mesh.names == ("data", "model")
    rename(app, 1, "model")
    assert all_errors(app) == [] and app.report.mesh.device_count == 8


@pytest.mark.slow
def test_the_axis_count_is_bounded_and_pickers_grow_linearly():
    from explorer._src.errors import MeshError
    from explorer._src.ui.editors import MAX_AXES

    eight = ",".join(f"a{i}=1" for i in range(MAX_AXES))
    app = Explorer(workload="mlp", mesh=eight, debounce=None)
    try:
        assert app.mesh_editor.add.disabled
        assert "at most 8" in app.mesh_editor.add.tooltip
        app.mesh_editor.add.click()                         # disabled: nothing happens
        assert len(app.mesh_editor.rows) == MAX_AXES
        # One choice per axis in every picker; a tuple of three axes is three picks.
        assert app.spec_rows["x"].pickers[0].allowed_tags == [f"a{i}" for i in range(8)]
        app.spec_rows["x"].pickers[0].value = ["a2", "a0", "a5"]
        assert app.spec_rows["x"].spec[0] == ("a2", "a0", "a5")
        # (Size-1 axes split nothing, so the compiled program is replicated; the request
        # carries the spec as picked.)
        assert app.report.workload.specs["x"] == "(a2,a0,a5),None"
        app.mesh_editor.rows[0].remove.click()
        assert not app.mesh_editor.add.disabled
        # a0 is gone: the pick keeps the axes that are left, in order.
        assert app.spec_rows["x"].spec[0] == ("a2", "a5")
    finally:
        app.close()
    with pytest.raises(MeshError, match="at most 8 axes; this one has 9"):
        Explorer(workload="mlp", mesh=eight + ",a8=1", debounce=None)


def test_an_unexpected_error_in_a_callback_is_shown_not_raised(app, caplog):
    def broken():
        raise RuntimeError("boom")

    real = app._request
    app._request = broken
    app.partitioner_w.value = "gspmd"                      # the callback must not raise
    assert "unexpected error" in app.error_w.value and "RuntimeError: boom" in app.error_w.value
    assert isinstance(app.unexpected, RuntimeError)
    assert "explorer-stale" in app.tabs._dom_classes
    assert "boom" in caplog.text                           # the traceback goes to the log
    app._request = real
    app.partitioner_w.value = "shardy"                     # the next edit starts afresh
    assert app.error is None and app.unexpected is None and app.error_w.value == ""
    assert app.report.partitioner == "shardy"


@pytest.mark.slow
def test_a_target_that_does_not_fit_the_mesh_still_compiles_without_a_prediction():
    app = Explorer(workload="mlp", mesh="data=2,model=4", specs=MEGATRON, target="h100-8",
                   debounce=None)
    try:
        # Only targets with the mesh's 8 devices are offered, GPUs then TPUs.
        labels = [label for label, _ in app.target_w.options]
        values = [v for _, v in app.target_w.options]
        assert "h100-8" in values and "tpu-v5e-2x4" in values and "h100-8x2" not in values
        assert labels.index("GPU · h100-8") < labels.index("TPU · tpu-v5e-2x4")
        app.mesh_editor.add.click()                         # axis0=2: 16 devices
        assert app.report.mesh.device_count == 16 and app.report.estimate is None
        assert "explorer-stale" not in app.tabs._dom_classes
        assert "no prediction" in unescape(app.target_error.value)
        show(app, "Timing")
        assert "Prediction unavailable" in app.timing.text.value
        assert "h100-8x2" in unescape(app.timing.text.value)   # the reason names what fits
        # The picked target stays, marked; the offer follows the device count.
        assert app.target_w.value == "h100-8"
        assert ("h100-8 (8 devices, not 16)", "h100-8") in app.target_w.options
        assert "h100-8x2" in [v for _, v in app.target_w.options]
        app.target_w.value = "h100-8x2"
        assert app.report.estimate.target == "h100-8x2" and app.target_error.value == ""
        assert "Predicted on h100-8x2" in app.timing.text.value
    finally:
        app.close()


def test_bad_initial_specs_are_refused_naming_the_tensor():
    from explorer._src.errors import RankError, UnknownAxisError

    with pytest.raises(UnknownAxisError, match="'w1' names mesh axis 'tp'.*'data', 'model'"):
        Explorer(workload="mlp", mesh="data=2,model=4", specs={"w1": "None,tp"}, debounce=None)
    with pytest.raises(RankError, match="'x' has 3 entries for a tensor of rank 2"):
        Explorer(workload="mlp", mesh="data=2,model=4", specs={"x": "data,None,None"},
                 debounce=None)


def test_errors_speak_of_widgets_not_cli_flags():
    from explorer._src.ui.sidebar.checks import app_language

    app = Explorer(workload="mlp", mesh="data=2,model=4", debounce=None)
    try:
        app.preset_w.value = "ep"                           # needs an 'expert' axis
        shown = unescape(app.layout_error.value)
        assert "expert" in shown and "--" not in shown
        assert "e.g. mesh 'expert=8'" in shown
    finally:
        app.close()
    assert app_language("use --workload moe") == "pick workload moe"
    assert app_language("override it with --spec w1=... or change the rule") == \
        "override it with the spec picker of w1 or change the rule"


def test_an_edit_says_working_before_its_result(app):
    # The order of what the status line shows, not a time: "working…" first, then the result.
    shown = []
    app.status.observe(lambda change: shown.append(change["new"]), "value")
    app.spec_rows["w1"].pickers[1].value = []
    assert shown and "working…" in shown[0], shown
    assert "compiled" in shown[-1] or "cached" in shown[-1], shown


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_plugin_installed(), reason="the gpu extra is not installed")
@pytest.mark.slow
def test_the_app_says_what_compiled_the_program_and_the_cpu_switch_marks_it_approximate():
    app = Explorer(workload="mlp", mesh="data=2,model=4", specs=MEGATRON, target="h100-8",
                   params={"dtype": "bfloat16"}, debounce=None)
    try:
        assert app.report.backend == "gpu"
        assert unescape(app.compiled_for.value).startswith(
            "<div>compiled for 8 × NVIDIA H100 80GB HBM3 by XLA's GPU compiler "
            "(no GPU needed) <span")
        # The GPU moves the bf16 partial sums: 128 x 1024 x 2 bytes per device.
        assert [(c.kind, c.dtype, c.bytes) for c in app.report.collectives] == [
            ("all-reduce", "bfloat16", 128 * 1024 * 2)]
        app.cpu_w.value = True          # the one switch back to the CPU's program
        assert app.report.backend == "cpu"
        text = unescape(app.compiled_for.value)
        assert text.startswith("<div>⚠ compiled for 8 CPU devices, priced on 8 × H100 SXM: "
                               "approximate, not the program the GPU compiler writes")
        # The CPU backend upcasts the bf16 all-reduce to f32: twice the bytes.
        assert [(c.kind, c.bytes) for c in app.report.collectives] == [
            ("all-reduce", 128 * 1024 * 4)]
    finally:
        app.close()


@pytest.mark.slow
def test_a_target_too_small_for_the_mesh_is_explained_in_collectives_and_fixed_in_one_click():
    app = Explorer(workload="mlp", mesh="data=2,model=4", specs=MEGATRON, target="h100-8",
                   debounce=None)
    try:
        show(app, "Collectives")
        assert app.collectives.target_offer.button.layout.display == "none"
        mesh_size(app, "data", 4)                   # 16 devices: one 8-GPU node is too small
        assert app.report.estimate is None
        table = unescape(app.collectives.table.value)
        assert "est." not in table and "Predicted on" not in table
        assert ("No predicted times: mesh 'data=4,model=4' has 16 devices but h100-8 has 8 "
                "chips.") in table
        # The same H100s, two nodes of 8: offered beside the reason and beside the sidebar's.
        offer = app.collectives.target_offer.button
        assert offer.layout.display is None and offer.description == "use h100-8x2 (16 GPUs)"
        assert app.target_offer.button.description == "use h100-8x2 (16 GPUs)"
        offer.click()
        assert app.target_w.value == "h100-8x2"
        assert app.report.estimate.target == "h100-8x2"
        table = unescape(app.collectives.table.value)
        assert "<th>est. h100-8x2</th>" in table and "Predicted on h100-8x2" in table
        assert "No predicted times" not in table
        assert offer.layout.display == "none" and app.target_offer.button.layout.display == "none"
    finally:
        app.close()


def test_the_target_offered_for_a_mesh_has_its_device_count_and_the_same_chip():
    from explorer._src.ui.views import matching_target
    assert matching_target("h100-8", 16) == "h100-8x2"
    assert matching_target("tpu-v5e-2x4", 16) == "tpu-v5e-4x4"
    assert matching_target("tpu-v4-2x2x2", 32) == "tpu-v4-2x4x4"
    # No v5p has 16 chips: the first TPU that does (the catalog lists v5e first).
    assert matching_target("tpu-v5p-2x2x2", 16) == "tpu-v5e-4x4"
    assert matching_target("bow-2000", 8) is None          # no other IPU system
    assert matching_target("h100-8", 8) is None            # the size already fits
    assert matching_target("cpu", 16) is None              # the host takes any count


def test_a_renamed_mesh_axis_carries_into_the_rules_box():
    app = Explorer(workload="mlp", mesh="data=2,model=4", rules="batch=data,mlp=model",
                   debounce=None)
    try:
        rename(app, 1, "tp")
        assert app.rules_w.value == "batch=data,mlp=tp"
        assert app.error is None and app.report.mesh.names == ("data", "tp")
        assert app.spec_rows["w1"].spec == (None, "tp")
    finally:
        app.close()


@pytest.mark.slow
def test_closed_set_params_are_pickers_of_their_values_and_labels_are_whole():
    app = Explorer(workload="transformer_train", mesh="data=2,model=4",
                   params={"scan_layers": False, "layers": 1}, debounce=None)
    try:
        boxes = {wid.description: wid for wid in app.params_box.children}
        assert boxes["mlp"].options == ("gelu", "relu", "swiglu")
        assert boxes["remat"].options == ("none", "minimal", "full")
        assert boxes["attention"].options == ("plain", "fused")
        assert boxes["scan_layers"].value == "false"            # a Python bool, as the API takes
        assert boxes["batch"].__class__.__name__ == "IntText"
        # Every label gets the width of 'compute_dtype' (13 characters) and more.
        assert all(b.style.description_width == "110px" for b in boxes.values())
        boxes["mlp"].value = "swiglu"
        assert app.report.workload.params["mlp"] == "swiglu"
    finally:
        app.close()


def test_a_value_outside_a_closed_set_is_refused_naming_the_choices():
    from explorer._src.errors import WorkloadError

    with pytest.raises(WorkloadError, match="'gelu', 'relu', 'swiglu'"):
        Explorer(workload="transformer_train", params={"mlp": "tanh"}, debounce=None)


def test_the_visible_tab_is_redrawn_in_place_without_going_blank(app):
    # A new result redraws the tab on screen where it is: had it been hidden (the class
    # explorer-outdated) until redrawn, a reader would see the table vanish between the two
    # messages the browser gets (a flicker, and an empty read for a test that waits on it).
    show(app, "Collectives")
    visible = app.tabs.children[app.tabs.selected_index]
    classes, tables = [], []
    visible.observe(lambda c: classes.append(tuple(c["new"])), "_dom_classes")
    app.collectives.table.observe(lambda c: tables.append(c["new"]), "value")
    app.spec_rows["w2"].pickers[0].value = []          # w2 replicated: an all-gather of h
    assert app.report.collectives and tables
    assert not any("explorer-outdated" in c for c in classes), classes
    assert all("<table" in t or "No collectives" in t for t in tables)
    # The tabs not on screen are marked, to be drawn when shown.
    others = [c for i, c in enumerate(app.tabs.children)
              if i != app.tabs.selected_index and TAB_TITLES[i] != "Suggest"]
    assert all("explorer-outdated" in c._dom_classes for c in others)


def test_the_target_list_offers_every_size_by_family_gpus_first_for_whole_nodes():
    from explorer._src.ui.sidebar.checks import target_options

    # data=8,model=8: 8 DGX nodes of each GPU first, then the TPU slices of 64 chips and the
    # multi-slice ones (two v5e 4x8 slices over DCN, ...).
    values = [v for _, v in target_options(64)]
    assert values[:5] == ["", "h100-8x8", "h200-8x8", "a100-8x8", "b200-8x8"]
    assert {"tpu-v5e-8x8", "tpu-v5p-4x4x4", "tpu-v5e-4x8-2slices"} <= set(values)
    # 1024 GPUs: 128 nodes; 4 chips: the TPU slices first, then one node's 4 GPUs.
    assert "h100-8x128" in [v for _, v in target_options(1024)]
    four = [v for _, v in target_options(4)]
    assert four.index("tpu-v5e-2x2") < four.index("h100-4")
    # The Graphcore machine's 4 IPUs stay offered; a current target of another size is kept.
    assert "bow-2000" in four
    assert target_options(4, "h100-8")[-1] == ("h100-8 (8 devices, not 4)", "h100-8")



@pytest.mark.slow
def test_a_refused_rule_and_clearing_it_leave_hand_set_specs_as_they_were():
    # The steps: a refused rule, then the box cleared, emptied every picker; a valid
    # rule for batch alone replaced w2's hand-set spec. Hand-set specs stay the user's.
    app = Explorer(workload="mlp", mesh="data=2,model=4", specs=MEGATRON, debounce=None,
                   params={"batch": 64, "d_model": 64, "d_ff": 128})
    try:
        def specs():
            return {n: app.specs_editor.spec(n) for n in MEGATRON}

        given = specs()
        assert given == {"x": ("data", None), "w1": (None, "model"), "w2": ("model", None)}
        app.rules_w.value = "batch=zz"
        assert "zz" in unescape(app.layout_error.value) and specs() == given
        app.rules_w.value = ""
        assert app.error is None and specs() == given
        # Megatron's all-reduce over model of the [64/2, 64] f32 output block, as before.
        assert [(c.kind, c.axes, c.bytes) for c in app.report.collectives] == [
            ("all-reduce", ("model",), 32 * 64 * 4)]
        app.rules_w.value = "batch=data"
        assert specs() == given
        assert set(app.kept_picks.kept) == {"w1", "w2"}        # the rule would replicate them
        app.rules_w.value = ""
        assert specs() == given and app.kept_picks.kept == {}
    finally:
        app.close()


@pytest.mark.slow
def test_dtype_is_a_picker_of_the_dtypes_the_target_computes_in():
    app = Explorer(workload="mlp", mesh="data=2,model=4", specs=MEGATRON, debounce=None,
                   params={"batch": 64, "d_model": 64, "d_ff": 128, "dtype": "bf16"})
    try:
        [dtype] = [c for c in app.source.params_box.children if c.description == "dtype"]
        assert type(dtype).__name__ == "Dropdown"
        assert dtype.options == ("float32", "bfloat16", "float16") and dtype.value == "bfloat16"
        # An H100 has published FP8 rates: the 8-bit floats join; the pick stays.
        app.target_w.value = "h100-8"
        assert dtype.options[3:] == ("float8_e4m3fn", "float8_e5m2")
        assert dtype.value == "bfloat16" and app.report.tensor("x").dtype == "bfloat16"
        app.target_w.value = "tpu-v5e-2x4"
        assert "float8_e4m3fn" not in dtype.options and dtype.value == "bfloat16"
        app.target_w.value = ""                    # fake CPU devices again
        assert dtype.options == ("float32", "bfloat16", "float16")
        dtype.value = "float16"
        assert app.report.tensor("w1").dtype == "float16"
        # Megatron's all-reduce over model of the [64/2, 64] output block, in f16: 32 x 64 x 2
        # bytes in the program's dtype.
        [c] = app.report.collectives
        assert c.program_bytes == 32 * 64 * 2
    finally:
        app.close()
