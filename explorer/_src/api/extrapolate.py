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

from collections.abc import Callable
from dataclasses import replace

from explorer._src.api.analysis_request import Request
from explorer._src.api.request import DEFAULT_FROM, check_extrapolate, layer_count
from explorer._src.compile.pool import DEFAULT_TIMEOUT_S
from explorer._src.errors import InputError
from explorer._src.report.layer_extrapolation import extrapolate_layers
from explorer._src.report.report import Extrapolation, Report
from explorer._src.workloads.registry import get_workload

# The option is a Request field (`Request.extrapolate`), read where the other fields are
# (explorer/_src/api/request.py: its forms, DEFAULT_FROM, LAYER_PARAMS); this module runs it.
__all__ = ["layer_param", "run_extrapolated"]

# The method's error, measured against full compiles by tests/api/test_extrapolate.py (its
# slow tests) and written in docs/cost-model.md, "Extrapolated layers".
ERROR = ("against full compiles the collectives were exact; the predicted step within 0.6% "
         "for dense models but 12% high for a small MoE on tpu-v5e-2x4, whose 3-layer step "
         "libtpu compiles otherwise (exact from 4 and 6 layers); the memory per device within "
         "2.8% on small dense models, 5.2% low for the MoE on CPU devices and 17% high for an "
         "8B Llama on tpu-v5e-8x16-2slices, whose temporaries the compilers do not grow "
         "linearly, and 83% low for an unrolled stack on tpu-v5e-2x4 whose small compiles "
         "held no temporaries (docs/cost-model.md, 'Extrapolated layers')")

def layer_param(request: Request) -> tuple[str, int]:
    """The param that counts the request's layers, and its value (defaults filled in).

    Raises:
        InputError: a function's request, or a workload with no such param."""
    if request.workload is None:
        return layer_count(None, {})
    return layer_count(request.workload, get_workload(request.workload).resolve(request.params))


def run_extrapolated(request: Request, answer: Callable[[Request], Report]) -> Report:
    """The Report of `request`, extrapolated from two compiles of fewer layers where its
    `extrapolate` field says so, else compiled in full (see the module's docstring). `answer`
    gives one request's Report (explorer._src.api.analyze.run with the caller's pool and
    cache: passed in, as analyze imports this module); each request it is given has
    `extrapolate` off, so that the small compiles and a full one are each keyed, compiled and
    cached as the plain request they are, and found again by one asked for without the
    option."""
    mode, (a, b) = check_extrapolate(request.extrapolate) or ("on", DEFAULT_FROM)
    param, layers = layer_param(request)
    plain = replace(request, extrapolate=False)     # the full model, compiled as it is
    if layers <= b:
        return answer(plain)   # no larger than the small ones
    if request.measure:
        if mode == "auto":
            return answer(plain)
        raise InputError("extrapolate with measure=True: a run would time the small compiles, "
                         "not the model asked for; measure the full model (extrapolate=False) "
                         "or drop measure")
    params = dict(request.params or {})
    ra, rb = (answer(replace(plain, params={**params, param: n})) for n in (a, b))
    compile_a, compile_b = ra.timing.compile_s, rb.timing.compile_s
    # A cached Report's compile_s is the time its compile took when it was made: still the
    # compile's time, which is what the estimate needs.
    estimated = compile_a + (layers - a) * (compile_b - compile_a) / (b - a)
    estimated = max(estimated, compile_a, compile_b)   # never below a smaller compile's
    limit = request.timeout if request.timeout is not None else DEFAULT_TIMEOUT_S
    if mode == "auto":
        if estimated <= limit:
            return answer(plain)
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
            return answer(plain)
        raise
    if report.workload is not None:
        report = replace(report, workload=replace(
            report.workload, params={**report.workload.params, param: layers}))
    return report
