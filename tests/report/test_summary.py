"""The plain-text summary the CLI prints, on a Report built by hand: byte counts in binary
units, the collectives and tensors tables, one paragraph per distinct reason, and the memory
lines for a program that fits and one that does not. (tests/test_cli.py reads the summary of
compiled programs.)"""

import pytest

from explorer import Reason, Why
from explorer._src.report.report import (
    Buffer,
    Collective,
    Cost,
    Memory,
    MemoryVerdict,
    Report,
    TensorInfo,
    TensorRole,
    Timing,
)
from explorer._src.report.summary import (
    collectives_table,
    memory_lines,
    summary,
    tensors_table,
    why_lines,
)
from explorer._src.spec.mesh import parse_mesh
from explorer._src.units import format_bytes

MiB = 2**20


@pytest.mark.parametrize("n, text", [
    (0, "0 B"), (1023, "1023 B"),
    (1024, "1.0 KiB"), (1536, "1.5 KiB"),          # 1536 / 1024 = 1.5
    (5 * 2**30, "5.0 GiB"),
    (2**50, "1024.0 TiB"),                          # TiB is the largest unit
    (None, "n/a"),
])
def test_byte_counts_are_written_in_binary_units(n, text):
    assert format_bytes(n) == text


# Megatron's MLP on data=2,model=4, written out: x [256,1024] split on data (128·1024·4 bytes a
# device = 512 KiB), w1 [1024,4096] split on model (1024·1024·4 = 4 MiB), and the all-reduce
# of the [128,1024] f32 partial sums over model (512 KiB), run twice in a loop of 2.
PARTIAL_SUM = Why(Reason.PARTIAL_SUM, "w2 is split on its contracting dimension")
ALL_REDUCE = Collective("all-reduce", ("model",), 4, (128, 1024), "float32", 512 * 1024,
                        source="model.py:7", source_text="y = h @ w2", why=PARTIAL_SUM, runs=2)
GATHER = Collective("all-gather", ("data",), 2, (1024, 1024), "float32", 4 * MiB, parts=3,
                    is_async=True)


def tensor(name, kind, shape, spec, shard, replicas):
    nbytes = 4
    for d in shard:
        nbytes *= d
    return TensorInfo(name, kind, shape, "float32", "", spec, shard, replicas, nbytes)


X = tensor("x", TensorRole.INPUT, (256, 1024), ("data", None), (128, 1024), 4)
W1 = tensor("w1", TensorRole.INPUT, (1024, 4096), (None, "model"), (1024, 1024), 2)
OUT = tensor("out", TensorRole.OUTPUT, (256, 1024), ("data", None), (128, 1024), 4)
H = tensor("dot.1", TensorRole.INTERMEDIATE, (256, 4096), ("data", "model"), (128, 1024), 1)


def report(collectives=(), memory=None, **fields):
    return Report(parse_mesh("data=2,model=4"), "shardy", "cpu", tuple(collectives),
                  (X, W1, OUT, H), memory, Cost(2.5e9, 3 * MiB, None, 2 * 512 * 1024),
                  Timing(0.012, 0.3456), **fields)


def test_a_program_without_collectives_says_every_device_computes_alone():
    assert collectives_table(report()) == [
        "(no collectives: every device computes its part alone)"]


def test_the_collectives_table_has_a_row_per_collective_with_its_size_runs_and_reason():
    header, reduce_row, gather_row = collectives_table(report((ALL_REDUCE, GATHER)))
    assert header.split() == ["#", "kind", "axes", "group", "shape", "bytes/device", "runs",
                              "why", "source", "code"]
    assert reduce_row.split() == ["1", "all-reduce", "model", "4", "float32[128,1024]",
                                  "512.0", "KiB", "x2", "partial-sum", "model.py:7", "y", "=",
                                  "h", "@", "w2"]
    # An async, combined one: its flags in the kind; no reason, source or code read.
    # Its part shapes unread: the shape says three arrays, not the first one's shape alone.
    assert gather_row.split() == ["2", "all-gather", "(async)", "×3", "data", "2",
                                  "(3", "arrays)", "4.0", "MiB", "1", "-", "-", "-"]


def test_collectives_with_one_reason_are_explained_in_one_paragraph():
    twice = report((ALL_REDUCE, GATHER, ALL_REDUCE))
    assert why_lines(twice) == ["#1,3 [partial-sum] w2 is split on its contracting dimension"]


