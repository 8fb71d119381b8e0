"""Inter-operator search for the `pipeline` workload: how many stages, where to cut the layers,
how many microbatches, by dynamic programming over per-layer costs, bubble included.

This is the stage construction of Alpa (Zheng et al., "Alpa: Automating Inter- and
Intra-Operator Parallelism for Distributed Deep Learning", OSDI 2022, arXiv:2201.12023, §5.2,
Eq. 2): with B microbatches and stage latencies t_1..t_S, a synchronous pipeline (GPipe, or
1F1B, whose makespan is the same) takes

    T = sum_i t_i + (B - 1) * max_j t_j,

the first microbatch's trip through every stage plus B - 1 more at the pace of the slowest stage
(the bubble is what the slow stage makes the others wait). Alpa minimises T over the slicing of
the layers into stages by enumerating the bound t_max on the slowest stage and solving, for each,

    F(s, k) = min over i >= k of  t(k..i) + F(s - 1, i + 1),   t(k..i) <= t_max,

the least total latency of layers k.. in s stages each within t_max; T* = min over t_max of
F(S, 0) + (B - 1) t_max. Here every stage gets the same submesh (the devices of one position on
the `stage` axis: devices / S of them, data parallel over `data`), so Alpa's choice of submesh per
stage is fixed and the DP runs once per (S, B).

Per-layer costs are measured, as Alpa profiles stages: the workload's own layer stack is
compiled on one stage (stages=1, one microbatch of batch/B rows, data parallel over the
stage's devices) on a mesh of the full device count, so that the target and its links are
those of the real run, and its predicted step divided by the layers is the cost of one layer's
forward, recomputed forward and backward (its weight-gradient reduction over `data` included).
A stage's latency adds the two collective-permutes that carry its activation to the next stage
and the gradient back, timed by the cost model on the `stage` axis.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from explorer._src.cost.collectives import collective_time
from explorer._src.cost.mapping import default_mapping
from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import DTYPE_BYTES
from explorer._src.workloads.pipeline import AXIS, MICROBATCHES

DATA_AXIS = "data"
# The profile mesh names the other stages' devices with an axis of their own, which the
# one-stage program does not use: per-device work is then that of one stage of the real run, and
# the mesh keeps the real run's order (stage, then data innermost on the fastest links).
PEERS_AXIS = "peers"
DEFAULT_MAX_MICROBATCHES = 32   # the program unrolls 2(M + S - 1) ticks; more compiles slowly


@dataclass(frozen=True)
class StagePlan:
    """The best slicing for one (stages, microbatches): cut points and stage latencies."""

    stages: int
    microbatches: int
    cuts: tuple[int, ...]            # first layer of stages 1..S-1
    stage_seconds: tuple[float, ...]
    seconds: float                   # sum(t) + (M - 1) * max(t)

    @property
    def bubble_fraction(self) -> float:
        """Idle time over stage-time in the step: 1 - M·sum(t) / (S·T)."""
        if self.seconds <= 0:
            return 0.0
        return 1 - self.microbatches * sum(self.stage_seconds) / (self.stages * self.seconds)

    @property
    def cuts_text(self) -> str:
        return ",".join(map(str, self.cuts))


def pipeline_time(stage_seconds: Sequence[float], microbatches: int) -> float:
    """Alpa's Eq. 2: sum of the stage latencies plus (B - 1) times the slowest."""
    return sum(stage_seconds) + (microbatches - 1) * max(stage_seconds)


