"""explorer.largest_batch: the batch search on probes whose memory is known in closed form (the
answer worked out by hand, or by checking every multiple of the step), counting which batches
the (fake) target compiler was asked for: the smallest, the largest, then only the boundary the
line predicts and the batch next to it; then on real compiles for GPUs, where each answer is
checked against fresh compiles of the batch found and the next one up, and against what
activation checkpointing is for (it fits more)."""

from types import SimpleNamespace

import pytest

import explorer
from explorer._src.api.request import check_mesh
from explorer._src.compile.gpu import gpu_plugin_installed
from explorer._src.cost.catalog.names import get_target
from explorer._src.cost.memory_fit import memory_fit
from explorer._src.errors import InputError, WorkloadError
from explorer._src.layout_search import capacity as capacity_module
from explorer._src.layout_search import search as search_module
from explorer._src.layout_search.capacity import (
    SEARCH_BUDGET_S,
    BatchProbe,
    ProbeReason,
    _search_batch,
    _SearchLines,
    batch_step,
    largest_batch,
    policies_for,
)
from explorer._src.layout_search.result import CompiledBy, Progress, SearchPhase
from explorer._src.layout_search.state import compiler_of

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


def recording(memory, capacity):
    """A fake target compiler with memory(b) per device: the probe, and the batches it was asked
    to compile, in order."""
    asked = []

    def probe(batch):
        asked.append(batch)
        return fake(memory, capacity)(batch)
    return probe, asked


def test_a_straight_line_asks_the_compiler_for_two_batches_and_the_boundary_only():
    # mem(b) = 12 GB + 0.3 GB·b on 80 GB: (80 - 12) / 0.3 = 226.7, so 224 is the largest
    # multiple of 8 that fits (79.2 GB) and 232 does not (81.6 GB). After the smallest batch
    # (8: 14.4 GB) the far one is where memory proportional to the batch would need 8 chips:
    # 8 · 8 · 80 / 14.4 = 355.6, so 360 (120 GB). The line through the two is the memory
    # itself and predicts 224 at once: four compiles, two for the line and two that confirm
    # the boundary.
    probe, asked = recording(lambda b: 12 * GB + 0.3 * GB * b, 80 * GB)
    probes = []
    assert _search_batch(probe, 8, 1024, 80 * GB, probes) == 224
    assert asked == [8, 360, 224, 232]
    assert [p.why for p in probes] == [ProbeReason.SMALLEST, ProbeReason.FAR,
                                       ProbeReason.LINE, ProbeReason.ABOVE]
    assert [p.fits for p in probes] == [True, False, True, False]
    # What the line had predicted for each batch it chose, beside what the compiler said.
    assert probes[0].predicted_bytes is None and probes[1].predicted_bytes is None
    assert probes[2].predicted_bytes == pytest.approx(79.2 * GB)
    assert probes[3].predicted_bytes == pytest.approx(81.6 * GB)


def test_far_batches_grow_eightfold_until_the_largest_which_fits_ends_it():
    # 12 GB + 0.01 GB·b: the far batch from 8 (12.08 GB) is 8 · 8 · 80 / 12.08 = 423.8, so 424
    # (16.24 GB), which fits; from there 424 · 8 · 80 / 16.24 is past 1024, the largest batch
    # considered, which fits too (22.24 GB).
    probe, asked = recording(lambda b: 12 * GB + 0.01 * GB * b, 80 * GB)
    probes = []
    assert _search_batch(probe, 8, 1024, 80 * GB, probes) == 1024
    assert asked == [8, 424, 1024]
    assert probes[-1].why == ProbeReason.LARGEST


def test_a_buffer_added_at_some_batch_is_found_by_the_line_through_the_closest_compiles():
    # 12 GB + 0.05 GB·b, and 20 GB more from batch 200 on (a buffer XLA adds at that size). The
    # far batch from 8 (12.4 GB) is 8 · 8 · 80 / 12.4 = 412.9, so 416 (52.8 GB), which fits;
    # then 1024, the largest (83.2 GB), does not. The line through 416 and 1024 is the upper
    # part's own: 32 + 0.05·b <= 80 up to b = 960, which fits (80.0 GB), and 968 (80.4 GB),
    # one step above, does not.
    probe, asked = recording(lambda b: 12 * GB + 0.05 * GB * b + (20 * GB if b >= 200 else 0),
                             80 * GB)
    probes = []
    assert _search_batch(probe, 8, 1024, 80 * GB, probes) == 960
    assert asked == [8, 416, 1024, 960, 968]


