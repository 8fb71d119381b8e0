"""The Suggest tab's largest-batch search: explorer.largest_batch on the sidebar's training
workload, mesh and target, on a thread, with every probe's memory verdict from the target's
compiler in a table."""

from __future__ import annotations

import html
from collections.abc import Callable

import ipywidgets as w

from explorer._src.errors import ExplorerError, InputError
from explorer._src.layout_search.capacity import (
    CapacityResult,
    batch_step,
    largest_batch,
    policies_for,
)
from explorer._src.ui.background import BackgroundTab
from explorer._src.ui.sources import AppRequest, Source, WorkloadSource
from explorer._src.units import format_bytes, format_seconds
from explorer._src.workloads.models import OFFLOADS, REMATS


def capacity_html(result: CapacityResult) -> str:
    """Each policy's largest batch, the best one, and every compile the answer rests on with
    the compiler's memory verdict."""
    rows = []
    for p in result.policies:
        at = next((q for q in p.probes if q.batch == p.largest_batch), None)
        best = result.best is not None and p is result.best
        rows.append(
            f"<tr class='{'explorer-current' if best else ''}'>"
            f"<td>{html.escape(p.label)}{' ★ best' if best else ''}</td>"
            f"<td class='explorer-num'>{p.largest_batch or 'none fits'}</td>"
            f"<td class='explorer-num'>"
            f"{format_bytes(at.memory_bytes) if at and at.memory_bytes else '-'}</td>"
            f"<td class='explorer-num'>"
            f"{format_seconds(p.step_seconds) if p.step_seconds else '-'}</td>"
            f"<td class='explorer-num'>"
            f"{f'{p.tokens_per_second:,.0f}' if p.tokens_per_second else '-'}</td>"
            f"<td class='explorer-num'>{len(p.probes)}</td></tr>")
    probes = "".join(
        f"<li>{html.escape(p.label)}, batch {q.batch}: "
        f"<span class='{'explorer-fits' if q.fits else 'explorer-oom'}'>"
        f"{'fits' if q.fits else 'does not fit'}</span> — {html.escape(q.verdict)}</li>"
        for p in result.policies for q in sorted(p.probes, key=lambda q: q.batch))
    head = (f"<p>Largest global batch of <code>{html.escape(result.workload)}</code> on "
            f"{html.escape(result.mesh)} that fits <b>{html.escape(result.target)}</b>"
            + (f", {html.escape(result.compiled_by)}" if result.compiled_by else "")
            + f". Batches are multiples of {result.batch_step}, the devices the batch is split "
            "over; each row's batch fits and the next multiple does not, both compiled.</p>")
    table = ("<table class='explorer-table'><tr><th>policy</th><th>largest batch</th>"
             "<th>memory per device</th><th>step</th><th>tokens/s</th><th>compiles</th></tr>"
             + "".join(rows) + "</table>")
    notes = "".join(f"<p class='explorer-note'>{html.escape(n)}</p>" for n in result.notes)
    errors = "".join(f"<p class='explorer-note'>{html.escape(p.label)}: {html.escape(p.error)}"
                     "</p>" for p in result.policies if p.error)
    return (head + table + errors + notes + _strategy_html(result)
            + f"<details><summary>every compile and its memory verdict</summary><ul>{probes}"
            "</ul></details>")


def _strategy_html(result: CapacityResult, top: int = 5) -> str:
    """The fastest layouts at the best batch, each with the compiler's memory verdict."""
    ranking = result.strategy
    if ranking is None or result.best is None:
        return ""
    rows = "".join(
        f"<tr><td>{i}</td><td><code>{html.escape(c.label)}</code></td>"
        f"<td class='explorer-num'>{format_seconds(c.seconds) if c.seconds else '-'}</td>"
        f"<td class='explorer-num'>{format_bytes(c.memory_bytes) if c.memory_bytes else '-'}"
        f"</td><td class='{'explorer-fits' if c.fits else 'explorer-oom'}'>"
        f"{'fits' if c.fits else 'does not fit' if c.fits is False else str(c.status)}</td></tr>"
        for i, c in enumerate(ranking.candidates[:top], 1))
    return (f"<p>The fastest layouts at batch {result.best.largest_batch} with "
            f"{html.escape(result.best.label)} (explorer.search, each compiled for the target):"
            "</p><table class='explorer-table'><tr><th>#</th><th>layout</th><th>step</th>"
            f"<th>memory per device</th><th>memory verdict</th></tr>{rows}</table>")


