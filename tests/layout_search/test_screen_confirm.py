"""A search on a GPU or TPU target screens on CPU devices and confirms with the target's compiler
(explorer/_src/layout_search/confirm.py): the screen compiles on CPU, exactly the screen's best 3
that
fit are compiled again with compile_for="target", the winner is a confirmed one ranked by its
confirmed numbers, the counts say so, and a search cut short names no best from a handful.

The compiles are real CPU compiles of a small mlp_train; a recording runner stands in for the
target's compiler (the CPU report with its step and compile times changed), so that what the
search sends where is counted and the confirmed numbers differ from the screen's in a way set
here."""

import json
import time
from dataclasses import replace

import pytest

import explorer
from explorer._src.compile.gpu import gpu_plugin_installed
from explorer._src.layout_search import search as search_module
from explorer._src.layout_search import state as state_module
from explorer._src.layout_search.cluster import LocalRunner
from explorer._src.layout_search.confirm import CONFIRM_BEST, Screening
from explorer._src.layout_search.estimate_screen import EstimateScreen
from explorer._src.layout_search.evaluate import Outcome, compile_candidate
from explorer._src.layout_search.result import MIN_EVALUATED, CandidateStatus, CompiledBy

ARGS = dict(mesh="data=2,model=2", target="h100-4", params={"batch": 512},
            names=["batch", "mlp", "embed"], mesh_shapes=False)


class RecordingRunner(LocalRunner):
    """Compiles each request on CPU devices and records (key, compile_for, rules, step) of
    each. A request for the target's compiler comes back as the CPU report with its step
    multiplied by 1 + the rules it has (so the target's compiler reorders the screen's best),
    and its compile time by `target_cost`. `delay` seconds are added to every compile, by
    `sleep`; with a fake `sleep` (a fake clock), the compiles' time limits, which come from a
    budget on that clock, are not applied to the real compiles."""

    def __init__(self, delay: float = 0.0, target_cost: float = 100.0, sleep=time.sleep):
        super().__init__()
        self.delay, self.target_cost, self.sleep = delay, target_cost, sleep
        self.calls: list[tuple[object, str, str, float | None]] = []
        self.warmed: list[tuple[object, int]] = []    # (worker key, compiles made before)

    def warm(self, key):
        # Recorded, not started: the stand-in compiles on CPU devices.
        self.warmed.append((key, len(self.calls)))

    def next_done(self, stop=None):
        key, request = self._queue.popitem(last=False)
        self.sleep(self.delay)
        limit = {} if self.sleep is time.sleep else {"timeout": None}
        changes = {k: v for k, v in {"compile_for": "cpu", **limit}.items()
                   if getattr(request, k) != v}
        outcome = compile_candidate(replace(request, **changes) if changes else request)
        if request.compile_for == "target" and outcome.report is not None:
            r = outcome.report
            outcome = Outcome(replace(
                r, estimate=replace(r.estimate, step_trace_seconds=r.estimate.step_trace_seconds
                                    * (1 + (request.rules or "").count("="))),
                timing=replace(r.timing, compile_s=r.timing.compile_s * self.target_cost)),
                "", outcome.seconds)
        self.calls.append((key, request.compile_for, request.rules or "", _step(outcome)))
        return [(key, outcome)]

    def steps(self, compile_for: str) -> dict[object, float]:
        """The step of each candidate compiled for `compile_for` that compiled and fits."""
        return {k: s for k, f, _, s in self.calls if f == compile_for and s is not None}


def _step(outcome: Outcome) -> float | None:
    r = outcome.report
    if r is None or r.estimate.memory is not None and r.estimate.memory.fits is False:
        return None
    return r.estimate.step_trace_seconds


class Recording:
    """The RecordingRunners the searches made, and the options the next one gets."""

    def __init__(self):
        self.runners: list[RecordingRunner] = []
        self.delay, self.target_cost, self.sleep = 0.0, 100.0, time.sleep

    def make_runner(self, cluster, pool, node_timeout) -> RecordingRunner:
        self.runners.append(RecordingRunner(self.delay, self.target_cost, self.sleep))
        return self.runners[-1]


