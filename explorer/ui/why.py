"""The "why" panel of the Collectives tab: for the collective the user picked, the line of code
that caused it, the reason the partitioner inserted it (explorer.report.why), the operand's
layout before and after as two small heatmaps, and what-ifs: single-input spec changes that a
compile confirmed would move fewer bytes on that line, and the same change made across layers
(every input of that role, `layers.*.w_up`, in one compile) where the collective repeats on
them, each applied with one click.

The candidate changes are generated here from the reason's evidence (which inputs it names,
over which mesh axes): stop splitting an input over the collective's axes, replicate it, lay it
out as the consumer needs, or split another of its dimensions over those axes. The app compiles
them (explorer.ui.app) and offers only those whose report moves fewer collective bytes for the
same source line. A confirmed change to a tensor whose name has a layer index is then tried as a
pattern (`across_layers`): a model's layers repeat the collective on their own copies of the
tensor, which a change to one copy leaves in place; the pattern is offered where its compile
leaves fewer bytes in those repeats than the one-input change did.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

import ipywidgets as w

from explorer.errors import SpecError
from explorer.hlo.sharding import tiling_from_hlo
from explorer.report.compare import Comparison
from explorer.report.dataflow import layer_pattern, matching
from explorer.report.report import Collective, Report, TensorInfo, TensorRole
from explorer.report.summary import human_bytes
from explorer.report.why import Reason
from explorer.spec.layout import Tiling, shard_shape, spec_from_tiling, tiling_from_spec
from explorer.spec.mesh import MeshSpec
from explorer.spec.tensor import (
    Entry,
    TensorSpec,
    check_spec,
    entry_axes,
    format_spec,
    parse_spec,
)
from explorer.ui.compare import comparison_html
from explorer.ui.figure import FigureSlot
from explorer.ui.grids import Grid, tensor_grid
from explorer.ui.views import grid_figure, short_op

Spec = tuple[Entry, ...]

MAX_CANDIDATES = 6          # compiles per picked collective; each is a full compile
MAX_PATTERNS = 2            # then confirmed changes widened across layers, a compile each
_INSTRUCTION = re.compile(r"%(?P<name>[\w.\-]+)\s*=\s*(?P<dtype>\w+)\[(?P<dims>[\d,]*)\]")
_PARAMETER = re.compile(r"\bparameter\((\d+)\)")
_NAMED_INPUT = re.compile(r"input `([^`]+)`")


_CELL_SOURCE = re.compile(r"In \[(\d+)\], line (\d+)")


def source_line(c: Collective) -> str:
    """The collective's line of code: its source_text, or for a notebook cell ("In [3], line
    2"), the line from this kernel's input history, which the report cannot read (the cell
    is no file)."""
    if c.source_text:
        return c.source_text
    m = _CELL_SOURCE.fullmatch(c.source)
    if not m:
        return ""
    try:
        from IPython import get_ipython
    except ImportError:
        return ""
    shell = get_ipython()
    cells = shell.user_ns.get("_ih") if shell is not None else None
    n, k = int(m.group(1)), int(m.group(2))
    if not cells or n >= len(cells):
        return ""
    lines = cells[n].splitlines()
    return lines[k - 1].strip() if 0 < k <= len(lines) else ""


def line_bytes(report: Report, source: str) -> int:
    """Bytes per device that the collectives of one source line move."""
    return sum(c.bytes for c in report.collectives if c.source == source)


# ------------------------------------------------------------------------ the evidence


# The evidence's operand prefixes, as the captions say them.
OPERAND_WORDS = {"lhs": "left operand", "rhs": "right operand"}
_OP_NAME = re.compile(r"\[([^\]]*)\]\s*$")


def _parts(text: str) -> list[tuple[str, str]]:
    """`lhs A; rhs B` as [("lhs", "A"), ("rhs", "B")]; plain text as [("", text)]."""
    out = []
    for piece in (p.strip() for p in text.split("; ")) if text else []:
        m = re.match(r"(lhs|rhs|operand \d+)\s+(.*)", piece, re.S)
        out.append((m.group(1), m.group(2)) if m else ("", piece))
    return out


def report_inputs(report: Report) -> list[str]:
    """The program's inputs in parameter order."""
    return [t.name for t in report.tensors if t.kind == TensorRole.INPUT]


