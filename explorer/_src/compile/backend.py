"""Inside a compile worker: compile one request with jax, return raw text and numbers.

The caller traced and lowered the program (explorer/_src/compile/lowering.py); here its
StableHLO is compiled over the request's mesh of real or topology-described devices, the
compiler's dumps are read, and, where asked, it runs on a chip to be measured. It returns plain
data (strings, numbers, tuples) so that everything after it, the readers and the Report, is
pure and testable.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from math import prod
from typing import Any, NamedTuple

from explorer._src.compile.device_profile import profile_calls
from explorer._src.compile.gpu import GpuTopology, gpu_devices
from explorer._src.compile.ir_context import shared_ir_context
from explorer._src.compile.lowering import LoweredProgram, OutputShape, jax_axis_types
from explorer._src.compile.multislice import hybrid_device_array
from explorer._src.compile.protocol import CompileResult, Measurement, OutOfMemory, TensorLayout
from explorer._src.compile.tpu import host_bounds, tpu_backend
from explorer._src.hlo.module import input_output_aliases, parse_module
from explorer._src.hlo.sharding import tuple_parts
from explorer._src.spec.tensor import TensorSpec

# The passes whose input module we read (XLA dumps the module before and after each pass the
# regex matches, as "...after_<previous pass>.before_<pass>.txt"):
# - spmd-partitioning (tpu-spmd-partitioning on a TPU): the module just before it carries the
#   propagated `sharding={...}` of every instruction, which compiled.as_text() no longer has;
# - all-reduce-promotion, the first of the CPU backend's dtype promotions, which move bf16 and
#   f16 collectives as f32 (measured on jax 0.10.2, in this order: all-reduce-promotion for
#   all-reduces, float-normalization-bf16 for all-gathers, all-to-alls and permutes;
#   change-op-data-type for dots): the module before it has each collective in the program's
#   own dtype. Dumped for a CPU compile only: a GPU or a TPU moves the program's dtypes.
# The regex is short words, not the passes' names: XLA builds an RE2 of it anew at every pass
# it runs (DumpHloModuleBetweenPassesIfEnabled, twice a pass), at a cost that grows with its
# length: 11% of the CPU time of a small MLP's compile with the four full pass names it once
# had, 4% with "partitioning|promotion" (perf, docs/performance.md). Among the passes of jax
# 0.10.2's CPU, GPU and TPU pipelines, "partitioning" is in the name of (tpu-)spmd-partitioning
# only, "promotion" in that of all-reduce-promotion only; a pass matched besides would only
# cost a file.
PARTITIONING_WORD = "partitioning"
PROMOTION_WORD = "promotion"
FIRST_PROMOTION = "all-reduce-promotion"
# With xla_dump_to set, XLA also writes the optimized module's buffer assignment and live
# ranges ("...after_optimizations-live-range.txt"), on the CPU and for a TPU alike, and for a
# TPU even when the program does not fit its memory.
# - shardy-verbose: Shardy records, while it propagates, where each mesh axis of every value's
#   sharding came from and the steps that moved it, and writes its module after propagation
#   with them (`shardy/module_*/02.after_propagation.mlir`; the compiler drops them before
#   the modules above). It costs about a tenth more of an analysis (docs/performance.md), so
#   it is in the regex only when the request asks for origins.
SHARDY_VERBOSE = "shardy-verbose"
# - cross-slice-rewrites: libtpu's pass (first in its Megascale pipeline, again in its final
#   scheduler's) that splits a multi-slice program's collectives at the slices' edges into an
#   in-slice collective and DCN send/recv pairs, dropping their metadata; the module before
#   its first run has each collective whole, with the op_name and line that made it. Dumped
#   only for a multi-slice compile.
CROSS_SLICE = "cross-slice-rewrites"
# - xla_dump_hlo_as_proto: each dumped module also as an HloProto; the optimized one
#   ("...after_optimizations.hlo.pb") carries the buffer assignment with it, which XProf's
#   memory and graph viewers read (explorer/_src/report/xprof.py); the executable's own
#   HloModuleProto (runtime_executable().hlo_modules()) has none.
_DUMP_OPTIONS = {"xla_dump_hlo_as_text": True, "xla_dump_hlo_as_proto": True}
# Shardy's module after propagation, in the dump folder.
AFTER_PROPAGATION = os.path.join("shardy", "module_*", "02.after_propagation.mlir")


def dump_options(folder: str, origins: bool, multislice: bool = False,
                 unpromoted: bool = True) -> dict:
    """The compiler options of one compile's dump into `folder`: the module before
    spmd-partitioning; with `unpromoted` (a CPU compile), the module before the CPU's dtype
    promotions; with `origins`, Shardy's module after propagation; for a `multislice` program,
    the module before libtpu split its collectives over the slices."""
    passes = [PARTITIONING_WORD]
    if unpromoted:
        passes.append(PROMOTION_WORD)
    if origins:
        passes.append(SHARDY_VERBOSE)
    if multislice:
        passes.append(CROSS_SLICE)
    return {"xla_dump_to": folder, "xla_dump_hlo_pass_re": "|".join(passes), **_DUMP_OPTIONS}


def _is_spec(x) -> bool:
    return isinstance(x, TensorSpec)


def tpu_devices(topology: str, slices: int = 1):
    """The devices of a TPU topology such as "v5e:4x4", for compiling without a TPU (libtpu);
    of `slices` such slices joined by the data-center network when more than one (jax's
    MegaScale devices, each with its `slice_index`)."""
    from jax.experimental import topologies

    # v4 chips have two TensorCores; "megacore" makes each chip one device, as jax does on v4.
    extra = {"chip_config_name": "megacore"} if topology.startswith("v4:") else {}
    if slices > 1:
        extra["num_slices"] = slices
    return list(topologies.get_topology_desc(topology, "tpu", **extra,
                                             chips_per_host_bounds=host_bounds(topology))
                .devices)


def build_mesh(mesh_spec, devices=None, slices_per_axis: tuple[int, ...] = ()):
    """The jax Mesh over `devices` (the worker's own when None), in their order reshaped
    row-major; over several TPU slices (`slices_per_axis`), the hybrid mesh of
    explorer/_src/compile/multislice.py."""
    import jax
    import numpy as np
    from jax.sharding import Mesh

    devices = jax.devices() if devices is None else devices
    if len(devices) < mesh_spec.device_count:
        raise RuntimeError(f"mesh {mesh_spec.text()!r} needs {mesh_spec.device_count} devices "
                           f"but this worker has {len(devices)} ({devices[0].platform}); "
                           "make the mesh match the machine's devices")
    if slices_per_axis:
        array = hybrid_device_array(devices, mesh_spec.sizes, slices_per_axis)
    else:
        array = np.array(devices[:mesh_spec.device_count]).reshape(mesh_spec.sizes)
    # Each axis of the type the caller traced it with (a mixed mesh's too).
    return Mesh(array, mesh_spec.names, axis_types=jax_axis_types(mesh_spec))


def _struct(spec: TensorSpec, mesh):
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    # The device's memory is jax's default: naming it only for offloaded inputs keeps every
    # other program as it was.
    kind = None if spec.memory_kind == "device" else spec.memory_kind
    sharding = NamedSharding(mesh, PartitionSpec(*spec.spec), memory_kind=kind)
    return jax.ShapeDtypeStruct(spec.shape, jnp.dtype(spec.dtype), sharding=sharding)


def _offload_notes(specs: list[TensorSpec], platform: str) -> list[str]:
    """What the compile cannot show of the inputs placed in host memory (memory kind
    pinned_host), said rather than shown as if it held. The caller lowered the program over an
    abstract mesh, which keeps its inputs' memory kinds in its module (as jax does on a real
    GPU), and the compiler honours them; only the CPU has no host memory apart."""
    offloaded = [s.name for s in specs if s.memory_kind != "device"]
    if not offloaded or platform != "cpu":
        return []
    names = ", ".join(offloaded[:3]) + (f" and {len(offloaded) - 3} more"
                                        if len(offloaded) > 3 else "")
    return [f"the inputs {names} live in host memory, but the CPU has one memory: its "
            "memory analysis counts them as device memory. Compile for a TPU target for "
            "the device's and the host's memory apart (a GPU target, for offloaded "
            "activations)"]


# What jax's private conversion of a sharding to XLA's HloSharding raises for a sharding with
# no HLO form (TypeError, ValueError, NotImplementedError), or once a jaxlib renames it
# (AttributeError). Anything else is a bug and propagates.
_NO_HLO_SHARDING = (AttributeError, NotImplementedError, TypeError, ValueError)


def _hlo_sharding_text(sharding, ndim: int, notes: list[str]) -> str | None:
    """XLA's HloSharding text of a jax sharding, or None when it has no HLO form: the Report
    then says the placement is unknown rather than guessing one, and `notes` says why."""
    try:
        return str(sharding._to_xla_hlo_sharding(ndim))
    except _NO_HLO_SHARDING as e:
        notes.append(f"a {type(sharding).__name__} has no HloSharding text that jax would "
                     f"give ({type(e).__name__}: {e}); its placement is left unknown")
        return None


def _devices(tpu_topology: str | None, gpu: GpuTopology | None, slices: int = 1):
    """The devices to compile for: a TPU slice's (or `slices` slices') or GPUs' (ahead of
    time, none present), else the worker's own (fake CPU devices, or the machine's)."""
    if tpu_topology:
        return tpu_devices(tpu_topology, slices)
    if gpu is not None:
        return gpu_devices(gpu)
    return None


def compile_request(program: LoweredProgram, args, mesh_spec, partitioner: str,
                    tpu_topology: str | None = None, measure: bool = False,
                    measure_cap: int = 1 << 30, gpu: GpuTopology | None = None,
                    origins: bool = False, donate: tuple[int, ...] = (),
                    slices_per_axis: tuple[int, ...] = ()) -> CompileResult:
    """Compile `program`, the module the caller traced and lowered
    (explorer/_src/compile/lowering.py), on `args`, its flat inputs, over the mesh.
    `slices_per_axis`: several slices of `tpu_topology`, as CompileRequest says."""
    import jax

    from explorer._src.compile import jax_private

    ahead_of_time = bool(tpu_topology) or gpu is not None
    slices = prod(slices_per_axis) if tpu_topology and slices_per_axis else 1
    mesh = build_mesh(mesh_spec, _devices(tpu_topology, gpu, slices),
                      slices_per_axis if slices > 1 else ())
    leaves = jax.tree.leaves(args, is_leaf=_is_spec)
    notes = [*program.notes, *_unused_notes([s.name for s in leaves], program.unused)]
    jax.config.update("jax_use_shardy_partitioner", partitioner == "shardy")
    structs = jax.tree.map(lambda s: _struct(s, mesh), args, is_leaf=_is_spec)
    notes += _offload_notes(leaves, mesh.devices.flat[0].platform)
    dump = tempfile.mkdtemp(prefix="explorer-dump-", dir="/dev/shm" if os.path.isdir(
        "/dev/shm") else None)
    # The module before the dtype promotions: only the CPU backend promotes collectives (a GPU
    # compiler runs passes of the same names on other ops; libtpu runs none).
    unpromoted = not ahead_of_time
    try:
        with _compiler_messages() as warnings, _donation_warnings(bool(donate)):
            t0 = time.perf_counter()
            # HLO parameter i is the i-th input tensor (the caller lowered with keep_unused).
            # Donated inputs (positions in the flat `args`) may hold outputs: the CPU, and the
            # GPU and TPU compilers ahead of time, all honour it in jax 0.10
            # (tests/compile/test_donation.py).
            with shared_ir_context():
                context = jax_private.new_ir_context()
            lowered = jax_private.lowered_module(program.stablehlo, context,
                                                 jax.tree.leaves(structs), program.outputs,
                                                 mesh, donate, program.platform)
            t1 = time.perf_counter()
            compiled, out_of_memory = _compile(lowered, dump, dump_options(
                dump, origins, multislice=slices > 1, unpromoted=unpromoted))
            t2 = time.perf_counter()
        dumped = _read_dump(dump, compiled, unpromoted=unpromoted, origins=origins,
                            multislice=slices > 1)
    finally:
        shutil.rmtree(dump, ignore_errors=True)

    notes += _unaliased_notes([leaves[i].name for i in donate], donate, dumped.optimized)
    notes += [n for n in (jax_private.jax_note(jax.__version__),) if n]
    inputs, outputs = _layouts(leaves, structs, lowered.out_info, compiled, dumped.propagated,
                               notes, program.outputs)
    # Said only when a run was asked: the note is the answer to `measure`.
    measured = (_measurement(compiled, args, mesh, measure_cap, tpu_topology, gpu,
                             calls_back=program.calls_back,
                             donate=donate)
                if measure else None)
    return CompileResult(
        measured=measured,
        stablehlo=lowered.as_text(),
        propagated=dumped.propagated,
        propagated_mlir=dumped.propagated_mlir,
        optimized=dumped.optimized,
        inputs=inputs,
        outputs=outputs,
        memory=_memory(compiled, notes) if compiled is not None else None,
        cost=_cost(compiled, notes) if compiled is not None else None,
        lower_s=t1 - t0 + program.lower_s,
        compile_s=t2 - t1,
        backend=(tpu_backend(tpu_topology, slices) if tpu_topology else "gpu"
                 if gpu is not None else jax.devices()[0].platform),
        device_kind=mesh.devices.flat[0].device_kind,
        ahead_of_time=ahead_of_time,
        notes=tuple(notes),
        warnings=tuple(warnings),
        unpromoted=dumped.unpromoted,
        peak_live=dumped.peak_live,
        buffer_values=dumped.buffer_values,
        live_ranges=dumped.live_ranges,
        hlo_proto=dumped.hlo_proto,
        out_of_memory=out_of_memory,
        jax_version=jax.__version__,
        compiler=compiler_package(bool(tpu_topology), gpu is not None),
        **(_slice_layout(mesh, dumped.before_slicing) if slices > 1 else {}),
    )


def compiler_package(tpu: bool, gpu: bool) -> str:
    """The package whose compiler wrote the program, with its version: libtpu for a TPU
    slice, jax's CUDA plugin for NVIDIA GPUs, jaxlib (XLA's CPU compiler) otherwise."""
    from importlib import metadata

    dist = "libtpu" if tpu else "jax-cuda12-plugin" if gpu else "jaxlib"
    try:
        return f"{dist} {metadata.version(dist)}"
    except metadata.PackageNotFoundError:
        return dist


def _unused_notes(names: list[str], unused: tuple[int, ...]) -> list[str]:
    """What the compile kept that jax.jit, by default, would have dropped: the inputs the
    program never reads. They are compiled as parameters (keep_unused=True, so that HLO
    parameter i is input i) and their bytes count in the arguments' memory."""
    if not unused:
        return []
    left = [names[i] for i in unused]
    shown = ", ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
    size = "their bytes count" if len(left) > 1 else "its bytes count"
    return [f"the program never reads the input{'s' if len(left) > 1 else ''} {shown}: jax.jit "
            "would drop such inputs (its default, keep_unused=False); the explorer keeps every "
            f"input as a parameter, so {size} in the arguments' memory"]


