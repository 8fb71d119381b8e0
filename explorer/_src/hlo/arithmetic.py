"""The arithmetic an instruction does: the FLOPs of its dots and convolutions, the GEMM shape
of each dot, the bfloat16 passes a TPU makes for its float32 matmuls, and the vector-unit work
of an instruction that does no matmul. explorer._src.hlo.schedule asks it for each Step's `flops`,
`dots`, `passes` and vector work.

Counting rules (docs/cost-model.md, "The predicted step trace"):

- dot: 2 · prod(result dims) · prod(lhs contracting dims) (dot_flops); convolution:
  2 · prod(result dims) · input features · window taps (convolution_flops). A fusion or a
  call counts the dots and convolutions of the computation it runs, and of fusions nested in
  it.
- vector work, of an instruction that does no matmul: one operation per element of each
  elementwise operation's result, and one per element a reduction consumes (vector_work).
- sorting work, of a sort or XLA's TopK custom call, alone or fused (sorting_work): the
  elements sorted, the length of the sorted dimension and, for TopK, k. A chip's measured
  sorting rates price it (explorer._src.cost.catalog.types.SortingRates).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from math import ceil, log2, prod

from explorer._src.hlo.module import HloModule, Instruction, ints


@dataclass(frozen=True)
class Dot:
    """One dot's GEMM shape: b batched products of [m, k] x [k, n], operand dtypes as HLO
    names them (e.g. "bf16"). What a measured rate per shape is looked up by."""

    b: int
    m: int
    n: int
    k: int
    lhs_dtype: str
    rhs_dtype: str

    @property
    def flops(self) -> float:
        return 2.0 * self.b * self.m * self.n * self.k


def dot_shape(instr: Instruction, names: dict[str, Instruction]) -> Dot | None:
    """The GEMM a `dot` instruction is: batch dims multiplied into b, the free dims of each
    operand into m and n, the contracting dims into k. None when an operand's shape is unknown."""
    lhs, rhs = (names.get(o) for o in (*instr.operands, "", "")[:2])
    if lhs is None or rhs is None or not lhs.arrays or not rhs.arrays:
        return None
    ld, rd = lhs.arrays[0].dims, rhs.arrays[0].dims
    lb, lc = ints(instr.attr("lhs_batch_dims")), ints(instr.attr("lhs_contracting_dims"))
    rb, rc = ints(instr.attr("rhs_batch_dims")), ints(instr.attr("rhs_contracting_dims"))
    return Dot(prod(ld[i] for i in lb if i < len(ld)),
               prod(d for i, d in enumerate(ld) if i not in lb and i not in lc),
               prod(d for i, d in enumerate(rd) if i not in rb and i not in rc),
               prod(ld[i] for i in lc if i < len(ld)),
               lhs.arrays[0].dtype, rhs.arrays[0].dtype)


# "HIGH: ... On TPU: performs float32 computations in 3 bfloat16 passes. HIGHEST: ... On TPU:
# performs float32 computations in 6 bfloat16 [passes]" (jax.lax.Precision's documentation). On
# a TPU v5e a chain of float32 4096^3 matmuls ran 6.1x as long under
# jax.default_matmul_precision("highest") as at the default (benchmarks/results/
# tpu-v5e-2026-12-06/caller-context/caller_context.json).
PRECISION_PASSES = {"high": 3, "highest": 6}
# An explicit algorithm (jax.lax.DotAlgorithmPreset) names its passes: dot_bf16_bf16_f32_x6.
_ALGORITHM_PASSES = re.compile(r"^dot_bf16_bf16_f32_x(\d+)$")


def _float32_operands(instr: Instruction, names: dict[str, Instruction]) -> bool:
    operands = (names.get(o) for o in instr.operands[:2])
    return any(o is not None and o.arrays and o.arrays[0].dtype == "f32" for o in operands)


def matmul_passes(instr: Instruction, names: dict[str, Instruction]) -> int:
    """How many bfloat16 passes a TPU makes for a dot or convolution: more than 1 only for
    float32 operands at precision high or highest (its operand_precision) or an explicit
    bf16 x3/x6/x9 algorithm; the default precision is one pass."""
    if not _float32_operands(instr, names):
        return 1
    algorithm = _ALGORITHM_PASSES.match(instr.attr("algorithm") or "")
    if algorithm:
        return int(algorithm.group(1))
    precisions = (instr.attr("operand_precision") or "").strip("{}").split(",")
    return max(PRECISION_PASSES.get(p.strip(), 1) for p in precisions)


