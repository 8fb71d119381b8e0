"""What-ifs: input spec changes that a compile confirmed would remove a collective, or make the
collectives of its line of code move fewer bytes; `explorer.what_if` from Python, `analyze
--what-if N` on the command line and the app's why panel (explorer._src.ui.why) all use them.

The candidate changes are generated from the collective's reason's evidence (which inputs it
names, over which mesh axes): stop splitting an input over the collective's axes, replicate it,
lay it out as the consumer needs, or split another of its dimensions over those axes. Nothing
says a candidate helps until it is compiled: each is, and only those whose report moves fewer
collective bytes on the same source line are kept (`confirm`). A confirmed change to a tensor
whose name has a layer index is then tried as a pattern (`across_layers`): a model's layers
repeat the collective on their own copies of the tensor, which a change to one copy leaves in
place; the pattern is kept where its compile leaves fewer bytes in those repeats than the
one-input change did.

Each compile is a full one, so a collective gets at most MAX_CANDIDATES one-input changes and
MAX_PATTERNS widened ones.

One driver runs these steps for every caller (`ChangeSearch`): `ChangeSearch.of` reads the
changes to try from a Report, before any compile, and `run` compiles them through the function it
was given and keeps the confirmed ones. explorer.what_if and the command line give it a compile
of the Report's program (`_program`); explorer.Session, and through it the app's why panel
(explorer._src.ui.what_ifs), a compile of the variant of the result's Request (`changed_request`),
so that the API and the app compile the same variants under the same cache keys.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

from explorer._src.api.analysis_request import CompileForName, Request
from explorer._src.api.analyze import run
from explorer._src.api.exploration import Exploration
from explorer._src.api.pytrees import map_tensor_leaves
from explorer._src.compile.pool import WorkerPool
from explorer._src.errors import ExplorerError, InputError, SpecError
from explorer._src.report.dataflow import layer_pattern, matching
from explorer._src.report.report import Collective, Report, TensorRole
from explorer._src.report.why import Operand, OperandRole, Reason
from explorer._src.report.why.metadata import short_op
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import (
    Spec,
    TensorSpec,
    check_spec,
    entry_axes,
    format_spec,
)
from explorer._src.units import format_bytes
from explorer._src.workloads.registry import WORKLOADS

MAX_CANDIDATES = 6          # compiles per picked collective; each is a full compile
MAX_PATTERNS = 2            # then confirmed changes widened across layers, a compile each


def line_bytes(report: Report, source: str) -> int:
    """Bytes per device that the collectives of one source line move."""
    return sum(c.bytes for c in report.collectives if c.source == source)


# ------------------------------------------------------------------------ the evidence


class LayoutRole(StrEnum):
    """Which of a collective's layouts a Layout is, as its caption says it: an operand's
    before the collective (the left or the right one of a contraction), or the layout after.
    A StrEnum: each member is its caption's words."""

    BEFORE = "before"
    BEFORE_LEFT = "before, left operand"
    BEFORE_RIGHT = "before, right operand"
    AFTER = "after"


# The layout before of each operand of a contraction; any other operand's is BEFORE.
_BEFORE = {OperandRole.LHS: LayoutRole.BEFORE_LEFT, OperandRole.RHS: LayoutRole.BEFORE_RIGHT}


def report_inputs(report: Report) -> list[str]:
    """The program's inputs in parameter order."""
    return [t.name for t in report.tensors if t.kind == TensorRole.INPUT]


def _what(op: Operand | None, report: Report) -> str:
    """An operand in the user's words: `input w2` for an input, else the jax op that made it
    and its line (`tanh (model.py:12)`, from the report's intermediates or its op_name), its
    HLO name only where neither is known; "the operand" where the evidence has none."""
    if op is None or op.shape is None:
        return "the operand"
    if op.input:
        return f"input {op.input}"
    info = next((t for t in report.tensors if t.name == op.instruction), None)
    jax_op = short_op(info.op_name if info is not None and info.op_name else op.op_name)
    source = info.source.rsplit("/", 1)[-1] if info is not None and info.source else ""
    return f"{jax_op or '%' + op.instruction}" + (f" ({source})" if source else "")