@pytest.fixture
def recording(monkeypatch) -> Recording:
    """Searches whose compiles go through a RecordingRunner."""
    made = Recording()
    monkeypatch.setattr(search_module, "make_runner", made.make_runner)
    return made


@pytest.fixture
def screened(recording, monkeypatch) -> Recording:
    """As `recording`, with the target's own compiler as the plan (as with the gpu extra), so
    that the search screens whether or not that compiler is installed."""
    monkeypatch.setattr(search_module, "screening_for",
                        lambda request: Screening(CompiledBy.GPU))
    return recording


def test_the_screen_compiles_on_cpu_and_the_target_confirms_its_best_three(screened):
    result = explorer.search("mlp_train", **ARGS, prune=False)
    runner = screened.runners[0]
    compile_for = [f for _, f, _, _ in runner.calls]
    # The reference by the target's compiler, then on CPU (100 times faster here, so the screen
    # pays), then every other distinct candidate screened once on CPU (prune=False), then the
    # confirmations.
    ref = runner.calls[0][0]
    assert runner.calls[0][1:3] == ("target", "") and runner.calls[1][:2] == (ref, "cpu")
    screen = [k for k, f, _, _ in runner.calls if f == "cpu"]
    assert len(screen) == len(set(screen)) == result.stats.distinct
    assert compile_for == ["target"] + ["cpu"] * len(screen) + ["target"] * (
        len(compile_for) - len(screen) - 1)
    # Exactly three confirmed, the fastest that fit by the screen's own steps (of candidates
    # tied with the third, any); the reference's compile counts where it is one of them.
    steps, own = runner.steps("cpu"), runner.steps("target")
    third = sorted(steps.values())[CONFIRM_BEST - 1]
    later = [k for k, f, _, _ in runner.calls[1:] if f == "target"]
    best = set(later) | ({ref} & {k for k, v in steps.items() if v <= third})
    assert len(later) == len(set(later)) and len(best) == CONFIRM_BEST
    assert {k for k, v in steps.items() if v < third} <= best
    assert all(steps[k] <= third for k in best)
    s = result.stats
    assert (s.screened, s.confirmed, s.confirmed_by) == (s.distinct, 3, CompiledBy.GPU)
    # The confirmed rank first, by the target's numbers, each with its screen step beside.
    confirmed = result.candidates[:3]
    assert all(c.compiled_by is CompiledBy.GPU for c in confirmed)
    assert all(c.compiled_by is CompiledBy.CPU_PRICED for c in result.candidates[3:])
    assert [c.seconds for c in confirmed] == pytest.approx(sorted(own[k] for k in best))
    assert sorted(c.screen_seconds for c in confirmed) == pytest.approx(
        sorted(steps[k] for k in best))
    assert result.best is confirmed[0]
    # Compared with a confirmed one (the next slower: one tied with the winner explains nothing).
    assert result.comparison.runner_up in {confirmed[1].label, confirmed[2].label}
    assert {c.label for c in result.pareto} <= {c.label for c in confirmed}
    assert result.headline().startswith(f"Best: {confirmed[0].label}, ")
    assert "confirmed by XLA's GPU compiler (3 of the" in result.headline()
    assert result.to_dict()["candidates"][0]["compiled_by"] == "XLA's GPU compiler"


