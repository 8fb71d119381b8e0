"""A run of a compiled program on real devices, timed on the device by jax's profiler.

`jax.profiler.trace(dir)` writes the run as an XSpace (`plugins/profile/<run>/<host>.xplane.pb`);
`jax.profiler.ProfileData` reads it back. On a TPU the plane `/device:TPU:0` has a line "XLA
Modules" (one event per call of the program) and a line "XLA Ops" (one event per instruction
run, named as the optimized HLO names it: `%fusion.11 = f32[...] fusion(...)`), each with its
duration on the device; the line "Async XLA Ops" holds each asynchronous instruction (a copy-start,
a collective's start) from its start to its done. Those instruction names are the ones the
predicted step trace carries, so the two can be set side by side op by op
(explorer/_src/report/op_comparison.py), and one call laid out in time beside the predicted step.

A CPU run writes no device plane: there is nothing but the wall clock to read there.
"""

from __future__ import annotations

import glob
import os
import shutil
import statistics
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

MODULE_LINE = "XLA Modules"
OPS_LINE = "XLA Ops"
ASYNC_LINE = "Async XLA Ops"
# Events of the call laid out in time, at most: a longer call is still summed per instruction.
MAX_CALL_EVENTS = 100_000


@dataclass(frozen=True)
class MeasuredEvent:
    """One instruction's run on the device, in the profiled call a timeline shows.

    Attributes:
        instruction: its name in the optimized HLO (``fusion.11``).
        start: seconds from the start of the call on the device.
        duration: seconds.
        in_flight: an asynchronous instruction, from its start to its done (the profile's
            "Async XLA Ops" line); its own issue is a separate, short event.
    """

    instruction: str
    start: float
    duration: float
    in_flight: bool = False


@dataclass(frozen=True)
class DeviceProfile:
    """Device times of `calls` profiled calls of one program, on its first device.

    Attributes:
        calls: how many calls were profiled.
        module_seconds: the median of the calls' runs on the device.
        op_seconds: instruction name -> its seconds per call (all its runs in a call summed:
            an instruction in a loop body runs once per trip).
        op_runs: instruction name -> its runs per call.
        device: the profile plane read, e.g. "/device:TPU:0".
        call_events: the instructions of one call in time: the call whose run is the median
            (the one `module_seconds` names), at most MAX_CALL_EVENTS of them.
    """

    calls: int
    module_seconds: float | None
    op_seconds: Mapping[str, float] = field(default_factory=dict)
    op_runs: Mapping[str, float] = field(default_factory=dict)
    device: str = ""
    call_events: tuple[MeasuredEvent, ...] = ()


def instruction_name(event_name: str) -> str:
    """`%fusion.11 = f32[..] fusion(..)` (or `fusion.11`) -> `fusion.11`."""
    return event_name.split(" = ", 1)[0].strip().lstrip("%")


def read_device_profile(path: str, calls: int) -> DeviceProfile | None:
    """The first device plane of the xplane.pb at `path`, as per-call times of `calls` calls;
    None when the profile holds no device plane with module runs (a CPU run)."""
    from jax.profiler import ProfileData

    data = ProfileData.from_file(path)
    for plane in data.planes:
        if not plane.name.startswith("/device:"):
            continue
        lines = {line.name: list(line.events) for line in plane.lines}
        modules = [e.duration_ns * 1e-9 for e in lines.get(MODULE_LINE, [])]
        if not modules:
            continue
        seconds: dict[str, float] = {}
        runs: dict[str, float] = {}
        for e in lines.get(OPS_LINE, []):
            name = instruction_name(e.name)
            seconds[name] = seconds.get(name, 0.0) + e.duration_ns * 1e-9 / calls
            runs[name] = runs.get(name, 0.0) + 1 / calls
        return DeviceProfile(calls, statistics.median(modules), seconds, runs, plane.name,
                             _median_call(lines.get(MODULE_LINE, []), lines))
    return None


def _median_call(calls: list, lines: dict[str, list]) -> tuple[MeasuredEvent, ...]:
    """The events of the call whose run is the median (the lower middle of an even count),
    each placed from that call's start."""
    call = sorted(calls, key=lambda e: e.duration_ns)[(len(calls) - 1) // 2]
    start, end = call.start_ns, call.start_ns + call.duration_ns
    events = [MeasuredEvent(instruction_name(e.name), (e.start_ns - start) * 1e-9,
                            e.duration_ns * 1e-9, line == ASYNC_LINE)
              for line in (OPS_LINE, ASYNC_LINE) for e in lines.get(line, [])
              if start <= e.start_ns <= end]
    events.sort(key=lambda e: e.start)
    return tuple(events[:MAX_CALL_EVENTS])


def profile_calls(call: Callable[[], object], calls: int = 3, keep_to: str | None = None
                  ) -> DeviceProfile | None:
    """Run `call` (a compiled program on its inputs, warmed up) `calls` times under jax's
    profiler and read the device's times; None where the run has no device plane.
    `keep_to`: a path the raw profile (xplane.pb) is copied to."""
    import jax

    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0       # only the device's lines are read
    options.host_tracer_level = 1
    with tempfile.TemporaryDirectory() as folder:
        with jax.profiler.trace(folder, profiler_options=options):
            for _ in range(calls):
                jax.block_until_ready(call())
        paths = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
        if paths and keep_to:
            shutil.copyfile(paths[0], keep_to)
        return read_device_profile(paths[0], calls) if paths else None
