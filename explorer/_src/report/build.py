"""Turn a worker's raw artifacts (texts and numbers) into a Report. Pure: no jax.

Collectives come from the optimized HLO, shardings of intermediates from the module the
partitioner saw after propagation, source lines from the modules' stack-frame tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from math import prod

from explorer._src.compile.protocol import CompileResult, Measurement, Partitioner
from explorer._src.cost.mapping import Tier
from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.hlo.groups import (
    axes_of_groups,
    axes_of_pairs,
    connected_groups,
    device_groups,
    ring_direction,
    source_target_pairs,
)
from explorer._src.hlo.megascale import SliceLayout
from explorer._src.hlo.module import (
    HLO_DTYPE_BYTES,
    HLO_TO_NUMPY,
    HOST_MEMORY_SPACE,
    HloModule,
    Instruction,
    entry_memory_spaces,
    parse_module,
)
from explorer._src.hlo.schedule import cached_schedule, schedule_work
from explorer._src.hlo.sharding import tiling_from_hlo
from explorer._src.report.buffers import top_buffers
from explorer._src.report.cross_slice import dcn_legs, in_module_order, with_originals
from explorer._src.report.dtypes import collectives_of, program_dtypes
from explorer._src.report.memory_timeline import memory_timeline
from explorer._src.report.oom import memory_verdict
from explorer._src.report.origins import Origins, origins_by_tensor
from explorer._src.report.report import (
    Collective,
    Cost,
    Memory,
    MemoryVerdict,
    Report,
    TensorInfo,
    TensorRole,
    Timing,
)
from explorer._src.report.source import line_of_code, source_of
from explorer._src.report.warnings import link_warning, uncostable_warnings
from explorer._src.report.why import explain_collectives
from explorer._src.spec.layout import Tiling, shard_shape, spec_from_tiling, tiling_from_spec
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import DTYPE_BYTES, Entry
from explorer._src.units import format_bytes

# Instructions of the propagated module that are not tensors worth showing.
_NOT_TENSORS = {"parameter", "constant", "tuple", "get-tuple-element", "after-all", "token"}


def build_report(raw: CompileResult, mesh: MeshSpec, partitioner: Partitioner,
                 requested: Mapping[str, tuple[Entry, ...]] | None = None) -> Report:
    """The Report of one compile. `requested`: each input's spec as the user wrote it, which
    the Report keeps where the compiled placement is the one it asks for (an HLO sharding
    cannot say which size-1 axes a spec named: `P(('fsdp','sp'),'tp')` with sp=1 reads back
    as `P('fsdp','tp')`, and code copied from that would stop splitting over sp once it
    grows)."""
    optimized = parse_module(raw.optimized)
    propagated = parse_module(raw.propagated) if raw.propagated else None
    unread: list[str] = []     # what the readers could not read, said in the Report
    unpromoted = parse_module(raw.unpromoted) if raw.unpromoted else None
    layout = SliceLayout(raw.slice_of, raw.device_ids) if raw.slice_of else None
    collectives = tuple(read_collectives(optimized, mesh, unread, unpromoted, layout))
    origins, unknown, origin_notes = origins_by_tensor(
        raw.propagated_mlir, propagated, partitioner, _input_names(raw),
        [o.name for o in raw.outputs])
    unread += origin_notes
    if layout is None:
        collectives = with_reasons(collectives, optimized, propagated, mesh,
                                   _input_names(raw), origins)
    else:
        # Several TPU slices: the DCN legs beside the in-slice collectives, all with the line
        # and reason of the program collective they are part of
        # (explorer/_src/report/cross_slice.py).
        collectives = in_module_order(optimized, collectives + tuple(
            dcn_legs(optimized, layout, mesh, unread)))
        if raw.before_slicing:
            collectives = with_originals(collectives, optimized,
                                         parse_module(raw.before_slicing), propagated, layout,
                                         mesh, _input_names(raw), origins, unread)
        else:
            unread.append("the module before libtpu split the collectives at the slices' edges "
                          "was not written, so their lines and reasons are not shown")
    collectives = _with_runs(collectives, raw.optimized, optimized, unread)
    spaces = entry_memory_spaces(raw.optimized) or ((), ())
    tensors = (
        _io_tensors(raw.inputs, TensorRole.INPUT, mesh, unread, spaces[0], requested or {})
        + _io_tensors(raw.outputs, TensorRole.OUTPUT, mesh, unread, spaces[1])
        + (read_intermediates(propagated, mesh, unread) if propagated else [])
    )
    tensors = [replace(t, origins=origins.get(t.name, unknown)) for t in tensors]
    notes = [] if propagated else ["the compiler ran no partitioning pass, so intermediates "
                                   "are not listed"]
    verdict = memory_verdict(raw.out_of_memory.message) if raw.out_of_memory else None
    if verdict is not None:
        unread.insert(0, _refused(verdict))
    return Report(
        mesh=mesh,
        partitioner=partitioner,
        backend=raw.backend,
        collectives=collectives,
        tensors=tuple(tensors),
        memory=Memory(**raw.memory) if raw.memory else None,
        cost=_cost(raw.cost, collectives, notes, raw.optimized, optimized),
        timing=_timing(raw),
        stablehlo=raw.stablehlo,
        propagated_hlo=raw.propagated,
        optimized_hlo=raw.optimized,
        notes=tuple(unread) + raw.notes,
        device_kind=raw.device_kind,
        ahead_of_time=raw.ahead_of_time,
        jax_version=raw.jax_version,
        compiler=raw.compiler,
        warnings=tuple(link_warning(w, propagated, optimized) for w in raw.warnings)
        + uncostable_warnings(optimized),
        top_buffers=(top_buffers(raw.peak_live, optimized, raw.buffer_values, _input_names(raw))
                     if raw.peak_live else ()),
        memory_timeline=memory_timeline(raw.live_ranges, raw.buffer_values, optimized,
                                        _input_names(raw)),
        memory_verdict=verdict,
        hlo_proto=raw.hlo_proto,
    )


def _refused(verdict: MemoryVerdict) -> str:
    """The Report note of a program the compiler refused for want of memory."""
    if verdict.required is not None and verdict.available is not None:
        size = (f": it needs {format_bytes(verdict.required)} of {verdict.memory} per device "
                f"({verdict.what}), the device has {format_bytes(verdict.available)}")
    else:
        size = ""
    return (f"the program does not fit the device's memory{size}. The compiler stopped before "
            "it finished, so XLA's memory and cost analyses are missing; the collectives, "
            "placement and largest buffers are read from the optimized module and live ranges "
            "it wrote before it stopped")


def _input_names(raw: CompileResult) -> list[str]:
    """The program's input names in HLO parameter order, from the worker's output."""
    return [entry.name for entry in raw.inputs]


def with_reasons(collectives, optimized: HloModule, propagated: HloModule | None,
                 mesh: MeshSpec, inputs: list[str],
                 origins: Mapping[str, Origins] | None = None) -> tuple[Collective, ...]:
    """The collectives, each with why it exists, read from the two modules (and a reshard's
    with the origins of the two layouts that clashed, where `origins` has them)."""
    whys = explain_collectives(optimized, propagated, mesh, inputs, origins)
    return tuple(replace(c, why=whys.get(c.hlo_name)) for c in collectives)


def _located(module: HloModule, instr: Instruction) -> Instruction:
    """The instruction whose line of code a collective is shown at: its own where its
    metadata has one; else the nearest user that has one (through a -done, tuple elements
    and fusions), the op it was made for. The XLA of jax 0.12 gives a collective that moves
    an input that input's metadata (op_name="w1", no line), where 0.10's gave the
    consumer's."""
    if module.source(instr):
        return instr
    users = module.users
    todo, seen = list(users.get(instr.name, ())), {instr.name}
    while todo and len(seen) < 32:
        user = todo.pop(0)
        if user.name in seen:
            continue
        seen.add(user.name)
        if module.source(user):
            return user
        todo += users.get(user.name, ())
    return instr