def _compile(lowered, dump: str, options: dict) -> tuple[Any, OutOfMemory | None]:
    """The executable of `lowered`, the compiler dumping into `dump` as `options` (of
    dump_options) say, and None; or, for a program too big for the device, None and the
    OutOfMemory: that is an answer, and what the compiler wrote before it gave up is kept."""
    import jax

    try:
        return lowered.compile(compiler_options=options), None
    except jax.errors.JaxRuntimeError as e:
        if not is_out_of_memory(str(e)) or not _files(dump, "*after_optimizations.txt"):
            raise
        return None, OutOfMemory(str(e))


class _Dumped(NamedTuple):
    """What a compile's dump folder holds that the executable does not say (the CompileResult
    fields of the same names)."""

    propagated: str
    unpromoted: str
    peak_live: str
    buffer_values: str
    live_ranges: str
    hlo_proto: bytes
    optimized: str
    propagated_mlir: str | None
    before_slicing: str


def _read_dump(dump: str, compiled, unpromoted: bool, origins: bool,
               multislice: bool) -> _Dumped:
    """Read the dump folder before it is removed; the optimized module is the executable's
    text, or the dumped one where the compile ran out of memory (`compiled` None)."""
    # CPU: "...cpu_after_optimizations-live-range.txt"; TPU: "...after_optimizations-...".
    live_range = _read_first(dump, "*after_optimizations-live-range.txt")
    peak_live = peak_section(live_range)
    return _Dumped(
        # CPU: "...before_spmd-partitioning.txt"; TPU: "...before_tpu-spmd-partitioning.txt".
        propagated=_read_first(dump, "*before_*spmd-partitioning.txt"),
        unpromoted=_read_first_before(dump, (FIRST_PROMOTION,)) if unpromoted else "",
        peak_live=peak_live,
        buffer_values=value_lines(_read_first(
            dump, "*after_optimizations-buffer-assignment.txt")) if peak_live else "",
        live_ranges=schedule_sections(live_range),
        hlo_proto=_read_first_bytes(dump, "*after_optimizations.hlo.pb"),
        optimized=(_read_first(dump, "*after_optimizations.txt") if compiled is None
                   else compiled.as_text()),
        propagated_mlir=_read_first(dump, AFTER_PROPAGATION) if origins else None,
        before_slicing=_read_first_before(dump, (CROSS_SLICE,)) if multislice else "")


