"""Memory per device by what the tensors are: parameters, gradients, optimizer state,
activations and other inputs and outputs, beside XLA's arguments, outputs and temporaries.

Only a built-in workload says what its tensors are, so only its reports are split:

- `params`, `optimizer`: the inputs the workload's `kinds` calls PARAM (the default) and
  OPT, plus the outputs named like them (`out.l0.wq`): a training step returns its updated
  state, and without buffer donation the old and the new copy are both held. An output the
  compiler wrote into a donated input's buffer (the module's input_output_alias) is that
  input's bytes, counted once, as `Memory.total` counts it;
- `grads`: the size per device of the gradients at the workload's `grad.<param>` constraint
  points, as the partitioner laid them out; None (not located) when the program pins none of
  them. XLA may fuse a gradient into the update instead of holding it whole, so this is what
  the gradients are, not a claim about the peak;
- `activations`: XLA's temporaries, the intermediate values the step holds at its peak
  (activations kept for the backward pass, scratch, and the gradients where XLA does hold
  them; XLA may also place some inside the output buffers before the outputs are written);
- `other`: the other inputs (tokens, a batch) and outputs (a loss).

Inputs and outputs count as the compiler allocates them, which is what the memory analysis
adds up: where the compiled module's entry layout tiles an array (a TPU's, `{1,0:T(8,128)}`),
its bytes are its layout's whole tiles (`allocated_bytes`), padding included, else its shape
times its dtype (the CPU's and GPU's layouts have no tiles, and no padding). The gradients have
no allocation of their own to count and stay their values' size. What `Memory.total` holds
that no tensor does, the output tuple's table of pointers, is `outside_kinds`.

A user's own function says what its inputs are by their names only: `kinds_by_name` reads
them, and a function none of whose inputs it recognises has all its bytes `other`
(Memory.kinds stays None). Inputs and outputs kept in
host memory (offloaded, `TensorInfo.memory_kind`) are not the device's and are left out; the
host's bytes are `Memory.host_arguments`, `host_outputs` and `host_temporaries`.

`padding_note`, `kinds_note` and `peak_note` say in words how the Memory tab's figures relate
where they differ (docs/cost-model.md, "Memory figures").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from math import ceil

from explorer._src.hlo.module import (
    HLO_DTYPE_BYTES,
    close_bracket,
    input_output_aliases,
    ints,
    parse_shape,
    split_top_level,
)
from explorer._src.report.report import (
    BufferKind,
    Memory,
    MemoryKind,
    Report,
    TensorInfo,
    TensorRole,
    WorkloadInfo,
)
from explorer._src.units import format_bytes
from explorer._src.workloads.base import TensorKind, Workload, kind_of

# The memory kind an input's TensorKind counts in.
_KIND_OF = {TensorKind.PARAM: MemoryKind.PARAMS, TensorKind.OPT: MemoryKind.OPTIMIZER,
            TensorKind.INPUT: MemoryKind.OTHER}
# The names a user's train step gives its state (`kinds_by_name`): the first part of an input's
# name, or the argument it is a leaf of.
PARAM_NAMES = frozenset({"model", "params"})
OPT_NAMES = frozenset({"optimizer", "opt_state"})
_OUTPUT_NAME = re.compile(r"^out\.(.+)$")
_GRAD_POINT = re.compile(r"(?:^|/)(grad\.[^/]+)/sharding_constraint$")
_TILE = re.compile(r"T\(([\d,]*)\)")
_ELEMENT_BITS = re.compile(r"E\((\d+)\)")
_COMMENT = re.compile(r"/\*.*?\*/")
# The kinds that, with outside_kinds, add up to Memory.total; the gradients are apart.
_SUMMED = (MemoryKind.PARAMS, MemoryKind.OPTIMIZER, MemoryKind.ACTIVATIONS, MemoryKind.OTHER)


def with_workload(report: Report, info: WorkloadInfo, workload: Workload) -> Report:
    """The report of a built-in workload: its WorkloadInfo, and its memory split by kind."""
    report = replace(report, workload=info)
    if report.memory is None:
        return report
    kinds = memory_kinds(report, workload.kinds(info.params) if workload.kinds else {},
                         bool(workload.points and any(
                             p.kind == TensorKind.GRAD
                             for p in workload.points(info.params).values())))
    return replace(report, memory=replace(report.memory, kinds=kinds))


def with_kinds(report: Report, kinds: Mapping[str, TensorKind], has_grads: bool | None
               ) -> Report:
    """The report of a program that is not a built-in workload (a user's function, a Flax
    module), its memory split by the kinds given (`kinds_by_name`, or a module's own);
    `has_grads`: None where it is unknown where its gradients are (their bytes are then None)."""
    if report.memory is None:
        return report
    split = memory_kinds(report, kinds, bool(has_grads))
    if has_grads is None:
        split[MemoryKind.GRADS] = None
    return replace(report, memory=replace(report.memory, kinds=split))


def kinds_by_name(inputs: Mapping[str, str]) -> dict[str, TensorKind] | None:
    """What a user's own step's inputs are, read from their names (`inputs`: input name -> the
    argument it is a leaf of, "" where unknown), for `memory_kinds`; None where no input is
    recognised (its bytes then stay all `other`).

    The rule: an input whose name's first dotted part, or else whose argument, is `model` or
    `params` (PARAM_NAMES: `model.blocks.0.w`, a leaf of `params`) is a parameter; `optimizer`
    or `opt_state` (OPT_NAMES: `opt_state.mu.w`) optimizer state; any other input (a batch,
    a key) other. Outputs count as memory_kinds counts them: one written into a donated input's
    buffer is that input's bytes, counted once; one named like an input, `out.` and its name or
    its argument and name (`out.model.w` for the leaf `w` of `model`: a step that returns
    its state as a dict of its arguments), is that input's kind; any other output (a tuple's,
    `out.0.w`, which says nothing of what it is) is other."""
    def kind(name: str, argument: str) -> TensorKind:
        for word in (name.split(".", 1)[0], argument):
            if word in PARAM_NAMES:
                return TensorKind.PARAM
            if word in OPT_NAMES:
                return TensorKind.OPT
        return TensorKind.INPUT

    kinds = {name: kind(name, argument) for name, argument in inputs.items()}
    if all(k == TensorKind.INPUT for k in kinds.values()):
        return None
    # An output named by argument and leaf finds its input's kind (memory_kinds).
    qualified = {f"{argument}.{name}": kinds[name] for name, argument in inputs.items()
                 if argument and not name.startswith(argument + ".")}
    return {**qualified, **kinds}


def memory_kinds(report: Report, kinds: Mapping[str, TensorKind], has_grads: bool
                 ) -> dict[MemoryKind, int | None]:
    """Bytes per device by kind. `kinds` maps input names to PARAM, OPT or INPUT (unnamed
    inputs are params, as Workload.kinds says); `has_grads` says whether the program has
    gradient constraint points to find its gradients at."""
    out: dict[MemoryKind, int | None] = dict.fromkeys(MemoryKind, 0)
    inputs = {t.name for t in report.tensors if t.kind == TensorRole.INPUT}
    outputs = [t for t in report.tensors if t.kind == TensorRole.OUTPUT]
    aliases = input_output_aliases(report.optimized_hlo)
    allocated = allocations_of(report)
    # The root is a tuple of the outputs ({i}: output i), or the one output itself ({}).
    in_donated = {t.name for i, t in enumerate(outputs)
                  if (i,) in aliases or (len(outputs) == 1 and () in aliases)}
    for t in report.tensors:
        if t.memory_kind != "device":
            continue     # offloaded: in host memory, not the device's (Memory.host_*)
        size = allocated.get(t.name, t.bytes_per_device)
        if t.kind == TensorRole.INPUT:
            out[_KIND_OF.get(kind_of(kinds, t.name), MemoryKind.OTHER)] += size
        elif t.kind == TensorRole.OUTPUT and t.name not in in_donated:
            m = _OUTPUT_NAME.match(t.name)
            # Named like an input, or as `kinds` names one (`kinds_by_name`: `model.w`).
            like = m.group(1) if m and (m.group(1) in inputs or m.group(1) in kinds) else None
            kind = (_KIND_OF.get(kind_of(kinds, like), MemoryKind.OTHER) if like
                    else MemoryKind.OTHER)
            out[kind] += size
    grads = gradients(report.tensors)
    if grads:
        out[MemoryKind.GRADS] = sum(t.bytes_per_device for t in grads.values())
    elif has_grads:
        out[MemoryKind.GRADS] = None     # not located: never a guess
    out[MemoryKind.ACTIVATIONS] = report.memory.temporaries if report.memory is not None else 0
    return out


def gradients(tensors: tuple[TensorInfo, ...]) -> dict[str, TensorInfo]:
    """Constraint point -> the gradient tensor pinned there (`grad.<param>`), once each."""
    out: dict[str, TensorInfo] = {}
    for t in tensors:
        if t.kind != TensorRole.INTERMEDIATE:
            continue
        m = _GRAD_POINT.search(t.op_name)
        if m and m.group(1) not in out:
            out[m.group(1)] = t
    return out


def allocated_bytes(shape: str) -> int | None:
    """The bytes one array of `shape` (an HLO shape with its layout) takes in memory where its
    layout is tiled: `bf16[64,32]{0,1:T(8,128)(2,1)}` -> 8192 (4096 bytes of values); None
    where the layout has no tiles (the shape times the dtype is then what it takes) or the text
    is not one array.

    A TPU lays every array out in tiles and allocates whole tiles. The layout's first tile pads
    the array's most minor dimensions, in the layout's minor-to-major order (dimensions the
    array lacks count as 1: a scalar fills a whole tile), up to multiples of the tile's; the
    other dimensions count as they are. Later tiles (`(2,1)`, which packs two 16-bit rows into
    one word) subdivide the first and add no padding, as XLA sizes tiled shapes."""
    arrays = parse_shape(shape)
    if len(arrays) != 1 or shape.lstrip().startswith("(") or "{" not in shape:
        return None
    layout = shape[shape.index("{") + 1:shape.rindex("}")]
    order, _, rest = layout.partition(":")
    tile = _TILE.search(rest)
    array = arrays[0]
    minor_to_major = ints(order)
    if tile is None or sorted(minor_to_major) != list(range(len(array.dims))):
        return None
    tile_dims = ints(tile.group(1))
    elements = 1
    for i, step in enumerate(reversed(tile_dims)):    # the tile's last dim is the most minor
        size = array.dims[minor_to_major[i]] if i < len(array.dims) else 1
        elements *= -(-size // step) * step
    for i in range(len(tile_dims), len(array.dims)):
        elements *= array.dims[minor_to_major[i]]
    bits = _ELEMENT_BITS.search(rest)
    if bits:
        return -(-elements * int(bits.group(1)) // 8)
    return ceil(elements * HLO_DTYPE_BYTES.get(array.dtype, 4))


def entry_shapes(text: str) -> tuple[list[str], list[str]] | None:
    """Each entry parameter's and each result element's shape with its layout, from the
    module's `entry_computation_layout={(p0, p1)->(r0, r1)}`; None when it has none."""
    at = text.find("entry_computation_layout={")
    if at < 0:
        return None
    start = at + len("entry_computation_layout=")
    try:
        body = _COMMENT.sub("", text[start + 1:close_bracket(text, start) - 1])
        params_end = close_bracket(body, 0)
        result = body[params_end:].lstrip().removeprefix("->").strip()
        results = (split_top_level(result[1:close_bracket(result, 0) - 1])
                   if result.startswith("(") else [result])
    except ValueError:
        return None                  # a header cut short: no layouts to read
    params = split_top_level(body[1:params_end - 1])
    return [p.strip() for p in params if p.strip()], [r.strip() for r in results if r.strip()]


