"""The jax side of a compile (explorer._src.compile.backend): shardings, the Report built from its
result, and what XLA prints while compiling."""

import inspect
import os
import re
from dataclasses import replace

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec

from explorer import TensorSpec, analyze
from explorer._src.compile.backend import (
    FIRST_PROMOTION,
    _hlo_sharding_text,
    compile_request,
    compiler_messages,
    dump_options,
)
from explorer._src.compile.lowering import lower_program
from explorer._src.report.build import build_report
from explorer._src.spec.mesh import parse_mesh


class _NoHloForm:
    """A sharding type jax cannot express as an XLA HloSharding."""

    def _to_xla_hlo_sharding(self, ndim):
        raise NotImplementedError("no HLO form")


def test_sharding_text_is_xla_s_or_none_never_a_guess():
    mesh = jax.make_mesh((2, 4), ("a", "b"))
    # Dim 0 split 2 ways over `a`, dim 1 whole; each tile replicated over the 4 devices of `b`.
    assert (_hlo_sharding_text(NamedSharding(mesh, PartitionSpec("a", None)), 2, [])
            == "{devices=[2,1,4]<=[8] last_tile_dim_replicate}")
    notes = []
    assert _hlo_sharding_text(_NoHloForm(), 2, notes) is None
    # ... and the Report says why, naming the sharding's type and jax's words.
    assert notes == ["a _NoHloForm has no HloSharding text that jax would give "
                     "(NotImplementedError: no HLO form); its placement is left unknown"]


def test_an_unreadable_input_sharding_becomes_a_note_not_a_replicated_tensor():
    mesh = parse_mesh("d=8")
    x = TensorSpec("x", (16, 4), "float32", "d,None")
    program = lower_program(lambda x: jnp.sin(x), (x,), mesh, "cpu", "shardy")
    result = compile_request(program, (x,), mesh, "shardy")
    assert result.inputs[0].sharding == "{devices=[8,1]<=[8]}"
    unread = replace(result, inputs=(result.inputs[0]._replace(sharding=None),))
    report = build_report(unread, mesh, "shardy")
    assert "x" not in {t.name for t in report.tensors}
    assert any("'x'" in n and "placement is not shown" in n for n in report.notes)


# What jax 0.10.2's XLA printed to stderr for the program of jax issue #21562 under gspmd
# (captured from a worker's log), with a libtpu start-up line and an info line around it.
STDERR = """\
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1700000000.000001    1681 cpu_client.cc:470] TfrtCpuClient created.
W1201 09:02:24.744171    1681 sharding_propagation.cc:3132] GSPMD sharding propagation is going to be deprecated and not supported in the future.
W1201 09:02:24.749320    1681 spmd_partitioner.cc:656] [SPMD] Involuntary full rematerialization. The compiler cannot go from sharding {devices=[4,1,2]<=[2,4]T(1,0)} to {devices=[1,8,1]<=[8]} efficiently.
E0000 00:00:1796115794.534367    2721 common_lib.cc:554] INVALID_ARGUMENT: Error: unexpected worker hostname 'WARNING: could not determine TPU worker hostnames or IP addresses' from env var TPU_WORKER_HOSTNAMES.
=== Source Location Trace: ===
learning/45eac/tfrc/runtime/libtpu_init_utils.cc:327
E1201 09:02:25.000000    1681 hlo_verifier.cc:10] Bad thing happened:
  details on a second line
loc("x.py":3:1): warning: a diagnostic without absl's prefix
"""  # noqa: E501


def test_compiler_messages_keeps_warnings_and_errors_one_entry_each():
    assert compiler_messages(STDERR) == [
        "[SPMD] Involuntary full rematerialization. The compiler cannot go from sharding "
        "{devices=[4,1,2]<=[2,4]T(1,0)} to {devices=[1,8,1]<=[8]} efficiently.",
        "error: Bad thing happened:\n  details on a second line",
        'loc("x.py":3:1): warning: a diagnostic without absl\'s prefix',
    ]


def _reshard(a):
    # jax issue #21562: from P('y', None, 'x') to P(None, ('x', 'y'), None) on x=2,y=4.
    return jax.lax.with_sharding_constraint(a * 2, PartitionSpec(None, ("x", "y"), None))


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_involuntary_rematerialization_reaches_report_warnings(partitioner):
    # What jax 0.10.2 really prints under both partitioners: the SPMD partitioner (which runs
    # after Shardy's propagation too) gives up and replicates the tensor.
    a = TensorSpec("a", (16, 16, 16), "float32", "y,None,x")
    r = analyze(_reshard, a, mesh="x=2,y=4", partitioner=partitioner, use_cache=False)
    [warning] = r.warnings
    assert warning.text.startswith(
        "[SPMD] Involuntary full rematerialization. The compiler cannot go from sharding "
        "{devices=[4,1,2]<=[2,4]T(1,0)} to {devices=[1,8,1]<=[8]} efficiently for HLO "
        "operation %param")
    # Linked to the code: the parameter it names is `a`, and the line that needed it
    # resharded is the one in _reshard above.
    lines, start = inspect.getsourcelines(_reshard)
    line = start + next(i for i, text in enumerate(lines) if "with_sharding_constraint" in text)
    assert warning.instruction.startswith("a.")
    assert warning.source == f"{os.path.relpath(__file__)}:{line}"
    assert warning.source_text == lines[line - start].strip()
    assert r.to_dict()["warnings"][0]["text"] == warning.text
    from explorer._src.report.summary import summary

    assert f"warning: {warning.text} (at {warning.source})" in summary(r).splitlines()


def test_a_clean_reshard_prints_nothing():
    a = TensorSpec("a", (16, 16, 16), "float32", "y,None,x")
    r = analyze(lambda a: a * 2, a, mesh="x=2,y=4", use_cache=False)
    assert r.warnings == ()


def _passes_run(folder) -> set[str]:
    """The names of the passes a CPU compile of a sharded matmul runs, from a dump of the
    module between every two of them (a pass regex of "." dumps all; ".*" only the changes)."""
    mesh = jax.make_mesh((2, 4), ("a", "b"), axis_types=(AxisType.Auto,) * 2)
    x = jax.ShapeDtypeStruct((16, 32), jnp.bfloat16, sharding=NamedSharding(
        mesh, PartitionSpec("a", "b")))
    with jax.set_mesh(mesh):
        jax.jit(lambda x: x @ x.T).lower(x).compile(compiler_options={
            "xla_dump_to": str(folder), "xla_dump_hlo_pass_re": ".", "xla_dump_hlo_as_text": True})
    return {name for f in os.listdir(folder)
            if (m := re.search(r"\.after_(.*)\.before_(.*)\.txt$", f)) for name in m.groups()}


def test_the_dump_regex_matches_the_passes_read_and_no_other(tmp_path):
    # backend.py's pass regex is two short words (XLA builds an RE2 of it at every pass): among
    # all the passes of this jax's CPU pipeline they must name the two whose input is read.
    names = _passes_run(tmp_path)
    cpu = dump_options("unused", origins=False)["xla_dump_hlo_pass_re"]
    assert {n for n in names if re.search(cpu, n)} == {"spmd-partitioning", FIRST_PROMOTION}
    # Ahead of time (GPU, TPU), no promotion is read, and none is dumped.
    ahead = dump_options("unused", origins=False, unpromoted=False)["xla_dump_hlo_pass_re"]
    assert {n for n in names if re.search(ahead, n)} == {"spmd-partitioning"}
    assert re.search(ahead, "tpu-spmd-partitioning")
