"""The sharding in each input's and output's type, as jax traced the program.

Under Explicit mesh axes jax puts a value's sharding into its type (`jax.typeof(x)` reads
`f32[8@X,16]`): the layout the program's code sees, over the Explicit axes only, which the
compiler must keep. The Report lists it beside the layout the compiler chose
(`TensorInfo.typed_spec`), so that the two can be told apart where Auto axes let them differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from explorer._src.report.report import Report
from explorer._src.spec.tensor import Entry, TensorRole, normalize_spec


def with_value_types(report: Report, inputs: Mapping[str, Sequence],
                     outputs: Mapping[str, Sequence]) -> Report:
    """`report` with each input's and output's `typed_spec` set from the spec entries its type
    carried (by name: an input's, ``out.0``), where the mesh has an Explicit axis; `report`
    itself where it has none (every type's sharding is then empty)."""
    if not report.mesh.axes_of_type("explicit"):
        return report
    typed = {TensorRole.INPUT: inputs, TensorRole.OUTPUT: outputs}
    tensors = []
    for t in report.tensors:
        entries = typed.get(t.kind, {}).get(t.name)
        tensors.append(t if entries is None else replace(t, typed_spec=_padded(entries, t)))
    return replace(report, tensors=tuple(tensors))


def _padded(entries: Sequence, t) -> tuple[Entry, ...]:
    spec = normalize_spec(tuple(entries), tensor=t.name)
    return spec + (None,) * (len(t.shape) - len(spec))