def allocations_of(report: Report) -> dict[str, int]:
    """Input or output name -> its bytes as the compiler allocates them, for those whose entry
    layout is tiled (allocated_bytes); the others are their shape times their dtype. HLO
    parameter i is input i, result element i output i; nothing where the counts differ."""
    entry = entry_shapes(report.optimized_hlo)
    if entry is None:
        return {}
    out: dict[str, int] = {}
    for role, shapes in zip((TensorRole.INPUT, TensorRole.OUTPUT), entry, strict=True):
        tensors = [t for t in report.tensors if t.kind == role]
        if len(tensors) != len(shapes):
            continue
        for t, shape in zip(tensors, shapes, strict=True):
            if (size := allocated_bytes(shape)) is not None:
                out[t.name] = size
    return out


def outside_kinds(memory: Memory) -> int:
    """Bytes of `memory.total` that no kind holds: total - (params + optimizer + activations +
    other). What the memory analysis counts and no tensor is, the output tuple's table of
    pointers (an allocation of its own, among the outputs); 0 for a report not split by kind."""
    if memory.kinds is None:
        return 0
    k = memory.by_kind
    return memory.total - sum(int(k[key] or 0) for key in _SUMMED)


def tuple_tables(report: Report) -> int | None:
    """Bytes of the outputs' tuple tables: the held output allocations that hold a tuple, from
    the memory timeline (the buffer assignment); None without one."""
    t = report.memory_timeline
    if t is None:
        return None
    return sum(b.bytes for b in t.peak_buffers
               if b.kind == BufferKind.OUTPUT and b.dtype == "tuple")


