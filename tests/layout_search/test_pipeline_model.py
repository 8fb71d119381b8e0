"""The pipeline stage model and Alpa's stage-construction DP, against brute force over every
slicing, a slicing worked by hand, and the GPipe schedule simulator of the pipeline workload."""

import itertools
import math
import random

import pytest

from explorer._src.layout_search.pipeline import (
    count_plans,
    microbatch_counts,
    pipeline_time,
    plan_stages,
    stage_counts,
)
from explorer._src.workloads.pipeline import schedule


def _brute_force(costs, stages, microbatches, send=0.0):
    """min over every way to cut `costs` into `stages` non-empty contiguous stages of
    sum(t) + (M - 1)·max(t), t_i = sum of its layers + send."""
    n = len(costs)
    best = math.inf
    for cuts in itertools.combinations(range(1, n), stages - 1):
        edges = (0, *cuts, n)
        t = [sum(costs[a:b]) + send for a, b in zip(edges, edges[1:], strict=False)]
        best = min(best, sum(t) + (microbatches - 1) * max(t))
    return best


def test_a_slicing_worked_by_hand():
    # Layers [1, 1, 1, 3] in 2 stages, 4 microbatches: cut after layer 1 gives t = (1, 5) and
    # T = 6 + 3·5 = 21; after 2, (2, 4), 6 + 3·4 = 18; after 3, (3, 3), 6 + 3·3 = 15.
    plan = plan_stages([1, 1, 1, 3], 2, 4)
    assert plan.cuts == (3,)
    assert plan.stage_seconds == (3, 3)
    assert plan.seconds == 15
    # The bubble: 2 stages busy 4·3 each out of 15: 1 - 24/30.
    assert plan.bubble_fraction == pytest.approx(1 - 24 / 30)


def test_one_microbatch_leaves_the_sum_and_prefers_the_balanced_cut():
    # M = 1: T = sum(t) for any cut, so every slicing ties; the DP takes the one whose slowest
    # stage is fastest.
    plan = plan_stages([2, 2, 2, 2], 2, 1)
    assert plan.seconds == 8
    assert plan.cuts == (2,)


@pytest.mark.parametrize("seed", range(30))
def test_the_dp_finds_the_brute_force_optimum(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 8)
    costs = [rng.choice([0.5, 1.0, 1.5, 2.0, 3.0, 7.0]) for _ in range(n)]
    stages = rng.randint(1, n)
    m = rng.choice([1, 2, 3, 5, 8])
    send = rng.choice([0.0, 0.25, 1.0])
    plan = plan_stages(costs, stages, m, send)
    assert plan.seconds == pytest.approx(_brute_force(costs, stages, m, send))
    # The plan's own cuts give the time it claims.
    edges = (0, *plan.cuts, n)
    t = [sum(costs[a:b]) + send for a, b in zip(edges, edges[1:], strict=False)]
    assert pipeline_time(t, m) == pytest.approx(plan.seconds)
    assert len(plan.cuts) == stages - 1 and all(a < b for a, b in zip(edges, edges[1:],
                                                                        strict=False))


def test_more_stages_than_layers_has_no_plan():
    assert plan_stages([1.0, 1.0], 3, 4) is None


@pytest.mark.parametrize("counts,microbatches", [((1, 1, 1, 1), 8), ((1, 3), 4), ((2, 1, 1), 3),
                                                 ((3, 1, 2, 2), 5), ((1,), 6)])
def test_eq2_is_the_makespan_of_the_gpipe_simulator(counts, microbatches):
    # The workload's own schedule simulator (GPipe: all forwards, then all backwards, each
    # backward as long as its forward) ends at twice Eq. 2: both phases are flow shops of M
    # identical jobs, whose makespan is sum(t) + (M - 1)·max(t). Its time unit is the forward of
    # a stage holding layers/stages layers, so a stage of c layers takes c·S/L.
    s, layers = len(counts), sum(counts)
    entries = schedule(s, microbatches, "gpipe", layer_counts=counts, backward=1)
    makespan = max(e["end"] for e in entries)
    t = [c * s / layers for c in counts]
    assert makespan == pytest.approx(2 * pipeline_time(t, microbatches))


def test_stage_and_microbatch_choices_respect_divisibility():
    # 8 devices, 4 layers: S divides both; batch 16 over M microbatches whose rows split over
    # the data devices of a stage (8/S of them).
    assert stage_counts(8, 4) == [1, 2, 4]
    assert stage_counts(8, 6) == [1, 2]
    assert microbatch_counts(16, 8, 32) == [1, 2]          # 16/M divisible by 8
    assert microbatch_counts(16, 2, 32) == [1, 2, 4, 8]
    assert microbatch_counts(16, 1, 4) == [1, 2, 4]
    assert count_plans(4, 2) == 3 and count_plans(8, 4) == 35   # C(3,1), C(7,3)