def _instruction(text: str, inputs: Sequence[str],
                 report: Report | None = None) -> tuple[str, str, tuple[int, ...]] | None:
    """(what it is, dtype, shape) of an instruction's text, in the user's words: `input w2`
    for a parameter, else the jax op that made it and its line (`tanh (model.py:12)`, from the
    report's intermediates or the instruction's op_name), its HLO name only where neither is
    known."""
    m = _INSTRUCTION.search(text)
    if not m:
        return None
    shape = tuple(int(d) for d in m.group("dims").split(",") if d)
    p = _PARAMETER.search(text)
    if p and int(p.group(1)) < len(inputs):
        return f"input {inputs[int(p.group(1))]}", m.group("dtype"), shape
    name = m.group("name")
    info = next((t for t in report.tensors if t.name == name), None) if report else None
    named = _OP_NAME.search(text)
    op = short_op(info.op_name if info is not None and info.op_name else
                  named.group(1) if named else "")
    source = info.source.rsplit("/", 1)[-1] if info is not None and info.source else ""
    what = f"{op or '%' + name}" + (f" ({source})" if source else "")
    return what, m.group("dtype"), shape


def involved_inputs(report: Report, c: Collective) -> list[str]:
    """The inputs the reason names (in its text, or as parameters in its evidence)."""
    if c.why is None:
        return []
    inputs = report_inputs(report)
    names = list(_NAMED_INPUT.findall(c.why.text))
    ev = c.why.evidence
    for text in (ev.producer, ev.consumer):
        for k in _PARAMETER.findall(text):
            if int(k) < len(inputs):
                names.append(inputs[int(k)])
    return [n for n in dict.fromkeys(names) if n in inputs]


@dataclass(frozen=True)
class Layout:
    """One operand layout the evidence shows: its role, what it is, and its sharding."""

    role: str                          # "before", "before, right operand", "after"
    what: str                          # `input w2`, `tanh (model.py:12)`, "the operand"
    dtype: str
    shape: tuple[int, ...] | None      # None where the evidence gives no instruction
    sharding: str                      # spec text (`data,None`) or HLO text; "" if missing

    @property
    def missing(self) -> str:
        """Why this layout cannot be drawn; "" when it can."""
        if not self.sharding or self.sharding == "(no mesh layout)":
            return f"{self.role}: no layout of {self.what} is known (the module gave none)"
        if self.shape is None:
            return f"{self.role}: the shape of {self.what} is not in the evidence"
        return ""


def evidence_layouts(report: Report, c: Collective) -> list[Layout]:
    """The operand layouts of a collective's evidence: before (one per operand of a
    contraction) and after."""
    if c.why is None:
        return []
    ev, inputs = c.why.evidence, report_inputs(report)
    producers = dict(_parts(ev.producer))
    befores = _parts(ev.sharding_before)
    out = []
    for prefix, sharding in befores:
        inst = _instruction(producers.get(prefix, ""), inputs, report)
        what, dtype, shape = inst if inst else ("the operand", "", None)
        role = f"before, {OPERAND_WORDS.get(prefix, prefix)}" if prefix else "before"
        out.append(Layout(role, what, dtype, shape, sharding))
    if not befores:
        inst = _instruction(ev.producer, inputs, report)
        what, dtype, shape = inst if inst else ("the operand", "", None)
        out.append(Layout("before", what, dtype, shape, ""))
    # After: the result's layout for a contraction (partial sums), else the operand's.
    whole = c.why.reason == Reason.PARTIAL_SUM or len(befores) > 1
    inst = _instruction(ev.consumer if whole else ev.producer, inputs, report)
    what, dtype, shape = inst if inst else ("the operand", "", None)
    if whole:
        what = f"the result of {what}"
    out.append(Layout("after", what, dtype, shape, ev.sharding_after))
    return out


def layout_tiling(layout: Layout, mesh: MeshSpec) -> tuple[Spec | None, Tiling]:
    """(spec, tiling) of a drawable layout; ValueError or SpecError when its text does not
    fit the mesh and shape."""
    rank = len(layout.shape)
    text = layout.sharding.strip()
    if text.startswith("{"):
        tiling = tiling_from_hlo(text, rank, mesh.device_count)
        return spec_from_tiling(tiling, mesh.names, mesh.sizes), tiling
    spec = () if text == "replicated" else parse_spec(text)
    return spec, tiling_from_spec(spec, mesh.names, mesh.sizes, rank)


def layout_grid(layout: Layout, mesh: MeshSpec) -> Grid:
    spec, tiling = layout_tiling(layout, mesh)
    info = TensorInfo(layout.what, TensorRole.INTERMEDIATE, layout.shape, layout.dtype or "?",
                      layout.sharding, spec, shard_shape(tiling, layout.shape), tiling.replicas,
                      0)
    grid = tensor_grid(info, tiling)
    # Two lines: what it is, then its shape and layout (the pictures are small).
    title = (f"{layout.role}: {layout.what}\n[{','.join(map(str, layout.shape))}] "
             f"{format_spec(spec) if spec is not None else layout.sharding}")
    return replace(grid, title=title)