def test_the_estimate_screens_every_candidate_before_any_compile_and_the_target_confirms(
        screened, monkeypatch):
    # Issue 53: the reference's compile by the target's compiler came first and, on a busy
    # machine, took the whole budget. Now nothing compiles before the estimate has weighed the
    # candidates: the first compile is a confirmation.
    screened.target_cost = 1.0
    calls = []       # each recalibration: the screen, the pairs it was given, the factor
    recalibrate = EstimateScreen.recalibrate

    def recording(self, pairs):
        calls.append((self, list(pairs), recalibrate(self, pairs)))
        return calls[-1][2]

    monkeypatch.setattr(EstimateScreen, "recalibrate", recording)
    result = explorer.search("mlp_train", **ARGS)
    runner = screened.runners[0]
    s = result.stats
    # No compile until the estimate has weighed every candidate (the reference too); then the
    # estimate's best three by the target's compiler, and nothing on CPU devices.
    assert [f for _, f, _, _ in runner.calls] == ["target"] * CONFIRM_BEST
    assert s.screen_skipped == ("no CPU screen: every candidate is screened by its estimate "
                                "from the traced program, with no compile, and the best "
                                "confirmed by XLA's GPU compiler")
    assert s.screen_skipped in s.text()
    assert s.screened_by is CompiledBy.ESTIMATE
    # One count of each: every distinct candidate screened, three of them then compiled.
    assert (s.screened, s.confirmed, s.compiled) == (s.distinct, CONFIRM_BEST, CONFIRM_BEST)
    assert s.estimated == s.distinct - CONFIRM_BEST and s.not_evaluated == 0
    assert s.evaluated == s.screened == s.distinct
    assert not result.too_few
    estimated = [c for c in result.candidates if c.compiled_by is CompiledBy.ESTIMATE]
    confirmed = {c.label: c for c in result.candidates if c.screen_seconds is not None}
    assert len(confirmed) == CONFIRM_BEST
    # After each confirmation the estimates are scaled to the compiled compute: the scale is
    # the median of compiled over unscaled estimated compute of those confirmed so far.
    screen = calls[-1][0]
    ratios = [c.compute_seconds / e.compute_seconds for e, c in calls[-1][1]]
    assert len(calls) >= CONFIRM_BEST and len(ratios) == CONFIRM_BEST
    assert screen.compute_scale == pytest.approx(sorted(ratios)[1])      # median of three
    # The first confirmed was the unscaled estimate's fastest that fits (ties: any of them):
    # the others, as the screen first weighed them, with their compute unscaled.
    first = next(c for c in confirmed.values()
                 if c.label == calls[0][1][0][1].label)
    unscaled = [c.seconds - c.compute_seconds + c.compute_seconds / screen.compute_scale
                for c in estimated if c.status is CandidateStatus.ESTIMATED]
    assert first.screen_seconds <= min(unscaled) * (1 + 1e-9)
    # Those left estimated stand at the final scale, and say so.
    assert all(f"compute scaled by {screen.compute_scale:.2f}" in " ".join(c.notes)
               for c in estimated if c.status is CandidateStatus.ESTIMATED)
    # Compiled ones rank first; the rest say they were not compiled.
    assert all(c.compiled_by is CompiledBy.GPU for c in result.candidates[:CONFIRM_BEST])
    assert all(c.status is not CandidateStatus.OK and c.time_source == "estimate, not compiled"
               for c in estimated)
    assert result.best.compiled_by is CompiledBy.GPU
    assert f"{CONFIRM_BEST} of the {s.distinct} screened by their estimate" in \
        result.headline()
    # The table says on what basis each group is ranked.
    assert result.ranking_text().startswith(
        f"Ranked in two groups: the {CONFIRM_BEST} compiled by XLA's GPU compiler first, by "
        f"the compiled program's predicted step; then the {s.distinct - CONFIRM_BEST} "
        "screened only, by their estimate from the traced program")
    assert result.text().splitlines()[2] == result.ranking_text()


