# ruff: noqa: E501  (HLO instruction lines are long)
"""The largest buffers live at the memory peak (explorer/_src/report/buffers.py) and the verdict of
a program that does not fit the device's memory (explorer/_src/report/oom.py).

Compiled programs are defined here; their buffers are sized by hand and checked against XLA's
own memory_analysis() where it gives one."""

import importlib.util
import inspect

import jax.numpy as jnp
import pytest

from explorer import TensorSpec, analyze
from explorer._src.compile.backend import (
    is_out_of_memory,
    peak_section,
    root_shardings,
    value_lines,
)
from explorer._src.hlo.module import parse_module, subshape
from explorer._src.report.buffers import peak_entries, top_buffers
from explorer._src.report.oom import memory_verdict
from explorer._src.report.summary import summary

F32, BF16 = 4, 2
GiB = 1 << 30
needs_libtpu = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                                  reason="libtpu (the tpu extra) is not installed")


def two_layers(x, w1, w2):
    h = jnp.tanh(x @ w1)   # HIDDEN
    return h @ w2          # OUTPUT


def _line(marker: str) -> int:
    lines, start = inspect.getsourcelines(two_layers)
    return start + next(i for i, text in enumerate(lines) if marker in text)


INPUTS = (TensorSpec("x", (64, 128), "float32", ("data", None)),
          TensorSpec("w1", (128, 1024)), TensorSpec("w2", (1024, 16)))


@pytest.mark.slow
def test_buffers_at_the_peak_of_a_two_layer_program():
    # Per device on data=2: x[32,128] (16 KiB), w1[128,1024] (512 KiB) and w2[1024,16]
    # (64 KiB) are live throughout; the hidden h[32,1024] (128 KiB) is live until the second
    # matmul has written out[32,16] (2 KiB). The peak is that step: all five, 722 KiB.
    r = analyze(two_layers, *INPUTS, mesh="data=2")
    got = [(b.shape, b.dtype, b.bytes, b.instruction) for b in r.top_buffers]
    assert got == [
        ((128, 1024), "float32", 128 * 1024 * F32, "input w1"),
        ((32, 1024), "float32", 32 * 1024 * F32, "jit(two_layers)/tanh"),
        ((1024, 16), "float32", 1024 * 16 * F32, "input w2"),
        ((32, 128), "float32", 32 * 128 * F32, "input x"),
        ((32, 16), "float32", 32 * 16 * F32, "jit(two_layers)/dot_general"),
    ]
    hidden, out = r.top_buffers[1], r.top_buffers[4]
    assert hidden.source.endswith(f"test_buffers.py:{_line('HIDDEN')}")
    assert hidden.source_text == "h = jnp.tanh(x @ w1)   # HIDDEN"
    assert out.source.endswith(f"test_buffers.py:{_line('OUTPUT')}")
    # XLA's memory_analysis() counts the same bytes: arguments, output, one temporary.
    assert sum(b.bytes for b in r.top_buffers) == r.memory.total == 722 * 1024
    d = r.to_dict()["memory"]
    assert d["top_buffers"][0] == {"name": r.top_buffers[0].name, "bytes": 524288,
                                   "shape": (128, 1024), "dtype": "float32",
                                   "instruction": "input w1", "source": "", "source_text": "",
                                   "aliases": (), "kind": "argument"}
    assert d["verdict"] is None
    assert "largest buffers live at the memory peak, per device:" in summary(r)


@pytest.mark.slow
def test_only_the_ten_largest_are_kept():
    # Eleven inputs of distinct sizes (the largest 2816 bytes), live throughout, and reductions
    # of a few bytes: the ten largest inputs, largest first, named as the request names them.
    def many(*xs):
        return sum(jnp.sum(x) for x in xs)

    inputs = [TensorSpec(f"x{i}", (8, 8 * (i + 1))) for i in range(11)]
    r = analyze(many, *inputs, mesh="d=1")
    assert [(b.instruction, b.shape, b.bytes) for b in r.top_buffers] == [
        (f"input x{i}", (8, 8 * (i + 1)), 8 * 8 * (i + 1) * F32) for i in range(10, 0, -1)]


