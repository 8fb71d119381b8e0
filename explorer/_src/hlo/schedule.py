"""The scheduled entry computation of an optimized module: what runs, in order, and its size.

XLA schedules a module before it emits code and prints `is_scheduled=true` in its header; in
such a module each computation lists its instructions in execution order (CPU compiles and TPU
ahead-of-time compiles alike). This reader turns the entry computation into Steps: what each
instruction is (free, compute, a synchronous collective, the start or done of an asynchronous
one, a loop) and the numbers a cost model needs: its FLOPs, dots and vector work, counted by
explorer._src.hlo.arithmetic, and the bytes it moves, counted by explorer._src.hlo.traffic
(docs/cost-model.md, "The predicted step trace"). Parameters, constants, tuples,
get-tuple-element, bitcasts and ids cost nothing; so do asynchronous copies and slices
(copy-start, slice-start: DMAs that run beside compute). It prices nothing:
explorer/_src/report/trace.py turns Steps into times on a target.

Collectives that the TPU compiler runs in the background without a -start/-done pair are read
as asynchronous, waited for by the first instruction that reads their result:

- an async collective fusion: a collective inside a fusion whose backend_config gives it
  synchronisation flags (`async_collective_fusion_config` with `flag_start` >= 0); the fusion's
  own arithmetic runs while the collective is in flight, and a later instruction waits on
  the flags;
- a collective run across a chain of fusions (explorer._src.hlo.chains): the chain's first fusion
  starts it, the other fusions are arithmetic only, and the chain's last fusion waits for it;
- a collective-permute in a windowed einsum loop (a computation named
  `windowed_dot_general_body...`, the SPMD partitioner's collective matmul): the decomposition
  exists so that each step's permute overlaps the partial matmul beside it (Wang et al.,
  "Overlap Communication with Dependent Computation via Decomposition in Large Deep Learning
  Models", ASPLOS 2023).

A multi-slice TPU program's DCN legs (explorer._src.hlo.megascale) are asynchronous too: the
MegaScale `send` starts one (the leg is named by the send) and the `recv-done` of the same
rendezvous key waits for it; the `recv` and `send-done` cost nothing of their own.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from enum import StrEnum
from math import ceil

from explorer._src.hlo.arithmetic import Arithmetic, Dot, Sorting, sorting_work, vector_work
from explorer._src.hlo.chains import collective_chains, flagged, fused_collectives
from explorer._src.hlo.collectives import collective_kind
from explorer._src.hlo.compiler_costs import KernelCost, kernel_cost, uncostable
from explorer._src.hlo.megascale import dcn_recv_done_starts, is_dcn_send
from explorer._src.hlo.module import HloModule, Instruction, ints, parse_module
from explorer._src.hlo.traffic import Traffic, host_transfer_bytes
from explorer._src.lru import Lru

# Instructions that move no data and do no arithmetic of their own.
FREE_OPCODES = frozenset({
    "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "partition-id",
    "replica-id", "after-all", "add-dependency", "opt-barrier", "domain", "async-update",
})
# Custom calls that do neither: libtpu's AllocateBuffer reserves a buffer (often in on-chip
# VMEM, memory space S(1)) that later instructions write. On a TPU v5e the 26 in
# llama_train_scan took 1.4 to 2.0 ns each (benchmarks/results/tpu-v5e-2026-12-06/
# programs.json), where their bytes at HBM speed would be up to 6.6 ms.
FREE_CUSTOM_CALLS = frozenset({"AllocateBuffer"})


# Code inside `jax.named_scope("fused_kernel")` stands for one fused kernel whose intermediates
# stay in on-chip memory, as a flash-attention kernel (Pallas, cuDNN, FlashAttention) keeps the
# [seq, seq] scores in SRAM/VMEM. The CPU compile cannot form such a kernel, so it writes the
# scores to memory; the schedule counts that code's FLOPs and not its memory traffic.
FUSED_KERNEL_SCOPE = "fused_kernel"
# The same, for a kernel with a causal mask: like FlashAttention's causal kernel, it skips the
# blocks above the diagonal, so its matmuls do half the FLOPs of the whole [seq, seq] square
# (Dao, "FlashAttention-2", 2023, sec. 3.1; the half that PaLM's and MaxText's MFU counts).
CAUSAL_KERNEL_SCOPE = "fused_kernel_causal"
CAUSAL_FLOP_FRACTION = 0.5


def _scopes(instr: Instruction) -> list[str]:
    return re.split(r"[/()]", instr.op_name)


def _in_causal_scope(instr: Instruction) -> bool:
    return CAUSAL_KERNEL_SCOPE in _scopes(instr)


def in_fused_kernel(instr: Instruction) -> bool:
    """Whether the instruction comes from code in a `fused_kernel` (or `fused_kernel_causal`)
    named scope (its op_name, e.g. `jit(step)/layers/fused_kernel/dot_general`, or its
    transpose in the backward pass)."""
    scopes = _scopes(instr)
    return FUSED_KERNEL_SCOPE in scopes or CAUSAL_KERNEL_SCOPE in scopes


class StepKind(StrEnum):
    FREE = "free"
    COMPUTE = "compute"                      # costed from its FLOPs and bytes
    COLLECTIVE = "collective"                # synchronous: compute waits for it
    COLLECTIVE_START = "collective-start"    # an asynchronous collective begins
    COLLECTIVE_DONE = "collective-done"      # ... and compute waits for it here
    LOOP = "loop"                            # a while: its body runs `trips` times
    # Data moved between the device and host memory (offloaded arrays, memory space S(5)) over
    # the host link: synchronously, or started and later waited for.
    HOST_TRANSFER = "host-transfer"
    HOST_START = "host-start"
    HOST_DONE = "host-done"


@dataclass(frozen=True)
class Step:
    """One instruction of a scheduled computation."""

    instr: Instruction
    kind: StepKind
    flops: float = 0.0          # dot and convolution FLOPs, fusion bodies included
    bytes: float = 0.0          # operands + result
    # The collective instructions it runs, named as explorer._src.report.build.read_collectives
    # names them: the -start itself, the collective inside an async-start's or a fusion's body.
    collectives: tuple[str, ...] = ()
    start: str = ""             # COLLECTIVE_DONE: the name of its start
    body: tuple[Step, ...] = ()  # LOOP: the body's steps
    trips: int | None = None    # LOOP: how many times the body runs; None when unreadable
    # COLLECTIVE fusion: its body has a dot or convolution that does not wait for the
    # collective (TPU async collective fusions), so that arithmetic runs alongside it; else the
    # fusion's arithmetic runs after the collective (e.g. the slice of an all-reduce-scatter).
    overlaps: bool = False
    fused_kernel: bool = False  # COMPUTE in a fused_kernel scope: `bytes` is 0 (on chip)
    causal_kernel: bool = False  # ... a fused_kernel_causal one: `flops` is half the square's
    # ... the part of `flops` from the kernel's own code (a TPU fusion may join a projection's
    # matmul to it)
    kernel_flops: float = 0.0
    # The dots whose FLOPs `flops` counts (a fusion's body's included): their shapes, for rates
    # measured per shape (explorer._src.cost.gemm_rates).
    dots: tuple[Dot, ...] = ()
    # bfloat16 passes per FLOP of its float32 matmuls at a raised precision (matmul_passes),
    # weighted by their FLOPs: 1 at the default precision. A TPU makes them; a GPU does not.
    passes: float = 1.0
    # The share of its matmuls' FLOPs in float32 at precision highest (at_highest): a GPU runs
    # them at its float32 peak, the rest of its float32 matmuls as TF32.
    highest_share: float = 0.0
    # A custom-call kernel (Pallas/Mosaic, Triton, cuDNN): `flops` and `bytes` are the
    # compiler's estimate of it where it has one (explorer._src.hlo.compiler_costs).
    kernel: KernelCost | None = None
    # libtpu marked its estimated cycles unknown: it may run far slower than its roofline.
    uncostable: bool = False
    # A scatter, alone or in a fusion: priced by its bytes, which it can take far longer than.
    scatter: bool = False
    # Of `bytes`, those the instruction writes (its result, or the part of it updated in
    # place); the rest it reads. A chip reads faster than it writes (explorer._src.cost.compute).
    written: float = 0.0
    # Vector-unit work of an instruction that does no matmul (vector_work): elementwise
    # operations, one per element of each operation's result, transcendentals among them, and
    # elements its reductions consume.
    vector_ops: float = 0.0
    transcendentals: float = 0.0
    reduced: float = 0.0
    # The sort or TopK it runs (sorting_work): priced at the chip's measured sorting rates.
    sorting: Sorting | None = None


@dataclass(frozen=True)
class Schedule:
    module: HloModule
    steps: tuple[Step, ...]
    scheduled: bool             # the header says is_scheduled=true: text order is run order


_HEADER = re.compile(r"^HloModule [^\n]*", re.MULTILINE)


def read_schedule(text: str, module: HloModule | None = None) -> Schedule:
    """The entry computation of an optimized module's text (compiled.as_text()) as Steps.
    `module`: that text already parsed, where the caller has it."""
    module = module if module is not None else parse_module(text)
    header = _HEADER.search(text)
    reader = _ScheduleReader(module)
    return Schedule(module, reader.steps(module.entry),
                    header is not None and "is_scheduled=true" in header.group(0))


# The schedules of the last few texts read. A Report's schedule is read when the Report is
# built (the runs of its collectives) and again each time it is priced for a target
# (explorer._src.report.predict), which the app and explorer.search do many times per Report.
SCHEDULES_KEPT = 8
_schedules: Lru[str, Schedule] = Lru(SCHEDULES_KEPT)


def cached_schedule(text: str, module: HloModule | None = None) -> Schedule:
    """read_schedule(text, module), kept for the last SCHEDULES_KEPT texts (keyed by the text
    itself: a Report loaded from disk finds the schedule its equal text was read into)."""
    schedule = _schedules.get(text)
    if schedule is None:
        schedule = read_schedule(text, module)
        _schedules.put(text, schedule)
    return schedule


def trip_count(module: HloModule, loop: Instruction) -> int | None:
    """How many times a while runs its body: XLA's `known_trip_count`, else read from a
    condition `i < N` (or `<=`, `>`, `>=`, `!=`) on a counter that starts at a constant and
    steps by a constant in the body; None when neither can be read."""
    config = _json(loop.attr("backend_config"))
    known = config.get("known_trip_count", {}).get("n")
    if known is not None:
        return int(known)
    bound = _condition(module, loop.callee("condition"))
    if bound is None:
        return None
    index, limit, direction = bound
    names = module.by_name()
    init = config.get("known_init_step", {})
    start = int(init["init"]) if "init" in init else _tuple_constant(names, loop, index)
    step = int(init["step"]) if "step" in init else _body_step(
        module, loop.callee("body"), index)
    if start is None or not step:
        return None
    if step > 0 and direction in ("LT", "NE"):
        span = limit - start
    elif step > 0 and direction == "LE":
        span = limit - start + 1
    elif step < 0 and direction in ("GT", "NE"):
        span = start - limit
    elif step < 0 and direction == "GE":
        span = start - limit + 1
    else:
        return None
    return max(0, ceil(span / abs(step)))


# ---------------------------------------------------------------------------------------------

class _ScheduleReader:
    def __init__(self, module: HloModule):
        self.module = module
        self.names = module.by_name()
        self.fused: set[str] = set()     # instructions read as fused-kernel code
        self.causal_names: set[str] = set()   # ... of a causal kernel
        # TPU collectives run across chains of fusions (explorer._src.hlo.chains): the head starts
        # the collective, the done waits for it, every other fusion of it is arithmetic only.
        chains = collective_chains(module)
        self.chain_heads = {c.head: c for c in chains}
        self.chain_dones = {c.done: c for c in chains}
        self.chain_parts = {f for c in chains for f in (*c.members, *c.carried)}
        # A multi-slice TPU program's DCN legs (explorer._src.hlo.megascale): the send starts one,
        # named by the send, and the recv-done of the same rendezvous key waits for it.
        self.dcn_dones = dcn_recv_done_starts(module)
        # What an instruction computes and the bytes it moves, over the same names.
        self.arithmetic = Arithmetic(module, self.names)
        self.traffic = Traffic(module, self.names)
        # The collectives each computation runs, read once: a fusion's body is asked for them
        # by several of the rules below.
        self.computation_collectives: dict[str, tuple[str, ...]] = {}

    def steps(self, computation: str) -> tuple[Step, ...]:
        out: list[Step] = []
        for instr in self.module.computations.get(computation, []):
            chain = self.chain_dones.get(instr.name)
            wait = [Step(instr, StepKind.COLLECTIVE_DONE, start=chain.head)] if chain else []
            if instr.opcode == "call":
                # A call runs its computation in place: inline its steps.
                out += self.steps(instr.callee("to_apply"))
            elif instr.opcode == "while":
                out += [self.step(instr), *wait]     # a loop that ends a chain: after it
            else:
                out += [*wait, self.step(instr)]
        return tuple(self.in_background(self.kernel_inputs(out), computation))

    def kernel_inputs(self, steps: list[Step]) -> list[Step]:
        """`steps` with each computing step that carries no metadata at all (XLA forms some
        fusions without it, e.g. the CPU's matmul fusions in a rematerialised loop body) and
        whose every user is fused-kernel code made fused-kernel code too: it feeds only the
        kernel, so it is part of it."""
        users: dict[str, list[int]] = {}
        for k, s in enumerate(steps):
            for o in s.instr.operands:
                users.setdefault(o, []).append(k)
        out = list(steps)
        for k in range(len(out) - 1, -1, -1):
            s = out[k]
            readers = users.get(s.instr.name, [])
            if s.kind is not StepKind.COMPUTE or s.fused_kernel or not readers \
                    or not all(out[j].fused_kernel for j in readers) or self.has_metadata(s.instr):
                continue
            out[k] = self.as_kernel(s, any(out[j].causal_kernel for j in readers), s.flops,
                                    s.flops)
        return out

    def fused_body(self, instr: Instruction) -> list[Instruction]:
        """The instructions a fusion runs; [] for any other instruction."""
        if instr.opcode != "fusion":
            return []
        return self.module.called(instr)

    def has_metadata(self, instr: Instruction) -> bool:
        return bool(instr.op_name or any(i.op_name for i in self.fused_body(instr)))

    def from_scope(self, instr: Instruction, marked, inherited: set[str]) -> bool:
        """Whether `instr` is code of a scope: it or its fusion's body is `marked`; or, with
        no metadata at all (XLA forms some copies, converts and fusions without it), it reads
        an instruction in `inherited`, those already found in the scope."""
        if any(marked(i) for i in (instr, *self.fused_body(instr))):
            return True
        if self.has_metadata(instr):
            return False
        return any(o in inherited for o in instr.operands)

    def as_kernel(self, step: Step, causal: bool, skipped_flops: float,
                  own_flops: float) -> Step:
        """`step` as fused-kernel code: no memory traffic, and for a causal kernel half of
        `skipped_flops` (the FLOPs its mask applies to) not done. `own_flops`: those of its
        FLOPs that are the kernel's code."""
        self.fused.add(step.instr.name)
        if causal:
            self.causal_names.add(step.instr.name)
        skipped = (1 - CAUSAL_FLOP_FRACTION) * skipped_flops if causal else 0.0
        return replace(step, flops=step.flops - skipped, bytes=0.0, fused_kernel=True,
                       causal_kernel=causal, kernel_flops=own_flops - skipped)

    def in_background(self, steps: list[Step], computation: str) -> list[Step]:
        """`steps` with each collective the TPU compiler runs in the background (see the module
        docstring) made a COLLECTIVE_START, and a COLLECTIVE_DONE put before the first step
        that reads its result (at the end when none does)."""
        out = list(steps)
        k = 0
        while k < len(out):
            s = out[k]
            carriers = self.background_result(s, computation) \
                if s.kind is StepKind.COLLECTIVE else None
            if carriers is None:
                k += 1
                continue
            out[k] = replace(s, kind=StepKind.COLLECTIVE_START)
            done = Step(s.instr, StepKind.COLLECTIVE_DONE, start=s.instr.name)
            wait = len(out)
            for j in range(k + 1, len(out)):
                reads = set(out[j].instr.operands) & carriers
                if not reads:
                    continue
                if out[j].kind is StepKind.FREE and out[j].instr.opcode in _PASS_ON \
                        and not out[j].instr.is_root:
                    carriers.add(out[j].instr.name)   # a view of the result: read on
                    continue
                wait = j
                break
            out.insert(wait, done)
            k += 1
        return out

    def background_result(self, step: Step, computation: str) -> set[str] | None:
        """The names that carry the result of a collective step that runs in the background,
        or None when it blocks."""
        instr = step.instr
        if instr.opcode == "collective-permute":
            return {instr.name} if "windowed_dot_general_body" in computation else None
        if instr.opcode != "fusion" or not (step.overlaps or not step.flops):
            return None
        body = self.fused_body(instr)
        inner = fused_collectives(self.module, instr)
        if not inner or not all(flagged(i) for i in inner):
            return None
        root = next((i for i in body if i.is_root), None)
        if root is None or root.opcode != "tuple":
            return {instr.name}
        by_name = {i.name: i for i in body}
        parts = set()
        for part, name in enumerate(root.operands):
            source = by_name.get(name)
            while source is not None and source.opcode in ("bitcast", "copy") and \
                    source.operands:
                source = by_name.get(source.operands[0])
            if source is not None and source in inner:
                parts.add(part)
        users = [i for i in self.module.computations.get(computation, [])
                 if instr.name in i.operands]
        carriers = {u.name for u in users if u.opcode == "get-tuple-element"
                    and ints(u.attr("index"))[:1] and ints(u.attr("index"))[0] in parts}
        if any(u.opcode != "get-tuple-element" for u in users):
            carriers.add(instr.name)         # the whole tuple passed on: waited for there
        return carriers

    def step(self, instr: Instruction) -> Step:
        step = self._step(instr)
        if step.kind in MATH_KINDS and step.bytes:
            step = replace(step, written=min(step.bytes, self.traffic.written_bytes(instr)))
        if step.kind is StepKind.COMPUTE and not step.flops and step.kernel is None:
            ops, transcendentals, reduced = vector_work(self.module, instr, self.names)
            step = replace(step, vector_ops=ops, transcendentals=transcendentals,
                           reduced=reduced, sorting=sorting_work(self.module, instr))
        if uncostable(instr):
            step = replace(step, uncostable=True)
        if step.kind is StepKind.COMPUTE and self.scatters(instr):
            step = replace(step, scatter=True)
        if step.flops:
            step = replace(step, dots=self.arithmetic.dots(instr),
                           passes=self.arithmetic.passes(instr),
                           highest_share=self.arithmetic.highest_share(instr))
        # A collective fusion's own arithmetic may be kernel code too (the TPU fuses a
        # weight's all-gather with the attention's matmul).
        if step.kind in (StepKind.COMPUTE, StepKind.COLLECTIVE) and (step.flops or step.bytes) \
                and self.in_fused_kernel(instr):
            causal = self.causal(instr)
            # The causal mask's skipped half applies to the causal scope's FLOPs only.
            skipped = self.scope_flops(instr, _in_causal_scope, self.causal) if causal else 0.0
            return self.as_kernel(step, causal, skipped,
                                  self.scope_flops(instr, in_fused_kernel, self.in_fused_kernel))
        return step

    def scope_flops(self, instr: Instruction, marked, nested) -> float:
        """The FLOPs of an instruction that come from a scope's code: a fusion's, those of its
        body's instructions `marked` or fusions that are `nested` scope code; all of them for
        an instruction marked itself or one with no metadata (read as the scope's)."""
        if instr.opcode != "fusion" or not self.has_metadata(instr) or marked(instr):
            return self.arithmetic.flops(instr)
        return sum(self.arithmetic.flops(i) for i in self.fused_body(instr)
                   if marked(i) or (i.opcode == "fusion" and nested(i)))

    def causal(self, instr: Instruction) -> bool:
        """Fused-kernel code from a `fused_kernel_causal` scope (see from_scope)."""
        return self.from_scope(instr, _in_causal_scope, self.causal_names)

    def in_fused_kernel(self, instr: Instruction) -> bool:
        """From code in a fused_kernel scope: the instruction says so; or it is a fusion of
        which some instruction says so (the kernel's traffic is the large part of such a
        fusion); or it carries no metadata at all (XLA forms some copies and converts without
        it) and reads an instruction that was."""
        return self.from_scope(instr, in_fused_kernel, self.fused)

    def _step(self, instr: Instruction) -> Step:
        op = instr.opcode
        kind, is_async = collective_kind(op)
        if kind is not None:   # its time is the collective's formula, not its bytes
            return Step(instr, StepKind.COLLECTIVE_START if is_async else StepKind.COLLECTIVE,
                        collectives=(instr.name,))
        if op == "async-start":
            called = instr.callee()
            inner = self.collectives_in(called)
            if inner:
                return Step(instr, StepKind.COLLECTIVE_START, collectives=inner)
            return Step(instr, StepKind.COMPUTE, flops=self.arithmetic.flops_in(called),
                        bytes=self.traffic.operand_bytes(instr) + self.traffic.root_bytes(called))
        if op == "send" and is_dcn_send(instr):
            return Step(instr, StepKind.COLLECTIVE_START, collectives=(instr.name,))
        if instr.name in self.dcn_dones:
            return Step(instr, StepKind.COLLECTIVE_DONE, start=self.dcn_dones[instr.name])
        if op.endswith("-done"):
            start = self.start_of(instr)
            if start is not None:
                return Step(instr, StepKind.COLLECTIVE_DONE, start=start.name)
            started = self.names.get(instr.operands[0]) if instr.operands else None
            if started is not None and started.opcode.endswith("-start") \
                    and host_transfer_bytes(started):
                return Step(instr, StepKind.HOST_DONE, start=started.name)
            return Step(instr, StepKind.FREE)
        if op.endswith("-start") and (moved := host_transfer_bytes(instr)):
            # An asynchronous copy (TPU copy-start) or slice/update fusion (GPU fusion-start)
            # between an offloaded buffer and the device.
            return Step(instr, StepKind.HOST_START, bytes=moved)
        if op in FREE_OPCODES or op.endswith("-start") or op in ("send", "recv") or (
                op == "custom-call" and instr.custom_call_target in FREE_CUSTOM_CALLS):
            return Step(instr, StepKind.FREE)
        if op in _HOST_MOVES:
            moved = host_transfer_bytes(instr, self.traffic.operand_spaces(instr))
            if moved:
                return Step(instr, StepKind.HOST_TRANSFER, bytes=moved)
        if op == "while":
            body = instr.callee("body")
            return Step(instr, StepKind.LOOP, body=self.steps(body),
                        trips=trip_count(self.module, instr))
        if op == "fusion":
            called = instr.callee()
            flops = self.arithmetic.flops_in(called)
            nbytes = self.traffic.fusion_bytes(instr, called)
            nbytes += self.traffic.reread_bytes(instr, called)
            inner = self.collectives_in(called)
            if instr.name in self.chain_heads:
                return Step(instr, StepKind.COLLECTIVE_START, flops=flops,
                            bytes=nbytes - self.traffic.collective_only_bytes(instr, called),
                            collectives=(self.chain_heads[instr.name].collective,))
            if instr.name in self.chain_parts:
                return Step(instr, StepKind.COMPUTE, flops=flops,
                            bytes=nbytes - self.traffic.collective_only_bytes(instr, called))
            if inner:
                # A collective run in place inside a fusion (TPU: all-reduce-scatter fusions,
                # async collective fusions): a synchronous collective with arithmetic of its own.
                # What only the collective reads or writes moves over the links, in its time.
                nbytes -= self.traffic.collective_only_bytes(instr, called)
                return Step(instr, StepKind.COLLECTIVE, flops=flops, bytes=nbytes,
                            collectives=inner, overlaps=self.independent_math(called))
            return Step(instr, StepKind.COMPUTE, flops=flops, bytes=nbytes)
        if op == "conditional":
            branches = re.findall(r"%?([\w.\-]+)", instr.attr("branch_computations") or "")
            branches += [instr.callee(k)
                         for k in ("true_computation", "false_computation") if instr.attr(k)]
            # One branch runs; count the costliest.
            return Step(instr, StepKind.COMPUTE, bytes=self.traffic.touched(instr),
                        flops=max((self.arithmetic.flops_in(b) for b in branches), default=0.0))
        kernel = kernel_cost(instr)
        if kernel is not None:
            # Priced from the compiler's estimate of the kernel's work, never as its operands'
            # bytes alone (a flash-attention kernel's FLOPs are most of its time).
            return Step(instr, StepKind.COMPUTE, flops=kernel.flops or 0.0,
                        bytes=(self.traffic.touched(instr) if kernel.bytes_accessed is None
                               else kernel.bytes_accessed), kernel=kernel)
        return Step(instr, StepKind.COMPUTE, flops=self.arithmetic.flops(instr),
                    bytes=self.traffic.touched(instr))

    def scatters(self, instr: Instruction) -> bool:
        """Whether the instruction is a scatter or a fusion that runs one."""
        if instr.opcode == "scatter":
            return True
        return instr.opcode == "fusion" and any(
            self.scatters(i) for i in self.module.computations.get(instr.callee(), []))

    def collectives_in(self, computation: str) -> tuple[str, ...]:
        """The collectives a computation runs, those of the fusions and calls in it included."""
        if computation not in self.computation_collectives:
            out: list[str] = []
            for i in self.module.computations.get(computation, []):
                if collective_kind(i.opcode)[0] is not None:
                    out.append(i.name)
                elif i.opcode in ("fusion", "call"):
                    out += self.collectives_in(i.callee("calls", "to_apply"))
            self.computation_collectives[computation] = tuple(out)
        return self.computation_collectives[computation]

    def independent_math(self, computation: str) -> bool:
        """Whether the computation has a dot or convolution that uses no collective's result."""
        after: set[str] = set()     # instructions that wait for a collective
        for i in self.module.computations.get(computation, []):
            if collective_kind(i.opcode)[0] is not None or self.collectives_in(
                    i.callee()) or any(o in after for o in i.operands):
                after.add(i.name)
            elif self.arithmetic.flops(i) > 0:
                return True
        return False

    def start_of(self, done: Instruction) -> Instruction | None:
        """The asynchronous collective a -done waits for (through async-update links)."""
        instr = done
        while instr.operands and instr.operands[0] in self.names:
            instr = self.names[instr.operands[0]]
            kind, is_async = collective_kind(instr.opcode)
            if kind is not None:
                return instr if is_async else None
            if instr.opcode == "async-start":
                called = instr.callee()
                return instr if self.collectives_in(called) else None
            if instr.opcode != "async-update":
                return None
        return None


# Instructions that may move an offloaded array synchronously: a copy to or from host memory,
# or a slice or in-place update of a host buffer (alone or as a fusion).
_HOST_MOVES = frozenset({"copy", "fusion", "dynamic-slice", "dynamic-update-slice"})


# Free ops through which a collective's result is passed on without being read.
_PASS_ON = frozenset({"get-tuple-element", "bitcast", "tuple"})


def _json(text: str | None) -> dict:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _constant(instr: Instruction | None) -> int | None:
    if instr is None or instr.opcode != "constant":
        return None
    m = re.fullmatch(r"\s*(-?\d+)\s*", instr.operand_text)
    return int(m.group(1)) if m else None


def _condition(module: HloModule, name: str) -> tuple[int, int, str] | None:
    """(tuple index of the counter, the constant it is compared with, the direction as written
    `counter OP constant`) of a loop condition `ROOT compare(gte(param), constant)`, the compare
    possibly wrapped in a fusion; None for any other condition."""
    instrs = module.computations.get(name, [])
    names = {i.name: i for i in instrs}
    root = next((i for i in instrs if i.is_root), None)
    if root is None:
        return None
    compare, operands = root, [names.get(o) for o in root.operands]
    if root.opcode == "fusion":
        inner = module.called(root)
        compare = next((i for i in inner if i.is_root), None)
        params = {i.name: int(i.operand_text) for i in inner if i.opcode == "parameter"}
        if compare is None or any(o not in params for o in compare.operands):
            return None
        operands = [operands[params[o]] if params[o] < len(operands) else None
                    for o in compare.operands]
    m = re.search(r"direction=(\w+)", compare.attrs)
    if compare.opcode != "compare" or not m or len(operands) != 2:
        return None
    flipped = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "NE": "NE", "EQ": "EQ"}
    for counter, limit, direction in ((operands[0], operands[1], m.group(1)),
                                      (operands[1], operands[0], flipped.get(m.group(1), ""))):
        value = _constant(limit)
        if counter is not None and counter.opcode == "get-tuple-element" and value is not None:
            index = ints(counter.attr("index"))
            if index:
                return index[0], value, direction
    return None


