"""The one place that validates a request, before any work is done: the API, the CLI and the app
all call these. Each check raises the explorer error that names the offending value and the
valid choices, so that every caller reports bad input the same way."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

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

# explorer.analyze's `extrapolate` as it is given: False (off), True, "auto", or the two layer
# counts to compile (a tuple, or text "3,5"; "auto:3,5" for both). A Request holds it in one
# written form (`extrapolate_option`). Read here, beside the other fields' checks, so that the
# Request checks it as it is made (explorer/_src/api/extrapolate.py runs it).
ExtrapolateLike: TypeAlias = bool | str | tuple[int, int]
# The layer counts compiled by default. Not 1: with one layer XLA drops the scan's loop (a
# trip count of 1), so the one-layer program is shaped unlike every longer one. Not 2: libtpu
# combines the loop body's gradient all-reduces otherwise at a trip count of 2 (two parts
# where 3 and more layers get six, for transformer_train on tpu-v5e-2x4). From 3 on, the
# loop's body and what is outside it were the same on the CPU and for a TPU slice, and only
# the trip count and the stacked weights grew.
DEFAULT_FROM = (3, 4)
_COUNTS = re.compile(r"\s*(\d+)\s*,\s*(\d+)\s*")
# The workload params that count a stack's layers: what `extrapolate` carries on.
LAYER_PARAMS = ("layers", "n_layers")
_EXTRAPOLATE_CHOICES = "True, 'auto', two layer counts (a, b) or 'A,B' (e.g. '2,4'), or 'auto:A,B'"


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


def check_extrapolate(value: ExtrapolateLike | None
                      ) -> tuple[Literal["on", "auto"], tuple[int, int]] | None:
    """explorer.analyze's `extrapolate` read: None for off, else the mode and the two layer
    counts to compile.

    Raises:
        InputError: not one of the forms, or counts that are not 0 < a < b."""
    if value is None or value is False:
        return None
    if value is True:
        return "on", DEFAULT_FROM
    mode: Literal["on", "auto"] = "on"
    counts: Any = value
    if isinstance(value, str):
        text = value.strip()
        if text == "auto" or text.startswith("auto:"):
            mode, text = "auto", text[len("auto:"):] if ":" in text else ""
        if not text:
            return mode, DEFAULT_FROM
        m = _COUNTS.fullmatch(text)
        if m is None:
            raise InputError(f"extrapolate={show(value)} is not understood; choose False, "
                             f"{_EXTRAPOLATE_CHOICES}")
        counts = (int(m.group(1)), int(m.group(2)))
    if (not isinstance(counts, tuple | list) or len(counts) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in counts)):
        raise InputError(f"extrapolate={show(value)} is not understood; choose False, "
                         f"{_EXTRAPOLATE_CHOICES}")
    a, b = counts
    if not 0 < a < b:
        raise InputError(f"extrapolate={show(value)}: the two layer counts must be 0 < a < b, "
                         "e.g. (2, 4)")
    return mode, (a, b)


def extrapolate_option(value: ExtrapolateLike | None) -> bool | str:
    """explorer.analyze's `extrapolate` in one written form, so that two ways of asking the
    same compare equal (a Request, an app's history, a file): False (off), True (the default
    counts), ``"auto"``, ``"A,B"`` or ``"auto:A,B"``.

    Raises:
        InputError: not one of the forms analyze takes (`check_extrapolate`)."""
    checked = check_extrapolate(value)
    if checked is None:
        return False
    mode, (a, b) = checked
    if (a, b) == DEFAULT_FROM:
        return True if mode == "on" else "auto"
    return f"{'auto:' if mode == 'auto' else ''}{a},{b}"


def layer_count(workload: str | None, params: Mapping[str, Any]) -> tuple[str, int]:
    """The param of `workload` that counts its layers (one of LAYER_PARAMS) and its value in
    `params` (resolved, defaults filled in): what `extrapolate` needs.

    Raises:
        InputError: a function's request (`workload` None), or a workload with no such
            param, naming its params."""
    if workload is None:
        raise InputError("extrapolate works on a built-in workload's stack of layers (a "
                         f"param named one of {', '.join(LAYER_PARAMS)}); a function's layers "
                         "cannot be counted: compile it in full (extrapolate=False)")
    for name in LAYER_PARAMS:
        if name in params:
            return name, params[name]
    raise InputError(f"extrapolate: workload {workload!r} has no layer count (a param "
                     f"named one of {', '.join(LAYER_PARAMS)}); its params: "
                     f"{', '.join(params)}")
