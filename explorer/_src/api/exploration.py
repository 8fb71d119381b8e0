"""Explorations that can be shared: a request, its target and the app's state as a small JSON
file (or the text of a link), loaded back with every field checked.

A file says what to analyse, never how: a built-in workload by name with its params, or a
user's function by its module path (`FunctionRef`), which is imported only when the user asks
(`exploration.function.load()`), since importing a module runs its code. A user's function and
its inputs are not carried by a file or a link: they are the user's objects; only their specs
are (by tensor name).

An Exploration is the saved form of an explorer.Request plus what the app showed:
`Exploration.of(request, app_state)` writes a Request down, `exploration.request()` makes it
again. It plans nothing of its own: the layout is checked by the Request it makes, once.

Loading never evaluates anything: the text is parsed as JSON under size and nesting bounds,
every key must be known, every value of its type and within the bounds its field has, each field
read by the parser the API uses for it (the mesh, a spec, the rules, the workload's params, the
preset, the target). A file (`load`) is then checked whole by making its Request, so that a
layout that does not fit its mesh is refused there; a link (`from_link`) is not: the app that
opens it makes its Request as an edit's, and says what does not fit at the widget at fault. The
first fault is one InputError naming the field and the choices.

The file:

    {"format": "sharding-explorer exploration", "version": 1,
     "request": {"workload": "mlp", "params": {"batch": 512}, "mesh": "data=2,model=4",
                 "preset": "megatron", "specs": {"x": "data,None"}},
     "target": {"name": "h100-8", "mapping": "data=gpu:2,model=gpu:4", "peak": false},
     "compile": {"timeout": 600, "extrapolate": true},
     "app": {"tab": "Collectives", "tensor": "w1"}}
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import math
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from explorer._src.api.analysis_request import CompileForName, Request
from explorer._src.api.request import (
    ExtrapolateLike,
    check_mesh,
    check_partitioner,
    check_target,
    check_timeout,
    extrapolate_option,
)
from explorer._src.api.targeting import CompileFor, check_compile_for
from explorer._src.compile.protocol import Partitioner
from explorer._src.errors import InputError, choices
from explorer._src.spec.bounds import (
    MAX_TENSORS,
    MAX_TEXT,
    check_served,
    served_limits,
    show,
)
from explorer._src.spec.tensor import TensorRole, format_spec, normalize_spec, parse_spec
from explorer._src.strategy.presets import get_preset
from explorer._src.strategy.rules import LOGICAL_NAMES, parse_rules, rules_text
from explorer._src.workloads.registry import WORKLOADS, get_workload

if TYPE_CHECKING:
    from explorer._src.report.report import Report

FORMAT = "sharding-explorer exploration"
VERSION = 1
# A saved exploration is a few hundred bytes; a 70B model's per-tensor specs about 100 KiB.
MAX_FILE_BYTES = 1 << 20
MAX_LINK_CHARS = 16 * 1024        # the text of a link (base64 of the JSON)
MAX_DEPTH = 4                     # top > request > params > value
MAX_NAME = 200                    # a tensor, point, module or attribute name
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_FREE = "free"


class AppTab(StrEnum):
    """The app's tabs, in the order it shows them: the one list of them. A saved exploration
    names the tab it showed by this title, and the app (explorer/_src/ui/tabs.py) builds its tabs
    from it, each title's Tab class in its registry. A StrEnum, so a title is its text."""

    PLACEMENT = "Placement"
    COLLECTIVES = "Collectives"
    MEMORY = "Memory"
    TIMING = "Timing"
    HLO = "HLO"
    COMPARE = "Compare"
    SUGGEST = "Suggest"


APP_TABS = tuple(tab.value for tab in AppTab)      # the titles as plain text, for a file's field


