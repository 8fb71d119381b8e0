"""The one place that validates a request, before any work is done: the API, the CLI and the app
all call these. Each check raises the explorer error that names the offending value and the
valid choices, so that every caller reports bad input the same way."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from explorer._src.compile.pool import MAX_DEVICES
from explorer._src.compile.protocol import Partitioner
from explorer._src.compile.tpu import check_topology
from explorer._src.cost.catalog.names import get_target
from explorer._src.cost.mapping import AxisMapping, check_mapping, default_mapping
from explorer._src.errors import ExplorerError, InputError, TargetError, TensorError, choices
from explorer._src.spec.bounds import (
    MAX_TENSORS,
    MAX_TOTAL_ELEMENTS,
    power_text,
    show,
)
from explorer._src.spec.mesh import AxisType, MeshSpec, parse_mesh
from explorer._src.spec.tensor import TensorSpec, check_spec

PARTITIONERS = tuple(Partitioner)
_MAX_PATTERN = 1000           # characters of one donate= pattern; input names are short
MAX_TIMEOUT = 24 * 3600       # seconds; a compile that needs longer is not coming back
_MAX_NAME = 200               # characters of a target or topology name; real ones are short


def check_partitioner(partitioner) -> Partitioner:
    """The partitioner named by `partitioner` ("shardy", "gspmd" or a Partitioner)."""
    if not isinstance(partitioner, str) or partitioner not in PARTITIONERS:
        raise InputError(f"partitioner {show(partitioner)} is not one of "
                         f"{choices(PARTITIONERS)}")
    return Partitioner(partitioner)


def check_timeout(timeout, name: str = "timeout") -> float | None:
    """None (the default) or a positive, finite number of seconds, at most a day; `name` is
    the argument's, for the error."""
    if timeout is None:
        return None
    # Compared before any float(): float() of a huge int overflows.
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) \
            or (isinstance(timeout, float) and not math.isfinite(timeout)) \
            or not 0 < timeout <= MAX_TIMEOUT:
        raise InputError(f"{name} {show(timeout)} is not a positive, finite number of "
                         f"seconds up to {MAX_TIMEOUT}; pass e.g. {name}=120, or None for "
                         "the default")
    return float(timeout)


def check_function(fn) -> None:
    if not callable(fn):
        raise InputError(f"{show(fn)} is not a function; pass the function to analyze first")


def check_flag(value, name: str) -> bool:
    """A yes/no option: True or False (0 and 1 too), not any object that happens to be truthy."""
    if not isinstance(value, bool | int) or value not in (0, 1):
        raise InputError(f"{name}={show(value)} is not True or False")
    return bool(value)


def check_mesh(mesh, axis_type: AxisType | str = AxisType.AUTO, *,
               tpu_topology: str | None = None, real_devices: bool = False) -> MeshSpec:
    """The parsed mesh, checked against what will compile it: the fake CPU devices' limit, a TPU
    topology's chip count, or (real devices) nothing, since the machine's own count decides."""
    real_devices = check_flag(real_devices, "real_devices")
    if tpu_topology is not None and (not isinstance(tpu_topology, str)
                                     or len(tpu_topology) > _MAX_NAME):
        raise InputError(f"TPU topology {show(tpu_topology)} is not a topology name like "
                         "'v5e:4x4'")
    if real_devices and tpu_topology:
        raise InputError("real_devices and tpu_topology exclude each other: compile for "
                         "this machine's devices or for a TPU topology, not both")
    mesh_spec = parse_mesh(mesh, axis_type)
    if tpu_topology:
        check_topology(tpu_topology, mesh_spec)
    elif not real_devices:
        mesh_spec.check_device_limit(MAX_DEVICES)
    return mesh_spec


# A mapping's value for one mesh axis: a physical axis name, "name:k", (name, k), or a
# sequence of those.


def check_target(target: str | None, mapping, mesh: MeshSpec) -> AxisMapping | None:
    """The axis mapping a prediction on `target` will use (None without a target): a known
    target, and a mapping (or the default one) that fits the mesh."""
    if target is None:
        if mapping is not None:
            raise InputError("a mapping places mesh axes on a target's links; choose a "
                             "target too (see explorer.targets())")
        return None
    if isinstance(target, str) and len(target) > _MAX_NAME:
        raise TargetError(f"target {show(target)} is not a target name (see explorer.targets())")
    try:
        get_target(target)
    except ExplorerError:
        raise
    except (TypeError, ValueError, ArithmeticError, LookupError):
        # e.g. a slice size too long to read as a number; the catalog's own errors pass above.
        raise TargetError(f"target {show(target)} is not a target name; see "
                          "explorer.targets()") from None
    if mapping is None:
        return default_mapping(target, mesh.names, mesh.sizes)
    return check_mapping(target, mesh.names, mesh.sizes, mapping)


def check_inputs(leaves: Iterable[TensorSpec], mesh: MeshSpec) -> None:
    """Every input named once, each spec fits its tensor and the mesh, and the inputs within
    the count and total-size bounds."""
    seen = set()
    total = 0
    for t in leaves:
        if t.name in seen:
            raise TensorError(f"two inputs are named {t.name!r}; give each tensor its own name",
                              tensor=t.name)
        seen.add(t.name)
        if len(seen) > MAX_TENSORS:
            raise TensorError(f"more than {power_text(MAX_TENSORS)} input tensors; the limit "
                              f"is {power_text(MAX_TENSORS)}")
        total += math.prod(t.shape)
        if total > MAX_TOTAL_ELEMENTS:
            raise TensorError(f"the inputs up to {t.name!r} have more than "
                              f"{power_text(MAX_TOTAL_ELEMENTS)} elements in all; the limit is "
                              f"{power_text(MAX_TOTAL_ELEMENTS)}", tensor=t.name)
        check_spec(t, mesh)


def check_donate(donate, names: Sequence[str]) -> tuple[int, ...]:
    """The positions among the inputs `names` (in argument order) of those `donate` names: a
    regular expression or a sequence of them, each found in an input's name (re.search, as
    `specs=` patterns are); () for None. A pattern that finds no input is refused, naming the
    inputs, since a donation that names nothing is a typo, not a choice."""
    if donate is None:
        return ()
    patterns = (donate,) if isinstance(donate, str) else donate
    if not isinstance(patterns, Iterable) or isinstance(patterns, bytes | bytearray):
        raise TensorError(f"donate={show(donate)} is not a regular expression or a list of "
                          "them naming inputs, e.g. donate='^params[.]' or ['w1', 'w2']")
    patterns = tuple(patterns)
    if len(patterns) > MAX_TENSORS:
        raise TensorError(f"donate= has more than {power_text(MAX_TENSORS)} patterns; the "
                          f"limit is {power_text(MAX_TENSORS)}")
    donated: set[int] = set()
    for pattern in patterns:
        if not isinstance(pattern, str) or len(pattern) > _MAX_PATTERN:
            raise TensorError(f"donate pattern {show(pattern)} is not a regular expression of "
                              f"at most {_MAX_PATTERN} characters matched against input names")
        try:
            compiled = re.compile(pattern)
        except re.error as e:
            raise TensorError(f"donate pattern {pattern!r} is not a regular expression ({e})"
                              ) from None
        found = [i for i, n in enumerate(names) if compiled.search(n)]
        if not found:
            more = f" and {len(names) - 10} more" if len(names) > 10 else ""
            raise TensorError(f"donate pattern {pattern!r} names no input; the inputs are "
                              f"{choices(names[:10])}{more}")
        donated.update(found)
    return tuple(sorted(donated))