def involved_inputs(report: Report, c: Collective) -> list[str]:
    """The inputs the reason names: in its sentence, and as the operands (or the consumer) of
    its evidence. None from a Why whose evidence has no fields (read by an older explorer)."""
    if c.why is None:
        return []
    ev = c.why.evidence
    names = [*ev.inputs, *(op.input for op in (*ev.operands, ev.user) if op is not None)]
    inputs = report_inputs(report)
    return [n for n in dict.fromkeys(names) if n and n in inputs]


@dataclass(frozen=True)
class Layout:
    """One operand layout the evidence shows: its role, what it is, and its sharding."""

    role: LayoutRole
    what: str                          # `input w2`, `tanh (model.py:12)`, "the operand"
    dtype: str
    shape: tuple[int, ...] | None      # None where the evidence gives no instruction
    spec: Spec | None                  # one entry per dimension; None where none is known

    @property
    def sharding(self) -> str:
        """The spec as text (`data,None`, `replicated`); "" where none is known."""
        return "" if self.spec is None else format_spec(self.spec)

    @property
    def missing(self) -> str:
        """Why this layout cannot be drawn; "" when it can."""
        if self.spec is None:
            return f"{self.role}: no layout of {self.what} is known (the module gave none)"
        if self.shape is None:
            return f"{self.role}: the shape of {self.what} is not in the evidence"
        return ""


def _layout(role: LayoutRole, op: Operand | None, report: Report, spec: Spec | None,
            what: str = "") -> Layout:
    shape = op.shape if op is not None else None
    return Layout(role, what or _what(op, report), op.dtype if op is not None and shape else "",
                  shape, spec)


def evidence_layouts(report: Report, c: Collective) -> list[Layout]:
    """The operand layouts of a collective's evidence: before (one per operand of a
    contraction) and after."""
    if c.why is None:
        return []
    ev = c.why.evidence
    out = []
    for op in ev.operands:
        out.append(_layout(_BEFORE.get(op.role, LayoutRole.BEFORE), op, report, op.spec))
    if not ev.operands:
        out.append(_layout(LayoutRole.BEFORE, None, report, None))
    # After: the result's layout for a contraction (partial sums), else the operand's.
    whole = c.why.reason == Reason.PARTIAL_SUM or len(ev.operands) > 1
    op = ev.user if whole else (ev.operands[0] if ev.operands else None)
    what = f"the result of {_what(op, report)}" if whole else ""
    out.append(_layout(LayoutRole.AFTER, op, report, ev.spec_after, what))
    return out


# ------------------------------------------------------------------------ the spec changes


@dataclass(frozen=True)
class SpecChange:
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
        total = (f"all collectives {format_bytes(self.total_before)} → "
                 f"{format_bytes(self.total_after)} per device{worse}")
        if self.pattern:
            gone = self.repeats_before - self.repeats_after
            return (f"{self.label}: {gone} of the {self.repeats_before} {self.repeated} on "
                    f"them gone; {total}")
        gone = "removes the collectives of this line" if self.line_after == 0 else (
            f"this line {format_bytes(self.line_before)} → {format_bytes(self.line_after)}")
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
               limit: int = MAX_CANDIDATES) -> list[SpecChange]:
    """Single-input spec changes that might remove collective `index` or make it cheaper, for
    the inputs its reason names, in order of how directly they address it; each fits its
    tensor and the mesh. Nothing here says they help: compiling them finds out."""
    c = report.collectives[index]
    axes = tuple(c.axes)
    out: list[SpecChange] = []
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
        out.append(SpecChange(name, spec, label))

    names = [n for n in involved_inputs(report, c) if n in specs and n in shapes]
    ev = c.why.evidence if c.why is not None else None
    # The layout the consumer needs of what the collective moves (not a partial sum's: that
    # is the result's); a replicated one as no entries, whatever its rank.
    need = (ev.spec_after if ev is not None and c.why.reason != Reason.PARTIAL_SUM
            else None)
    if need is not None and not any(entry_axes(e) for e in need):
        need = ()
    for name in names:
        rank, spec = len(shapes[name]), _padded(specs[name], len(shapes[name]))
        # Where the evidence shows this input as the operand that layout is needed of.
        if (need is not None and len(need) <= rank
                and any(op.input == name for op in ev.operands)):
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


