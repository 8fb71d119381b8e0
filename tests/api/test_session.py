"""explorer.Session, the state behind the app, with no widgets: edits checked as a whole or
refused with nothing changed, undo and redo of the exact earlier request, hand-set specs that a
rule never replaces, bursts of edits compiled once, no worker started for an edit undone at once,
and where each result's time went."""

import asyncio
import threading
import time

import pytest

import explorer
from explorer import Session
from explorer._src.api import session as session_module

MESH = "data=2,model=4"
HAND_SET = {"x": "data,None", "w1": "None,model", "w2": "model,None"}
SMALL = {"batch": 64, "d_model": 64, "d_ff": 128}


def specs_of(s: Session) -> dict:
    return {t.name: t.spec for t in s.request.planned.leaves}


def test_an_edit_is_planned_and_a_function_traced_when_it_is_made():
    # A Request itself is checked only (tests/api/test_request_stages.py); a session's edit is
    # planned and its function traced at once, so that the app shows a refusal as the edit's.
    x = explorer.TensorSpec("x", (256, 1024), "float32", "data,None")
    w = explorer.TensorSpec("w", (1024, 512), "float32", "None,model")

    def matmul(x, w):
        return x @ w

    def refused(x, w):
        return x @ x            # (256, 1024) @ (256, 1024): jax refuses it when traced

    s = Session(fn=matmul, inputs=(x, w), mesh=MESH)
    before = s.request
    with pytest.raises(explorer.CompileError, match="refused"):
        s.edit(fn=refused, inputs=(x, w))
    with pytest.raises(explorer.DivisibilityError, match="not divisible by data=3"):
        s.edit(mesh="data=3,model=4")
    assert s.request is before and len(s.history) == 1
    # Accepted: planned, x's rows over data, w's columns over model.
    s.edit(inputs=(x, explorer.TensorSpec("w", (1024, 512), "float32", "model,None")))
    assert [t.spec for t in s.request.planned.leaves] == [("data", None), ("model", None)]


def test_a_refused_edit_changes_nothing_and_clearing_after_it_keeps_the_hand_set_specs():
    # Issue 30's defect 1, as the app's rules box made it: a bad rule, then the box cleared.
    s = Session(workload="mlp", mesh=MESH, params=SMALL, specs=HAND_SET)
    before, generation = s.request, s.generation
    for bad in ("batch=zz", "batch=(data"):
        with pytest.raises(explorer.RuleError):
            s.edit(rules=bad)
        assert s.request is before and s.generation == generation and len(s.history) == 1
    s.edit(rules=None)                  # the box cleared: nothing changes, nothing is recorded
    assert s.request is before
    s.edit(rules="batch=data")
    # The rule agrees with x and reaches neither weight: every hand-set spec stays.
    assert specs_of(s) == {"x": ("data", None), "w1": (None, "model"), "w2": ("model", None)}
    s.edit(rules=None)
    assert specs_of(s) == {"x": ("data", None), "w1": (None, "model"), "w2": ("model", None)}


def test_a_hand_set_spec_wins_over_the_preset_and_is_named():
    s = Session(workload="mlp", mesh=MESH, preset="megatron")
    s.set_spec("w2", "None,model")
    # megatron gives w2 (mlp, embed) = (model, None); the hand-set spec wins.
    assert specs_of(s)["w2"] == (None, "model")
    assert s.untouched_by_rules() == {"w2": "model,None"}
    s.set_spec("x", "data,None")            # what megatron gives x: not reported
    assert s.untouched_by_rules() == {"w2": "model,None"}
    s.set_spec("w2", None)                  # back to the preset
    assert specs_of(s)["w2"] == ("model", None) and s.untouched_by_rules() == {}


def test_undo_and_redo_restore_the_exact_requests():
    s = Session(workload="mlp", mesh=MESH)
    first = s.request
    second = s.edit(preset="megatron")
    third = s.edit(mesh="data=4,model=2")
    assert s.undo() is second and s.undo() is first
    with pytest.raises(explorer.InputError, match="nothing to undo"):
        s.undo()
    assert s.redo() is second
    fourth = s.edit(preset="dp")            # a new edit drops the redo of `third`
    assert not s.can_redo and s.request is fourth and third not in [e.request for e in
                                                                   s.history]
    assert [e.text() for e in s.history] == ["start", "preset='megatron'", "preset='dp'"]


def test_an_unknown_field_and_a_new_workload():
    s = Session(workload="mlp", mesh=MESH, params=SMALL, specs=HAND_SET)
    with pytest.raises(explorer.InputError, match="'mseh' is not a field of a Request; the "
                                                  "fields are 'mesh', 'workload'"):
        s.edit(mseh="data=8")
    s.edit(workload="matmul")       # the mlp's params and specs mean nothing to matmul
    assert s.request.params is None and s.request.specs is None
    assert s.request.planned.workload.name == "matmul"


