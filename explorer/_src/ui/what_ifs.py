"""The why panel's what-ifs (explorer._src.ui.why draws them): for the collective picked in the
Collectives tab, the single-input spec changes that might remove it or shrink what its line
moves, each compiled as a variant of the shown result's request and offered only where a compile
confirmed it; applying one makes its specs the user's picks, and the result is compared with the
one before.

The search is the app's session's (`Session.change_search`: explorer._src.api.what_if's one driver,
which explorer.what_if and `Session.what_if` run too), so its variants are the API's, under the
same cache keys, and the Apply of one is answered from the cache. What is the view's is here:
the compiles run on a thread of their own, one at a time, so that an edit's compile never queues
behind them (the worker pool still runs one per worker); a search a newer edit or pick made moot
is stopped between compiles and its answer dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from explorer._src.api.session import Result, Session
from explorer._src.api.what_if import ChangeSearch, SpecChange
from explorer._src.report.compare import compare
from explorer._src.report.report import Report
from explorer._src.ui.background import running_loop
from explorer._src.ui.callbacks import Mute
from explorer._src.ui.sources import AppRequest
from explorer._src.ui.specs import SpecsEditor
from explorer._src.ui.why import WhyPanel


class Picked(Protocol):
    """What the what-ifs read from the app (explorer._src.ui.app.App)."""

    session: Session | None
    result: Result | None        # the session's result shown
    report: Report | None        # its Report
    result_id: int               # the report's id, which the views it draws are stamped with
    selected: int | None         # the collective picked
    generation: int              # the number of the latest edit
    debounce: float | None       # None: compile at once, never in the background


class WhatIfs:
    """The what-ifs of the collective picked in `app`, shown in `why`, searched by the app's
    session; `edit()` is the app's edit, after an Apply."""

    def __init__(self, app: Picked, why: WhyPanel, specs_editor: SpecsEditor,
                 edit: Callable[[], None], guard: Callable[[Callable], Callable], muted: Mute):
        self._app, self._why, self._specs_editor = app, why, specs_editor
        self._edit, self._guard, self._muted = edit, guard, muted
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="explorer-what-if")
        self._applied: tuple[SpecChange, Report] | None = None   # a what-if being applied

    def explain(self, index: int | None) -> None:
        """Collective `index` was picked (None: none): its reason and layouts, and its
        what-ifs searched."""
        if index is None:
            self._why.clear()
            return
        self._why.show(self._app.report, index, self._app.result_id)
        self.search(index)

    def search(self, index: int) -> None:
        """Run the session's what-if search of collective `index` of the result shown (in the
        background where an event loop runs), and offer the changes whose report moves fewer
        bytes on its source line: only what a compile confirmed. Each confirmed change to a
        layer's tensor is compiled once more as a pattern over every layer's copy of it,
        offered where it leaves less of the collective's repeats."""
        app = self._app
        if app.session is None or app.result is None:
            return
        search = app.session.change_search(index, app.result)
        if search.untried:
            self._why.offer([], search.untried)
            return
        generation = app.generation

        def moot() -> bool:          # a newer edit, or another collective picked
            return generation != app.generation or app.selected != index

        def done(searched: ChangeSearch | None) -> None:
            if searched is None or moot():
                return
            found = len(searched.found)
            self._why.offer([change for change, _ in searched.confirmed],
                            f"tried {found} single-input change{'s' if found != 1 else ''}; "
                            "none moves fewer bytes on this line")

        loop = running_loop()
        if loop is None or app.debounce is None:
            done(search.run(stop=moot))
            return
        self._why.searching(len(search.found))
        future = loop.run_in_executor(self._executor, lambda: search.run(stop=moot))
        future.add_done_callback(self._guard(lambda f: done(f.result())))

    def apply(self, candidate: SpecChange) -> None:
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