def test_a_program_that_cannot_be_traced_compiles_every_candidate_with_the_target(
        screened, monkeypatch):
    _untraceable(monkeypatch)
    screened.target_cost = 1.0
    result = explorer.search("mlp_train", **ARGS)
    runner = screened.runners[0]
    # The reference by the target's compiler and on CPU, then every other candidate the bounds
    # leave by the former.
    calls = [f for _, f, _, _ in runner.calls]
    assert calls[:2] == ["target", "cpu"] and set(calls[2:]) == {"target"}
    assert len(calls) - 1 == result.stats.compiled + result.stats.failed
    s = result.stats
    assert (s.screened, s.confirmed) == (0, 0)
    assert s.screen_skipped.startswith("no CPU screen: the reference compiled in ")
    assert "could not be traced for an estimate (no jaxpr here)" in s.screen_skipped
    assert {c.compiled_by for c in result.candidates} == {CompiledBy.GPU}
    assert result.best.seconds == min(runner.steps("target").values())
    assert result.headline().endswith("(XLA's GPU compiler).")


def test_prune_false_compiles_every_candidate_with_the_target_where_the_cpu_does_not_pay(
        screened):
    screened.target_cost = 1.0
    result = explorer.search("mlp_train", **ARGS, prune=False)
    runner = screened.runners[0]
    assert [f for _, f, _, _ in runner.calls] == ["target", "cpu"] + ["target"] * (
        result.stats.distinct - 1)
    assert result.stats.screened == 0
    assert "prune=False asks for every candidate compiled" in result.stats.screen_skipped
    assert {c.compiled_by for c in result.candidates} == {CompiledBy.GPU}


def test_compile_for_cpu_screens_nothing(recording):
    result = explorer.search("mlp_train", **ARGS, compile_for="cpu")
    assert {f for _, f, _, _ in recording.runners[0].calls} == {"cpu"}
    assert (result.stats.screened, result.stats.confirmed) == (0, 0)
    assert {c.compiled_by for c in result.candidates} == {CompiledBy.CPU_PRICED}
    assert result.headline().endswith("(cpu devices, priced on the target).")


class FakeClock:
    """The search's clock, advanced only by the compiles (`sleep`): a budget then runs out
    after the same compiles however fast this machine compiles."""

    def __init__(self):
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_search_cut_short_by_its_budget_names_no_best(screened, monkeypatch):
    # Every compile takes 0.3 s of the search's clock, so the screen's 60% of 2 s holds at most
    # 4 compiles on CPU devices (the reference and 3 more, started before 1.2 s), and the
    # headline says so. (A program that can be traced is screened by its estimate under such a
    # budget: the next test.)
    _untraceable(monkeypatch)
    clock = FakeClock()
    for module in (search_module, state_module):
        monkeypatch.setattr(module, "time", clock)
    screened.delay, screened.sleep = 0.3, clock.sleep
    result = explorer.search("mlp_train", **ARGS, budget_s=2.0)
    s = result.stats
    assert s.stopped == "budget"
    assert 1 <= s.compiled <= 4 < MIN_EVALUATED
    assert result.too_few
    assert result.headline() == (f"Best of only {s.compiled} candidate"
                                 f"{'s' if s.compiled != 1 else ''} evaluated (of "
                                 f"{s.distinct:,}): too few to name a best; widen the budget "
                                 "(budget_s).")
    assert result.text().splitlines()[1] == result.headline()


def test_under_a_budget_the_estimate_screens_every_candidate_and_confirms_in_the_reserve(
        screened):
    # However slow the target's compiler (a million times a CPU compile here), the search
    # estimates every candidate, with no CPU compile at all, and confirms the best, well
    # before the budget ends.
    screened.target_cost = 1e6
    result = explorer.search("mlp_train", **ARGS, budget_s=600.0)
    runner = screened.runners[0]
    s = result.stats
    assert "cpu" not in [f for _, f, _, _ in runner.calls]
    assert s.screen_skipped.startswith("no CPU screen: every candidate is screened by its "
                                       "estimate")
    assert s.screened_by is CompiledBy.ESTIMATE and s.screened == s.distinct
    assert s.not_evaluated == 0 and not result.too_few and s.stopped == "complete"
    assert result.best is not None and result.best.compiled_by is CompiledBy.GPU
    # What is left estimated is scaled to what the target's compiler made of those confirmed.
    left = [c for c in result.candidates if c.compiled_by is CompiledBy.ESTIMATE]
    assert left and all(any(f"over the {s.confirmed} candidate(s) it confirmed" in n
                            for n in c.notes) for c in left)


