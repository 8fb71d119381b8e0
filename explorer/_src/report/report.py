"""The Report: what the partitioner did to one program, as frozen, JSON-able plain data.

Nothing here imports jax: a Report can be saved, loaded and drawn anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

from explorer._src.compile.device_profile import MeasuredEvent
from explorer._src.compile.protocol import Partitioner
from explorer._src.cost.estimate import Estimate
from explorer._src.cost.mapping import Tier
from explorer._src.errors import TensorError, choices
from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.hlo.groups import RingDirection
from explorer._src.hlo.sharding import tiling_from_hlo
from explorer._src.report.origins import Origins
from explorer._src.report.trace import StepTrace
from explorer._src.report.why import Why
from explorer._src.spec.layout import shard_ranges
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import DTYPE_BYTES, Entry, TensorRole, format_spec


@dataclass(frozen=True)
class Collective:
    """One collective of the optimized HLO.

    `bytes` is the V of the textbook cost formulas: the per-device buffer reduced or gathered,
    the larger of operand and result (summed over the parts of a combined, tuple-shaped one).

    Attributes:
        kind: the collective's opcode (all-reduce, all-gather, reduce-scatter, all-to-all,
            collective-permute).
        axes: the mesh axes its device groups span, in mesh order; () when they match none.
        group_size: devices in each group.
        shape: the per-device result shape (of the first part, for a combined one).
        dtype: the result dtype as XLA moves it; the CPU backend moves bf16 as f32.
        bytes: V, per device, in `dtype`: the larger of operand and result, summed over parts.
        parts: how many collectives XLA combined into this one (a tuple-shaped result).
        is_async: XLA split it into a start and a done, so it may overlap compute.
        op_name: the jax operation that caused it, from the HLO metadata.
        source: ``file.py:12`` (``In [3], line 2`` in a notebook) of the user code that
            caused it; "" if unknown.
        source_text: that line of code, stripped; "" where the file is not readable.
        hlo_name: the instruction's name in the optimized HLO.
        computation: the HLO computation that holds it (a loop body, for a scanned layer).
        operand_dtype: the narrowest program dtype of a part XLA moves in a wider one (the CPU
            backend's upcast of bf16); "" when every part moves in the program's dtype.
        groups: the device groups, each a tuple of device ids (row-major mesh positions).
        program_dtypes: per part, the program's dtype, read from the module before the CPU
            backend's promotion passes.
        program_part_bytes: per part, V in that dtype.
        part_shapes: per part, the result shape.
        est_seconds: the predicted time on the Report's target; None without a target.
        why: why the partitioner inserted it; None where no reason was read.
        runs: times it runs in one step: the trip counts of the loops around it multiplied;
            1 outside loops or where a trip count could not be read (a note then says so).
        direction: for a collective-permute along one mesh axis's ring, ``+`` (every device
            sends to the next) or ``-`` (to the previous); empty otherwise.
        tier: in a program libtpu compiled over several TPU slices, which links it uses (a
            Tier): INSIDE (``"inside"``) each slice, on ICI, or ACROSS (``"across"``) them, its
            DCN leg; ALL (``""``) elsewhere, where it uses every link its mesh axes are mapped
            onto.
        dcn_key: for a DCN leg, libtpu's MegaScale rendezvous key (its
            MegascaleRendezvousKeyName, e.g. ``"all-reduce.3_0"``); `hlo_name` is then its
            send; "" for any other collective.
        leg_of: for a DCN leg, the `hlo_name` of the collective inside each slice that is
            the other part of the same collective of the program; "" where there is none.
        crosses_nodes: on the Report's GPU target of several nodes, its device groups span
            more than one node under the axis mapping, so it runs over the network between
            nodes (InfiniBand), not NVLink alone; False elsewhere and without a target.
    """

    kind: CollectiveKind
    axes: tuple[str, ...]        # mesh axes its device groups span, in mesh order; () if none match
    group_size: int
    shape: tuple[int, ...]       # result shape (the first part of a combined collective)
    dtype: str                   # result dtype as XLA moves it (the CPU backend moves bf16 as f32)
    bytes: int
    parts: int = 1               # >1 when XLA combined several collectives into one tuple
    is_async: bool = False
    op_name: str = ""
    source: str = ""             # file:line of the user code that caused it, "" if unknown
    source_text: str = ""        # that line of code, stripped; "" where the file is not readable
    hlo_name: str = ""
    computation: str = ""
    # The narrowest dtype the program gives a part that XLA moves in a wider one (the CPU
    # backend's upcast of bf16), "" when every part moves in the program's dtype.
    operand_dtype: str = ""
    groups: tuple[tuple[int, ...], ...] = ()
    # Per part, in the order of the (tuple) result: the program's dtype, read from the module
    # before the CPU backend's promotion passes (explorer/_src/report/dtypes.py), and V in it.
    program_dtypes: tuple[str, ...] = ()
    program_part_bytes: tuple[int, ...] = ()
    part_shapes: tuple[tuple[int, ...], ...] = ()   # per part, the result shape
    est_seconds: float | None = None   # predicted time on the report's target, if one was chosen
    why: Why | None = None       # why the partitioner inserted it (explorer/_src/report/why/)
    # Times it runs in one step: the trip counts of the loops around it multiplied (a collective
    # in the body of scanned layers runs once per layer); 1 outside loops or where a trip count
    # could not be read (a Report note then says so).
    runs: int = 1
    # A collective-permute along one mesh axis's ring: "+" every device sends to the next, "-"
    # to the previous (explorer._src.hlo.groups.ring_direction); "" otherwise.
    direction: RingDirection = RingDirection.NONE
    # A program over several TPU slices: INSIDE each slice or ACROSS them (a DCN leg); ALL ("")
    # elsewhere (explorer/_src/report/cross_slice.py).
    tier: Tier = Tier.ALL
    dcn_key: str = ""            # a DCN leg's MegaScale rendezvous key
    leg_of: str = ""             # a DCN leg's in-slice collective, by hlo_name
    crosses_nodes: bool = False  # spans several GPU nodes on the Report's target (with_target)

    @property
    def program_bytes(self) -> int:
        """V in the program's dtype (what a TPU or GPU, which do not upcast, would move), each
        part of a combined collective counted in its own dtype."""
        if self.program_part_bytes:
            return sum(self.program_part_bytes)
        if not self.operand_dtype:
            return self.bytes
        return self.bytes * DTYPE_BYTES[self.operand_dtype] // DTYPE_BYTES[self.dtype]

    def to_dict(self) -> dict:
        return {**asdict(self), "program_bytes": self.program_bytes}


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as the partitioner laid it out: an input, an output or an intermediate.

    Attributes:
        name: an input's TensorSpec name; ``out`` for an output (a pytree of outputs:
            ``out.0``, ``out.a``, ``out.blocks.0``, dotted as inputs are); the HLO
            instruction's name for an intermediate.
        kind: input, output or intermediate.
        shape: the global shape.
        sharding: XLA's HloSharding text, e.g. ``{devices=[2,1,4]<=[8]
            last_tile_dim_replicate}``.
        spec: the same layout as spec entries over mesh axes, one per dimension; None when no
            spec over the mesh axes expresses it.
        shard_shape: the block each device holds.
        replicas: how many devices hold each block.
        bytes_per_device: the bytes of one block.
        op_name: the jax operation that made an intermediate, from the HLO metadata.
        source: ``file.py:12`` of the user code that made an intermediate; "" if unknown.
        source_text: the line of code at `source`, stripped.
        origins: why it is laid out so: per dimension, the input, output, sharding constraint
            or shard_map each mesh axis came from and the ops it went through, or why the
            dimension is whole (Shardy only; under GSPMD its `note` says why there are none).
        memory_kind: ``"device"``, or ``"pinned_host"`` for an input or output the program keeps
            in host memory (offloaded); intermediates read ``"device"``.
        typed_spec: for an input or output on a mesh with Explicit axes, the sharding jax put
            in its type (``jax.typeof(x).sharding``: over the Explicit axes only, the layout
            the program's code sees and the compiler keeps), one entry per dimension; None
            otherwise (no Explicit axis, or an intermediate).
    """

    name: str
    kind: TensorRole
    shape: tuple[int, ...]
    dtype: str
    sharding: str                # XLA's HloSharding text, e.g. {devices=[2,1,4]<=[8] ...}
    spec: tuple[Entry, ...] | None   # the same over mesh axes; None when no spec expresses it
    shard_shape: tuple[int, ...]
    replicas: int
    bytes_per_device: int
    op_name: str = ""
    source: str = ""
    source_text: str = ""        # the line of code at `source`, stripped
    # Why it is laid out so, read from Shardy's record of its propagation (report/origins.py).
    origins: Origins = Origins(note="origins were not read")
    # Where an input or output lives: "device", or "pinned_host" (offloaded to host memory), as
    # the compiled program's entry layout says.
    memory_kind: str = "device"
    # The sharding in its type under Explicit axes (explorer/_src/report/value_types.py).
    typed_spec: tuple[Entry, ...] | None = None

    @property
    def spec_text(self) -> str:
        """The spec as text (``None,model``, ``replicated``), or ``(not a mesh-axis spec)``."""
        return "(not a mesh-axis spec)" if self.spec is None else format_spec(self.spec)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["spec_text"] = self.spec_text
        d["origins"] = self.origins.to_dict()
        if self.typed_spec is None:
            del d["typed_spec"]          # no Explicit axis: the JSON is as it was
        else:
            d["typed_spec_text"] = format_spec(self.typed_spec)
        return d


