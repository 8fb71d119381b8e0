"""The Memory figures of a TPU compile add up, each explained from what libtpu reports
(issue 33 item 12): transformer_train in bfloat16 under fsdp_tp on tpu-v5e-2x4 read a total of
249.5 KiB, a sum by kind of 98.1 KiB and a peak over the program of 268.5 KiB.

What each is, worked out here by hand:

- libtpu lays every array out in tiles and allocates whole tiles. The size of an array in a
  tiled layout is XLA's rule for it: the layout's first tile pads the array's most minor
  dimensions (in the layout's minor-to-major order; missing ones count as 1) up to multiples of
  the tile's, the other dimensions count as they are; later tiles (the `(2,1)` packing two bf16
  rows) add no padding. So a per-device bf16[64,32] laid out `{0,1:T(8,128)(2,1)}` (dimension 0
  most minor) takes 128 * 32 * 2 = 8 KiB for 4 KiB of values.
- memory_analysis()'s arguments are the inputs' allocations, padded so; its outputs are the
  outputs' allocations, those written into a donated input's buffer (aliased) included, plus
  the output tuple's table of pointers, an allocation of its own.
- The sizes by kind were the tensors' logical sizes (shape x dtype): 2.5 times less than the
  arguments here. They are the allocations now, as the arguments are.
- Memory over the program holds the program's constants the whole run, which the memory
  analysis counts in none of its figures, and the temporaries the buffer assignment has live at
  the peak, where libtpu's memory analysis reports none for this program.
"""

import importlib.util

import pytest

from explorer._src.report.memory import allocated_bytes, memory_kinds, outside_kinds, peak_note
from explorer._src.report.report import (
    Buffer,
    BufferKind,
    Cost,
    Memory,
    MemoryPoint,
    MemoryTimeline,
    Report,
    TensorInfo,
    TensorRole,
    Timing,
)
from explorer._src.spec.mesh import parse_mesh
from explorer._src.units import format_bytes

KiB = 1024

needs_libtpu = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                                  reason="libtpu (the tpu extra) is not installed")

# The per-device inputs of transformer_train (batch 8, seq 32, vocab 256, d_model 64, 4 heads of
# 16, d_ff 256, 2 layers) in bfloat16 under fsdp_tp on data=2,model=4 (embed over data; vocab,
# heads and mlp over model; batch over data), each with the layout libtpu gave it in the
# compiled module's entry_computation_layout, and its size by the tile rule above.
PARAMS = {
    # [256,64] -> [64,32]; dim 0 (64) most minor: 128 * 32 rows * 2 bytes
    "embed": ("bf16[64,32]{0,1:T(8,128)(2,1)}", 128 * 32 * 2),
    # [2,64] -> [2,32]; a (2,128) tile: 32 -> 128, 2 rows as they are
    "layers.ln1": ("bf16[2,32]{1,0:T(2,128)(2,1)}", 128 * 2 * 2),
    # [2,64,4,16] -> [2,32,1,16]; dim 1 (32) most minor -> 128, dim 3 (16) a multiple of 8
    "layers.wq": ("bf16[2,32,1,16]{1,3,2,0:T(8,128)(2,1)}", 128 * 16 * 1 * 2 * 2),
    "layers.wk": ("bf16[2,32,1,16]{1,3,2,0:T(8,128)(2,1)}", 128 * 16 * 1 * 2 * 2),
    "layers.wv": ("bf16[2,32,1,16]{1,3,2,0:T(8,128)(2,1)}", 128 * 16 * 1 * 2 * 2),
    # [2,4,16,64] -> [2,1,16,32]: 32 -> 128, 16 rows
    "layers.wo": ("bf16[2,1,16,32]{3,2,1,0:T(8,128)(2,1)}", 128 * 16 * 1 * 2 * 2),
    "layers.ln2": ("bf16[2,32]{1,0:T(2,128)(2,1)}", 128 * 2 * 2),
    # [2,64,256] -> [2,32,64]: 64 -> 128, 32 rows
    "layers.w1": ("bf16[2,32,64]{2,1,0:T(8,128)(2,1)}", 128 * 32 * 2 * 2),
    # [2,256,64] -> [2,64,32]; dim 1 (64) most minor -> 128, dim 2 (32) rows
    "layers.w2": ("bf16[2,64,32]{1,2,0:T(8,128)(2,1)}", 128 * 32 * 2 * 2),
    # [64] -> [32]; a 1-D tile of 256: 32 -> 256
    "final_norm": ("bf16[32]{0:T(256)(128)(2,1)}", 256 * 2),
    # [64,256] -> [32,64]: 64 -> 128, 32 rows
    "unembed": ("bf16[32,64]{1,0:T(8,128)(2,1)}", 128 * 32 * 2),
}
# tokens and targets, int32 [8,32] -> [4,32]: a (4,128) tile, 32 -> 128, 4 rows of 4 bytes.
BATCH = ("s32[4,32]{1,0:T(4,128)}", 128 * 4 * 4)
PARAM_BYTES = sum(b for _, b in PARAMS.values())                  # 81.5 KiB
# The same parameters' values, shape x dtype (what the sizes by kind used to count).
PARAM_VALUES = (64 * 32 + 2 * 32 * 2 + 4 * 2 * 32 * 16 + 2 * 2 * 32 * 64 + 32 + 32 * 64) * 2
# The smallest allocation libtpu makes, 512 bytes: a scalar's T(128) tile of 4-byte values,
# a bf16[2,32]'s (2,128) tile. The output tuple's table of 34 pointers takes one.
SMALLEST = 512