def _layouts(leaves: list[TensorSpec], structs, out_info, compiled, propagated: str,
             notes: list[str], named: tuple[OutputShape, ...]
             ) -> tuple[tuple[TensorLayout, ...], tuple[TensorLayout, ...]]:
    """The inputs' and the outputs' layouts, as the executable places them; the outputs named
    as `named` (the lowered program's) says."""
    import jax

    out_info = jax.tree_util.tree_flatten_with_path(out_info)[0]
    names = [o.name for o in named]
    if compiled is not None:
        in_shardings = jax.tree.leaves(compiled.input_shardings[0])
        out_texts = [_hlo_sharding_text(sh, len(info.shape), notes) for (_, info), sh in zip(
            out_info, jax.tree.leaves(compiled.output_shardings), strict=True)]
    else:
        # No executable to ask: the inputs are placed as requested, and the outputs as the
        # partitioner's propagation left the entry's root.
        in_shardings = [st.sharding for st in jax.tree.leaves(structs)]
        out_texts = root_shardings(propagated, len(out_info))
    inputs = tuple(TensorLayout(s.name, s.shape, s.dtype, _hlo_sharding_text(sh, s.rank, notes))
                   for s, sh in zip(leaves, in_shardings, strict=True))
    outputs = tuple(TensorLayout(name, tuple(info.shape), str(info.dtype), text)
                    for name, (_, info), text in zip(names, out_info, out_texts, strict=True))
    return inputs, outputs


