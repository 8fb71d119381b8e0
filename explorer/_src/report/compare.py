"""Compare two results, A and B: which collectives were added or removed, and how the totals
(bytes, memory, predicted time, compile time) moved. Pure: Report in, frozen ReportComparison
out, with a plain-text form that tests compare exactly. The app draws it
(explorer/_src/ui/compare.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from explorer._src.errors import choices
from explorer._src.report.report import Collective, Report
from explorer._src.units import format_bytes, format_seconds

# What identifies "the same collective" in two programs. Not hlo_name: XLA renumbers
# instructions on every compile, so names say nothing across programs.
CollectiveKey = tuple[str, tuple[str, ...], tuple[int, ...], str, str]


def collective_key(c: Collective) -> CollectiveKey:
    return (c.kind, c.axes, c.shape, c.dtype, c.source)


class Unit(StrEnum):
    BYTES = "bytes"
    SECONDS = "seconds"
    COUNT = "count"


class Metric(StrEnum):
    """The numbers a comparison reports, by a stable name; `label` is how they read."""

    COLLECTIVES = "collectives"
    COLLECTIVE_BYTES = "collective_bytes"
    MEMORY = "memory"
    ARGUMENTS = "arguments"
    OUTPUTS = "outputs"
    TEMPORARIES = "temporaries"
    STEP_FULL_OVERLAP = "step_full_overlap"
    STEP_NO_OVERLAP = "step_no_overlap"
    COMMUNICATION = "communication"
    COMPILE = "compile"

    @property
    def label(self) -> str:
        return _METRICS[self][0]

    @property
    def unit(self) -> Unit:
        return _METRICS[self][1]

    @property
    def parent(self) -> Metric | None:
        """The metric this one is a part of (its sub-rows add up to it), or None."""
        return _METRICS[self][2]


_METRICS: dict[Metric, tuple[str, Unit, Metric | None]] = {
    Metric.COLLECTIVES: ("collectives", Unit.COUNT, None),
    Metric.COLLECTIVE_BYTES: ("collective bytes/device", Unit.BYTES, None),
    Metric.MEMORY: ("memory/device", Unit.BYTES, None),
    Metric.ARGUMENTS: ("arguments", Unit.BYTES, Metric.MEMORY),
    Metric.OUTPUTS: ("outputs (not aliased)", Unit.BYTES, Metric.MEMORY),
    Metric.TEMPORARIES: ("temporaries", Unit.BYTES, Metric.MEMORY),
    Metric.STEP_FULL_OVERLAP: ("step (full overlap)", Unit.SECONDS, None),
    Metric.STEP_NO_OVERLAP: ("step (no overlap)", Unit.SECONDS, None),
    Metric.COMMUNICATION: ("communication", Unit.SECONDS, None),
    Metric.COMPILE: ("compile (measured)", Unit.SECONDS, None),
}


@dataclass(frozen=True)
class Delta:
    """One metric measured in A and in B."""

    metric: Metric
    a: float | None
    b: float | None

    @property
    def label(self) -> str:
        return self.metric.label

    @property
    def unit(self) -> Unit:
        return self.metric.unit

    @property
    def depth(self) -> int:
        """0 for a total, 1 for a part of one (drawn indented under it)."""
        return 0 if self.metric.parent is None else 1

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    def format(self, value: float | None, signed: bool = False) -> str:
        if value is None:
            return "n/a"
        sign = "+" if signed and value > 0 else ""
        if self.unit == Unit.BYTES:
            return sign + format_bytes(value)
        if self.unit == Unit.SECONDS:
            return ("-" if value < 0 else sign) + format_seconds(abs(value))
        return f"{sign}{value:g}"

    def delta_text(self) -> str:
        d = self.delta
        if d is None:
            return "n/a"
        if d == 0:
            return "same"
        text = self.format(d, signed=True)
        return f"{text} ({d / self.a:+.0%})" if self.a else text

    def to_dict(self) -> dict:
        parent = self.metric.parent
        return {"metric": str(self.metric), "label": self.label, "unit": str(self.unit),
                "parent": None if parent is None else str(parent), "a": self.a, "b": self.b,
                "delta": self.delta}


@dataclass(frozen=True)
class CollectiveRow:
    """All collectives of one key, counted in A and in B (the multiset view)."""

    kind: str
    axes: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: str
    source: str
    count_a: int
    count_b: int
    bytes_a: int          # summed over A's collectives of this key, per device
    bytes_b: int

    @property
    def status(self) -> str:
        if self.count_a == self.count_b:
            return "unchanged"
        return "added" if self.count_b > self.count_a else "removed"

    def describe(self) -> str:
        axes = ",".join(self.axes) or "?"
        return (f"{self.kind} over {axes} {self.dtype}[{','.join(map(str, self.shape))}]"
                f" from {self.source or 'unknown source'}")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "axes": list(self.axes), "shape": list(self.shape),
                "dtype": self.dtype, "source": self.source, "count_a": self.count_a,
                "count_b": self.count_b, "bytes_a": self.bytes_a, "bytes_b": self.bytes_b,
                "status": self.status}


@dataclass(frozen=True)
class ReportComparison:
    """What changed from result A (pinned) to result B (current)."""

    a_title: str
    b_title: str
    changes: tuple[str, ...]              # the inputs that differ: mesh, specs, params, ...
    rows: tuple[CollectiveRow, ...]        # one per collective key, in A's order then B's
    added: tuple[Collective, ...]          # in B and not matched in A
    removed: tuple[Collective, ...]        # in A and not matched in B
    unchanged: int                         # collectives matched between A and B
    metrics: tuple[Delta, ...]             # bytes, memory, predictions, compile time
    notes: tuple[str, ...] = field(default=())

    @property
    def identical_collectives(self) -> bool:
        return not self.added and not self.removed

    def metric(self, metric: Metric | str) -> Delta:
        """The Delta of `metric` (a Metric or its name, e.g. "arguments")."""
        for m in self.metrics:
            if m.metric == metric:
                return m
        raise KeyError(f"no metric {str(metric)!r} in this comparison; it has "
                       f"{choices(str(m.metric) for m in self.metrics)}")

    def to_dict(self) -> dict:
        return {"a": self.a_title, "b": self.b_title, "changes": list(self.changes),
                "collectives": [r.to_dict() for r in self.rows],
                "added": [c.to_dict() for c in self.added],
                "removed": [c.to_dict() for c in self.removed],
                "unchanged": self.unchanged,
                "metrics": [m.to_dict() for m in self.metrics], "notes": list(self.notes)}

    def render_text(self) -> str:
        lines = [f"A: {self.a_title}", f"B: {self.b_title}"]
        lines.append("changed: " + ("; ".join(self.changes) if self.changes else "nothing"))
        table = [["", "A", "B", "B - A"]]
        for m in self.metrics:
            table.append(["  " * m.depth + m.label, m.format(m.a), m.format(m.b),
                          m.delta_text()])
        widths = [max(len(r[i]) for r in table) for i in range(4)]
        lines += ["  ".join(c.ljust(wd) for c, wd in zip(r, widths, strict=True)).rstrip()
                  for r in table]
        for title, items in (("removed (in A, not in B)", self.removed),
                             ("added (in B, not in A)", self.added)):
            lines.append(f"{title}: {len(items) or 'none'}")
            lines += [f"  {_collective_text(c)}" for c in items]
        lines.append(f"unchanged: {self.unchanged}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _collective_text(c: Collective) -> str:
    parts = f" x{c.parts}" if c.parts > 1 else ""
    return (f"{c.kind}{parts} over {','.join(c.axes) or '?'}  "
            f"{c.dtype}[{','.join(map(str, c.shape))}]  {format_bytes(c.bytes)}  "
            f"{c.source or '(unknown source)'}")


def report_title(r: Report) -> str:
    """One line naming what was compiled: workload, preset, mesh, partitioner, target."""
    wl = r.workload.to_dict() if r.workload else {}
    name = wl.get("name") or "function"
    preset = f" preset {wl['preset']}" if wl.get("preset") else ""
    target = f" on {r.estimate.target}" if r.estimate is not None else ""
    return f"{name}{preset} · {r.mesh.text()} · {r.partitioner}{target}"


def _dict_changes(label: str, a: dict, b: dict) -> list[str]:
    out = []
    for k in list(a) + [k for k in b if k not in a]:
        va, vb = a.get(k), b.get(k)
        if va != vb:
            out.append(f"{label} {k}: {_show(va)} -> {_show(vb)}")
    return out


def _show(v) -> str:
    return "—" if v is None or v == "" else str(v)


def input_changes(a: Report, b: Report) -> list[str]:
    """The inputs that differ between A and B, as short readable phrases."""
    out = []
    wa = a.workload.to_dict() if a.workload else {}
    wb = b.workload.to_dict() if b.workload else {}
    if wa.get("name") != wb.get("name"):
        out.append(f"workload {_show(wa.get('name'))} -> {_show(wb.get('name'))}")
    if a.mesh != b.mesh:
        out.append(f"mesh {a.mesh.text()} -> {b.mesh.text()}")
    if a.partitioner != b.partitioner:
        out.append(f"partitioner {a.partitioner} -> {b.partitioner}")
    ta = a.estimate.target if a.estimate is not None else None
    tb = b.estimate.target if b.estimate is not None else None
    if ta != tb:
        out.append(f"target {_show(ta)} -> {_show(tb)}")
    if wa.get("name") == wb.get("name"):
        # Params and specs only mean the same thing within one workload.
        for key in ("preset", "rules"):
            if wa.get(key) != wb.get(key):
                out.append(f"{key} {_show(wa.get(key))} -> {_show(wb.get(key))}")
        out += _dict_changes("param", wa.get("params") or {}, wb.get("params") or {})
        out += _dict_changes("spec", wa.get("specs") or {}, wb.get("specs") or {})
        out += _dict_changes("activation", wa.get("activations") or {},
                             wb.get("activations") or {})
    return out


def compare(a: Report, b: Report) -> ReportComparison:
    """Compare result A with result B: collectives matched as a multiset, and the totals."""
    by_key: dict[CollectiveKey, list[list[Collective]]] = {}
    for side, report in enumerate((a, b)):
        for c in report.collectives:
            by_key.setdefault(collective_key(c), [[], []])[side].append(c)
    rows, added, removed, unchanged = [], [], [], 0
    for key, (in_a, in_b) in by_key.items():
        kind, axes, shape, dtype, source = key
        rows.append(CollectiveRow(kind, axes, shape, dtype, source, len(in_a), len(in_b),
                                  sum(c.bytes for c in in_a), sum(c.bytes for c in in_b)))
        # Matched in program order; the surplus on either side is what was added or removed.
        unchanged += min(len(in_a), len(in_b))
        removed += in_a[len(in_b):]
        added += in_b[len(in_a):]

    metrics = [
        Delta(Metric.COLLECTIVES, len(a.collectives), len(b.collectives)),
        Delta(Metric.COLLECTIVE_BYTES, sum(c.bytes for c in a.collectives),
              sum(c.bytes for c in b.collectives)),
    ]
    notes = []
    ma, mb = a.memory, b.memory
    if ma is not None and mb is not None:
        # The parts add up to the total: aliased outputs reuse argument buffers.
        metrics += [
            Delta(Metric.MEMORY, ma.total, mb.total),
            Delta(Metric.ARGUMENTS, ma.arguments, mb.arguments),
            Delta(Metric.OUTPUTS, ma.outputs - ma.aliased, mb.outputs - mb.aliased),
            Delta(Metric.TEMPORARIES, ma.temporaries, mb.temporaries),
        ]
    else:
        notes.append("memory: a backend reported no memory analysis")
    ea, eb = a.estimate, b.estimate
    if ea is not None and eb is not None:
        metrics += [
            Delta(Metric.STEP_FULL_OVERLAP, ea.step_lower_seconds, eb.step_lower_seconds),
            Delta(Metric.STEP_NO_OVERLAP, ea.step_upper_seconds, eb.step_upper_seconds),
            Delta(Metric.COMMUNICATION, ea.comm_seconds, eb.comm_seconds),
        ]
        if ea.target != eb.target:
            notes.append(f"predictions are for different targets: {ea.target} and {eb.target}")
    else:
        notes.append("predicted time: pick a target for both A and B")
    metrics.append(Delta(Metric.COMPILE, a.timing.lower_s + a.timing.compile_s,
                         b.timing.lower_s + b.timing.compile_s))
    return ReportComparison(report_title(a), report_title(b), tuple(input_changes(a, b)),
                      tuple(rows), tuple(added), tuple(removed), unchanged, tuple(metrics),
                      tuple(notes))