# The peak section and buffer assignment as the TPU compiler writes them (captured from a
# v5e compile, trimmed): a tuple-valued copy-start whose part 0 sits in VMEM (S(1)), an output
# whose allocation is padded to (8,128) tiles beyond the 2048 bytes the live ranges count.
LIVE_RANGE = """HloLiveRange (max 7):
  InstructionSequence:
    0:param.2
  BufferLiveRange:
    param.2{}:0-7
  Live ranges at 5 (peak):
    copy-start{0}: 524288 bytes (cumulative: 524288 bytes)
    param.1{}: 524288 bytes (cumulative: 1048576 bytes)
    fusion{}: 2048 bytes (cumulative: 1050624 bytes)
  Stack trace breakdown for peak usage: 1 050 624 bytes
    main.0_spmd (100.0%, total: 1 050 624 bytes, current: 0 bytes, remaining: 1 050 624 bytes)
"""
ASSIGNMENT = """BufferAssignment:
allocation 0: size 8192, output shape is |f32[32,16]|, maybe-live-out:
 value: <22 fusion @0> (size=8192,offset=0): f32[32,16]{0,1:T(8,128)}
allocation 1: size 524288, parameter 1, shape |f32[128,1024]| at ShapeIndex {}:
 value: <18 param.1 @0> (size=524288,offset=0): f32[128,1024]{1,0:T(8,128)}
allocation 4: size 524288, color 1, preallocated-temp:
 value: <20 copy-start{0} @1> (size=524288,offset=0): f32[128,1024]{1,0:T(8,128)S(1)}
allocation 5: size 512, preallocated-temp:
 value: <19 copy-start{} @0> (size=512,offset=0): (f32[128,1024]{1,0:T(8,128)S(1)}, f32[128,1024]{1,0:T(8,128)}, u32[]{:S(2)})
"""
MODULE = """HloModule jit_f, num_partitions=4

ENTRY %main.0_spmd (param.1: f32[128,1024]) -> f32[32,16] {
  %param.1 = f32[128,1024]{1,0:T(8,128)} parameter(0), sharding={replicated}, metadata={op_name="w1"}
  %copy-start = (f32[128,1024]{1,0:T(8,128)S(1)}, f32[128,1024]{1,0:T(8,128)}, u32[]{:S(2)}) copy-start(%param.1)
  ROOT %fusion = f32[32,16]{0,1:T(8,128)} fusion(%param.1), kind=kOutput, calls=%f, metadata={op_name="jit(f)/dot_general"}
}
"""


def test_the_peak_section_is_read_with_allocated_sizes_and_vmem_left_out():
    section = peak_section(LIVE_RANGE)
    assert section.splitlines()[0].strip() == "Live ranges at 5 (peak):"
    assert peak_entries(section) == [("copy-start", (0,), 524288), ("param.1", (), 524288),
                                     ("fusion", (), 2048)]
    buffers = top_buffers(section, parse_module(MODULE), value_lines(ASSIGNMENT))
    # copy-start{0} lives in VMEM (S(1)): not HBM. The output's (8,128) tiles over its
    # {0,1} layout: the minor dim 32 pads to 128 and the major 16 is a multiple of 8,
    # so 16 × 128 × 4 bytes.
    assert [(b.name, b.bytes, b.shape, b.instruction) for b in buffers] == [
        ("param.1", 128 * 1024 * F32, (128, 1024), "input w1"),
        ("fusion", 16 * 128 * F32, (32, 16), "jit(f)/dot_general")]


