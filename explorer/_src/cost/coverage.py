"""Where each predicted instruction's time comes from: a rate held against a chip, or not.

Every compute instruction of a priced schedule has a *kind* (`instruction_kind`): what it does
as the cost model prices it (a matmul and its dtype, a convolution, elementwise work, a
reduction, a whole-row reduce-window, a copy, a gather, a scatter, a sort, a custom-call kernel
and its name, a fusion libtpu could not cost, or the opcode of anything else). `COVERAGE` is the
table of the kinds that were run on a chip and compared with the model, each entry citing the
kept result that measured it (benchmarks/results/...). `time_basis` says, for an instruction
on a chip, which it is:

- **measured**: its kind was held against this chip and ran within `MEASURED_WITHIN` of the
  model, or ran slower by a measured factor (`Coverage.slowdown`, the high end of its range)
  or at a measured fraction of a kernel's own cost estimate (`Coverage.efficiency`, applied
  to its time);
- **unmeasured**: a roofline never held against this chip. Where its kind was held against
  another chip (a GPU's elementwise fusion, which a TPU v5e measured), it may take that chip's
  worst ratio, and at least `MEASURED_WITHIN` times; a kind never held against any chip could
  take far longer: `UNMEASURED_SLOWDOWN` times, the worst any kind the model did not see into
  ran against its roofline on a TPU v5e (explorer/_src/cost/ranges.py turns these into the
  step's range).

Pure data and lookups; no jax. docs/cost-model.md, "Provenance and ranges", has the table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from explorer._src.cost.catalog.sources import ML_ENG_MAMF
from explorer._src.hlo.compiler_costs import UNCOSTABLE_SEEN_SLOWER
from explorer._src.hlo.module import HloModule, Instruction
from explorer._src.hlo.schedule import Step

# The kept chip results the table cites.
V5E_RATES = "benchmarks/results/tpu-v5e-2026-12-06/rates.json"
V5E_PROGRAMS = "benchmarks/results/tpu-v5e-2026-12-06/programs.json"
V5E_VECTOR = "benchmarks/results/tpu-v5e-2026-12-06/vector.json"
V5E_TILING = "benchmarks/results/tpu-v5e-2026-12-06/tiling-check.json"
V5E_KERNELS = "benchmarks/results/tpu-v5e-2026-12-07/unmeasured/unmeasured.json"
V5E_MORE = "benchmarks/results/tpu-v5e-2026-12-07/more-kinds/measured.json"
V5E_CENSUS = "benchmarks/results/tpu-v5e-2026-12-07/census-kinds/unmeasured.json"

# A measured kind none of whose instructions ran 2x its prediction or more is priced as it is:
# the range is not widened for it (the user meets no 2x error there). A kind measured slower
# widens the high end of the range by its worst ratio.
MEASURED_WITHIN = 2.0
# How many times its predicted time an instruction of a kind never held against the chip may
# take: the worst seen on a TPU v5e, a softmax fusion libtpu could not cost (437 ms against the
# 13 ms roofline of the day, hlo/compiler_costs.py; 22.5x today's 19.4 ms). The Pallas flash
# attention (7.3x its estimate) and the scatter-adds (4.25x) ran inside it.
UNMEASURED_SLOWDOWN = float(UNCOSTABLE_SEEN_SLOWER)


@dataclass(frozen=True)
class Coverage:
    """One instruction kind held against one chip.

    Attributes:
        chip: the catalog chip's name (Chip.name), e.g. "TPU v5e".
        kind: the kind, as instruction_kind names it ("matmul bf16", "scatter",
            "kernel tpu_custom_call flash_attention").
        worst: measured over predicted, the largest among its instructions predicted at
            10 us or more (benchmarks/kind_coverage.py prints it from the kept results).
        what: what was measured, in a few words.
        source: the kept result file that measured it (a published measurement's address
            where the project measured none).
        efficiency: a kernel's cost-estimate roofline over its measured time: the fraction of
            that roofline it ran at, applied to its predicted time (1: none).
        best: measured over predicted (before `efficiency`), the smallest: a kernel's range
            reaches down to it.
    """

    chip: str
    kind: str
    worst: float
    what: str
    source: str
    efficiency: float = 1.0
    best: float = 1.0

    @property
    def slowdown(self) -> float:
        """How many times its predicted time an instruction of this kind may take: 1 where
        none ran MEASURED_WITHIN slower, else the worst measured; for a kernel priced at a
        measured `efficiency`, the worst measured beyond it, whatever it is."""
        worst = self.worst * self.efficiency
        if self.efficiency != 1.0 or worst >= MEASURED_WITHIN:
            return max(1.0, worst)
        return 1.0


_V5E = "TPU v5e"
# The 16 programs of benchmarks/user_programs.py, each instruction's device time, against the
# model's price of the HLO the chip compiled (benchmarks/kind_coverage.py), and the probes.
COVERAGE: tuple[Coverage, ...] = (
    Coverage(_V5E, "matmul bf16", 1.45,
             "157 matmul fusions of 16 programs, 121 ms predicted, 132 ms measured; 11 bf16 "
             "matmuls 2048^3 to 16384^3 at 187-194 of 197 TFLOP/s", V5E_PROGRAMS),
    Coverage(_V5E, "matmul f32", 1.21,
             "float32 matmuls 1024^3 to 16384^3 and 19 held-out shapes, their tiled windows "
             "priced: -1.5% to +6.1%", V5E_TILING),
    Coverage(_V5E, "convolution", 1.62,
             "193 windowed convolution fusions (convnet_train, vit_train, llama_train), 181 ms "
             "predicted, 188 ms measured", V5E_PROGRAMS),
    Coverage(_V5E, "elementwise", 1.26,
             "365 elementwise fusions, 34.6 ms predicted, 30.8 ms measured; multiply-add, exp "
             "and tanh chains on the vector unit", V5E_VECTOR),
    Coverage(_V5E, "copy", 1.82,
             "27 copies and transposes, 6.4 ms predicted, 5.3 ms measured; copies of 256 MiB "
             "to 2 GiB at 646-687 GB/s", V5E_RATES),
    Coverage(_V5E, "reduction", 1.14,
             "94 reductions, 25.1 ms predicted, 24.6 ms measured; reads of 256 MiB to 2 GiB at "
             "753-757 GB/s", V5E_PROGRAMS),
    Coverage(_V5E, "reduce-window", 1.53,
             "16 whole-row softmax reduce-windows, 25.9 ms predicted, 28.5 ms measured",
             V5E_VECTOR),
    Coverage(_V5E, "in-place update", 1.04,
             "19 dynamic-update-slices (decode_step's KV cache, llama_train_scan's layers), "
             "27.2 ms predicted, 25.8 ms measured", V5E_PROGRAMS),
    Coverage(_V5E, "custom-call ConcatBitcast", 0.0,
             "196 of libtpu's ConcatBitcast calls, 9.7 ms predicted, ran in nanoseconds",
             V5E_PROGRAMS),
    Coverage(_V5E, "gather", 2.92,
             "7 gather fusions (embedding lookups), 0.20 ms predicted, 0.75 ms measured; 65536 "
             "rows of 4 KiB, 0.60 ms predicted, 1.76 ms measured (tpu-v5e-2026-12-07)",
             V5E_MORE),
    Coverage(_V5E, "scatter", 4.25,
             "4 scatter-add fusions (embedding gradients), 1.49 ms predicted, 6.38 ms "
             "measured; another, 0.30 ms predicted, ran 0.60 ms (tpu-v5e-2026-12-07)",
             V5E_PROGRAMS),
    # Held out: the vector unit's rate (V5E_VECTOR) and the sorting rates (catalog/tpu.py,
    # fitted on V5E_KERNELS and V5E_MORE) priced these before they ran; worst rounded up.
    Coverage(_V5E, "bitwise", 1.02,
             "threefry's integer operations: random bits, uniform and normal numbers and a "
             "dropout mask, 16M to 64M elements, -1.5% to +1.8% of the vector unit's time",
             V5E_CENSUS),
    Coverage(_V5E, "sort", 1.16,
             "sorts of 2^20 to 2^22 keys whole and rows of 1024 and 32768, f32 and bf16: "
             "0.94x to 1.15x the sorting network's measured rate", V5E_CENSUS),
    Coverage(_V5E, "custom-call TopK", 1.38,
             "XLA's TopK, k of 8 to 64 of rows of 32000 and 128256, f32 and bf16: 1.00x to "
             "1.37x (the smallest, 32 rows) its measured rate per key and k", V5E_CENSUS),
    Coverage(_V5E, "uncostable fusion", 22.5,
             "an f32 softmax's reductions libtpu could not cost: 437 ms measured, 19.4 ms "
             "predicted", V5E_PROGRAMS),
    # jax.experimental.pallas.ops.tpu.flash_attention, bf16, against its cost estimate at the
    # measured matmul rate: causal B=4 H=16 S=4096 D=128, 21.09 ms for 2.90 (V5E_PROGRAMS);
    # causal B=2 H=8 S=8192, 20.53 ms for 2.90 (7.08x); not causal B=4 H=16 S=4096,
    # 31.95 ms for 2.89 (11.04x) (V5E_KERNELS). Worst and best rounded outward to 11.1 and 7.0.
    Coverage(_V5E, "kernel tpu_custom_call flash_attention", 11.1,
             "jax's Pallas TPU flash attention, bf16, three shapes causal and not: 7.1x to "
             "11.0x its cost estimate at the measured matmul rate", V5E_KERNELS,
             efficiency=2.90 / 21.09, best=7.0),
) + tuple(
    # Published, not the project's: the largest bf16 matmuls a sweep ran on each GPU, whose
    # fraction of the peak the catalog applies (cost/catalog/gpu.py); smaller GEMMs run slower,
    # which XLA's measured rates by shape cover on the H100, H200 and B200 (cost/gemm_rates.py).
    Coverage(gpu, "matmul bf16", 1.0,
             "the largest bf16 matmuls of a sweep (ml-engineering's MAMF table), at the "
             "fraction of the peak the catalog applies", ML_ENG_MAMF)
    for gpu in ("A100 SXM 80GB", "H100 SXM", "H200 SXM", "B200"))


def coverage_for(chip: str, kind: str) -> Coverage | None:
    """The table's entry for `kind` on the chip named `chip`; None where it was never held
    against that chip."""
    return _BY_KEY.get((chip, kind))


def held_elsewhere(kind: str) -> list[Coverage]:
    """The table's entries for `kind` on every chip it was held against."""
    return [c for c in COVERAGE if c.kind == kind]