@dataclass(frozen=True)
class FunctionRef:
    """Where a user's function can be imported from: ``module`` and the ``qualname`` in it.

    A file carries this and never the function. `load` imports the module, which runs its
    code: it is called only when the user asks for it."""

    module: str
    qualname: str

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> FunctionRef | None:
        """`fn`'s module path, or None where it cannot be imported by name (defined in
        `__main__`, a notebook cell or inside a function)."""
        import sys

        module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
        if not isinstance(module, str) or not isinstance(qualname, str) or \
                module == "__main__" or not _DOTTED.fullmatch(qualname):
            return None
        found: Any = sys.modules.get(module)
        for part in qualname.split("."):
            found = getattr(found, part, None)
        return cls(module, qualname) if found is fn else None

    def load(self) -> Callable[..., Any]:
        """Import the module (running its code) and return the function.

        Raises:
            InputError: the module cannot be imported, or has no such callable."""
        import importlib

        try:
            found: Any = importlib.import_module(self.module)
        except Exception as e:      # the module's own code failed: say which and why
            raise InputError(f"function module {self.module!r} could not be imported "
                             f"({type(e).__name__}: {e})") from None
        for part in self.qualname.split("."):
            found = getattr(found, part, None)
        if not callable(found):
            raise InputError(f"module {self.module!r} has no function {self.qualname!r}")
        return found

    def text(self) -> str:
        return f"{self.module}:{self.qualname}"


@dataclass(frozen=True)
class AppState:
    """What the app shows: the visible tab (one of APP_TABS) and the tensor picked in it."""

    tab: str = "Placement"
    tensor: str | None = None


