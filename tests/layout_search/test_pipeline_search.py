"""The pipeline search end to end: per-layer costs measured by compiling, every (stages,
microbatches) planned by the stage DP, the best plans compiled."""

import itertools

import pytest

import explorer
from explorer._src.layout_search.result import CandidateStatus

# Compiles per-layer costs and the best plans of every (stages, microbatches).
pytestmark = pytest.mark.slow

PARAMS = {"layers": 4, "batch": 16, "d_model": 64}


@pytest.fixture(scope="module")
def result():
    return explorer.search("pipeline", mesh="stage=4,data=2", target="h100-8", params=PARAMS,
                           max_microbatches=4, verify=2)


def test_every_stage_count_and_microbatch_count_is_planned(result):
    planned = {(c.params["stages"], c.params["microbatches"]) for c in result.candidates}
    # 8 devices, 4 layers: S in {1, 2, 4} (dividing both); M <= 4 dividing 16 with 16/M rows
    # splitting over the 8/S data devices of a stage.
    assert planned == {(1, 1), (1, 2), (2, 1), (2, 2), (2, 4), (4, 1), (4, 2), (4, 4)}
    assert result.space == "pipeline"
    # Plans in the space: every cut of 4 layers into S stages, C(3, S-1), per (S, M).
    assert result.stats.space == 2 * 1 + 3 * 3 + 3 * 1
    assert result.stats.profiled == 8           # one per (rows per microbatch, stage width)


def test_each_plan_is_the_best_slicing_and_its_time_is_eq2(result):
    for c in result.candidates:
        s, m = c.params["stages"], c.params["microbatches"]
        t = c.extra["stage_seconds"]
        assert c.seconds == pytest.approx(sum(t) + (m - 1) * max(t))
        layer = c.extra["layer_seconds"]
        edges = (0, *[int(x) for x in c.params["cuts"].split(",") if x], PARAMS["layers"])
        sizes = [b - a for a, b in zip(edges, edges[1:], strict=False)]
        send = t[0] - sizes[0] * layer
        assert all(ti == pytest.approx(n * layer + send) for ti, n in zip(t, sizes, strict=True))
        times = []
        for cuts in itertools.combinations(range(1, PARAMS["layers"]), s - 1):
            bounds = (0, *cuts, PARAMS["layers"])
            ts = [(b - a) * layer + send for a, b in zip(bounds, bounds[1:], strict=False)]
            times.append(sum(ts) + (m - 1) * max(ts))
        assert c.seconds == pytest.approx(min(times))


def test_the_per_layer_cost_is_the_one_stage_program_over_its_layers(result):
    one = next(c for c in result.candidates if c.params["stages"] == 1
               and c.params["microbatches"] == 1)
    report = explorer.analyze_workload(
        "pipeline", "stage=1,data=8", params=PARAMS | {"stages": 1, "microbatches": 1},
        rules="batch=data", target="h100-8")
    assert one.extra["layer_seconds"] * PARAMS["layers"] == pytest.approx(
        report.estimate.step_trace_seconds)


def test_the_best_plans_are_compiled_and_ranked_first(result):
    ranked = [c.seconds for c in result.candidates]
    assert ranked == sorted(ranked)
    top = result.candidates[:2]
    assert all(c.status is CandidateStatus.OK and c.fits for c in top)
    assert all(c.report is not None and c.collectives for c in top)
    assert all(c.status is CandidateStatus.ESTIMATED for c in result.candidates[2:])
    # A plan over more than one stage moves activations with collective-permutes over `stage`.
    multi = [c for c in top if c.params["stages"] > 1]
    assert all(any(x.kind == "collective-permute" and x.axes == ("stage",)
                   for x in c.collectives) for c in multi)
    assert result.best is result.candidates[0]