_BY_KEY = {(c.chip, c.kind): c for c in COVERAGE}


# ---------------------------------------------------------------------------------------------
# An instruction's kind.

# Opcodes that run as elementwise work on the vector unit, or move data as a copy does: the
# kinds "elementwise" and "copy" (anything else is named by its opcode).
_ELEMENTWISE = frozenset({
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "remainder",
    "negate", "abs", "sign", "exponential", "exponential-minus-one", "log", "log-plus-one",
    "tanh", "logistic", "sqrt", "rsqrt", "cbrt", "sine", "cosine", "tan", "atan2", "erf",
    "floor", "ceil", "round-nearest-afz", "round-nearest-even", "is-finite", "compare",
    "select", "clamp", "and", "or", "xor", "not", "shift-left", "shift-right-logical",
    "shift-right-arithmetic", "convert", "bitcast-convert", "broadcast", "iota", "constant",
    "parameter", "tuple", "get-tuple-element", "bitcast", "reshape", "reverse", "pad",
    "slice", "dynamic-slice", "concatenate", "real", "imag", "complex", "popcnt",
    "count-leading-zeros", "reduce-precision", "stochastic-convert", "map", "fusion",
})
_COPIES = frozenset({"copy", "transpose"})
# Bit operations on integers (a random-number generator's threefry rounds): never measured on
# the chip, whose elementwise rates were measured on float arithmetic. A normal sample of
# 8192 x 8192 ran 2.13 ms where the float rates give 0.41 ms (tpu-v5e-2026-12-07/more-kinds).
_BITWISE = frozenset({"shift-left", "shift-right-logical", "shift-right-arithmetic", "xor",
                      "popcnt", "count-leading-zeros"})