@dataclass(frozen=True)
class Exploration:
    """One exploration: what was analysed, on which mesh and target, and what the app showed.

    Attributes:
        mesh: the mesh text, e.g. ``"data=2,model=4"``; an axis may name its own type
            (``"data=2:explicit,model=4"``), as a mesh of mixed axis types is written.
        workload: a built-in workload's name; None for a user's function.
        params: the workload's params (over its defaults).
        function: where the user's function can be imported from; None for a workload, or a
            function that cannot be imported by name.
        specs: tensor name -> spec text, over the workload's preset and rules, or a function's
            inputs' own specs.
        preset: the workload's preset; None for none.
        rules: logical-axis rules applied after the preset's, as text.
        activations: constraint point -> spec text, or ``"free"`` to leave it to propagation.
        donate: a user's function's inputs donated to the compile, by name (a workload's
            donation is its ``donate_state`` param).
        axis_type: ``"auto"``, ``"explicit"`` or ``"manual"``: the type of the mesh's axes
            whose text names none.
        partitioner: an explorer.Partitioner; its name (``"shardy"`` or ``"gspmd"``) is
            taken too, and kept as the enum.
        compile_for: an explorer.CompileFor; its name (``"target"`` or ``"cpu"``) is taken
            too, and kept as the enum.
        target: the hardware target's name; None for none.
        mapping: the mesh axes on the target's links, as text; None for the default.
        peak: predicted at the vendors' peak rates.
        timeout: the seconds a compile may take (explorer.analyze's ``timeout``); None for
            the default (the app's follows the target).
        extrapolate: the Request's ``extrapolate`` (a workload's layers compiled at two
            small counts and carried on linearly), in its one written form
            (`extrapolate_option`): False, True, ``"auto"``, ``"A,B"`` or ``"auto:A,B"``;
            the file's ``"compile": {"extrapolate": ...}``.
        app: the app's state.
    """

    mesh: str
    workload: str | None = None
    params: Mapping[str, int | float | str | bool] = field(default_factory=dict)
    function: FunctionRef | None = None
    specs: Mapping[str, str] = field(default_factory=dict)
    preset: str | None = None
    rules: str = ""
    activations: Mapping[str, str] = field(default_factory=dict)
    donate: tuple[str, ...] = ()
    axis_type: str = "auto"
    partitioner: Partitioner = Partitioner.SHARDY
    compile_for: CompileFor = CompileFor.TARGET
    target: str | None = None
    mapping: str | None = None
    peak: bool = False
    timeout: float | None = None
    extrapolate: ExtrapolateLike = False
    app: AppState = field(default_factory=AppState)
    # The Request `request()` made of this exploration (a workload's), kept so that a load's
    # check and the analysis that follows plan its layout once; and whether a Request of it is
    # known to plan (made by `of` from a planned Request, or checked by `load`).
    _made: Request | None = field(default=None, init=False, repr=False, compare=False)
    _planned: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The closed sets held as their enums, whichever form they were given in: an unknown
        # name is the one InputError that names the value and the choices.
        object.__setattr__(self, "partitioner", check_partitioner(self.partitioner))
        object.__setattr__(self, "compile_for", check_compile_for(self.compile_for))
        # In the Request's one written form, whichever form it was given in.
        object.__setattr__(self, "extrapolate", extrapolate_option(self.extrapolate))

    # ----------------------------------------------------------------- to and from a Request

    @classmethod
    def of(cls, request: Request, app: AppState | None = None, *,
           default_timeout: float | None = None,
           extrapolate: ExtrapolateLike | None = None) -> Exploration:
        """`request` written down, with the app's state `app`: what `request()` makes again.
        A workload's params only where they differ from its defaults (a link stays short, and
        a file says what was chosen); a time limit equal to `default_timeout` (the target's
        default, which the app fills in) is left out, so that it follows the target where it
        is opened. The request's `extrapolate` is carried as it is (`extrapolate`, where given,
        in its place: a caller of before it was a Request field). A user's function is carried
        by its module path where it has one, its inputs by their specs; what a file has no
        field for (measure, origins, a TPU topology, real devices, output specs) is not
        carried."""
        planned = request.planned
        mesh = planned.mesh
        # A mesh of mixed types names each axis's type in its text; one of one type is given
        # beside it, as `axis_type`.
        common = dict(
            mesh=mesh.text(), axis_type="auto" if mesh.mixed else str(mesh.axis_type),
            partitioner=planned.partitioner,
            compile_for=check_compile_for(request.compile_for), target=request.target,
            mapping=(request.mapping or None) if isinstance(request.mapping, str | None)
            else planned.mapping.text() if planned.mapping is not None else None,
            peak=bool(request.peak),
            timeout=None if request.timeout is None or request.timeout == default_timeout
            else float(request.timeout),
            extrapolate=request.extrapolate if extrapolate is None else extrapolate,
            app=app or AppState())
        if request.workload is not None:
            defaults = get_workload(request.workload).resolve({})
            made = cls(workload=request.workload,
                       params={k: v for k, v in planned.params.items() if defaults.get(k) != v},
                       specs={n: format_spec(normalize_spec(s, tensor=n))
                              for n, s in dict(request.specs or {}).items()},
                       preset=request.preset or None, rules=rules_text(request.rules),
                       activations={n: _FREE if _free(s) else
                                    format_spec(normalize_spec(s, tensor=n))
                                    for n, s in dict(request.activations or {}).items()},
                       **common)
        else:
            leaves = planned.leaves
            made = cls(function=FunctionRef.of(request.fn) if request.fn is not None else None,
                       specs={t.name: format_spec(t.spec) for t in leaves},
                       donate=tuple(leaves[i].name for i in planned.donated), **common)
        object.__setattr__(made, "_planned", True)
        return made

    def request(self, fn: Callable[..., Any] | None = None, *inputs: Any,
                **fields: Any) -> Request:
        """The explorer.Request this exploration describes, made (and so checked) as every
        Request is: a workload's, or the user's function `fn` on `inputs` (a file carries
        neither), each input named in `specs` given its spec. `fields` are other Request
        fields (``timeout``, ``measure``, ``origins`` ...), over the exploration's.

        Raises:
            InputError: a function exploration without its function or inputs, a workload's
                given one, or whatever the Request refuses."""
        if self.timeout is not None:
            fields.setdefault("timeout", self.timeout)
        if self.extrapolate:
            fields.setdefault("extrapolate", self.extrapolate)
        common = dict(mesh=self.mesh, axis_type=self.axis_type, partitioner=self.partitioner,
                      target=self.target, mapping=self.mapping, peak=self.peak,
                      compile_for=self.compile_for, **fields)
        if self.workload is not None:
            if fn is not None or inputs:
                raise InputError(f"this exploration is of the built-in workload "
                                 f"{self.workload!r}; it takes no function or inputs")
            keep = set(fields) <= {"timeout", "extrapolate"} and \
                fields.get("timeout") == self.timeout and \
                fields.get("extrapolate", False) == self.extrapolate
            if keep and self._made is not None:
                return self._made
            made = Request(workload=self.workload, params=dict(self.params),
                           specs=dict(self.specs) or None, preset=self.preset,
                           rules=self.rules or None,
                           activations=dict(self.activations) or None, **common)
            if keep:
                object.__setattr__(self, "_made", made)
            return made
        if fn is None:
            raise self._no_function()
        if not inputs:
            raise InputError("a user's function's inputs are not carried by an exploration; "
                             "pass them: exploration.analyze(fn, *inputs)")
        specs = {f"^{re.escape(name)}$": spec for name, spec in self.specs.items()}
        donate = [f"^{re.escape(name)}$" for name in self.donate]
        return Request(fn=fn, inputs=tuple(inputs), specs=specs or None,
                       donate=donate or None, **common)

    def check(self) -> Exploration:
        """This exploration, checked whole by the Request it makes (its layout planned): a
        workload's; a user's function's fields are checked as they are read, its layout only
        with the function. Raises the Request's InputError, named `field request`."""
        if self.workload is not None and not self._planned:
            _ = _checked("request", lambda: self.request().planned)
            object.__setattr__(self, "_planned", True)
        return self

    # ------------------------------------------------------------------------ out and in

    def to_dict(self) -> dict:
        """The file's JSON-able content (only what differs from the defaults)."""
        request: dict[str, Any] = {}
        if self.workload is not None:
            request["workload"] = self.workload
            if self.params:
                request["params"] = dict(self.params)
        elif self.function is not None:
            request["function"] = {"module": self.function.module,
                                   "qualname": self.function.qualname}
        request["mesh"] = self.mesh
        for key, value, default in (("axis_type", self.axis_type, "auto"),
                                    ("preset", self.preset, None), ("rules", self.rules, ""),
                                    ("partitioner", self.partitioner, Partitioner.SHARDY),
                                    ("compile_for", self.compile_for, CompileFor.TARGET)):
            if value != default:
                # An enum as its name: the file's text is the same whichever form was given.
                request[key] = value.value if isinstance(value, StrEnum) else value
        for key, value in (("specs", self.specs), ("activations", self.activations)):
            if value:
                request[key] = dict(value)
        if self.donate:
            request["donate"] = list(self.donate)
        out: dict[str, Any] = {"format": FORMAT, "version": VERSION, "request": request}
        if self.target is not None:
            out["target"] = {"name": self.target, **({"mapping": self.mapping}
                                                     if self.mapping is not None else {}),
                             **({"peak": True} if self.peak else {})}
        compile_ = {k: v for k, v in (("timeout", self.timeout),
                                       ("extrapolate", self.extrapolate)) if v}
        if compile_:
            out["compile"] = compile_
        app = {k: v for k, v in (("tab", self.app.tab), ("tensor", self.app.tensor))
               if v is not None}
        out["app"] = app
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n"

    def save(self, path: str | os.PathLike) -> None:
        """Write the exploration to `path` as JSON, checked first as `load` checks a file
        (`from_dict` of its own dict, then its Request, unless it was written from one that
        planned: `of`), so that a file this writes always loads.

        Raises:
            InputError: a field is invalid, or the file cannot be written."""
        loaded = from_dict(self.to_dict())
        if not self._planned:           # else its Request planned already: no second plan
            loaded.check()
        try:
            Path(path).write_text(self.to_json())
        except OSError as e:
            raise InputError(f"exploration file {str(path)!r} could not be written: "
                             f"{e.strerror or e}") from None

    def to_link(self) -> str:
        """The exploration as the text of a link's query (`?exploration=...`): base64url of
        the compact JSON, without padding."""
        text = json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=False)
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    # ---------------------------------------------------------------------------- analyse

    def analyze(self, fn: Callable[..., Any] | None = None, *args: Any,
                **kwargs: Any) -> Report:
        """Analyse the exploration: its Request (`request`) run as explorer.analyze runs one;
        a user's function `fn` on `args`, each input named in `specs` given its spec.

        Args:
            fn: the user's function (a file never carries it; `function.load()` imports it
                from its module, running that module's code); None for a workload.
            *args: the function's inputs (arrays, ShapeDtypeStructs or TensorSpecs), which a
                file does not carry either.
            **kwargs: ``pool``, ``use_cache``, ``cache_only`` (how it is run) and Request
                fields (``timeout``, ``measure`` ...).

        Raises:
            InputError: a function exploration without its function or inputs, or a workload
                exploration given one; and whatever the analysis raises.
        """
        from explorer._src.api.analyze import run

        how = {k: kwargs.pop(k) for k in ("pool", "use_cache", "cache_only") if k in kwargs}
        # The request's `extrapolate` (the file's compile.extrapolate) is run's to honour.
        return run(self.request(fn, *args, **kwargs), **how)

    def _no_function(self) -> InputError:
        if self.function is None:
            return InputError("this exploration is of a user's function that could not be "
                              "imported by name, so the file does not say where it is; pass "
                              "it: exploration.analyze(fn, *inputs)")
        return InputError(f"this exploration is of the user's function {self.function.text()}, "
                          "which a file does not carry; pass it: exploration.analyze(fn, "
                          "*inputs), where exploration.function.load() imports it (running "
                          "that module's code)")

    # ---------------------------------------------------------------------- from a Report

    @classmethod
    def from_report(cls, report: Report, fn: Callable[..., Any] | None = None, *,
                    compile_for: CompileForName = "target", app: AppState | None = None
                    ) -> Exploration:
        """The exploration that analyses to `report`: its workload and how its layout was
        chosen (the specs and activations given, the rules over the preset's), or the user's
        function `fn` (its module path, where importable) with its inputs' specs; the mesh,
        partitioner and target. A Report of a user's function needs `fn`, which it does not
        hold. `compile_for` is not in a Report: say it."""
        estimate = report.estimate
        target = estimate.target if estimate is not None else None
        mapping = _mapping_text(target, estimate.mapping, report) if estimate else None
        # A mesh of mixed types names each axis's type in its text; one of one type is given
        # beside it, as `axis_type`.
        kind = "auto" if report.mesh.mixed else str(report.mesh.axis_type)
        common = dict(mesh=report.mesh.text(), axis_type=kind,
                      partitioner=report.partitioner, compile_for=compile_for,
                      target=target, mapping=mapping,
                      peak=bool(estimate.peak) if estimate else False, app=app or AppState(),
                      # An extrapolated Report is made again by extrapolating from the same
                      # two layer counts.
                      extrapolate=tuple(report.extrapolated.from_layers)
                      if report.extrapolated is not None else False)
        info = report.workload
        if info is not None and info.name in WORKLOADS:
            return cls(workload=info.name, params=dict(info.params), preset=info.preset,
                       rules=_user_rules(info, report), specs=_given(info, "spec", info.specs),
                       activations=_activations(info), **common)
        if fn is None:
            # Else the exploration would say later that the function cannot be imported by
            # name, when the cause is that it was not given.
            raise InputError("this Report is of a user's function, which a Report does not "
                             "carry; pass it: Exploration.from_report(report, fn=your_function)")
        specs = {t.name: t.spec_text for t in report.tensors if t.kind == TensorRole.INPUT}
        return cls(function=FunctionRef.of(fn), specs=specs, donate=tuple(report.donated),
                   **common)


