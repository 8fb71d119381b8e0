"""The command line: summaries, JSON, workload listing, and bad input (exit 2, no traceback)."""

import json
import subprocess
import sys

import pytest


def run(*args):
    return subprocess.run([sys.executable, "-m", "explorer._cli", *args], capture_output=True,
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
