"""A Report opened in XProf (explorer/_src/report/xprof.py, explorer/_src/report/xplane.py): the
files are
read back with a protobuf reader written here, and a real `xprof` server started on loopback
lists the run, its tools and its module, and serves its memory viewer, graph viewer and trace
viewer for the written files, with no hardware run."""

import gzip
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import explorer
from explorer import InputError, TensorSpec, write_xprof
from explorer._src.report.report import Cost, Report, Timing
from explorer._src.report.trace import StepTrace, TraceEvent, TraceLane
from explorer._src.report.xplane import Event, Line, Plane, xspace
from explorer._src.spec.mesh import parse_mesh

needs_xprof = pytest.mark.skipif(importlib.util.find_spec("xprof") is None,
                                 reason="xprof (the xprof extra) is not installed")


# --- a protobuf reader, independent of the writer ---------------------------------------------

def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) of each field of a message, in order: a varint as an int, a
    length-delimited field as its bytes (a 64-bit one as its 8 bytes)."""
    out, i = [], 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i:i + size], i + size
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        else:
            raise AssertionError(f"wire type {wire} is not written by the XSpace writer")
        out.append((number, value))
    return out


def field(data: bytes, number: int) -> list:
    return [v for n, v in fields(data) if n == number]


def test_an_xspace_is_protobufs_wire_format_byte_for_byte():
    # One plane (id 1, "p") with one line (id 1, "l") of one event "e" at 5 ps lasting 7 ps,
    # with the stat hlo_op="dot"; generated on host "h". By hand, from xplane.proto's numbers:
    stat = bytes([0x08, 0x01, 0x2A, 0x03]) + b"dot"                  # XStat: id 1, str "dot"
    event = bytes([0x08, 0x01, 0x10, 0x05, 0x18, 0x07, 0x22, 0x07]) + stat
    line = (bytes([0x08, 0x01, 0x12, 0x01]) + b"l" + bytes([0x22, len(event)]) + event
            + bytes([0x50, 0x01, 0x5A, 0x01]) + b"l")                 # display_id, display_name
    event_meta = bytes([0x08, 0x01, 0x12, 0x05, 0x08, 0x01, 0x12, 0x01]) + b"e"  # map entry
    stat_meta = bytes([0x08, 0x01, 0x12, 0x0A, 0x08, 0x01, 0x12, 0x06]) + b"hlo_op"
    plane = (bytes([0x08, 0x01, 0x12, 0x01]) + b"p" + bytes([0x1A, len(line)]) + line
             + bytes([0x22, len(event_meta)]) + event_meta
             + bytes([0x2A, len(stat_meta)]) + stat_meta)
    expected = bytes([0x0A, len(plane)]) + plane + bytes([0x22, 0x01]) + b"h"
    got = xspace([Plane(1, "p", [Line(1, "l", [Event("e", 5, 7, {"hlo_op": "dot"})])])], ["h"])
    assert got == expected


def test_negative_and_large_numbers_are_written_as_protobuf_varints():
    # 300 ps is 0xAC 0x02; an int64 -1 is ten bytes, 0xFF x 9 then 0x01.
    data = xspace([Plane(1, "p", [Line(1, "l", [Event("e", 300, 0, {"n": -1})])])])
    event = field(field(field(data, 1)[0], 3)[0], 4)[0]
    assert event[2:5] == bytes([0x10, 0xAC, 0x02])
    assert field(field(event, 4)[0], 4) == [2**64 - 1]
    assert fields(bytes([0x08]) + bytes([0xFF] * 9 + [0x01])) == [(1, 2**64 - 1)]


# --- the run folder -----------------------------------------------------------------------------

MODULE_TEXT = "HloModule jit_step, is_scheduled=true\n\nENTRY %main () -> f32[] {\n}\n"


def _report(**changes) -> Report:
    trace = StepTrace("h100-8", events=(
        TraceEvent("dot_general", TraceLane.COMPUTE, 0.0, 2e-6, "fusion.1", "step.py:3"),
        TraceEvent("all-reduce", TraceLane.COMMUNICATION, 1e-6, 3e-6, "all-reduce.2",
                   args={"bytes": 4096})), seconds=4e-6)
    fields_ = dict(mesh=parse_mesh("data=2"), partitioner="shardy", backend="cpu",
                   collectives=(), tensors=(), memory=None, cost=Cost(None, None, None, 0),
                   timing=Timing(0.0, 0.0), trace=trace, optimized_hlo=MODULE_TEXT,
                   hlo_proto=b"an HloProto")
    return Report(**{**fields_, **changes})


def _planes(path: Path) -> dict[str, bytes]:
    return {field(p, 2)[0].decode(): p for p in field(path.read_bytes(), 1)}


def _names(plane: bytes, number: int) -> dict[int, bytes]:
    """An XPlane's event (4) or stat (5) metadata map: id -> the metadata message."""
    return {field(entry, 1)[0]: field(entry, 2)[0] for entry in field(plane, number)}