def _measurement(compiled, args, mesh, cap: int, tpu_topology: str | None,
                 gpu: GpuTopology | None, calls_back: bool = False,
                 donate: tuple[int, ...] = ()) -> Measurement:
    """The answer to `measure`: a run of the compiled program, or why none could be made."""
    if calls_back:
        # Its callbacks are functions of the process that traced it: run here, they would
        # jump into memory that is not theirs.
        return Measurement(note="not measured: the program calls back into the process that "
                                "traced it (jax.debug.print, pure_callback or io_callback), "
                                "which the compile worker cannot run; remove the callbacks to "
                                "time it")
    if tpu_topology or gpu is not None:
        return Measurement(note="not measured: compiled ahead of time for a "
                                f"{'TPU' if tpu_topology else 'GPU'} that is not here")
    if compiled is None:
        return Measurement(note="not measured: the program does not fit the device's memory")
    return _measure(compiled, args, mesh, cap, donate)


def _slice_layout(mesh, before_slicing: str) -> dict:
    """The CompileResult fields of a multi-slice compile: each mesh position's slice and device
    id, and the module before libtpu split the collectives over the slices."""
    flat = list(mesh.devices.flat)
    return {"slice_of": tuple(int(d.slice_index) for d in flat),
            "device_ids": tuple(int(d.id) for d in flat), "before_slicing": before_slicing}


