"""The estimate screen traces a built-in workload once for every mesh shape of the same axes
(estimate_screen.py's EstimateScreen.trace): each candidate's estimate is then the one a trace
on its own mesh shape gives, the ground truth here (a fresh screen per shape, which traces on
that shape)."""

import pytest

import explorer
from explorer._src.layout_search import search as search_module
from explorer._src.layout_search.estimate_screen import EstimateScreen
from explorer._src.layout_search.result import SearchSpace
from explorer._src.layout_search.space import enumerate_space, mesh_factorisations
from explorer._src.spec.mesh import parse_mesh


def _points_by_shape(workload: str, mesh: str, params: dict, names: list[str]):
    problem = search_module._problem(explorer.Request(workload=workload, mesh=mesh,
                                                      params=params))
    found = enumerate_space(problem, mesh_factorisations(parse_mesh(mesh)), SearchSpace.RULES,
                            *search_module._searched(problem, SearchSpace.RULES, names, None),
                            lambda: False)
    shapes: dict[tuple, list] = {}
    for p in found.points:
        shapes.setdefault(p.layout.mesh.sizes, []).append(p)
    return problem, shapes


def _numbers(c):
    return (c.status, c.seconds, c.compute_seconds, c.comm_seconds, c.memory_bytes,
            [(x.kind, x.axes, x.bytes, x.runs) for x in c.collectives])


@pytest.mark.parametrize(("workload", "params", "names"), [
    ("mlp_train", {"batch": 512}, ["batch", "mlp", "embed"]),
    pytest.param("transformer_train", {}, ["batch", "embed", "mlp", "heads"],
                 marks=pytest.mark.slow),    # a trace of seconds per mesh shape
])
def test_one_trace_for_every_mesh_shape_estimates_as_a_trace_on_each(workload, params, names):
    problem, shapes = _points_by_shape(workload, "data=2,model=2", params, names)
    # 2x2 and one of 1x4 and 4x1 (mirrored, so their candidates are the same programs).
    assert len(shapes) == 2
    shared = EstimateScreen(problem, "h100-4")
    for sizes, points in shapes.items():
        own = EstimateScreen(problem, "h100-4")      # traces on this shape first
        assert [_numbers(shared.candidate(p)) for p in points] == \
            [_numbers(own.candidate(p)) for p in points], sizes
    assert len(shared._programs) == 1    # traced once


def test_the_pipeline_and_a_users_function_are_traced_on_each_mesh_shape():
    from explorer._src.layout_search.estimate_screen import _sizes_unread
    from explorer._src.layout_search.space import FunctionProblem

    pipeline = search_module._problem(explorer.Request(workload="pipeline",
                                                       mesh="stage=4,data=2"))
    assert not _sizes_unread(pipeline)
    x = explorer.TensorSpec("x", (8, 8))
    assert not _sizes_unread(FunctionProblem(lambda x: x, (x,), [x]))
    mlp = search_module._problem(explorer.Request(workload="mlp", mesh="data=2"))
    assert _sizes_unread(mlp)