class MemoryKind(StrEnum):
    """What bytes of a device's memory hold, the keys of `Memory.kinds`: a str (a `StrEnum`),
    so that JSON and comparisons with the names (``"params"``) read as before."""

    PARAMS = "params"
    GRADS = "grads"
    OPTIMIZER = "optimizer"
    ACTIVATIONS = "activations"
    OTHER = "other"


MEMORY_KINDS = tuple(MemoryKind)


@dataclass(frozen=True)
class Memory:
    """Per-device bytes from XLA's memory_analysis() of the per-device program.

    `kinds` splits them by what the tensors are, where that is
    known: for a built-in workload, from its tensor kinds and gradient constraint points; for a
    user function, from its inputs' names (leaves of `model`/`params` are parameters, of
    `optimizer`/`opt_state` optimizer state; its gradients' place unknown, None); None where
    no name says what an input is, its bytes then all `other`.

    Attributes:
        arguments: the inputs' buffers.
        outputs: the outputs' buffers.
        aliased: output bytes that reuse an input's buffer (donated inputs), counted once in
            `total`.
        temporaries: the buffers the program allocates while it runs.
        generated_code: the compiled code itself (not in `total`).
        kinds: bytes per kind (params, grads, optimizer, activations, other); None for a user
            function. See `by_kind`.
        host_arguments, host_outputs, host_temporaries: bytes per device in host memory
            (memory kind ``pinned_host``): offloaded inputs, outputs and activations. They are
            not in `total`, which is the device's memory. Zero where nothing is offloaded, or
            where the compiler keeps one memory (the CPU's counts offloaded inputs as
            `arguments`).
    """

    arguments: int
    outputs: int
    aliased: int
    temporaries: int
    generated_code: int
    kinds: Mapping[str, int | None] | None = None
    host_arguments: int = 0
    host_outputs: int = 0
    host_temporaries: int = 0

    @property
    def host_total(self) -> int:
        """Bytes per device held in host memory: offloaded arguments, outputs, activations."""
        return self.host_arguments + self.host_outputs + self.host_temporaries

    @property
    def total(self) -> int:
        """Bytes per device, arguments + outputs - aliased + temporaries."""
        # Aliased outputs reuse argument buffers, so they are counted once.
        return self.arguments + self.outputs - self.aliased + self.temporaries

    @property
    def by_kind(self) -> dict[MemoryKind, int | None]:
        """Bytes per device for each of MEMORY_KINDS; None where a kind could not be located
        (gradients of a program with no gradient constraint points)."""
        if self.kinds is None:
            return {k: (self.total if k == MemoryKind.OTHER else 0) for k in MEMORY_KINDS}
        return {k: self.kinds.get(k, 0) for k in MEMORY_KINDS}

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k != "kinds"}
        return {**d, "total": self.total, "host_total": self.host_total,
                "by_kind": self.by_kind}