@contextmanager
def _donation_warnings(donating: bool) -> Iterator[None]:
    """Keep jax's "Some donated buffers were not usable" warning (the CPU's, naming only
    shapes) out of the worker's log: `_unaliased_notes` says the same by input name, on every
    backend. Other warnings are shown as they would have been."""

    if not donating:
        yield
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        if "donated buffers were not usable" not in str(w.message):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _unaliased_notes(names: list[str], donate: tuple[int, ...], optimized: str) -> list[str]:
    """What the compile did not do of a donation: the donated inputs (`names`, at parameter
    numbers `donate`) whose buffer no output took, read from the optimized module's
    input_output_alias. XLA reuses a donated buffer only for an output of its shape, dtype and
    layout (sharding included)."""
    aliased = set(input_output_aliases(optimized).values())
    left = [n for n, i in zip(names, donate, strict=True) if i not in aliased]
    if not left:
        return []
    shown = ", ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
    return [f"the donated input{'s' if len(left) > 1 else ''} {shown}: no output has "
            f"{'their' if len(left) > 1 else 'its'} shape, dtype and layout, so the compiler "
            "reused no buffer of them and they are held beside the outputs"]


# XLA's words for a program over the device's memory: the TPU compiler's "RESOURCE_EXHAUSTED:
# Ran out of memory on HBM, ..." (ahead of time) or "... in memory space hbm" (on a TPU).
_OUT_OF_MEMORY = re.compile(r"RESOURCE_EXHAUSTED:.*\b(out of memory|memory space)\b",
                            re.IGNORECASE | re.DOTALL)


