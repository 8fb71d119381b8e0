"""The command line: summaries, JSON, workload listing, and bad input (exit 2, no traceback)."""

import json
import subprocess
import sys

import pytest


def run(*args):
    return subprocess.run([sys.executable, "-m", "explorer.cli", *args], capture_output=True,
                          text=True, timeout=300)


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


def test_summary_is_readable():
    p = run("analyze", "--workload", "matmul", "--mesh", "model=4", "--spec", "x=None,model",
            "--spec", "w=model,None")
    assert p.returncode == 0, p.stderr
    assert "all-reduce" in p.stdout and "model" in p.stdout
    assert "Collectives" in p.stdout and "memory per device" in p.stdout


def test_workloads_lists_tensors_and_params():
    p = run("workloads")
    assert p.returncode == 0
    assert "mlp_train:" in p.stdout and "w1[1024,4096]" in p.stdout and "lr=0.1" in p.stdout


@pytest.mark.parametrize("args, fragment", [
    (["--mesh", "data=2,model=4", "--spec", "w1=None,modle"], "'modle'"),
    (["--mesh", "data=2,model=4", "--spec", "w1=model,model"], "'model' is used for dimensions"),
    (["--mesh", "data=2,model=4", "--spec", "w1=model"], "has rank 2"),
    (["--mesh", "data=2,model=3", "--spec", "w1=None,model"], "not divisible by model=3"),
    (["--mesh", "data=0"], "size 0"),
    (["--mesh", "data=two"], "'two'"),
    (["--mesh", "a=64,b=64"], "limit of 2048"),
    (["--mesh", "data=2", "--param", "batch=-4"], "batch='-4' of workload 'mlp' must be > 0"),
    (["--mesh", "data=2", "--param", "batch=lots"], "batch='lots'"),
    (["--mesh", "data=2", "--param", "dtype=float128"], "'float128'"),
    (["--mesh", "data=2", "--param", "depth=3"], "no param 'depth'"),
    (["--mesh", "data=2", "--spec", "w3=data,None"], "no tensor 'w3'"),
    (["--mesh", "data=2", "--spec", "w1"], "NAME=VALUE"),
])
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
def test_bad_target_or_mapping_exits_2(args, fragment):
    mesh = [] if "--mesh" in args else ["--mesh", "data=2,model=4"]
    p = run("analyze", "--workload", "mlp", *mesh, *args)
    assert p.returncode == 2 and fragment in p.stderr and "Traceback" not in p.stderr


def test_app_command_serves_voila_and_prints_its_url():
    import socket
    import time
    import urllib.error
    import urllib.request

    pytest.importorskip("voila")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "explorer.cli", "app", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline().strip() == \
            f"sharding-explorer app: http://127.0.0.1:{port}/"
        deadline = time.time() + 240
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/voila/static/", timeout=2)
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, "Voila did not start"
                time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_measure_and_tpu_topology_flags():
    p = run("analyze", "--workload", "matmul", "--mesh", "model=4", "--measure")
    assert p.returncode == 0, p.stderr
    assert "measured:" in p.stdout and "4 cpu device(s) of this host" in p.stdout
    p = run("analyze", "--workload", "matmul", "--mesh", "model=4", "--tpu-topology", "v5e:4x4")
    assert p.returncode == 2 and "has 16 chips but mesh 'model=4' has 4" in p.stderr