# An all-reduce that sums a matmul result in place, as the TPU compiler assigned it (captured
# from a v5e compile of x @ w with the contracting dimension over data=8): both values are live
# at the peak, in the same bytes of allocation 1.
IN_PLACE_LIVE = """  Live ranges at 3 (peak):
    all-reduce{}: 68719476736 bytes (cumulative: 68719476736 bytes)
    fusion{}: 68719476736 bytes (cumulative: 137438953472 bytes)
    param{}: 4294967296 bytes (cumulative: 141733920768 bytes)
"""
IN_PLACE_ASSIGNMENT = """allocation 1: size 68719476736, output shape is |f32[131072,131072]|, maybe-live-out:
 value: <12 fusion @0> (size=68719476736,offset=0): f32[131072,131072]{1,0:T(8,128)}
 value: <13 all-reduce @0> (size=68719476736,offset=0): f32[131072,131072]{1,0:T(8,128)}
allocation 2: size 4294967296, parameter 0, shape |f32[131072,8192]| at ShapeIndex {}:
 value: <10 param @0> (size=4294967296,offset=0): f32[131072,8192]{1,0:T(8,128)}
"""
IN_PLACE_MODULE = """HloModule jit_f, num_partitions=8

ENTRY %main.0_spmd (param: f32[131072,8192]) -> f32[131072,131072] {
  %param = f32[131072,8192]{1,0:T(8,128)} parameter(0), metadata={op_name="x"}
  %fusion = f32[131072,131072]{1,0:T(8,128)} fusion(%param), kind=kOutput, calls=%f, metadata={op_name="jit(f)/dot_general"}
  ROOT %all-reduce = f32[131072,131072]{1,0:T(8,128)} all-reduce(%fusion), channel_id=1, replica_groups=[1,8]<=[8], to_apply=%add, metadata={op_name="jit(f)/dot_general"}
}
"""


def test_values_updated_in_place_are_one_buffer():
    buffers = top_buffers(peak_section(IN_PLACE_LIVE), parse_module(IN_PLACE_MODULE),
                          value_lines(IN_PLACE_ASSIGNMENT), ["x"])
    # 131072² f32 = 64 GiB held once (the live ranges count it twice), and x's 4 GiB slice:
    # 68 GiB, where the live ranges' cumulative count says 132 GiB.
    assert [(b.name, b.bytes, b.aliases, b.instruction) for b in buffers] == [
        ("all-reduce", 131072**2 * F32, ("fusion",), "jit(f)/dot_general"),
        ("param", 131072 * 8192 * F32, (), "input x")]


def test_subshape_walks_nested_tuples():
    shape = "(f32[2]{0}, (s32[], bf16[4,8]{1,0:T(8,128)(2,1)}), u32[])"
    assert subshape(shape, ()) == shape
    assert subshape(shape, (1, 1)) == "bf16[4,8]{1,0:T(8,128)(2,1)}"
    assert subshape(shape, (2,)) == "u32[]"
    assert subshape(shape, (3,)) is None and subshape("f32[2]", (0,)) is None
    assert subshape("(f32[], /*index=1*/(s8[2], u8[3]))", (1, 0)) == "s8[2]"


def test_output_shardings_are_read_from_the_root_of_the_propagated_module():
    one = "HloModule m\n\nENTRY %main (p: f32[8]) -> f32[8] {\n" \
          "  ROOT %p = f32[8]{0} parameter(0), sharding={devices=[4]<=[4]}\n}\n"
    assert root_shardings(one, 1) == ["{devices=[4]<=[4]}"]
    two = "HloModule m\n\nENTRY %main (p: f32[8]) -> (f32[8], f32[]) {\n" \
          "  %p = f32[8]{0} parameter(0)\n" \
          "  ROOT %t = (f32[8]{0}, f32[]) tuple(%p, %p), " \
          "sharding={{devices=[4]<=[4]}, {replicated}}\n}\n"
    assert root_shardings(two, 2) == ["{devices=[4]<=[4]}", "{replicated}"]
    assert root_shardings("", 2) == [None, None]


AHEAD = ("RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO "
         "temporaries (32.06G) exceeds available HBM (15.75G).")
ON_DEVICE = ("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory "
             "space hbm. Used 16.72G of 15.48G hbm. Exceeded hbm capacity by 1.24G.\n\n"
             "Total hbm usage >= 17.24G:\n    reserved        530.00M\n")