def _free(spec) -> bool:
    """An activation's spec that leaves its point to propagation: None or "free"."""
    return spec is None or isinstance(spec, str) and spec.strip().lower() == _FREE


def _given(info, origin: str, specs: Mapping[str, str]) -> dict[str, str]:
    return {n: s for n, s in specs.items() if info.origin.get(n) == origin}


def _activations(info) -> dict[str, str]:
    """The points pinned by hand, and those left free where the rules would pin them (with
    rules, every point not left free gets a spec)."""
    out = _given(info, "activation", info.activations)
    points = get_workload(info.name).points
    if info.rules and points is not None:
        out.update({n: _FREE for n in points(dict(info.params)) if n not in info.activations})
    return out


def _user_rules(info, report) -> str:
    """The rules given over the preset's: WorkloadInfo.rules holds the preset's table first."""
    if not info.preset:
        return info.rules
    preset = get_preset(info.preset).rules_for(report.mesh).text()
    return info.rules[len(preset):].lstrip(",") if info.rules.startswith(preset) else info.rules


def _mapping_text(target: str, mapping: Mapping[str, str], report) -> str | None:
    """The mapping as text, or None where it is the target's default."""
    text = ",".join(f"{n}={t}" for n, t in mapping.items())
    default = check_target(target, None, report.mesh)
    return None if default is None or text == default.text() else text


