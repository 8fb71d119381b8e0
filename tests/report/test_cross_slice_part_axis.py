"""A multi-slice TPU program whose mesh axis spans the slices only in part: `data=4,model=2` on
two v5e:2x2 slices (tpu-v5e-2x2-2slices), data split 2 (slices, outer) x 2 (inside each slice).

tests/hlo/data/megascale_part_axis_*.hlo are libtpu 0.0.42.1's texts (jax 0.10.2) of
`sharding-explorer analyze --workload mlp --mesh data=4,model=2 --preset 2d --target
tpu-v5e-2x2-2slices` (paths made relative): x and w1 are P(data, model), w2 P(model, data),
so `x @ w1` gathers x over model and w1 over data, and `h @ w2` gathers h over data. libtpu
runs each gather over data in two parts, between the slices (a DCN leg) and inside each slice.

Expected values are worked out by hand from the mesh: position 2d + m; slice 0 holds data 0-1
(positions 0-3), slice 1 data 2-3 (positions 4-7). Inside each slice data 0 meets data 1
({0,2}, {1,3}, {4,6}, {5,7}); between the slices data 0 meets data 2 ({0,4}, {1,5}, ...)."""

from pathlib import Path

import pytest

from explorer._src.compile.protocol import CompileResult, TensorLayout
from explorer._src.report.build import build_report
from explorer._src.report.predict import with_target
from explorer._src.spec.mesh import parse_mesh

DATA = Path(__file__).resolve().parents[1] / "hlo" / "data"
MESH = parse_mesh("data=4,model=2")
INSIDE_DATA = {frozenset(g) for g in ((0, 2), (1, 3), (4, 6), (5, 7))}
ACROSS_DATA = {frozenset(g) for g in ((0, 4), (1, 5), (2, 6), (3, 7))}
MODEL = {frozenset((2 * d, 2 * d + 1)) for d in range(4)}


@pytest.fixture(scope="module")
def report():
    raw = CompileResult(
        stablehlo="", propagated=(DATA / "megascale_part_axis_propagated.hlo").read_text(),
        optimized=(DATA / "megascale_part_axis_optimized.hlo").read_text(),
        inputs=(TensorLayout("x", (256, 1024), "float32", "{devices=[4,2]<=[8]}"),
                TensorLayout("w1", (1024, 4096), "float32", "{devices=[4,2]<=[8]}"),
                TensorLayout("w2", (4096, 1024), "float32", "{devices=[2,4]<=[4,2]T(1,0)}")),
        outputs=(TensorLayout("out", (256, 1024), "float32",
                              "{devices=[1,4,2]<=[8] last_tile_dim_replicate}"),),
        memory=None, cost=None, lower_s=0.0, compile_s=0.0, backend="tpu v5e:2x2 x2",
        ahead_of_time=True, slice_of=(0, 0, 0, 0, 1, 1, 1, 1),
        device_ids=tuple(range(100000, 100004)) + tuple(range(200000, 200004)),
        before_slicing=(DATA / "megascale_part_axis_before_slicing.hlo").read_text())
    return build_report(raw, MESH, "shardy")


def _groups(c):
    return {frozenset(g) for g in c.groups}


def test_each_part_of_a_collective_over_data_is_over_data(report):
    seen = {(c.tier, frozenset(_groups(c))): c.axes for c in report.collectives}
    assert seen == {("across", frozenset(ACROSS_DATA)): ("data",),
                    ("inside", frozenset(INSIDE_DATA)): ("data",),
                    ("inside", frozenset(MODEL)): ("model",)}


def test_the_gathers_over_data_say_why_they_exist(report):
    gathers = [c for c in report.collectives if c.kind == "all-gather"]
    # Two gathers over data (w1's at line 32, h's at line 33), each in two parts, and x's
    # over model.
    assert len(gathers) == 5
    assert all(c.why is not None and c.why.reason == "gather-operand" for c in gathers)
    assert not [c for c in report.collectives if c.why is None or c.why.reason == "unknown"]


def test_the_table_and_the_prediction_name_the_same_axes(report):
    priced = with_target(report, "tpu-v5e-2x2-2slices")
    for c, t in zip(priced.collectives, priced.estimate.collectives, strict=True):
        assert t.axes == c.axes
        # data=slice+x: a DCN leg on the slices' links only, its part inside on x only.
        if c.axes == ("data",):
            assert t.links.startswith("DCN" if c.tier == "across" else "ICI x:2")
