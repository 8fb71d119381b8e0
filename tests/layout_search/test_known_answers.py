"""Searches whose winners follow from the cost formulas, worked out before running them, and the
pruned search against the exhaustive one over the same space.

Target h100-8: 8 GPUs behind NVLink; an all-reduce of V bytes over n of them costs
max(2·V·(n-1)/(n·W), 2·(n-1)·α) (the scaling book's and NCCL's ring formula with its latency
floor; explorer/_src/cost/collectives.py), compute max(FLOPs/peak, bytes/HBM bandwidth) per
instruction.

The workload is `mlp_train`, one SGD step of y = gelu(x @ w1) @ w2 on the loss mean(y**2), with
x [B, d], w1 [d, f], w2 [f, d], float32:
- data parallelism (x split over all 8 devices on B, weights replicated) computes everything on
  B/8 rows and pays one all-reduce: the gradients of w1 and w2, V = 2·d·f·4 bytes;
- tensor parallelism over the hidden dimension (w1 split on f, w2 on f) keeps every gradient
  local (each device owns its slice of f) and pays one all-reduce of y in the forward pass,
  V = B·d·4 bytes;
- anything else splits a contraction the other way (more all-reduces) or moves whole weights
  (FSDP all-gathers d·f·4 bytes of each weight, twice).
So with B·d >> 2·d·f (a large batch, small weights) data parallelism pays the least, and with
B·d << 2·d·f (a small batch, large weights) tensor parallelism does.

Which tensor parallelism, at the small sizes here, the latency floor decides: every collective
moves under 1 MB, below what NVLink carries in its per-step latency α, so an all-reduce over n
GPUs costs 2·(n-1)·α whatever its size: 14α over 8, 6α over 4, 2α over 2. One-dimensional
tensor parallelism (w1 split on f over all 8) pays its one all-reduce of y over 8: 14α. The
two-dimensional layout (w1 split on d over a 2-GPU axis and on f over a 4-GPU axis, as in
GSPMD's 2-D sharding) pays three smaller ones: x @ w1 contracts d, split over the 2-axis, so h's
partial sums are reduced over it (2α); h @ w2 contracts f, split over the 4-axis (6α); and the
backward dh = dy @ w2ᵀ contracts d again (2α): 10α in all, less than 14α, at the same compute
(both split every FLOP 8 ways). The model predicts the two-dimensional layout.
"""

import functools
import math

import pytest

import explorer
from explorer import parse_spec
from explorer._src.layout_search.result import CandidateStatus

# Each case is a whole search, pruned and exhaustive, compiling dozens of candidates.
pytestmark = pytest.mark.slow

TARGET = "h100-8"
MESH = "data=2,model=4"
NAMES = ["batch", "embed", "mlp"]


def _tiles(c, tensor):
    """How many pieces each dimension of `tensor` is cut into on the candidate's mesh
    ("(data,model),None" cuts dimension 0 over both axes)."""
    spec = c.specs[tensor]
    if spec == "replicated":
        return None
    sizes = c.mesh.shape
    out = []
    for entry in parse_spec(spec):
        axes = () if entry is None else (entry,) if isinstance(entry, str) else entry
        out.append(math.prod(sizes[a] for a in axes))
    return tuple(out)


def _split(c, tensor, rank=2):
    t = _tiles(c, tensor)
    return (1,) * rank if t is None else t


# The known answers are worked out for the CPU's program, whose gradient all-reduce moves
# 2·d·f·4 bytes (f32) and which the formulas price; the GPU compiler's program (its own combiner,
# bf16-free here but reduce-scatter and all-gather where weights are sharded) puts ZeRO within
# 0.5% of plain data parallelism at this size, a tie no hand calculation ranks.
search = functools.partial(explorer.search, compile_for="cpu")


@pytest.fixture(scope="module")
def large_batch():
    # B·d = 2**16·64 = 4M elements against 2·d·f = 32K: data parallel.
    params = {"batch": 65536, "d_model": 64, "d_ff": 256}
    pruned = search("mlp_train", mesh=MESH, target=TARGET, params=params, names=NAMES)
    exhaustive = search("mlp_train", mesh=MESH, target=TARGET, params=params, names=NAMES,
                        prune=False)
    return params, pruned, exhaustive


@pytest.fixture(scope="module")
def small_batch():
    # B·d = 8·2048 = 16K elements against 2·d·f = 32M: tensor parallel.
    params = {"batch": 8, "d_model": 2048, "d_ff": 8192}
    pruned = search("mlp_train", mesh=MESH, target=TARGET, params=params, names=NAMES)
    exhaustive = search("mlp_train", mesh=MESH, target=TARGET, params=params, names=NAMES,
                        prune=False)
    return params, pruned, exhaustive


