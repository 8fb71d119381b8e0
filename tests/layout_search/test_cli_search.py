"""`sharding-explorer search`: one JSON object with the candidates best first, the Pareto front
and the counts; a table otherwise; a progress bar on stderr; bad input exits 2 with one line."""

import json

import pytest

from explorer._src.cli import main
from explorer._src.layout_search import branch_and_bound

ARGS = ["search", "--workload", "mlp_train", "--mesh", "data=2,model=2", "--target", "h100-4",
        "--param", "batch=512", "--names", "batch,mlp"]


@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
@pytest.mark.parametrize("screen", ["cpu", "estimate"])
def test_json_output(screen, capsys, monkeypatch):
    # A program the estimate can trace is screened by it; the CPU screen (for one it cannot,
    # where the CPU compiles the reference fast enough) is chosen here by switching the
    # estimate off. The JSON must be whole either way.
    if screen == "cpu":
        monkeypatch.setattr(branch_and_bound.BranchAndBound, "estimate_screen",
                            lambda self: (None, " (off for this test)"))
        monkeypatch.setattr(branch_and_bound, "screen_skipped", lambda screened, own: "")
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
    # Every distinct candidate is settled once: compiled, estimated (not compiled), pruned or
    # left unevaluated.
    assert stats["compiled"] + stats["estimated"] + stats["pruned_bound"] \
        + stats["pruned_memory"] + stats["not_evaluated"] == stats["distinct"]
    assert stats["screened_by"] == {"estimate": "not compiled: estimated from the traced program",
                                    "cpu": "cpu devices, priced on the target"}[screen]
    if screen == "estimate":
        assert stats["estimated"] > 0 and stats["confirmed"] >= 1
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


def test_the_progress_bar_counts_estimated_candidates_apart_from_compiled_ones():
    import io

    from explorer._src.cli import _ProgressBar
    from explorer._src.layout_search.result import Progress, SearchPhase

    out = io.StringIO()
    bar = _ProgressBar(out)
    bar(Progress(SearchPhase.ESTIMATE, 900, 5000, 1, 0, 0, 2.5e-5, "batch=data", "mlp=data",
                 20.0, estimated=899))
    bar(Progress(SearchPhase.COMPILE, 10, 10, 4, 6, 0, 2.5e-5, "batch=data", "", 30.0))
    first, second = out.getvalue().splitlines()
    assert "900/5000 compiled 1 estimated 899 pruned 0 failed 0" in first
    assert "10/10 compiled 4 pruned 6 failed 0" in second     # nothing estimated: not named
