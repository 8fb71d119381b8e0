"""The why panel's what-ifs (explorer.ui.why draws them): for the collective picked in the
Collectives tab, the single-input spec changes that might remove it or shrink what its line
moves (explorer.api.what_if), each compiled with the shown result's request and offered only
where a compile confirmed it; applying one makes its specs the user's picks, and the result is
compared with the one before.

The compiles run on a thread of their own, one at a time, so that an edit's compile never
queues behind them (the worker pool still runs one per worker); a search a newer edit or pick
made moot is stopped between compiles and its answer dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Protocol

from explorer.api.what_if import candidates, confirmed_changes, why_untried
from explorer.errors import ExplorerError
from explorer.report.compare import compare
from explorer.report.report import Report
from explorer.ui.background import running_loop
from explorer.ui.callbacks import Mute
from explorer.ui.sources import AppRequest
from explorer.ui.specs import SpecsEditor
from explorer.ui.why import Candidate, WhyPanel


class Picked(Protocol):
    """What the what-ifs read from the app (explorer.ui.app.App)."""

    report: Report | None
    request: AppRequest | None      # the request the report answers
    result_id: int               # the report's id, which the views it draws are stamped with
    selected: int | None         # the collective picked
    generation: int              # the number of the latest edit
    debounce: float | None       # None: compile at once, never in the background


class WhatIfs:
    """The what-ifs of the collective picked in `app`, shown in `why`. `compile(request)` is
    the app's compile of a checked request; `edit()` the app's edit, after an Apply."""

    def __init__(self, app: Picked, why: WhyPanel, specs_editor: SpecsEditor,
                 compile: Callable[[AppRequest], Report | None], edit: Callable[[], None],
                 guard: Callable[[Callable], Callable], muted: Mute):
        self._app, self._why, self._specs_editor = app, why, specs_editor
        self._compile, self._edit, self._guard, self._muted = compile, edit, guard, muted
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="explorer-what-if")
        self._applied: tuple[Candidate, Report] | None = None   # a what-if being applied

    def explain(self, index: int | None) -> None:
        """Collective `index` was picked (None: none): its reason and layouts, and its
        what-ifs searched."""
        if index is None:
            self._why.clear()
            return
        self._why.show(self._app.report, index, self._app.result_id)
        self.search(index)

    def search(self, index: int) -> None:
        """Compile the single-input spec changes that might remove or shrink collective
        `index` (in the background where an event loop runs), and offer those whose report
        moves fewer bytes on its source line: only what a compile confirmed. Each confirmed
        change to a layer's tensor is then compiled once more as a pattern over every layer's
        copy of it, offered where it leaves less of the collective's repeats."""
        app = self._app
        report, request = app.report, app.request
        if request is None:
            return
        shapes = {t.name: t.shape for t in self._specs_editor.tensors.values()}
        found = candidates(report, index, request.specs, shapes, request.mesh)
        untried = why_untried(report.collectives[index], found)
        if untried:
            self._why.offer([], untried)
            return
        generation = app.generation

        def moot() -> bool:          # a newer edit, or another collective picked
            return generation != app.generation or app.selected != index

        def compiled(cand: Candidate) -> Report | None:
            variant = replace(request, specs={**request.specs, **cand.specs},
                              pinned={**request.pinned, **cand.specs})
            try:
                return self._compile(variant)
            except ExplorerError:
                return None                       # the change does not compile: not offered

        def job():
            kept = confirmed_changes(found, report, index, request.specs, shapes, compiled,
                                     stop=moot)
            return None if kept is None else [change for change, _ in kept]

        def done(confirmed):
            if confirmed is None or moot():
                return
            self._why.offer(confirmed, f"tried {len(found)} single-input change"
                                       f"{'s' if len(found) != 1 else ''}; none moves fewer "
                                       "bytes on this line")

        loop = running_loop()
        if loop is None or app.debounce is None:
            done(job())
            return
        self._why.searching(len(found))
        future = loop.run_in_executor(self._executor, job)
        future.add_done_callback(self._guard(lambda f: done(f.result())))

    def apply(self, candidate: Candidate) -> None:
        """Set the candidate's specs as the user's picks (one compile for a pattern's many);
        the next result is compared with the one shown now (the variant was compiled already,
        so it comes from the cache)."""
        self._applied = (candidate, self._app.report)
        with self._muted:
            for tensor, spec in candidate.specs.items():
                self._specs_editor.pick(tensor, spec)
        self._edit()

    def shown(self, request: AppRequest | None, report: Report) -> None:
        """`report`, the answer to `request`, is shown: after an Apply, say what it changed."""
        if self._applied is None:
            return
        candidate, before = self._applied
        self._applied = None
        if request is not None and request.specs.get(candidate.tensor) == candidate.spec:
            self._why.show_applied(candidate, compare(before, report))

    def close(self) -> None:
        self._executor.shutdown(wait=False)
