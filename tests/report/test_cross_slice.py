"""A multi-slice TPU program read into a Report (explorer/_src/report/cross_slice.py, build.py) from
libtpu's own texts, with no libtpu: tests/hlo/data/megascale_*.hlo (tests/hlo/test_megascale.py
says how they were compiled; the program's lines 8, 9 and 10 are `jnp.sum(x @ w)`, the
sharding constraint that gathers x over data, and `jnp.sum(x)`).

Expected values are read off the texts by hand: the in-slice all-reduce.5 (partition ids
{0,1,2,3}, a tuple of f32[32,128] and f32[1,1,128]), and three send/recv pairs (an f32[32,64] ->
f32[64,64] all-gather, two f32[1,1,128] all-reduces) among chip c of each of the two slices."""

from dataclasses import replace
from pathlib import Path

import pytest

from explorer._src.compile.protocol import CompileResult, TensorLayout
from explorer._src.report.build import build_report
from explorer._src.report.predict import with_target
from explorer._src.report.summary import collectives_table
from explorer._src.spec.mesh import parse_mesh

DATA = Path(__file__).resolve().parents[1] / "hlo" / "data"
MESH = parse_mesh("data=2,model=4")
DCN = 6.4e12 / 8 / 256        # v5e bytes/s per chip: CLOUD_V5E's 6.4 Tbps per pod of 256


def _raw(**changes) -> CompileResult:
    raw = CompileResult(
        stablehlo="", propagated=(DATA / "megascale_propagated.hlo").read_text(),
        optimized=(DATA / "megascale_optimized.hlo").read_text(),
        inputs=(TensorLayout("x", (64, 256), "float32", "{devices=[2,4]<=[8]}"),
                TensorLayout("w", (256, 128), "float32",
                             "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}")),
        outputs=(), memory=None, cost=None, lower_s=0.0, compile_s=0.0,
        backend="tpu v5e:2x2 x2", ahead_of_time=True,
        # Slice-major: positions 0-3 are slice 0's chips 0-3, 4-7 slice 1's.
        slice_of=(0, 0, 0, 0, 1, 1, 1, 1),
        device_ids=tuple(range(100000, 100004)) + tuple(range(200000, 200004)),
        before_slicing=(DATA / "megascale_before_slicing.hlo").read_text())
    return replace(raw, **changes)


@pytest.fixture(scope="module")
def report():
    return build_report(_raw(), MESH, "shardy")


def test_each_dcn_leg_is_a_collective_beside_the_in_slice_ones_in_module_order(report):
    assert [(c.hlo_name, c.kind, c.tier) for c in report.collectives] == [
        ("send.1", "all-gather", "across"), ("all-reduce.5", "all-reduce", "inside"),
        ("send", "all-reduce", "across"), ("send.2", "all-reduce", "across")]
    assert [c.dcn_key for c in report.collectives] == [
        "all-gather_0", "", "all-reduce.1_0", "all-reduce.2_0"]


def test_an_in_slice_collective_holds_every_slices_copy_of_its_groups(report):
    inside = report.collectives[1]
    assert inside.groups == ((0, 1, 2, 3), (4, 5, 6, 7)) and inside.axes == ("model",)
    assert inside.parts == 2 and inside.bytes == 32 * 128 * 4 + 128 * 4


def test_a_dcn_leg_spans_the_slice_axis_with_its_bytes(report):
    gather, _, total, everything = report.collectives
    for leg in (gather, total, everything):
        assert leg.axes == ("data",) and leg.groups == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert gather.bytes == 64 * 64 * 4 and gather.shape == (64, 64)
    assert total.bytes == everything.bytes == 128 * 4


def test_a_dcn_leg_is_shown_with_the_collective_it_completes(report):
    # jnp.sum(x): a sum over model inside each slice (part of all-reduce.5), then over data.
    assert report.collectives[3].leg_of == "all-reduce.5"
    # jnp.sum(x @ w) over data, and the gather over data: no part inside a slice.
    assert report.collectives[0].leg_of == report.collectives[2].leg_of == ""


def test_a_dcn_leg_says_the_line_and_reason_of_the_collective_it_is_part_of(report):
    gather, _, total, everything = report.collectives
    assert gather.source.endswith("fixture.py:9") and gather.why.reason == "reshard"
    assert total.source.endswith("fixture.py:8") and total.why.reason == "partial-sum"
    assert everything.source.endswith("fixture.py:10") and everything.why.reason == "partial-sum"
    assert everything.op_name == "jit(f)/reduce_sum"
    assert everything.why.text.startswith(
        "Between slices, over the data-center network: part of an all-reduce of the program "
        "(`all-reduce.2` before libtpu split it at the slices' edges; its part inside each "
        "slice is `all-reduce.5`).")
    assert "at line 10" in everything.why.text


def test_a_combined_in_slice_collective_says_why_no_reason_is_read(report):
    inside = report.collectives[1]
    assert inside.why.reason == "unknown" and "XLA combined 2 all-reduces" in inside.why.text


def test_without_the_module_before_the_split_the_notes_say_what_is_missing():
    r = build_report(_raw(before_slicing=""), MESH, "shardy")
    assert any("before libtpu split" in n for n in r.notes)
    assert [c.tier for c in r.collectives] == ["across", "inside", "across", "across"]


def test_each_leg_is_priced_on_its_own_links(report):
    priced = with_target(report, "tpu-v5e-2x2-2slices")
    gather, inside, total, everything = priced.collectives
    # DCN legs among m = 2 slices, each device at its own share W of the DCN (no measured
    # fraction, no sourced latency): all-gather V·(m-1)/(m·W), all-reduce 2·V·(m-1)/(m·W).
    assert gather.est_seconds == pytest.approx(64 * 64 * 4 * (2 - 1) / (2 * DCN))
    assert total.est_seconds == pytest.approx(2 * 512 * (2 - 1) / (2 * DCN))
    assert everything.est_seconds == total.est_seconds
    links = [t.links for t in priced.estimate.collectives]
    assert links[0] == links[2] == links[3] == "DCN x2"
    assert "DCN" not in links[1] and "ICI" in links[1]
    # The schedule runs each leg from its send to its recv-done: all four on the timeline.
    assert priced.trace is not None and priced.trace.notes == ()
    assert {e.hlo for e in priced.trace.events} >= {"send", "send.1", "send.2",
                                                         "all-reduce.5"}


def test_the_summary_marks_each_dcn_leg_and_the_collective_it_completes(report):
    rows = collectives_table(report)
    assert "all-gather (async) [DCN]" in rows[1]
    assert "all-reduce ×2" in rows[2] and "DCN" not in rows[2]
    assert "all-reduce (async) [DCN, with #2]" in rows[4]