class BufferKind(StrEnum):
    """What a buffer is to the program, as XLA's buffer assignment marks its allocation."""

    ARGUMENT = "argument"        # an input's allocation, held from the program's start to end
    OUTPUT = "output"            # an output's allocation (not an input's), held start to end
    TEMPORARY = "temporary"      # a value among the temporaries, held over its live range
    CONSTANT = "constant"        # a constant of the program, held start to end


@dataclass(frozen=True)
class Buffer:
    """One buffer live at the memory peak of the per-device program, as XLA's buffer
    assignment sized it (with the target's padding: a TPU tiles its layouts).

    Attributes:
        name: the HLO value: the instruction's name, ``{i}`` added for part i of a tuple.
        bytes: its size on one device, padding included.
        instruction: the jax operation that made it (its op_name), or an input's name; the
            HLO opcode where the compiler recorded neither.
        source: ``file.py:12`` of the user code; "" if unknown.
        source_text: that line of code, stripped.
        aliases: other values that live in the same bytes at the peak (one buffer updated in
            place, e.g. an all-reduce over the matmul result it sums), held once.
        kind: argument, output, temporary or constant, as the buffer assignment marks its
            allocation; None where the assignment does not list the value.
    """

    name: str                    # the HLO value: instruction name, "{i}" for a tuple's part i
    bytes: int
    shape: tuple[int, ...]
    dtype: str
    instruction: str             # the jax operation that made it (its op_name), or an input's
                                 # name; the HLO opcode where the compiler recorded neither
    source: str = ""             # file:line of the user code, "" if unknown
    source_text: str = ""        # that line of code, stripped
    # Other values live in the same bytes at the peak: one buffer updated in place (an
    # all-reduce over the matmul result it sums), which the device holds once.
    aliases: tuple[str, ...] = ()
    kind: BufferKind | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class MemoryPoint:
    """The bytes live on one device while one instruction of the schedule runs."""

    position: int                # in XLA's schedule (loop bodies flattened in, once)
    instruction: str             # the HLO instruction at that position
    bytes: int                   # live on one device: held buffers and live temporaries
    temporaries: int             # of which temporaries