def _untraceable(monkeypatch) -> None:
    """Programs that cannot be traced for an estimate."""
    from explorer._src.errors import WorkloadError
    from explorer._src.layout_search.estimate_screen import EstimateScreen

    def untraceable(self, mesh):
        raise WorkloadError("no jaxpr here")

    monkeypatch.setattr(EstimateScreen, "trace", untraceable)


def test_patience_that_stops_after_a_handful_says_so(screened, monkeypatch):
    # Patience counts compiles: the CPU screen's (a program the estimate cannot screen).
    _untraceable(monkeypatch)
    result = explorer.search("mlp_train", **ARGS, patience=1)
    s = result.stats
    assert s.stopped == "patience" and s.compiled < MIN_EVALUATED
    assert result.headline().endswith("too few to name a best; raise patience.")
    # Patience stops the screen, not the confirmation.
    assert s.confirmed == min(CONFIRM_BEST, sum(c.status is CandidateStatus.OK
                                                for c in result.candidates))


@pytest.mark.slow   # XLA's GPU compiler: seconds a compile
@pytest.mark.skipif(not gpu_plugin_installed(), reason="needs the gpu extra")
def test_the_gpu_compiler_confirms_the_winner():
    result = explorer.search("mlp", mesh="data=2,model=4", target="h100-8",
                             params={"batch": 512}, budget_s=120)
    assert result.best is not None
    assert result.best.compiled_by is CompiledBy.GPU
    assert result.best.report.ahead_of_time and "H100" in result.best.report.device_kind
    # The estimate screened every candidate; its best 3, and more while the budget lasts and
    # they improve, were confirmed.
    assert result.stats.screened_by is CompiledBy.ESTIMATE
    assert result.stats.screened == result.stats.evaluated == result.stats.distinct
    assert result.stats.confirmed >= 1


def test_the_cli_search_takes_compile_for(cli, recording):
    code, out, _ = cli(["search", "--workload", "mlp_train", "--mesh", "data=2,model=2",
                        "--target", "h100-4", "--param", "batch=512", "--names", "batch,mlp",
                        "--fixed-mesh", "--compile-for", "cpu", "--json", "--quiet"])
    assert code == 0
    d = json.loads(out)
    assert {f for _, f, _, _ in recording.runners[0].calls} == {"cpu"}
    assert {c["compiled_by"] for c in d["candidates"]} == {"cpu devices, priced on the target"}
    assert d["stats"]["screened"] == d["stats"]["confirmed"] == 0
    assert d["headline"].startswith(f"Best: {d['candidates'][0]['label']}, ")


def users_mlp(x, w1, w2):
    """A user's own function, as a notebook cell defines it."""
    import jax

    return jax.nn.gelu(x @ w1) @ w2


def test_a_users_function_is_estimated_from_its_own_code(screened):
    # Megatron's layout of the user's MLP (w1 split by columns over model, w2 by rows): the
    # partial sums of the second matmul are one all-reduce over model of each device's
    # [B/2, D] float32 output (x split over data): 512/2 x 256 x 4 bytes (Shoeybi et al. 2019,
    # section 3). The replicated weights imply no collective at all.
    x = explorer.TensorSpec("x", (512, 256), spec=("data", None))
    w1 = explorer.TensorSpec("w1", (256, 1024))
    w2 = explorer.TensorSpec("w2", (1024, 256))
    screened.target_cost = 1e6     # the CPU cannot screen in the budget (the test above)
    result = explorer.search(users_mlp, x, w1, w2, mesh="data=2,model=4", target="h100-8",
                             tensors=["w1", "w2"], mesh_shapes=False, budget_s=600.0)
    s = result.stats
    assert s.screened_by is CompiledBy.ESTIMATE and s.not_evaluated == 0
    by_label = {c.label: c for c in result.candidates}
    megatron = by_label["data=2,model=4: w1=None,model, w2=model,None"]
    # Estimated, or confirmed by the (stand-in) compiler, which agrees.
    assert [(c.kind, c.axes, c.bytes, c.runs) for c in megatron.collectives] == [
        ("all-reduce", ("model",), 256 * 256 * 4, 1)]
    if megatron.compiled_by is CompiledBy.ESTIMATE:    # its inputs' shards, a lower bound
        assert megatron.memory_bytes == (256 * 256 + 256 * 256 + 256 * 256) * 4
    replicated = by_label["data=2,model=4: replicated"]
    assert replicated.status in (CandidateStatus.OK, CandidateStatus.ESTIMATED)
    assert all(c.collectives == () for c in result.candidates
               if c.compiled_by is CompiledBy.ESTIMATE and c.label.endswith("replicated"))


