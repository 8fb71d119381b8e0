# ruff: noqa: E501  (dump and HLO lines are kept verbatim)
"""Memory over the program (explorer/_src/report/memory_timeline.py): the bytes live on one device
at
each step of the schedule, worked out by hand from a hand-written dump and from the shapes of
programs compiled here, and related to XLA's own memory analysis."""

import jax.numpy as jnp
import pytest

import explorer
from explorer import BufferKind, TensorSpec
from explorer._src.compile.backend import schedule_sections, value_lines
from explorer._src.hlo.module import parse_module
from explorer._src.report.buffers import assigned
from explorer._src.report.memory_timeline import memory_timeline, read_live_ranges

KiB = 1024

# One device's program: inputs w (f32[1024], 4096 B) and x (f32[256], 1024 B); a scratch value
# computed in the output's bytes before the output is written there; `a`, and `ar`, an
# all-reduce written over `a` in place; a combined all-reduce `ar.1` of two f32[256] parts and
# its 16-byte tuple table; the output `out` (f32[1024]). Also: a constant (64 B), a fusion's
# thread-local scalar, a VMEM value (color 1) and a bitcast the assignment does not list.
LIVE_RANGE = """HloLiveRange (max 9):
  InstructionSequence:
    0:p0
    1:p1
    2:scratch
    3:a
    4:ar
    5:ar.1
    6:gte
    7:gte.1
    8:out
  BufferLiveRange:
    p0{}:0-9
    p1{}:0-9
    scratch{}:2-3
    a{}:3-4
    vmem{}:3-4
    ar{}:4-8
    ar.1{}:5-7
    ar.1{0}:5-8
    ar.1{1}:5-8
    bitcast.3{}:6-6
    out{}:8-9
  Live ranges at 4 (peak):
    p0{}: 4096 bytes (cumulative: 4096 bytes)
  Stack trace breakdown for peak usage: 4 096 bytes
    main (100.0%, total: 4 096 bytes, current: 0 bytes, remaining: 4 096 bytes)
"""
ASSIGNMENT = """BufferAssignment:
allocation 0: size 4096, parameter 0, shape |f32[1024]| at ShapeIndex {}:
 value: <1 p0 @0> (size=4096,offset=0): f32[1024]{0}
allocation 1: size 1024, parameter 1, shape |f32[256]| at ShapeIndex {}:
 value: <2 p1 @0> (size=1024,offset=0): f32[256]{0}
allocation 2: size 4096, output shape is |f32[1024]|, maybe-live-out:
 value: <3 scratch @0> (size=2048,offset=0): f32[512]{0}
 value: <9 out @0> (size=4096,offset=0): f32[1024]{0}
allocation 3: size 4, thread-local:
 value: <10 add.9 @0> (size=4,offset=0): f32[]
allocation 4: size 64, constant:
 value: <11 constant.1 @0> (size=64,offset=0): f32[16]{0}
allocation 5: size 8192, color 1:
 value: <12 vmem @0> (size=8192,offset=0): f32[2048]{0:S(1)}
allocation 6: size 4112, preallocated-temp:
 value: <4 a @0> (size=2048,offset=0): f32[512]{0}
 value: <5 ar @0> (size=2048,offset=0): f32[512]{0}
 value: <6 ar.1{} @0> (size=16,offset=4096): (f32[256]{0}, f32[256]{0})
 value: <7 ar.1{0} @0> (size=1024,offset=2048): f32[256]{0}
 value: <8 ar.1{1} @0> (size=1024,offset=3072): f32[256]{0}

Total bytes used: 21508 (21.0KiB)
"""
MODULE = """HloModule jit_step, is_scheduled=true

ENTRY %main (p0: f32[1024], p1: f32[256]) -> f32[1024] {
  %p0 = f32[1024]{0} parameter(0), metadata={op_name="w"}
  %p1 = f32[256]{0} parameter(1), metadata={op_name="x"}
  %scratch = f32[512]{0} fusion(%p0), kind=kLoop, calls=%f0, metadata={op_name="jit(step)/sin"}
  %a = f32[512]{0} fusion(%scratch, %p1), kind=kLoop, calls=%f1, metadata={op_name="jit(step)/mul"}
  %ar = f32[512]{0} all-reduce(%a), replica_groups={}, to_apply=%sum, metadata={op_name="jit(step)/psum"}
  %ar.1 = (f32[256]{0}, f32[256]{0}) all-reduce(%p1, %p1), replica_groups={}, to_apply=%sum, metadata={op_name="jit(step)/psum"}
  %gte = f32[256]{0} get-tuple-element(%ar.1), index=0
  %gte.1 = f32[256]{0} get-tuple-element(%ar.1), index=1
  ROOT %out = f32[1024]{0} fusion(%ar, %gte, %gte.1), kind=kLoop, calls=%f2, metadata={op_name="jit(step)/concatenate"}
}
"""