@pytest.mark.parametrize("shape, expected", [
    *PARAMS.values(), BATCH,
    ("f32[]{:T(128)}", 128 * 4),                    # a scalar fills a 128-wide tile
    ("pred[]{:T(512)}", 512),
    ("f32[1024,1024]{1,0:T(8,128)}", 1024 * 1024 * 4),   # a multiple of the tile: no padding
    ("f32[3,5]{1,0:T(8,128)S(1)}", 8 * 128 * 4),    # in VMEM: the same tiles
    ("s4[1000]{0:T(1024)E(4)}", 1024 // 2),         # 4-bit elements: half a byte each
])
def test_an_arrays_allocation_is_its_layouts_whole_tiles(shape, expected):
    assert allocated_bytes(shape) == expected


def test_an_untiled_layout_or_a_tuple_is_left_to_the_logical_size():
    assert allocated_bytes("f32[256,1024]{1,0}") is None          # a CPU's layout
    assert allocated_bytes("f32[256,1024]") is None
    assert allocated_bytes("(f32[8]{0:T(128)}, f32[8]{0:T(128)})") is None


def _tensor(name, kind, shape, dtype, nbytes):
    return TensorInfo(name, kind, shape, dtype, "{replicated}", (None,) * len(shape), shape, 8,
                      nbytes)


IN, OUT = TensorRole.INPUT, TensorRole.OUTPUT
# A hand-written TPU module header: w (a param, donated into out.w) and tokens in; the new w
# and a scalar loss out, the loss in a buffer of its own.
HEADER = ("HloModule step, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias) }, "
          "entry_computation_layout={(bf16[64,32]{0,1:T(8,128)(2,1)}, s32[4,32]{1,0:T(4,128)})"
          "->(bf16[64,32]{0,1:T(8,128)(2,1)}, f32[]{:T(128)})}\n")
ARGUMENTS = 8 * KiB + 2 * KiB          # w's and tokens' allocations, padded as in PARAMS
OUTPUTS = 8 * KiB + SMALLEST + SMALLEST    # the new w (w's buffer), the loss, the tuple table


def _report(timeline=None):
    return Report(parse_mesh("data=8"), "shardy", "tpu v5e:2x4", (), (
        _tensor("w", IN, (64, 32), "bfloat16", 64 * 32 * 2),
        _tensor("tokens", IN, (4, 32), "int32", 4 * 32 * 4),
        _tensor("out.w", OUT, (64, 32), "bfloat16", 64 * 32 * 2),
        _tensor("out.loss", OUT, (), "float32", 4)),
        Memory(arguments=ARGUMENTS, outputs=OUTPUTS, aliased=8 * KiB, temporaries=0,
               generated_code=0),
        Cost(None, None, None, 0), Timing(0.0, 0.0), optimized_hlo=HEADER,
        memory_timeline=timeline)


def test_sizes_by_kind_are_the_allocations_where_the_layout_tiles():
    r = _report()
    kinds = memory_kinds(r, {"w": "param", "tokens": "input"}, has_grads=False)
    # w: 8 KiB allocated for its 4 KiB of values; other: tokens (2 KiB for 512 B) and the loss
    # (one 512-byte tile for 4 bytes); the new w is in w's buffer, counted once.
    assert kinds["params"] == 8 * KiB
    assert kinds["other"] == 2 * KiB + SMALLEST
    # What no kind holds is the tuple table: by kind + it = the total.
    m = Memory(**{**r.memory.__dict__, "kinds": kinds})
    assert m.total == ARGUMENTS + SMALLEST + SMALLEST
    assert outside_kinds(m) == SMALLEST


def test_a_peak_above_the_total_says_by_what():
    # Held: the arguments, the loss's and the table's allocations (1 KiB), 1 KiB of constants;
    # 2 KiB of temporaries live at the peak, where the memory analysis reported none.
    peak = MemoryPoint(5, "fusion.3", ARGUMENTS + KiB + KiB + 2 * KiB, 2 * KiB)
    t = MemoryTimeline(points=(peak,), arguments=ARGUMENTS, outputs=KiB, constants=KiB,
                       peak=peak)
    note = peak_note(_report(t))
    assert note is not None
    # 14 KiB at the peak against a total of 11 KiB: 3 KiB more, 1 KiB constants + 2 KiB temps.
    for figure in ("14.0 KiB", "11.0 KiB", "3.0 KiB", "1.0 KiB of constants",
                   "2.0 KiB of temporaries"):
        assert figure in note
    # A peak at or under the total needs no word.
    low = MemoryPoint(5, "fusion.3", ARGUMENTS + KiB, 0)
    assert peak_note(_report(MemoryTimeline((low,), ARGUMENTS, KiB, 0, low))) is None


@pytest.fixture(scope="module")
def tpu_report():
    import explorer

    return explorer.analyze_workload("transformer_train", "data=2,model=4", preset="fsdp_tp",
                                     target="tpu-v5e-2x4", params={"dtype": "bfloat16"})


@pytest.mark.slow
@pytest.mark.tpu
@needs_libtpu
def test_libtpus_arguments_are_the_inputs_padded_to_their_tiles(tpu_report):
    m = tpu_report.memory
    assert tpu_report.backend.startswith("tpu")
    # params, m and v (the same shapes, the same layouts) and tokens and targets.
    assert m.arguments == 3 * PARAM_BYTES + 2 * BATCH[1] == 254464        # 248.5 KiB
    # Donated: every state input's buffer takes an output (the loss took one of the 512-byte
    # ones); one state output of 512 bytes is left to a buffer of its own; with the tuple table
    # that is what the outputs hold beyond the aliased.
    assert m.aliased == 3 * PARAM_BYTES
    assert m.outputs - m.aliased == SMALLEST + SMALLEST
    assert m.temporaries == 0                   # as libtpu reports it for this program
    assert m.total == 3 * PARAM_BYTES + 2 * BATCH[1] + 2 * SMALLEST == 255488   # 249.5 KiB


@pytest.mark.slow
@pytest.mark.tpu
@needs_libtpu
def test_the_sizes_by_kind_are_the_allocations_and_add_up_to_the_total(tpu_report):
    m = tpu_report.memory
    k = m.by_kind
    # Before: params 32.3 KiB (PARAM_VALUES), optimizer 64.8 KiB, other 1 KiB: 98.1 KiB in all.
    # Now each is allocated bytes; the one output held beside its input is a 512-byte state
    # array (params' or optimizer's, as libtpu paired the buffers).
    assert k["params"] + k["optimizer"] == 3 * PARAM_BYTES + SMALLEST
    assert PARAM_BYTES <= k["params"] <= PARAM_BYTES + SMALLEST
    assert k["other"] == 2 * BATCH[1]                   # tokens and targets; the loss aliased
    assert k["activations"] == m.temporaries == 0
    # The gradients stay their values' size: XLA allocates no buffer of its own for them.
    assert k["grads"] == PARAM_VALUES
    # By kind + the output tuple's table = the total, exactly.
    assert outside_kinds(m) == SMALLEST
    assert k["params"] + k["optimizer"] + k["activations"] + k["other"] + SMALLEST == m.total


@pytest.mark.slow
@pytest.mark.tpu
@needs_libtpu
def test_the_peak_above_the_total_is_explained_by_constants_and_temporaries(tpu_report):
    m, t = tpu_report.memory, tpu_report.memory_timeline
    # The held allocations are the memory analysis' own: arguments, and outputs not aliased.
    assert t.arguments == m.arguments and t.outputs == m.outputs - m.aliased
    # So the peak exceeds the total by the constants (the analysis has no figure for them) and
    # the temporaries live at the peak beyond the analysis' temporaries (0), nothing else.
    assert t.constants > 0 and t.peak.temporaries > 0
    assert t.peak.bytes - m.total == t.constants + t.peak.temporaries - m.temporaries > 0
    note = peak_note(tpu_report)
    assert note is not None
    for figure in (format_bytes(t.peak.bytes), format_bytes(m.total),
                   f"{format_bytes(t.constants)} of constants",
                   f"{format_bytes(t.peak.temporaries)} of temporaries"):
        assert figure in note
    # The table of pointers that no kind holds is a held output allocation of its own.
    tables = [b for b in t.peak_buffers if b.kind == BufferKind.OUTPUT and b.dtype == "tuple"]
    assert sum(b.bytes for b in tables) == SMALLEST
    assert all(isinstance(b, Buffer) for b in tables)


@pytest.mark.slow
@pytest.mark.tpu
@needs_libtpu
def test_the_memory_view_shows_figures_that_add_up_and_says_why_the_peak_is_above(tpu_report):
    pytest.importorskip("ipywidgets")
    from explorer._src.ui.memory import OUTSIDE_LABEL, MemoryView, memory_html

    text = memory_html(tpu_report)
    total = format_bytes(tpu_report.memory.total)
    # The total, and the sum by kind (with the tuple table's row) are one figure.
    assert f"<b>total {total}</b>" in text
    assert f"<b>sum</b></td><td class='explorer-num'><b>{total}</b>" in text
    assert "tuple table" in text
    # The padding is said: the inputs' values against their allocations.
    assert format_bytes(3 * PARAM_VALUES + 2 * 4 * 32 * 4) in text
    assert format_bytes(tpu_report.memory.arguments) in text
    # The chart: the by-kind row ends where the XLA row does, the tuple table its last part.
    view = MemoryView()
    view.update(tpu_report)
    shown = {(b.y[0], b.name): b.x[0] for b in view.fig.data if b.visible is not False}
    assert sum(v for (row, _), v in shown.items() if row == "by kind") == tpu_report.memory.total
    assert shown[("by kind", OUTSIDE_LABEL)] == SMALLEST
    # Above the curve, why its peak is above the total.
    t = tpu_report.memory_timeline
    assert (f"{format_bytes(t.constants)} of constants" in view.timeline_note.value
            and format_bytes(t.peak.bytes) in view.timeline_note.value)