# ------------------------------------------------------------------------------ loading


def load(path: str | os.PathLike) -> Exploration:
    """The exploration saved in `path`, every field checked; nothing in it is evaluated or
    imported.

    Raises:
        InputError: the file cannot be read, is too large, is not the JSON of an exploration,
            or a field is invalid; the message names the field and the choices."""
    where = str(path)
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):       # a FIFO or a device could block or not end
            raise InputError(f"exploration {where!r} is not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise InputError(f"exploration {where!r} has {st.st_size} bytes; an exploration "
                             f"file has at most {MAX_FILE_BYTES}")
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise InputError(f"exploration {where!r} could not be read: {e.strerror or e}") from None
    if len(data) > MAX_FILE_BYTES:
        raise InputError(f"exploration {where!r} has more than {MAX_FILE_BYTES} bytes")
    return loads(data, where=f"exploration {where!r}")


def from_link(text: str) -> Exploration:
    """The exploration a link's query carries (`Exploration.to_link`), every field checked as
    it is read; its layout is not planned here: the app that opens it makes its Request, as an
    edit's, and says there what does not fit (`check` plans it, where wanted).

    Raises:
        InputError: the text is too long, not base64url, or not an exploration's JSON."""
    if not isinstance(text, str) or len(text) > MAX_LINK_CHARS:
        raise InputError(f"an exploration link's text has at most {MAX_LINK_CHARS} characters")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise InputError(f"exploration link text {show(text)} is not base64url") from None
    return _capped(_parsed(data, "the exploration link"))


