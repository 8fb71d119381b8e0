"""explorer.Session: the state behind an exploration, with no widgets.

A Session holds one current `Request` and the edits that led to it. `edit(**changes)` applies
one edit, checked and planned as a whole (`dataclasses.replace` makes a new Request, checked as
it is made, then `plan()`: an edit refused for a spec that does not fit is refused here, not at
its compile) or refused with the Request's InputError, in which case nothing changes; `undo()`
and `redo()` step through the edits, each restoring the exact earlier Request, its
`extrapolate` field with it (a built-in workload's layers compiled at two small counts and
carried on linearly: explorer/_src/api/extrapolate.py, which `run` honours). Specs set by
hand are the user's: `set_spec` keeps every other hand-set spec, rules and presets only place
the tensors no hand-set spec names (strategy/plan.py: a tensor's own spec wins), and
`untouched_by_rules()` says which tensors a rule would have placed otherwise.

It runs the current request too, in one of two ways:
- `analyze()`: at once, in this thread (a script, a test, a notebook cell);
- `schedule(loop, shown)`: as an app does, on an event loop. The Session numbers its edits
  (generations); a compile runs one at a time on an executor, edits made meanwhile replace one
  another (explorer/_src/api/scheduler.py), an edit whose compile would start a worker process waits
  for the edits to pause first (so a burst, or an edit undone at once, starts none), and a
  result that arrives after a newer edit is dropped, never shown.

Each result says where its time went (`TimeSpent`): waiting for the compile to start, the
worker's start, lowering, compile, reading the compiler's output, pricing on the target, and,
once a view reports it (`drawn`), drawing. A caller that shows a Report rewritten (the app names
a user's function and its specs in it: `describe`) has the session hold it so: the Result's
Report is the one shown.

The what-ifs of a result (`change_search`, `what_if`) are explorer._src.api.what_if's one driver,
each change compiled as a variant of the result's Request (`changed_request`) with this
session's pool: the app's why panel runs them through its session, so the app and the API
compile the same variants under the same cache keys.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from typing import Any

from explorer._src.api.analysis_request import Request
from explorer._src.api.analyze import run
from explorer._src.api.scheduler import CompileScheduler
from explorer._src.api.what_if import (
    ChangeSearch,
    WhatIf,
    WhatIfSearch,
    check_collective,
    compile_changed,
)
from explorer._src.compile.pool import (
    COMPILING,
    MEASURING,
    READING,
    STARTING,
    TRACING,
    Phases,
    WorkerPool,
    default_pool,
    recorded_phases,
)
from explorer._src.errors import InputError, choices
from explorer._src.report.report import Report
from explorer._src.spec.bounds import show
from explorer._src.spec.tensor import format_spec, normalize_spec
from explorer._src.units import format_seconds

# An edit whose compile would start a worker process (jax loading in it: seconds) waits this
# long for the edits to pause, so that a mesh edit undone at once starts no worker. An edit on a
# warm worker starts at once (a single edit pays no delay), whatever the last compile took: the
# schedule depends on the workers' state, never on the machine's speed.
COLD_WORKER_QUIET_S = 1.5
# Fields that name the program: a new workload or function makes the old params and specs
# meaningless, so an edit that changes the program and not them clears them.
_PROGRAM_FIELDS = ("workload", "fn", "inputs")
# Another program's layers are not the ones extrapolated, if it has any.
_PER_PROGRAM = ("params", "specs", "activations", "extrapolate")


@dataclass(frozen=True)
class TimeSpent:
    """Where the wall time of one result went, in seconds.

    `waited_s` is the time from the edit to its compile's start (a compile in flight, or the
    quiet period); `worker_start_s`, `lower_s` and `compile_s` are the worker's own; `read_s`
    covers passing the compiler's output back and reading it into a Report; `price_s` the cost
    model on the target; `draw_s` the views, once they say so. A cached result has only
    `lookup_s`. A compile the app scheduled is told in the phases its status named (the
    pool's `Phases`), with their numbers: `trace_s` the caller's trace, `worker_start_s`, then
    the worker's run of the program in `compile_s` and, for a measured run, `run_s` (the runs
    on the chip, and the worker's reading of its dump), `lower_s` then 0."""

    waited_s: float = 0.0
    trace_s: float = 0.0
    worker_start_s: float = 0.0
    lower_s: float = 0.0
    compile_s: float = 0.0
    run_s: float = 0.0
    read_s: float = 0.0
    price_s: float = 0.0
    draw_s: float = 0.0
    cached: bool = False
    lookup_s: float = 0.0

    @property
    def total_s(self) -> float:
        return (self.waited_s + self.trace_s + self.worker_start_s + self.lower_s
                + self.compile_s + self.run_s + self.read_s + self.price_s + self.draw_s
                + self.lookup_s)

    def text(self) -> str:
        """'4.2 s: waiting 0.3 s, worker start 2.9 s, lowering 0.2 s, compile 0.6 s, …', the
        parts under 5 ms left out."""
        parts = (("waiting", self.waited_s), ("tracing", self.trace_s),
                 ("worker start", self.worker_start_s), ("lowering", self.lower_s),
                 ("compile", self.compile_s), ("running on the chip", self.run_s),
                 ("reading", self.read_s), ("pricing", self.price_s),
                 ("cache lookup", self.lookup_s), ("drawing", self.draw_s))
        shown = [f"{name} {format_seconds(s)}" for name, s in parts if s >= 0.005]
        return f"{format_seconds(self.total_s)}" + (f": {', '.join(shown)}" if shown else "")


@dataclass(frozen=True)
class Result:
    """One answered request: its edit's number, the request, the Report (as the caller shows
    it, where it gave a `describe`) and where the time went."""

    generation: int
    request: Request
    report: Report
    spent: TimeSpent


@dataclass(frozen=True)
class Edit:
    """One accepted edit: the fields it set (`changes`) and the Request it made."""

    changes: Mapping[str, Any]
    request: Request

    def text(self) -> str:
        return ", ".join(f"{k}={show(v)}" for k, v in self.changes.items()) or "start"


_FIELDS = tuple(f.name for f in fields(Request) if f.init)
# How a caller shows a Report (explorer._src.ui.sources.Source.describe, bound to its request).
Describe = Callable[[Report], Report]


@dataclass(frozen=True)
class _Submitted:
    """An edit waiting for its compile: its number, its Request and how its Report is shown."""

    generation: int
    request: Request
    describe: Describe | None = None


class Session:
    """The current Request, the edits that made it, and its results.

    Args:
        request: the first Request; or give its fields as keywords
            (``Session(workload="mlp", mesh="data=2,model=4")``).
        pool: the WorkerPool that compiles; None for this process's shared one.
        debounce: seconds of quiet the scheduler waits for after a compile before it starts
            the latest edit (`schedule`).

    Example:
        >>> import explorer
        >>> s = explorer.Session(workload="mlp", mesh="data=2,model=4", preset="megatron")
        >>> _ = s.set_spec("w2", "None,model")
        >>> s.untouched_by_rules()
        {'w2': 'model,None'}
        >>> s.edit(mesh="data=3,model=4")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        ...
        explorer.DivisibilityError: ...
        >>> s.request.specs, s.undo().specs
        ({'w2': 'None,model'}, None)
    """

    def __init__(self, request: Request | None = None, *, pool: WorkerPool | None = None,
                 debounce: float = 0.3, executor: Executor | None = None, **fields: Any):
        if request is None:
            request = Request(**fields)
        elif fields:
            request = replace(request, **fields)
        if not isinstance(request, Request):
            raise InputError(f"{show(request)} is not an explorer.Request")
        _ready(request)
        self.pool = pool
        self._edits: list[Edit] = [Edit({}, request)]
        self._at = 0                                # the current edit's index
        self.generation = 0
        self.result: Result | None = None
        # Its thread starts with the first compile; one compile at a time.
        self._own_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(1, thread_name_prefix="explorer-compile")
        self._scheduler: CompileScheduler[_Submitted] = CompileScheduler(
            self._compile, self._started, self._finished, self._executor, debounce=debounce)
        self._submitted_at: dict[int, float] = {}
        self._started_at: dict[int, float] = {}
        self._shown: Callable[[Result | Exception], None] = lambda r: None
        self._on_started: Callable[[int], None] = lambda generation: None
        self.compiling: int | None = None           # the edit whose compile is in flight

    # -- state -----------------------------------------------------------------------------

    @property
    def request(self) -> Request:
        return self._edits[self._at].request

    @property
    def report(self) -> Report | None:
        """The current request's Report, once it is answered; None before."""
        r = self.result
        return r.report if r is not None and r.generation == self.generation else None

    @property
    def history(self) -> tuple[Edit, ...]:
        """The edits up to the current one, the first request first (its `changes` empty)."""
        return tuple(self._edits[:self._at + 1])

    @property
    def can_undo(self) -> bool:
        return self._at > 0

    @property
    def can_redo(self) -> bool:
        return self._at < len(self._edits) - 1

    @property
    def undone(self) -> Request | None:
        """The Request `redo()` would restore (the edit undone last); None when there is none.
        An app sets its widgets to it before it redoes, so that a refusal changes nothing."""
        return self._edits[self._at + 1].request if self.can_redo else None

    @property
    def undone_edit(self) -> Edit | None:
        """The edit `redo()` would restore; None when there is none."""
        return self._edits[self._at + 1] if self.can_redo else None

    def edit(self, **changes: Any) -> Request:
        """Apply one edit: the Request with `changes` (its field names), validated and planned
        as a whole. Raises the Request's InputError, and changes nothing, when it does not hold;
        an edit that changes nothing is not recorded. Changing the program (`workload`, `fn`,
        `inputs`) clears the params, specs, activations and `extrapolate` the edit does not
        set."""
        changes = dict(changes)
        unknown = [k for k in changes if k not in _FIELDS]
        if unknown:
            raise InputError(f"{show(unknown[0])} is not a field of a Request; the fields are "
                             f"{choices(_FIELDS)}")
        if any(k in changes and changes[k] is not getattr(self.request, k)
               for k in _PROGRAM_FIELDS):
            changes = {**{k: None for k in _PER_PROGRAM}, **changes}
        new = replace(self.request, **changes) if changes else self.request   # raises
        _ready(new)                                 # likewise; nothing is changed then
        if same_request(new, self.request):
            return self.request
        self._record(changes, new)
        return new

    def set_request(self, request: Request) -> Request:
        """Make `request` (made and checked by the caller, as the app does from its widgets)
        the current one, recorded as an edit of the fields that differ; one equal to the
        current request changes nothing."""
        if not isinstance(request, Request):
            raise InputError(f"{show(request)} is not an explorer.Request")
        _ready(request)                 # raises; nothing is changed then
        if same_request(request, self.request):
            return self.request
        changes = {k: getattr(request, k) for k in _FIELDS
                   if not _same_value(getattr(request, k), getattr(self.request, k))}
        self._record(changes, request)
        return request

    def _record(self, changes: Mapping[str, Any], request: Request) -> None:
        del self._edits[self._at + 1:]
        self._edits.append(Edit(dict(changes), request))
        self._at += 1
        self.generation += 1

    def set_spec(self, tensor: str, spec: Any) -> Request:
        """Set one tensor's spec by hand (None: give it back to the rules), keeping every other
        hand-set spec; one edit."""
        specs = dict(self.request.specs or {})
        if spec is None:
            specs.pop(tensor, None)
        else:
            specs[tensor] = spec
        return self.edit(specs=specs or None)

    def undo(self) -> Request:
        """Back to the Request before the last edit (the same object); refused at the first."""
        if not self.can_undo:
            raise InputError("nothing to undo: this is the session's first request")
        self._at -= 1
        self.generation += 1
        return self.request

    def redo(self) -> Request:
        """The edit undone last, again; refused when no edit was undone."""
        if not self.can_redo:
            raise InputError("nothing to redo: no edit was undone since the last edit")
        self._at += 1
        self.generation += 1
        return self.request

    def untouched_by_rules(self) -> dict[str, str]:
        """The tensors a hand-set spec keeps from the rules: tensor -> the spec the preset and
        rules would give it, where that differs from the hand-set one. Empty for a function's
        request (its specs are its own) or when no rule reaches a hand-set tensor."""
        r, p = self.request, self.request.planned
        if p.workload is None or not r.specs:
            return {}
        by_rules = p.layout.by_rules if p.layout is not None else {}
        out = {}
        for name, spec in r.specs.items():
            ruled = by_rules.get(name)
            if ruled is not None and _layout(ruled) != _layout(normalize_spec(spec)):
                out[name] = format_spec(ruled)
        return out

    # -- running it ------------------------------------------------------------------------

    def analyze(self, *, cache_only: bool = False,
                describe: Describe | None = None) -> Result | None:
        """The current request's Result, compiled in this thread (or from a cache); None only
        with `cache_only`, on a miss. `describe(report)`: the Report as the caller shows it,
        which the Result holds."""
        return self._answer(self.generation, self.request, cache_only=cache_only,
                            describe=describe)

    def change_search(self, collective: int, result: Result | None = None) -> ChangeSearch:
        """The what-if search of collective `collective` of `result`'s Report, its changes read
        and none compiled yet (explorer._src.api.what_if.ChangeSearch: `run()` compiles them). Each
        is compiled as a variant of `result`'s request (`changed_request`) with this session's
        pool, or comes from the cache. `result`: the current request's by default, answered
        here where it is not yet; an app passes the one it shows.

        Raises:
            InputError: `collective` is out of range, or the result has no collectives.
        """
        if result is None:
            result = self.result if self.report is not None else self.analyze()
            assert result is not None                   # None only for a cache_only miss
        return ChangeSearch.of(result.report, check_collective(result.report, collective),
                               compile_changed(result.request, pool=self.pool))

    def what_if(self, collective: int) -> list[WhatIf]:
        """The spec changes a compile confirmed would remove collective `collective` of the
        current request's result, or make its line move fewer bytes, best first
        (explorer.what_if's, each compiled as a variant of the current request with this
        session's worker pool: `change_search`). The current result is answered first where
        it is not yet (from the cache where it was compiled).

        Raises:
            InputError: `collective` is out of range, or the result has no collectives.
        """
        search = self.change_search(collective).run()
        assert search is not None                   # stopped only by a `stop` it was not given
        return list(WhatIfSearch.of(search).confirmed)

    def _answer(self, generation: int, request: Request, cache_only: bool = False,
                waited: float = 0.0, describe: Describe | None = None) -> Result | None:
        spent: dict[str, float] = {}
        t0 = time.perf_counter()
        # A request with `extrapolate` set is answered from its small compiles (`run`).
        report = run(request, pool=self.pool, cache_only=cache_only, spent=spent)
        if report is None:
            return None
        wall = time.perf_counter() - t0
        timing = report.timing
        if timing.cached:
            times = TimeSpent(waited_s=waited, cached=True, lookup_s=timing.lookup_s,
                              price_s=spent.get("price", 0.0))
        elif (phases := recorded_phases()) is not None:
            times = _phased(phases, request, report, waited, spent.get("price", 0.0))
        else:
            inside = timing.worker_start_s + timing.lower_s + timing.compile_s
            price = spent.get("price", 0.0)
            times = TimeSpent(waited_s=waited, worker_start_s=timing.worker_start_s,
                              lower_s=timing.lower_s, compile_s=timing.compile_s,
                              read_s=max(0.0, wall - inside - price), price_s=price)
        if describe is not None:
            report = describe(report)
        result = Result(generation, request, report, times)
        if generation == self.generation:
            self.result = result
        return result

    def drawn(self, generation: int, seconds: float) -> Result | None:
        """A view drew edit `generation`'s result in `seconds`: counted in its TimeSpent. The
        Result with it counted (the session's result from now on); None where the session's
        result is not edit `generation`'s."""
        r = self.result
        if r is None or r.generation != generation:
            return None
        self.result = replace(r, spent=replace(r.spent, draw_s=r.spent.draw_s + seconds))
        return self.result

    def quiet_before(self, request: Request) -> float:
        """How long an edit waits for the edits to pause before its compile starts: at once
        where the worker it needs is up, COLD_WORKER_QUIET_S where it would start one."""
        worker = request.planned.compile_plan.worker
        if not (self.pool or default_pool()).ready(worker):
            return max(self._scheduler.debounce, COLD_WORKER_QUIET_S)
        return 0.0

    @property
    def busy(self) -> bool:
        """A compile is in flight."""
        return self._scheduler.busy

    @property
    def phases(self) -> Phases | None:
        """The phases of the compile in flight (or the last one), as they start: what the
        app's status says while it runs (explorer/_src/compile/pool.py's `Phases`)."""
        return self._scheduler.phases

    @property
    def waiting(self) -> bool:
        """An edit waits to compile: behind the compile in flight, or for its quiet period."""
        return self._scheduler.waiting

    def schedule(self, loop: asyncio.AbstractEventLoop,
                 shown: Callable[[Result | Exception], None],
                 started: Callable[[int], None] | None = None,
                 describe: Describe | None = None) -> Result | None:
        """Answer the current request as an app does: from the cache at once (returned, and
        given to `shown`), else compiled when the scheduler's rules allow, then given to
        `shown`, unless a newer edit was made meanwhile. A compile's error is given to `shown`
        too, never raised in the executor's thread. `started(generation)` is called as the
        compile starts; `describe(report)` is the Report as the caller shows it, which the
        Result holds."""
        self._shown = shown
        self._on_started = started or (lambda generation: None)
        generation, request = self.generation, self.request
        hit = self._answer(generation, request, cache_only=True, describe=describe)
        if hit is not None:
            self._scheduler.discard()
            shown(hit)
            return hit
        self._submitted_at[generation] = time.perf_counter()
        self._scheduler.submit(generation, _Submitted(generation, request, describe),
                               loop, self.quiet_before(request))
        return None

    def discard(self) -> None:
        """Forget the edit waiting to compile (a newer one needs none)."""
        self._scheduler.discard()

    def _started(self, generation: int) -> None:
        self.compiling = generation
        self._started_at[generation] = time.perf_counter()
        self._on_started(generation)

    def _compile(self, edit: _Submitted) -> Result | Exception:
        generation = edit.generation
        submitted = self._submitted_at.pop(generation, None)
        started = self._started_at.pop(generation, time.perf_counter())
        waited = started - submitted if submitted is not None else 0.0
        try:
            result = self._answer(generation, edit.request, waited=waited,
                                  describe=edit.describe)
        except Exception as e:       # shown by `shown`, not lost in the executor's thread
            return e
        assert result is not None
        return result

    def _finished(self, generation: int, edit: _Submitted, result: Result | Exception) -> None:
        self.compiling = None
        if generation != self.generation:
            return          # a newer edit was made: its result (or error) is shown instead
        self._shown(result)

    def close(self) -> None:
        self._scheduler.discard()
        if self._own_executor:
            self._executor.shutdown(wait=False, cancel_futures=True)


def _phased(phases: Phases, request: Request, report: Report, waited: float,
            price: float) -> TimeSpent:
    """The time spent on a compile whose phases were recorded, told in those phases with the
    numbers the status said: a measured run's worker phase split into its compile (the
    worker's parse and XLA's compile, as the worker timed them) and the rest, the runs."""
    running = phases.seconds(MEASURING)
    compiled = phases.seconds(MEASURING if running else COMPILING)
    run_s = 0.0
    if running:
        t = report.timing
        parse_s = max(0.0, t.lower_s - request.planned.lowered.lower_s)
        run_s = max(0.0, running - parse_s - t.compile_s)
    return TimeSpent(waited_s=waited, trace_s=phases.seconds(TRACING),
                     worker_start_s=phases.seconds(STARTING), compile_s=compiled - run_s,
                     run_s=run_s, read_s=max(0.0, phases.seconds(READING) - price),
                     price_s=price)


def _ready(request: Request) -> None:
    """`request` planned, and its cache key made (a function's is its lowered text, so it is
    traced here): what refuses it (a spec that does not fit, a function jax refuses) refuses the
    edit, as an app shows it, rather than the cache lookup that follows."""
    _ = request.plan().key


def same_request(a: Request, b: Request) -> bool:
    """Whether two Requests ask the same; inputs that cannot say (arrays) count as changed.
    `Session.set_request` records no edit for one the same as the current request, and an app
    that restores its widgets to an earlier request checks with it that they make exactly that
    request again."""
    return _same_value(a, b)


def _same_value(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):         # arrays compare elementwise
        return False


def _layout(spec) -> tuple:
    """A spec without its trailing replicated dimensions: () and (None, None) are one layout."""
    spec = tuple(spec)
    while spec and spec[-1] is None:
        spec = spec[:-1]
    return spec
