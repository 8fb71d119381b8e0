"""`sharding-explorer analyze --what-if N`: after the summary, collective N's confirmed spec
changes as the --spec flags that make them, with its line's bytes before and after; or a line
saying none was confirmed of how many tried; a bad N is one error naming it and the range, exit
status 2. The bytes are worked out from the MLP's shapes (x [256, 1024], w1 [1024, 4096], w2
[4096, 1024], f32) on data=2,model=4: each device holds 128 of x's rows."""

import json

import pytest

MLP = ["analyze", "--workload", "mlp", "--mesh", "data=2,model=4"]
# w2 split by columns, as w1 is: h @ w2 needs h whole, an all-gather over model of h's
# [128, 4096] block (2 MiB); split by rows (Megatron) it is an all-reduce of the [128, 1024]
# result's partial sums (512 KiB).
GATHERED = [*MLP, "--spec", "x=data,None", "--spec", "w1=None,model", "--spec", "w2=None,model"]
GATHER_BYTES, REDUCE_BYTES = 128 * 4096 * 4, 128 * 1024 * 4


def test_the_confirmed_changes_follow_the_summary_as_spec_flags(cli):
    code, out, err = cli([*GATHERED, "--what-if", "1"])
    assert code == 0, err
    lines = out.splitlines()
    head = lines.index("What if: collective #1, all-gather over model, 2.0 MiB per device, at "
                       "explorer/_src/workloads/mlp.py:34: return h @ w2")
    assert lines.index("Collectives") < head                    # after the usual summary
    assert "confirmed, best first:" in lines[head + 1]
    assert GATHER_BYTES == 2 * 2 ** 20 and REDUCE_BYTES == 512 * 2 ** 10
    megatron = lines.index("  --spec w2=model,None: this line 2.0 MiB → 512.0 KiB, all "
                           "collectives 2.0 MiB → 512.0 KiB per device")
    assert lines[megatron + 1] == "    split w2 dimension 0 over model (model,None)"
    # Only w2's spec changes: the reason names it.
    assert all(line.startswith("  --spec w2=") for line in lines[head + 2::2])


def test_with_json_the_changes_are_under_what_if(cli):
    code, out, err = cli([*GATHERED, "--what-if", "1", "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d["what_if"]["collective"] == 0                     # the index into "collectives"
    megatron = next(x for x in d["what_if"]["confirmed"] if x["specs"] == {"w2": "model,None"})
    assert (megatron["line_bytes_before"], megatron["line_bytes_after"]) == (GATHER_BYTES,
                                                                             REDUCE_BYTES)
    assert megatron["source"] == d["collectives"][0]["source"]


def test_a_collective_no_change_shrinks_says_how_many_were_tried(cli):
    # Megatron's all-reduce of h @ w2's partial sums, [128, 1024]: h is split by columns (w1's),
    # so w2 either matches it by rows (now) or h is gathered (2 MiB); no one input's spec moves
    # fewer bytes there. The changes tried are w2's: not split over model (which is also
    # replicating it) and its columns split over model, two compiles.
    code, out, err = cli([*MLP, "--preset", "megatron", "--what-if", "1"])
    assert code == 0, err
    assert out.splitlines()[-2:] == [
        "What if: collective #1, all-reduce over model, 512.0 KiB per device, at "
        "explorer/_src/workloads/mlp.py:34: return h @ w2",
        "  2 spec changes compiled; none was confirmed to move fewer bytes on this line"]


@pytest.mark.parametrize("number", ["2", "0", "-1"])
def test_a_number_past_the_collectives_is_one_error_naming_it_and_the_range(number, cli):
    code, out, err = cli([*GATHERED, "--what-if", number])
    assert code == 2 and out == ""                    # refused before the summary is printed
    assert err.splitlines() == [f"sharding-explorer: error: --what-if {number}: there is no "
                                f"collective #{number}; this analysis has 1 collective: #1 in "
                                "the Collectives table"]


def test_an_analysis_without_collectives_has_nothing_to_remove(cli):
    code, out, err = cli([*MLP, "--what-if", "1"])            # all replicated
    assert code == 2 and out == ""
    assert err.splitlines() == ["sharding-explorer: error: --what-if 1: this analysis has no "
                                "collectives, so no spec change can remove one"]


def test_a_number_that_is_no_whole_number_is_refused_by_the_parser(cli):
    code, out, err = cli([*GATHERED, "--what-if", "first"])
    assert code == 2
    assert "argument --what-if: 'first' is not a collective's number" in err


def test_real_devices_are_refused_before_the_compile(monkeypatch, cli):
    import explorer._src.api.workload

    def compile_(*args, **kwargs):
        raise AssertionError("the workload was compiled")

    monkeypatch.setattr(explorer._src.api.workload, "analyze_workload", compile_)
    code, out, err = cli([*GATHERED, "--what-if", "1", "--real-devices"])
    assert code == 2 and out == ""
    assert "--what-if compiles each change on the mesh's CPU devices" in err
