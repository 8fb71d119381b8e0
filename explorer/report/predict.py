"""Attach a target's predicted times to a Report (the cost model applied after the compile).

Kept apart from the compile so that a cached Report can be re-predicted for another target or
axis mapping without compiling again. The compiled schedule, when the Report has one, makes
the estimate count compute per instruction and loops by their trips, and gives the trace.
"""

from __future__ import annotations

from dataclasses import replace

from explorer.cost.hardware import Target, get_target
from explorer.cost.model import estimate_report
from explorer.hlo.schedule import cached_schedule, schedule_work
from explorer.report.report import Report
from explorer.report.trace import step_trace


def with_target(report: Report, target: str, mapping=None, dtype: str | None = None,
                peak: bool = False) -> Report:
    """`report` with est_seconds on every collective, the step estimate for `target` and the
    predicted step trace; at the measured achievable rates, or at the vendors' peak with
    `peak`."""
    schedule = cached_schedule(report.optimized_hlo)   # read once per text, not per pricing
    work = schedule_work(schedule) if schedule.steps else None
    est = estimate_report(report, target, dtype=dtype, mapping=mapping, work=work, peak=peak)
    host = (target if isinstance(target, Target) else get_target(target)).chip.host_bandwidth
    trace = (step_trace(schedule, report.collectives, est, host)
             if work is not None else None)
    if trace is not None:
        est = replace(est, step_trace_seconds=trace.seconds)
    collectives = tuple(replace(c, est_seconds=t.seconds)
                        for c, t in zip(report.collectives, est.collectives, strict=True))
    return replace(report, collectives=collectives, estimate=est, trace=trace)