def at_highest(instr: Instruction, names: dict[str, Instruction]) -> bool:
    """Whether a dot or convolution multiplies float32 operands at precision highest, which a
    GPU runs on its float32 units instead of as TF32 ("HIGHEST: ... On GPU: uses float32",
    jax.lax.Precision)."""
    return _float32_operands(instr, names) and "highest" in (instr.attr("operand_precision")
                                                             or "")


def dot_flops(instr: Instruction, names: dict[str, Instruction]) -> float:
    """2 · prod(result dims) · prod(lhs contracting dims): one multiply and one add per term."""
    lhs = names.get(instr.operands[0]) if instr.operands else None
    if lhs is None or not lhs.arrays or not instr.arrays:
        return 0.0
    dims = lhs.arrays[0].dims
    contracting = ints(instr.attr("lhs_contracting_dims"))
    return 2.0 * prod(instr.arrays[0].dims) * prod(dims[d] for d in contracting if d < len(dims))


def convolution_flops(instr: Instruction, names: dict[str, Instruction]) -> float:
    """2 · prod(result dims) · input features · window taps: each output element sums over the
    kernel's input features and the window positions that meet real input elements.
    dim_labels name the dimensions (e.g. `bf_io->bf`, `b01f_01io->b01f`): `i`/`o` the kernel's
    input/output features, digits the spatial dimensions, in window order.

    A window position meets k/d real input elements on average along a spatial dimension of
    window size k and lhs_dilate d (d-1 holes between input elements), and at most n, the
    input's size there. The TPU skips the holes: the input gradient of a stride-2 3x3
    convolution (lhs_dilate=2x2) ran on a v5e chip in the time of 9/4 taps per output, not of
    the 4 that whole positions would give (benchmarks/results/tpu-v5e-2026-12-06, convnet_train).
    The TPU compiler writes batched matmuls with both tricks: attention's q·k
    as a window over the batch dimensions with lhs_dilate equal to its size, and weight
    gradients with a window of 8 over an input of size 1 padded by 7 on each side; each output
    meets one real element there, and counting the whole window would multiply the FLOPs by
    the window's size."""
    lhs = names.get(instr.operands[0]) if instr.operands else None
    rhs = names.get(instr.operands[1]) if len(instr.operands) > 1 else None
    labels = instr.attr("dim_labels") or ""
    m = re.fullmatch(r"([^_]*)_([^-]*)->.*", labels)
    if rhs is None or not rhs.arrays or not instr.arrays or not m or "i" not in m.group(2):
        return 0.0
    lhs_labels, kernel_labels = m.group(1), m.group(2)
    kernel = rhs.arrays[0].dims
    window = instr.attr("window") or ""
    dilate = _windowints(window, "lhs_dilate")
    taps = 1
    for axis in range(sum(c.isdigit() for c in kernel_labels)):
        k = kernel[kernel_labels.index(str(axis))]
        d = dilate[axis] if axis < len(dilate) else 1
        n = (lhs.arrays[0].dims[lhs_labels.index(str(axis))]
             if lhs is not None and lhs.arrays and str(axis) in lhs_labels else k)
        taps *= min(k / d, n)
    return 2.0 * prod(instr.arrays[0].dims) * kernel[kernel_labels.index("i")] * taps


def _windowints(window: str, key: str) -> tuple[int, ...]:
    """`lhs_dilate=32x8` of a convolution's window={...} as (32, 8); () when absent."""
    m = re.search(rf"\b{key}=([\dx]+)", window)
    return ints(m.group(1)) if m else ()