def padding_note(report: Report) -> str | None:
    """Where the target's layouts pad the inputs: their values' bytes against their
    allocations (which the memory analysis' arguments and the sizes by kind count); None where
    nothing is padded."""
    allocated = allocations_of(report)
    ins = [t for t in report.tensors
           if t.kind == TensorRole.INPUT and t.memory_kind == "device"]
    values = sum(t.bytes_per_device for t in ins)
    held = sum(allocated.get(t.name, t.bytes_per_device) for t in ins)
    if held == values:
        return None
    return (f"The inputs' values are {format_bytes(values)} per device; laid out in the "
            f"target's tiles (each array's two most minor dimensions padded up to a whole "
            f"tile, e.g. 8 x 128 elements) they take {format_bytes(held)}, which is what the "
            "memory analysis counts as arguments and what the sizes by kind count")


def kinds_note(report: Report) -> str | None:
    """What `Memory.total` holds beyond the sizes by kind (outside_kinds), in words; None where
    they add up."""
    m = report.memory
    if m is None or m.kinds is None or (rest := outside_kinds(m)) == 0:
        return None
    if rest > 0 and rest == tuple_tables(report):
        return (f"{format_bytes(rest)} of the total is the output tuple's table of pointers to "
                "the outputs: an allocation of its own, which the memory analysis counts among "
                "the outputs and no tensor holds")
    if rest > 0:
        return (f"The sizes by kind add up to {format_bytes(m.total - rest)}, "
                f"{format_bytes(rest)} less than the total {format_bytes(m.total)}: bytes the "
                "memory analysis counts that no tensor of the report holds")
    return (f"The sizes by kind add up to {format_bytes(m.total - rest)}, "
            f"{format_bytes(-rest)} more than the total {format_bytes(m.total)}: the tensors' "
            "layouts take more than the memory analysis counts")


