"""Turn a worker's raw artifacts (texts and numbers) into a Report. Pure: no jax.

Collectives come from the optimized HLO, shardings of intermediates from the module the
partitioner saw after propagation, source lines from the modules' stack-frame tables.
"""

from __future__ import annotations

import linecache
from collections.abc import Mapping
from dataclasses import replace
from math import prod

from explorer.compile.protocol import CELL_NAME, CompileResult, Measurement
from explorer.hlo.collectives import CollectiveKind, collective_kind
from explorer.hlo.groups import axes_of_groups, axes_of_pairs, device_groups, source_target_pairs
from explorer.hlo.module import (
    HLO_DTYPE_BYTES,
    HLO_TO_NUMPY,
    HloModule,
    Instruction,
    parse_module,
    short_path,
)
from explorer.hlo.sharding import tiling_from_hlo
from explorer.report.report import (
    Collective,
    Cost,
    Memory,
    Report,
    TensorInfo,
    TensorRole,
    Timing,
)
from explorer.report.why import explain_collectives
from explorer.spec.layout import shard_shape, spec_from_tiling
from explorer.spec.mesh import MeshSpec
from explorer.spec.tensor import DTYPE_BYTES

# Instructions of the propagated module that are not tensors worth showing.
_NOT_TENSORS = {"parameter", "constant", "tuple", "get-tuple-element", "after-all", "token"}


def build_report(raw: CompileResult, mesh: MeshSpec, partitioner: str) -> Report:
    optimized = parse_module(raw.optimized)
    propagated = parse_module(raw.propagated) if raw.propagated else None
    unread: list[str] = []     # what the readers could not read, said in the Report
    collectives = tuple(read_collectives(optimized, mesh, unread))
    collectives = with_reasons(collectives, optimized, propagated, mesh, _input_names(raw))
    tensors = (
        _io_tensors(raw.inputs, TensorRole.INPUT, mesh, unread)
        + _io_tensors(raw.outputs, TensorRole.OUTPUT, mesh, unread)
        + (read_intermediates(propagated, mesh, unread) if propagated else [])
    )
    notes = [] if propagated else ["the compiler ran no partitioning pass, so intermediates "
                                   "are not listed"]
    return Report(
        mesh=mesh,
        partitioner=partitioner,
        backend=raw.backend,
        collectives=collectives,
        tensors=tuple(tensors),
        memory=Memory(**raw.memory) if raw.memory else None,
        cost=_cost(raw.cost, collectives, notes),
        timing=_timing(raw),
        stablehlo=raw.stablehlo,
        propagated_hlo=raw.propagated,
        optimized_hlo=raw.optimized,
        notes=tuple(unread),
        warnings=raw.warnings,
    )


def source_label(module: HloModule, instr: Instruction) -> str:
    """Where an instruction came from, as people read it: `file.py:12`, or `In [3], line 2` for
    a notebook cell."""
    src = module.source(instr)
    if not src:
        return ""
    if CELL_NAME.match(src[0]):     # a notebook cell, named as its prompt: "In [3], line 2"
        return f"{src[0]}, line {src[1]}"
    return f"{short_path(src[0])}:{src[1]}"


def _source_text(module: HloModule, instr: Instruction) -> str:
    """The line of code at the instruction's source location, stripped; read here, in the
    parent process, from the absolute path the compiler recorded ("" for a file that is not
    readable, such as `<dynamic-code>`)."""
    src = module.source(instr)
    if not src or not src[1]:
        return ""
    return linecache.getline(src[0], src[1]).strip()


def _input_names(raw: CompileResult) -> list[str]:
    """The program's input names in HLO parameter order, from the worker's output."""
    return [entry.name for entry in raw.inputs]


def with_reasons(collectives, optimized: HloModule, propagated: HloModule | None,
                 mesh: MeshSpec, inputs: list[str]) -> tuple[Collective, ...]:
    """The collectives, each with why it exists, read from the two modules."""
    whys = explain_collectives(optimized, propagated, mesh, inputs)
    return tuple(replace(c, why=whys.get(c.hlo_name)) for c in collectives)