# Elementwise operations the vector unit computes, one operation per element of the result.
ELEMENTWISE_OPCODES = frozenset({
    "add", "subtract", "multiply", "maximum", "minimum", "negate", "abs", "sign", "compare",
    "select", "clamp", "and", "or", "xor", "not", "shift-left", "shift-right-logical",
    "shift-right-arithmetic", "convert", "floor", "ceil", "round-nearest-afz",
    "round-nearest-even", "is-finite", "remainder", "iota", "popcnt", "count-leading-zeros",
    "real", "imag", "bitcast-convert", "reduce-precision",
})
# Elementwise operations that the vector unit evaluates as a sequence (a transcendental, or a
# reciprocal and a multiply); each counts as VectorUnit.transcendental_ops operations.
TRANSCENDENTAL_OPCODES = frozenset({
    "exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "rsqrt",
    "sqrt", "cbrt", "power", "divide", "sine", "cosine", "tan", "atan2", "erf",
})


def vector_work(module: HloModule, instr: Instruction,
                names: dict[str, Instruction] | None = None, depth: int = 0
                ) -> tuple[float, float, float]:
    """(elementwise operations, transcendentals among them, elements reduced) of an
    instruction that does no matmul: itself, or its fusion body's (nested fusions included).

    Each elementwise operation (ELEMENTWISE_OPCODES, TRANSCENDENTAL_OPCODES) counts one per
    element of its result; a reduction one per element it consumes, which are its reduced
    elements too; a reduce-window that spans a whole dimension (a row's reduction broadcast
    back) counts as a reduction of its operand, another reduce-window one per element of its
    result per window tap. Broadcasts, reshapes, copies, slices and other moves count
    nothing: their cost is their bytes. An instruction that does a matmul, a gather, a scatter
    or a sort is not counted here (0, 0, 0). `names`: module.by_name(), where the caller has
    it."""
    names = module.by_name() if names is None else names
    if instr.opcode == "fusion":
        ops = transcendentals = reduced = 0.0
        for i in module.called(instr):
            if i.opcode in _NOT_VECTOR_PRICED:
                return 0.0, 0.0, 0.0
            if i.opcode == "fusion" and depth >= 8:
                continue
            o, t, r = vector_work(module, i, names, depth + 1)
            ops, transcendentals, reduced = ops + o, transcendentals + t, reduced + r
        return ops, transcendentals, reduced
    if instr.opcode in _NOT_VECTOR_PRICED:
        return 0.0, 0.0, 0.0
    size = float(prod(instr.arrays[0].dims)) if instr.arrays else 0.0
    if instr.opcode in ELEMENTWISE_OPCODES:
        return size, 0.0, 0.0
    if instr.opcode in TRANSCENDENTAL_OPCODES:
        return size, size, 0.0
    if instr.opcode in ("reduce", "reduce-window"):
        inputs = instr.operands[:max(1, len(instr.operands) // 2)]
        consumed = float(sum(prod(names[o].arrays[0].dims) for o in inputs
                             if o in names and names[o].arrays))
        if instr.opcode == "reduce-window" and not spans_a_dimension(instr, names):
            taps = prod(_window_sizes(instr))
            return size * taps, 0.0, 0.0
        return consumed, 0.0, consumed
    return 0.0, 0.0, 0.0


@dataclass(frozen=True)
class Sorting:
    """What a sort or a TopK does: `elements` keys (each operand's element count; a sort's
    other operands ride along), sorted along a dimension of `length`; `k` kept of each row
    (TopK; 0 for a sort)."""

    elements: float
    length: int
    k: int = 0

    @property
    def stages(self) -> int:
        """L = ceil(log2 length): a bitonic sorting network's stages (Batcher 1968)."""
        return ceil(log2(self.length)) if self.length > 1 else 1

    @property
    def network_passes(self) -> int:
        """The network's compare-exchange passes over each row: L(L+1)/2."""
        return self.stages * (self.stages + 1) // 2


def sorting_work(module: HloModule, instr: Instruction) -> Sorting | None:
    """The sort or TopK an instruction runs (itself, or the first in its fusion's body), or
    None. A sort's `dimensions={d}` names its sorted dimension; TopK sorts its operand's last
    dimension and keeps its result's last dimension, k."""
    body = list(module.called(instr)) if instr.opcode == "fusion" else [instr]
    names = {i.name: i for i in body}
    for i in body:
        if i.opcode == "sort" and i.operands:
            dims = _operand_dims(module, i, names)
            d = ints(i.attr("dimensions") or "")
            if dims and d and d[0] < len(dims):
                return Sorting(float(prod(dims)), dims[d[0]])
        if i.opcode == "custom-call" and i.custom_call_target == "TopK" and i.arrays:
            dims = _operand_dims(module, i, names)
            if dims:
                return Sorting(float(prod(dims)), dims[-1], i.arrays[0].dims[-1])
    return None


def _operand_dims(module: HloModule, instr: Instruction,
                  names: dict[str, Instruction]) -> tuple[int, ...] | None:
    operand = names.get(instr.operands[0]) or next(
        (x for x in module.computations.get(instr.computation, [])
         if x.name == instr.operands[0]), None)
    return tuple(operand.arrays[0].dims) if operand is not None and operand.arrays else None


# Instructions whose fusions are priced by their FLOPs or bytes alone, not on the vector unit.
_NOT_VECTOR_PRICED = frozenset({"dot", "convolution", "gather", "scatter", "sort", "custom-call",
                                "all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                                "collective-permute", "while", "conditional", "call"})


def _window_sizes(instr: Instruction) -> tuple[int, ...]:
    m = re.search(r"\bsize=([\dx]+)", instr.attr("window") or "")
    return ints(m.group(1)) if m else ()


def spans_a_dimension(instr: Instruction, names: dict[str, Instruction]) -> bool:
    """Whether a reduce-window's window covers the whole of some dimension of its operand of
    more than one element: each output reduces a whole row. `names`: module.by_name()."""
    operand = names.get(instr.operands[0]) if instr.operands else None
    if operand is None or not operand.arrays:
        return False
    dims = operand.arrays[0].dims
    return any(w >= n > 1 for w, n in zip(_window_sizes(instr), dims, strict=False))


class Arithmetic:
    """The FLOPs, dots and matmul passes of a module's instructions, each computation's FLOPs
    counted once."""

    def __init__(self, module: HloModule, names: dict[str, Instruction] | None = None):
        self.module = module
        self.names = module.by_name() if names is None else names
        # A fusion's body is asked for its FLOPs by several of the schedule reader's rules.
        self.computation_flops: dict[str, float] = {}

    def flops(self, instr: Instruction) -> float:
        if instr.opcode == "dot":
            return dot_flops(instr, self.names)
        if instr.opcode == "convolution":
            return convolution_flops(instr, self.names)
        if instr.opcode in ("fusion", "call"):
            return self.flops_in(instr.callee("calls", "to_apply"))
        return 0.0

    def dots(self, instr: Instruction) -> tuple[Dot, ...]:
        """The dots an instruction runs: itself, or those of the computation it calls."""
        if instr.opcode == "dot":
            shape = dot_shape(instr, self.names)
            return (shape,) if shape else ()
        if instr.opcode in ("fusion", "call", "async-start"):
            called = instr.callee("calls", "to_apply")
            return tuple(d for i in self.module.computations.get(called, [])
                         for d in self.dots(i))
        return ()

    def passes(self, instr: Instruction) -> float:
        """Its matmuls' bfloat16 passes per FLOP (matmul_passes), weighted by their FLOPs."""
        runs = [(self.flops(m), matmul_passes(m, self.names)) for m in self._matmuls(instr)]
        flops = sum(f for f, _ in runs)
        return sum(f * p for f, p in runs) / flops if flops else 1.0

    def highest_share(self, instr: Instruction) -> float:
        """The share of its matmuls' FLOPs in float32 at precision highest (at_highest)."""
        runs = [(self.flops(m), at_highest(m, self.names)) for m in self._matmuls(instr)]
        flops = sum(f for f, _ in runs)
        return sum(f for f, highest in runs if highest) / flops if flops else 0.0

    def _matmuls(self, instr: Instruction) -> Iterator[Instruction]:
        """Its dots and convolutions: itself, or those of the computations it calls."""
        if instr.opcode in ("dot", "convolution"):
            yield instr
        elif instr.opcode in ("fusion", "call", "async-start"):
            for i in self.module.computations.get(instr.callee("calls", "to_apply"), []):
                yield from self._matmuls(i)

    def flops_in(self, computation: str) -> float:
        if computation not in self.computation_flops:
            self.computation_flops[computation] = sum(
                self.flops(i) for i in self.module.computations.get(computation, []))
        return self.computation_flops[computation]