# ------------------------------------------------------------------------ the what-ifs


@dataclass(frozen=True)
class Candidate:
    """A spec change to try: one input's (`tensor`, `spec`), or where it is a pattern, the same
    change to every input of that role across layers (`changes`, `pattern`); after its compile,
    the bytes it moves on the line and in all, and for a pattern how many of the picked
    collective's repeats on those inputs are left."""

    tensor: str                  # the input the change was proposed for
    spec: Spec
    label: str
    line_before: int = 0
    line_after: int = 0
    total_before: int = 0
    total_after: int = 0
    changes: tuple[tuple[str, Spec], ...] = ()   # a pattern: every input changed, its new spec
    pattern: str = ""            # `layers.*.w_up`: `*` any layer index; "" for one input
    repeated: str = ""           # a pattern: what repeats (`all-reduce over model`)
    repeats_before: int = 0      # the picked collective and its repeats on the inputs changed
    repeats_after: int = 0

    @property
    def specs(self) -> dict[str, Spec]:
        """Input -> the spec the change gives it."""
        return dict(self.changes) if self.changes else {self.tensor: self.spec}

    @property
    def tensors(self) -> frozenset[str]:
        """The inputs the change sets."""
        return frozenset(self.specs)

    def describe(self) -> str:
        worse = " (more in all)" if self.total_after > self.total_before else ""
        total = (f"all collectives {human_bytes(self.total_before)} → "
                 f"{human_bytes(self.total_after)} per device{worse}")
        if self.pattern:
            gone = self.repeats_before - self.repeats_after
            return (f"{self.label}: {gone} of the {self.repeats_before} {self.repeated} on "
                    f"them gone; {total}")
        gone = "removes the collectives of this line" if self.line_after == 0 else (
            f"this line {human_bytes(self.line_before)} → {human_bytes(self.line_after)}")
        return f"{self.label}: {gone}; {total}"


def _without(spec: Spec, axes: Sequence[str]) -> Spec:
    out = []
    for e in spec:
        kept = [a for a in entry_axes(e) if a not in axes]
        out.append(None if not kept else kept[0] if len(kept) == 1 else tuple(kept))
    return tuple(out)


def _with(spec: Spec, dim: int, axes: Sequence[str]) -> Spec:
    spec = list(spec)
    have = list(entry_axes(spec[dim]))
    new = have + [a for a in axes if a not in have]
    spec[dim] = new[0] if len(new) == 1 else tuple(new)
    return tuple(spec)


def _padded(spec: Spec, rank: int) -> Spec:
    return tuple(spec) + (None,) * (rank - len(spec))


def candidates(report: Report, index: int, specs: Mapping[str, Spec],
               shapes: Mapping[str, tuple[int, ...]], mesh: MeshSpec,
               limit: int = MAX_CANDIDATES) -> list[Candidate]:
    """Single-input spec changes that might remove collective `index` or make it cheaper, for
    the inputs its reason names, in order of how directly they address it; each fits its
    tensor and the mesh. Nothing here says they help: the app compiles them to find out."""
    c = report.collectives[index]
    axes = tuple(c.axes)
    out: list[Candidate] = []
    seen: set[tuple[str, Spec]] = set()

    def add(name: str, spec: Spec, label: str) -> None:
        spec = _padded(spec, len(shapes[name]))
        if (name, spec) in seen or spec == _padded(specs[name], len(shapes[name])):
            return
        try:
            check_spec(TensorSpec(name, shapes[name], spec=spec), mesh)
        except SpecError:
            return
        seen.add((name, spec))
        out.append(Candidate(name, spec, label))

    names = [n for n in involved_inputs(report, c) if n in specs and n in shapes]
    layouts = evidence_layouts(report, c)
    after = next((lay for lay in layouts if lay.role == "after"), None)
    for name in names:
        rank, spec = len(shapes[name]), _padded(specs[name], len(shapes[name]))
        # The layout the consumer needs, where the evidence gives it for this input.
        producer = next((lay for lay in layouts if lay.role.startswith("before")
                         and lay.what == f"input {name}"), None)
        if (after is not None and producer is not None and c.why is not None
                and c.why.reason != Reason.PARTIAL_SUM and after.sharding
                and not after.sharding.startswith(("{", "("))):
            try:
                need = () if after.sharding == "replicated" else parse_spec(after.sharding)
            except SpecError:
                need = None
            if need is not None and len(need) <= rank:
                add(name, need, f"lay {name} out as {format_spec(need)} (what its consumer "
                                "needs)")
        if axes and any(a in entry_axes(e) for e in spec for a in axes):
            dropped = _without(spec, axes)
            add(name, dropped, f"stop splitting {name} over {','.join(axes)} "
                               f"({format_spec(dropped)})")
        if any(entry_axes(e) for e in spec):
            add(name, (), f"replicate {name}")
    for name in names:
        rank, spec = len(shapes[name]), _padded(specs[name], len(shapes[name]))
        base = _without(spec, axes)
        for dim in range(rank):
            moved = _with(base, dim, axes)
            add(name, moved, f"split {name} dimension {dim} over {','.join(axes)} "
                             f"({format_spec(moved)})")
    return out[:limit]


