"""Plain-text forms of a Report: what the CLI prints and what tests can compare exactly."""

from __future__ import annotations

from collections.abc import Mapping

from explorer._src.cost.catalog.gpu import NODE_AXIS
from explorer._src.cost.catalog.names import get_target
from explorer._src.report.op_comparison import compare_ops, comparison_lines
from explorer._src.report.provenance import compiled_with, provenance
from explorer._src.report.report import Report, TensorRole
from explorer._src.spec.tensor import format_spec
from explorer._src.units import format_bytes, format_seconds


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


CODE_WIDTH = 48     # the code column shows this much of each line


def _code(text: str) -> str:
    if not text:
        return "-"
    return text if len(text) <= CODE_WIDTH else text[:CODE_WIDTH - 1] + "…"


def collectives_table(report: Report) -> list[str]:
    if not report.collectives:
        return ["(no collectives: every device computes its part alone)"]
    rows = [["#", "kind", "axes", "group", "shape", "bytes/device", "runs", "why", "source",
             "code"]]
    number = {c.hlo_name: i for i, c in enumerate(report.collectives, 1)}
    for i, c in enumerate(report.collectives, 1):
        rows.append([str(i), c.kind + (" (async)" if c.is_async else "")
                     + (f" ×{c.parts}" if c.parts > 1 else "") + dcn_mark(c, number)
                     + node_mark(c),
                     ",".join(c.axes) or "-", str(c.group_size),
                     collective_shape(c), format_bytes(c.bytes),
                     f"x{c.runs}" if c.runs != 1 else "1",
                     c.why.reason if c.why else "-", c.source or "-", _code(c.source_text)])
    return _table(rows)


TUPLE_SHAPES_SHOWN = 3      # a combined collective's row writes its tuple up to this many parts


def collective_shape(c) -> str:
    """What a collective's row moves, as its bytes count it: its result's shape, or for a
    combined one (several joined into one tuple-shaped op) the tuple, `(float32[64,64],
    float32[64])`, or past TUPLE_SHAPES_SHOWN parts its count and first shape; the app's part rows
    list every one. Never the first part alone beside the parts' total bytes."""
    def array(shape) -> str:
        return f"{c.dtype}[{','.join(map(str, shape))}]"

    if c.parts <= 1:
        return array(c.shape)
    if len(c.part_shapes) != c.parts:
        return f"({c.parts} arrays)"
    if c.parts <= TUPLE_SHAPES_SHOWN:
        return "(" + ", ".join(array(s) for s in c.part_shapes) + ")"
    return f"({c.parts} arrays: {array(c.part_shapes[0])}, …)"


def dcn_mark(c, number: Mapping[str, int]) -> str:
    """A DCN leg of a multi-slice program: " [DCN]", with the number of the in-slice
    collective it completes (" [DCN, with #2]"; `number`: hlo_name -> its number in the
    table)."""
    if not c.dcn_key:
        return ""
    return f" [DCN, with #{number[c.leg_of]}]" if c.leg_of in number else " [DCN]"


def node_mark(c) -> str:
    """A collective whose device groups span several nodes of the Report's GPU target:
    " [across nodes]"."""
    return " [across nodes]" if c.crosses_nodes else ""


def marks_legend(report: Report) -> list[str]:
    """What the marks of the collectives table mean, a sentence for each mark it shows."""
    out = []
    if any(c.dcn_key for c in report.collectives):
        out.append("[DCN]: the part of a collective that crosses TPU slices, over the "
                   "data-center network; 'with #k': the collective inside each slice that it "
                   "completes.")
    if any(c.crosses_nodes for c in report.collectives) and report.estimate is not None:
        link = get_target(report.estimate.target).axis(NODE_AXIS).link.kind
        out.append(f"[across nodes]: its device groups span more than one node of "
                   f"{report.estimate.target}, so it runs over {link}, the network between "
                   "nodes, not NVLink alone.")
    return out


def why_lines(report: Report) -> list[str]:
    """One paragraph per collective: its number, reason code and the sentence that explains it;
    collectives with the same reason and text are listed once, with all their numbers."""
    seen: dict[tuple[str, str], list[int]] = {}
    for i, c in enumerate(report.collectives, 1):
        if c.why is not None:
            seen.setdefault((c.why.reason, c.why.text), []).append(i)
    return [f"#{','.join(map(str, numbers))} [{reason}] {text}"
            for (reason, text), numbers in seen.items()]


def memory_by_kind(report: Report) -> str | None:
    m = report.memory
    if m is None:
        return None
    parts = [f"{kind} {'not located' if n is None else format_bytes(n)}"
             for kind, n in m.by_kind.items()]
    return "memory by kind per device: " + ", ".join(parts)