_KERNEL_NAME = re.compile(r"jit\(([\w.\-]+)\)/pallas_call")
_SUFFIX = re.compile(r"\.\d+$")


def kernel_name(instr: Instruction) -> str:
    """A custom-call kernel's name: the function a `pallas_call` ran under
    (`jit(attention)/jit(flash_attention)/pallas_call` -> `flash_attention`), else the
    instruction's name without its number (`flash_attention.1` -> `flash_attention`)."""
    found = _KERNEL_NAME.findall(instr.op_name)
    return found[-1] if found else _SUFFIX.sub("", instr.name)


def instruction_body(instr: Instruction, module: HloModule | None) -> list[Instruction]:
    """The instructions an instruction runs: itself, or a fusion and its body (nested fusions
    too)."""
    out, todo, seen = [], [instr], set()
    while todo:
        i = todo.pop()
        out.append(i)
        if i.opcode == "fusion" and module is not None and i.name not in seen:
            seen.add(i.name)
            todo += module.called(i)
    return out


_WINDOW = re.compile(r"size=([\dx]+)")


def _matmul_kind(body: list[Instruction], step: Step) -> str:
    """`matmul <dtype>` (the dtype of most of its dots' FLOPs, or of its first convolution's
    operand, as HLO names it), or `convolution` for one with a spatial window."""
    convs = [i for i in body if i.opcode == "convolution"]
    if any(d != "1" for c in convs for m in [_WINDOW.search(c.attr("window") or "")] if m
           for d in m.group(1).split("x")):
        return "convolution"
    by_dtype: dict[str, float] = {}
    for d in step.dots:
        dtype = _multiplied_dtype(d.lhs_dtype, d.rhs_dtype)
        by_dtype[dtype] = by_dtype.get(dtype, 0.0) + d.flops
    if by_dtype:
        return "matmul " + max(by_dtype, key=by_dtype.__getitem__)
    names = {i.name: i for i in body}
    for c in convs:
        operands = [names.get(o) for o in c.operands[:2]]
        dtypes = [o.arrays[0].dtype if o is not None and o.arrays else "" for o in operands]
        if dtypes and dtypes[0]:
            return "matmul " + _multiplied_dtype(dtypes[0], dtypes[-1])
    return "matmul ?"


