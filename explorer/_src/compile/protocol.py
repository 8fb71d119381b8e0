"""What the parent and a compile worker say to each other: frozen dataclasses, pickled over a
socketpair between two of our own processes.

The parent sends a `CompileRequest` or a `Ping`; the worker answers each with one reply: a
`CompileResult`, a `Pong`, or a `Failure` that carries the program's error, wrapped in
`Retiring` when the worker stops after it. (The tests' messages that make a worker crash or
hang, or run a program inside it, are none of these: a worker answers them only through its
test hook, explorer/_src/compile/worker.py's HOOK_VARIABLE.)
No jax here: both sides import this module (the parent loads jax only to trace and lower a
program, explorer/_src/compile/lowering.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from explorer._src.compile.device_profile import MeasuredEvent
from explorer._src.compile.gpu import GpuTopology
from explorer._src.compile.lowering import LoweredProgram
from explorer._src.spec.mesh import MeshSpec

# The file name a notebook cell's lines carry in a lowered module ("In [3]", as its prompt
# reads; explorer._src.compile.sources.cell_name), and so the file of its collectives' source lines.
CELL_NAME = re.compile(r"In \[\d+\]\Z")


class Backend(StrEnum):
    """Which devices a worker compiles for."""

    FAKE_CPU = "cpu"      # N fake CPU devices (--xla_force_host_platform_device_count=N)
    TPU_AOT = "tpu"       # ahead of time for a TPU topology (libtpu brings the devices)
    GPU_AOT = "gpu"       # ahead of time for NVIDIA GPUs (jax's CUDA plugin describes them)
    REAL = "real"         # the machine's own devices, whatever and however many they are


class Partitioner(StrEnum):
    """Which SPMD partitioner XLA runs (jax_use_shardy_partitioner)."""

    SHARDY = "shardy"
    GSPMD = "gspmd"


@dataclass(frozen=True)
class WorkerKey:
    """Which worker serves a request. jax fixes its devices when it starts, so each key is its
    own process. `devices` is the fake CPU device count the worker starts with; None for
    REAL (the machine decides)."""

    backend: Backend
    devices: int | None

    @classmethod
    def fake_cpu(cls, devices: int) -> WorkerKey:
        return cls(Backend.FAKE_CPU, devices)

    @classmethod
    def tpu(cls) -> WorkerKey:
        # One CPU device: a TPU topology brings its own devices; jax only needs to start.
        return cls(Backend.TPU_AOT, 1)

    @classmethod
    def gpu(cls) -> WorkerKey:
        # As for TPUs: the GPU topology brings its devices; the worker needs one CPU device.
        return cls(Backend.GPU_AOT, 1)

    @classmethod
    def real(cls) -> WorkerKey:
        return cls(Backend.REAL, None)

    def describe(self) -> str:
        """What the worker compiles for, as messages name it after "the compile worker for":
        "8 devices", "TPU compiles (ahead of time)", ..."""
        if self.backend is Backend.FAKE_CPU:
            return f"{self.devices} device{'s' if self.devices != 1 else ''}"
        if self.backend is Backend.TPU_AOT:
            return "TPU compiles (ahead of time)"
        if self.backend is Backend.GPU_AOT:
            return "GPU compiles (ahead of time)"
        return "this machine's devices"

    def label(self) -> str:
        """A short token for the worker's command line (what `ps` shows)."""
        return str(self.devices) if self.backend is Backend.FAKE_CPU else self.backend.value


@dataclass(frozen=True)
class CompileRequest:
    """Compile `program`, the program as the caller traced and lowered it
    (explorer/_src/compile/lowering.py), on its flat inputs `args` (one TensorSpec each), sharded
    over `mesh`. No function travels: a user's function and a built-in workload's program are
    both traced where they are asked for, and the worker compiles the module text."""

    program: LoweredProgram
    args: tuple[Any, ...]
    mesh: MeshSpec
    partitioner: Partitioner
    measure: bool = False
    tpu_topology: str | None = None
    # Several slices of `tpu_topology` joined by the data-center network: how many slices each
    # mesh axis spans, in mesh order (their product is the slice count; the axis mapping's
    # `slice` axis), for a hybrid mesh (explorer/_src/compile/multislice.py); () for one slice.
    slices_per_axis: tuple[int, ...] = ()
    gpu: GpuTopology | None = None      # compile ahead of time for these NVIDIA GPUs
    # Also dump Shardy's record of where each axis of every layout came from (a tenth more
    # of an analysis): CompileResult.propagated_mlir.
    origins: bool = False
    # The positions in `args` of the inputs the program may overwrite (jax.jit's donate_argnums,
    # as a training loop donates its state): XLA then writes an output into an input's buffer
    # where their shapes and layouts allow, and the memory analysis counts that buffer once
    # (`aliased`). `args` is flat (one TensorSpec each) when any is donated.
    donate: tuple[int, ...] = ()


@dataclass(frozen=True)
class Ping:
    """Answered with a Pong once jax is loaded: "warm" means ready."""


Message = CompileRequest | Ping