def memory_lines(report: Report) -> list[str]:
    """Memory per device: XLA's analysis, or the verdict of a program that does not fit; then
    the largest buffers live at the peak."""
    m, v = report.memory, report.memory_verdict
    if v is not None:
        if v.required is not None and v.available is not None:
            lines = [f"memory per device: DOES NOT FIT: {format_bytes(v.required)} of {v.memory} "
                     f"needed ({v.what}), {format_bytes(v.available)} available"]
        else:
            lines = ["memory per device: DOES NOT FIT"]
        lines.append("  the compiler: " + v.message.strip().replace("\n", "\n  "))
    elif m:
        lines = [f"memory per device: arguments {format_bytes(m.arguments)}, outputs "
                 f"{format_bytes(m.outputs)}, temporaries {format_bytes(m.temporaries)}, "
                 f"total {format_bytes(m.total)}", memory_by_kind(report)]
        if m.host_total:
            lines.append(f"host memory per device (offloaded): arguments "
                         f"{format_bytes(m.host_arguments)}, outputs {format_bytes(m.host_outputs)}"
                         f", temporaries {format_bytes(m.host_temporaries)}, total "
                         f"{format_bytes(m.host_total)}")
    else:
        lines = ["memory per device: not reported by this backend"]
    if report.top_buffers:
        lines.append("largest buffers live at the memory peak, per device:")
        rows = [["bytes", "buffer", "value", "made by", "source", "code"]]
        for b in report.top_buffers:
            rows.append([format_bytes(b.bytes),
                         b.name + (f" (= {', '.join(b.aliases)})" if b.aliases else ""),
                         f"{b.dtype}[{','.join(map(str, b.shape))}]" if b.dtype else "-",
                         b.instruction or "-", b.source or "-", _code(b.source_text)])
        lines += ["  " + row for row in _table(rows)]
    return lines


def tensors_table(report: Report, kinds=(TensorRole.INPUT, TensorRole.OUTPUT)) -> list[str]:
    shown = [t for t in report.tensors if t.kind in kinds]
    # Under Explicit axes, the sharding in each value's type beside the compiler's layout.
    typed = any(t.typed_spec is not None for t in shown)
    rows = [["tensor", "kind", "shape", "spec", *(["in type"] if typed else []), "shard",
             "replicas", "bytes/device"]]
    for t in shown:
        in_type = ([format_spec(t.typed_spec) if t.typed_spec is not None else "-"]
                   if typed else [])
        rows.append([t.name, t.kind, f"{t.dtype}[{','.join(map(str, t.shape))}]",
                     t.spec_text, *in_type, f"[{','.join(map(str, t.shard_shape))}]",
                     str(t.replicas), format_bytes(t.bytes_per_device)])
    return _table(rows)


# Instructions the summary lists among those that widen the step's range.
RANGE_LISTED = 8


def range_lines(report: Report) -> list[str]:
    """The instructions that widen the predicted step's range (Estimate.step_range), each at its
    line of code: its kind, whether the chip measured it, its prediction and what it may take."""
    rng = report.estimate.step_range if report.estimate is not None else None
    if rng is None or not rng.parts:
        return []
    rows = [["instruction", "kind", "its time", "predicted", "may take", "source"]]
    for p in rng.parts[:RANGE_LISTED]:
        rows.append([p.hlo, p.kind, "measured slower" if p.measured else "unmeasured",
                     format_seconds(p.predicted_s),
                     f"{format_seconds(p.low_s)} .. {format_seconds(p.high_s)}", p.source or "-"])
    more = len(rng.parts) - RANGE_LISTED
    return (["", f"What widens the step's range on a {rng.chip}: kinds never measured there, or "
                 "measured slower than the model"]
            + _table(rows) + ([f"... and {more} more"] if more > 0 else []))


def summary(report: Report) -> str:
    c, t = report.cost, report.timing
    n_inter = sum(1 for x in report.tensors if x.kind == TensorRole.INTERMEDIATE)
    versions = compiled_with(report)
    lines = [f"mesh {report.mesh.text()} ({report.mesh.device_count} devices, "
             f"{report.mesh.types_text()} axes), partitioner {report.partitioner}, backend "
             f"{report.backend}" + (f" ({versions})" if versions else ""),
             provenance(report), "", "Tensors"]
    lines += tensors_table(report)
    lines += [f"(+ {n_inter} intermediates; --json lists them)", "", "Collectives"]
    lines += collectives_table(report) + marks_legend(report)
    if report.collectives:
        lines += ["", "Why each collective exists"] + why_lines(report)
    looped = sum(1 for x in report.collectives if x.runs != 1)
    lines += ["", f"collective bytes per device per step: {format_bytes(c.collective_bytes)}"
              + (f" ({looped} collective(s) run once per loop trip, counted each time)"
                 if looped else "")]
    lines += memory_lines(report)
    flops = "n/a" if c.flops is None else f"{c.flops:.3g}"
    lines.append(f"cost per device: {flops} flops, {format_bytes(c.bytes_accessed)} accessed")
    lines += [f"note: {n}" for n in (*c.notes, *report.notes)]
    if report.warnings:
        lines += ["", f"The compiler warned ({len(report.warnings)})"]
        lines += [f"warning: {w}" for w in report.warnings]
    lines.append(f"lower {format_seconds(t.lower_s)}, compile {format_seconds(t.compile_s)}"
                 + (" (cached)" if t.cached else ""))
    if t.measured_s is not None:
        lines.append(f"measured: {format_seconds(t.measured_s)} per step on {t.measured_on} "
                     "(median of runs after warm-up; this machine, not a prediction)")
    elif t.measure_note:
        lines.append(t.measure_note)
    if c.xla_optimal_seconds is not None:
        lines.append(f"XLA's own estimate for {report.backend}: "
                     f"{c.xla_optimal_seconds * 1e6:.1f} us per step (optimal_seconds)")
    if report.estimate is not None:
        lines += ["", "Predicted (analytical model, not a measurement)", report.estimate.text()]
        lines += range_lines(report)
    compared = compare_ops(report)
    if compared is not None:
        lines += ["", "Predicted against measured, op by op (largest gaps first)"]
        lines += comparison_lines(compared)
    return "\n".join(lines)
