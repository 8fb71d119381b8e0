"""The lower bounds, against sizes computed by hand and against the compiled results they bound."""

import pytest

import explorer
from explorer._src.layout_search.result import CandidateStatus


def _transformer_train_params() -> int:
    """Parameter elements of transformer_train at its defaults (vocab 256, d_model 64, 4 heads
    of 16, d_ff 256, 2 layers): embed and unembed 256·64 each, final_norm 64, and per layer
    ln1, ln2 (64 each), wq, wk, wv, wo (64·4·16 each), w1, w2 (64·256 each)."""
    layer = 2 * 64 + 4 * 64 * 4 * 16 + 2 * 64 * 256
    return 2 * 256 * 64 + 64 + 2 * layer


@pytest.fixture(scope="module")
def result():
    return explorer.search("transformer_train", mesh="data=2,model=4", target="h100-8",
                           names=["batch", "embed"], mesh_shapes=False, prune=False)


@pytest.mark.slow     # the module's search compiles every candidate of the train step
def test_memory_bound_of_a_train_step_counts_inputs_and_state_outputs(result):
    ref = next(c for c in result.candidates if c.label.endswith("replicated"))
    p = _transformer_train_params()
    tokens = 2 * 8 * 32 * 4            # tokens and targets, int32 [batch 8, seq 32]
    # Arguments: every input whole (params, Adam's m and v: 3P float32, and the tokens). The
    # step donates its state, so the new params, m and v are written into the inputs' buffers
    # (all 3P aliased) and add nothing to the bound.
    assert ref.report.memory.arguments == 3 * p * 4 + tokens
    assert ref.report.memory.aliased == 3 * p * 4
    assert ref.bound_memory == 3 * p * 4 + tokens
    # batch=data splits only the tokens (over the 2 devices of `data`); embed=data splits every
    # tensor with an `embed` dimension except where `batch` took `data` first.
    dp = next(c for c in result.candidates if c.rules == "batch=data")
    assert dp.bound_memory == 3 * p * 4 + tokens // 2


@pytest.mark.slow     # the module's search compiles every candidate of the train step
def test_no_compiled_candidate_falls_below_its_bounds(result):
    assert result.stats.bound_violations == ()
    for c in result.candidates:
        assert c.status is CandidateStatus.OK
        assert c.memory_bytes >= c.bound_memory > 0
        assert c.seconds >= c.bound_seconds > 0


def ffn(x, w1, w2):
    return (x @ w1) @ w2


@pytest.mark.slow
def test_the_traffic_bound_holds_where_a_device_reads_a_slice_of_a_replicated_weight(cpu_screen):
    # With w1 split over both axes on its output features, each device needs only its eighth
    # of w2's rows: the partitioner slices the replicated w2, so a device reads 1/8 of it, not
    # its whole (replicated) shard. The bound must allow for that, and still hold everywhere.
    # The bounds come from the reference's compile, which a search screening by its estimate
    # does not make first (its bounds are 0, pruning nothing): the CPU screen's path here.
    T = explorer.TensorSpec
    result = explorer.search(ffn, T("x", (64, 8192), spec="data,None"),
                             T("w1", (8192, 32768)), T("w2", (32768, 8192)),
                             mesh="data=2,model=4", target="h100-8", tensors=["w1"],
                             mesh_shapes=False)
    assert result.stats.bound_violations == ()
    sliced = next(c for c in result.candidates if c.specs["w1"] == "None,(data,model)")
    assert sliced.status is CandidateStatus.OK
    for c in result.candidates:
        if c.status is CandidateStatus.OK:
            assert c.seconds >= c.bound_seconds > 0
