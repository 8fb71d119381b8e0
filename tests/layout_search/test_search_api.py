"""explorer.search on a user's own function, its failures, cancellation, budget and bad input."""

import math
import threading

import pytest

import explorer
from explorer import TensorSpec, parse_spec
from explorer._src.layout_search.result import CandidateStatus

# 4 devices: the h100-4 target (4 GPUs behind NVLink).
TARGET = "h100-4"


def two_layer(x, w1, w2):
    import jax

    return jax.nn.relu(x @ w1) @ w2


def row_blocks(x, w):
    """Multiplies each block of x's rows in a shard_map over `model`: x has 2 rows, so a mesh
    whose `model` axis has 4 devices cannot split it, and jax refuses to trace it there."""
    import jax
    from jax.sharding import PartitionSpec

    return jax.shard_map(lambda a, b: a @ b, in_specs=(PartitionSpec("model", None),
                                                        PartitionSpec()),
                         out_specs=PartitionSpec("model", None))(x, w)


def _row_split(c, tensor):
    """Into how many pieces the candidate cuts `tensor`'s first dimension ("(data,model),None"
    cuts it over both axes)."""
    if c.specs[tensor] == "replicated":
        return 1
    first = parse_spec(c.specs[tensor])[0]
    axes = () if first is None else (first,) if isinstance(first, str) else first
    return math.prod(c.mesh.shape[a] for a in axes)


@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
def test_a_user_function_gets_the_layout_the_formulas_predict():
    # x [4096, 64] is large, w1 [64, 128] and w2 [128, 64] small and replicated: splitting x by
    # rows over all 4 devices needs no collective at all (a forward only, each row independent)
    # and splits every FLOP 4 ways; a split of its columns (the contraction of x @ w1) leaves
    # partial sums of h [4096, 128] to all-reduce, and a split over fewer devices computes more
    # per device.
    x = TensorSpec("x", (4096, 64))
    w1 = TensorSpec("w1", (64, 128))
    w2 = TensorSpec("w2", (128, 64))
    result = explorer.search(two_layer, x, w1, w2, mesh="data=2,model=2", target=TARGET,
                             tensors=["x"])
    best = result.best
    assert best.status is CandidateStatus.OK and best.collectives == ()
    assert best.specs["w1"] == best.specs["w2"] == "replicated"
    assert _row_split(best, "x") == 4
    # x's 11 specs on the 2x2 mesh (see test_space), 3 on each of 4x1 and 1x4: a user
    # function's candidates are compared only on the same mesh shape.
    assert result.stats.distinct == 17
    exhaustive = explorer.search(two_layer, x, w1, w2, mesh="data=2,model=2", target=TARGET,
                                 tensors=["x"], prune=False)
    assert exhaustive.best.seconds == best.seconds
    assert result.space == "specs"


@pytest.mark.slow
def test_only_the_chosen_tensors_are_searched():
    x = TensorSpec("x", (256, 64), spec=("data", None))
    w = TensorSpec("w", (64, 64))
    result = explorer.search(lambda x, w: x @ w, x, w, mesh="data=2,model=2", target=TARGET,
                             tensors=["w"], mesh_shapes=False)
    assert {c.specs["x"] for c in result.candidates} == {"data,None"}
    # w's 11 distinct specs on the 2x2 mesh (64 divides every split).
    assert result.stats.distinct == 11


@pytest.mark.slow
def test_a_candidate_that_fails_to_compile_is_recorded_and_the_search_goes_on():
    x = TensorSpec("x", (2, 8))
    w = TensorSpec("w", (8, 8))
    result = explorer.search(row_blocks, x, w, mesh="data=2,model=2", target=TARGET,
                             tensors=["w"], prune=False)
    failed = [c for c in result.candidates if c.status is CandidateStatus.FAILED]
    ok = [c for c in result.candidates if c.status is CandidateStatus.OK]
    assert failed and ok
    assert all(c.mesh.shape["model"] == 4 for c in failed)
    assert all(c.mesh.shape["model"] != 4 for c in ok)
    assert all("model" in c.error for c in failed)
    assert result.stats.failed == len(failed)
    assert result.candidates[-1].status is CandidateStatus.FAILED     # ranked last