def is_out_of_memory(message: str) -> bool:
    return bool(_OUT_OF_MEMORY.search(message))


_PEAK = re.compile(r"^\s*Live ranges at \d+ \(peak\):\s*$")
_LIVE_ENTRY = re.compile(r"^\s+\S.*: \d+ bytes")


def peak_section(live_range: str) -> str:
    """The "Live ranges at N (peak):" header of an HloLiveRange dump and the buffer lines under
    it ("  name{index}: BYTES bytes (cumulative: ...)"); "" when there is none. The rest of the
    dump lists every value of the program, which the reader does not need."""
    lines = live_range.splitlines()
    for i, line in enumerate(lines):
        if _PEAK.match(line):
            j = i + 1
            while j < len(lines) and _LIVE_ENTRY.match(lines[j]):
                j += 1
            return "\n".join(lines[i:j])
    return ""


def schedule_sections(live_range: str) -> str:
    """The "InstructionSequence:" and "BufferLiveRange:" sections of an HloLiveRange dump: the
    program's instructions in schedule order ("    3:fusion.2", loop bodies flattened in), and
    each value's first and last position ("    fusion.2{}:3-7"); "" when there are none. What
    follows them (the peak and its stack breakdown) is left out."""
    lines = live_range.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if line.strip() == "InstructionSequence:"), None)
    if start is None:
        return ""
    end = next((j for j in range(start, len(lines)) if _PEAK.match(lines[j])), len(lines))
    return "\n".join(lines[start:end])


def value_lines(buffer_assignment: str) -> str:
    """The "allocation N: ..." headers of a buffer-assignment dump and the "value: <ID NAME
    @POS> (size=BYTES,offset=OFFSET): SHAPE" lines under each: where each HLO value lives, with
    the bytes allocated for it (a TPU's padding included, which the live ranges leave out) and
    its shape with layout and memory space."""
    return "\n".join(line.strip() for line in buffer_assignment.splitlines()
                     if line.lstrip().startswith(("value: <", "allocation ")))


def root_shardings(module_text: str, count: int) -> list[str | None]:
    """The HloSharding text of each of the `count` outputs, read from the `sharding=` of the
    entry computation's root in `module_text` (a tuple sharding `{{...}, {...}}` for several
    outputs); None for each output where it does not say."""
    if not module_text:
        return [None] * count
    module = parse_module(module_text)
    roots = [i for i in module.computations.get(module.entry, []) if i.is_root]
    text = roots[0].sharding if roots else None
    if text is None:
        return [None] * count
    if not text.startswith("{{"):
        return [text] * count       # one sharding for the whole root: each output's
    parts = tuple_parts(text)
    return parts if len(parts) == count else [None] * count


@contextmanager
def _compiler_messages() -> Iterator[list[str]]:
    """Collect the warnings and errors XLA and Shardy print while the block runs.

    They log from C++ straight to file descriptor 2, past Python's sys.stderr, so fd 2 points
    at a temporary file for the duration; what was written is then copied to the real stderr
    (the worker's log) and its warnings and errors go into the yielded list."""
    messages: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield messages
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text = capture.read()
            os.write(2, text)
            messages.extend(compiler_messages(text.decode(errors="replace")))


# An absl log line: severity, date (MMDD), time ("09:02:24.749320", or "00:00:1796115794.53"
# with the seconds since the epoch), thread, file:line] message.
_ABSL = re.compile(r"([IWEF])\d{4} [\d:.]+\s+\d+\s+[^\s\]]+\] ?(.*)")
# MLIR and other diagnostics without absl's prefix, e.g. "loc(...): warning: ...".
_DIAGNOSTIC = re.compile(r".*\b(warning|error):", re.IGNORECASE)
# Printed whatever the program, so they say nothing about it: start-up chatter of absl and
# libtpu (which looks for a TPU that an ahead-of-time compile does not need), and the notice
# that comes with every GSPMD compile (the user chose gspmd).
_NOISE = (
    "All log messages before absl::InitializeLog()",
    "Logging before InitGoogle()",
    "could not determine TPU",
    "TPU_WORKER_HOSTNAMES",
    "TPU_ACCELERATOR_TYPE",
    "GSPMD sharding propagation is going to be deprecated",
)


