"""What libtpu's tiling of a matmul reads from HBM: operand windows fetched more than once.

libtpu runs a matmul (a `convolution` of two 2-D operands, e.g. `dim_labels=bf_io->bf`, in a
kOutput fusion) as a loop over windows of its operands and result, and writes the tiling into
the fusion's backend_config: `window_config.iteration_bounds` is [N, M, K], the number of
windows that the result's columns (the kernel's output features), its rows (the input's batch)
and the contraction are cut into; `input_window_bounds`, `kernel_window_bounds` and
`output_window_bounds` are each window's extent in (8, 128) tiles. mlp_f32's first matmul,
f32[8192,4096] x f32[4096,16384], is tiled [16, 8, 11]: windows of 1024 x 384 of the input,
384 x 1024 of the kernel, 1024 x 1024 of the result (benchmarks/results/tpu-v5e-2026-12-06/
hlo/mlp_f32.hlo.txt.gz).

A window is copied from HBM into VMEM each time the loop moves on to another one. When all
three dimensions are cut, every order of the loops fetches some operand's windows more than
once: with the contraction innermost, each result window is finished in one visit, but the
input is read N times and the kernel M times; with it outside, the result's partial sums (f32,
as the matrix unit accumulates) go to HBM and come back. `window_traffic` takes the order that
moves the fewest bytes; `reread_bytes` is what it moves beyond the instruction's operands and
result read or written once (Step.bytes). The model prices those bytes at the chip's copy rate
(explorer._src.cost.compute.instruction_seconds): they are DMA copies from HBM into VMEM.

Held against one TPU v5e chip (benchmarks/results/tpu-v5e-2026-12-06):

- rates.json's float32 sweep: 8192^3 ran 6.706 ms (164 TFLOP/s) and 16384^3 50.557 ms (174),
  where bf16 ran 5.881 and 46.188. libtpu tiles them [8, 8, 22] and [16, 16, 43] (windows of
  1024 x 384 and 384 x 1024): 4.56 GB and 35.4 GB read and written, 680 and 701 GB/s over the
  measured times, against copies' 646 to 687 GB/s. At bf16 the windows are 512 deep and the
  same matmuls move half the bytes: their FLOPs bound them. The f32 shapes that ran at the bf16
  rate (4096^3 and the rectangular ones, 187 to 192 TFLOP/s) leave one dimension uncut or read
  little twice.
- mlp_f32's two matmuls (programs.json): fusion.17, tiled [16, 8, 11], 4.83 GB, ran 7.064 ms;
  fusion.7, [4, 8, 43], 4.43 GB, 6.341 ms (684 and 698 GB/s); their FLOPs take 5.75 ms each.
- tiling-check.json: 15 more float32 and 4 bf16 matmuls measured on the chip to test this rule
  (their HLO in hlo-tiling.tar.gz): the 12 float32 ones tiled in all three dimensions ran at
  656 to 704 GB/s of window traffic, 9 to 19% slower than their FLOPs; priced with their
  re-reads at the copy rate they come within -1.5 to +6.1%. Those with a dimension uncut
  ([32, 5, 1], [1, 41, 4], [64, 1, 4]) and the bf16 ones ran at their FLOPs' time.

With a dimension uncut, libtpu keeps what does not move resident, and nothing is read twice
that the measurements show: rates.json's float32 1024x8192x8192, tiled [16, 1, 5], ran at its
FLOPs' time (0.734 ms), where reading its input 16 times would take longer. So only a matmul cut
in all three dimensions is given re-reads. Matmuls with batch or spatial dimensions (more than
three iteration bounds) are not read here.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from math import prod

from explorer._src.hlo.module import Instruction
from explorer._src.hlo.schedule import Step

# Elements in one (8, 128) tile: the unit of window_config's window bounds.
TILE_ELEMENTS = 8 * 128
# Bytes of one element of the partial sums the matrix unit accumulates (f32).
PARTIAL_SUM_BYTES = 4
# Bytes per operand element the windows must imply for the tiling to be read as describing the
# instruction's operands (8-bit to 32-bit types, with room for small side operands such as a
# bias vector); outside it the windows are not those of two whole 2-D operands.
_ELEMENT_BYTES = (0.5, 8.0)


@dataclass(frozen=True)
class MatmulTiling:
    """libtpu's tiling of a 2-D matmul, from its fusion's window_config.

    Attributes:
        n: windows along the result's columns (the kernel's output features).
        m: windows along the result's rows (the input's batch dimension).
        k: windows along the contraction.
        input_tiles: (8, 128) tiles in one window of the input (the left operand).
        kernel_tiles: tiles in one window of the kernel (the right operand).
        output_tiles: tiles in one window of the result.
    """

    n: int
    m: int
    k: int
    input_tiles: int
    kernel_tiles: int
    output_tiles: int

    @property
    def windows(self) -> int:
        return self.n * self.m * self.k


def matmul_tiling(instr: Instruction) -> MatmulTiling | None:
    """The tiling libtpu wrote into a matmul fusion's backend_config; None for an instruction
    without one, or whose loop has other than three bounds (a batched matmul, a convolution
    with spatial windows) or windows other than 2-D."""
    config = instr.attr("backend_config")
    if not config or "window_config" not in config:
        return None
    try:
        window = json.loads(config).get("window_config") or {}
        bounds = [int(b) for b in window.get("iteration_bounds", ())]
        extents = [[int(x) for x in window.get(key, ())] for key in
                   ("input_window_bounds", "kernel_window_bounds", "output_window_bounds")]
    except (ValueError, TypeError, AttributeError):
        return None
    if len(bounds) != 3 or any(len(e) != 2 for e in extents) or \
            min(bounds + [x for e in extents for x in e]) < 1:
        return None
    n, m, k = bounds
    return MatmulTiling(n, m, k, *(prod(e) for e in extents))


def window_traffic(t: MatmulTiling, input_bytes: float, kernel_bytes: float,
                   written: float) -> float:
    """Bytes a matmul tiled `t` moves between HBM and VMEM under the loop order that moves
    fewest: each operand window is fetched each time the loop moves to another one (a loop that
    does not index an operand leaves its window in place); the result is written once when the
    contraction is the innermost of the loops that index it (`written`), else each visit of a
    result window writes its f32 partial sums and each but the first reads them back."""
    bounds = {"n": t.n, "m": t.m, "k": t.k}
    result_windows = t.m * t.n
    partial_window = t.output_tiles * TILE_ELEMENTS * PARTIAL_SUM_BYTES
    best = None
    for order in itertools.permutations("nmk"):
        def fetches(dims: str, order: tuple[str, ...] = order) -> int:
            innermost = max(order.index(d) for d in dims)
            return prod(bounds[d] for d in order[:innermost + 1])

        moved = (fetches("mk") * input_bytes / (t.m * t.k)
                 + fetches("kn") * kernel_bytes / (t.k * t.n))
        visits = fetches("mn")
        moved += written if visits == result_windows else \
            (2 * visits - result_windows) * partial_window
        best = moved if best is None else min(best, moved)
    return best


def reread_bytes(step: Step) -> float:
    """Bytes a TPU matmul fusion moves beyond its operands and result once (Step.bytes) because
    libtpu's tiling fetches operand windows again (window_traffic); 0 for any other
    instruction, and for a matmul with a dimension its tiling leaves uncut.

    The Step carries its operands' bytes together, not each one's: they are split between the
    input and the kernel by the elements their windows cover (each window times the windows
    along its dimensions), as if both had one element size. A tiling whose windows do not
    cover the result, or imply an element size outside 0.5 to 8 bytes, is not read as this
    matmul's."""
    if step.flops <= 0 or step.bytes <= 0 or step.kernel is not None or step.fused_kernel:
        return 0.0
    t = matmul_tiling(step.instr)
    if t is None or min(t.n, t.m, t.k) < 2:
        return 0.0
    operands = step.bytes - step.written
    input_elements = t.input_tiles * t.m * t.k * TILE_ELEMENTS
    kernel_elements = t.kernel_tiles * t.k * t.n * TILE_ELEMENTS
    result = max((prod(a.dims) for a in step.instr.arrays), default=0)
    covered = t.output_tiles * t.m * t.n * TILE_ELEMENTS
    if operands <= 0 or not result or not result <= covered < 2 * result:
        return 0.0
    per_element = operands / (input_elements + kernel_elements)
    if not _ELEMENT_BYTES[0] <= per_element <= _ELEMENT_BYTES[1]:
        return 0.0
    input_bytes = operands * input_elements / (input_elements + kernel_elements)
    moved = window_traffic(t, input_bytes, operands - input_bytes, step.written)
    return max(0.0, moved - step.bytes)