def _capped(exploration: Exploration) -> Exploration:
    """A link's exploration held to the served app's limits (spec/bounds.py's `served_limits`;
    none where the app is not served): its compile time limit lowered to the server's most, a
    program larger than the server allows refused (an InputError naming the size)."""
    limits = served_limits()
    if limits is None:
        return exploration
    devices = check_mesh(exploration.mesh, exploration.axis_type).device_count
    tensors = layers = None
    if exploration.workload is not None:
        workload = get_workload(exploration.workload)
        resolved = workload.resolve(exploration.params)
        tensors, layers = len(workload.shapes(resolved)), resolved.get("layers")
    check_served("the exploration link", tensors=tensors, layers=layers, devices=devices)
    if exploration.timeout is not None and exploration.timeout > limits.timeout_s:
        return dataclasses.replace(exploration, timeout=limits.timeout_s)
    return exploration


def loads(data: bytes | str, where: str = "the exploration") -> Exploration:
    """An exploration from its JSON text, every field checked, and a workload's whole by the
    Request it makes (see `load`)."""
    exploration = _parsed(data, where)
    try:
        return exploration.check()
    except InputError as e:
        raise _prefixed(e, where) from None


def _parsed(data: bytes | str, where: str) -> Exploration:
    """An exploration from its JSON text, each field read and checked on its own."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{where} is not UTF-8 text") from None
    try:
        parsed = json.loads(data, parse_constant=_no_constant, parse_int=_bounded_int,
                            object_pairs_hook=_unique_keys)
    except RecursionError:
        raise InputError(f"{where} is nested too deeply for an exploration") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{where} is not JSON ({e.msg} at line {e.lineno}, column "
                         f"{e.colno})") from None
    except InputError as e:
        raise InputError(f"{where}: {e}") from None
    _check_depth(parsed, where)
    try:
        return from_dict(parsed)
    except InputError as e:
        raise _prefixed(e, where) from None


def _no_constant(name: str):
    raise InputError(f"{name} is not a number JSON allows")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 20:         # beyond int64: no size param is this large
        raise InputError(f"the number {text[:24]}... has more than 20 digits")
    return int(text)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise InputError(f"key {key!r} appears twice in one object")
        out[key] = value
    return out


def _check_depth(value, where: str) -> None:
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InputError(f"{where} is nested more than {MAX_DEPTH} levels deep; an "
                             "exploration's values are text, numbers and flat mappings")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


# ------------------------------------------------------------------------------ checking

_TOP = ("format", "version", "request", "target", "compile", "app")
_REQUEST = ("workload", "params", "function", "mesh", "axis_type", "specs", "preset", "rules",
            "activations", "donate", "partitioner", "compile_for")
_TARGET = ("name", "mapping", "peak")
_APP = ("tab", "tensor")
_COMPILE = ("timeout", "extrapolate")
_FUNCTION = ("module", "qualname")


def from_dict(data: Any) -> Exploration:
    """An exploration from the file's parsed JSON, every field checked (see `load`)."""
    top = _object(data, "the exploration", _TOP)
    if top.get("format") != FORMAT:
        raise InputError(f"field 'format' is {show(top.get('format'))}, not {FORMAT!r}: this "
                         "is not a sharding-explorer exploration")
    if type(top.get("version")) is not int or top["version"] != VERSION:
        raise InputError(f"field 'version' is {show(top.get('version'))}; this explorer reads "
                         f"version {VERSION}")
    request = _object(top.get("request"), "request", _REQUEST)
    mesh_text = _text(request.get("mesh"), "request.mesh")
    axis_type = _text(request.get("axis_type", "auto"), "request.axis_type")
    mesh = _checked("request.mesh", check_mesh, mesh_text, axis_type)
    partitioner = _checked("request.partitioner", check_partitioner,
                           _text(request.get("partitioner", "shardy"), "request.partitioner"))
    compile_for = _checked("request.compile_for", check_compile_for,
                           _text(request.get("compile_for", "target"), "request.compile_for"))
    target, mapping, peak = _target(top.get("target"), mesh)
    app = _app(top.get("app", {}))
    compile_ = _object(top.get("compile", {}), "compile", _COMPILE)
    timeout = _checked("compile.timeout", check_timeout, compile_.get("timeout"))
    extrapolate = compile_.get("extrapolate", False)
    if not isinstance(extrapolate, bool | str):
        raise InputError(f"field compile.extrapolate is {show(extrapolate)}; it is true, "
                         "false, 'auto', 'A,B' or 'auto:A,B'")
    if isinstance(extrapolate, str):
        _text(extrapolate, "compile.extrapolate", MAX_NAME)
    extrapolate = _checked("compile.extrapolate", extrapolate_option, extrapolate)
    common = dict(mesh=mesh_text, axis_type=axis_type, partitioner=partitioner,
                  compile_for=compile_for, target=target, mapping=mapping, peak=peak,
                  timeout=timeout, extrapolate=extrapolate, app=app)
    if "workload" in request:
        if "function" in request:
            raise InputError("request has both 'workload' and 'function'; an exploration is "
                             "of one of them")
        return _workload_exploration(request, common)
    for key in ("params", "preset", "rules", "activations"):
        if key in request:
            raise InputError(f"field request.{key} belongs to a built-in workload's "
                             "exploration; this one is of a user's function")
    function = _function(request["function"]) if "function" in request else None
    specs = _names_to_specs(request.get("specs", {}), "request.specs", None)
    donate = _donated(request.get("donate", []))
    return Exploration(function=function, specs=specs, donate=donate, **common)