def across_layers(single: SpecChange, report: Report, index: int, specs: Mapping[str, Spec],
                  shapes: Mapping[str, tuple[int, ...]]) -> SpecChange | None:
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


def confirm(candidate: SpecChange, report: Report, index: int, result: Report,
            alone: Report | None = None) -> SpecChange | None:
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


def why_untried(c: Collective, found: Sequence[SpecChange]) -> str:
    """Why no change can be tried for collective `c`, given the candidates `found` for it;
    "" where some can."""
    if not c.source:
        return "its source line is unknown, so a change cannot be measured there"
    if not found:
        return ("no single-input spec change to try: none of the tensors it moves or reduces "
                "is an input")
    return ""


def confirmed_changes(found: Sequence[SpecChange], report: Report, index: int,
                      specs: Mapping[str, Spec], shapes: Mapping[str, tuple[int, ...]],
                      compiled: Callable[[SpecChange], Report | None],
                      stop: Callable[[], bool] = lambda: False
                      ) -> list[tuple[SpecChange, Report]] | None:
    """The changes of `found` that a compile confirmed, with the Report of each, best first:
    each is compiled (`compiled`: its Report, or None where it does not compile) and kept where
    `confirm` keeps it; then each of the first MAX_PATTERNS confirmed is widened across layers
    (`across_layers`), compiled and kept where it does better than alone. None where `stop()`,
    asked before each compile, said to stop."""
    confirmed: list[tuple[SpecChange, Report]] = []
    for change in found:
        if stop():
            return None
        result = compiled(change)
        kept = confirm(change, report, index, result) if result is not None else None
        if kept is not None:
            confirmed.append((kept, result))
    for single, alone in list(confirmed[:MAX_PATTERNS]):
        wide = across_layers(single, report, index, specs, shapes)
        if wide is None:
            continue
        if stop():
            return None
        result = compiled(wide)
        kept = None if result is None else confirm(wide, report, index, result, alone)
        if kept is not None:
            confirmed.append((kept, result))
    # Best first: the fewest bytes in all, then on the line (a change can move the cost to
    # another line; its description says so).
    return sorted(confirmed, key=lambda pair: (pair[0].total_after, pair[0].line_after))


def _never() -> bool:
    return False


