"""`sharding-explorer search`: one JSON object with the candidates best first, the Pareto front
and the counts; a table otherwise; a progress bar on stderr; bad input exits 2 with one line."""

import json

import pytest

from explorer.cli import main

ARGS = ["search", "--workload", "mlp_train", "--mesh", "data=2,model=2", "--target", "h100-4",
        "--param", "batch=512", "--names", "batch,mlp"]


@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
def test_json_output(capsys):
    assert main([*ARGS, "--json"]) == 0
    out, err = capsys.readouterr()
    d = json.loads(out)
    assert set(d) >= {"candidates", "pareto", "stats", "comparison"}
    cands = d["candidates"]
    ok = [c for c in cands if c["status"] == "ok"]
    # On a GPU target with the gpu extra, the candidates the GPU compiler confirmed rank first,
    # by its numbers, then the CPU screen's; each group fastest first.
    by = [c["compiled_by"] for c in ok]
    assert by == sorted(by, key=lambda b: b != "XLA's GPU compiler")
    for group in set(by):
        seconds = [c["seconds"] for c in ok if c["compiled_by"] == group]
        assert seconds == sorted(seconds)
    assert cands[0] == ok[0]
    for c in cands:
        # Every input tensor's spec, the predicted time with its bounds, memory, collectives.
        assert set(c["specs"]) == {"x", "w1", "w2"}
        assert {"seconds", "lower_seconds", "upper_seconds", "memory_bytes",
                "collective_bytes"} <= set(c)
        assert c["collective_bytes"] == sum(x["bytes"] * x["runs"] for x in c["collectives"])
    stats = d["stats"]
    assert stats["compiled"] + stats["pruned_bound"] + stats["pruned_memory"] \
        + stats["not_evaluated"] == stats["distinct"]
    assert stats["space"] == stats["invalid"] + stats["equivalent"] + stats["distinct"]
    assert stats["seconds"] > 0 and stats["stopped"] == "complete"
    assert d["pareto"][0]["label"] == cands[0]["label"]
    # The progress bar went to stderr, ending at every candidate settled.
    assert f"{stats['distinct']}/{stats['distinct']}" in err


@pytest.mark.slow
def test_text_output(capsys):
    assert main([*ARGS, "--top", "3", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "rank" in out and "Pareto front" in out and "compiled" in out
    assert err == ""


@pytest.mark.parametrize("extra,match", [
    (["--names", "nope"], "'nope'"),
    (["--budget-s", "-3"], "positive number of seconds"),
    (["--target", "cpu"], "no sourced speeds"),
    (["--space", "pipeline"], "pipeline"),
    (["--node-timeout", "30"], "node_timeout=30.0 applies to a search on a Ray cluster"),
    (["--node-timeout", "0", "--ray-address", "127.0.0.1:6379"],
     "node_timeout 0.0 is not a positive"),
])
def test_bad_input_exits_2(extra, match, capsys):
    try:
        code = main([*ARGS, *extra])
    except SystemExit as e:          # argparse's own checks (--budget-s) exit from inside
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert match in err and err.count("error:") == 1
