"""A search on a GPU or TPU target screens on CPU devices and confirms with the target's compiler
(explorer/layout_search/confirm.py): the screen compiles on CPU, exactly the screen's best 3 that
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
from explorer.compile.gpu import gpu_plugin_installed
from explorer.layout_search import search as search_module
from explorer.layout_search.cluster import LocalRunner
from explorer.layout_search.confirm import CONFIRM_BEST, Screening
from explorer.layout_search.evaluate import Outcome, run
from explorer.layout_search.result import MIN_EVALUATED, CandidateStatus, CompiledBy

ARGS = dict(mesh="data=2,model=2", target="h100-4", params={"batch": 512},
            names=["batch", "mlp", "embed"], mesh_shapes=False)


class RecordingRunner(LocalRunner):
    """Compiles each request on CPU devices and records (key, compile_for, rules, step) of
    each. A request for the target's compiler comes back as the CPU report with its step
    multiplied by 1 + the rules it has (so the target's compiler reorders the screen's best),
    and its compile time by `target_cost`. `delay` seconds are added to every compile."""

    def __init__(self, delay: float = 0.0, target_cost: float = 100.0):
        super().__init__()
        self.delay, self.target_cost = delay, target_cost
        self.calls: list[tuple[object, str, str, float | None]] = []

    def next_done(self):
        key, request = self._queue.popitem(last=False)
        time.sleep(self.delay)
        outcome = run(replace(request, compile_for="cpu"))
        if request.compile_for == "target" and outcome.report is not None:
            r = outcome.report
            outcome = Outcome(replace(
                r, estimate=replace(r.estimate, step_trace_seconds=r.estimate.step_trace_seconds
                                    * (1 + request.rules.count("="))),
                timing=replace(r.timing, compile_s=r.timing.compile_s * self.target_cost)),
                "", outcome.seconds)
        self.calls.append((key, request.compile_for, request.rules, _step(outcome)))
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
        self.delay, self.target_cost = 0.0, 100.0

    def make_runner(self, cluster, pool, node_timeout) -> RecordingRunner:
        self.runners.append(RecordingRunner(self.delay, self.target_cost))
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
                        lambda settings, mesh: Screening(CompiledBy.GPU))
    return recording


def test_the_screen_compiles_on_cpu_and_the_target_confirms_its_best_three(screened):
    result = explorer.search("mlp_train", **ARGS, prune=False)
    runner = screened.runners[0]
    compile_for = [f for _, f, _, _ in runner.calls]
    # The reference on CPU, then by the target's compiler (100 times slower here, so the screen
    # pays), then every other distinct candidate screened once on CPU (prune=False), then the
    # confirmations.
    ref = runner.calls[0][0]
    assert runner.calls[0][2] == "" and runner.calls[1][:2] == (ref, "target")
    screen = [k for k, f, _, _ in runner.calls if f == "cpu"]
    assert len(screen) == len(set(screen)) == result.stats.distinct
    assert compile_for == ["cpu", "target"] + ["cpu"] * (len(screen) - 1) + ["target"] * (
        len(compile_for) - len(screen) - 1)
    # Exactly three confirmed, the fastest that fit by the screen's own steps (of candidates
    # tied with the third, any); the reference's compile counts where it is one of them.
    steps, own = runner.steps("cpu"), runner.steps("target")
    third = sorted(steps.values())[CONFIRM_BEST - 1]
    later = [k for k, f, _, _ in runner.calls[2:] if f == "target"]
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


def test_no_screen_where_the_cpu_compiles_no_faster(screened):
    screened.target_cost = 1.0
    result = explorer.search("mlp_train", **ARGS, prune=False)
    runner = screened.runners[0]
    # The reference on CPU and by the target's compiler, then every candidate by the latter.
    assert [f for _, f, _, _ in runner.calls] == ["cpu"] + ["target"] * result.stats.distinct
    s = result.stats
    assert (s.screened, s.confirmed) == (0, 0)
    assert s.screen_skipped.startswith("no CPU screen: the reference compiled in ")
    assert s.screen_skipped in s.text()
    assert {c.compiled_by for c in result.candidates} == {CompiledBy.GPU}
    assert result.best.seconds == min(runner.steps("target").values())
    assert result.headline().endswith("(XLA's GPU compiler).")


def test_compile_for_cpu_screens_nothing(recording):
    result = explorer.search("mlp_train", **ARGS, compile_for="cpu")
    assert {f for _, f, _, _ in recording.runners[0].calls} == {"cpu"}
    assert (result.stats.screened, result.stats.confirmed) == (0, 0)
    assert {c.compiled_by for c in result.candidates} == {CompiledBy.CPU_PRICED}
    assert result.headline().endswith("(cpu devices, priced on the target).")


def test_a_search_cut_short_by_its_budget_names_no_best(screened):
    # Every compile takes at least 0.3 s, so the screen's 60% of 2 s holds at most 4 screen
    # compiles (the reference on CPU and by the target, and 3 more started before 1.2 s), and
    # the headline says so.
    screened.delay = 0.3
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


def test_patience_that_stops_after_a_handful_says_so(screened):
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
    assert 1 <= result.stats.confirmed <= CONFIRM_BEST


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