@dataclass(frozen=True)
class ChangeSearch:
    """The what-if search of collective `index` of `report`: the one driver of explorer.what_if,
    `analyze --what-if N`, explorer.Session.what_if and the app's why panel.

    `of` reads the single-input changes to try (`found`, from `candidates`, given the Report's
    input specs, shapes and mesh), or why none can be (`untried`), before anything is compiled;
    `run` compiles them with `compile` and keeps those a compile confirmed
    (`confirmed_changes`: one input's, then widened across layers), giving this search with
    `tried` and `confirmed` set. `compile(specs)` is the Report of the analysed program with
    `specs` (input -> spec) over the specs its inputs have; an ExplorerError it raises means the
    change does not compile, and it is not offered."""

    report: Report
    index: int
    compile: Callable[[Mapping[str, Spec]], Report] = field(repr=False, compare=False)
    found: tuple[SpecChange, ...] = ()
    untried: str = ""                    # why no change can be tried; "" where some can
    tried: int = 0                       # after `run`: changes compiled, widened ones included
    confirmed: tuple[tuple[SpecChange, Report], ...] = ()   # after `run`: best first

    @classmethod
    def of(cls, report: Report, index: int,
           compile: Callable[[Mapping[str, Spec]], Report]) -> ChangeSearch:
        """The search of collective `index` of `report` (an index check_collective checked),
        its changes read and none compiled yet."""
        found = tuple(candidates(report, index, input_specs(report), input_shapes(report),
                                 report.mesh))
        return cls(report, index, compile, found,
                   why_untried(report.collectives[index], found))

    @property
    def collective(self) -> Collective:
        return self.report.collectives[self.index]

    def run(self, stop: Callable[[], bool] = _never) -> ChangeSearch | None:
        """Compile the changes found and keep those a compile confirmed, best first; None where
        `stop()`, asked before each compile, said to stop (a newer edit made the search moot).
        A search with nothing to try is returned as it is."""
        if self.untried:
            return self
        tried = 0

        def compiled(change: SpecChange) -> Report | None:
            nonlocal tried
            tried += 1
            try:
                return self.compile(change.specs)
            except ExplorerError:
                return None             # the change does not compile: it is not offered

        kept = confirmed_changes(self.found, self.report, self.index, input_specs(self.report),
                                 input_shapes(self.report), compiled, stop)
        return None if kept is None else replace(self, tried=tried, confirmed=tuple(kept))


# ------------------------------------------------------------------------ explorer.what_if


@dataclass(frozen=True)
class WhatIf:
    """A spec change that a compile confirmed moves fewer bytes on a collective's line.

    Attributes:
        specs: input name -> the spec text the change gives it; every layer's copy of the
            tensor where the change was made across layers.
        label: what the change is, in words (``split w2 dimension 0 over model (model,None)``).
        description: the label and what its compile moved, as the app offers it.
        source: the collective's line of code (``file.py:12``), where the bytes are counted.
        line_bytes_before: bytes per device the collectives of that line move now.
        line_bytes_after: the same after the change; 0 where it removes them.
        total_bytes_before: bytes per device all the program's collectives move now.
        total_bytes_after: the same after the change (it can move cost to another line).
        across_layers: the change was made to every layer's copy of the tensor, since the
            collective repeats in every layer.
        pattern: those copies' names with the layer index as ``*`` (``layers.*.w_up``); ""
            for a change to one input.
        report: the Report of the change's compile.
    """

    specs: Mapping[str, str]
    label: str
    description: str
    source: str
    line_bytes_before: int
    line_bytes_after: int
    total_bytes_before: int
    total_bytes_after: int
    across_layers: bool = False
    pattern: str = ""
    report: Report | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        """The JSON-able fields (the Report left out: `report.to_dict()` gives it)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "report"}
        return {**out, "specs": dict(self.specs)}


@dataclass(frozen=True)
class WhatIfSearch:
    """What a what-if search for one collective did: how many changes it compiled and which
    it confirmed, or why it could try none."""

    index: int
    collective: Collective
    tried: int                        # changes compiled, widened ones included
    confirmed: tuple[WhatIf, ...]     # best first
    untried: str = ""                 # why no change could be tried; "" where some were

    @classmethod
    def of(cls, search: ChangeSearch) -> WhatIfSearch:
        """What `search` did, once run, each confirmed change as a WhatIf."""
        c = search.collective
        return cls(search.index, c, search.tried,
                   tuple(_result(change, c, result) for change, result in search.confirmed),
                   search.untried)

    def to_dict(self) -> dict:
        """The JSON-able fields; `collective` is its index into the Report's collectives."""
        return {"collective": self.index, "tried": self.tried,
                "confirmed": [x.to_dict() for x in self.confirmed],
                **({"untried": self.untried} if self.untried else {})}