def _tuple_constant(names: dict[str, Instruction], loop: Instruction, index: int) -> int | None:
    """The constant a while's init tuple holds at `index` (through copies), if it is one."""
    init = names.get(loop.operands[0]) if loop.operands else None
    if init is None or init.opcode != "tuple" or index >= len(init.operands):
        return None
    value = names.get(init.operands[index])
    while value is not None and value.opcode == "copy" and value.operands:
        value = names.get(value.operands[0])
    return _constant(value)


def _body_step(module: HloModule, body: str, index: int) -> int | None:
    """The constant the body adds to tuple element `index` (`ROOT tuple(..., add(gte, c))`,
    the counter possibly copied first, as the TPU compiler writes a scan's forward loop)."""
    instrs = module.computations.get(body, [])
    names = {i.name: i for i in instrs}
    root = next((i for i in instrs if i.is_root), None)
    if root is None or root.opcode != "tuple" or index >= len(root.operands):
        return None
    update = names.get(root.operands[index])
    if update is None or update.opcode not in ("add", "subtract"):
        return None
    a, b = (names.get(o) for o in update.operands[:2])
    while a is not None and a.opcode == "copy" and a.operands:
        a = names.get(a.operands[0])
    if a is None or b is None or a.opcode != "get-tuple-element" \
            or ints(a.attr("index"))[:1] != (index,):
        return None
    value = _constant(b)
    if value is None:
        return None
    return value if update.opcode == "add" else -value