@pytest.mark.slow
def test_cancel_from_the_progress_callback_and_by_event():
    seen = []

    def progress(p):
        seen.append(p)
        return p.compiled < 2                     # stop after two compiles

    x, w = TensorSpec("x", (64, 64)), TensorSpec("w", (64, 64))
    result = explorer.search(lambda x, w: x @ w, x, w, mesh="data=2,model=2", target=TARGET,
                             progress=progress, prune=False)
    assert result.stats.stopped == "cancelled"
    assert result.stats.compiled == 2
    assert result.stats.not_evaluated == result.stats.distinct - 2
    assert seen[0].phase == "enumerate" and seen[-1].phase == "done"
    assert {p.total for p in seen if p.phase == "compile"} == {result.stats.distinct}
    event = threading.Event()
    event.set()
    result = explorer.search(lambda x, w: x @ w, x, w, mesh="data=2,model=2", target=TARGET,
                             cancel=event)
    assert result.stats.compiled == 0 and result.stats.stopped == "cancelled"
    assert result.best is None


def test_the_budget_stops_the_search():
    x, w = TensorSpec("x", (64, 64)), TensorSpec("w", (64, 64))
    result = explorer.search(lambda x, w: x @ w, x, w, mesh="data=2,model=2", target=TARGET,
                             budget_s=1e-6, prune=False)
    assert result.stats.stopped == "budget"
    assert result.stats.compiled == 0
    assert result.stats.not_evaluated == result.stats.distinct


@pytest.mark.parametrize("kwargs,match", [
    (dict(target=None), "needs a target"),
    (dict(target="cpu"), "no sourced speeds"),
    (dict(target="h100-8"), "8 chips"),
    (dict(budget_s=-1), "budget_s=-1"),
    (dict(space="pipeline"), "pipeline"),
    (dict(names=["batch"]), "names="),
    (dict(tensors=["nope"]), "'nope'"),
    (dict(cancel=object()), "threading.Event"),
    (dict(prune="yes"), "prune="),
    (dict(node_timeout=30), "node_timeout=30 applies to a search on a Ray cluster"),
    (dict(node_timeout=-1, cluster="127.0.0.1:6379"), "node_timeout -1 is not a positive"),
    (dict(node_timeout=math.inf, cluster="127.0.0.1:6379"), "node_timeout inf"),
])
def test_bad_input_is_one_clear_error(kwargs, match):
    x, w = TensorSpec("x", (64, 64)), TensorSpec("w", (64, 64))
    args = dict(mesh="data=2,model=2", target=TARGET) | kwargs
    with pytest.raises(explorer.ExplorerError, match=match):
        explorer.search(lambda x, w: x @ w, x, w, **args)


def test_bad_workload_input():
    with pytest.raises(explorer.WorkloadError, match="'nope'"):
        explorer.search("mlp", mesh="data=2,model=2", target=TARGET, names=["nope"])
    with pytest.raises(explorer.ExplorerError, match="tensors="):
        explorer.search("mlp", mesh="data=2,model=2", target=TARGET, tensors=["x"])
    with pytest.raises(explorer.WorkloadError, match="unknown"):
        explorer.search("no_such_workload", mesh="data=4", target=TARGET)


def test_every_type_a_search_result_holds_is_public():
    import dataclasses
    import enum
    import typing

    seen = set()

    def walk(cls):
        if cls in seen:
            return
        seen.add(cls)
        for hint in typing.get_type_hints(cls).values():
            stack = [hint]
            while stack:
                h = stack.pop()
                stack.extend(typing.get_args(h))
                if isinstance(h, type) and h.__module__.startswith("explorer._src.layout_search"):
                    if dataclasses.is_dataclass(h):
                        walk(h)
                    elif issubclass(h, enum.Enum):
                        seen.add(h)

    walk(explorer.SearchResult)
    walk(explorer.Progress)
    missing = sorted(c.__name__ for c in seen if getattr(explorer, c.__name__, None) is not c)
    assert missing == []


def test_patience_stops_after_compiles_that_do_not_improve():
    seen = []
    x, w = TensorSpec("x", (64, 64)), TensorSpec("w", (64, 64))
    # On CPU devices only: with the gpu extra the best would be the GPU compiler's numbers
    # (the confirmation, test_screen_confirm.py), not the ones patience counted.
    result = explorer.search(lambda x, w: x @ w, x, w, mesh="data=2,model=2", target=TARGET,
                             patience=3, progress=seen.append, compile_for="cpu")
    assert result.stats.stopped == "patience"
    assert result.stats.compiled < result.stats.distinct
    # The best after each compile: it last improved three compiles before the end.
    best_after = {p.compiled: p.best_seconds for p in seen if p.phase == "compile"}
    n = result.stats.compiled
    assert best_after[n] == best_after[n - 3] == result.best.seconds
    assert n - 3 == 1 or best_after[n - 4] > best_after[n - 3]
