"""The app's status bar, pinned at the top of the main pane: what the app is doing now
(checking an edit, compiling it and for how long, waiting for Apply), how long the result
shown took and why, which compiler wrote it, and what XLA warned about it.

A wait is said as it happens: a compile of a large model or a worker's start takes seconds to
minutes, and a status that read "0.36 s" after a 23 s wait would be a lie about the app. A
running compile is said phase by phase (`phase_text`: tracing, starting the worker, compiling
or, measured, compiling and running on the chip, reading the result), each with its own time,
the phase the time limit covers against the limit, with a warning past NEAR_LIMIT of it: its
count, its warning and the pool's stop all read the one start the pool marked
(explorer/_src/compile/pool.py, `Phases`). A compile stopped at its limit is offered a larger
one (`LimitOffer`), and a built-in workload with more layers than the two small compiles of an
extrapolation is offered that too (`extrapolable`; explorer.analyze's extrapolate), whose result
the status says is extrapolated.

The bar sits above the tabs, so that the status and the error cue are in the first screen at
1400×900 whatever the sidebar's length (a real model's spec rows push its foot to 1,500 px).
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable

import ipywidgets as w

from explorer._src.api.analysis_request import Request
from explorer._src.api.extrapolate import layer_param
from explorer._src.api.request import DEFAULT_FROM, MAX_TIMEOUT
from explorer._src.api.session import Session
from explorer._src.compile.pool import (
    DONE,
    STARTING,
    PhaseNow,
    WorkerPool,
    default_pool,
)
from explorer._src.errors import InputError
from explorer._src.report.provenance import compiled_with, provenance
from explorer._src.report.report import Report
from explorer._src.ui.background import running_loop

TICK_S = 0.2        # how often a compile's running time is said again
NEAR_LIMIT = 0.75   # the part of its time limit after which a running compile is warned of

# What the app says while an edit is checked and waits for its compile.
WORKING = "◌ working…"          # before any work: a large model's checks take seconds
WAITING_FOR_EARLIER = ("◌ waiting for the compile in flight (an earlier edit); this edit "
                       "compiles next, with any made meanwhile")


def live_off_text(greyed: bool) -> str:
    """An edit checked with live updates off: it waits for Apply (`greyed`: a result shown)."""
    return ("⏸ live updates off: the edits are checked, not compiled; press Apply edits"
            + ("; showing the last result, greyed" if greyed else ""))


def cold_worker_text(quiet_s: float) -> str:
    """An edit whose compile would start a worker, which waits `quiet_s` for a later edit."""
    return (f"◌ starting a compile worker in {quiet_s:.1f} s, unless the edit changes again "
            "meanwhile")


def error_text(at_fault: list[str], force: bool, greyed: bool) -> str:
    """An edit in error: the sidebar inputs showing one are named (in a long sidebar its red
    message may be below the fold), unless the message is under the status (`force`)."""
    return ((f"⚠ error: fix the highlighted input ({', '.join(at_fault)})"
             if at_fault and not force else "⚠ error: see the message below")
            + ("; showing the last good result, greyed" if greyed else ""))


def running_text(activity: str, took_s: float, limit_s: float | None) -> str:
    """A compile running for `took_s` of its `limit_s`: near the limit, what happens at it and
    what to do."""
    if limit_s is None:
        return f"◌ {activity}… {took_s:.1f} s"
    text = f"{activity}… {took_s:.1f} s of its {limit_s:g} s time limit"
    if took_s < NEAR_LIMIT * limit_s:
        return "◌ " + text
    return (f"⚠ {text}: it is stopped at {limit_s:g} s. To let a compile this long finish, "
            "raise the time limit in the sidebar (the edit then compiles again with it)")


def phase_text(now: PhaseNow, starting: str = STARTING) -> str:
    """A compile in phase `now.name` for `now.took_s`, the phases before it (most recent
    first, those under 0.05 s left out) in brackets: "compiling 41.2 s of its 90 s time limit
    (worker started in 2.5 s, traced in 0.8 s)", with running_text's warning near the limit.
    `starting`: what the pool says while a worker starts ("starting a compile worker for 8
    devices")."""
    before = ", ".join(f"{DONE.get(name, name)} {seconds:.1f} s"
                       for name, seconds in reversed(now.done) if seconds >= 0.05)
    tail = f" ({before})" if before else ""
    if now.limit_s is None:
        name = starting if now.name == STARTING else now.name
        return f"◌ {name}… {now.took_s:.1f} s{tail}"
    text = f"{now.name} {now.took_s:.1f} s of its {now.limit_s:g} s time limit{tail}"
    if now.took_s < NEAR_LIMIT * now.limit_s:
        return "◌ " + text
    return (f"⚠ {text}: it is stopped at {now.limit_s:g} s. To let a compile this long "
            "finish, raise the time limit in the sidebar (the edit then compiles again with "
            "it)")


_STOPPED = re.compile(r"compile took longer than the ([0-9.e+-]+) s limit")


def stopped_at_limit(message: str) -> float | None:
    """The limit (seconds) of a compile stopped at it, from the error's `message`; None for
    any other error."""
    found = _STOPPED.search(message)
    try:
        return float(found.group(1)) if found else None
    except ValueError:
        return None


def larger_limit(limit_s: float, default_s: float) -> float:
    """The limit offered after a compile was stopped at `limit_s`: double it, at least the
    target's default, at most the API's bound."""
    return float(min(MAX_TIMEOUT, max(2 * limit_s, default_s)))


def extrapolable(request: Request) -> int | None:
    """The layer count of `request` where extrapolating it from DEFAULT_FROM's two small
    compiles would stand in for its full compile: a built-in workload that counts its layers,
    more of them than the small compiles, not measured (a run would time the small ones) and
    not extrapolated already (its `extrapolate`); else None. A function's layers cannot be
    counted: never offered."""
    if request.extrapolate or request.measure or request.workload is None:
        return None
    try:
        _, layers = layer_param(request)
    except InputError:          # a workload without a layer count
        return None
    return layers if layers > DEFAULT_FROM[1] else None


def extrapolated_text(report: Report) -> str:
    """The status's words for an extrapolated Report ("" for a compiled one): which layer
    counts were compiled and which the numbers stand for."""
    x = report.extrapolated
    if x is None:
        return ""
    a, b = x.from_layers
    return f"extrapolated from {x.param}={a} and {b} to {x.layers}"


def status_text(report: Report, waited_s: float, unavailable: str | None = None) -> str:
    """The status line for `report`, shown `waited_s` after the edit it answers: how long the
    user waited and what took the time (the compile, the compile worker's start, an earlier
    edit's compile or the debounce), so that a 23 s wait never reads as "0.36 s"."""
    t = report.timing
    if t.cached:
        took = (f"cached: answered in {t.lookup_s:.2f} s (compiled earlier in "
                f"{t.lower_s + t.compile_s:.2f} s)")
    else:
        took = f"compiled in {t.lower_s + t.compile_s:.2f} s"
        if t.worker_start_s >= 0.05:
            took += f" after {t.worker_start_s:.1f} s starting the compile worker"
        accounted = t.lower_s + t.compile_s + t.worker_start_s
        if waited_s - accounted >= 1.0:
            # The rest: the pause before a compile starts, an earlier edit's compile in
            # flight, reading the result.
            took += f"; {waited_s:.1f} s since the edit"
    collectives = len(report.collectives)
    if report.extrapolated is not None:
        # Said first: every number below it is carried on from smaller compiles.
        took = f"{extrapolated_text(report)}, not compiled at it ({took})"
    text = (f"● {took} · {report.mesh.device_count} devices · {collectives} collective"
            f"{'s' if collectives != 1 else ''}")
    if unavailable:
        text += " · no prediction (see the target)"
    return text


def compiled_for_html(report: Report) -> str:
    """What compiled the program shown, one line under the status, and with which jax and
    compiler (in grey after it); an approximate one (a CPU compile priced on a GPU or TPU) is
    marked so."""
    text = html.escape(provenance(report))
    mark = "⚠ " if report.approximation else ""
    versions = compiled_with(report)
    tail = (f' <span style="color:#666">({html.escape(versions)})</span>' if versions else "")
    return f"<div>{mark}{text}{tail}</div>"


def warnings_html(report: Report) -> str:
    """What XLA printed and what the explorer could not read, as a badge with its count; the
    list opens on a click and shows on hover."""
    items = [("XLA", str(w)) for w in report.warnings] + [("note", text)
                                                          for text in report.notes]
    if not items:
        return ""
    hover = html.escape("\n".join(f"{who}: {text}" for who, text in items), quote=True)
    n_warn, n_note = len(report.warnings), len(report.notes)
    label = " · ".join(part for part in (
        f"{n_warn} warning{'s' if n_warn != 1 else ''}" if n_warn else "",
        f"{n_note} note{'s' if n_note != 1 else ''}" if n_note else "") if part)
    rows = "".join(f"<li><b>{who}</b>: {html.escape(text)}</li>" for who, text in items)
    return (f"<details class='explorer-warnings'><summary title='{hover}'>"
            f"<span class='explorer-badge'>⚠ {label}</span></summary><ul>{rows}</ul></details>")


class StatusLine:
    """The status line with its warnings badge beside it, and the line under them that says
    which compiler wrote the program shown."""

    def __init__(self) -> None:
        self.status = w.HTML()
        self.status.add_class("explorer-status")
        # Which compiler wrote the program shown, and whether its numbers are the target's own.
        self.compiled_for = w.HTML()
        self.compiled_for.add_class("explorer-note")
        self.warnings = w.HTML()
        self.warnings.add_class("explorer-warnings-box")
        self.widgets = [w.HBox([self.status, self.warnings]), self.compiled_for]

    def bar(self, *below: w.Widget) -> w.VBox:
        """The status, its warnings and compiler, then `below` (the error no input owns and
        the offers): the bar pinned at the top of the main pane."""
        box = w.VBox([*self.widgets, *below])
        box.add_class("explorer-status-bar")
        return box

    def say(self, text: str, result: int) -> None:
        """`text` as the status, stamped with the id of the result on screen."""
        self.status.value = f"<span data-result='{result}'>{html.escape(text)}</span>"

    def describe(self, report: Report) -> None:
        """The compiler and the warnings of `report`, the result now shown."""
        self.compiled_for.value = compiled_for_html(report)
        self.warnings.value = warnings_html(report)


class CompileTicker:
    """Says, every TICK_S while an edit's compile runs, what runs and for how long: the latest
    edit's compile (or its compile worker's start), or an earlier edit's that the latest waits
    on. `say` sets the status; `latest()` is the number of the app's latest edit."""

    def __init__(self, say: Callable[[str], None], latest: Callable[[], int],
                 pool: WorkerPool | None) -> None:
        self._say, self._latest, self._pool = say, latest, pool
        self.limit_s: float | None = None        # the time limit of the compile in flight
        self.compiling: int | None = None       # the edit whose compile is in flight

    def start(self, generation: int, session: Session) -> None:
        """Edit `generation`'s compile started in `session`: tick until it ends (`stop`)."""
        self.compiling = generation
        loop, started = running_loop(), time.perf_counter()
        pool = self._pool or default_pool()
        limit = getattr(session.request, "timeout", None)
        self.limit_s = limit = pool.timeout if limit is None else limit
        # The phases the scheduler records for this compile (None: a session that records
        # none, said as before, by its whole time).
        phases = session.phases

        def tick():
            if self.compiling != generation or not session.busy:
                return
            took = time.perf_counter() - started
            if generation == self._latest():
                if phases is not None:
                    now = phases.now()
                    # "starting a compile worker for 8 devices" while a worker's jax loads.
                    activity = pool.activity()
                    self._say(phase_text(now, activity if activity.startswith("starting")
                                         else STARTING))
                else:
                    self._say(running_text(pool.activity(), took, limit))
            elif session.waiting:
                self._say(f"◌ compiling an earlier edit… {took:.1f} s so far; the latest "
                          "compiles next (one compile for the edits made meanwhile)")
            if loop is not None:
                loop.call_later(TICK_S, tick)

        tick()

    def stop(self) -> None:
        self.compiling = None


class LimitOffer:
    """The buttons under an error of a compile stopped at its time limit (`widget`): one that
    raises the limit (`button`, `offer(seconds)`; `offer(None)` hides both), and beside it,
    for a workload whose layers `extrapolable` counts, one that estimates it from 3 and 4
    layers instead (`extrapolate_button`, `offer(seconds, layers)`). `on_raise` gets the
    seconds when clicked; `on_extrapolate` is called when the other is."""

    def __init__(self, on_raise: Callable[[float], None],
                 on_extrapolate: Callable[[], None] | None = None):
        self.seconds: float | None = None
        self.layers: int | None = None
        self.button = w.Button(layout=w.Layout(width="auto", align_self="flex-start",
                                               flex="0 0 auto", display="none"),
                               button_style="warning", icon="clock-o",
                               tooltip="set the sidebar's time limit to this and compile again")
        self.button.add_class("explorer-limit-offer")
        self.button.on_click(lambda _: self.seconds and on_raise(self.seconds))
        a, b = DEFAULT_FROM
        self.extrapolate_button = w.Button(
            description=f"estimate from {a} and {b} layers (extrapolated)",
            layout=w.Layout(width="auto", align_self="flex-start", flex="0 0 auto",
                            display="none"),
            button_style="info", icon="line-chart")
        self.extrapolate_button.add_class("explorer-extrapolate-offer")
        if on_extrapolate is not None:
            self.extrapolate_button.on_click(lambda _: self.layers and on_extrapolate())
        self.widget = w.HBox([self.button, self.extrapolate_button],
                             layout=w.Layout(flex_flow="row wrap", display="none"))

    def offer(self, seconds: float | None, layers: int | None = None) -> None:
        """Offer a limit of `seconds` and, where `layers` is given (the model's layer count,
        more than the small compiles'), its extrapolation; `offer(None)` hides both."""
        self.seconds = seconds
        self.layers = layers if seconds is not None else None
        self.extrapolate_button.layout.display = None if self.layers else "none"
        if self.layers:
            a, b = DEFAULT_FROM
            self.extrapolate_button.tooltip = (
                f"compile the model at {a} and {b} layers (seconds) and carry its collectives, "
                f"memory and times on linearly to its {self.layers} layers: an estimate, "
                "labelled extrapolated in every tab")
        if seconds is None:
            self.button.layout.display = self.widget.layout.display = "none"
            return
        self.button.description = f"raise the time limit to {seconds:g} s and compile again"
        self.button.layout.display = self.widget.layout.display = None
