"""explorer.analyze's `extrapolate`: a built-in workload's stack of identical layers compiled at
two small layer counts and carried on linearly to the count asked for
(explorer/_src/report/layer_extrapolation.py), in place of a full compile that would take
minutes (an 8B-shaped model for a TPU slice) or past the time limit.

``extrapolate=True`` always extrapolates a model with more layers than the two small compiles;
``"auto"`` does where the full compile's time, carried on from the two small compiles' times
the same way, would pass the compile's time limit, and compiles in full otherwise (or where
the two compiles differ by more than repeated layers).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal, TypeAlias

from explorer._src.api.analysis_request import Request
from explorer._src.compile.pool import DEFAULT_TIMEOUT_S
from explorer._src.errors import InputError
from explorer._src.report.layer_extrapolation import extrapolate_layers
from explorer._src.report.report import Extrapolation, Report
from explorer._src.spec.bounds import show
from explorer._src.workloads.registry import get_workload

__all__ = ["DEFAULT_FROM", "ExtrapolateLike", "check_extrapolate", "run_extrapolated"]

# The option as analyze takes it: False (off), True, "auto", or the two layer counts to compile
# (a tuple, or text "3,5"; "auto:3,5" for both).
ExtrapolateLike: TypeAlias = bool | str | tuple[int, int]

# The layer counts compiled by default. Not 1: with one layer XLA drops the scan's loop (a
# trip count of 1), so the one-layer program is shaped unlike every longer one. Not 2: libtpu
# combines the loop body's gradient all-reduces otherwise at a trip count of 2 (two parts
# where 3 and more layers get six, for transformer_train on tpu-v5e-2x4). From 3 on, the
# loop's body and what is outside it were the same on the CPU and for a TPU slice, and only
# the trip count and the stacked weights grew.
DEFAULT_FROM = (3, 4)
# The workload params that count a stack's layers.
LAYER_PARAMS = ("layers", "n_layers")

# The method's error, measured against full compiles by tests/api/test_extrapolate.py (its
# slow tests) and written in docs/cost-model.md, "Extrapolated layers".
ERROR = ("against full compiles the collectives were exact; the predicted step within 0.6% "
         "for dense models but 12% high for a small MoE on tpu-v5e-2x4, whose 3-layer step "
         "libtpu compiles otherwise (exact from 4 and 6 layers); the memory per device within "
         "2.8% on small dense models, 5.2% low for the MoE on CPU devices and 17% high for an "
         "8B Llama on tpu-v5e-8x16-2slices, whose temporaries the compilers do not grow "
         "linearly, and 83% low for an unrolled stack on tpu-v5e-2x4 whose small compiles "
         "held no temporaries (docs/cost-model.md, 'Extrapolated layers')")

_COUNTS = re.compile(r"\s*(\d+)\s*,\s*(\d+)\s*")


def check_extrapolate(value: ExtrapolateLike | None
                      ) -> tuple[Literal["on", "auto"], tuple[int, int]] | None:
    """The option read: None for off, else the mode and the two layer counts to compile.

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
            raise InputError(f"extrapolate={show(value)} is not understood; choose True, "
                             "'auto', two layer counts 'A,B' (e.g. '2,4') or 'auto:A,B'")
        counts = (int(m.group(1)), int(m.group(2)))
    if (not isinstance(counts, tuple | list) or len(counts) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in counts)):
        raise InputError(f"extrapolate={show(value)} is not understood; choose True, 'auto', "
                         "two layer counts (a, b) or 'A,B', or 'auto:A,B'")
    a, b = counts
    if not 0 < a < b:
        raise InputError(f"extrapolate={show(value)}: the two layer counts must be 0 < a < b, "
                         "e.g. (2, 4)")
    return mode, (a, b)


def layer_param(request: Request) -> tuple[str, int]:
    """The param that counts the request's layers, and its value (defaults filled in).

    Raises:
        InputError: a function's request, or a workload with no such param."""
    if request.workload is None:
        raise InputError("extrapolate works on a built-in workload's stack of layers (a "
                         f"param named one of {', '.join(LAYER_PARAMS)}); a function's layers "
                         "cannot be counted: compile it in full (extrapolate=False)")
    workload = get_workload(request.workload)
    params = workload.resolve(request.params)
    for name in LAYER_PARAMS:
        if name in params:
            return name, params[name]
    raise InputError(f"extrapolate: workload {request.workload!r} has no layer count (a param "
                     f"named one of {', '.join(LAYER_PARAMS)}); its params: "
                     f"{', '.join(params)}")


def run_extrapolated(request: Request, extrapolate: ExtrapolateLike,
                     answer: Callable[[Request], Report]) -> Report:
    """The Report of `request`, extrapolated from two compiles of fewer layers where the
    option says so, else compiled in full (see the module's docstring). `answer` gives one
    request's Report (explorer._src.api.analyze.run with the caller's pool and cache: passed
    in, as analyze imports this module)."""
    mode, (a, b) = check_extrapolate(extrapolate) or ("on", DEFAULT_FROM)
    param, layers = layer_param(request)
    if layers <= b:
        return answer(request)   # no larger than the small ones
    if request.measure:
        if mode == "auto":
            return answer(request)
        raise InputError("extrapolate with measure=True: a run would time the small compiles, "
                         "not the model asked for; measure the full model (extrapolate=False) "
                         "or drop measure")
    params = dict(request.params or {})
    ra, rb = (answer(replace(request, params={**params, param: n})) for n in (a, b))
    compile_a, compile_b = ra.timing.compile_s, rb.timing.compile_s
    # A cached Report's compile_s is the time its compile took when it was made: still the
    # compile's time, which is what the estimate needs.
    estimated = compile_a + (layers - a) * (compile_b - compile_a) / (b - a)
    estimated = max(estimated, compile_a, compile_b)   # never below a smaller compile's
    limit = request.timeout if request.timeout is not None else DEFAULT_TIMEOUT_S
    if mode == "auto":
        if estimated <= limit:
            return answer(request)
        reason = (f"the full compile's time, estimated {estimated:.0f} s from theirs, passes "
                  f"the {limit:.0f} s limit")
    else:
        reason = "asked for"
    extrapolation = Extrapolation(param=param, layers=layers, from_layers=(a, b), error=ERROR,
                                  compile_s=(compile_a, compile_b),
                                  estimated_compile_s=estimated, reason=reason)
    try:
        report = extrapolate_layers(ra, rb, extrapolation)
    except InputError:
        if mode == "auto":
            return answer(request)
        raise
    if report.workload is not None:
        report = replace(report, workload=replace(
            report.workload, params={**report.workload.params, param: layers}))
    return report