def repeats(report: Report, c: Collective, tensors: Collection[str]) -> list[int]:
    """The collectives of `report` that repeat `c` (picked in it, or in the report before a
    change) on `tensors`: of its kind, over its axes, with a reason that names one of them (a
    layer's copy of the same all-reduce)."""
    return [i for i, other in enumerate(report.collectives)
            if other.kind == c.kind and other.axes == c.axes
            and set(involved_inputs(report, other)) & set(tensors)]


def _bytes(report: Report, indices: Sequence[int]) -> int:
    return sum(report.collectives[i].bytes for i in indices)


def across_layers(single: Candidate, report: Report, index: int, specs: Mapping[str, Spec],
                  shapes: Mapping[str, tuple[int, ...]]) -> Candidate | None:
    """`single`'s change made to every input of its tensor's role: the inputs its name's
    pattern matches (the layer index as `*`: `layers.*.w_up`), of its shape and laid out as it
    is; None where the name has no layer, no other input matches, or the picked collective does
    not repeat on them."""
    pattern = layer_pattern(single.tensor)
    if pattern is None or single.tensor not in shapes:
        return None
    rank = len(shapes[single.tensor])
    now = _padded(specs[single.tensor], rank)
    members = [n for n in matching(pattern, specs) if n in shapes
               and shapes[n] == shapes[single.tensor] and _padded(specs[n], rank) == now]
    c = report.collectives[index]
    found = repeats(report, c, members)
    if len(members) < 2 or len(found) < 2:
        return None
    label = (single.label.replace(single.tensor, pattern) +
             f" in every layer ({len(members)} inputs)")
    return replace(single, label=label, changes=tuple((n, single.spec) for n in members),
                   pattern=pattern, repeated=f"{c.kind}s over {','.join(c.axes) or '?'}",
                   repeats_before=len(found))


def confirm(candidate: Candidate, report: Report, index: int, result: Report,
            alone: Report | None = None) -> Candidate | None:
    """`candidate` with the numbers of its compile (`result`) where it helps, else None. One
    input's change helps where it moves fewer bytes on the picked collective's line; a pattern
    where it leaves fewer bytes in the collective's repeats than `alone` (the result of the
    one-input change it widens) does."""
    c = report.collectives[index]
    done = replace(candidate, line_before=line_bytes(report, c.source),
                   line_after=line_bytes(result, c.source),
                   total_before=report.cost.collective_bytes,
                   total_after=result.cost.collective_bytes)
    if not candidate.pattern:
        return done if done.line_after < done.line_before else None
    left = repeats(result, c, candidate.tensors)
    if alone is not None and _bytes(result, left) >= _bytes(
            alone, repeats(alone, c, candidate.tensors)):
        return None
    return replace(done, repeats_after=len(left))


# ------------------------------------------------------------------------ the panel