def test_the_first_progress_of_a_screened_search_is_the_estimate_with_nothing_compiled(
        screened):
    # The budget is spent first on the estimate (milliseconds a candidate), never on a compile
    # by the target's compiler (a minute on a busy machine): when the estimate first reports,
    # the runner has compiled nothing.
    seen = []
    runner_calls = screened.runners

    def progress(p):
        seen.append((p.phase, len(runner_calls[0].calls) if runner_calls else 0))

    explorer.search("mlp_train", **ARGS, budget_s=600.0, progress=progress)
    phases = [phase for phase, _ in seen]
    first = phases.index("estimate")
    assert set(phases[:first]) == {"enumerate"}
    assert all(n == 0 for phase, n in seen if phase == "estimate")
    assert phases[-1] == "done" and "confirm" in phases[first:]
    # The worker that confirms (the target's compiler for the 4 devices) was started before
    # any compile, beside the estimate, so that the confirmations do not wait for it.
    from explorer._src.api.targeting import compile_plan
    from explorer._src.spec.mesh import parse_mesh
    want = compile_plan(parse_mesh(ARGS["mesh"]), ARGS["target"], "target").worker
    assert screened.runners[0].warmed == [(want, 0)]


def test_a_search_whose_budget_ends_before_any_candidate_says_nothing_was_evaluated(
        screened, cli):
    # Issue 53: budget_s=0.001 said "No candidate fits the chip's memory" of layouts it never
    # looked at, and the CLI exited 0.
    result = explorer.search("mlp_train", **ARGS, budget_s=0.001)
    s = result.stats
    assert (s.evaluated, s.compiled, s.estimated, s.failed) == (0, 0, 0, 0)
    assert result.nothing_evaluated and result.too_few and result.best is None
    assert "fit" not in result.headline()
    assert result.headline().startswith("Evaluated 0 of ")
    assert result.headline().endswith(" within the 0.001 s budget: nothing is known of any; "
                                      "widen the budget (budget_s).")
    assert result.to_dict()["stats"]["evaluated"] == 0
    code, out, _ = cli(["search", "--workload", "mlp_train", "--mesh", "data=2,model=2",
                        "--target", "h100-4", "--param", "batch=512", "--names", "batch,mlp",
                        "--fixed-mesh", "--budget-s", "0.001", "--quiet"])
    assert code == 3
    assert out.splitlines()[1].startswith("Evaluated 0 of ")


def test_with_budget_left_the_estimates_next_best_are_confirmed_until_three_do_not_improve(
        screened):
    screened.target_cost = 1e6        # the estimate screens (as above); the budget is ample
    result = explorer.search("mlp_train", **ARGS, budget_s=600.0)
    runner = screened.runners[0]
    confirmed = [step for _, f, _, step in runner.calls if f == "target"]
    fitting = [s for s in confirmed if s is not None]
    assert result.stats.confirmed == len(confirmed) >= CONFIRM_BEST
    # It stopped because the last three did not beat the best before them, or ran out of
    # candidates that fit.
    stopped_early = min(fitting[-CONFIRM_BEST:]) >= min(fitting[:-CONFIRM_BEST], default=1e9)
    assert stopped_early or len(confirmed) == sum(
        c.status in (CandidateStatus.OK, CandidateStatus.ESTIMATED)
        for c in result.candidates)
    assert result.stats.stopped == "complete"


