"""The command line: summaries, JSON, workload listing, and bad input (exit 2, no traceback)."""

import json
import os
import re
import socket
import subprocess
import sys
import threading

import pytest


def run(*args):
    return subprocess.run([sys.executable, "-m", "explorer._src.cli", *args], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_json_has_the_documented_keys_and_values():
    p = run("analyze", "--workload", "mlp", "--mesh", "data=2,model=4", "--spec", "x=data,None",
            "--spec", "w1=None,model", "--spec", "w2=P('model', None)", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert {"mesh", "tensors", "collectives", "memory", "cost", "timing"} <= set(d)
    assert d["mesh"]["axes"] == {"data": 2, "model": 4}
    [c] = d["collectives"]
    assert (c["kind"], c["axes"], c["bytes"]) == ("all-reduce", ["model"], 128 * 1024 * 4)
    names = {t["name"] for t in d["tensors"] if t["kind"] == "input"}
    assert names == {"x", "w1", "w2"}


def _table(lines, header):
    """The rows of the text table under `header`, split on the runs of spaces between columns."""
    start = lines.index(header) + 1
    rows = []
    for line in lines[start + 1:]:
        if not line.strip() or line.startswith("("):
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return re.split(r"\s{2,}", lines[start].strip()), rows


@pytest.mark.slow
def test_summary_is_readable():
    p = run("analyze", "--workload", "matmul", "--mesh", "model=4", "--spec", "x=None,model",
            "--spec", "w=model,None")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    # x [256, 1024] split on k over model=4: each device holds x[:, 256 k] and w[256 k, :], so
    # its product is a partial sum of the whole y [256, 4096]: one all-reduce over model of
    # 256·4096·4 bytes = 4 MiB, a group of 4.
    header, rows = _table(lines, "Collectives")
    assert header == ["#", "kind", "axes", "group", "shape", "bytes/device", "runs", "why",
                      "source", "code"]
    assert [r[:8] for r in rows] == [["1", "all-reduce", "model", "4", "float32[256,4096]",
                                      "4.0 MiB", "1", "partial-sum"]]
    # The source is the matmul of the built-in workload, shown with its code.
    assert rows[0][8].startswith("explorer/_src/workloads/mlp.py:") and rows[0][9] == "return x @ w"
    assert 256 * 4096 * 4 == 4 * 2 ** 20
    header, rows = _table(lines, "Tensors")
    assert {r[0]: r[3:] for r in rows} == {
        "x": ["None,model", "[256,256]", "1", "256.0 KiB"],       # 256·256·4 = 262144 B
        "w": ["model,None", "[256,4096]", "1", "4.0 MiB"],        # 256·4096·4 = 4 MiB
        "out": ["replicated", "[256,4096]", "4", "4.0 MiB"]}
    assert "collective bytes per device per step: 4.0 MiB" in lines
    # Arguments: 262144 + 4194304 = 4456448 B = 4.25 MiB, printed to one decimal (4.2); the
    # output y is 4 MiB. Temporaries are XLA's business.
    [memory] = [line for line in lines if line.startswith("memory per device:")]
    assert memory.startswith("memory per device: arguments 4.2 MiB, outputs 4.0 MiB, ")


def test_workloads_lists_tensors_params_and_their_bounds():
    p = run("workloads")
    assert p.returncode == 0
    assert "mlp_train:" in p.stdout and "w1[1024,4096]" in p.stdout
    lines = p.stdout.splitlines()
    train = lines[lines.index(next(x for x in lines if x.startswith("transformer_train:"))) + 1]
    assert train.startswith("  params: batch=8 [1, 2**24], seq=32 [1, 2**20], ")
    assert "layers=2 [1, 256]" in train and "lr=0.001 (0, 1000]" in train
    assert "schedule=gpipe (gpipe|1f1b)" in p.stdout
    assert "at most 2**48 elements" in lines[0]


@pytest.mark.parametrize("args, fragment", [
    (["--mesh", "data=2,model=4", "--spec", "w1=None,modle"], "'modle'"),
    (["--mesh", "data=2,model=4", "--spec", "w1=model,model"], "'model' is used for dimensions"),
    (["--mesh", "data=2,model=4", "--spec", "w1=model,None,None"], "has rank 2"),
    (["--mesh", "data=2,model=3", "--spec", "w1=None,model"], "not divisible by model=3"),
    (["--mesh", "data=0"], "size 0"),
    (["--mesh", "data=two"], "'two'"),
    (["--mesh", "a=64,b=64"], "limit of 2048"),
    (["--mesh", "data=2", "--param", "batch=-4"], "batch='-4' of workload 'mlp' must be >= 1"),
    (["--mesh", "data=2", "--param", "batch=lots"], "batch='lots'"),
    (["--mesh", "data=2", "--param", "dtype=float128"], "'float128'"),
    (["--mesh", "data=2", "--param", "depth=3"], "no param 'depth'"),
    (["--mesh", "data=2", "--spec", "w3=data,None"], "no tensor 'w3'"),
    (["--mesh", "data=2", "--spec", "w1"], "NAME=VALUE"),
])
@pytest.mark.slow
def test_bad_input_exits_2_with_one_message(args, fragment):
    p = run("analyze", "--workload", "mlp", *args)
    assert p.returncode == 2
    assert fragment in p.stderr
    assert "Traceback" not in p.stderr
    assert p.stdout == ""


def test_unknown_workload_lists_choices():
    p = run("analyze", "--workload", "resnet", "--mesh", "data=2")
    assert p.returncode == 2 and "'resnet'" in p.stderr and "'mlp_train'" in p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.slow
def test_targets_lists_one_per_line_name_first():
    p = run("targets")
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    names = [line.split(":", 1)[0] for line in lines]
    assert {"h100-8", "tpu-v5e-16x16", "tpu-v5e-4x8", "tpu-v4-16x16x16", "bow-2000",
            "cpu"} <= set(names)
    # Slice shapes are accepted in either order: a 32-chip mesh maps onto "tpu-v5e-8x4".
    from explorer import get_target

    assert get_target("tpu-v5e-8x4").chips == 32


@pytest.mark.slow
def test_target_prediction_in_summary_and_json():
    args = ["analyze", "--workload", "mlp", "--mesh", "data=2,model=4", "--spec",
            "x=data,None", "--spec", "w1=None,model", "--spec", "w2=model,None",
            "--target", "h100-8"]
    p = run(*args)
    assert p.returncode == 0, p.stderr
    assert "Predicted (analytical model, not a measurement)" in p.stdout
    d = json.loads(run(*args, "--json").stdout)
    assert d["collectives"][0]["est_seconds"] > 0
    assert d["cost"]["estimate"]["target"] == "h100-8"


@pytest.mark.parametrize("args, fragment", [
    (["--target", "h1000-8"], "'h1000-8'"),
    (["--target", "h100-8", "--mapping", "data=node"], "mapped to 'node', which h100-8 lacks"),
    (["--mesh", "data=16", "--target", "h100-8"], "targets with 16 devices"),
])
@pytest.mark.slow
def test_bad_target_or_mapping_exits_2(args, fragment):
    mesh = [] if "--mesh" in args else ["--mesh", "data=2,model=4"]
    p = run("analyze", "--workload", "mlp", *mesh, *args)
    assert p.returncode == 2 and fragment in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
def test_measure_and_tpu_topology_flags():
    p = run("analyze", "--workload", "matmul", "--mesh", "model=4", "--measure")
    assert p.returncode == 0, p.stderr
    assert "measured:" in p.stdout and "4 cpu device(s) of this host" in p.stdout
    p = run("analyze", "--workload", "matmul", "--mesh", "model=4", "--tpu-topology", "v5e:4x4")
    assert p.returncode == 2 and "has 16 chips but mesh 'model=4' has 4" in p.stderr


# --- in-process: main(argv) exits 0 or 2, never with a traceback ---------------------------------

@pytest.mark.parametrize("argv, fragment", [
    (["--timeout", "nan"], "timeout nan is not a positive, finite number"),
    (["--timeout", "inf"], "timeout inf is not"),
    (["--timeout", "-1"], "timeout -1.0 is not"),
    (["--timeout", "1e400"], "timeout inf is not"),
    (["--timeout", "soon"], "'soon' is not a number of seconds"),
    (["--param", "lr=nan"], "param lr='nan' of workload 'mlp_train' is not a finite number"),
    (["--param", "lr=inf"], "lr='inf'"),
    (["--param", "lr=-inf"], "lr='-inf'"),
    (["--param", "batch=1e3"], "batch='1e3'"),
    (["--param", "batch=" + "9" * 5000], "is not a whole number"),
    (["--param", "batch=" + "9" * 30], "must be >= 1 and <= 16777216"),
    (["--mesh", "data=" + "9" * 5000], "the limit is 2**20"),
    (["--target", "h100-2", "--mapping", "data=gpu:" + "9" * 5000], "not a whole number from 1"),
    (["--tpu-topology", "v5e:" + "9" * 5000], "is not a topology name"),
])
def test_bad_numbers_exit_2_with_one_message(argv, fragment, cli):
    base = ["analyze", "--workload", "mlp_train", "--mesh", "data=2"]
    code, out, err = cli(base + argv)
    assert code == 2 and out == ""
    assert fragment in err and "Traceback" not in err


@pytest.mark.parametrize("value", ["inf", "nan", "0", "5000"])
def test_moe_capacity_factor_out_of_bounds(value, cli):
    code, out, err = cli(["analyze", "--workload", "moe", "--mesh", "data=2", "--param",
                          f"capacity_factor={value}"])
    assert code == 2 and f"param capacity_factor='{value}' of workload 'moe'" in err
    assert "> 0 and <= 4096" in err


@pytest.mark.parametrize("port", ["-5", "0", "65536", "http", "1e3"])
def test_app_port_out_of_range(port, cli):
    code, out, err = cli(["app", "--port", port])
    assert code == 2
    assert f"port {port!r} is not a whole number from 1 to 65535" in err


def test_strict_json_writes_non_finite_numbers_as_null():
    from explorer._src.cli import _strict_json

    text = _strict_json({"a": float("nan"), "b": [float("inf"), 1.5, (float("-inf"),)],
                         "c": {"d": 2}})
    assert json.loads(text) == {"a": None, "b": [None, 1.5, [None]], "c": {"d": 2}}


def _reject_constant(name):
    raise ValueError(f"{name} is not JSON")


@pytest.mark.slow
def test_json_output_parses_with_a_strict_parser(cli):
    code, out, err = cli(["analyze", "--workload", "mlp_train", "--mesh", "data=2", "--param",
                          "batch=8", "--param", "d_model=16", "--param", "d_ff=32", "--param",
                          "lr=0.5", "--json"])
    assert code == 0, err
    d = json.loads(out, parse_constant=_reject_constant)     # NaN/Infinity would raise here
    assert d["workload"]["params"]["lr"] == 0.5


# --- an --ip Voila cannot listen on, a --trace file that cannot be written -----------------------

@pytest.fixture
def no_voila(monkeypatch):
    """explorer._src.ui.serve with Voila's start replaced by a failure, and each name looked up."""
    serve = pytest.importorskip("explorer._src.ui.serve")

    def start(*args, **kwargs):
        raise AssertionError("Voila was started")

    monkeypatch.setattr(serve.subprocess, "Popen", start)
    return serve


@pytest.mark.parametrize("ip", ["not an ip", "999.1.1.1.", "-host", "host_name", "1.2.3.4:80"])
def test_app_on_an_ip_that_is_no_address_or_host_name_exits_2_with_one_line(ip, no_voila,
                                                                             monkeypatch,
                                                                             cli):
    monkeypatch.setattr(no_voila.socket, "getaddrinfo", _unknown_name)
    code, out, err = cli(["app", f"--ip={ip}"])
    assert code == 2 and out == ""
    assert err.splitlines() == [f"sharding-explorer: error: --ip {ip!r} is not an IP address or "
                                "a host name this machine resolves; e.g. 127.0.0.1, 0.0.0.0 or "
                                "::1"]


def _unknown_name(host, *args, **kwargs):
    raise no_such_host_error()


def no_such_host_error():
    return socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def test_app_on_a_host_name_whose_lookup_hangs_exits_2_without_waiting_for_it(no_voila,
                                                                             monkeypatch,
                                                                             cli):
    release = threading.Event()

    def hanging_lookup(host, *args, **kwargs):
        release.wait()              # a resolver that never answers, until the test ends
        raise no_such_host_error()

    monkeypatch.setattr(no_voila.socket, "getaddrinfo", hanging_lookup)
    monkeypatch.setattr(no_voila, "RESOLVE_TIMEOUT_S", 0.01)
    try:
        code, out, err = cli(["app", "--ip", "slow.example"])
    finally:
        release.set()
    assert code == 2
    assert err.splitlines() == ["sharding-explorer: error: --ip 'slow.example' is not an IP "
                                "address or a host name this machine resolves; e.g. 127.0.0.1, "
                                "0.0.0.0 or ::1"]


@pytest.mark.parametrize("ip", ["127.0.0.1", "0.0.0.0", "::1", "::", "localhost"])
def test_addresses_and_localhost_are_accepted_without_a_lookup(ip, no_voila, monkeypatch):
    def lookup(host, *args, **kwargs):
        raise AssertionError(f"{host} was looked up")

    monkeypatch.setattr(no_voila.socket, "getaddrinfo", lookup)
    assert no_voila.check_listen_address(ip) == ip


def test_a_host_name_that_resolves_is_accepted(no_voila, monkeypatch):
    looked_up = []

    def lookup(host, *args, **kwargs):
        looked_up.append(host)
        return [(2, 1, 6, "", ("10.0.0.7", 0))]

    monkeypatch.setattr(no_voila.socket, "getaddrinfo", lookup)
    assert no_voila.check_listen_address("box-7.lan") == "box-7.lan"
    assert looked_up == ["box-7.lan"]


@pytest.fixture
def no_compile(monkeypatch):
    """analyze_workload replaced by a failure: a --trace check must come before any compile."""
    import explorer._src.api.workload

    def compile_(*args, **kwargs):
        raise AssertionError("the workload was compiled")

    monkeypatch.setattr(explorer._src.api.workload, "analyze_workload", compile_)


TRACE_ARGS = ["analyze", "--workload", "mlp", "--mesh", "data=2,model=4", "--target", "h100-2"]


def test_a_trace_in_a_missing_folder_exits_2_before_the_compile(no_compile, cli):
    code, out, err = cli([*TRACE_ARGS, "--trace", "/nonexistent/dir/x.json"])
    assert code == 2 and out == ""
    assert err.splitlines() == ["sharding-explorer: error: --trace '/nonexistent/dir/x.json': "
                                "the folder '/nonexistent/dir' does not exist"]


def test_a_trace_that_names_a_folder_exits_2_before_the_compile(no_compile, tmp_path, cli):
    code, out, err = cli([*TRACE_ARGS, "--trace", str(tmp_path)])
    assert code == 2
    assert err.splitlines() == [f"sharding-explorer: error: --trace {str(tmp_path)!r} is a "
                                f"folder; give a file name in it, e.g. {tmp_path}/trace.json"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root may write into any folder")
def test_a_trace_in_a_read_only_folder_exits_2_before_the_compile(no_compile, tmp_path,
                                                                  cli):
    tmp_path.chmod(0o500)
    try:
        code, out, err = cli([*TRACE_ARGS, "--trace", str(tmp_path / "x.json")])
    finally:
        tmp_path.chmod(0o700)
    assert code == 2
    assert err.splitlines() == [f"sharding-explorer: error: --trace {str(tmp_path / 'x.json')!r}"
                                " is not writable by this user"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_trace_write_that_fails_is_one_input_error_naming_the_file():
    from explorer._src.cli import _write_output
    from explorer._src.errors import InputError

    # /dev/full takes the open and refuses the write, as a full disk does.
    with pytest.raises(InputError) as caught:
        _write_output("--trace", "/dev/full", '{"traceEvents": [{"name": "step", "ph": "X"}]}',
                      "trace")
    assert str(caught.value) == "--trace '/dev/full' could not be written: No space left on device"


@pytest.mark.parametrize("command", [["targets"], ["workloads"]])
def test_a_reader_that_stops_reading_gets_no_traceback(command):
    """`sharding-explorer targets | head -1`: the pipe's reader closes it before the command
    writes (here at once, before the child has even imported the package), so every write
    meets a closed pipe. It ended with a BrokenPipeError traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "explorer._src.cli", *command],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 1
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


@pytest.mark.slow
def test_extrapolate_layers_is_saved_with_the_request_and_run_again_from_the_file(cli, tmp_path):
    # The option is a Request field: --save writes it with the request, and --from runs
    # the file's request extrapolated, as the run that saved it was.
    path = tmp_path / "train.json"
    code, out, err = cli(["analyze", "--workload", "transformer_train", "--mesh", "data=2",
                          "--param", "layers=6", "--extrapolate-layers", "2,5",
                          "--save", str(path)])
    assert code == 0, err
    saved = json.loads(path.read_text())
    assert saved["compile"] == {"extrapolate": "2,5"}
    code, again, err = cli(["analyze", "--from", str(path)])
    assert code == 0, err
    # From layers 2 and 5 to 6, as asked: the first line says so in both runs.
    first = "EXTRAPOLATED: layers=6 carried on linearly from compiles at layers=2 and 5"
    assert out.startswith(first) and again.startswith(first)