def test_a_line_that_guesses_badly_still_ends_two_compiles_apart():
    # 60 GB more above batch 300, which no line through batches on either side can see: the
    # compiler's answer (296 fits, 304 does not) is the brute force one, and the search gets
    # there in a few compiles, each batch once.
    def jump(b):
        return 10 * GB + 0.1 * GB * b + (60 * GB if b > 300 else 0)
    probe, asked = recording(jump, 80 * GB)
    probes = []
    assert _search_batch(probe, 8, 1024, 80 * GB, probes) == 296 == brute_force(jump, 80 * GB,
                                                                               8, 1024)
    by_batch = {p.batch: p for p in probes}
    assert by_batch[296].fits and not by_batch[304].fits
    assert len(asked) == len(set(asked)) <= 8
    # The line's predictions were off (it put 312 at 79.8 GB; the compiler said 101.2 GB).
    assert by_batch[312].predicted_bytes == pytest.approx(79.84 * GB, rel=1e-3)
    assert by_batch[312].memory_bytes == pytest.approx(101.2 * GB)


def test_a_compile_that_runs_out_of_memory_gives_no_figure_and_the_search_still_brackets():
    # As on a TPU: a batch that does not fit gives no memory figure, so the far batch (360)
    # draws no line; the bracket's middle (184) is compiled, and the line through the two
    # that fit (8 and 184) is the memory itself: 224 fits, 232 does not.
    def probe(batch):
        m = 12 * GB + 0.3 * GB * batch
        return BatchProbe(batch, m <= 80 * GB, int(m) if m <= 80 * GB else None, 0, "", 1.0)
    probes = []
    assert _search_batch(probe, 8, 1024, 80 * GB, probes) == 224
    assert [(p.batch, p.why) for p in probes] == [
        (8, ProbeReason.SMALLEST), (360, ProbeReason.FAR), (184, ProbeReason.BISECT),
        (224, ProbeReason.LINE), (232, ProbeReason.ABOVE)]


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
    assert all(line.startswith(("compiling batch", "remat=")) for line in lines)
    assert result.to_dict()["best"]["remat"] == "full"
    assert set(result.compiles()) == {CompiledBy.GPU}