def code_spans(text: str) -> str:
    """The reason's text with its `backticked` names as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def why_html(report: Report, index: int) -> str:
    c = report.collectives[index]
    e = html.escape
    head = (f"<b>Why #{index}: {e(c.kind)} over {e(','.join(c.axes) or '?')}</b> "
            f"({human_bytes(c.bytes)} per device)")
    where = (f"<div>at <code>{e(c.source)}</code></div>" if c.source
             else "<div><i>source line unknown</i></div>")
    text = source_line(c)
    code = f"<pre class='explorer-source-text'>{e(text)}</pre>" if text else ""
    if c.why is None:
        reason = "<p><i>No reason was read for this collective.</i></p>"
    else:
        reason = (f"<p><span class='explorer-reason' title='reason code'>{e(c.why.reason)}"
                  f"</span> {code_spans(c.why.text)}</p>")
    return f"<div class='explorer-why'>{head}{where}{code}{reason}</div>"


class WhyPanel:
    """The picked collective's source, reason, layouts before and after, and confirmed
    what-ifs; `on_apply(candidate)` applies one."""

    MAX_LAYOUTS = 3

    def __init__(self, on_apply: Callable[[Candidate], None]):
        self.on_apply = on_apply
        self.text = w.HTML()
        # Figures are made when drawn: a page loading many figures at once was seen to time out
        # initialising them (anywidget allows each 2 s in the browser).
        self.slots = [FigureSlot() for _ in range(self.MAX_LAYOUTS)]
        self.fig_boxes = [slot.box for slot in self.slots]
        self.layout_note = w.HTML()
        self.layouts_legend = w.HTML()
        self.offers_head = w.HTML()
        self.offers = w.VBox()
        self.comparison = w.HTML()
        self.candidates: list[Candidate] = []
        self.widget = w.VBox([self.text, self.layouts_legend, w.HBox(self.fig_boxes),
                              self.layout_note, self.offers_head, self.offers, self.comparison],
                             layout=w.Layout(display="none"))
        self.widget.add_class("explorer-why-panel")

    @property
    def figs(self) -> list:
        """The layouts drawn now, before first."""
        return [slot.fig for slot in self.slots if slot.fig is not None]

    def clear(self) -> None:
        self.widget.layout.display = "none" if not self.comparison.value else ""
        self.text.value = self.layout_note.value = self.offers_head.value = ""
        self.layouts_legend.value = ""
        for slot in self.slots:
            slot.clear()
        self.offers.children = ()
        self.candidates = []

    def show(self, report: Report, index: int, result: int | None = None) -> None:
        self.comparison.value = ""
        self.widget.layout.display = ""
        self.text.value = why_html(report, index)
        layouts = evidence_layouts(report, report.collectives[index])
        notes, drawn = [], 0
        for lay in layouts:
            if lay.missing:
                notes.append(lay.missing)
                continue
            if drawn >= self.MAX_LAYOUTS:
                break
            try:
                grid = layout_grid(lay, report.mesh)
            except (ValueError, SpecError) as e:
                notes.append(f"{lay.role}: {lay.sharding!r} cannot be drawn on this mesh ({e})")
                continue
            # Small multiples: one per layout, side by side, axis titles in a smaller font.
            self.slots[drawn].show(grid_figure(grid, max(len(grid.legend), 1), 300, width=360,
                                               margin=dict(l=80, r=10, t=96, b=10),
                                               font=dict(size=10), title_font_size=12),
                                   result)
            drawn += 1
        for slot in self.slots[drawn:]:
            slot.clear()
        self.layouts_legend.value = (
            "<div class='explorer-legend'><b>Layouts</b>: each cell is a block of the tensor, "
            "labelled with the devices holding it; colour = block number within each picture."
            "</div>" if drawn else "")
        self.layout_note.value = "".join(f"<p class='explorer-note'>{html.escape(n)}</p>"
                                         for n in notes)
        self.offers_head.value = ""
        self.offers.children = ()

    def searching(self, count: int) -> None:
        self.offers_head.value = (f"<p class='explorer-offers'><b>What if…</b> compiling "
                                  f"{count} single-input change{'s' if count != 1 else ''} in "
                                  "the background…</p>")

    def offer(self, confirmed: Sequence[Candidate], none_text: str) -> None:
        """Offer the changes a compile confirmed; `none_text` says why there are none."""
        self.candidates = list(confirmed)
        if not confirmed:
            self.offers_head.value = (f"<p class='explorer-offers'><b>What if…</b> "
                                      f"{html.escape(none_text)}.</p>")
            self.offers.children = ()
            return
        self.offers_head.value = ("<p class='explorer-offers'><b>What if…</b> compiled and "
                                  "confirmed (click to apply; the result is compared with "
                                  "now):</p>")
        rows = []
        for cand in confirmed:
            sets = (f"{cand.pattern} = {format_spec(cand.spec)} ({len(cand.tensors)} inputs)"
                    if cand.pattern else f"{cand.tensor} = {format_spec(cand.spec)}")
            button = w.Button(description="apply", layout=w.Layout(width="64px"), tooltip=sets)
            button.add_class("explorer-what-if")
            button.on_click(lambda _, c=cand: self.on_apply(c))
            rows.append(w.HBox([button, w.HTML(f"<span class='explorer-offers'>"
                                                f"{html.escape(cand.describe())}</span>")]))
        self.offers.children = rows

    def show_applied(self, candidate: Candidate, comparison: Comparison) -> None:
        self.widget.layout.display = ""
        self.comparison.value = (f"<p><b>Applied</b>: {html.escape(candidate.label)}. A is the "
                                 "result before, B after:</p>" + comparison_html(comparison))