def peak_note(report: Report) -> str | None:
    """Why the peak over the program (Report.memory_timeline) is above the memory analysis'
    total, term by term; None where it is not (or either is missing).

    The peak holds the inputs', outputs' and constants' allocations all the program and the
    temporaries live at its moment; the total is arguments + outputs - aliased + temporaries.
    So the peak - the total is the constants (the memory analysis has no figure for them), plus
    the temporaries live at the peak less the analysis' temporaries, plus any difference in the
    held allocations. The analysis' temporaries are the compiler's own figure: libtpu's is not
    the size of the HBM temporaries' allocation of its buffer assignment (it read 0 for a
    program holding 1.45 MiB there), so the peak may be above the total by temporaries."""
    m, t = report.memory, report.memory_timeline
    if m is None or t is None or t.peak.bytes <= m.total:
        return None
    terms = []
    if t.constants:
        terms.append(f"{format_bytes(t.constants)} of constants, held the whole program, which "
                     "the memory analysis counts in none of its figures")
    if (extra := t.peak.temporaries - m.temporaries) > 0:
        terms.append(f"{format_bytes(t.peak.temporaries)} of temporaries live at the peak in the "
                     f"buffer assignment, where the memory analysis reports "
                     f"{format_bytes(m.temporaries)} of temporaries"
                     + (f" ({format_bytes(extra)} more)" if m.temporaries else ""))
    if (held := t.arguments + t.outputs - (m.arguments + m.outputs - m.aliased)) > 0:
        terms.append(f"{format_bytes(held)} more of the inputs' and outputs' allocations than "
                     "the memory analysis counts")
    said = (f"The peak over the program, {format_bytes(t.peak.bytes)}, is above the memory "
            f"analysis' total, {format_bytes(m.total)}, by {format_bytes(t.peak.bytes - m.total)}")
    return said + (": " + "; and ".join(terms) if terms else "")