def _multiplied_dtype(lhs: str, rhs: str) -> str:
    """The dtype a matmul multiplies in: its left operand's, but for a boolean one (a one-hot
    mask fused into the matmul, as an embedding lookup written `one_hot(ids) @ table` is), which
    the matrix unit takes widened to the other operand's."""
    return rhs if lhs == "pred" and rhs and rhs != "pred" else lhs


def instruction_kind(step: Step, module: HloModule | None = None) -> str:
    """What a compute step is, as the coverage table names kinds: `kernel <custom-call
    target> <kernel name>`, `uncostable fusion`, `scatter`, `sort`, `matmul <dtype>` (its
    operands' dtype as HLO names it: bf16, f32, s8), `convolution` (one with a spatial
    window), `gather`, `bitwise` (integer bit operations: a random-number generator's),
    `reduce-window`, `reduction`, `in-place update`, `copy`, `elementwise`, or the first
    opcode it runs that none of these covers (`custom-call
    <target>`, `fft`, `cholesky`...). `module`: the module whose fusions' bodies it reads."""
    instr = step.instr
    if step.kernel is not None:
        return f"kernel {step.kernel.target} {kernel_name(instr)}"
    if step.uncostable:
        return "uncostable fusion"
    body = instruction_body(instr, module)
    ops = {i.opcode for i in body}
    if step.scatter or "scatter" in ops:
        return "scatter"
    for op in ("sort", "gather"):
        if op in ops:
            return op
    if step.flops:
        return _matmul_kind(body, step)
    if ops & _BITWISE:
        return "bitwise"
    calls = [i.custom_call_target for i in body if i.opcode == "custom-call"]
    if calls:
        return f"custom-call {calls[0] or '?'}"
    for op, kind in (("reduce-window", "reduce-window"), ("reduce", "reduction"),
                     ("dynamic-update-slice", "in-place update")):
        if op in ops:
            return kind
    other = sorted(ops - _ELEMENTWISE - _COPIES)
    if other:
        return other[0]
    return "copy" if ops & _COPIES and not ops - _COPIES - {"parameter", "bitcast", "fusion"} \
        else "elementwise"