def plan_stages(layer_seconds: Sequence[float], stages: int, microbatches: int,
                send_seconds: float = 0.0) -> StagePlan | None:
    """The cuts of `layer_seconds` into `stages` contiguous stages (each at least one layer)
    minimising pipeline_time, by Alpa's DP over the bound on the slowest stage. A stage's
    latency is the sum of its layers plus `send_seconds`. None if there are fewer layers than
    stages."""
    n = len(layer_seconds)
    if stages < 1 or n < stages:
        return None
    prefix = [0.0]
    for c in layer_seconds:
        prefix.append(prefix[-1] + c)

    def latency(a: int, b: int) -> float:     # layers a..b-1 as one stage
        return prefix[b] - prefix[a] + send_seconds

    longest = n - stages + 1
    bounds = sorted({latency(a, b) for a in range(n) for b in range(a + 1, min(n, a + longest)
                                                                           + 1)})
    # Every slicing into S stages has the same sum of latencies; T can only fall as t_max does,
    # so the bounds are tried from the smallest and the search stops once (B - 1)·t_max plus
    # that sum cannot beat the best.
    floor = prefix[n] + stages * send_seconds
    best: tuple[float, float, tuple[int, ...]] | None = None
    for t_max in bounds:
        if best is not None and floor + (microbatches - 1) * t_max >= best[0]:
            break
        found = _slice(latency, n, stages, t_max)
        if found is None:
            continue
        total, cuts = found
        t = total + (microbatches - 1) * t_max
        if best is None or t < best[0]:
            best = (t, t_max, cuts)
    if best is None:
        return None
    cuts = best[2]
    edges = (0, *cuts, n)
    times = tuple(latency(a, b) for a, b in zip(edges, edges[1:], strict=False))
    return StagePlan(stages, microbatches, cuts, times, pipeline_time(times, microbatches))


def _slice(latency, n: int, stages: int, t_max: float):
    """Alpa's F(s, k | t_max): (least total latency of layers k..n-1 in s stages each within
    t_max, the cuts), for s = stages, k = 0; None when no slicing keeps within t_max."""
    inf = math.inf
    # f[s][k]: layers k..n-1 in s stages; nxt[s][k]: where the first of them ends.
    f = [[inf] * (n + 1) for _ in range(stages + 1)]
    nxt = [[-1] * (n + 1) for _ in range(stages + 1)]
    f[0][n] = 0.0
    for s in range(1, stages + 1):
        for k in range(n - s, -1, -1):
            for i in range(k + 1, n - s + 2):          # the stage is layers k..i-1
                t = latency(k, i)
                if t > t_max:
                    break                              # latencies grow with i
                rest = f[s - 1][i]
                if t + rest < f[s][k]:
                    f[s][k], nxt[s][k] = t + rest, i
    if f[stages][0] == inf:
        return None
    cuts, k = [], 0
    for s in range(stages, 1, -1):
        k = nxt[s][k]
        cuts.append(k)
    return f[stages][0], tuple(cuts)


def stage_counts(devices: int, layers: int) -> list[int]:
    """Stage counts the workload allows on `devices`: S divides the devices (each stage gets
    devices / S of them) and the layers (its weights are stored layers / S per stage)."""
    return [s for s in range(1, devices + 1) if devices % s == 0 and layers % s == 0]


def microbatch_counts(batch: int, data: int, limit: int) -> list[int]:
    """Microbatch counts M that divide the batch into microbatches that split evenly over the
    stage's `data` devices, up to `limit`."""
    top = min(limit, MICROBATCHES.high, batch)
    return [m for m in range(1, top + 1) if batch % m == 0 and (batch // m) % data == 0]


def plan_mesh(devices: int, stages: int, axis_type: str = "auto") -> MeshSpec:
    data = devices // stages
    if data == 1:
        return MeshSpec((AXIS,), (stages,), axis_type)
    return MeshSpec((AXIS, DATA_AXIS), (stages, data), axis_type)


def profile_mesh(devices: int, stages: int, axis_type: str = "auto") -> MeshSpec:
    data = devices // stages
    names, sizes = [AXIS], [1]
    if stages > 1:
        names.append(PEERS_AXIS)
        sizes.append(stages)
    if data > 1:
        names.append(DATA_AXIS)
        sizes.append(data)
    return MeshSpec(tuple(names), tuple(sizes), axis_type)


def send_seconds(rows: int, d_model: int, dtype: str, stages: int, data: int,
                 target: str) -> float:
    """Two collective-permutes over `stage` per microbatch and stage: the activation forward
    and its gradient back, each rows/data x d_model per device."""
    if stages == 1:
        return 0.0
    mesh = plan_mesh(stages * data, stages)
    mapping = default_mapping(target, mesh.names, mesh.sizes)
    nbytes = rows // data * d_model * DTYPE_BYTES[dtype]
    t = collective_time(CollectiveKind.COLLECTIVE_PERMUTE, nbytes, (AXIS,), target, mapping)
    return 2 * (t.seconds or 0.0)


def count_plans(layers: int, stages: int) -> int:
    """Ways to cut `layers` into `stages` non-empty contiguous stages: C(layers-1, stages-1)."""
    return math.comb(layers - 1, stages - 1)