def test_a_run_is_laid_out_where_xprof_looks_for_runs_and_modules(tmp_path):
    run = write_xprof(_report(), tmp_path / "logs", run="baseline")
    folder = tmp_path / "logs" / "plugins" / "profile" / "baseline"
    assert (run.run, run.folder, run.module) == ("baseline", str(folder), "jit_step")
    assert sorted(os.listdir(folder)) == ["explorer.xplane.pb", "jit_step.hlo_proto.pb"]
    assert (folder / "jit_step.hlo_proto.pb").read_bytes() == b"an HloProto"
    assert run.command == f"xprof --logdir {tmp_path / 'logs'}" and run.notes == ()
    assert field((folder / "explorer.xplane.pb").read_bytes(), 4) == [b"explorer"]


def test_the_module_is_in_the_metadata_plane_as_the_profiler_stores_it(tmp_path):
    run = write_xprof(_report(), tmp_path)
    meta = _planes(Path(run.folder) / "explorer.xplane.pb")["/host:metadata"]
    stats = {field(m, 1)[0]: field(m, 2)[0].decode() for m in _names(meta, 5).values()}
    (event_metadata,) = _names(meta, 4).values()
    assert field(event_metadata, 2) == [b"jit_step"]
    attached = {stats[field(s, 1)[0]]: s for s in field(event_metadata, 5)}
    assert field(attached["Hlo Proto"], 6) == [b"an HloProto"]
    assert field(attached["program_id"], 4) == [1]


def test_the_predicted_step_is_a_device_plane_with_one_line_per_row(tmp_path):
    run = write_xprof(_report(), tmp_path)
    plane = _planes(Path(run.folder) / "explorer.xplane.pb")[
        "/device:CUSTOM:predicted step on h100-8"]
    events = {i: field(m, 2)[0].decode() for i, m in _names(plane, 4).items()}
    stats = {i: field(m, 2)[0].decode() for i, m in _names(plane, 5).items()}
    lines = field(plane, 3)
    assert [field(line, 2)[0] for line in lines] == [b"compute", b"communication"]

    def read(event):
        named = {stats[field(s, 1)[0]]: (field(s, 5) or field(s, 4))[0] for s in field(event, 4)}
        return events[field(event, 1)[0]], field(event, 2)[0], field(event, 3)[0], named

    # 2 µs is 2,000,000 ps; the all-reduce starts at 1 µs and lasts 3 µs.
    assert [read(e) for e in field(lines[0], 4)] == [
        ("dot_general", 0, 2_000_000, {"hlo_op": b"fusion.1", "hlo_module": b"jit_step",
                                       "source": b"step.py:3"})]
    assert [read(e) for e in field(lines[1], 4)] == [
        ("all-reduce", 1_000_000, 3_000_000, {"hlo_op": b"all-reduce.2",
                                              "hlo_module": b"jit_step", "bytes": 4096})]


def test_a_run_of_a_name_already_there_gets_a_suffix_and_the_first_is_kept(tmp_path):
    first = write_xprof(_report(), tmp_path, run="ab")
    second = write_xprof(_report(), tmp_path, run="ab")
    assert (first.run, second.run) == ("ab", "ab_2")
    assert len(os.listdir(first.folder)) == 2


def test_a_report_without_a_module_or_a_trace_writes_what_it_has_and_says_so(tmp_path):
    run = write_xprof(_report(hlo_proto=b"", trace=None), tmp_path)
    assert os.listdir(run.folder) == ["explorer.xplane.pb"] and run.module == ""
    assert "no compiled module" in run.notes[0] and "without a target" in run.notes[1]


@pytest.mark.parametrize("name", ["", "../up", "a/b", ".hidden", "x" * 101, "sp ace", 3])
def test_a_bad_run_name_is_one_input_error_naming_it(tmp_path, name):
    with pytest.raises(InputError, match=r"run .* is not a run name: letters, digits"):
        write_xprof(_report(), tmp_path, run=name)
    assert not (tmp_path / "plugins").exists() or not os.listdir(tmp_path / "plugins/profile")


def test_cli_xprof_naming_a_file_exits_2_before_compiling(tmp_path, capsys):
    from explorer._src.cli import main

    (tmp_path / "f").write_text("")
    code = main(["analyze", "--workload", "mlp_train", "--mesh", "data=2",
                 "--xprof", str(tmp_path / "f")])
    err = capsys.readouterr().err
    assert code == 2 and f"--xprof '{tmp_path / 'f'}' is a file" in err


@pytest.mark.slow
def test_cli_xprof_writes_a_run_of_the_log_folder(tmp_path, capsys):
    from explorer._src.cli import main

    code = main(["analyze", "--workload", "mlp_train", "--mesh", "data=2",
                 "--xprof", str(tmp_path / "new" / "logs")])
    err = capsys.readouterr().err
    (run,) = os.listdir(tmp_path / "new/logs/plugins/profile")
    assert code == 0 and f"open it with xprof --logdir {tmp_path / 'new' / 'logs'}" in err
    assert "no predicted trace" in err           # no --target
    assert sorted(os.listdir(tmp_path / "new/logs/plugins/profile" / run)) == [
        "explorer.xplane.pb", "jit_mlp_train.hlo_proto.pb"]


