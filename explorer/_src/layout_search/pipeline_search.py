"""The inter-operator search of the `pipeline` workload: per-layer costs compiled once per
microbatch size and stage width, Alpa's dynamic program (pipeline.py) choosing the cuts of every
(stages, microbatches), and the best plans compiled to check their memory and list their
collectives."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import NamedTuple

from explorer._src.api.analysis_request import Request
from explorer._src.errors import WorkloadError
from explorer._src.layout_search.evaluate import candidate_request
from explorer._src.layout_search.pipeline import (
    DATA_AXIS,
    StagePlan,
    count_plans,
    microbatch_counts,
    plan_mesh,
    plan_stages,
    profile_mesh,
    send_seconds,
    stage_counts,
)
from explorer._src.layout_search.ranking import candidate_of, pareto, rank, winner_comparison
from explorer._src.layout_search.result import (
    Candidate,
    CandidateStatus,
    SearchPhase,
    SearchResult,
    SearchSpace,
    SearchStats,
    TimeSource,
)
from explorer._src.layout_search.space import SearchLayout, WorkloadProblem
from explorer._src.layout_search.state import SearchState, compiler_of

PIPELINE_OBJECTIVE = ("the pipeline stage model, sum(t) + (microbatches - 1)·max(t), over "
                      "compiled per-layer costs (Alpa, arXiv:2201.12023, Eq. 2)")
MODEL_NOTE = ("timed by the stage model; the compiled program's own step trace leaves out the "
              "compute inside its per-tick branches")


class Option(NamedTuple):
    """A (stages, microbatches) the workload allows, and how many devices a stage has."""

    stages: int
    microbatches: int
    data: int


class Profile(NamedTuple):
    """A per-layer cost to compile: microbatches of `rows` rows on a stage of `data` devices."""

    rows: int
    data: int


@dataclass(frozen=True)
class PlanProgram:
    """A stage plan as the program that runs it: its mesh and rules, its workload params."""

    plan: StagePlan
    layout: SearchLayout
    params: Mapping                  # the workload's params with the plan's stages and cuts
    rules: str

    @property
    def label(self) -> str:
        cuts = f", cuts {self.plan.cuts_text}" if self.plan.cuts else ""
        return (f"{self.layout.mesh.text()}: {self.plan.stages} stage(s), "
                f"{self.plan.microbatches} microbatch(es){cuts}")

    @property
    def chosen(self) -> dict:
        """The params the search chose."""
        return {"stages": self.plan.stages, "microbatches": self.plan.microbatches,
                "cuts": self.plan.cuts_text}


def options(devices: int, layers: int, batch: int, limit: int) -> list[Option]:
    """Every (stages, microbatches) that fits: the stages divide the devices and the layers,
    and each microbatch splits over a stage's devices."""
    out = []
    for s in stage_counts(devices, layers):
        data = devices // s
        out += [Option(s, m, data) for m in microbatch_counts(batch, data, limit)]
    if not out:
        raise WorkloadError(f"no pipeline fits {devices} devices with layers={layers} and "
                            f"batch={batch}: a stage count must divide both the devices and "
                            "the layers, and batch/microbatches must split over the devices of "
                            "a stage")
    return out