def compiler_messages(text: str) -> list[str]:
    """The warnings and errors in what XLA and Shardy printed, one entry per message.

    absl lines of severity W, E or F start a message (E and F marked "error: "); lines
    without a prefix continue the message before them; info lines are dropped, as are
    messages printed whatever the program (_NOISE)."""
    messages: list[str | None] = []       # None: a dropped message whose continuation to drop
    for line in text.splitlines():
        m = _ABSL.match(line)
        if m:
            severity, message = m.groups()
            keep = severity != "I" and not any(n in message for n in _NOISE)
            messages.append(("error: " if severity in "EF" else "") + message if keep else None)
        elif _DIAGNOSTIC.match(line) and not any(n in line for n in _NOISE):
            messages.append(line.strip())
        elif messages and messages[-1] is not None and line.strip():
            messages[-1] += "\n" + line.rstrip()
    return [m for m in messages if m]


def _files(folder: str, pattern: str) -> list[str]:
    return sorted(glob.glob(os.path.join(folder, pattern)))


def _read_first(folder: str, pattern: str) -> str:
    files = _files(folder, pattern)
    if not files:
        return ""
    with open(files[0]) as f:
        return f.read()


def _read_first_bytes(folder: str, pattern: str) -> bytes:
    files = _files(folder, pattern)
    if not files:
        return b""
    with open(files[0], "rb") as f:
        return f.read()


def _read_first_before(folder: str, passes: tuple[str, ...]) -> str:
    """The module dumped just before the earliest of `passes` to run; XLA numbers its dumps
    in the order they were written ("module_0000.jit_f.0002.<pipeline>.after_<a>.before_<b>
    .txt"), so the earliest is the one with the lowest number."""
    files = [f for p in passes for f in _files(folder, f"*.before_{p}.txt")]
    numbered = [(int(m.group(1)), f) for f in files
                if (m := re.search(r"\.(\d+)\.[^.]+\.after_.*\.before_", os.path.basename(f)))]
    if not numbered:
        return ""
    with open(min(numbered)[1]) as f:
        return f.read()


def _analysis_errors():
    """What a compiled executable's memory or cost analysis raises where the backend has none:
    XLA's UNIMPLEMENTED (a JaxRuntimeError), or a method a jaxlib no longer has."""
    import jax

    return (jax.errors.JaxRuntimeError, NotImplementedError, AttributeError)


def _memory(compiled, notes: list[str]) -> dict | None:
    try:
        m = compiled.memory_analysis()
    except _analysis_errors() as e:
        notes.append(f"the compiler gave no memory analysis ({type(e).__name__}: {e})")
        return None
    if m is None:
        notes.append("the compiler gave no memory analysis for this backend")
        return None
    return {"arguments": m.argument_size_in_bytes, "outputs": m.output_size_in_bytes,
            "aliased": m.alias_size_in_bytes, "temporaries": m.temp_size_in_bytes,
            "generated_code": m.generated_code_size_in_bytes,
            # Host memory (memory kind pinned_host) of offloaded inputs, outputs and
            # activations; zero where the compiler keeps one memory (CPU) or nothing is
            # offloaded.
            "host_arguments": m.host_argument_size_in_bytes,
            "host_outputs": m.host_output_size_in_bytes,
            "host_temporaries": m.host_temp_size_in_bytes}


def _cost(compiled, notes: list[str]) -> dict | None:
    try:
        c = compiled.cost_analysis()
    except _analysis_errors() as e:
        notes.append(f"the compiler gave no cost analysis ({type(e).__name__}: {e})")
        return None
    if isinstance(c, list | tuple):  # older jax returned one dict per program
        c = c[0] if c else None
    return {k: float(v) for k, v in c.items()} if c else None


MEASURE_WARMUP = 2
MEASURE_RUNS = 5
MEASURE_PROFILED = 3     # calls run under jax's profiler on an accelerator, for op times