def read_collectives(module: HloModule, mesh: MeshSpec, unread: list[str] | None = None,
                     unpromoted: HloModule | None = None,
                     slices: SliceLayout | None = None) -> list[Collective]:
    """One Collective per collective instruction; an async -start/-done pair counts once.

    A collective whose device groups cannot be read is still reported, with no groups and no
    axes, and `unread` gets a note that says so. `unpromoted` is the module before the CPU
    backend's dtype promotions, where each collective has the program's dtype; None where no
    promotion ran (the optimized dtypes are then the program's). `slices`: the module is one
    slice's program of several (libtpu's multi-slice compile), whose groups name the slice's
    partition ids: they are read as every slice's copy, in mesh positions, and each collective
    uses the links inside the slices only."""
    local = len(slices.members[0]) if slices is not None else mesh.device_count
    names = module.by_name()
    placed = collectives_of(module)
    dtypes = program_dtypes(placed, unpromoted)
    out = []
    for instr, kind, is_async, result in placed:
        located = _located(module, instr)
        operands = [names[o] for o in instr.operands if o in names]
        if kind is CollectiveKind.RAGGED_ALL_TO_ALL:
            # Its other operands are the output buffer it writes into and the offsets and
            # sizes; what it sends is at most its input, the V priced (an upper bound).
            operands = operands[:1]
        operand_bytes = sum(a.nbytes for o in operands for a in o.arrays)
        result_bytes = sum(a.nbytes for a in result)
        direction = ""
        try:
            if kind is CollectiveKind.COLLECTIVE_PERMUTE:
                pairs = source_target_pairs(instr.attrs) or []
                if slices is not None:
                    pairs = slices.everywhere_pairs(pairs)
                groups = connected_groups(pairs)
                axes = axes_of_pairs(pairs, mesh.sizes, mesh.names)
                direction = ring_direction(pairs, mesh.sizes, mesh.names)
            else:
                groups = device_groups(instr.attrs, local) or []
                if slices is not None:
                    groups = slices.everywhere(groups)
                # One slice's part of a collective libtpu cut at the slices' edges.
                axes = axes_of_groups(groups, mesh.sizes, mesh.names,
                                      within=slices.members if slices is not None else None)
        except ValueError as e:   # report the collective anyway, and say what is missing
            groups, axes = [], ()
            if unread is not None:
                unread.append(f"{kind} {instr.name}: its device groups could not be read ({e}); "
                              "its axes are not shown")
        first = result[0] if result else None
        program = dtypes[instr.name]
        op_arrays = [a for o in operands for a in o.arrays]
        if len(op_arrays) != len(result):
            op_arrays = result
        # V of each part in the program's dtype: the larger of operand and result elements.
        part_bytes = tuple(int(max(prod(o.dims), prod(r.dims)) * HLO_DTYPE_BYTES.get(d, 4))
                           for o, r, d in zip(op_arrays, result, program, strict=True))
        upcast = [d for d, r in zip(program, result, strict=True) if d != r.dtype]
        narrowest = min(upcast, key=lambda d: HLO_DTYPE_BYTES.get(d, 4)) if upcast else ""
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
            source=source_of(module, located),
            source_text=line_of_code(module, located),
            hlo_name=instr.name,
            computation=instr.computation,
            operand_dtype=HLO_TO_NUMPY.get(narrowest, narrowest),
            groups=tuple(tuple(g) for g in groups),
            program_dtypes=tuple(HLO_TO_NUMPY.get(d, d) for d in program),
            program_part_bytes=part_bytes,
            part_shapes=tuple(r.dims for r in result),
            direction=direction,
            tier=Tier.INSIDE if slices is not None else Tier.ALL,
        ))
    return out