def test_large_batch_small_weights_data_parallel_wins(large_batch):
    params, result, _ = large_batch
    best = result.best
    assert best is not None and best.status is CandidateStatus.OK
    assert _split(best, "x") == (8, 1)
    assert _split(best, "w1") == (1, 1) and _split(best, "w2") == (1, 1)
    # It pays exactly the one gradient all-reduce over all 8 devices, V = 2·d·f·4 bytes.
    (coll,) = best.collectives
    assert coll.kind == "all-reduce" and coll.reason == "partial-sum"
    assert coll.bytes == 2 * params["d_model"] * params["d_ff"] * 4
    assert set(coll.axes) == {a for a, s in best.mesh.shape.items() if s > 1}


def test_small_batch_large_weights_two_dimensional_tensor_parallel_wins(small_batch):
    params, result, exhaustive = small_batch
    b, d, f = params["batch"], params["d_model"], params["d_ff"]
    best = result.best
    assert best is not None
    two, four = sorted(best.mesh.shape, key=lambda a: best.mesh.shape[a])
    assert (best.mesh.shape[two], best.mesh.shape[four]) == (2, 4)
    assert best.specs["w1"] == f"{two},{four}" and best.specs["w2"] == f"{four},{two}"
    assert best.specs["x"] == f"None,{two}"
    kinds = sorted((c.kind, c.axes, c.bytes) for c in best.collectives)
    assert kinds == sorted([("all-reduce", (two,), b * f // 4 * 4),     # h's partial sums
                            ("all-reduce", (two,), b * f // 4 * 4),     # dh's partial sums
                            ("all-reduce", (four,), b * d // 2 * 4)])   # y's partial sums
    assert all(c.reason == "partial-sum" for c in best.collectives)
    # Against one-dimensional tensor parallelism (w1 split on f over all 8): 10α against 14α.
    one_d = next(c for c in exhaustive.candidates if c.mesh.sizes in ((8, 1), (1, 8))
                 and _split(c, "w1") == (1, 8) and _split(c, "w2") == (8, 1)
                 and _split(c, "x") == (1, 1))
    assert best.comm_seconds / one_d.comm_seconds == pytest.approx(10 / 14)
    assert best.seconds < one_d.seconds


@pytest.mark.parametrize("case", ["large_batch", "small_batch"])
def test_pruned_search_finds_the_exhaustive_optimum(case, request):
    _, pruned, exhaustive = request.getfixturevalue(case)
    assert exhaustive.stats.pruned_bound == exhaustive.stats.pruned_memory == 0
    assert exhaustive.stats.compiled == exhaustive.stats.distinct
    assert pruned.best.label == exhaustive.best.label
    assert pruned.best.seconds == exhaustive.best.seconds
    assert pruned.stats.compiled + pruned.stats.pruned_bound + pruned.stats.pruned_memory \
        == pruned.stats.distinct
    # Every candidate the pruned search skipped is, compiled, no better than the winner, and
    # no compiled result is below the bounds it was skipped by.
    compiled = {c.label for c in pruned.candidates}
    for c in exhaustive.candidates:
        assert c.seconds >= c.bound_seconds and c.memory_bytes >= c.bound_memory
        if c.label not in compiled:
            assert c.seconds >= pruned.best.seconds
    assert exhaustive.stats.bound_violations == () == pruned.stats.bound_violations


def test_ranking_pareto_and_comparison(large_batch):
    _, result, _ = large_batch
    ok = [c for c in result.candidates if c.status is CandidateStatus.OK]
    assert [c.seconds for c in ok] == sorted(c.seconds for c in ok)
    # The front: sorted by time, each strictly smaller than every faster one, and nothing
    # off the front beats a front member on both.
    front = result.pareto
    assert front[0] is result.best
    assert all(a.memory_bytes > b.memory_bytes for a, b in zip(front, front[1:], strict=False))
    for c in ok:
        assert not any(f.seconds > c.seconds and f.memory_bytes > c.memory_bytes
                       for f in front)
    cmp = result.comparison
    slower = next(c for c in ok if c.seconds > ok[0].seconds)      # ties explain nothing
    assert cmp.winner == result.candidates[0].label and cmp.runner_up == slower.label
    assert cmp.winner_seconds < cmp.runner_up_seconds
    # Each side's groups account for all of its collectives.
    assert sum(g.count for g in cmp.winner_collectives) == sum(
        c.runs for c in result.candidates[0].collectives)
    assert all(g.example for g in cmp.winner_collectives + cmp.runner_up_collectives)
    assert "all-reduce" in cmp.text and "partial-sum" in cmp.text
    d = result.to_dict()
    assert d["candidates"][0]["specs"]["x"] == result.best.specs["x"]
    assert set(d["stats"]) >= {"space", "compiled", "pruned_bound", "pruned_memory", "seconds"}
