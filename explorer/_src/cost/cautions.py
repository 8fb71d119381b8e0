"""What the priced schedule cannot see and that may make a step far slower than predicted:
fusions the compiler could not cost, custom-call kernels, scatters (`cautions`).

Each caution carries the slowdown measured on a chip (benchmarks/results/tpu-v5e-2026-12-06).
"""

from __future__ import annotations

from explorer._src.cost.coverage import kernel_efficiency
from explorer._src.hlo.compiler_costs import UNCOSTABLE_SEEN_SLOWER
from explorer._src.hlo.schedule import Work

# A causal Pallas flash-attention kernel (jax.experimental.pallas.ops.tpu.flash_attention, B=4,
# H=16, S=4096, D=128) ran 21.1 ms on a TPU v5e where its cost estimate at the chip's measured
# rate gives 2.9 ms; the f32 softmax fusion libtpu could not cost took 437 ms where its roofline
# gives 13 ms (benchmarks/results/tpu-v5e-2026-12-06).
KERNEL_SEEN_SLOWER = 7
# Scatter-adds of embedding gradients ran 4.2x (embedding_grad) and 5.2x (llama_train) slower
# than their bytes at the measured HBM rate on a TPU v5e (the same run).
SCATTER_SEEN_SLOWER = "4 to 5"


def cautions(work: Work, chip: str = "") -> tuple[str, ...]:
    """What the priced schedule cannot see and that may make the step far slower: the fusions
    libtpu marked uncostable, the custom-call kernels priced from the compiler's estimate of
    their work (or, with none, from their bytes alone) but those priced at the efficiency
    measured for them on `chip`, and scatters priced by their bytes."""
    out = []
    kernels = [s for s in work.kernels if kernel_efficiency(s, chip) == 1.0]
    if work.uncostable:
        names = ", ".join(s.instr.name for s in work.uncostable[:3])
        out.append(f"libtpu could not estimate the cost of {len(work.uncostable)} fusion(s) "
                   f"({names}); such a fusion can run far slower than its roofline (one ran "
                   f"{UNCOSTABLE_SEEN_SLOWER}x slower on a TPU v5e), so the step may be far slower "
                   "than predicted: see the compiler warnings for the line and what helps")
    if kernels:
        names = ", ".join(s.instr.name for s in kernels[:3])
        blind = [s.instr.name for s in kernels if not s.kernel.estimated]
        out.append(f"{len(kernels)} custom-call kernel(s) ({names}) are priced from the "
                   "compiler's estimate of their work, FLOPs at the matmul rate and bytes at "
                   "HBM speed; the compiler cannot see inside a kernel, and its run can be far "
                   f"slower (a causal Pallas flash attention ran {KERNEL_SEEN_SLOWER}x slower "
                   "than its estimate on a TPU v5e)"
                   + (f"; {', '.join(blind[:3])} carry no estimate, so only their bytes are "
                      "priced" if blind else ""))
    if work.scatters:
        names = ", ".join(s.instr.name for s in work.scatters[:3])
        out.append(f"{len(work.scatters)} scatter(s) ({names}) are priced as the bytes they "
                   f"move; scatters can take far longer (embedding gradients' scatter-adds ran "
                   f"{SCATTER_SEEN_SLOWER}x slower than their bytes on a TPU v5e)")
    return tuple(out)