# A few hundred: a tiling lists every device, ~70 kB on 2048 devices.
@lru_cache(maxsize=256)
def _placement(sharding: str, rank: int, mesh: MeshSpec) -> tuple[Tiling, tuple | None]:
    """The tiling of an HLO sharding and the spec that yields it (None if none does), one
    entry per dimension. Remembered: most of a program's arrays share a few shardings."""
    tiling = tiling_from_hlo(sharding, rank, mesh.device_count)
    spec = spec_from_tiling(tiling, mesh.names, mesh.sizes)
    if spec is not None:   # one entry per dimension, as the spec editors show it
        spec = tuple(spec) + (None,) * (rank - len(spec))
    return tiling, spec


def _tensor(name, kind, shape, dtype, sharding, mesh, itemsize, op_name="", source="",
            source_text=""):
    tiling, spec = _placement(sharding, len(shape), mesh)
    per_device = shard_shape(tiling, shape)
    return TensorInfo(
        name=name, kind=kind, shape=tuple(shape), dtype=dtype, sharding=sharding,
        spec=spec,
        shard_shape=tuple(per_device), replicas=tiling.replicas,
        bytes_per_device=int(prod(per_device) * itemsize), op_name=op_name, source=source,
        source_text=source_text)


def _as_written(t: TensorInfo, written: tuple[Entry, ...] | None, mesh: MeshSpec
                ) -> TensorInfo:
    """`t` with the spec the user wrote for it, where that spec yields its very tiling."""
    rank = len(t.shape)
    if written is None or t.spec is None or len(written) > rank:
        return t
    spec = tuple(written) + (None,) * (rank - len(written))
    tiling, _ = _placement(t.sharding, rank, mesh)
    try:
        same = tiling_from_spec(spec, mesh.names, mesh.sizes, rank) == tiling
    except ValueError:      # a spec over other axes than this mesh's: not what was compiled
        return t
    return replace(t, spec=spec) if same else t