def test_the_estimates_left_are_scaled_again_by_what_the_target_made_of_those_it_confirmed():
    from explorer._src.layout_search.estimate_screen import EstimateScreen
    from explorer._src.layout_search.space import enumerate_space
    from explorer._src.spec.mesh import parse_mesh

    problem = search_module._problem(explorer.Request(workload="mlp_train", mesh="data=2,model=2",
                                                      params={"batch": 512}))
    mesh = parse_mesh("data=2,model=2")
    found = enumerate_space(problem, [mesh], search_module.SearchSpace.RULES,
                            *search_module._searched(problem, search_module.SearchSpace.RULES,
                                                     ["batch", "mlp"], None), lambda: False)
    screen = EstimateScreen(problem, "h100-4")
    a, b, c, left = [screen.candidate(p) for p in found.points[1:5]]
    # The target's compiler made the compute of three confirmed candidates 0.5, 0.6 and 2.0
    # times their estimates: the median, 0.6, scales what is left.
    pairs = [(e, replace(e, compute_seconds=r * e.compute_seconds))
             for e, r in ((a, 0.5), (b, 0.6), (c, 2.0))]
    assert screen.recalibrate(pairs) == pytest.approx(0.6)
    assert screen.compute_scale == pytest.approx(0.6)
    assert screen.unscaled(screen.rescaled(a, 0.6)).compute_seconds == pytest.approx(
        a.compute_seconds)
    again = screen.rescaled(left, 0.6)
    assert again.compute_seconds == pytest.approx(0.6 * left.compute_seconds)
    assert again.comm_seconds == left.comm_seconds
    assert again.seconds == again.upper_seconds == pytest.approx(
        again.compute_seconds + again.comm_seconds)
    assert again.compute_seconds <= again.lower_seconds <= again.upper_seconds
    # Rescaled, it is what a fresh estimate with the new scale gives.
    fresh = screen.candidate(found.points[4])
    assert again.compute_seconds == pytest.approx(fresh.compute_seconds)
    assert again.lower_seconds == pytest.approx(fresh.lower_seconds)
    assert again.notes == fresh.notes
    assert any("compute scaled by 0.60" in n and "the 3 candidate(s) it confirmed" in n
               for n in again.notes)
    # No pair with both computes: nothing changes.
    assert screen.recalibrate([(a, replace(a, compute_seconds=None))]) == 1.0
    assert screen.compute_scale == pytest.approx(0.6)
    # A fourth confirmed at 0.9: the median of 0.5, 0.6, 0.9 and 2.0 is 0.75, reached from
    # 0.6 by a factor of 1.25.
    more = [*pairs, (left, replace(left, compute_seconds=0.9 * left.compute_seconds))]
    assert screen.recalibrate(more) == pytest.approx(0.75 / 0.6)
    assert screen.compute_scale == pytest.approx(0.75)
    assert screen.rescaled(left, 1.0) is left


def test_a_cancel_once_the_estimate_is_done_confirms_nothing_and_says_cancelled(screened):
    # The estimate's last report (its phase, nothing current) answered False: the search ends
    # there, with every candidate estimated and no compile, and says it was cancelled (it
    # said "complete" of a search whose confirmations a cancel had skipped).
    def progress(p):
        return not (p.phase == "estimate" and not p.current)

    result = explorer.search("mlp_train", **ARGS, progress=progress)
    s = result.stats
    assert screened.runners[0].calls == []
    assert s.stopped == "cancelled" and s.confirmed == 0
    assert s.evaluated == s.estimated == s.distinct
    assert result.headline().endswith("(the estimate's numbers: XLA's GPU compiler confirmed "
                                      "none).")