def test_the_time_breakdown_adds_up_to_the_wall_time():
    bias = time.time_ns()           # a function no cache has seen: it compiles

    def step(x, w):
        return x @ w + bias % 7

    # The function is traced and lowered when its Request is made, in the Session.
    t0 = time.perf_counter()
    s = Session(fn=step, inputs=(explorer.TensorSpec("x", (64, 128)),
                                 explorer.TensorSpec("w", (128, 32))), mesh=MESH)
    result = s.analyze()
    wall = time.perf_counter() - t0
    spent = result.spent
    assert not spent.cached and spent.lower_s > 0 and spent.compile_s > 0
    parts = (spent.waited_s, spent.worker_start_s, spent.lower_s, spent.compile_s,
             spent.read_s, spent.price_s)
    assert all(p >= 0 for p in parts)
    assert spent.total_s == pytest.approx(sum(parts)) and spent.total_s <= wall
    # Each part is named where it took 5 ms or more (TimeSpent.text): whether the lowering
    # does depends on the machine, so the rule is checked, not the speed.
    for name, seconds in (("lowering", spent.lower_s), ("compile", spent.compile_s)):
        assert (name in spent.text()) == (seconds >= 0.005), (name, seconds, spent.text())
    again = s.analyze()
    assert again.spent.cached and again.spent.compile_s == 0
    s.drawn(s.generation, 0.25)
    assert s.result.spent.draw_s == 0.25 and "drawing 250 ms" in s.result.spent.text()


class FakeCompiles:
    """Stands in for explorer._src.api.analyze.run: a cache that knows `cached` requests, and
    compiles that block until released, counted by request."""

    def __init__(self, cached=()):
        self.cached = set(cached)
        self.compiled: list = []
        self.release = threading.Event()

    def __call__(self, request, *, pool=None, cache_only=False, spent=None, use_cache=True):
        if request.planned.key in self.cached:
            return FakeReport(cached=True)
        if cache_only:
            return None
        self.compiled.append(request)
        self.release.wait(60)
        self.cached.add(request.planned.key)
        return FakeReport(cached=False)


class FakeTiming:
    def __init__(self, cached):
        self.cached, self.lookup_s = cached, 0.001
        self.worker_start_s = self.lower_s = self.compile_s = 0.0


class FakeReport:
    def __init__(self, cached):
        self.timing = FakeTiming(cached)


class Pool:
    def __init__(self, ready):
        self._ready = ready

    def ready(self, key):
        return self._ready


async def until(condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for a state"
        await asyncio.sleep(0.01)


def test_a_burst_during_a_compile_compiles_its_last_edit_only(monkeypatch):
    fake = FakeCompiles()
    monkeypatch.setattr(session_module, "run", fake)
    s = Session(workload="mlp", mesh=MESH, pool=Pool(ready=True), debounce=0.05)
    shown = []

    async def main():
        loop = asyncio.get_running_loop()
        s.schedule(loop, shown.append)                 # a warm worker: compiles at once
        await until(lambda: s.busy)
        for batch in (64, 128, 192, 320):              # a burst while it compiles
            s.edit(params={"batch": batch})
            s.schedule(loop, shown.append)
        fake.release.set()
        await until(lambda: not s.busy and not s.waiting and len(fake.compiled) == 2)
        await until(lambda: len(shown) == 1)
    asyncio.run(main())
    assert [r.planned.params["batch"] for r in fake.compiled] == [256, 320]
    # The first compile's result arrived after newer edits: dropped, never shown.
    assert [r.generation for r in shown] == [s.generation] and s.report is not None
    s.close()


def test_an_edit_undone_within_the_quiet_period_starts_no_worker(monkeypatch):
    first = explorer.Request(workload="mlp", mesh=MESH)
    fake = FakeCompiles(cached=[first.planned.key])
    fake.release.set()
    monkeypatch.setattr(session_module, "run", fake)
    s = Session(first, pool=Pool(ready=False), debounce=0.05)
    shown = []

    async def main():
        loop = asyncio.get_running_loop()
        s.edit(mesh="data=4,model=4")             # 16 devices: a worker that is not up
        assert s.schedule(loop, shown.append) is None and s.waiting
        s.undo()                                   # back within the quiet period: cached
        assert s.schedule(loop, shown.append) is not None
        await asyncio.sleep(session_module.COLD_WORKER_QUIET_S + 0.5)
    asyncio.run(main())
    assert fake.compiled == [] and not s.waiting and len(shown) == 1
    s.close()