def check_collective(report: Report, collective: Any) -> int:
    """`collective` as an index into `report.collectives`.

    Raises:
        InputError: it is no whole number, or out of range, or the Report has no collectives."""
    count = len(report.collectives)
    if count == 0:
        raise InputError(f"collective {collective!r}: this Report has no collectives, so no "
                         "spec change can remove one")
    numbered = "number 0" if count == 1 else f"numbered 0 to {count - 1}"
    has = f"the Report has {count} collective{'s' if count != 1 else ''}, {numbered}"
    try:
        index = None if isinstance(collective, bool) else operator.index(collective)
    except TypeError:
        index = None
    if index is None:
        raise InputError(f"collective {collective!r} is not a whole number; {has}")
    if not 0 <= index < count:
        raise InputError(f"collective {index} is out of range: {has}")
    return index


def _default_inputs(report: Report, fn: Callable[..., Any]) -> tuple[TensorSpec, ...]:
    """The Report's inputs as TensorSpecs, one argument each: how a function that takes each
    input as its own argument was called. One that takes pytrees needs its own arguments."""
    tensors = tuple(TensorSpec(t.name, t.shape, t.dtype, t.spec or (), t.memory_kind)
                    for t in report.tensors if t.kind == TensorRole.INPUT)
    try:
        inspect.signature(fn).bind(*tensors)
    except TypeError:
        raise InputError(f"{getattr(fn, '__name__', 'fn')} does not take the Report's "
                         f"{len(tensors)} inputs as one argument each; pass its arguments "
                         "as explorer.analyze was given them: what_if(report, collective, "
                         "fn=fn, inputs=(...))") from None
    except ValueError:
        pass                    # no signature to check (a builtin): the compile will say
    return tensors


def input_specs(report: Report) -> dict[str, Spec]:
    """The spec of each of the Report's inputs, as it was asked for."""
    return {t.name: t.spec for t in report.tensors
            if t.kind == TensorRole.INPUT and t.spec is not None}


def input_shapes(report: Report) -> dict[str, tuple[int, ...]]:
    """The shape of each of the Report's inputs."""
    return {t.name: t.shape for t in report.tensors if t.kind == TensorRole.INPUT}


def changed_request(request: Request, specs: Mapping[str, Spec], **fields: Any) -> Request:
    """`request` with `specs` (input -> spec) over the specs its inputs were planned with, and
    any other `fields` changed: a what-if's variant, checked and planned as every Request is.

    A workload's request gets them as hand-set specs, which win over its preset and rules, as a
    --spec does. A function's gets every input's spec on its own leaf: the change's, else the
    one it was planned with; its spec patterns are dropped (a pattern would place an input the
    change replicates, since only a spec that splits wins over one)."""
    if request.fn is None:
        return replace(request, specs={**dict(request.specs or {}), **specs}, **fields)
    placed = {**{t.name: t.spec for t in request.planned.leaves}, **specs}
    inputs = tuple(map_tensor_leaves(a, lambda t: replace(t, spec=placed.get(t.name, t.spec)))
                   for a in request.planned.inputs)
    return replace(request, inputs=inputs, specs=None, **fields)


def compile_changed(request: Request, *, pool: WorkerPool | None = None,
                    use_cache: bool = True, timeout: float | None = None
                    ) -> Callable[[Mapping[str, Spec]], Report]:
    """A ChangeSearch's `compile` for `request`: the Report of `changed_request(request,
    specs)`, from the cache or compiled with `pool` (`timeout`: in place of the request's)."""
    more = {} if timeout is None else {"timeout": timeout}

    def compile(specs: Mapping[str, Spec]) -> Report:
        report = run(changed_request(request, specs, **more), pool=pool, use_cache=use_cache)
        assert report is not None                       # None only for a cache_only miss
        return report

    return compile