@dataclass(frozen=True)
class MemoryTimeline:
    """Memory over the program: the bytes live on one device at every step of the schedule,
    from XLA's buffer assignment and live ranges, as
    XProf's memory viewer draws it from the compiled module.

    Attributes:
        points: one per instruction of the schedule, in program order.
        arguments: the inputs' allocations, held the whole program.
        outputs: the outputs' allocations not shared with an input (those are in
            `arguments`), held the whole program.
        constants: the program's constants, held the whole program.
        peak: the first point where the live bytes peak.
        peak_buffers: every buffer live at the peak, largest first, each with its kind; values
            live in the same bytes are one buffer (`Buffer.aliases`).
        notes: what of the live ranges could not be placed in the buffer assignment.
    """

    points: tuple[MemoryPoint, ...]
    arguments: int
    outputs: int
    constants: int
    peak: MemoryPoint
    peak_buffers: tuple[Buffer, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def held(self) -> int:
        """Bytes held from the program's start to its end: arguments, outputs, constants."""
        return self.arguments + self.outputs + self.constants

    @property
    def peak_by_kind(self) -> dict[str, int]:
        """The peak's bytes by BufferKind."""
        return {BufferKind.ARGUMENT: self.arguments, BufferKind.OUTPUT: self.outputs,
                BufferKind.CONSTANT: self.constants,
                BufferKind.TEMPORARY: self.peak.temporaries}

    def to_dict(self) -> dict:
        # The points as columns: a long schedule stays a small part of the JSON.
        return {"positions": [p.position for p in self.points],
                "instructions": [p.instruction for p in self.points],
                "bytes": [p.bytes for p in self.points],
                "temporaries": [p.temporaries for p in self.points],
                "arguments": self.arguments, "outputs": self.outputs,
                "constants": self.constants, "peak": asdict(self.peak),
                "peak_by_kind": {str(k): v for k, v in self.peak_by_kind.items()},
                "peak_buffers": [b.to_dict() for b in self.peak_buffers],
                "notes": list(self.notes)}


@dataclass(frozen=True)
class MemoryVerdict:
    """The compiler's refusal of a program that does not fit the device's memory: what it
    needs and what there is, per device, as the compiler rounded them (None where its message
    does not say), and its own words.

    Attributes:
        memory: which memory, as the compiler names it, e.g. ``"HBM"``.
        required: bytes per device the program needs; None where the message does not say.
        available: bytes per device there are; None where the message does not say.
        what: what the compiler counted as required, e.g. ``"HLO temporaries"``.
        message: the compiler's message, verbatim.
        fits: always False, the program having been refused (JSON reads it as MemoryFit's).
    """

    memory: str                  # which memory, as the compiler names it: "HBM"
    required: int | None         # bytes per device
    available: int | None        # bytes per device
    what: str                    # what the compiler counted as required, e.g. "HLO temporaries"
    message: str                 # the compiler's message, verbatim
    fits: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Cost:
    """Per-device cost from XLA's cost_analysis(); None where XLA gave no number.

    Attributes:
        flops: floating-point operations of one step on one device.
        bytes_accessed: bytes the program reads and writes in memory, as XLA counts them.
        transcendentals: transcendental operations (exp, tanh, ...).
        collective_bytes: bytes moved per device by the collectives in one step: each
            collective's V times its runs, summed.
        xla_optimal_seconds: XLA's own time estimate; None where it gave none (the CPU backend
            has no rates) or marked it unknown.
        notes: what could not be read, and why.
        from_schedule: flops and bytes_accessed are summed from the scheduled instructions,
            as XLA's cost_analysis() gave none (XLA's GPU compiler without a GPU).
    """

    flops: float | None
    bytes_accessed: float | None
    transcendentals: float | None
    collective_bytes: int        # moved per device in one step: bytes x runs, summed
    xla_optimal_seconds: float | None = None
    notes: tuple[str, ...] = ()
    from_schedule: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Timing:
    """How long the compile took, whether a cache answered, and a measured run if one was asked.

    Attributes:
        lower_s: seconds jax took to trace and lower the program.
        compile_s: seconds XLA took to compile it.
        cached: the Report came from a cache (in this process or on disk).
        lookup_s: seconds the cache took to answer, when cached.
        measured_s: with ``measure=True``, the median seconds of the program's timed runs;
            None otherwise or when it was not run.
        measured_on: where it ran, e.g. ``"8 cpu device(s) of this host"``: the CPU, never a
            prediction for a target.
        measure_note: why it was not run, when it was asked and was not.
        worker_start_s: seconds the compile waited for its compile worker to start (jax
            loading in a new process) before it could lower; 0 where the worker was warm.
        measured_device_s: on an accelerator, the program's median run on the device as its
            profile has it (no dispatch); None elsewhere.
        measured_ops: on an accelerator, each HLO instruction's seconds per call on the
            device, from the same profile; empty elsewhere.
        measured_events: on an accelerator, the instructions of the profile's median call in
            time (explorer.MeasuredEvent), for a timeline beside the
            predicted step; empty elsewhere.
    """

    lower_s: float
    compile_s: float
    cached: bool = False
    lookup_s: float = 0.0        # time to answer from the cache, when cached
    # A real run of the compiled program, when asked for: median seconds and where it ran
    # ("8 cpu device(s) of this host": the CPU, never a prediction for a target).
    measured_s: float | None = None
    measured_on: str = ""
    measure_note: str = ""
    worker_start_s: float = 0.0
    measured_device_s: float | None = None
    measured_ops: Mapping[str, float] = field(default_factory=dict)
    measured_events: tuple[MeasuredEvent, ...] = ()

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class CompilerWarning:
    """One message XLA or Shardy printed while compiling (e.g. "Involuntary full
    rematerialization"), linked to the HLO instruction it names and that instruction's source
    line where the text names one.

    Attributes:
        text: the message as printed.
        instruction: the HLO instruction it names; "" if none.
        source: ``file.py:12`` (``In [3], line 2`` in a notebook) of that instruction.
        source_text: that line of code.
    """

    text: str
    instruction: str = ""        # the HLO instruction the message names, "" if none
    source: str = ""             # file:line (or "In [n], line k") of that instruction
    source_text: str = ""        # that line of code

    def __str__(self) -> str:
        return self.text + (f" (at {self.source})" if self.source else "")


@dataclass(frozen=True)
class WorkloadInfo:
    """What was analysed when it was a built-in workload, and how its layout was chosen.

    Attributes:
        name: the workload, a key of explorer.WORKLOADS.
        params: all its params, defaults included.
        preset: the preset asked for; None without one.
        rules: the rule table applied (the preset's, then the user's), as text.
        specs: input name -> the spec text it got.
        activations: constraint point -> the spec text pinned there.
        origin: tensor or point -> where its spec came from: ``"spec"``, ``"activation"``,
            ``"rule"``, ``"preset 'megatron'"`` or ``"preset 'megatron' + rules"``.
        extra: workload-specific JSON-able data, e.g. a pipeline's schedule and bubble
            fraction; `to_dict` merges it into the top level.
    """

    name: str
    params: Mapping[str, Any]
    preset: str | None = None
    rules: str = ""                                     # the rule table applied, as text
    specs: Mapping[str, str] = field(default_factory=dict)        # input -> spec text
    activations: Mapping[str, str] = field(default_factory=dict)  # constraint point -> spec
    origin: Mapping[str, str] = field(default_factory=dict)       # tensor -> spec's origin
    # Workload-specific JSON-able data, e.g. a pipeline's schedule and bubble fraction.
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k != "extra"}
        return {**d, **dict(self.extra)}