def test_the_tensors_table_lists_inputs_and_outputs_with_their_blocks():
    rows = [r.split() for r in tensors_table(report())]
    # w1's block: 1024·1024·4 bytes = 4 MiB on each of 2 replicas; x's 128·1024·4 = 512 KiB.
    assert rows == [
        ["tensor", "kind", "shape", "spec", "shard", "replicas", "bytes/device"],
        ["x", "input", "float32[256,1024]", "data,None", "[128,1024]", "4", "512.0", "KiB"],
        ["w1", "input", "float32[1024,4096]", "None,model", "[1024,1024]", "2", "4.0", "MiB"],
        ["out", "output", "float32[256,1024]", "data,None", "[128,1024]", "4", "512.0", "KiB"],
    ]


def test_memory_lines_give_xlas_totals_then_the_largest_buffers():
    # Total: arguments + outputs - aliased + temporaries = 4.5 + 0.5 - 0 + 1 = 6 MiB.
    memory = Memory(arguments=4 * MiB + MiB // 2, outputs=MiB // 2, aliased=0,
                    temporaries=MiB, generated_code=0)
    top = (Buffer("dot.1", 512 * 1024, (128, 1024), "float32", "jit(f)/dot_general"),)
    lines = memory_lines(report(memory=memory, top_buffers=top))
    assert lines[0] == ("memory per device: arguments 4.5 MiB, outputs 512.0 KiB, temporaries "
                        "1.0 MiB, total 6.0 MiB")
    # A user function: all of it other.
    assert lines[1] == ("memory by kind per device: params 0 B, grads 0 B, optimizer 0 B, "
                        "activations 0 B, other 6.0 MiB")
    assert lines[2] == "largest buffers live at the memory peak, per device:"
    assert lines[4].split() == ["512.0", "KiB", "dot.1", "float32[128,1024]",
                                "jit(f)/dot_general", "-", "-"]


def test_a_program_that_does_not_fit_says_how_much_it_needed_and_what_the_compiler_said():
    verdict = MemoryVerdict("HBM", 20 * 2**30, 16 * 2**30, "HLO temporaries",
                            "RESOURCE_EXHAUSTED: Ran out of memory\nin memory space hbm")
    assert memory_lines(report(memory_verdict=verdict)) == [
        "memory per device: DOES NOT FIT: 20.0 GiB of HBM needed (HLO temporaries), 16.0 GiB "
        "available",
        "  the compiler: RESOURCE_EXHAUSTED: Ran out of memory\n  in memory space hbm"]
    assert memory_lines(report()) == ["memory per device: not reported by this backend"]


def test_the_summary_puts_the_mesh_tables_bytes_cost_and_times_in_order():
    lines = summary(report((ALL_REDUCE,))).splitlines()
    assert lines[0] == ("mesh data=2,model=4 (8 devices, auto axes), partitioner shardy, "
                        "backend cpu")
    assert "(+ 1 intermediates; --json lists them)" in lines
    # 2 runs of the 512 KiB all-reduce: 1 MiB a step.
    assert ("collective bytes per device per step: 1.0 MiB (1 collective(s) run once per loop "
            "trip, counted each time)") in lines
    assert "cost per device: 2.5e+09 flops, 3.0 MiB accessed" in lines
    assert lines[-1] == "lower 12 ms, compile 346 ms"
    order = [lines.index(h) for h in ("Tensors", "Collectives", "Why each collective exists")]
    assert order == sorted(order)


def test_the_summary_writes_every_time_of_its_compile_line_in_one_style():
    """A 51 s compile read "compile 51313 ms" beside other lines' "51.3 s": every time of the
    line goes through format_seconds (issue 53)."""
    from dataclasses import replace

    r = report((ALL_REDUCE,))
    slow = replace(r, timing=replace(r.timing, lower_s=0.0123, compile_s=51.313))
    assert summary(slow).splitlines()[-1] == "lower 12.3 ms, compile 51.3 s"


def test_the_summary_names_the_jax_and_the_compiler_that_wrote_the_program():
    lines = summary(report(jax_version="0.12.0.1", compiler="libtpu 0.0.50.1")).splitlines()
    assert lines[0] == ("mesh data=2,model=4 (8 devices, auto axes), partitioner shardy, "
                        "backend cpu (jax 0.12.0.1, compiler libtpu 0.0.50.1)")