def _io_tensors(entries, role: TensorRole, mesh: MeshSpec, unread: list[str],
                spaces: tuple[int, ...] = (),
                written: Mapping[str, tuple[Entry, ...]] | None = None) -> list[TensorInfo]:
    """Inputs or outputs; one whose sharding the worker could not read (None) is left out and
    said, never drawn as a guess. `spaces`: each one's memory space in the entry layout;
    `written`: specs as the user wrote them, kept where they give the compiled placement."""
    out = []
    for i, (name, shape, dtype, sharding) in enumerate(entries):
        if sharding is None:
            unread.append(f"{role} {name!r}: jax gave no HLO sharding for it, so its placement "
                          "is not shown")
            continue
        t = _as_written(_tensor(name, role, shape, dtype, sharding, mesh,
                                DTYPE_BYTES.get(dtype, 4)), (written or {}).get(name), mesh)
        if i < len(spaces) and spaces[i] == HOST_MEMORY_SPACE:
            t = replace(t, memory_kind="pinned_host")
        out.append(t)
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
                             op_name=instr.op_name, source=source_of(module, instr),
                             source_text=line_of_code(module, instr))
        except ValueError:   # e.g. {unknown}: the partitioner decided nothing to draw
            skipped.append(f"{instr.name} {sharding}")
            continue
        out.append(tensor)
    if skipped and unread is not None:
        unread.append(f"{len(skipped)} intermediate(s) carry a sharding that names no device "
                      f"layout (e.g. {skipped[0]}) and are not listed")
    return out


def _with_runs(collectives: tuple[Collective, ...], text: str, optimized: HloModule,
               unread: list[str]) -> tuple[Collective, ...]:
    """Each collective with the times it runs per step, from the loops of the compiled
    schedule around it (a scanned layer's collectives run once per layer)."""
    if not collectives:
        return collectives
    # Kept: pricing the Report for a target (explorer._src.report.predict) reads the same schedule.
    work = schedule_work(cached_schedule(text, optimized))
    if work.uncounted_loops:
        unread.append(f"the trip count of loop {work.uncounted_loops[0]!r} could not be read: "
                      "the collectives in it are counted once per step")
    return tuple(replace(c, runs=work.collective_runs.get(c.hlo_name, 1)) for c in collectives)


def _cost(cost: Mapping[str, float] | None, collectives, notes: list[str], text: str,
          optimized: HloModule) -> Cost:
    total = sum(c.bytes * c.runs for c in collectives)
    if not cost:
        # XLA's GPU compiler gives no cost analysis without a GPU: the FLOPs and bytes are then
        # the schedule reader's, summed over the scheduled instructions (loops times their trip
        # counts), the numbers the prediction uses.
        work = schedule_work(cached_schedule(text, optimized))
        flops = sum(f * n for f, _, n in work.compute)
        moved = sum(b * n for _, b, n in work.compute)
        return Cost(flops or None, moved or None, None, total, None, tuple(notes + [
            "XLA's cost_analysis() gave no numbers for this program; its FLOPs and bytes "
            "accessed are summed from the scheduled instructions instead"]),
            from_schedule=True)
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
                  measured_on=measured.on, measure_note=measured.note,
                  worker_start_s=raw.worker_start_s,
                  measured_device_s=measured.device_seconds,
                  measured_ops=dict(measured.op_seconds), measured_events=measured.events)