# --- a real xprof server on loopback --------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# xprof's command serves on every interface; for the test it listens on loopback only.
_LAUNCH = ("import sys, xprof.server as s; s._get_wildcard_address = lambda port: '127.0.0.1'; "
           "sys.exit(s.main(sys.argv[1:]))")


@contextmanager
def xprof_server(logdir: Path):
    """`xprof --logdir logdir` on a free loopback port; yields a GET of its profile routes."""
    port, grpc = _free_port(), _free_port()
    log = open(logdir / "xprof.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-c", _LAUNCH, "--logdir", str(logdir), "--port", str(port),
         "--grpc_port", str(grpc), "--worker_service_address", f"127.0.0.1:{grpc}"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def get(route: str, **query) -> bytes:
        url = (f"http://127.0.0.1:{port}/data/plugin/profile/{route}?"
               + urllib.parse.urlencode(query))
        with urllib.request.urlopen(url, timeout=120) as response:
            body = response.read()
            return (gzip.decompress(body) if response.headers.get("Content-Encoding") == "gzip"
                    else body)

    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                get("runs")
                break
            except (urllib.error.URLError, ConnectionError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("xprof did not start: "
                                         + (logdir / "xprof.log").read_text()[-2000:]) from None
                time.sleep(0.5)
        yield get
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def train_step(w1, w2, x, y):
    def loss(w1, w2):
        h = jnp.tanh(x @ w1)
        return jnp.mean((h @ w2 - y) ** 2)

    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
    return w1 - 0.1 * g1, w2 - 0.1 * g2


@needs_xprof
@pytest.mark.slow
def test_xprof_lists_the_run_and_opens_its_memory_graph_and_trace_viewers(tmp_path):
    report = explorer.analyze(
        train_step, TensorSpec("w1", (256, 512), "float32", (None, "model")),
        TensorSpec("w2", (512, 256), "float32", ("model", None)),
        TensorSpec("x", (64, 256), "float32", ("data", None)),
        TensorSpec("y", (64, 256), "float32", ("data", None)),
        mesh="data=2,model=4", target="h100-8", compile_for="cpu")
    run = write_xprof(report, tmp_path)
    assert run.module == "jit_train_step"
    with xprof_server(tmp_path) as get:
        assert json.loads(get("runs")) == [run.run]
        tools = json.loads(get("run_tools", run=run.run))
        assert {"memory_viewer", "graph_viewer", "trace_viewer@"} <= set(tools)
        assert get("module_list", run=run.run).decode() == "jit_train_step"
        assert json.loads(get("hosts", run=run.run, tag="memory_viewer")) == [
            {"hostname": "explorer"}]

        memory = json.loads(get("data", run=run.run, tag="memory_viewer", host="explorer",
                                module_name="jit_train_step"))
        mib = 2**20
        assert memory["moduleName"] == "jit_train_step"
        # XProf reads the inputs' and outputs' bytes as XLA's memory analysis counts them, and
        # finds the peak from the heap simulator's trace in the module, where the timeline read
        # the live ranges: the same bytes by another road, less the tables of pointers of the
        # tuples live there (the combined all-reduce's, 16 bytes), which the buffer assignment
        # allocates and the heap trace leaves out.
        t = report.memory_timeline
        assert round(memory["entryComputationParametersMib"] * mib) == report.memory.arguments
        assert round(memory["maybeLiveOutMib"] * mib) == report.memory.outputs
        tables = [b.bytes for b in t.peak_buffers
                  if b.kind == explorer.BufferKind.TEMPORARY and b.dtype == "tuple"]
        assert tables == [16]
        assert round(memory["peakHeapMib"] * mib) == t.peak.bytes - 16
        assert t.peak.bytes == report.memory.total

        peak_op = report.memory_timeline.peak.instruction
        graph = get("data", run=run.run, tag="graph_viewer", host="explorer",
                    module_name="jit_train_step", node_name=peak_op, type="graph",
                    format="dot").decode()
        assert graph.startswith("digraph") and f"around {peak_op}" in graph

        trace = json.loads(get("data", run=run.run, tag="trace_viewer", host="explorer"))
        threads = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
                   if e.get("name") == "thread_name"}
        shown = [(threads[e["tid"]], e["name"], round(e["ts"] * 1e6), round(e["dur"] * 1e6),
                  e["args"]["hlo_op"]) for e in trace["traceEvents"] if e.get("ph") == "X"]
        # Each predicted event, in picoseconds (XProf shows microseconds to 6 places).
        expected = [(e.row, e.name, round(e.start * 1e12), round(e.duration * 1e12), e.hlo)
                    for e in report.trace.events]
        assert sorted(shown) == sorted(expected) and len(expected) > 10
