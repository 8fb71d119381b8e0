"""Memory per device by what the tensors are: parameters, gradients, optimizer state,
activations and other inputs and outputs, beside XLA's arguments, outputs and temporaries.

Only a built-in workload says what its tensors are, so only its reports are split:

- `params`, `optimizer`: the inputs the workload's `kinds` calls "param" (the default) and
  "opt", plus the outputs named like them (`out['l0.wq']`): a training step returns its updated
  state, and without buffer donation the old and the new copy are both held. An output the
  compiler wrote into a donated input's buffer (the module's input_output_alias) is that
  input's bytes, counted once, as `Memory.total` counts it;
- `grads`: the size per device of the gradients at the workload's `grad.<param>` constraint
  points, as the partitioner laid them out; None (not located) when the program pins none of
  them. XLA may fuse a gradient into the update instead of holding it whole, so this is what
  the gradients are, not a claim about the peak;
- `activations`: XLA's temporaries, the intermediate values the step holds at its peak
  (activations kept for the backward pass, scratch, and the gradients where XLA does hold
  them; XLA may also place some inside the output buffers before the outputs are written);
- `other`: the other inputs (tokens, a batch) and outputs (a loss).

A user function's bytes are all `other` (Memory.kinds stays None). Inputs and outputs kept in
host memory (offloaded, `TensorInfo.memory_kind`) are not the device's and are left out; the
host's bytes are `Memory.host_arguments`, `host_outputs` and `host_temporaries`.
"""

from __future__ import annotations

import re
from dataclasses import replace

from explorer.hlo.module import input_output_aliases
from explorer.report.report import Report, TensorInfo, TensorRole, WorkloadInfo
from explorer.workloads.base import Workload

_KIND_OF = {"param": "params", "opt": "optimizer", "input": "other"}
_OUTPUT_NAME = re.compile(r"^out\['(.*)'\]$")
_GRAD_POINT = re.compile(r"(?:^|/)(grad\.[^/]+)/sharding_constraint$")


def with_workload(report: Report, info: WorkloadInfo, workload: Workload) -> Report:
    """The report of a built-in workload: its WorkloadInfo, and its memory split by kind."""
    report = replace(report, workload=info)
    if report.memory is None:
        return report
    kinds = memory_kinds(report, workload.kinds(info.params) if workload.kinds else {},
                         bool(workload.points and any(
                             p.kind == "grad" for p in workload.points(info.params).values())))
    return replace(report, memory=replace(report.memory, kinds=kinds))


def memory_kinds(report: Report, kinds: dict[str, str], has_grads: bool
                 ) -> dict[str, int | None]:
    """Bytes per device by kind. `kinds` maps input names to "param", "opt" or "input"
    (unnamed inputs are params, as Workload.kinds says); `has_grads` says whether the program
    has gradient constraint points to find its gradients at."""
    out: dict[str, int | None] = {"params": 0, "grads": 0, "optimizer": 0, "activations": 0,
                                  "other": 0}
    inputs = {t.name for t in report.tensors if t.kind == TensorRole.INPUT}
    outputs = [t for t in report.tensors if t.kind == TensorRole.OUTPUT]
    aliases = input_output_aliases(report.optimized_hlo)
    # The root is a tuple of the outputs ({i}: output i), or the one output itself ({}).
    in_donated = {t.name for i, t in enumerate(outputs)
                  if (i,) in aliases or (len(outputs) == 1 and () in aliases)}
    for t in report.tensors:
        if t.memory_kind != "device":
            continue     # offloaded: in host memory, not the device's (Memory.host_*)
        if t.kind == TensorRole.INPUT:
            out[_KIND_OF.get(kinds.get(t.name, "param"), "other")] += t.bytes_per_device
        elif t.kind == TensorRole.OUTPUT and t.name not in in_donated:
            m = _OUTPUT_NAME.match(t.name)
            like = m.group(1) if m and m.group(1) in inputs else None
            kind = _KIND_OF.get(kinds.get(like, "param"), "other") if like else "other"
            out[kind] += t.bytes_per_device
    grads = gradients(report.tensors)
    if grads:
        out["grads"] = sum(t.bytes_per_device for t in grads.values())
    elif has_grads:
        out["grads"] = None     # not located: never a guess
    out["activations"] = report.memory.temporaries if report.memory is not None else 0
    return out


def gradients(tensors: tuple[TensorInfo, ...]) -> dict[str, TensorInfo]:
    """Constraint point -> the gradient tensor pinned there (`grad.<param>`), once each."""
    out: dict[str, TensorInfo] = {}
    for t in tensors:
        if t.kind != TensorRole.INTERMEDIATE:
            continue
        m = _GRAD_POINT.search(t.op_name)
        if m and m.group(1) not in out:
            out[m.group(1)] = t
    return out
