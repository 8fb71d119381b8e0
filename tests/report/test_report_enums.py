"""A Report's closed sets are StrEnums, so its JSON holds the words it always held: the
partitioner, the mesh's axis type, a permute's ring direction. No compile: the Report is built
by hand from what the validators and readers return."""

import json

from explorer import AxisType, Partitioner, RingDirection
from explorer._src.api.request import check_partitioner
from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.hlo.groups import ring_direction
from explorer._src.report.report import Collective, Cost, Report, Timing
from explorer._src.spec.mesh import parse_mesh


def _permute(pairs, mesh):
    return Collective(kind=CollectiveKind.COLLECTIVE_PERMUTE, axes=("stage",), group_size=4,
                      shape=(8,), dtype="float32", bytes=32,
                      direction=ring_direction(pairs, mesh.sizes, mesh.names))


def test_a_reports_json_writes_each_closed_set_as_its_old_word():
    mesh = parse_mesh("stage=4", axis_type="explicit")
    # On a ring of 4, device i sending to i + 1 (3 to 0) goes to the next; to i - 1, back.
    forward = _permute([(0, 1), (1, 2), (2, 3), (3, 0)], mesh)
    backward = _permute([(1, 0), (2, 1), (3, 2), (0, 3)], mesh)
    report = Report(mesh=mesh, partitioner=check_partitioner("gspmd"), backend="cpu",
                    collectives=(forward, backward), tensors=(), memory=None,
                    cost=Cost(flops=None, bytes_accessed=None, transcendentals=None,
                              collective_bytes=64),
                    timing=Timing(lower_s=0.0, compile_s=0.0))
    assert report.partitioner is Partitioner.GSPMD and mesh.axis_type is AxisType.EXPLICIT
    assert (forward.direction, backward.direction) == (RingDirection.NEXT,
                                                       RingDirection.PREVIOUS)
    d = json.loads(json.dumps(report.to_dict()))
    assert d["mesh"] == {"axes": {"stage": 4}, "devices": 4, "axis_type": "explicit",
                         "partitioner": "gspmd", "backend": "cpu"}
    assert [c["direction"] for c in d["collectives"]] == ["+", "-"]
    # A collective that is not a one-way ring step writes "" as before.
    assert Collective(kind=CollectiveKind.ALL_REDUCE, axes=("stage",), group_size=4, shape=(8,),
                      dtype="float32", bytes=32).to_dict()["direction"] == ""
