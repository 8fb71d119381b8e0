"""What the compiler itself says about an instruction's cost, read from its backend_config.

Two facts the optimized HLO carries that the explorer's own counting cannot see:

- **A kernel's cost estimate.** A Pallas (Mosaic) kernel on TPU is a `custom-call` to
  `tpu_custom_call` whose backend_config holds the kernel's `cost_estimate` (FLOPs, bytes
  accessed, transcendentals), as its author gave it to `pl.pallas_call(cost_estimate=...)`, or as
  jax estimated it. XLA's own cost analysis of the program counts the same numbers. Nothing else
  about the kernel's run is visible: the compiler does not look inside it.
- **A fusion libtpu could not cost.** libtpu writes its own estimate of each fusion's run,
  `"estimated_cycles"`, into the fusion's backend_config; INT64_MAX (9223372036854775807) there
  means its cost model gave up on that fusion. On a TPU v5e the one such fusion seen (an f32
  softmax's reductions over f32[2,8,8192,8192] in layout {2,3,1,0}, emitter
  EmitReduceWindowSublane) took 437 of a 449 ms program that a roofline prices at 26 ms
  (benchmarks/results/tpu-v5e-2026-12-06).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from explorer._src.hlo.module import Instruction

UNCOSTABLE_CYCLES = 2**63 - 1
# That fusion took 437 ms where its roofline gives 13 ms: 34x (benchmarks/results/...).
UNCOSTABLE_SEEN_SLOWER = 34
_UNCOSTABLE = re.compile(r'"estimated_cycles":\s*"?' + str(UNCOSTABLE_CYCLES))
_EMITTER = re.compile(r'"emitter":\s*"(\w+)"')
# Custom-call targets that run a kernel someone wrote (Mosaic TPU, Triton, cuDNN, cuBLAS).
_KERNEL_TARGETS = re.compile(r"tpu_custom_call|__gpu\$xla\.gpu\.triton|__cudnn\$|"
                             r"__cublas\$|mosaic", re.IGNORECASE)


@dataclass(frozen=True)
class KernelCost:
    """A custom-call kernel and the compiler's estimate of its work (None where it gave
    none)."""

    target: str                       # the custom_call_target, e.g. "tpu_custom_call"
    flops: float | None = None
    bytes_accessed: float | None = None
    transcendentals: float | None = None

    @property
    def estimated(self) -> bool:
        return self.flops is not None or self.bytes_accessed is not None


def kernel_cost(instr: Instruction) -> KernelCost | None:
    """The kernel a custom-call runs and its cost estimate; None for an instruction that is not
    a kernel (other custom calls are bookkeeping: sharding markers, layout hints)."""
    if instr.opcode != "custom-call":
        return None
    target = instr.custom_call_target
    if not _KERNEL_TARGETS.search(target):
        return None
    estimate = _cost_estimate(instr.attr("backend_config"))
    return KernelCost(target, _number(estimate, "flops"), _number(estimate, "bytes_accessed"),
                      _number(estimate, "transcendentals"))


def _cost_estimate(config: str | None) -> dict:
    if not config or "cost_estimate" not in config:
        return {}
    try:
        value = json.loads(config)
    except ValueError:
        return {}
    estimate = (value.get("custom_call_config") or {}).get("cost_estimate") \
        if isinstance(value, dict) else None
    return estimate if isinstance(estimate, dict) else {}


def _number(estimate: dict, key: str) -> float | None:
    try:
        return float(estimate[key])
    except (KeyError, TypeError, ValueError):
        return None


def uncostable(instr: Instruction) -> bool:
    """Whether libtpu marked the instruction's estimated cycles unknown (INT64_MAX)."""
    config = instr.attr("backend_config")
    return bool(config) and "estimated_cycles" in config and bool(_UNCOSTABLE.search(config))


def emitter(instr: Instruction) -> str:
    """The code emitter libtpu chose for the instruction (e.g. EmitReduceWindowSublane); ""."""
    m = _EMITTER.search(instr.attr("backend_config") or "")
    return m.group(1) if m else ""