def _timeline():
    return memory_timeline(schedule_sections(LIVE_RANGE), value_lines(ASSIGNMENT),
                           parse_module(MODULE), ["w", "x"])


def test_the_schedule_and_live_ranges_are_kept_without_the_peak_section():
    kept = schedule_sections(LIVE_RANGE)
    assert kept.splitlines()[0].strip() == "InstructionSequence:"
    assert "Live ranges at" not in kept and "Stack trace" not in kept
    sequence, ranges = read_live_ranges(kept)
    assert sequence == ["p0", "p1", "scratch", "a", "ar", "ar.1", "gte", "gte.1", "out"]
    # Values are named as explorer._src.report.buffers names them: "p0{}" is "p0", a tuple's table
    # "ar.1{}" is "ar.1", its parts keep their index.
    assert ranges[0] == ("p0", 0, 9) and ("ar.1", 5, 7) in ranges and ("ar.1{0}", 5, 8) in ranges


def test_the_curve_of_a_hand_written_dump_is_the_bytes_worked_out_by_hand():
    t = _timeline()
    # Held the whole program: the inputs (4096 + 1024), the output's allocation (4096), the
    # constant (64). The thread-local scalar and the VMEM value are not the device memory's.
    assert (t.arguments, t.outputs, t.constants, t.held) == (5120, 4096, 64, 9280)
    temporaries = [p.temporaries for p in t.points]
    # 0-2: none among the temporaries (the scratch value lies in the output's bytes);
    # 3: a (2048); 4: ar written over a, the same 2048 bytes once;
    # 5-7: ar + both parts (1024 each) + the tuple's table (16) = 4112;
    # 8: the table is dead: 4096.
    assert temporaries == [0, 0, 0, 2048, 2048, 4112, 4112, 4112, 4096]
    assert [p.bytes for p in t.points] == [9280 + b for b in temporaries]
    assert [p.instruction for p in t.points][5] == "ar.1"
    assert t.notes == ("1 value of the live ranges not in the buffer assignment, left out of "
                       "the curve",)


def test_the_peak_is_the_first_fullest_step_and_its_buffers_have_kinds():
    t = _timeline()
    assert (t.peak.position, t.peak.instruction, t.peak.bytes) == (5, "ar.1", 13392)
    # Here the temporaries fill their allocation (4112 bytes) at the peak: it is everything
    # the buffer assignment allocated for the device, thread-local and VMEM bytes aside.
    assert t.peak.bytes == 5120 + 4096 + 64 + 4112
    assert t.peak_by_kind == {BufferKind.ARGUMENT: 5120, BufferKind.OUTPUT: 4096,
                              BufferKind.CONSTANT: 64, BufferKind.TEMPORARY: 4112}
    got = [(b.name, b.bytes, b.kind, b.instruction) for b in t.peak_buffers]
    assert got == [
        ("p0", 4096, BufferKind.ARGUMENT, "input w"),
        # The output's allocation is named by the value it holds at the end, not the scratch.
        ("out", 4096, BufferKind.OUTPUT, "jit(step)/concatenate"),
        ("ar", 2048, BufferKind.TEMPORARY, "jit(step)/psum"),
        ("p1", 1024, BufferKind.ARGUMENT, "input x"),
        ("ar.1{0}", 1024, BufferKind.TEMPORARY, "jit(step)/psum"),
        ("ar.1{1}", 1024, BufferKind.TEMPORARY, "jit(step)/psum"),
        ("constant.1", 64, BufferKind.CONSTANT, ""),   # not in the module: bytes alone
        ("ar.1", 16, BufferKind.TEMPORARY, "jit(step)/psum"),
    ]
    assert t.peak_buffers[0].shape == (1024,) and t.peak_buffers[0].dtype == "float32"


def test_timeline_json_has_the_curve_as_columns_and_the_peak():
    d = _timeline().to_dict()
    assert d["positions"] == list(range(9))
    assert d["temporaries"][3:6] == [2048, 2048, 4112]
    assert d["peak"] == {"position": 5, "instruction": "ar.1", "bytes": 13392,
                         "temporaries": 4112}
    assert d["peak_by_kind"] == {"argument": 5120, "output": 4096, "constant": 64,
                                 "temporary": 4112}
    assert d["peak_buffers"][1]["kind"] == "output"


