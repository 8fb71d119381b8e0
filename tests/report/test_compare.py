"""Comparing two results: collectives matched as a multiset, and the totals. No UI needed."""

import json

import pytest

from explorer._src.report.compare import Metric, Unit, compare
from explorer._src.report.report import Collective, Cost, Memory, Report, Timing, WorkloadInfo
from explorer._src.spec.mesh import MeshSpec


def test_megatron_vs_replicated(megatron, replicated):
    c = compare(megatron, replicated)
    # A (Megatron) has the one all-reduce over model of the second matmul's partial sums:
    # each device holds a [256/2, 1024] f32 block, V = 128 x 1024 x 4 = 524288 bytes. B
    # (replicated weights) computes the whole MLP on each device: no collective at all.
    [gone] = c.removed
    assert (gone.kind, gone.axes, gone.shape, gone.bytes) == (
        "all-reduce", ("model",), (128, 1024), 128 * 1024 * 4)
    assert c.added == () and c.unchanged == 0
    assert [(r.kind, r.count_a, r.count_b, r.status) for r in c.rows] == [
        ("all-reduce", 1, 0, "removed")]
    assert c.metric(Metric.COLLECTIVES).delta == -1
    # bytes per device: 0 - 524288 = -524288
    assert c.metric(Metric.COLLECTIVE_BYTES).delta == -524288
    # Replicated weights cost memory: w1 and w2 are f32[1024, 4096] each. Megatron holds a
    # quarter of each per device, so the arguments grow by 2 x 1024 x 4096 x 4 x (1 - 1/4)
    # = 25165824 bytes (24 MiB); x (data-split, 128 x 1024 x 4) is the same in both.
    assert c.metric(Metric.ARGUMENTS).delta == 2 * 1024 * 4096 * 4 * 3 // 4
    assert c.metric("arguments") is c.metric(Metric.ARGUMENTS)      # by its short name too
    assert c.metric(Metric.MEMORY).delta > 0
    # With no all-reduce there is no communication left to predict.
    assert c.metric(Metric.COMMUNICATION).b == 0 and c.metric(Metric.COMMUNICATION).delta < 0
    assert c.changes == ("spec w1: None,model -> replicated",
                         "spec w2: model,None -> replicated")
    json.dumps(c.to_dict())
    text = c.render_text()
    assert "removed (in A, not in B): 1" in text
    assert "all-reduce over model  float32[128,1024]  512.0 KiB" in text
    assert "-512.0 KiB (-100%)" in text


def test_identical_reports_have_no_differences(megatron):
    c = compare(megatron, megatron)
    assert c.added == () and c.removed == () and c.unchanged == 1
    assert c.changes == ()
    assert all(m.delta == 0 for m in c.metrics)
    assert "changed: nothing" in c.render_text()


def _report(collectives, arguments, workload, estimate=None, outputs=1024, aliased=0):
    return Report(
        mesh=MeshSpec(("data", "model"), (2, 4)), partitioner="shardy", backend="cpu",
        collectives=tuple(collectives), tensors=(),
        memory=Memory(arguments=arguments, outputs=outputs, aliased=aliased, temporaries=2048,
                      generated_code=0),
        cost=Cost(flops=1e9, bytes_accessed=1e6, transcendentals=0,
                  collective_bytes=sum(c.bytes for c in collectives)),
        timing=Timing(lower_s=0.05, compile_s=0.15), workload=workload, estimate=estimate)


def _coll(kind, axes, shape, nbytes, source):
    return Collective(kind=kind, axes=axes, group_size=4, shape=shape, dtype="float32",
                      bytes=nbytes, source=source, hlo_name=kind)


def test_render_text_exactly():
    ar = _coll("all-reduce", ("model",), (128, 1024), 524288, "model.py:42")
    ag = _coll("all-gather", ("data",), (1024, 1024), 4194304, "model.py:37")
    a = _report([ar, ar], 8 << 20, WorkloadInfo("mlp", {"batch": 256},
                                                specs={"w1": "None,model"}))
    b = _report([ar, ag], 4 << 20, WorkloadInfo("mlp", {"batch": 512},
                                                specs={"w1": "data,model"}))
    c = compare(a, b)
    # memory/device = arguments + outputs - aliased + temporaries:
    # A: 8 MiB + 1 KiB + 2 KiB, B: 4 MiB + 1 KiB + 2 KiB.
    assert c.render_text() == "\n".join([
        "A: mlp · data=2,model=4 · shardy",
        "B: mlp · data=2,model=4 · shardy",
        "changed: param batch: 256 -> 512; spec w1: None,model -> data,model",
        "                         A        B        B - A",
        "collectives              2        2        same",
        "collective bytes/device  1.0 MiB  4.5 MiB  +3.5 MiB (+350%)",
        "memory/device            8.0 MiB  4.0 MiB  -4.0 MiB (-50%)",
        "  arguments              8.0 MiB  4.0 MiB  -4.0 MiB (-50%)",
        "  outputs (not aliased)  1.0 KiB  1.0 KiB  same",
        "  temporaries            2.0 KiB  2.0 KiB  same",
        "compile (measured)       200 ms   200 ms   same",
        "removed (in A, not in B): 1",
        "  all-reduce over model  float32[128,1024]  512.0 KiB  model.py:42",
        "added (in B, not in A): 1",
        "  all-gather over data  float32[1024,1024]  4.0 MiB  model.py:37",
        "unchanged: 1",
        "note: predicted time: pick a target for both A and B",
    ])
    # The same collective from another source line is another collective.
    moved = _coll("all-reduce", ("model",), (128, 1024), 524288, "model.py:43")
    c2 = compare(a, _report([ar, moved], 8 << 20, a.workload))
    assert [x.source for x in c2.removed] == ["model.py:42"]
    assert [x.source for x in c2.added] == ["model.py:43"]


def test_metrics_are_keyed_by_name_with_labels_apart():
    a = _report([], 3000, None, outputs=500, aliased=200)
    c = compare(a, _report([], 1000, None, outputs=700, aliased=700))
    # The memory parts add up to its total in A and in B (aliased outputs count once).
    parts = [m for m in c.metrics if m.metric.parent == Metric.MEMORY]
    assert [m.metric for m in parts] == [Metric.ARGUMENTS, Metric.OUTPUTS, Metric.TEMPORARIES]
    total = c.metric(Metric.MEMORY)
    assert (total.a, total.b) == (3000 + 300 + 2048, 1000 + 0 + 2048)
    assert sum(m.a for m in parts) == total.a and sum(m.b for m in parts) == total.b
    assert [m.depth for m in c.metrics[:3]] == [0, 0, 0] and parts[0].depth == 1
    assert c.metric(Metric.OUTPUTS).label == "outputs (not aliased)"
    assert Metric.COMPILE.unit == Unit.SECONDS and Metric.COLLECTIVES.unit == Unit.COUNT
    d = c.metric(Metric.ARGUMENTS).to_dict()
    assert (d["metric"], d["label"], d["parent"], d["unit"]) == (
        "arguments", "arguments", "memory", "bytes")
    with pytest.raises(KeyError, match="'step_full_overlap'.*'collectives'"):
        c.metric(Metric.STEP_FULL_OVERLAP)      # no target: no prediction to compare