# Steps whose own arithmetic the compute lane runs: a fusion that runs a collective in place
# computes too, in the background (COLLECTIVE_START) or not.
MATH_KINDS = (StepKind.COMPUTE, StepKind.COLLECTIVE, StepKind.COLLECTIVE_START)


@dataclass(frozen=True)
class Work:
    """What a schedule runs, summed over loop trips, for the cost model's totals."""

    # (FLOPs, bytes, runs) of every step that computes, in schedule order; a fusion that runs a
    # collective in place contributes its own arithmetic here too.
    compute: tuple[tuple[float, float, int], ...]
    collective_runs: dict[str, int]     # collective instruction name -> times it runs
    uncounted_loops: tuple[str, ...]    # whiles whose trip count could not be read: run once
    fused_kernel_runs: int = 0          # runs of steps timed as on-chip fused-kernel code
    causal_kernel_runs: int = 0         # ... of them in a causal kernel (half their FLOPs)
    # The dots of each entry of `compute`, index for index (Step.dots).
    dots: tuple[tuple[Dot, ...], ...] = ()
    # Custom-call kernels run (Step.kernel), and those with no cost estimate from the compiler.
    kernels: tuple[Step, ...] = ()
    # Instructions libtpu could not cost (Step.uncostable).
    uncostable: tuple[Step, ...] = ()
    # Scatters (Step.scatter).
    scatters: tuple[Step, ...] = ()
    # The step of each entry of `compute`, index for index: what else prices it (Step.written,
    # Step.vector_ops, ...).
    compute_steps: tuple[Step, ...] = ()