def test_a_loops_carried_values_marked_phi_are_placed():
    line = "value: <2023 param.1{15} (phi) @0> (size=16384,offset=0): f32[2,4,32,1,16]{4,3,2,1,0}"
    where = assigned("allocation 7: size 16384, preallocated-temp:\n" + line)["param.1{15}"]
    assert (where.allocation, where.offset, where.size) == (7, 0, 16384)


def test_without_live_ranges_there_is_no_timeline():
    assert memory_timeline("", value_lines(ASSIGNMENT), parse_module(MODULE)) is None
    assert memory_timeline(schedule_sections(LIVE_RANGE), "", parse_module(MODULE)) is None


def two_layers(x, w1, w2):
    h = jnp.tanh(x @ w1)   # HIDDEN
    return h @ w2


@pytest.mark.slow
def test_a_users_two_layer_program_peaks_at_its_inputs_hidden_and_output():
    # Per device on data=2: x[32,128] (16 KiB), w1[128,1024] (512 KiB) and w2[1024,16]
    # (64 KiB) are held throughout, and so is the output out[32,16] (2 KiB); the hidden
    # h[32,1024] (128 KiB) is the only temporary. Peak: 722 KiB, XLA's arguments + outputs +
    # temporaries. Arguments + temporaries alone would be 720 KiB: the output is held too.
    r = explorer.analyze(two_layers, TensorSpec("x", (64, 128), "float32", ("data", None)),
                         TensorSpec("w1", (128, 1024)), TensorSpec("w2", (1024, 16)),
                         mesh="data=2")
    t = r.memory_timeline
    assert (t.arguments, t.outputs) == (592 * KiB, 2 * KiB)
    assert t.peak.temporaries == 128 * KiB
    assert t.peak.bytes == 722 * KiB == r.memory.total
    assert r.memory.arguments + r.memory.temporaries == 720 * KiB
    # The peak starts at the first matmul, whose result the tanh then overwrites in place.
    assert [(b.instruction, b.kind, b.bytes) for b in t.peak_buffers] == [
        ("input w1", BufferKind.ARGUMENT, 512 * KiB),
        ("jit(two_layers)/dot_general", BufferKind.TEMPORARY, 128 * KiB),
        ("input w2", BufferKind.ARGUMENT, 64 * KiB),
        ("input x", BufferKind.ARGUMENT, 16 * KiB),
        ("jit(two_layers)/dot_general", BufferKind.OUTPUT, 2 * KiB)]
    assert t.peak_buffers[1].source_text == "h = jnp.tanh(x @ w1)   # HIDDEN"


@pytest.mark.slow
def test_a_two_layer_train_step_holds_xlas_arguments_and_outputs_and_its_peak_temporaries_fit():
    # transformer_train (2 layers, Adam) under fsdp_tp. XLA's memory analysis says what is
    # held at every step: the arguments plus the outputs that share no input's bytes (the
    # state is donated: its new copy is the old one's bytes), plus the constants; the peak adds
    # the temporaries live at once, which lie inside XLA's temporaries allocation, so it is at
    # most Memory.total (plus constants). Donated, the outputs add only what is not state:
    # the f32 loss (4 bytes) and the CPU's table of the 34 outputs (8 bytes each), for the 11
    # params (embed, the 8 stacked block weights, final_norm, unembed), m and v.
    # XProf's own reading of the same module peaks at the same bytes (tests/report/test_xprof.py).
    r = explorer.analyze_workload("transformer_train", "data=2,model=4", preset="fsdp_tp")
    m, t = r.memory, r.memory_timeline
    assert (t.arguments, t.outputs) == (m.arguments, m.outputs - m.aliased)
    assert all(p.bytes - p.temporaries == m.arguments + m.outputs - m.aliased + t.constants
               for p in t.points)
    assert 0 < t.peak.temporaries <= m.temporaries
    assert t.peak.bytes <= m.total + t.constants
    assert m.outputs - m.aliased == 4 + 34 * 8
    by_kind = {k: sum(b.bytes for b in t.peak_buffers if b.kind == k) for k in BufferKind}
    assert by_kind[BufferKind.ARGUMENT] == m.arguments
    assert by_kind[BufferKind.OUTPUT] == m.outputs - m.aliased
    # Every value of the live ranges is placed, the layer loop's carried (phi) values among them.
    assert len(t.points) > 100 and t.notes == ()
    assert r.to_dict()["memory"]["timeline"]["peak"]["bytes"] == t.peak.bytes
