"""Which compiler a request gets: the target's own where it is installed, else fake CPU devices.

A target names hardware (`h100-8x8`, `tpu-v5p-4x4x4`). Its own compiler writes the program that
hardware would run: XLA's GPU compiler through jax's CUDA plugin (the `gpu` extra), the TPU
compiler through libtpu (the `tpu` extra), both with no device present. The CPU backend's
program differs (it upcasts bf16 around collectives, writes a reduce-scatter as an all-reduce
and a slice, runs no collective asynchronously, and fuses and assigns buffers its own way), so a
CPU compile priced on a GPU or TPU is an approximation, and the plan says why it was made.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from math import prod

from explorer._src.compile.gpu import (
    GPU_EXTRA_NOTE,
    GpuTopology,
    gpu_plugin_installed,
    gpu_topology,
)
from explorer._src.compile.protocol import Pong, WorkerKey
from explorer._src.compile.tpu import libtpu_installed
from explorer._src.cost.catalog.names import get_target, targets, tpu_slices_of, tpu_topology_of
from explorer._src.cost.catalog.tpu import SLICE_AXIS
from explorer._src.cost.catalog.types import Target, TargetFamily
from explorer._src.cost.mapping import AxisMapping, default_mapping
from explorer._src.errors import ExplorerError, InputError, choices
from explorer._src.quiet_jax import accelerator_platform
from explorer._src.spec.bounds import show
from explorer._src.spec.mesh import MeshSpec


class CompileFor(StrEnum):
    """What a request with a target compiles for."""

    TARGET = "target"    # the target's own compiler where installed, else fake CPU devices
    CPU = "cpu"          # fake CPU devices always (the one explicit switch)


TPU_EXTRA_NOTE = ("install the tpu extra for the TPU compiler's own program: pip install "
                  "'sharding-explorer[tpu]' (about 700 MB; no TPU needed)")


@dataclass(frozen=True)
class CompilePlan:
    """The worker that compiles a request, what it compiles for, and, when a target was chosen
    but its compiler is not used, why (`approximate`): the sentence a user reads next to the
    numbers."""

    worker: WorkerKey
    tpu_topology: str | None = None
    gpu: GpuTopology | None = None
    approximate: str = ""
    # Several slices of `tpu_topology`: how many each mesh axis spans, in mesh order (the axis
    # mapping's `slice` axis; CompileRequest.slices_per_axis); () for one slice.
    slices_per_axis: tuple[int, ...] = ()


def check_compile_for(value) -> CompileFor:
    try:
        return CompileFor(value)
    except ValueError:
        raise InputError(f"compile_for={show(value)} is not one of "
                         f"{choices(c.value for c in CompileFor)}: 'target' compiles for the "
                         "target's hardware where its compiler is installed, 'cpu' on fake "
                         "CPU devices") from None


def compile_plan(mesh: MeshSpec, target: str | Target | None, compile_for=CompileFor.TARGET,
                 *, tpu_topology: str | None = None, real_devices: bool = False,
                 mapping: AxisMapping | None = None) -> CompilePlan:
    """The compile a request gets. An explicit `tpu_topology` or `real_devices` wins; else a
    GPU or TPU target compiles with its own compiler when it is installed, and on fake CPU
    devices otherwise (with the reason). A TPU target of several slices compiles them all
    through libtpu, its mesh laid out as the axis `mapping` (api/request.py's check_target
    made it; None: the default one) places mesh axes on its `slice` axis. The target has been
    checked against the mesh (one device per chip) before."""
    compile_for = check_compile_for(compile_for)
    if real_devices:
        return CompilePlan(WorkerKey.real())
    if tpu_topology:
        return CompilePlan(WorkerKey.tpu(), tpu_topology=tpu_topology)
    cpu = WorkerKey.fake_cpu(mesh.device_count)
    if target is None:
        return CompilePlan(cpu)
    t = get_target(target)
    if t.family not in (TargetFamily.GPU, TargetFamily.TPU):
        return CompilePlan(cpu)
    if compile_for is CompileFor.CPU:
        return CompilePlan(cpu, approximate="compile_for='cpu' was asked")
    if t.family is TargetFamily.GPU:
        if not gpu_plugin_installed():
            return CompilePlan(cpu, approximate=GPU_EXTRA_NOTE)
        return CompilePlan(WorkerKey.gpu(), gpu=gpu_topology(t))
    topology, slices = tpu_slices_of(t)
    if not libtpu_installed():
        return CompilePlan(cpu, approximate=TPU_EXTRA_NOTE)
    if slices == 1:
        return CompilePlan(WorkerKey.tpu(), tpu_topology=topology)
    placed = default_mapping(t, mesh.names, mesh.sizes) if mapping is None else mapping
    return CompilePlan(WorkerKey.tpu(), tpu_topology=topology,
                       slices_per_axis=slices_per_axis(placed))


def slices_per_axis(mapping: AxisMapping) -> tuple[int, ...]:
    """How many slices each mesh axis spans under `mapping`: the factors of the target's
    `slice` axis it holds, 1 for an axis inside the slices."""
    return tuple(prod(s.factor for s in segments if s.axis.name == SLICE_AXIS)
                 for segments in mapping.placement)




# XLA's CPU compiler refuses some opcodes outright (ragged-all-to-all in jax 0.10).
_CPU_REFUSES = re.compile(r"HLO opcode `([\w-]+)` is not supported by XLA:CPU")


def cpu_refusal(message: str, mesh: MeshSpec) -> str | None:
    """For a CPU compile refused because XLA:CPU lacks one of the program's opcodes: what to
    do instead, with targets of the mesh's device count whose own compiler can take it (the
    GPU's and the TPU's, where installed, else the extra to install). None otherwise."""
    m = _CPU_REFUSES.search(message)
    if m is None:
        return None
    offers = []
    for family, installed, extra in (
            (TargetFamily.GPU, gpu_plugin_installed(), GPU_EXTRA_NOTE),
            (TargetFamily.TPU, libtpu_installed(), TPU_EXTRA_NOTE)):
        fits = [t for t in targets().values()
                if t.family is family and t.chips == mesh.device_count
                and (family is TargetFamily.GPU or tpu_topology_of(t) is not None)]
        fits.sort(key=lambda t: not t.name.startswith(("h100", "tpu-v5e")))   # the common
        if fits:
            offers.append(f"target={fits[0].name!r}" + ("" if installed else f" ({extra})"))
    offer = (f"; compile it for a GPU or TPU target of {mesh.device_count} devices instead, "
             f"with compile_for='target': {' or '.join(offers)}" if offers else
             f"; no GPU or TPU target has the mesh's {mesh.device_count} devices")
    return (f"this program uses {m.group(1)}, which XLA's CPU compiler cannot compile, so it "
            f"cannot be compiled on fake CPU devices{offer}. ({message})")


# What jax calls a device (device_kind) -> the catalog chip it is. "TPU v5 lite" is jax's
# name for a v5e chip (seen on a one-chip TPU VM); the GPUs by the model in their names.
_DEVICE_KINDS = (("TPU v5 lite", "TPU v5e"), ("TPU v5e", "TPU v5e"), ("TPU v5p", "TPU v5p"),
                 ("TPU v6 lite", "TPU v6e"), ("TPU v6e", "TPU v6e"), ("TPU v4", "TPU v4"),
                 ("TPU v5", "TPU v5p"), ("H100", "H100 SXM"), ("H200", "H200 SXM"),
                 ("A100", "A100 SXM 80GB"), ("B200", "B200"))


# The platforms jax names a family's accelerators by (explorer._src.quiet_jax.accelerator_platform).
_PLATFORMS = {TargetFamily.TPU: ("tpu",), TargetFamily.GPU: ("cuda", "rocm")}


def where_it_runs(target: str, mesh: MeshSpec, probe: Callable[[], Pong]) -> str:
    """The note that says the compile and the measured run are on this machine's accelerators,
    where they are `target` (its chip, as many as the mesh has devices, in one slice or
    node); "" where they are not. `probe` asks a worker on them, which starts and holds them:
    never this process's jax, since libtpu lets one process at a time hold a TPU."""
    t = get_target(target)
    if accelerator_platform() not in _PLATFORMS.get(t.family, ()):
        return ""
    try:
        pong = probe()
    except ExplorerError:      # no worker could start on them (another process holds them)
        return ""
    if pong.devices != mesh.device_count or \
            target_of_devices(pong.device_kind, pong.devices) != t.name:
        return ""
    return (f"compiled by {t.name}'s own compiler for this machine's {pong.devices} "
            f"{pong.device_kind} device(s), which are {t.name}, and measured on them")


def target_of_devices(device_kind: str, count: int) -> str | None:
    """The catalog target that is `count` devices of `device_kind` in one slice or node (the
    devices a measured run used), so that it can be priced where it ran; None where the
    catalog has none (a CPU, an unknown chip, a count no slice or node has)."""
    chip = next((name for kind, name in _DEVICE_KINDS if kind in device_kind), None)
    if chip is None:
        return None
    for name, t in targets().items():
        one_piece = not any(a.link.across for a in t.axes)
        if t.chip.name == chip and one_piece and prod(a.size for a in t.axes) == count:
            return name
    return None