# ---------------------------------------------------------------------------------------------
# Where a time comes from.

@dataclass(frozen=True)
class TimeBasis:
    """Where one instruction's predicted time comes from (docs/cost-model.md, "Provenance and
    ranges").

    Attributes:
        kind: its kind: ``matmul bf16``, ``scatter``, ``kernel tpu_custom_call flash_attention``.
        measured: its kind was held against this chip (the coverage table has it).
        slowdown: how many times its predicted time it may take: the high end of its range
            (1 where its kind ran within 2x of the model on the chip).
        efficiency: the measured fraction of a kernel's cost-estimate roofline applied to its
            time (1: none applied); the low end of its range is that roofline.
        source: the kept result that measured it; "" where none did.
        text: the same in words, for a table or a hover.
    """

    kind: str
    measured: bool
    slowdown: float
    efficiency: float = 1.0
    source: str = ""
    text: str = ""

    def to_dict(self) -> dict:
        return {"kind": self.kind, "measured": self.measured, "slowdown": self.slowdown,
                "efficiency": self.efficiency, "source": self.source, "text": self.text}


def time_basis(step: Step, chip: str, module: HloModule | None = None) -> TimeBasis:
    """Where the predicted time of compute step `step` on the chip named `chip` comes from."""
    kind = instruction_kind(step, module)
    entry = coverage_for(chip, kind)
    if entry is None:
        elsewhere = held_elsewhere(kind)
        if elsewhere:
            # The model's roofline for this kind was held against another chip: not this
            # one's measurement, but not a kind the model never saw run either.
            slowdown = max([MEASURED_WITHIN] + [e.slowdown for e in elsewhere])
            others = ", ".join(sorted({e.chip for e in elsewhere}))
            return TimeBasis(kind, False, slowdown, text=(
                f"{kind}: measured on a {others}, never on a {chip}; may take up to "
                f"{slowdown:g}x as long"))
        return TimeBasis(kind, False, UNMEASURED_SLOWDOWN, text=(
            f"{kind}: a roofline never held against any chip; may take up to "
            f"{UNMEASURED_SLOWDOWN:g}x as long"))
    if entry.efficiency != 1.0:
        text = (f"{kind}: its cost estimate at {entry.efficiency:.2f} of the roofline, as "
                f"measured on a {chip} ({entry.source})")
    elif entry.slowdown > 1.0:
        text = (f"{kind}: measured on a {chip} up to {entry.slowdown:.3g}x slower than "
                f"predicted ({entry.source})")
    else:
        text = f"{kind}: measured on a {chip} ({entry.source})"
    return TimeBasis(kind, True, entry.slowdown, entry.efficiency, entry.source, text)


def kernel_efficiency(step: Step, chip: str) -> float:
    """The measured fraction of its cost estimate's roofline a custom-call kernel runs at on
    `chip` (1 for any other step, or a kernel never measured there)."""
    if step.kernel is None:
        return 1.0
    entry = coverage_for(chip, f"kernel {step.kernel.target} {kernel_name(step.instr)}")
    return entry.efficiency if entry is not None else 1.0