class PipelineSearch:
    """One search of the pipeline workload of `request` on its mesh's devices; `run()`
    profiles, plans, verifies and ranks, once. Each compile is a Request of its own
    (evaluate.py's candidate_request)."""

    def __init__(self, problem: WorkloadProblem, request: Request, state: SearchState, runner,
                 limit: int, verify: int):
        self.problem, self.request, self.mesh = problem, request, request.planned.mesh
        self.state, self.runner = state, runner
        self.compiled_by = compiler_of(self.mesh, request.target, request.compile_for)
        self.verify_count = verify
        self.params = problem.params
        self.devices = self.mesh.device_count
        self.layers, self.batch = self.params["layers"], self.params["batch"]
        self.options = options(self.devices, self.layers, self.batch, limit)
        self.layer_cost: dict[Profile, float] = {}
        self.profile_error: dict[Profile, str] = {}
        self.profiled = 0
        self.plans: list[PlanProgram] = []
        self.unplanned = 0     # plans of (stages, microbatches) whose layer cost is not known
        self.verified: dict[int, Candidate] = {}        # index in plans -> its compile

    def run(self) -> SearchResult:
        self.profile()
        self.plan()
        self.verify()
        self.state.report(SearchPhase.DONE)
        return self.result()

    def submit(self, key: int, layout: SearchLayout, params: Mapping, rules: str) -> None:
        """Send the Request of the workload with `params` and `rules` on `layout`'s mesh."""
        timeout = self.state.compile_timeout(self.request.planned.timeout)
        self.runner.send(key, partial(candidate_request, self.request, self.problem, layout,
                                      timeout, self.request.compile_for, params, rules))

    def profile(self) -> None:
        """Per-layer costs: one compile of the layer stack as one stage per (microbatch rows,
        stage devices), its predicted step divided by the layers."""
        profiles = sorted({Profile(self.batch // o.microbatches, o.data) for o in self.options})
        self.state.total = len(profiles) + min(self.verify_count, len(self.options))
        self.state.begin(SearchPhase.PROFILE)
        for key, (rows, data) in enumerate(profiles):
            params = {**self.params, "stages": 1, "microbatches": 1, "batch": rows, "cuts": ""}
            stages = self.devices // data
            layout = SearchLayout(profile_mesh(self.devices, stages, self.mesh.axis_type))
            self.submit(key, layout, params, f"batch={DATA_AXIS}" if data > 1 else "")
        while self.runner.pending():
            if self.state.should_stop():
                self.state.abandoned += len(self.runner.cancel_all())
                break
            # [] once the budget is spent or the search cancelled: the compile in flight is
            # then not waited for (deadline.py), and the should_stop above ends the loop.
            for key, outcome in self.runner.next_done(stop=self.state.out_of_time):
                profile = profiles[key]
                self.profiled += 1
                cand = candidate_of(SearchLayout(self.mesh), {}, outcome, 0.0, 0,
                                    compiled_by=self.compiled_by)
                self.state.count(cand)
                if cand.status is CandidateStatus.FAILED:
                    self.profile_error[profile] = cand.error
                else:
                    self.layer_cost[profile] = cand.seconds / self.layers
                self.state.report(SearchPhase.PROFILE,
                                  f"{profile.rows} rows on {profile.data} device(s)")

    def plan(self) -> None:
        """The best cuts of each (stages, microbatches) whose layer cost is known, by the
        stage model; best first."""
        d_model, dtype = self.params["d_model"], self.params["dtype"]
        plans = []
        for s, m, data in self.options:
            profile = Profile(self.batch // m, data)
            if profile not in self.layer_cost:
                self.unplanned += count_plans(self.layers, s)
                continue
            send = send_seconds(profile.rows, d_model, dtype, s, data,
                                self.request.target)
            plan = plan_stages([self.layer_cost[profile]] * self.layers, s, m, send)
            if plan is not None:
                plans.append(plan)
        plans.sort(key=lambda q: (q.seconds, q.stages, q.microbatches))
        self.plans = [self.program(plan) for plan in plans]

    def program(self, plan: StagePlan) -> PlanProgram:
        mesh = plan_mesh(self.devices, plan.stages, self.mesh.axis_type)
        params = {**self.params, "stages": plan.stages, "microbatches": plan.microbatches,
                  "cuts": plan.cuts_text}
        rules = f"batch={DATA_AXIS}" if DATA_AXIS in mesh.names else ""
        layout = SearchLayout(mesh, (("batch", DATA_AXIS),) if rules else ())
        return PlanProgram(plan, layout, params, rules)

    def verify(self) -> None:
        """The best plans by the model, compiled until `verify` of them fit (or the plans or
        the budget run out): a plan the model likes may need more memory than a chip has."""
        following = iter(enumerate(self.plans))
        fitting = 0
        self.state.begin(SearchPhase.COMPILE)
        while True:
            while self.runner.pending() + fitting < self.verify_count \
                    and self.runner.pending() < self.runner.slots \
                    and not self.state.should_stop():
                nxt = next(following, None)
                if nxt is None:
                    break
                i, program = nxt
                self.submit(i, program.layout, program.params, program.rules)
            if not self.runner.pending():
                break
            if self.state.should_stop():
                self.state.abandoned += len(self.runner.cancel_all())
                break
            for i, outcome in self.runner.next_done(stop=self.state.out_of_time):
                c = self.compiled(self.plans[i], outcome)
                self.state.count(c)
                fitting += c.status is CandidateStatus.OK
                self.verified[i] = c
                self.state.report(SearchPhase.COMPILE, c.label)

    def compiled(self, program: PlanProgram, outcome) -> Candidate:
        return candidate_of(program.layout, self.problem.resolve(program.layout)[0], outcome,
                            0.0, 0, params=program.chosen, label=program.label,
                            compiled_by=self.compiled_by)

    def candidates(self) -> list[Candidate]:
        """Every plan, timed by the stage model (with its compile, where it was verified), and
        each profile that failed."""
        out = []
        for i, program in enumerate(self.plans):
            plan = program.plan
            extra = {"stage_seconds": list(plan.stage_seconds),
                     "bubble_fraction": plan.bubble_fraction,
                     "layer_seconds": self.layer_cost[Profile(self.batch // plan.microbatches,
                                                              self.devices // plan.stages)]}
            if i in self.verified:
                c = self.verified[i]
                out.append(replace(c, seconds=plan.seconds, extra=extra,
                                   time_source=TimeSource.PIPELINE_MODEL,
                                   notes=(MODEL_NOTE, *c.notes)))
            else:
                # The resolver's entries, not spec text as a compiled plan has: what the JSON
                # of an estimated plan has held so far (making it spec text changes the JSON).
                out.append(Candidate(
                    label=program.label, mesh=program.layout.mesh,
                    rules=program.layout.rules_text,
                    specs=self.problem.resolve(program.layout)[0], params=program.chosen,
                    status=CandidateStatus.ESTIMATED, seconds=plan.seconds,
                    time_source=TimeSource.PIPELINE_MODEL, extra=extra))
        for (rows, data), error in self.profile_error.items():
            # On the mesh it was compiled on (the search's Request may be on another shape).
            mesh = profile_mesh(self.devices, self.devices // data, self.mesh.axis_type)
            out.append(Candidate(label=f"profile of {rows} rows on {data} device(s)",
                                 mesh=mesh, rules="", specs={}, params={},
                                 status=CandidateStatus.FAILED, error=error))
        return out

    def result(self) -> SearchResult:
        ranked = rank(self.candidates())
        space = sum(count_plans(self.layers, o.stages) for o in self.options)
        state = self.state
        stats = SearchStats(
            space=space, invalid=0, equivalent=0, distinct=space,
            compiled=state.compiled, failed=state.failed,
            does_not_fit=sum(c.status is CandidateStatus.DOES_NOT_FIT for c in ranked),
            pruned_bound=0, pruned_memory=0, not_evaluated=self.unplanned,
            seconds=state.elapsed(), budget_s=state.budget_s, stopped=state.stopped,
            prune=state.prune,
            cluster=self.runner.address, cluster_size=self.runner.size, profiled=self.profiled,
            dominated=space - self.unplanned - len(self.plans), bound_violations=(),
            retried=sum(c.retries > 0 for c in ranked), cut_short=tuple(state.cut_short),
            abandoned=state.abandoned)
        return SearchResult(self.problem.name, SearchSpace.PIPELINE, self.request.target,
                            PIPELINE_OBJECTIVE, tuple(ranked), pareto(ranked),
                            winner_comparison(ranked, pipeline=True), stats)