def _measure(compiled, args, mesh, cap: int, donate: tuple[int, ...] = ()) -> Measurement:
    """Run the compiled program on random inputs: warm-up, then the median of several runs;
    each call gets its own copy of the `donate`d inputs (positions in `args`).

    On fake CPU devices this times the CPU, and says so; it is never a prediction."""
    import jax

    leaves = jax.tree.leaves(args, is_leaf=_is_spec)
    per_device = sum(s.nbytes // _split(s, mesh) for s in leaves)
    device = mesh.devices.flat[0]
    where = f"{mesh.devices.size} {device.platform} device(s) of this host"
    cap, of_what = _run_cap(device, cap)
    if per_device > cap:
        return Measurement(note=f"not measured: inputs need {per_device} bytes per device, "
                                f"over {of_what} ({cap} bytes)")
    try:
        return _timed_runs(compiled, args, leaves, mesh, donate, where)
    except Exception as e:      # noqa: BLE001 - jax's runtime error type is private
        if not is_out_of_memory(str(e)):
            raise
        return Measurement(note="not measured: the run ran out of device memory (its inputs, "
                                "a fresh copy of each donated one per call, and the program's "
                                f"own buffers): {str(e).splitlines()[0][:300]}")


def _run_cap(device, cap: int) -> tuple[int, str]:
    """The most input bytes per device a measured run may make, and what that limit is. On an
    accelerator its own memory (the compile has already said whether the program fits); on
    CPU devices, which all share this host's memory, `cap`."""
    if device.platform != "cpu":
        limit = (device.memory_stats() or {}).get("bytes_limit")
        if limit:
            return int(limit), "the device's memory"
    return cap, "the cap on a run of CPU devices"


def _timed_runs(compiled, args, leaves, mesh, donate: tuple[int, ...],
                where: str) -> Measurement:
    """Warm-up, then the median of MEASURE_RUNS timed calls; on an accelerator, the device's
    own times from a profile of MEASURE_PROFILED more."""
    import statistics

    import jax

    key = iter(jax.random.split(jax.random.key(0), max(len(leaves), 1)))
    arrays = jax.tree.map(lambda s: _random(s, mesh, next(key)), args, is_leaf=_is_spec)
    fresh = _fresh_inputs(arrays, donate)
    for _ in range(MEASURE_WARMUP):
        jax.block_until_ready(compiled(*fresh()))
    times = []
    for _ in range(MEASURE_RUNS):
        inputs = jax.block_until_ready(fresh())      # made before the clock starts
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*inputs))
        times.append(time.perf_counter() - t0)
    measured = Measurement(seconds=statistics.median(times), runs=MEASURE_RUNS, on=where)
    if mesh.devices.flat[0].platform == "cpu":
        return measured      # a CPU run has no device plane to read
    # Every profiled call's inputs are made before the profile starts, so that no copy runs
    # on the device beside the program's own instructions.
    prepared = iter([jax.block_until_ready(fresh()) for _ in range(MEASURE_PROFILED)])
    profile = profile_calls(lambda: compiled(*next(prepared)), MEASURE_PROFILED)
    if profile is None:
        return replace(measured, note="the run's profile held no device times")
    return replace(measured, device_seconds=profile.module_seconds,
                   op_seconds=dict(profile.op_seconds), events=profile.call_events)


def _fresh_inputs(arrays: tuple, donate: tuple[int, ...]) -> Callable[[], tuple]:
    """The inputs of one call: `arrays`, with a new copy of each donated one (a position in
    `arrays`), whose buffer the program takes over, as a training loop hands each step the
    state the step before returned; a donated buffer passed again is refused ("Buffer has been
    deleted or donated")."""
    import jax

    if not donate:
        return lambda: arrays
    return lambda: tuple(jax.device_put(a, a.sharding, may_alias=False) if i in donate else a
                         for i, a in enumerate(arrays))


def _split(spec: TensorSpec, mesh) -> int:
    """Into how many pieces the spec splits the tensor on this mesh."""
    from explorer._src.spec.tensor import entry_axes

    n = 1
    for entry in spec.spec:
        for axis in entry_axes(entry):
            n *= mesh.shape[axis]
    return n


def _random(spec: TensorSpec, mesh, key):
    """A random array made directly in its sharded layout (never whole on the host)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    sharding = NamedSharding(mesh, PartitionSpec(*spec.spec))
    dtype = jnp.dtype(spec.dtype)
    if jnp.issubdtype(dtype, jnp.floating):
        make = lambda k: jax.random.normal(k, spec.shape, dtype)  # noqa: E731
    elif dtype == jnp.bool_:
        make = lambda k: jax.random.bernoulli(k, 0.5, spec.shape)  # noqa: E731
    else:   # integers are often indices (token ids): keep them small and valid
        make = lambda k: jax.random.randint(k, spec.shape, 0, 2, dtype)  # noqa: E731
    return jax.jit(make, out_shardings=sharding)(key)