class TensorLayout(NamedTuple):
    """An input or output as jax placed it. `sharding` is XLA's HloSharding text, or None when
    jax gave no HLO form for it (never a guess)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    sharding: str | None


@dataclass(frozen=True)
class Measurement:
    """A real run of the compiled program, or the reason there was none (`note`)."""

    seconds: float | None = None     # median of `runs` timed runs
    runs: int = 0
    on: str = ""                     # e.g. "8 cpu device(s) of this host"
    note: str = ""
    # On an accelerator, the run as its profile has it (explorer/_src/compile/device_profile.py):
    # the program's median seconds on the device, each instruction's seconds per call, and
    # the median call's instructions in time.
    device_seconds: float | None = None
    op_seconds: dict[str, float] = field(default_factory=dict)
    events: tuple[MeasuredEvent, ...] = ()


@dataclass(frozen=True)
class OutOfMemory:
    """The compiler's refusal of a program that does not fit the device's memory (a TPU
    compile: "RESOURCE_EXHAUSTED: Ran out of memory on HBM, ..."). It is an answer about the
    program, not a failure: the result that carries it still has the modules the compiler
    wrote before it stopped."""

    message: str                     # the compiler's own words, verbatim


@dataclass(frozen=True)
class CompileResult:
    """What one compile produced: texts and numbers, no jax objects.

    When `out_of_memory` is set the compiler refused the program: `optimized` is the module it
    wrote before buffer assignment (collectives final), and `memory` and `cost` are None."""

    stablehlo: str
    propagated: str                  # the module before spmd-partitioning; "" if none ran
    optimized: str
    inputs: tuple[TensorLayout, ...]
    outputs: tuple[TensorLayout, ...]
    memory: Mapping[str, int] | None     # memory_analysis(): arguments, outputs, aliased, ...
    cost: Mapping[str, float] | None     # cost_analysis() as XLA names its keys
    lower_s: float
    compile_s: float
    # What XLA compiled for, as jax names the platform ("cpu", "gpu"), or "tpu v5e:4x4" with the
    # topology: an open description, not a Backend (a REAL worker's is the machine's platform).
    backend: str
    measured: Measurement | None = None
    warnings: tuple[str, ...] = ()   # what XLA and Shardy printed while compiling
    # The module just before the CPU backend's first dtype-promotion pass (all-reduce-promotion
    # upcasts bf16 all-reduces to f32, float-normalization-bf16 the other collectives): the
    # program's own dtype of each collective. "" where no such pass ran (TPU, GPU).
    unpromoted: str = ""
    # The "Live ranges at N (peak):" section of XLA's live-range dump: every buffer live at
    # the memory peak of the per-device program, with its bytes. "" when none was written.
    peak_live: str = ""
    # The allocations and "value:" lines of XLA's buffer-assignment dump: where each value
    # lives, its allocated bytes (with the target's padding, which the live ranges leave out)
    # and its shape with layout.
    buffer_values: str = ""
    # Seconds the request waited for its worker to start (set by the pool, not the worker).
    worker_start_s: float = 0.0
    # The schedule and the live ranges of XLA's live-range dump: the instructions in program
    # order ("InstructionSequence:") and each value's first and last position
    # ("BufferLiveRange:"), which explorer/_src/report/memory_timeline.py turns into the bytes live
    # at each step. "" when none was written.
    live_ranges: str = ""
    # The optimized module as a serialized xla.HloProto with its buffer assignment (XLA's
    # "...after_optimizations.hlo.pb" dump), for XProf's memory and graph viewers; b"" where
    # the compiler wrote none.
    hlo_proto: bytes = b""
    out_of_memory: OutOfMemory | None = None
    # What the devices compiled for are, as their platform names them ("NVIDIA H100 80GB
    # HBM3", "TPU v5 lite", "cpu").
    device_kind: str = ""
    # Compiled for devices that are not here (a TPU slice through libtpu, GPUs through the CUDA
    # plugin), as opposed to this machine's own or fake CPU devices.
    ahead_of_time: bool = False
    # Shardy's module after propagation (its `02.after_propagation.mlir`), with where each mesh
    # axis of every value's sharding came from (`sdy.sharding_origins`) and the steps that moved
    # it (`sdy.propagation_edges`); "" under GSPMD, or where Shardy wrote none; None when the
    # request did not ask for origins.
    propagated_mlir: str | None = None
    # What the worker could not read from jax and left out, said rather than guessed (e.g. a
    # backend with no memory analysis); the Report's notes carry them.
    notes: tuple[str, ...] = ()
    # A program over several TPU slices (CompileRequest.slices_per_axis): each mesh position's
    # slice and device id (row-major; the MegaScale ids libtpu's DCN transfers name), and the
    # module just before libtpu split its collectives at the slices' edges (its Megascale
    # pipeline's cross-slice-rewrites), where each still spans every slice, with its metadata.
    # (), () and "" for one slice (explorer/_src/hlo/megascale.py).
    slice_of: tuple[int, ...] = ()
    device_ids: tuple[int, ...] = ()
    before_slicing: str = ""
    # The worker's jax (`jax.__version__`) and the compiler that wrote the program, by its
    # package and version: "jaxlib 0.10.2" (XLA's CPU compiler ships in jaxlib), "libtpu
    # 0.0.42.1", "jax-cuda12-plugin 0.10.2" (XLA's GPU compiler).
    jax_version: str = ""
    compiler: str = ""


@dataclass(frozen=True)
class Pong:
    devices: int                     # len(jax.devices()) in the worker
    pid: int
    device_kind: str = ""            # jax.devices()[0].device_kind: "TPU v5 lite", "cpu", ...


@dataclass(frozen=True)
class Failure:
    """The program failed (jax or XLA rejected it, or the user's function raised); the worker
    lives on."""

    error: str


Reply = CompileResult | Pong | Failure


@dataclass(frozen=True)
class Retiring:
    """The worker's last answer: `reply`, after which it exits, because the program it ran left
    a thread or a process running that could strike during a later request (exit the worker,
    interrupt its main thread). The parent delivers `reply` and replaces the worker."""

    reply: Reply