def _program(subject: Report | Request | Exploration, fn: Callable[..., Any] | None,
             inputs: Sequence[Any] | None, compile_for: CompileForName,
             options: Mapping[str, Any]
             ) -> tuple[Callable[[Mapping[str, Spec]], Report], Report]:
    """How to compile what `subject` analysed with other input specs (a ChangeSearch's
    `compile`: its Request's variants, `changed_request`), and its Report (a Request's or an
    Exploration's analysed here). A Report or an Exploration is made its Request first
    (`Exploration.request`), so that every subject's variants are the same Requests, under the
    same cache keys."""
    pool, use_cache = options.get("pool"), options.get("use_cache", True)
    more = {} if options.get("timeout") is None else {"timeout": options["timeout"]}
    if isinstance(subject, Request):
        if fn is not None or inputs is not None:
            raise InputError("a Request carries its program and inputs; what_if(request, "
                             "collective) takes no fn or inputs")
        report = run(subject, pool=pool, use_cache=use_cache)
        return compile_changed(subject, pool=pool, use_cache=use_cache, **more), report
    if isinstance(subject, Exploration):
        if subject.workload is None and (fn is None or inputs is None):
            raise InputError("this exploration is of a user's function, which it does not "
                             "carry, nor its inputs; pass them: what_if(exploration, "
                             "collective, fn=your_function, inputs=(...))")
        if subject.workload is not None and (fn is not None or inputs is not None):
            raise InputError(f"this exploration is of the built-in workload "
                             f"{subject.workload!r}; it takes no fn or inputs")
        request = subject.request(fn, *(inputs or ()), **more)
        report = run(request, pool=pool, use_cache=use_cache)
        return compile_changed(request, pool=pool, use_cache=use_cache), report
    if not isinstance(subject, Report):
        raise InputError(f"what_if takes a Report, a Request or an Exploration, not "
                         f"{type(subject).__name__}")
    info = subject.workload
    if info is not None and info.name in WORKLOADS:
        if fn is not None or inputs is not None:
            raise InputError(f"this Report is of the built-in workload {info.name!r}; it "
                             "takes no fn or inputs")
        request = Exploration.from_report(subject, compile_for=compile_for).request(**more)
        return compile_changed(request, pool=pool, use_cache=use_cache), subject
    if fn is None:
        raise InputError("this Report is of a user's function, which a Report does not "
                         "carry; pass it: what_if(report, collective, fn=your_function)")
    base = Exploration.from_report(subject, fn, compile_for=compile_for)
    args = tuple(inputs) if inputs is not None else _default_inputs(subject, fn)
    request = base.request(fn, *args, **more)
    return compile_changed(request, pool=pool, use_cache=use_cache), subject


def what_if_search(subject: Report | Request | Exploration, collective: int, *,
                   fn: Callable[..., Any] | None = None, inputs: Sequence[Any] | None = None,
                   compile_for: CompileForName = "target", pool: WorkerPool | None = None,
                   timeout: float | None = None, use_cache: bool = True) -> WhatIfSearch:
    """`what_if`, with how many changes were compiled, or why none could be (the command
    line's `--what-if` says both)."""
    options = dict(pool=pool, timeout=timeout, use_cache=use_cache)
    compile, report = _program(subject, fn, inputs, compile_for, options)
    search = ChangeSearch.of(report, check_collective(report, collective), compile).run()
    assert search is not None                   # stopped only by a `stop` it was not given
    return WhatIfSearch.of(search)


def _result(change: SpecChange, c: Collective, report: Report) -> WhatIf:
    return WhatIf(specs={n: format_spec(s) for n, s in change.specs.items()},
                  label=change.label, description=change.describe(), source=c.source,
                  line_bytes_before=change.line_before, line_bytes_after=change.line_after,
                  total_bytes_before=change.total_before, total_bytes_after=change.total_after,
                  across_layers=bool(change.pattern), pattern=change.pattern, report=report)


