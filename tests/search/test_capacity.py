"""explorer.largest_batch: the batch search on probes whose memory is known in closed form (the
answer worked out by hand, or by checking every multiple of the step), then on real compiles
for GPUs, where each answer is checked against fresh compiles of the batch found and the next
one up, and against what activation checkpointing is for (it fits more)."""

import pytest

import explorer
from explorer._search.capacity import (
    BatchProbe,
    _search_batch,
    batch_step,
    largest_batch,
    policies_for,
)
from explorer.compile.gpu import gpu_plugin_installed
from explorer.cost.model import memory_fit
from explorer.errors import InputError, WorkloadError

GB = 10 ** 9


def fake(memory, capacity):
    """A probe whose memory per device at batch b is memory(b), judged against capacity."""
    def probe(batch):
        m = memory(batch)
        return BatchProbe(batch, m <= capacity, int(m), 0, "", 1.0)
    return probe


def brute_force(memory, capacity, step, top):
    """The largest multiple of step up to top that fits, by trying every one."""
    fitting = [b for b in range(step, top + 1, step) if memory(b) <= capacity]
    return max(fitting) if fitting else None


def test_linear_memory_is_found_exactly_in_a_few_compiles():
    # 12 GB of state, 0.3 GB per sequence, 80 GB chips: (80 - 12) / 0.3 = 226.7 sequences per
    # device... batches step by 8 (the data-parallel degree), so 224.
    def memory(b):
        return 12 * GB + 0.3 * GB * b
    probes = []
    assert _search_batch(fake(memory, 80 * GB), 8, 2 ** 20, 80 * GB, probes) == 224
    assert len(probes) <= 5                 # the line lands on the boundary at once
    assert {p.batch for p in probes} >= {224, 232}   # the answer and the step above it


@pytest.mark.parametrize("memory", [
    lambda b: 5 * GB + 0.01 * GB * b ** 1.3,          # grows faster than the line
    lambda b: 40 * GB + 3 * GB * b ** 0.5,            # slower
    lambda b: 2 * GB + 0.2 * GB * b + (8 * GB if b > 96 else 0),   # a step (a new buffer)
])
def test_any_memory_that_grows_with_the_batch_gives_the_brute_force_answer(memory):
    probes = []
    assert _search_batch(fake(memory, 80 * GB), 8, 4096, 80 * GB, probes) == \
        brute_force(memory, 80 * GB, 8, 4096)
    assert len(probes) <= 16       # against 512 compiles of trying every multiple


def test_nothing_fits_or_everything_fits():
    probes = []
    assert _search_batch(fake(lambda b: 100 * GB, 80 * GB), 8, 4096, 80 * GB, probes) is None
    assert len(probes) == 1         # the smallest batch, refused
    probes = []
    assert _search_batch(fake(lambda b: GB, 80 * GB), 8, 4096, 80 * GB, probes) == 4096


def test_policies_pair_activation_offload_with_minimal_remat_only():
    assert policies_for(["none", "minimal", "full"], ["none", "activations"]) == [
        ("none", "none"), ("minimal", "none"), ("minimal", "activations"), ("full", "none")]
    with pytest.raises(InputError, match=r"remat 'some' is not one of .*'none'.*'minimal'"):
        policies_for(["some"], ["none"])
    with pytest.raises(InputError, match="needs remat=minimal"):
        policies_for(["full"], ["activations"])


def test_the_batch_step_is_the_data_parallel_degree_of_the_layout():
    # fsdp splits the batch over data; 2d over data only (model holds the weights' other dim).
    assert batch_step("transformer_train", {}, "data=8", "fsdp", None) == 8
    assert batch_step("transformer_train", {}, "data=4,model=2", "2d", None) == 4
    with pytest.raises(WorkloadError, match="no token batch"):
        batch_step("mlp", {}, "data=8", None, None)


def test_a_target_of_another_size_is_refused_before_any_compile():
    with pytest.raises(InputError, match="h100-8"):
        largest_batch("transformer_train", "data=4", "h100-8", strategy=False)


SMALL = {"layers": 2, "d_model": 512, "heads": 8, "d_head": 64, "d_ff": 2048, "seq": 1024,
         "vocab": 8192, "dtype": "bfloat16"}


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.skipif(not gpu_plugin_installed(), reason="the gpu extra is not installed")
def test_on_eight_h100s_the_batch_found_fits_the_next_does_not_and_remat_fits_more():
    lines = []
    result = largest_batch("transformer_train", "data=8", "h100-8", SMALL,
                           remats=("none", "full"), strategy=False, progress=lines.append)
    assert result.batch_step == 8 and "GPU compiler" in result.compiled_by
    by = {p.remat: p for p in result.policies}
    none, full = by["none"].largest_batch, by["full"].largest_batch
    assert none and full and none % 8 == 0 and full % 8 == 0
    # Keeping only each block's input (full remat) holds less per sequence than keeping every
    # activation: a larger batch fits.
    assert full > none
    assert result.best.remat == "full"
    # The real compiler, asked again: the batch found fits an H100 and one step more does not.
    for batch, fits in ((none, True), (none + 8, False)):
        r = explorer.analyze_workload("transformer_train", "data=8", preset="fsdp",
                                      target="h100-8", params={**SMALL, "batch": batch})
        assert memory_fit(r.memory.total, "h100-8").fits is fits
    assert all(line.startswith("compiling batch") for line in lines)
    assert result.to_dict()["best"]["remat"] == "full"


def test_the_cli_refuses_an_unknown_remat_naming_the_choices(capsys):
    from explorer.cli import main

    assert main(["capacity", "--mesh", "data=8", "--target", "h100-8", "--remat",
                 "sometimes", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'sometimes'" in err and "'minimal'" in err


@pytest.mark.slow
def test_the_cli_prints_each_policy_and_the_best_as_the_compiler_judged_it(capsys):
    from explorer.cli import main

    # On fake CPU devices priced on an H100 (fast, approximate): the table and the best line.
    assert main(["capacity", "--mesh", "data=8", "--target", "h100-8", "--remat", "none,full",
                 "--param", "layers=2", "--param", "seq=1024", "--param", "vocab=8192",
                 "--param", "d_model=512", "--param", "d_ff=2048", "--no-strategy",
                 "--compile-for", "cpu", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "batches step by 8" in out and "compiled for 8 CPU devices" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.startswith("remat=")}
    assert set(rows) == {"remat=none", "remat=full"}
    assert int(rows["remat=full"][1]) > int(rows["remat=none"][1])
    assert "best: remat=full fits a global batch of" in out