def test_the_cli_refuses_an_unknown_remat_naming_the_choices(capsys):
    from explorer._src.cli import main

    assert main(["capacity", "--mesh", "data=8", "--target", "h100-8", "--remat",
                 "sometimes", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'sometimes'" in err and "'minimal'" in err


@pytest.mark.slow
def test_the_cli_prints_each_policy_and_the_best_as_the_compiler_judged_it(capsys):
    from explorer._src.cli import main

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


def test_largest_batch_asks_the_target_compiler_for_the_boundary_of_each_policy(monkeypatch):
    # A fake target compiler: memory per device 4 GB + k·b, k = 0.5 GB a sequence without remat
    # and 0.1 GB with full remat, on an H100's 84,942,979,072 bytes; batches step by 8
    # (data=8, fsdp), up to 1024. By hand: none fits (84.94 - 4) / 0.5 = 161.9 -> 160, 168 not,
    # after 8 (8 GB) and the far batch 8 · 8 · 84.94 / 8 = 679.5 -> 680; full fits
    # (84.94 - 4) / 0.1 = 809.4 -> 808, 816 not, after 8 (4.8 GB) and 1024 (the far batch,
    # 1132.6, is past it).
    capacity = get_target("h100-8").chip.capacity
    assert capacity == 84_942_979_072
    slope = {"none": 0.5 * GB, "full": 0.1 * GB}
    asked = []

    def analyze(workload, mesh, params, **kwargs):
        asked.append((params["remat"], params["batch"], kwargs["compile_for"]))
        return SimpleNamespace(memory=4 * GB + slope[params["remat"]] * params["batch"])

    def probe_of(report, batch, target):
        return BatchProbe(batch, report.memory <= capacity, int(report.memory), 0, "", 0.5)

    searched = []

    def search(*args, **kwargs):
        searched.append(kwargs)
        kwargs["progress"](Progress(SearchPhase.COMPILE, 0, 40, 0, 0, 0, None, "", "one", 1.0))
        return SimpleNamespace(text=lambda top: "the ranking", to_dict=lambda: {})

    monkeypatch.setattr(capacity_module, "analyze_workload", analyze)
    monkeypatch.setattr(capacity_module, "_probe_of", probe_of)
    monkeypatch.setattr(capacity_module, "compiled_by", lambda report: "compiled by a fake")
    monkeypatch.setattr(search_module, "search", search)
    lines = []
    result = largest_batch("transformer_train", "data=8", "h100-8", {"seq": 1024},
                           remats=("none", "full"), max_batch=1024, progress=lines.append)
    assert asked == [("none", b, "target") for b in (8, 680, 160, 168)] + \
        [("full", b, "target") for b in (8, 1024, 808, 816)]
    none, full = result.policies
    assert (none.largest_batch, full.largest_batch) == (160, 808)
    assert (none.predicted_batch, full.predicted_batch) == (160, 808)
    expected = compiler_of(check_mesh("data=8"), "h100-8", "target")
    assert result.compiles() == {expected: 8}
    assert result.best is full and full.tokens_per_second == 808 * 1024 / 0.5
    # The strategy search at the best batch is bounded, and says so as it goes.
    [kwargs] = searched
    assert kwargs["budget_s"] == SEARCH_BUDGET_S and kwargs["params"]["batch"] == 808
    assert f"bounded to {SEARCH_BUDGET_S:g} s" in lines[-2]
    assert lines[-1].startswith("search: compiling one (0 of 40 layouts settled")
    assert any(line.startswith("remat=none, offload=none: batch 160 fits, 168 does not (4 "
                               f"compiles by {expected}; the line had predicted 160)")
               for line in lines)
    text = result.text()
    assert f"(a search bounded to {SEARCH_BUDGET_S:g} s)" in text
    assert f"compiles: 8 by {expected}" in text
    assert result.to_dict()["compiles"] == {str(expected): 8}
    # A budget given to the search is the one it gets.
    largest_batch("transformer_train", "data=8", "h100-8", {"seq": 1024}, remats=("full",),
                  max_batch=1024, search_kwargs={"budget_s": 7.0})
    assert searched[-1]["budget_s"] == 7.0


def test_the_search_lines_say_each_compile_once_and_the_end():
    lines = []
    say = _SearchLines(lines.append, 120.0)
    for p in (Progress(SearchPhase.ENUMERATE, 0, 0, 0, 0, 0, None, "", "", 0.0),
              Progress(SearchPhase.COMPILE, 0, 10, 0, 0, 0, None, "", "data=8: replicated", 2.0),
              Progress(SearchPhase.COMPILE, 1, 10, 1, 0, 0, 1.5, "", "data=8: replicated", 9.0),
              Progress(SearchPhase.COMPILE, 4, 10, 1, 3, 0, 1.5, "", "batch=data", 9.0),
              Progress(SearchPhase.ESTIMATE, 7, 10, 1, 3, 0, 1.2, "", "mlp=data", 12.0,
                       estimated=3),
              Progress(SearchPhase.DONE, 10, 10, 1, 9, 0, 1.5, "", "", 20.0)):
        say(p)
    assert lines == [
        "search: listing the layouts (0 of 0 layouts settled: 0 compiled, 0 pruned, 0 failed; "
        "best none yet; 0 s of 120 s)",
        "search: compiling data=8: replicated (0 of 10 layouts settled: 0 compiled, 0 pruned, "
        "0 failed; best none yet; 2 s of 120 s)",
        "search: compiling batch=data (4 of 10 layouts settled: 1 compiled, 3 pruned, 0 failed; "
        "best 1.5 s; 9 s of 120 s)",
        "search: estimating layouts from the traced program (no compile) (7 of 10 layouts "
        "settled: 1 compiled, 3 estimated, 3 pruned, 0 failed; best 1.2 s; 12 s of 120 s)",
        "search: done, ranking what was compiled (10 of 10 layouts settled: 1 compiled, "
        "9 pruned, 0 failed; best 1.5 s; 20 s of 120 s)"]


def test_largest_batch_takes_an_explorer_request(monkeypatch):
    # The Request gives the workload, params, mesh, target and layout; the batches asked are
    # the ones the keyword form asks (a fake compiler: 4 GB + 0.1 GB a sequence on an H100's
    # 84.94 GB, batches stepping by 8 on data=8 with fsdp: (84.94 - 4) / 0.1 = 809.4 -> 808).
    capacity = get_target("h100-8").chip.capacity
    asked = []

    def analyze(workload, mesh, params, **kwargs):
        asked.append((workload, mesh.text(), params["batch"], kwargs["preset"],
                      kwargs["target"]))
        return SimpleNamespace(memory=4 * GB + 0.1 * GB * params["batch"])

    monkeypatch.setattr(capacity_module, "analyze_workload", analyze)
    monkeypatch.setattr(capacity_module, "_probe_of", lambda report, batch, target: BatchProbe(
        batch, report.memory <= capacity, int(report.memory), 0, "", 0.5))
    monkeypatch.setattr(capacity_module, "compiled_by", lambda report: "a fake")
    request = explorer.Request(workload="transformer_train", mesh="data=8", target="h100-8",
                               preset="fsdp", params={"seq": 1024, "remat": "full"})
    result = largest_batch(request, remats=("full",), max_batch=1024, strategy=False)
    assert result.best.largest_batch == 808
    assert [b for _, _, b, _, _ in asked] == [8, 1024, 808, 816]
    assert {(w, m, p, t) for w, m, _, p, t in asked} == {
        ("transformer_train", "data=8", "fsdp", "h100-8")}
    with pytest.raises(InputError, match="takes the workload, mesh, target"):
        largest_batch(request, "data=8")
    with pytest.raises(InputError, match="specs= and activations= would not be used"):
        largest_batch(explorer.Request(workload="transformer_train", mesh="data=8",
                                       target="h100-8", specs={"tokens": "data,None"}))
    with pytest.raises(InputError, match="is of a function"):
        largest_batch(explorer.Request(fn=lambda x: x, inputs=(explorer.TensorSpec(
            "x", (8, 8)),), mesh="data=8", target="h100-8"))


@pytest.mark.parametrize(("option", "value", "named"), [
    ("max_batch", float("nan"), "max_batch=nan"), ("max_batch", float("inf"), "max_batch=inf"),
    ("max_batch", 0, "max_batch=0"), ("max_batch", True, "max_batch=True"),
    ("remats", 5, "remats=5"), ("offloads", 5, "offloads=5"),
    ("params", 5, "params=5"), ("params", "batch=8", "params='batch=8'"),
    ("progress", 5, "progress=5"), ("strategy", "yes", "strategy"),
    ("timeout", -1, "timeout -1"), ("timeout", float("nan"), "timeout nan"),
    ("timeout", "5", "timeout '5'"), ("search_kwargs", 3, "search_kwargs=3"),
])
def test_largest_batch_refuses_bad_options_naming_the_value(option, value, named):
    # Issue 43: 27 raw exceptions (ValueError, OverflowError, TypeError) where search gives an
    # InputError, and timeout=-1 accepted. Each is refused before any compile.
    with pytest.raises(InputError) as e:
        explorer.largest_batch("transformer_train", "data=8", "h100-8",
                               **{"strategy": False, option: value})
    assert named in str(e.value)


# A transformer step small enough to compile in seconds on CPU devices.
TINY = {"seq": 16, "vocab": 64, "d_model": 16, "heads": 2, "d_head": 8, "d_ff": 32, "layers": 1}


@pytest.mark.slow     # real compiles of a small transformer step
def test_largest_batch_of_a_request_compiles_as_this_call_asks_not_as_the_request_says():
    # Issue 53: given a Request, largest_batch took compile_for and timeout from it and
    # silently dropped the ones the call gave. The Request here asks for the target's own
    # compiler; the call asks for CPU devices, and every probe's Report says it compiled for
    # them (its backend), whatever compiler is installed. Memory is tiny against an H100, so
    # the search asks for the smallest batch (8, the data=8 step) and the largest (64) only.
    request = explorer.Request(workload="transformer_train", mesh="data=8", target="h100-8",
                               preset="fsdp", params=TINY, compile_for="target")
    backends = []
    analyze = capacity_module.analyze_workload

    def recording(*args, **kwargs):
        report = analyze(*args, **kwargs)
        backends.append(report.backend)
        return report

    import unittest.mock
    with unittest.mock.patch.object(capacity_module, "analyze_workload", recording):
        result = largest_batch(request, compile_for="cpu", remats=("none",), max_batch=64,
                               strategy=False)
    assert backends == ["cpu", "cpu"]
    assert [p.batch for p in result.policies[0].probes] == [8, 64]
    assert result.compiles() == {CompiledBy.CPU_PRICED: 2}
    assert result.compiled_by == "compiled for 8 CPU devices"
    # And a time limit no compile can keep is applied (not the Request's none): the first
    # probe's worker is stopped, and the error says by which limit. (Other params than above,
    # so that no Report comes from the in-memory cache.)
    from explorer._src.errors import WorkerError
    with pytest.raises(WorkerError, match="longer than the 0.001 s limit"):
        largest_batch(explorer.Request(workload="transformer_train", mesh="data=8",
                                       target="h100-8", preset="fsdp",
                                       params={**TINY, "d_ff": 48}),
                      compile_for="cpu", timeout=1e-3, remats=("none",), max_batch=64,
                      strategy=False)
