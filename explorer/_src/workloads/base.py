"""What a workload is: named input tensors, size params, and a function of the tensors.

Optionally also logical dimension names (for rules), tensor kinds, constraint points and
per-tensor dtypes. The registry of built-in workloads is in registry.py; this module only
defines the shape of one, so that workload modules can define theirs without import cycles.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from explorer._src.errors import WorkloadError, choices
from explorer._src.spec.bounds import (
    MAX_ELEMENTS,
    MAX_TENSORS,
    MAX_TEXT,
    MAX_TOTAL_ELEMENTS,
    power_text,
    show,
)
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import TensorSpec, normalize_dtype


class TensorKind(StrEnum):
    """What a tensor is to the step, for rules scoped to one kind (`opt:embed=data` shards only
    optimizer state) and the memory split by kind: model parameters, their gradients, optimizer
    state (Adam's m and v), activations at layer boundaries, and input data (tokens, x). A
    StrEnum: each member is its text, as the rules and a workload's `kinds` write it."""

    PARAM = "param"
    GRAD = "grad"
    OPT = "opt"
    ACT = "act"
    INPUT = "input"


# The kinds of a training step's state: what it returns under its input names, in the layout
# they went in (Workload.returns_state).
STATE_KINDS = (TensorKind.PARAM, TensorKind.OPT)


def kind_of(kinds: Mapping[str, TensorKind], name: str) -> TensorKind:
    """Input `name`'s kind as a workload's `kinds` gives it: a tensor it does not name is a
    parameter."""
    return kinds.get(name, TensorKind.PARAM)


@dataclass(frozen=True)
class ConstraintPoint:
    """A constraint point: an intermediate tensor a spec can be pinned on."""

    shape: tuple[int, ...]
    dims: tuple[str | None, ...]    # logical dimension names
    kind: TensorKind                # ACT or GRAD, for kind-scoped rules


@dataclass(frozen=True)
class Range:
    """The values a numeric param may take: low <= value <= high, or low < value when
    `low_open` (a learning rate must be > 0 but may be as small as one likes)."""

    low: int | float
    high: int | float
    low_open: bool = False

    def __contains__(self, value) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        return above and value <= self.high

    def text(self) -> str:
        """Interval notation, as the `workloads` listing shows it: [1, 2**24] or (0, 1000]."""
        high = power_text(self.high) if isinstance(self.high, int) else f"{self.high:g}"
        return f"{'(' if self.low_open else '['}{self.low}, {high}]"

    def words(self) -> str:
        low = f"> {self.low}" if self.low_open else f">= {self.low}"
        return f"{low} and <= {self.high}"


# Bounds of the size params the built-in workloads share. Each is above what the largest public
# models use: Llama 3 405B (Dubey et al. 2024, Table 3) has 126 layers, d_model 16384, d_ff
# 53248, 128 heads of 128, a 128k vocab, seq 8192 (128k in long-context training) and a global
# batch of 16M tokens; a 70B model has 80 layers, d_model 8192, d_ff 28672. The per-tensor
# element bound (explorer._src.spec.bounds) then limits what a combination of them may make.
BATCH = Range(1, 2 ** 24)        # rows (sequences, or tokens for the MLPs): 16M tokens
SEQ = Range(1, 2 ** 20)          # a 1M-token context
D_MODEL = Range(1, 2 ** 16)      # 4x Llama 3 405B's 16384
D_FF = Range(1, 2 ** 18)         # 5x Llama 3 405B's 53248
HEADS = Range(1, 1024)
D_HEAD = Range(1, 1024)
VOCAB = Range(1, 2 ** 20)        # 4x Gemma's 256k
LAYERS = Range(1, 256)           # 2x Llama 3 405B's 126
LR = Range(0, 1000, low_open=True)

# The param of a workload that returns its state (`Workload.donates`): "true" (the default)
# donates the state to the compile, as training loops do (jax.jit's donate_argnums in MaxText,
# the optimizer's in-place step in PyTorch), so that the old and the new state are one buffer;
# "false" keeps both live, as a step compiled without donation does.
DONATE_STATE = {"donate_state": "true"}
DONATE_OPTIONS = {"donate_state": ("true", "false")}


@dataclass(frozen=True)
class Workload:
    """A built-in program: its tensors' shapes and roles, its params, and the function.

    explorer.WORKLOADS lists them by name; analyze_workload analyses one. Each callable field
    takes the resolved params (`resolve`), so that every shape follows from them.

    Attributes:
        name: the key in explorer.WORKLOADS.
        description: what it computes, in one line.
        defaults: every param and its default; numeric ones are held to `bounds`.
        shapes: params -> tensor name -> shape, in argument order.
        build: params -> the function to compile.
        logical: params -> tensor name -> logical dimension names, for logical-axis rules.
        check: raises a WorkloadError when params do not fit each other or the mesh.
        info: params -> extra JSON-able data for the Report (WorkloadInfo.extra).
        kinds: params -> tensor name -> TensorKind (PARAM, OPT or INPUT); a tensor not named
            is a param (`kind_of`).
        points: params -> constraint point name -> ConstraintPoint, in program order.
        dtypes: params -> tensor name -> dtype, where it differs from the ``dtype`` param.
        returns_state: the function returns its state under the input names, so that it comes
            out in the layout it went in.
        bounds: each numeric param's Range, checked before any work is done.
        options: text param -> the values it may take.
        intermediates: params -> the program's largest intermediate tensors (name -> shape),
            held to the per-tensor element bound like the inputs.
        memory_kinds: params -> tensor name -> memory kind (``"pinned_host"``) of the inputs
            the program keeps in host memory (offloaded); the others live on the device.
        donates: a regular expression (as explorer.analyze's ``donate=``) of the inputs the
            step replaces with its outputs, its state (params, optimizer state): they are
            donated to the compile, as a training loop donates them, so that the new state
            takes the old one's buffers. The workload's ``donate_state`` param (DONATE_STATE)
            turns it off.
    """

    name: str
    description: str
    defaults: Mapping[str, int | float | str]
    shapes: Callable[[dict], dict[str, tuple[int, ...]]]   # tensor name -> shape, in arg order
    build: Callable[[dict], Callable]
    # Optional: tensor name -> logical dimension names (for logical-axis rules).
    logical: Callable[[dict], dict[str, tuple[str | None, ...]]] | None = None
    # Optional: raise WorkloadError when params do not fit each other or the mesh.
    check: Callable[[dict, MeshSpec], None] | None = None
    # Optional: extra JSON-able data for the report (e.g. a pipeline schedule).
    info: Callable[[dict], dict] | None = None
    # tensor name -> kind (PARAM, OPT, INPUT); tensors not named are params (`kind_of`).
    kinds: Callable[[dict], Mapping[str, TensorKind]] | None = None
    # constraint point name -> ConstraintPoint, in program order.
    points: Callable[[dict], dict[str, ConstraintPoint]] | None = None
    # tensor name -> dtype, where it differs from the `dtype` param.
    dtypes: Callable[[dict], dict[str, str]] | None = None
    # True when the function returns its state (params, optimizer state) under the input names:
    # the state then comes out in the layout it went in, as a training loop needs.
    returns_state: bool = False
    # Every numeric param's bounds, checked before any work is done: a size beyond them makes
    # the tensor list, the program or XLA's int64 sizes grow without limit.
    bounds: Mapping[str, Range] = field(default_factory=dict)
    # Text params with a fixed set of values (e.g. a pipeline schedule) -> those values.
    options: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Optional: the program's largest intermediate tensors (e.g. attention scores), name ->
    # shape; held to the per-tensor element bound like the inputs and the constraint points.
    intermediates: Callable[[dict], dict[str, tuple[int, ...]]] | None = None
    # Optional: tensor name -> memory kind, for the inputs kept in host memory (offload).
    memory_kinds: Callable[[dict], dict[str, str]] | None = None
    # Optional: a regular expression of the inputs the step replaces (its state), donated.
    donates: str | None = None

    def __post_init__(self):
        for key, default in self.defaults.items():
            numeric = isinstance(default, int | float) and not isinstance(default, bool)
            if numeric and key not in self.bounds:
                raise WorkloadError(f"workload {self.name!r}: param {key!r} has no bounds; give "
                                    f"bounds={{{key!r}: Range(low, high)}}")
            if numeric and default not in self.bounds[key]:
                raise WorkloadError(f"workload {self.name!r}: the default {key}={default!r} is "
                                    f"outside its bounds {self.bounds[key].text()}")
        stray = [k for k in (*self.bounds, *self.options) if k not in self.defaults]
        if stray:
            raise WorkloadError(f"workload {self.name!r} bounds param {stray[0]!r}, which it "
                                f"does not have; its params are {choices(self.defaults)}")

    def tensors(self, params: Mapping, specs: Mapping | None = None) -> list[TensorSpec]:
        specs = dict(specs or {})
        shapes = self.shapes(params)
        unknown = [n for n in specs if n not in shapes]
        if unknown:
            raise WorkloadError(f"workload {self.name!r} has no tensor {show(unknown[0])}; its "
                                f"tensors are {choices(shapes)}")
        dtypes = self.dtypes(params) if self.dtypes is not None else {}
        kinds = self.memory_kinds(params) if self.memory_kinds is not None else {}
        default = params.get("dtype", "float32")
        return [TensorSpec(n, s, dtypes.get(n, default), specs.get(n),
                           kinds.get(n, "device"))
                for n, s in shapes.items()]

    def donation(self, params: Mapping) -> str | None:
        """The `donate=` pattern a compile of these params gets: the state the step replaces,
        unless ``donate_state=false``; None for a workload that returns no state."""
        if self.donates is None or params.get("donate_state") == "false":
            return None
        return self.donates

    def param_text(self, key: str) -> str:
        """`key=default` and what the param may be, for the `workloads` listing."""
        default = self.defaults[key]
        if key in self.bounds:
            return f"{key}={default} {self.bounds[key].text()}"
        if key in self.options:
            return f"{key}={default} ({'|'.join(self.options[key])})"
        return f"{key}={default!r}" if default == "" else f"{key}={default}"

    def resolve(self, overrides: Mapping | None = None) -> dict:
        """Defaults updated by `overrides`, each checked against its bounds and converted to the
        default's type; then the sizes of the tensors they make are checked. All of it is cheap
        and comes before any work, so a huge param fails at once instead of hanging."""
        if overrides is None:
            overrides = {}
        if not isinstance(overrides, Mapping):
            raise WorkloadError(f"params {show(overrides)} of workload {self.name!r} are not a "
                                "mapping of param name to value, e.g. {'batch': 8}; its params "
                                f"are {choices(self.defaults)}")
        params = dict(self.defaults)
        for key, value in overrides.items():
            if not isinstance(key, str) or key not in self.defaults:
                raise WorkloadError(f"workload {self.name!r} has no param {show(key)}; its "
                                    f"params are {choices(self.defaults)}")
            params[key] = self._convert(key, value)
        self._check_sizes(params)
        return params

    def _convert(self, key: str, value):
        default = self.defaults[key]
        where = f"param {key}={show(value)} of workload {self.name!r}"
        if isinstance(default, str):
            if key == "dtype":
                return normalize_dtype(value)
            if isinstance(value, bool) and set(self.options.get(key, ())) == {"true", "false"}:
                value = "true" if value else "false"     # a switch given as a Python bool
            text = _text(value)
            if text is None:
                raise WorkloadError(f"{where} is not text")
            if key in self.options and text not in self.options[key]:
                raise WorkloadError(f"{where} is unknown; choose one of "
                                    f"{choices(self.options[key])}")
            if len(text) > MAX_TEXT:
                raise WorkloadError(f"{where} has {len(text)} characters; the limit is "
                                    f"{MAX_TEXT}")
            return text
        whole = isinstance(default, int)
        number = _number(value, whole)
        if number is None:
            kind = "whole number" if whole else "finite number"
            raise WorkloadError(f"{where} is not a {kind}; it must be "
                                f"{self.bounds[key].words()}")
        if number not in self.bounds[key]:
            raise WorkloadError(f"{where} must be {self.bounds[key].words()} (its bounds; see "
                                "`sharding-explorer workloads`)")
        return number

    def _check_sizes(self, params: dict) -> None:
        """Every tensor the params make (inputs, constraint points, declared intermediates)
        within the per-tensor element bound, and the inputs within the count and total bounds:
        the shapes are computed, never allocated, so this is cheap once the params are bounded."""
        shapes = self.shapes(params)
        if len(shapes) > MAX_TENSORS:
            raise WorkloadError(f"workload {self.name!r} would have {len(shapes)} input tensors "
                                f"with these params; the limit is {power_text(MAX_TENSORS)}")
        made = {f"tensor {n!r}": s for n, s in shapes.items()}
        if self.points is not None:
            made.update({f"constraint point {n!r}": p.shape
                         for n, p in self.points(params).items()})
        if self.intermediates is not None:
            made.update({f"intermediate {n!r}": s for n, s in self.intermediates(params).items()})
        for what, shape in made.items():
            if math.prod(shape) > MAX_ELEMENTS:
                raise WorkloadError(
                    f"workload {self.name!r}: {what} would have shape {list(shape)}, "
                    f"{_about(math.prod(shape))} elements; the limit is "
                    f"{power_text(MAX_ELEMENTS)} per tensor (its bytes must fit XLA's int64 "
                    "sizes); shrink the params that size it")
        total = sum(math.prod(s) for s in shapes.values())
        if total > MAX_TOTAL_ELEMENTS:
            raise WorkloadError(
                f"workload {self.name!r}: its inputs would have {_about(total)} elements in all; "
                f"the limit is {power_text(MAX_TOTAL_ELEMENTS)}; shrink the params")


def _about(n: int) -> str:
    return str(n) if n < 2 ** 64 else f"about 2**{n.bit_length() - 1}"


def _text(value) -> str | None:
    """A text param from text, a whole number or a sequence of them (cut points "1,3"); a bool
    is the text "true" or "false" (the values of a yes/no param such as scan_layers)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        parts = [_text(v) if not isinstance(v, list | tuple) else None for v in value]
        return None if None in parts else ",".join(parts)
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() <= 64:
        return str(value)
    return None


def _number(value, whole: bool) -> int | float | None:
    """`value` as an int (`whole`) or a finite float, or None when it is not one. Text is read
    as a number (the CLI's params are text); bools, NaN, infinities and fractions for a whole
    number are refused."""
    if isinstance(value, bool):
        return None
    try:
        if not whole:
            number = float(value)
        elif isinstance(value, int | str):
            number = int(value)
        else:
            number = int(value)
            if float(value) != number:
                return None     # 2.5 for a whole number: int() would truncate it
    except (TypeError, ValueError, ArithmeticError):    # OverflowError is an ArithmeticError
        return None
    if not whole and not math.isfinite(number):
        return None
    return number


@dataclass(frozen=True)
class WorkloadProgram:
    """A workload's function for its resolved params, called with the layout's constraint
    table: what is traced for a compile. Two are equal for the same workload, params and
    constraints, so that an unchanged request is known again without a trace (the memo of
    lowered programs, explorer/_src/compile/lowering.py). It carries the built function's name and
    signature, which jax gives the module and its parameters."""

    workload: Workload = field(compare=False)
    name: str
    params: tuple[tuple[str, int | float | str], ...]
    constraints: tuple = ()

    @classmethod
    def of(cls, workload: Workload, params: Mapping, constraints: tuple = ()
           ) -> WorkloadProgram:
        return cls(workload, workload.name, tuple(sorted(params.items())), tuple(constraints))

    @functools.cached_property
    def function(self) -> Callable:
        return self.workload.build(dict(self.params))

    def __call__(self, *args):
        if self.constraints:
            return self.function(*args, constraints=self.constraints)
        return self.function(*args)

    def __post_init__(self):
        # jax names a module after the function it traces (a partial's after the function
        # inside it): the built function's name, as when it was traced on its own.
        fn = self.function
        while isinstance(fn, functools.partial):
            fn = fn.func
        object.__setattr__(self, "__name__", getattr(fn, "__name__", self.name))
        object.__setattr__(self, "__qualname__", getattr(fn, "__qualname__", self.__name__))

    @property
    def __signature__(self) -> inspect.Signature:
        """The built function's positional parameters (its tensors), without `constraints`."""
        signature = inspect.signature(self.function)
        return signature.replace(parameters=[p for p in signature.parameters.values()
                                             if p.name != "constraints"])