def test_the_verdict_reads_both_forms_of_the_message():
    assert is_out_of_memory(AHEAD) and is_out_of_memory(ON_DEVICE)
    assert not is_out_of_memory("INVALID_ARGUMENT: bad sharding")
    v = memory_verdict(AHEAD)
    # tsl prints sizes with a 1024-based unit: 32.06G = 32.06 GiB.
    assert (v.memory, v.what, v.fits) == ("HBM", "HLO temporaries", False)
    assert (v.required, v.available) == (round(32.06 * GiB), round(15.75 * GiB))
    v = memory_verdict(ON_DEVICE)
    assert (v.memory, v.required, v.available) == ("HBM", round(16.72 * GiB),
                                                   round(15.48 * GiB))
    v = memory_verdict("RESOURCE_EXHAUSTED: out of memory somewhere")
    assert (v.required, v.available, v.message) == (None, None,
                                                    "RESOURCE_EXHAUSTED: out of memory somewhere")


def gram(x):
    y = jnp.tanh(x @ x.T)   # GRAM
    return y @ x


@pytest.mark.slow
@needs_libtpu
def test_a_tpu_program_over_its_hbm_is_a_verdict_with_the_rest_of_the_report():
    # x[131072, 1024] bf16 with its columns over data=8: each device multiplies its
    # [131072, 128] slice by its transpose, a partial [131072, 131072] bf16 Gram matrix of
    # 131072² × 2 bytes = 32 GiB, which an all-reduce over `data` sums. A v5e chip has 16 GiB.
    r = analyze(gram, TensorSpec("x", (131072, 1024), "bfloat16", (None, "data")),
                mesh="data=8", tpu_topology="v5e:2x4")
    v = r.memory_verdict
    assert v is not None and not v.fits and v.memory == "HBM"
    # Needed: the Gram matrix, x's slice and the output's (131072 × 128 × 2 bytes each),
    # 32.0625 GiB, which the compiler prints rounded to 32.06G.
    held = 131072**2 * BF16 + 2 * 131072 * 128 * BF16
    assert held == 32.0625 * GiB and abs(v.required - held) < 0.01 * GiB
    assert 15 * GiB < v.available < 16 * GiB
    assert r.memory is None and "does not fit the device's memory" in r.notes[0]
    # The rest of the report, read from what the compiler wrote before it stopped.
    [ar] = r.collectives
    assert (ar.kind, ar.axes, ar.shape, ar.bytes) == ("all-reduce", ("data",), (131072, 131072),
                                                     131072**2 * BF16)
    assert r.tensor("x").shard_shape == (131072, 128)
    assert r.tensor("out").shard_shape == (131072, 128)
    # The buffers at the peak hold what the compiler counted (the partial Gram matrix once,
    # summed in place by the all-reduce).
    assert sum(b.bytes for b in r.top_buffers) == held
    top = r.top_buffers[0]
    assert (top.shape, top.dtype, top.bytes) == ((131072, 131072), "bfloat16", 131072**2 * BF16)
    assert top.source_text == "y = jnp.tanh(x @ x.T)   # GRAM"
    d = r.to_dict()["memory"]
    assert d["verdict"]["required"] == v.required and d["top_buffers"][0]["bytes"] == top.bytes
    text = summary(r)
    assert "memory per device: DOES NOT FIT: 32.1 GiB of HBM needed (HLO temporaries), " \
           "15.8 GiB available" in text
    assert "Ran out of memory on HBM" in text


@needs_libtpu
def test_tpu_buffers_are_sized_as_allocated():
    # The same two layers on a v5e slice: the inputs are live at the peak, and the TPU's
    # allocations add up to its memory_analysis() total.
    r = analyze(two_layers, TensorSpec("x", (128, 128), "float32", ("data", None)),
                *INPUTS[1:], mesh="data=4", tpu_topology="v5e:2x2")
    inputs = [(b.instruction, b.shape, b.bytes) for b in r.top_buffers
              if b.instruction.startswith("input")]
    assert inputs == [("input w1", (128, 1024), 128 * 1024 * F32),
                      ("input w2", (1024, 16), 1024 * 16 * F32),
                      ("input x", (32, 128), 32 * 128 * F32)]
    assert sum(b.bytes for b in r.top_buffers) == r.memory.total