def schedule_work(schedule: Schedule) -> Work:
    compute: list[tuple[float, float, int]] = []
    compute_steps: list[Step] = []
    dots: list[tuple[Dot, ...]] = []
    runs: dict[str, int] = {}
    uncounted: list[str] = []
    kernels: dict[str, Step] = {}
    slow: dict[str, Step] = {}
    scatters: dict[str, Step] = {}
    fused = causal = 0

    def walk(steps: tuple[Step, ...], times: int) -> None:
        nonlocal fused, causal
        for s in steps:
            if s.kind is StepKind.LOOP:
                if s.trips is None:
                    uncounted.append(s.instr.name)
                walk(s.body, times * (1 if s.trips is None else s.trips))
                continue
            if s.kind in MATH_KINDS and (s.flops or s.bytes):
                compute.append((s.flops, s.bytes, times))
                compute_steps.append(s)
                dots.append(s.dots)
            fused += times * s.fused_kernel
            causal += times * s.causal_kernel
            if s.kernel is not None:
                kernels[s.instr.name] = s
            if s.uncostable:
                slow[s.instr.name] = s
            if s.scatter:
                scatters[s.instr.name] = s
            for name in s.collectives:
                runs[name] = runs.get(name, 0) + times

    walk(schedule.steps, 1)
    return Work(tuple(compute), runs, tuple(uncounted), fused, causal, tuple(dots),
                tuple(kernels.values()), tuple(slow.values()), tuple(scatters.values()),
                tuple(compute_steps))
