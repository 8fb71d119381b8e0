"""Attach a target's predicted times to a Report (the cost model applied after the compile).

Kept apart from the compile so that a cached Report can be re-predicted for another target or
axis mapping without compiling again. The compiled schedule, when the Report has one, makes
the estimate count compute per instruction and loops by their trips, and gives the trace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from explorer._src.compile.tpu import tpu_backend
from explorer._src.cost.catalog.names import get_target, tpu_slices_of
from explorer._src.cost.catalog.types import Target, TargetFamily
from explorer._src.cost.compute import matmul_dtype
from explorer._src.cost.estimate import Estimate, estimate
from explorer._src.cost.mapping import AxisMapping, crosses_nodes, placed_mapping
from explorer._src.cost.memory_fit import MemoryFit, memory_fit
from explorer._src.cost.ranges import step_range
from explorer._src.hlo.schedule import Work, cached_schedule, schedule_work
from explorer._src.report.report import Report
from explorer._src.report.trace import step_trace
from explorer._src.units import format_bytes


def estimate_report(report: Report, target: str | Target, dtype: str | None = None,
                    mapping: AxisMapping | str | Mapping | None = None,
                    work: Work | None = None, peak: bool = False) -> Estimate:
    """explorer._src.cost.estimate.estimate applied to a Report. `dtype` defaults to the program's
    matmul dtype (`matmul_dtype`); `work` and `peak` as estimate() takes them."""
    if dtype is None:
        dtype = matmul_dtype(work, report.tensors)
    memory = report.memory.total if report.memory is not None else None
    return estimate(report.collectives, report.cost.flops, report.cost.bytes_accessed, memory,
                    dtype, report.mesh.names, report.mesh.sizes, target, mapping, work, peak)

def with_target(report: Report, target: str, mapping=None, dtype: str | None = None,
                peak: bool = False) -> Report:
    """`report` with est_seconds (and crosses_nodes) on every collective, the step estimate
    for `target` and the predicted step trace; at the measured achievable rates, or at the
    vendors' peak with `peak`."""
    schedule = cached_schedule(report.optimized_hlo)   # read once per text, not per pricing
    work = schedule_work(schedule) if schedule.steps else None
    placed = placed_mapping(target, report.mesh.names, report.mesh.sizes, mapping)
    est = estimate_report(report, target, dtype=dtype, mapping=placed, work=work, peak=peak)
    target = target if isinstance(target, Target) else get_target(target)
    est = replace(est, memory=compiled_memory_fit(report, target))
    host = target.chip.host_bandwidth
    trace = (step_trace(schedule, report.collectives, est, host)
             if work is not None else None)
    if trace is not None:
        # The step as a range where some instruction's kind was never measured on the chip,
        # or ran slower than the model there; a caution where it could double.
        rng = step_range(trace, schedule, target.chip.name, est.compute)
        est = replace(est, step_trace_seconds=trace.seconds, step_range=rng,
                      cautions=est.cautions + (rng.cautions if rng is not None else ()))
    # Each over the axes it was timed over: its own, or those that hold a split-off part.
    collectives = tuple(replace(c, est_seconds=t.seconds,
                                crosses_nodes=crosses_nodes(placed, t.axes))
                        for c, t in zip(report.collectives, est.collectives, strict=True))
    return replace(report, collectives=collectives, estimate=est, trace=trace)


# The share of a chip's memory live at once above which libtpu's ahead-of-time check is not
# taken as the verdict. Measured (docs/performance.md): a TPU v5e chip's own compile refused a
# program that libtpu had passed ahead of time with 97% of the chip live at once (XLA's
# analysis 107%), while the published MaxText runs that ran on v5e and v5p slices had at most
# 93% live at once (their analyses 94-119%).
LIVE_SHARE_TRUSTED = 0.95


def compiled_memory_fit(report: Report, target: Target) -> MemoryFit | None:
    """Whether `report`'s program fits one chip of `target`, in its compiler's terms: XLA's
    memory analysis (Memory.total) against what the chip gives a program (`memory_fit`),
    except for a program libtpu compiled for the target's own slice (or slices) with room to
    spare. libtpu's memory check refuses a program over the chip's available HBM (the Report's
    memory_verdict), and XLA's analysis, which counts the temporaries' whole allocation and
    not what is live at once, can come out above the capacity for programs that run. So one
    libtpu compiled fits while what is live at once stays under LIVE_SHARE_TRUSTED of the
    chip; above that (or with no timeline to tell), the chip's own compile may still refuse
    it, and the verdict says so and counts it as not fitting."""
    fit = memory_fit(report.memory.total if report.memory is not None else None, target)
    if fit is None or fit.fits or not _compiled_by_libtpu_for(report, target):
        return fit
    timeline = report.memory_timeline
    analysis = (f"XLA's memory analysis counts {format_bytes(fit.bytes)} of the "
                f"{format_bytes(fit.capacity)} {target.chip.memory_kind} a chip gives a "
                f"program ({fit.fraction:.0%}), its temporaries' whole allocation")
    live_share = timeline.peak.bytes / fit.capacity if timeline is not None else None
    if live_share is not None and live_share < LIVE_SHARE_TRUSTED:
        text = (f"fits: libtpu's memory check passed it for a {target.chip.name}. {analysis}; "
                f"{format_bytes(timeline.peak.bytes)} of it live at once ({live_share:.0%})")
        return replace(fit, fits=True, text=text, checked_by="libtpu's memory check")
    live = (f"{format_bytes(timeline.peak.bytes)} of it is live at once ({live_share:.0%})"
            if live_share is not None else "what is live at once is not known")
    text = (f"may not fit: libtpu's memory check passed it ahead of time for a "
            f"{target.chip.name}, but {analysis}, and {live}. A chip's own compile can refuse "
            f"such a program (a TPU v5e refused one with 97% live at once), so it is counted "
            f"as not fitting; shard more or use a smaller batch for margin")
    return replace(fit, fits=False, text=text, checked_by="libtpu's memory check, at the edge")


def _compiled_by_libtpu_for(report: Report, target: Target) -> bool:
    """libtpu compiled the Report's program for the target's own slices (one or several: the
    memory check is per chip either way) and passed it."""
    slices = tpu_slices_of(target) if target.family is TargetFamily.TPU else None
    return (report.ahead_of_time and slices is not None
            and report.backend == tpu_backend(*slices) and report.memory_verdict is None)