class CapacityView(BackgroundTab):
    """Which remat and offload policies to try, Start, a progress line and the result.

    `snapshot()` gives the app's source and checked request now (or raises an ExplorerError);
    `pool` is the app's compile pool."""

    what = "the largest-batch search"

    def __init__(self, snapshot: Callable[[], tuple[Source, AppRequest]], pool=None):
        super().__init__()
        self._snapshot, self.pool = snapshot, pool
        self.result: CapacityResult | None = None
        self.remat_w = {r: w.Checkbox(value=True, description=f"remat={r}", indent=False,
                                      layout=w.Layout(width="150px")) for r in REMATS}
        self.offload_w = {o: w.Checkbox(value=o == "none", description=f"offload={o}",
                                        indent=False, layout=w.Layout(width="190px"))
                          for o in OFFLOADS}
        self.strategy_w = w.Checkbox(value=True, indent=False,
                                     description="then rank the layouts at the best batch")
        self.start_w = w.Button(description="Find the largest batch", icon="search",
                                layout=w.Layout(width="200px"))
        self.status = w.HTML()
        self.table = w.HTML()
        self.start_w.on_click(self._guard(lambda _: self.start()))
        intro = w.HTML(
            "<b>Largest batch that fits</b><div class='explorer-note'>For a training "
            "workload: the largest global batch each activation policy fits on the sidebar's "
            "target, every batch tried compiled for that target and judged by its compiler's "
            "memory figure, then the layouts ranked at the best one (explorer.largest_batch). "
            "Offloading activations pairs with remat=minimal.</div>")
        self.widget = w.VBox([intro, w.HBox(list(self.remat_w.values())),
                              w.HBox(list(self.offload_w.values())), self.strategy_w,
                              w.HBox([self.start_w, self.status]), self.message, self.table])
        self.widget.add_class("explorer-capacity")

    def start(self) -> None:
        """Search the sidebar's workload as it is now, unless a search runs."""
        if self.running:
            self._say("a largest-batch search is running; wait for it")
            return
        self._say("")
        try:
            source, request = self._snapshot()
        except ExplorerError as e:
            raise InputError(f"fix the sidebar first: {e}") from None
        if not isinstance(source, WorkloadSource):
            raise InputError("the largest-batch search grows a built-in training workload's "
                             "batch (transformer_train); pick one in the sidebar")
        if request.target is None:
            raise InputError("the largest-batch search fits batches into a target's memory: "
                             "pick a target in the sidebar")
        remats = [r for r, box in self.remat_w.items() if box.value]
        offloads = [o for o, box in self.offload_w.items() if box.value]
        params = {k: v for k, v in request.params.items() if k not in ("batch",)}
        kwargs = dict(params=params, preset=request.preset, rules=request.rules,
                      remats=remats, offloads=offloads, compile_for=request.compile_for,
                      strategy=self.strategy_w.value, pool=self.pool)
        args = (source.workload_w.value, request.mesh, request.target)
        # Checked here, before the thread: a bad choice is said at once.
        policies_for(remats, offloads)
        batch_step(args[0], params, request.mesh, request.preset, request.rules)
        self.start_w.disabled = True
        self.status.value = "starting…"
        self._start_thread(self._run, (args, kwargs), "explorer-capacity")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the running search ends (scripts and tests); True when it has."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.running

    def _run(self, args, kwargs) -> None:
        def progress(line: str) -> None:
            self._post(lambda: setattr(self.status, "value", html.escape(line) + "…"))

        try:
            outcome = largest_batch(*args, progress=progress, **kwargs)
        except Exception as e:              # shown by _finish
            outcome = e
        self._post(lambda: self._finish(outcome))

    def _finish(self, outcome) -> None:
        self.start_w.disabled = False
        if isinstance(outcome, BaseException):
            self.status.value = "failed"
            self._say_failure(outcome)
            return
        self.result = outcome
        self.status.value = "done"
        self.table.value = capacity_html(outcome)