def what_if(subject: Report | Request | Exploration, collective: int, *,
            fn: Callable[..., Any] | None = None, inputs: Sequence[Any] | None = None,
            compile_for: CompileForName = "target", pool: WorkerPool | None = None,
            timeout: float | None = None, use_cache: bool = True) -> list[WhatIf]:
    """The input spec changes that a compile confirmed would remove collective `collective` of
    a Report, or make the collectives of its line move fewer bytes, best first.

    The changes are those the app's why panel offers: generated from the collective's reason
    (stop splitting an input it names over the collective's axes, replicate it, lay it out as
    its consumer needs, split another of its dimensions over those axes; at most
    MAX_CANDIDATES), each compiled with the Report's mesh, partitioner and target, and kept
    where its Report moves fewer bytes on the collective's source line. A kept change to a
    layer's tensor (``layers.0.w_up``) is compiled once more made to every layer's copy of it
    (``layers.*.w_up``), and kept too where it leaves less of the collective's repeats.

    Args:
        subject: a Report (of a built-in workload, or of a user's function with `fn`), an
            explorer.Request (it carries its function and inputs), or an Exploration (with `fn`
            and `inputs` for a user's function's); a Request or an Exploration is analysed
            first. A Request's changes are compiled as its variants (`changed_request`), as an
            explorer.Session's and the app's are.
        collective: the index of the collective in ``report.collectives``: the number the
            app's and the CLI's Collectives tables show it with, minus 1 (they count from 1,
            as ``--what-if N`` does).
        fn: the user's function the Report or Exploration is of (neither carries it); None
            for a built-in workload.
        inputs: the function's arguments as explorer.analyze was given them (their specs are
            replaced by the Report's and the change's); None for the Report's inputs as
            TensorSpecs, one argument each.
        compile_for: how a Report was compiled, which it does not say (an Exploration does):
            ``"target"`` or ``"cpu"``; see explorer.analyze.
        pool, timeout, use_cache: passed on to each compile (explorer.analyze).

    Returns:
        The confirmed changes, best first (the fewest collective bytes in all, then on the
        line); empty where none was confirmed.

    Raises:
        InputError: `collective` is out of range or the Report has no collectives; a Report
            or Exploration of a user's function without `fn`, or an Exploration of one without
            `inputs`; `inputs` left out for a function that takes pytrees. A change that does
            not compile is left out, not raised.

    Example:
        The MLP with ``w2`` split by columns, as ``w1`` is: the hidden activation (split over
        ``model`` by columns) must be gathered whole before ``h @ w2``, 128 x 4096 float32
        values per device. Replicating ``w2``, or splitting it by rows (Megatron), leaves each
        device a partial sum of the 128 x 1024 result, all-reduced instead:

        >>> import explorer
        >>> report = explorer.analyze_workload(
        ...     "mlp", "data=2,model=4",
        ...     specs={"x": "data,None", "w1": "None,model", "w2": "None,model"})
        >>> c = report.collectives[0]
        >>> f"{c.kind} over {','.join(c.axes)}: {c.bytes} bytes at {c.source}"  # 128 * 4096 * 4
        'all-gather over model: 2097152 bytes at explorer/_src/workloads/mlp.py:34'
        >>> changes = explorer.what_if(report, 0)
        >>> [change.specs for change in changes]
        [{'w2': 'replicated'}, {'w2': 'model,None'}]
        >>> [(x.line_bytes_before, x.line_bytes_after) for x in changes]   # 128 * 1024 * 4
        [(2097152, 524288), (2097152, 524288)]
        >>> [f"{c.kind} over {','.join(c.axes)}" for c in changes[1].report.collectives]
        ['all-reduce over model']

        An index past the Report's collectives is refused before any compile:

        >>> try:
        ...     explorer.what_if(report, 1)
        ... except explorer.InputError as e:
        ...     print(e)
        collective 1 is out of range: the Report has 1 collective, number 0
    """
    return list(what_if_search(subject, collective, fn=fn, inputs=inputs,
                               compile_for=compile_for, pool=pool, timeout=timeout,
                               use_cache=use_cache).confirmed)