@dataclass(frozen=True)
class Extrapolation:
    """How a Report was made when it was not compiled at its own layer count: a stack of
    identical layers compiled at two smaller counts, its numbers carried on linearly, total(L) =
    base + L * per_layer (explorer/_src/report/layer_extrapolation.py).

    Attributes:
        param: the workload param that counts the layers, e.g. ``"layers"``.
        layers: the layer count the Report stands for.
        from_layers: the two layer counts compiled, (a, b), a < b.
        error: the method's error as measured against full compiles, in words
            (docs/cost-model.md, "Extrapolated layers").
        compile_s: the two small compiles' times, seconds.
        estimated_compile_s: the full compile's time, extrapolated from those two the same
            way; None where it was not estimated.
        reason: why it was extrapolated: asked for, or the full compile's estimated time past
            the time limit.
    """

    param: str
    layers: int
    from_layers: tuple[int, int]
    error: str
    compile_s: tuple[float, float] = (0.0, 0.0)
    estimated_compile_s: float | None = None
    reason: str = ""

    def text(self) -> str:
        """One line for the CLI's first lines and the app's status."""
        a, b = self.from_layers
        return (f"EXTRAPOLATED: {self.param}={self.layers} carried on linearly from compiles "
                f"at {self.param}={a} and {b} ({self.reason}); {self.error}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Report:
    """What the partitioner did to one program, read from the compiler's texts.

    explorer.analyze and explorer.analyze_workload return one. It is frozen plain data with no
    jax in it: it can be saved (`to_dict` gives JSON-able data), loaded, re-priced for another
    target and drawn anywhere. What the readers could not read is said in `notes`, never
    guessed.

    Attributes:
        mesh: the mesh compiled on; device ids are row-major positions in it.
        partitioner: ``"shardy"`` or ``"gspmd"``.
        backend: the platform that compiled it: ``"cpu"`` for fake CPU devices, ``"tpu
            v5e:4x4"`` for a TPU topology, else the real devices' platform.
        collectives: the collectives of the optimized per-device program.
        tensors: the inputs, then the outputs, then the intermediates, each with its layout.
        memory: bytes per device from XLA's memory analysis; None where the compiler gave
            none (see `memory_verdict`).
        cost: FLOPs and bytes per device from XLA's cost analysis.
        timing: the compile's times and whether a cache answered.
        workload: for a built-in workload, what was analysed and how its layout was chosen;
            None for a user function.
        estimate: the prediction for the target asked for; None without one.
        trace: the predicted timeline of the compiled schedule on that target (events on a
            compute and a communication lane); None without an estimate or where the target
            has no peak to time by.
        notes: what the readers could not read (e.g. an unreadable sharding).
        warnings: what XLA and Shardy printed while compiling.
        top_buffers: the largest buffers live at the memory peak, per device, largest first;
            () where the compiler wrote no live ranges.
        memory_timeline: the bytes live on one device at each step of the schedule, with the
            peak and the buffers live there; None where the compiler wrote no live ranges.
        memory_verdict: set when the compiler refused the program for want of memory (a TPU
            compile); `memory` is then None, and the collectives and placement come from the
            module it wrote before.
        ahead_of_time: compiled for devices that are not here (a TPU slice, NVIDIA GPUs) by
            their own compiler, rather than on this machine's own or fake CPU devices.
        device_kind: what the devices compiled for are, e.g. ``"NVIDIA H100 80GB HBM3"``,
            ``"TPU v5 lite"``, ``"cpu"``.
        approximation: why this program is not the one the chosen target's own compiler
            would write (e.g. a GPU or TPU target compiled on fake CPU devices), its numbers
            then approximate; "" when it is, or without a target.
        stablehlo: the lowered module, before any partitioning.
        propagated_hlo: the module before spmd-partitioning, with the propagated sharding on
            every instruction.
        optimized_hlo: the compiled per-device module.
        hlo_proto: that module as a serialized xla.HloProto with its buffer assignment, for
            XProf (`explorer.write_xprof`); b"" where the compiler wrote none.
        donated: the inputs donated to the compile (explorer.analyze's ``donate=``, a
            workload's state), by name in argument order; () for none.
        jax_version: the jax that lowered and compiled the program, e.g. ``"0.10.2"``; ""
            in a Report saved before it was recorded.
        compiler: the package whose compiler wrote the program, with its version:
            ``"jaxlib 0.10.2"`` (XLA's CPU compiler), ``"libtpu 0.0.42.1"``,
            ``"jax-cuda12-plugin 0.10.2"`` (XLA's GPU compiler); "" where not recorded.
        extrapolated: set where the Report was not compiled at its own layer count but
            extrapolated from two compiles of fewer layers (its numbers then carry that
            method's error); None for a compiled Report.
    """

    mesh: MeshSpec
    partitioner: Partitioner
    backend: str
    collectives: tuple[Collective, ...]
    tensors: tuple[TensorInfo, ...]
    memory: Memory | None
    cost: Cost
    timing: Timing
    workload: WorkloadInfo | None = None
    # The prediction for a target, when one was asked for.
    estimate: Estimate | None = None
    # The predicted timeline of the compiled schedule on that target (events on a compute and a
    # communication lane); None without an estimate or where the target has no peak to time by.
    trace: StepTrace | None = field(default=None, repr=False)
    # What the readers could not read, said rather than guessed (e.g. an unreadable sharding).
    notes: tuple[str, ...] = ()
    # What XLA and Shardy printed while compiling (e.g. "Involuntary full rematerialization").
    warnings: tuple[CompilerWarning, ...] = ()
    # The largest buffers live at the memory peak, per device, largest first
    # (explorer/_src/report/buffers.py); () where the compiler wrote no live ranges.
    top_buffers: tuple[Buffer, ...] = ()
    # The bytes live on one device at each step of the schedule, the peak and its buffers
    # (explorer/_src/report/memory_timeline.py); None where the compiler wrote no live ranges.
    memory_timeline: MemoryTimeline | None = None
    # Set when the compiler refused the program for want of memory (a TPU compile); `memory`
    # is then None and the collectives and placement come from the module it wrote before.
    memory_verdict: MemoryVerdict | None = None
    # What the devices compiled for are ("NVIDIA H100 80GB HBM3", "TPU v5 lite", "cpu").
    device_kind: str = ""
    ahead_of_time: bool = False     # for devices that are not here, by their own compiler
    # Why this program is not the one the chosen target's own compiler would write (a GPU or
    # TPU target compiled on fake CPU devices: the extra is not installed, or
    # compile_for="cpu" was asked); "" when it is, or no target was chosen. Its numbers are
    # then approximate.
    approximation: str = ""
    stablehlo: str = field(default="", repr=False)
    propagated_hlo: str = field(default="", repr=False)
    optimized_hlo: str = field(default="", repr=False)
    # The optimized module as a serialized xla.HloProto with its buffer assignment, which
    # XProf's memory and graph viewers read (explorer/_src/report/xprof.py); b"" where the compiler
    # wrote none. Not in `to_dict`.
    hlo_proto: bytes = field(default=b"", repr=False)
    # The inputs donated to the compile (analyze's donate=), by name in argument order, so
    # that the code written from the Report donates them too (explorer/_src/report/code.py).
    donated: tuple[str, ...] = ()
    # What compiled it: the jax version, and the compiler's package with its version.
    jax_version: str = ""
    compiler: str = ""
    # Set when the Report's numbers were extrapolated from two compiles of fewer layers
    # rather than compiled (explorer/_src/api/extrapolate.py).
    extrapolated: Extrapolation | None = None

    def tensor(self, name: str) -> TensorInfo:
        """The tensor called `name`: an input, an output (``out``) or an intermediate.

        Args:
            name: an input's TensorSpec name, an output's name or an intermediate's HLO name.

        Returns:
            Its TensorInfo: shape, layout, block per device.

        Raises:
            TensorError: no tensor has that name; the message lists the inputs and outputs.

        Example:
            In the Megatron MLP, ``w1`` (1024 x 4096) is split by columns over the 4 devices
            of ``model`` and held twice, once per ``data`` coordinate:

            >>> import explorer
            >>> report = explorer.analyze_workload("mlp", "data=2,model=4", preset="megatron")
            >>> w1 = report.tensor("w1")
            >>> w1.spec_text, w1.shard_shape, w1.replicas
            ('None,model', (1024, 1024), 2)
            >>> w1.bytes_per_device                 # 1024 * 1024 float32 values
            4194304
            >>> report.tensor("w3")  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            explorer.TensorError: no tensor named 'w3' in this report; tensors: 'x', ...
        """
        for t in self.tensors:
            if t.name == name:
                return t
        named = (t.name for t in self.tensors if t.kind != TensorRole.INTERMEDIATE)
        raise TensorError(f"no tensor named {name!r} in this report; tensors: {choices(named)}"
                          " and intermediates", tensor=name)

    def placement(self, name: str) -> dict[int, tuple[tuple[int, int], ...]]:
        """For each device holding part of tensor `name`, its half-open index range per dim.

        Args:
            name: a tensor of the Report, as `tensor` takes it.

        Returns:
            Device id (its row-major position in the mesh) -> one ``(start, stop)`` per
            dimension of the block it holds.

        Raises:
            TensorError: no tensor has that name.

        Example:
            In the Megatron MLP on ``data=2,model=4``, device ``d`` sits at ``data = d // 4``,
            ``model = d % 4``; ``w1``'s columns are split over ``model``, so devices 1 and 5
            hold the same second quarter of them, and ``x``'s rows are split over ``data``:

            >>> import explorer
            >>> report = explorer.analyze_workload("mlp", "data=2,model=4", preset="megatron")
            >>> w1 = report.placement("w1")
            >>> w1[0], w1[1], w1[5]
            (((0, 1024), (0, 1024)), ((0, 1024), (1024, 2048)), ((0, 1024), (1024, 2048)))
            >>> report.placement("x")[4]
            ((128, 256), (0, 1024))
        """
        t = self.tensor(name)
        tiling = tiling_from_hlo(t.sharding, len(t.shape), self.mesh.device_count)
        return shard_ranges(tiling, t.shape)

    def with_timing(self, timing: Timing) -> Report:
        """This Report with other timings (the cache marks its answers this way)."""
        return replace(self, timing=timing)

    def _memory_dict(self) -> dict | None:
        d = self.memory.to_dict() if self.memory else None
        if (d is None and not self.top_buffers and self.memory_verdict is None
                and self.memory_timeline is None):
            return None
        return {**(d or {}), "top_buffers": [b.to_dict() for b in self.top_buffers],
                "verdict": self.memory_verdict.to_dict() if self.memory_verdict else None,
                **({"timeline": self.memory_timeline.to_dict()}
                   if self.memory_timeline is not None else {})}

    def to_code(self) -> str:
        """This layout as plain JAX code: `jax.make_mesh`, a NamedSharding per input and
        output, the pinned activations, `jax.jit` with its in and out shardings, and, where
        the tensors have logical names, the same layout as `logical_axis_rules` pairs
        (explorer/_src/report/code.py). A built-in workload's code compiles its program; a
        user's function is not in the Report, so the code says how to jit it."""
        from explorer._src.report.code import to_code

        return to_code(self)

    def to_dict(self, texts: bool = False) -> dict:
        """The Report as JSON-able data, as ``sharding-explorer analyze --json`` writes it.

        Args:
            texts: also include the StableHLO, propagated and optimized HLO texts.
        """
        d = {
            "mesh": {**self.mesh.to_dict(), "partitioner": self.partitioner,
                     "backend": self.backend,
                     **({"device_kind": self.device_kind}
                        if self.device_kind not in ("", self.backend) else {}),
                     **({"ahead_of_time": True} if self.ahead_of_time else {}),
                     **({"approximation": self.approximation} if self.approximation else {}),
                     **({"jax": self.jax_version} if self.jax_version else {}),
                     **({"compiler": self.compiler} if self.compiler else {})},
            "tensors": [t.to_dict() for t in self.tensors],
            **({"donated": list(self.donated)} if self.donated else {}),
            "collectives": [c.to_dict() for c in self.collectives],
            "memory": self._memory_dict(),
            "cost": self.cost.to_dict(),
            "timing": self.timing.to_dict(),
        }
        if self.workload is not None:
            d["workload"] = self.workload.to_dict()
        if self.estimate is not None:
            est = self.estimate.to_dict()
            est.pop("collectives")          # each collective carries its own est_seconds
            d["cost"]["estimate"] = est
        if self.extrapolated is not None:
            d["extrapolated"] = self.extrapolated.to_dict()
        if self.notes:
            d["notes"] = list(self.notes)
        if self.warnings:
            d["warnings"] = [asdict(w) for w in self.warnings]
        if texts:
            d["texts"] = {"stablehlo": self.stablehlo, "propagated_hlo": self.propagated_hlo,
                          "optimized_hlo": self.optimized_hlo}
        return d
