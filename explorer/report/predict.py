"""Attach a target's predicted times to a Report (the cost model applied after the compile).

Kept apart from the compile so that a cached Report can be re-predicted for another target or
axis mapping without compiling again.
"""

from __future__ import annotations

from dataclasses import replace

from explorer.cost.model import estimate_report
from explorer.report.report import Report


def with_target(report: Report, target: str, mapping=None, dtype: str | None = None) -> Report:
    """`report` with est_seconds on every collective and the step estimate for `target`."""
    est = estimate_report(report, target, dtype=dtype, mapping=mapping)
    collectives = tuple(replace(c, est_seconds=t.seconds)
                        for c, t in zip(report.collectives, est.collectives, strict=True))
    return replace(report, collectives=collectives, estimate=est)
