"""Lower bounds on a candidate's memory per device and step time, from its specs alone.

Both are read from the shard shapes of the inputs and one compiled reference, the candidate with
every searched tensor replicated (which is part of the space, so it costs no extra compile):

- memory: XLA's per-device total is arguments + outputs − aliased + temporaries
  (explorer._src.report.report.Memory). The arguments are exactly the shards of the inputs the
  program keeps (jax drops unused ones; the reference says which), so their bytes are a lower bound.
  For a workload that returns its state (`returns_state`), each param and optimizer-state
  output is constrained to its input's layout, so its shard is an output buffer as well, unless
  the compiler aliases outputs to inputs (the reference says whether it did).
- time: the predicted step runs every compute instruction on one lane, each at
  max(FLOPs / peak, bytes / HBM bandwidth) (explorer._src.report.trace), so the step takes at least
  max(sum of FLOPs / peak, sum of bytes / HBM bandwidth); every bound of the estimate does too.
  FLOPs: the partitioner can only split work over mesh axes that some sharding names: an axis
  that no input spec and no constraint point uses carries no sharding anywhere, and every device
  along it repeats the same work. So a candidate whose specs use axes of total size k does at
  least W/k FLOPs per device, W the reference's (replicated) count. A user function may
  constrain shardings inside its own code, which the specs do not show, so there k is the whole
  device count. Bytes: an instruction's bytes count its operands, and every element of an input
  the program keeps is read by some device. A device may read only part of its shard (the
  partitioner can slice a replicated weight to the part its device's work needs), so each
  device reads at least min(its shard, the whole input / the device count) of each kept input:
  every device runs the same program (SPMD), so each reads as much as the others, and together
  they read the whole input.

Neither bound needs a compile. A candidate is skipped when its memory bound exceeds the chip's
memory, or when its time bound is no better than the best predicted step found so far: it cannot
win. Each compiled candidate is checked against its own bounds; a violation (which would mean an
assumption above failed) is reported and switches that bound off for the rest of the search.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from explorer._src.layout_search.space import Problem, SearchPoint, WorkloadProblem
from explorer._src.report.report import Report, TensorRole
from explorer._src.spec.mesh import MeshSpec
from explorer._src.workloads.base import STATE_KINDS, kind_of

# Relative slack when checking a compiled result against its bound: float sums in another order.
_SLACK = 1e-9


@dataclass(frozen=True)
class Reference:
    """What the bounds take from the compiled reference candidate."""

    flops_seconds: float          # its dot FLOPs at the target's peak; 0 when unknown
    kept: frozenset[str]          # the inputs its program takes
    state_outputs: frozenset[str]  # inputs whose output copy has the input's layout, unaliased
    bandwidth: float | None = None   # the chip's HBM bytes/s; None: no traffic bound
    whole_bytes: Mapping[str, int] = field(default_factory=dict)   # kept input -> its bytes


def reference_of(report: Report | None, problem: Problem,
                 bandwidth: float | None = None) -> Reference:
    """The reference's numbers; without a report (its compile failed), bounds that prune
    nothing."""
    if report is None or report.estimate is None:
        return Reference(0.0, frozenset(), frozenset())
    flops = report.estimate.compute.flops_seconds or 0.0
    kept = frozenset(t.name for t in report.tensors if t.kind == TensorRole.INPUT)
    state: frozenset[str] = frozenset()
    if isinstance(problem, WorkloadProblem) and problem.workload.returns_state \
            and report.memory is not None and report.memory.aliased == 0:
        outputs = {_leaf_name(t.name) for t in report.tensors if t.kind == TensorRole.OUTPUT}
        state = frozenset(t.name for t in problem.inputs
                          if kind_of(problem.kinds, t.name) in STATE_KINDS
                          and t.name in outputs)
    whole = {t.name: t.nbytes for t in problem.inputs if t.name in kept}
    return Reference(flops, kept, state, bandwidth, whole)


def _leaf_name(path: str) -> str:
    """An output's name as its input's: the workload returns a dict under its inputs' names,
    whose leaves the report names by their path (`out.l0.wq`)."""
    return path.removeprefix("out.")


def memory_bound(point: SearchPoint, ref: Reference) -> int:
    """Bytes per device the candidate needs at least: its kept inputs' shards, and its state
    outputs' shards."""
    return (sum(b for n, b in point.shard_bytes.items() if n in ref.kept)
            + sum(b for n, b in point.shard_bytes.items() if n in ref.state_outputs))


def split_factor(point: SearchPoint, mesh: MeshSpec, hidden_shardings: bool) -> int:
    """The most devices the candidate can split its work over."""
    if hidden_shardings:
        return mesh.device_count
    return math.prod(mesh.size(a) for a in point.axes_used)


def time_bound(point: SearchPoint, ref: Reference, hidden_shardings: bool) -> float:
    flops = ref.flops_seconds / split_factor(point, point.layout.mesh, hidden_shardings)
    if not ref.bandwidth:
        return flops
    devices = point.layout.mesh.device_count
    read = sum(min(b, ref.whole_bytes.get(n, b) / devices)
               for n, b in point.shard_bytes.items() if n in ref.kept)
    return max(flops, read / ref.bandwidth)


def time_violation(label: str, seconds: float | None, time_lb: float) -> str | None:
    """What is wrong, when the compiled result's predicted step falls below its time bound."""
    if seconds is not None and seconds < time_lb * (1 - _SLACK):
        return (f"{label}: predicted {seconds:.6g} s is below its time bound {time_lb:.6g} s; "
                "the time bound is off for the rest of the search")
    return None


def memory_violation(label: str, memory: int | None, memory_lb: int) -> str | None:
    """What is wrong, when the compiled result's memory per device falls below its bound."""
    if memory is not None and memory < memory_lb * (1 - _SLACK):
        return (f"{label}: {memory} bytes per device is below its memory bound {memory_lb}; "
                "the memory bound is off for the rest of the search")
    return None