def _donated(value) -> tuple[str, ...]:
    """request.donate: a list of input names, each text."""
    if not isinstance(value, list):
        raise InputError(f"field request.donate is {show(value)}, not a list of input names")
    if len(value) > MAX_TENSORS:
        raise InputError(f"field request.donate has {len(value)} entries; at most "
                         f"{MAX_TENSORS}")
    return tuple(_text(name, "request.donate entry", MAX_NAME) for name in value)


def _workload_exploration(request: dict, common: dict) -> Exploration:
    if "donate" in request:
        raise InputError("field request.donate belongs to a user's function's exploration; a "
                         "built-in workload donates its state by its param donate_state")
    name = _text(request["workload"], "request.workload", MAX_NAME)
    workload = _checked("request.workload", get_workload, name)
    params = _object(request.get("params", {}), "request.params", tuple(workload.defaults))
    for key, value in params.items():
        if isinstance(value, float) and not math.isfinite(value) or \
                not isinstance(value, int | float | str | bool):
            raise InputError(f"field request.params.{key} is {show(value)}; a param is a "
                             "number, text or true/false")
        if isinstance(value, str):
            _text(value, f"request.params.{key}")
    resolved = _checked("request.params", workload.resolve, params)
    specs = _names_to_specs(request.get("specs", {}), "request.specs",
                            tuple(workload.shapes(resolved)))
    preset = request.get("preset")
    if preset is not None:
        _checked("request.preset", get_preset, _text(preset, "request.preset", MAX_NAME))
    rules = _text(request.get("rules", ""), "request.rules")
    logical = workload.logical(resolved) if workload.logical else {}
    known = tuple(dict.fromkeys(LOGICAL_NAMES + tuple(
        d for dims in logical.values() for d in dims if d is not None)))
    _checked("request.rules", parse_rules, rules, known)
    points = tuple(workload.points(resolved)) if workload.points else ()
    activations = _names_to_specs(request.get("activations", {}), "request.activations",
                                  points, free=True)
    # The layout (the preset fits the mesh and the workload, the rules' and specs' mesh axes
    # exist, the params fit the mesh) is the Request's to check, when it is made (`check`).
    return Exploration(workload=name, params=params, specs=specs, preset=preset, rules=rules,
                       activations=activations, **common)