def read_collectives(module: HloModule, mesh: MeshSpec, unread: list[str] | None = None
                     ) -> list[Collective]:
    """One Collective per collective instruction; an async -start/-done pair counts once.

    A collective whose device groups cannot be read is still reported, with no groups and no
    axes, and `unread` gets a note that says so."""
    names = module.by_name()
    done_of = {}
    wrapped = set()   # computations run by async-start: their collectives are async
    for instr in module.instructions():
        if instr.opcode.endswith("-done") and instr.operands:
            done_of[instr.operands[0]] = instr
        if instr.opcode == "async-start" and instr.attr("calls"):
            wrapped.add(instr.attr("calls").lstrip("%"))
    out = []
    for instr in module.instructions():
        kind, is_async = collective_kind(instr.opcode)
        if kind is None:
            continue
        is_async = is_async or instr.computation in wrapped
        operands = [names[o] for o in instr.operands if o in names]
        result = done_of[instr.name].arrays if instr.name in done_of else instr.arrays
        if is_async and instr.name not in done_of and len(result) > 1:
            result = result[len(result) // 2:]   # start ops return (operands..., results...)
        operand_bytes = sum(a.nbytes for o in operands for a in o.arrays)
        result_bytes = sum(a.nbytes for a in result)
        try:
            if kind is CollectiveKind.COLLECTIVE_PERMUTE:
                pairs = source_target_pairs(instr.attrs) or []
                groups = _components(pairs)
                axes = axes_of_pairs(pairs, mesh.sizes, mesh.names)
            else:
                groups = device_groups(instr.attrs, mesh.device_count) or []
                axes = axes_of_groups(groups, mesh.sizes, mesh.names)
        except ValueError as e:   # report the collective anyway, and say what is missing
            groups, axes = [], ()
            if unread is not None:
                unread.append(f"{kind} {instr.name}: its device groups could not be read ({e}); "
                              "its axes are not shown")
        first = result[0] if result else None
        out.append(Collective(
            kind=kind,
            axes=tuple(axes),
            group_size=max((len(g) for g in groups), default=1),
            shape=first.dims if first else (),
            dtype=HLO_TO_NUMPY.get(first.dtype, first.dtype) if first else "",
            bytes=max(operand_bytes, result_bytes),
            parts=len(result),
            is_async=is_async,
            op_name=instr.op_name,
            source=source_label(module, instr),
            source_text=_source_text(module, instr),
            hlo_name=instr.name,
            computation=instr.computation,
            operand_dtype=_upcast_from(operands, first.dtype if first else "", module, names),
            groups=tuple(tuple(g) for g in groups),
        ))
    return out


_NARROW_FLOATS = ("bf16", "f16", "f8e4m3fn", "f8e5m2")


def _upcast_from(operands: list[Instruction], dtype: str, module: HloModule, names) -> str:
    """The narrower float dtype the program had before a convert fed this collective, or "".

    The CPU backend converts bf16 to f32 around collectives (directly, or inside a fusion such
    as `wrapped_convert` or `convert_convert_fusion`); a prediction for a TPU or GPU should count
    the program's dtype, not the CPU's."""
    width = HLO_DTYPE_BYTES.get(dtype, 4)
    seen = []
    for o in operands:
        converts = [o] if o.opcode == "convert" else []
        called = o.attr("calls") if o.opcode in ("fusion", "call") else None
        if called:
            converts += [i for i in module.computations.get(called.lstrip("%"), [])
                         if i.opcode == "convert"]
        for c in converts:
            seen += [a.dtype for a in c.arrays]
            seen += [a.dtype for src in c.operands if src in names for a in names[src].arrays]
    narrow = [d for d in seen if d in _NARROW_FLOATS and HLO_DTYPE_BYTES[d] < width]
    if not narrow:
        return ""
    d = min(narrow, key=lambda d: HLO_DTYPE_BYTES[d])
    return HLO_TO_NUMPY.get(d, d)


def _components(pairs: list[tuple[int, int]]) -> list[list[int]]:
    """Devices that exchange data through a permute, as connected groups (a ring is one group)."""
    parent: dict[int, int] = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for s, t in pairs:
        parent[find(s)] = find(t)
    groups: dict[int, list[int]] = {}
    for d in sorted(parent):
        groups.setdefault(find(d), []).append(d)
    return list(groups.values())


def _tensor(name, kind, shape, dtype, sharding, mesh, itemsize, op_name="", source="",
            source_text=""):
    tiling = tiling_from_hlo(sharding, len(shape), mesh.device_count)
    per_device = shard_shape(tiling, shape)
    spec = spec_from_tiling(tiling, mesh.names, mesh.sizes)
    if spec is not None:   # one entry per dimension, as the spec editors show it
        spec = tuple(spec) + (None,) * (len(shape) - len(spec))
    return TensorInfo(
        name=name, kind=kind, shape=tuple(shape), dtype=dtype, sharding=sharding,
        spec=spec,
        shard_shape=tuple(per_device), replicas=tiling.replicas,
        bytes_per_device=int(prod(per_device) * itemsize), op_name=op_name, source=source,
        source_text=source_text)


def _io_tensors(entries, role: TensorRole, mesh: MeshSpec, unread: list[str]
                ) -> list[TensorInfo]:
    """Inputs or outputs; one whose sharding the worker could not read (None) is left out and
    said, never drawn as a guess."""
    out = []
    for name, shape, dtype, sharding in entries:
        if sharding is None:
            unread.append(f"{role} {name!r}: jax gave no HLO sharding for it, so its placement "
                          "is not shown")
            continue
        out.append(_tensor(name, role, shape, dtype, sharding, mesh, DTYPE_BYTES.get(dtype, 4)))
    return out


def read_intermediates(module: HloModule, mesh: MeshSpec, unread: list[str] | None = None
                       ) -> list[TensorInfo]:
    """Every array the program computes, with the sharding propagation gave it."""
    out = []
    skipped = []
    for instr in module.instructions():
        if instr.opcode in _NOT_TENSORS or (instr.is_root and instr.computation == module.entry):
            continue
        sharding = instr.sharding
        arrays = instr.arrays
        if sharding is None or len(arrays) != 1 or sharding.startswith("{{"):
            continue
        a = arrays[0]
        try:
            tensor = _tensor(instr.name, TensorRole.INTERMEDIATE, a.dims,
                             HLO_TO_NUMPY.get(a.dtype, a.dtype),
                             sharding, mesh, HLO_DTYPE_BYTES.get(a.dtype, 4),
                             op_name=instr.op_name, source=source_label(module, instr),
                             source_text=_source_text(module, instr))
        except ValueError:   # e.g. {unknown}: the partitioner decided nothing to draw
            skipped.append(f"{instr.name} {sharding}")
            continue
        out.append(tensor)
    if skipped and unread is not None:
        unread.append(f"{len(skipped)} intermediate(s) carry a sharding that names no device "
                      f"layout (e.g. {skipped[0]}) and are not listed")
    return out


def _cost(cost: Mapping[str, float] | None, collectives, notes: list[str]) -> Cost:
    total = sum(c.bytes for c in collectives)
    if not cost:
        return Cost(None, None, None, total, None,
                    tuple(notes + ["XLA's cost_analysis() gave no numbers for this program"]))
    missing = [k for k in ("flops", "bytes accessed") if k not in cost]
    if missing:
        notes = notes + [f"cost_analysis() has no {', '.join(missing)}"]
    optimal = cost.get("optimal_seconds")
    if optimal is not None and optimal < 0:
        # XLA sums its per-instruction estimates and adds -1 for each op it cannot cost (custom
        # calls, for one): a negative total means "unknown", never a time.
        notes = notes + [f"XLA's own step estimate is unknown: it could not cost some "
                         f"instructions (optimal_seconds = {optimal:g}, its marker for that)"]
        optimal = None
    elif optimal == 0.0:
        optimal = None       # the CPU backend has no rates configured: no estimate, not zero
    return Cost(cost.get("flops"), cost.get("bytes accessed"), cost.get("transcendentals"),
                total, optimal, tuple(notes))


def _timing(raw: CompileResult) -> Timing:
    measured = raw.measured or Measurement()
    return Timing(raw.lower_s, raw.compile_s, measured_s=measured.seconds,
                  measured_on=measured.on, measure_note=measured.note)
