"""What a page says while it opens the exploration its URL names (a Share link, a bookmark, a
reload), and when that exploration does not compile.

The page (explorer._src.ui.page) shows the opened app at once, its sidebar set to the exploration,
and its first compile runs in the background like any edit's: the app's own status line ticks
(explorer._src.ui.status's CompileTicker). Over the app, one line says what is being opened (the
workload, its mesh, preset and target), which compiler writes the program and under what time
limit, the seconds since the page asked, and what runs now (the status line's words). On an
error it says so in plain words and what to do; the exploration's settings stay loaded below.
"""

from __future__ import annotations

import html
import time

from explorer._src.api.exploration import Exploration
from explorer._src.api.targeting import CompilePlan, compile_plan
from explorer._src.compile.protocol import Backend
from explorer._src.cost.catalog.names import get_target, tpu_slices_of
from explorer._src.errors import ExplorerError
from explorer._src.spec.mesh import parse_mesh


def compiler_words(plan: CompilePlan, target: str | None, devices: int) -> str:
    """Which compiler writes the program, for whom: "XLA's GPU compiler for 8 H100s",
    "libtpu, the TPU compiler, for a v5e 4x4 slice", "XLA's CPU compiler on 8 fake CPU
    devices" (with why, where the target's own compiler is not used)."""
    if plan.gpu is not None:
        g = plan.gpu
        nodes = f" ({g.nodes} nodes of {g.gpus_per_node})" if g.nodes > 1 else ""
        return f"XLA's GPU compiler for {g.devices} {g.chip.upper()}s{nodes} (no GPU needed)"
    if plan.tpu_topology:
        gen, _, shape = plan.tpu_topology.partition(":")
        slices = 1
        if target:
            found = tpu_slices_of(get_target(target))
            slices = found[1] if found is not None else 1
        what = f"{slices} {gen} {shape} slices" if slices > 1 else f"a {gen} {shape} slice"
        return f"libtpu, the TPU compiler, for {what} (no TPU needed)"
    if plan.worker.backend is Backend.FAKE_CPU:
        text = f"XLA's CPU compiler on {devices} fake CPU device{'s' if devices != 1 else ''}"
        if plan.approximate:
            text += f", priced on {target} (approximate: {plan.approximate})"
        return text
    return "this machine's own devices"


def exploration_words(e: Exploration) -> str:
    """The workload with the params the link sets, its mesh, preset and target."""
    params = ", ".join(f"{k}={v}" for k, v in e.params.items())
    parts = [f"{e.workload}" + (f" ({params})" if params else ""), f"mesh {e.mesh}"]
    if e.preset:
        parts.append(f"preset {e.preset}")
    parts.append(f"target {e.target}" if e.target else "no target")
    return " · ".join(parts)


def exploration_compiler(e: Exploration) -> str | None:
    """compiler_words for exploration `e`, or None where its mesh or target is refused (the
    app then says why, next to the widget at fault)."""
    try:
        mesh = parse_mesh(e.mesh)
        return compiler_words(compile_plan(mesh, e.target or None, e.compile_for), e.target,
                              mesh.device_count)
    except ExplorerError:
        return None


class Opening:
    """The line over a page's app while it opens exploration `e`, from the moment the page
    asked (`started`, time.monotonic()); `limit_s`: a compile's time limit."""

    def __init__(self, e: Exploration, limit_s: float | None = None,
                 started: float | None = None):
        self.exploration = e
        self.started = time.monotonic() if started is None else started
        self.compiler = exploration_compiler(e)
        self.limit_s = e.timeout or limit_s

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def progress_html(self, now: str) -> str:
        """Opening, `now` being what runs (the app's status line, in words)."""
        how = (f"Compiling with {html.escape(self.compiler)}" if self.compiler
               else "Checking its settings")
        limit = f" · compile time limit {self.limit_s:g} s" if self.limit_s else ""
        return (f"<div class='explorer-page-opening'>"
                f"<b>Opening the exploration this page's link names:</b> "
                f"{html.escape(exploration_words(self.exploration))}<br>"
                f"{how} · <span class='explorer-opening-elapsed'>{self.elapsed():.1f} s</span> "
                f"since the page asked{limit}"
                + (f"<br><span class='explorer-opening-now'>{html.escape(now)}</span>"
                   if now else "") + "</div>")

    def failed_html(self, error: str) -> str:
        """The exploration did not compile (or its settings are refused): `error`, and what
        the user can do, its settings being loaded in the app below."""
        return (f"<div class='explorer-page-opening explorer-opening-failed'>"
                f"<b>⚠ This link's exploration could not be shown</b> "
                f"({html.escape(exploration_words(self.exploration))}, after "
                f"{self.elapsed():.0f} s): {html.escape(error.rstrip('.'))}.<br>"
                "Its settings are loaded below: change them (a smaller mesh or model, another "
                "target, a larger time limit, or compile on CPU) and the app compiles "
                "again.</div>")
