"""Memory over the program in the Memory tab: the curve's data are the timeline's points, the
held bands are the timeline's flat bytes, the peak marker sits on its peak, and the peak's
buffers are drawn by kind. The function is defined here (traced in this process)."""

import jax
import pytest

pytest.importorskip("ipywidgets")

from explorer import TensorSpec  # noqa: E402
from explorer._src.report.report import Buffer, BufferKind, MemoryPoint, MemoryTimeline  # noqa: E402
from explorer._src.ui.app import TAB_TITLES  # noqa: E402
from explorer._src.ui.memory import (  # noqa: E402
    BUFFER_KIND_COLOURS,
    LIVE_TRACE,
    PEAK_TRACE,
    peak_buffers_figure,
    timeline_figure,
)
from explorer.ui import explore  # noqa: E402

T = TensorSpec
MIB = 1024 * 1024


def two_layers(x, w1, w2):
    h = jax.nn.relu(x @ w1)
    return h @ w2


def traces(fig) -> dict:
    return {d.name: d for d in fig.data}


@pytest.mark.slow
def test_the_memory_tab_draws_the_programs_curve_and_its_peak():
    app = explore(two_layers, T("x", (256, 1024), spec="data,None"),
                  T("w1", (1024, 4096), spec="None,model"),
                  T("w2", (4096, 1024), spec="model,None"), mesh="data=2,model=4",
                  debounce=None)
    try:
        app.tabs.selected_index = TAB_TITLES.index("Memory")
        t = app.report.memory_timeline
        # Per device: x 128x1024, w1 1024x1024, w2 1024x1024 float32 = 0.5 + 4 + 4 MiB.
        assert t.arguments == 8 * MIB + MIB // 2
        fig = traces(app.memory.timeline)
        positions = [p.position for p in t.points]
        assert list(fig[LIVE_TRACE].x) == positions
        assert list(fig[LIVE_TRACE].y) == [p.bytes for p in t.points]
        assert list(fig["arguments"].y) == [t.arguments] * len(positions)
        assert list(fig["temporaries"].y) == [p.temporaries for p in t.points]
        assert (fig[PEAK_TRACE].x[0], fig[PEAK_TRACE].y[0]) == (t.peak.position, t.peak.bytes)
        assert t.peak.instruction in app.memory.timeline.layout.title.text
        assert app.memory.timeline.layout.meta["result"] == app.result_id
        assert app.memory.fig is not None                  # the bars stay above it
        drawn = {(b.name, b.x[i]) for b in app.memory.peak_buffers.data
                 for i in range(len(b.x))}
        assert drawn == {(str(b.kind), b.bytes) for b in t.peak_buffers}
    finally:
        app.close()


def test_the_figures_follow_a_timeline_worked_out_by_hand():
    # 2 MiB of arguments, 1 MiB of outputs, no constants; a 3 MiB temporary over steps 1-2.
    points = (MemoryPoint(0, "param", 3 * MIB, 0), MemoryPoint(1, "dot", 6 * MIB, 3 * MIB),
              MemoryPoint(2, "add", 6 * MIB, 3 * MIB), MemoryPoint(3, "copy", 3 * MIB, 0))
    buffers = (Buffer("dot", 3 * MIB, (768, 1024), "float32", "dot_general",
                      kind=BufferKind.TEMPORARY),
               Buffer("param", 2 * MIB, (512, 1024), "float32", "x", kind=BufferKind.ARGUMENT),
               Buffer("copy", MIB, (256, 1024), "float32", "copy", kind=BufferKind.OUTPUT))
    t = MemoryTimeline(points=points, arguments=2 * MIB, outputs=MIB, constants=0,
                       peak=points[1], peak_buffers=buffers)
    fig = traces(timeline_figure(t))
    assert "constants" not in fig                        # a band of zeros is left out
    assert list(fig["outputs"].y) == [MIB] * 4
    assert list(fig["temporaries"].y) == [0, 3 * MIB, 3 * MIB, 0]
    assert (fig[PEAK_TRACE].x[0], fig[PEAK_TRACE].y[0]) == (1, 6 * MIB)
    bars = traces(peak_buffers_figure(t))
    colour = BUFFER_KIND_COLOURS
    assert {name: (list(b.y), list(b.x), b.marker.color) for name, b in bars.items()} == {
        "temporary": (["float32[768,1024] dot"], [3 * MIB], colour[BufferKind.TEMPORARY]),
        "argument": (["float32[512,1024] param"], [2 * MIB], colour[BufferKind.ARGUMENT]),
        "output": (["float32[256,1024] copy"], [MIB], colour[BufferKind.OUTPUT])}


def test_a_peak_buffer_is_labelled_by_what_it_holds_and_one_kind_still_has_its_legend():
    point = MemoryPoint(0, "while", 4 * MIB, 4 * MIB)
    buffers = (Buffer("while.85{2}", 4 * MIB, (12, 256, 1024), "bfloat16", "while",
                      source="explorer/_src/workloads/models.py:142", kind=BufferKind.TEMPORARY),)
    t = MemoryTimeline(points=(point,), arguments=0, outputs=0, constants=0, peak=point,
                       peak_buffers=buffers)
    fig = peak_buffers_figure(t)
    assert list(fig.data[0].y) == ["bfloat16[12,256,1024] while.85{2} (models.py:142)"]
    assert fig.layout.showlegend is True and fig.data[0].name == "temporary"