def _object(value, where: str, keys: tuple[str, ...]) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"field {where} is {show(value)}, not an object with keys from "
                         f"{choices(keys)}")
    unknown = [k for k in value if k not in keys]
    if unknown:
        raise InputError(f"field {where} has unknown key {show(unknown[0])}; its keys are "
                         f"{choices(keys)}")
    return value


def _text(value, where: str, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str):
        raise InputError(f"field {where} is {show(value)}, not text")
    if len(value) > limit:
        raise InputError(f"field {where} has {len(value)} characters; at most {limit}")
    if any(ord(c) < 32 for c in value):
        raise InputError(f"field {where} holds a control character")
    return value


def _checked(where: str, check: Callable[..., Any], *args: Any) -> Any:
    """`check(*args)`, its InputError prefixed with the field it was given."""
    try:
        return check(*args)
    except InputError as e:
        raise _prefixed(e, f"field {where}") from None


def _prefixed(error: InputError, prefix: str) -> InputError:
    """`error` with `prefix` before its message, of its class and with its attributes."""
    out = type(error)(f"{prefix}: {error}")
    out.__dict__.update(error.__dict__)
    return out


def _names_to_specs(value, where: str, names: tuple[str, ...] | None,
                    free: bool = False) -> dict[str, str]:
    """A mapping of tensor (or point) name to spec text, each spec read (never evaluated) and
    each name one of `names` where they are known."""
    if not isinstance(value, dict):
        raise InputError(f"field {where} is {show(value)}, not an object of name to spec text")
    specs = value
    if len(specs) > MAX_TENSORS:
        raise InputError(f"field {where} has {len(specs)} entries; at most {MAX_TENSORS}")
    for name, spec in specs.items():
        _text(name, f"{where} key", MAX_NAME)
        if names is not None and name not in names:
            raise InputError(f"field {where} names {name!r}, which the workload lacks; its "
                             f"names are {choices(names)}")
        text = _text(spec, f"{where}.{name}")
        if free and text.strip().lower() == _FREE:
            continue
        _checked(f"{where}.{name}", parse_spec, text, name)
    return dict(specs)


def _function(value) -> FunctionRef:
    ref = _object(value, "request.function", _FUNCTION)
    parts = []
    for key in _FUNCTION:
        text = _text(ref.get(key), f"request.function.{key}", MAX_NAME)
        if not _DOTTED.fullmatch(text):
            raise InputError(f"field request.function.{key} is {text!r}, not a dotted Python "
                             "name (e.g. 'models.train.step')")
        parts.append(text)
    return FunctionRef(*parts)


def _target(value, mesh) -> tuple[str | None, str | None, bool]:
    if value is None:
        return None, None, False
    target = _object(value, "target", _TARGET)
    name = _text(target.get("name"), "target.name", MAX_NAME)
    mapping = target.get("mapping")
    if mapping is not None:
        mapping = _text(mapping, "target.mapping")
    peak = target.get("peak", False)
    if not isinstance(peak, bool):
        raise InputError(f"field target.peak is {show(peak)}, not true or false")
    _checked("target", check_target, name, mapping, mesh)
    return name, mapping, peak


def _app(value) -> AppState:
    app = _object(value, "app", _APP)
    tab = _text(app.get("tab", "Placement"), "app.tab", MAX_NAME)
    if tab not in APP_TABS:
        raise InputError(f"field app.tab is {tab!r}; the tabs are {choices(APP_TABS)}")
    tensor = app.get("tensor")
    if tensor is not None:
        tensor = _text(tensor, "app.tensor", MAX_NAME)
    return AppState(tab=tab, tensor=tensor)
