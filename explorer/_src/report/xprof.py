"""A Report as an XProf run: the compiled module and the predicted step, where `xprof --logdir
DIR` (or TensorBoard's profile plugin) finds them, to open in its memory viewer, graph viewer
and trace viewer with no hardware run.

XProf lists as runs the folders `DIR/plugins/profile/<run>/` that hold a `<host>.xplane.pb`
(an XSpace, explorer/_src/report/xplane.py), and reads each compiled module from
`<module>.hlo_proto.pb` beside it: an xla.HloProto with its buffer assignment, which its memory
viewer draws the memory over the program from and its graph viewer draws the graph from. The
run holds:

- `<module>.hlo_proto.pb`: the optimized module as XLA dumped it (Report.hlo_proto);
- `<host>.xplane.pb`: a metadata plane holding the same module (where the profiler stores the
  modules of a profiled program; its presence is what makes XProf offer the memory and graph
  viewers for the run), and, where the Report has a prediction, a plane with the predicted
  step (Report.trace): one line per row of the trace (compute, communication, ...), each event
  with its HLO instruction and line of code as stats.

The trace is a prediction on the Report's target, not a measurement: the plane says so in its
name.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from explorer._src.errors import InputError
from explorer._src.report.report import Report
from explorer._src.report.trace import StepTrace
from explorer._src.report.xplane import Event, Line, Plane, xspace

# Names XProf's readers give meaning to (tsl's xplane_schema): the plane the profiler keeps
# modules in, the stat holding a module, a custom device plane's prefix, an event's HLO op.
METADATA_PLANE = "/host:metadata"
HLO_PROTO_STAT = "Hlo Proto"
CUSTOM_PLANE_PREFIX = "/device:CUSTOM:"
HOST = "explorer"
PROGRAM_ID = 1
_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_MODULE_NAME = re.compile(r"^HloModule ([^\s,]+)", re.MULTILINE)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class XprofRun:
    """What `write_xprof` wrote.

    Attributes:
        logdir: the folder to give `xprof --logdir`.
        run: the run's name, as XProf lists it.
        folder: the run's folder, `logdir/plugins/profile/run`.
        module: the compiled module's name, as XProf's memory and graph viewers list it; ""
            where the Report carries no module.
        files: the files written, in the run's folder.
        notes: what could not be written, and why.
    """

    logdir: str
    run: str
    folder: str
    module: str
    files: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def command(self) -> str:
        """The command that opens it."""
        return f"xprof --logdir {self.logdir}"


def write_xprof(report: Report, logdir: str | os.PathLike[str], run: str | None = None
                ) -> XprofRun:
    """Write `report`'s compiled module and predicted step as a run of `logdir` that `xprof
    --logdir logdir` (and TensorBoard's profile plugin) lists.

    Args:
        report: a Report; its trace is written where it has one (a target was given).
        logdir: the log folder; created with its parents where missing. Other runs in it are
            kept.
        run: the run's name (letters, digits, ``.``, ``_``, ``-``); by default the time, as the
            profiler names its runs (XProf lists the newest first). Where a run of that name
            exists, ``_2``, ``_3`` ... is added: XProf keeps what it derived from a run's files
            in its folder, and would show an overwritten run's old trace.

    Returns:
        What was written: the run's folder, the module's name and the files.

    Raises:
        InputError: `run` is not such a name, or the folder cannot be written.
    """
    if run is not None and not (isinstance(run, str) and _RUN_NAME.fullmatch(run)):
        raise InputError(f"run {run!r} is not a run name: letters, digits, '.', '_' and '-', "
                         "starting with a letter or digit, at most 100 characters")
    profile = Path(logdir) / "plugins" / "profile"
    try:
        profile.mkdir(parents=True, exist_ok=True)
        folder = _new_folder(profile, run)
    except OSError as e:
        raise InputError(f"XProf log folder {str(logdir)!r} could not be written: "
                         f"{e.strerror or e}") from None

    module = module_name(report)
    notes: list[str] = []
    planes: list[Plane] = []
    files: list[str] = []
    if report.hlo_proto:
        planes.append(Plane(1, METADATA_PLANE, metadata_stats={
            module: {HLO_PROTO_STAT: report.hlo_proto, "program_id": PROGRAM_ID}}))
        files.append(f"{module}.hlo_proto.pb")
    else:
        notes.append("the Report carries no compiled module (XLA wrote no HloProto), so "
                     "XProf's memory and graph viewers have nothing to show")
        module = ""
    if report.trace is not None:
        planes.append(trace_plane(report.trace, module))
    else:
        notes.append("no predicted trace: the Report has none without a target "
                     "(e.g. target='h100-8')")
    files.append(f"{HOST}.xplane.pb")
    try:
        if module:
            (folder / files[0]).write_bytes(report.hlo_proto)
        (folder / files[-1]).write_bytes(xspace(planes, [HOST]))
    except OSError as e:
        raise InputError(f"XProf run {str(folder)!r} could not be written: "
                         f"{e.strerror or e}") from None
    return XprofRun(logdir=str(logdir), run=folder.name, folder=str(folder), module=module,
                    files=tuple(files), notes=tuple(notes))


def module_name(report: Report) -> str:
    """The compiled module's name (``jit_train_step``), made safe as a file name."""
    m = _MODULE_NAME.search(report.optimized_hlo)
    return _UNSAFE.sub("_", m.group(1)) if m else "module"


def trace_plane(trace: StepTrace, module: str) -> Plane:
    """The predicted step as a device plane: one line per row of the trace, each event with
    its HLO instruction (`hlo_op`, and `hlo_module` where the module is written, which XProf
    links to its graph viewer), its line of code and its other details as stats."""
    rows = trace.rows()
    events: dict[str, list[Event]] = {row: [] for row in rows}
    for e in trace.events:
        stats = {"hlo_op": e.hlo, **({"hlo_module": module} if module else {}),
                 **({"source": e.source} if e.source else {}),
                 **{k: v for k, v in e.args.items() if isinstance(v, str | int | float)}}
        events[e.row].append(Event(e.name, round(e.start * 1e12), round(e.duration * 1e12),
                                   stats))
    lines = [Line(i + 1, row, events[row]) for i, row in enumerate(rows)]
    return Plane(2, f"{CUSTOM_PLANE_PREFIX}predicted step on {trace.target}", lines)


def _new_folder(profile: Path, run: str | None) -> Path:
    """A run folder that did not exist: `run`, else the time, with a suffix where taken."""
    base = run or time.strftime("%Y_%m_%d_%H_%M_%S")
    for k in range(1, 1000):
        folder = profile / (base if k == 1 else f"{base}_{k}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise FileExistsError(f"runs {base} to {base}_999 all exist in {profile}")
