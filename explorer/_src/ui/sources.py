"""Where the app's program comes from: a built-in workload, or the user's own function.

A source owns the top of the sidebar (the workload picker and its params, or the function's
name and inputs), lists the input tensors, places the ones the user has not pinned, checks what
only it knows, and compiles a checked request. The app owns the rest: the mesh, the spec
pickers, the partitioner and target (explorer._src.ui.sidebar), and every view
(explorer._src.ui.tabs). A Flax NNX module is a function source built by explorer._src.ui.module.
"""

from __future__ import annotations

import functools
import html
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import ipywidgets as w

from explorer._src.api.analysis_request import Request
from explorer._src.api.patterns import (
    apply_spec_patterns,
    match_spec_patterns,
    splits,
    unmatched,
    unmatched_note,
)
from explorer._src.api.pytrees import argument_names, map_tensor_leaves, named_inputs, tensor_leaves
from explorer._src.api.targeting import CompileFor
from explorer._src.compile.caller_context import bind_context
from explorer._src.compile.protocol import Partitioner
from explorer._src.compile.sources import cell_name
from explorer._src.cost.catalog.names import compute_dtypes
from explorer._src.errors import ExplorerError, InputError, RuleError, TensorError
from explorer._src.report.memory import kinds_by_name, with_kinds
from explorer._src.report.report import Report, WorkloadInfo
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import Spec, TensorSpec, entry_axes, format_spec
from explorer._src.strategy.plan import Plan, check_planned, plan
from explorer._src.strategy.rules import LOGICAL_NAMES, Rules, logical_spec, parse_rules
from explorer._src.workloads.base import TensorKind, kind_of
from explorer._src.workloads.registry import WORKLOADS, get_workload

# What a tensor is, as the sidebar's sections name it.
GROUP_OF_KIND = {TensorKind.PARAM: "parameters", TensorKind.OPT: "optimizer state",
                 TensorKind.INPUT: "inputs"}


@dataclass(frozen=True)
class InputTensor:
    """One input of the program as the sidebar lists it."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    group: str                                   # the sidebar section: what the tensor is
    logical: tuple[str | None, ...] | None = None   # logical dimension names, where known


@dataclass(frozen=True)
class Placement:
    """Every input's spec for one request, and what the source needs to compile it."""

    specs: dict[str, Spec]
    plan: Plan | None = None
    origin: dict[str, str] = field(default_factory=dict)    # tensor -> where its spec came from


@dataclass(frozen=True)
class AppRequest:
    """A checked request: what the app compiles and what it shows with the result."""

    mesh: MeshSpec
    specs: dict[str, Spec]                 # every input's spec
    pinned: dict[str, Spec]                # the ones the user set
    placement: Placement
    params: dict
    preset: str | None
    rules: str | None
    partitioner: Partitioner
    target: str | None
    mapping: str | None
    measure: bool
    unavailable: str | None                # why a picked target gives no prediction
    compile_for: CompileFor = CompileFor.TARGET   # CPU: fake CPU devices, priced on the target
    origins: bool = False                  # read why each tensor is laid out so (slower)
    timeout: float | None = None           # the seconds the compile may take
    timeout_given: bool = False            # typed by the user (else the target's default)
    # explorer.analyze's `extrapolate`: a workload's layers compiled at 3 and 4 and carried on
    # linearly (the sidebar's box; never a function's, whose layers cannot be counted).
    extrapolate: bool = False
    # The explorer Request the sidebar made of it (`Source.analysis`): what the session
    # compiles, so that nothing checks or plans it again. A what-if's variant is made by the
    # session from its Request (explorer._src.api.what_if.changed_request), not from this one.
    analysis: Request | None = field(default=None, compare=False, repr=False)


class Source:
    """The part of the app that differs between a built-in workload and a user's function."""

    #: the sidebar widgets above the mesh editor
    sidebar: w.Widget
    #: where errors about the source's own inputs (params, the function's inputs) are shown
    error: w.HTML
    uses_preset = False
    uses_rules = False
    #: why the rules box is off, when it is
    rules_note = ""

    def bind(self, changed: Callable[[], None], reset: Callable[[], None],
             guard: Callable[[Callable], Callable]) -> None:
        """`changed`: the inputs' shapes may have moved (a param edit); `reset`: a different
        program (another workload), so the user's picks no longer apply."""

    def set_target(self, target: str | None) -> None:
        """The hardware target picked now: what the source offers may depend on it."""

    @property
    def title(self) -> str:
        raise NotImplementedError

    @property
    def params(self) -> dict:
        return {}

    def tensors(self) -> list[InputTensor]:
        raise NotImplementedError

    def place(self, mesh: MeshSpec, pinned: Mapping[str, Spec], preset: str | None,
              rules: str | None) -> Placement:
        raise NotImplementedError

    def check(self, placement: Placement, inputs: list[TensorSpec], mesh: MeshSpec) -> None:
        """What only this source can check, before the compile."""

    def analysis(self, request: AppRequest) -> Request:
        """The explorer.Request that compiles the app request `request`, checked (and a
        workload's layout planned) as it is made."""
        raise NotImplementedError

    def planned(self, analysis: Request) -> Placement:
        """Every input's spec as the Request `analysis` planned it (a source whose Request
        plans the layout: a workload's)."""
        raise NotImplementedError

    def describe(self, report: Report, request: AppRequest) -> Report:
        """`report` (of `analysis(request)`) as the app shows it: what was analysed. The app's
        session holds it so (explorer._src.api.session.Session.analyze's `describe`)."""
        return report

    def dim_names(self, report: Report, tensor: str) -> tuple[str | None, ...] | None:
        """The logical names of an input's dimensions, for the placement view's axes."""
        return None


# ------------------------------------------------------------------------------- workloads


class WorkloadSource(Source):
    """A built-in workload: a picker, its params, and presets and rules placing its tensors."""

    uses_preset = True
    uses_rules = True

    def __init__(self, workload: str = "mlp", params: Mapping | None = None):
        get_workload(workload)
        self.workload_w = w.Dropdown(options=list(WORKLOADS), value=workload,
                                     description="workload")
        self.params_box = w.VBox()
        self.error = w.HTML()
        self.error.add_class("explorer-error")
        self.sidebar = w.VBox([self.workload_w, self.params_box, self.error])
        self._changed: Callable[[], None] = lambda: None
        self._guard: Callable[[Callable], Callable] = lambda f: f
        self._muted = 0
        self._dtypes = compute_dtypes()
        self._build_params(dict(params or {}))

    def set_target(self, target: str | None) -> None:
        """The dtype picker offers the dtypes the target computes in (compute_dtypes); the
        current one is kept, whatever it is."""
        self._dtypes = compute_dtypes(target)
        for key, wid in zip(self.workload.defaults, self.params_box.children, strict=True):
            if key == "dtype":
                keep = wid.value
                self._muted += 1        # new options reset a Dropdown's value: put it back
                try:
                    wid.options = self._dtype_options(keep)
                    wid.value = keep
                finally:
                    self._muted -= 1

    def _dtype_options(self, current: str) -> list[str]:
        return list(self._dtypes) + ([current] if current not in self._dtypes else [])

    def bind(self, changed, reset, guard) -> None:
        self._changed, self._guard = changed, guard
        self.workload_w.observe(guard(lambda _: self._switch(reset)), "value")
        self._build_params(self.params)

    @property
    def workload(self):
        return get_workload(self.workload_w.value)

    @property
    def title(self) -> str:
        return self.workload_w.value

    def _switch(self, reset) -> None:
        self._build_params({})
        reset()

    def _build_params(self, params: dict) -> None:
        """A widget per param: a picker for a closed set of values (`Workload.options`, and the
        dtypes the target computes in), else a text or number box; labels wide enough for the
        longest name (`compute_dtype`)."""
        widgets = []
        for key, default in self.workload.defaults.items():
            value = params.get(key, default)
            if key in self.workload.options:
                # The workload's own check: a value outside the set is refused naming them, and
                # a switch given as a Python bool reads as "true"/"false".
                value = self.workload.resolve({key: value})[key]
                wid = w.Dropdown(options=list(self.workload.options[key]), value=value,
                                 description=key)
            elif key == "dtype":
                value = self.workload.resolve({key: value})[key]      # `bf16` -> `bfloat16`
                wid = w.Dropdown(options=self._dtype_options(value), value=value,
                                 description=key)
            elif isinstance(default, str):
                wid = w.Text(value=str(value), description=key, continuous_update=False)
            elif isinstance(default, int):
                wid = w.IntText(value=int(value), description=key)
            else:
                wid = w.FloatText(value=float(value), description=key)
            wid.layout.width = "250px"
            wid.style.description_width = "110px"
            wid.observe(self._guard(lambda _: None if self._muted else self._changed()), "value")
            widgets.append(wid)
        self.params_box.children = widgets

    @property
    def params(self) -> dict:
        return {k: wid.value for k, wid in zip(self.workload.defaults, self.params_box.children,
                                                strict=True)}

    def resolved(self) -> dict:
        try:
            return self.workload.resolve(self.params)
        except ExplorerError as e:
            self.error.value = html.escape(str(e))
            raise

    def tensors(self) -> list[InputTensor]:
        workload, params = self.workload, self.resolved()
        kinds = workload.kinds(params) if workload.kinds is not None else {}
        logical = workload.logical(params) if workload.logical is not None else {}
        return [InputTensor(t.name, t.shape, t.dtype,
                            GROUP_OF_KIND.get(kind_of(kinds, t.name), "parameters"),
                            logical.get(t.name))
                for t in workload.tensors(params)]

    def place(self, mesh, pinned, preset, rules) -> Placement:
        params = self.resolved()
        layout = plan(self.workload, params, mesh, dict(pinned), preset, rules)
        specs = {t.name: layout.specs.get(t.name, ()) for t in self.workload.tensors(params)}
        return Placement(specs, layout, dict(layout.origin))

    def check(self, placement, inputs, mesh) -> None:
        check_planned(inputs, placement.plan, mesh)     # the constraint points the rules place
        params = self.resolved()
        if self.workload.check is not None:
            self.workload.check(params, mesh)

    def analysis(self, request: AppRequest) -> Request:
        return Request(workload=self.workload_w.value, mesh=request.mesh,
                       specs=request.pinned or None, params=request.params,
                       preset=request.preset, rules=request.rules,
                       partitioner=request.partitioner, target=request.target,
                       mapping=request.mapping, measure=request.measure,
                       compile_for=request.compile_for, origins=request.origins,
                       timeout=request.timeout, extrapolate=request.extrapolate)

    def planned(self, analysis: Request) -> Placement:
        layout = analysis.planned.layout
        assert layout is not None               # a workload's Request always plans one
        specs = {t.name: layout.specs.get(t.name, ()) for t in analysis.planned.leaves}
        return Placement(specs, layout, dict(layout.origin))

    def dim_names(self, report, tensor):
        info = report.workload
        if info is None or info.name not in WORKLOADS:
            return None
        workload = get_workload(info.name)
        if workload.logical is None:
            return None
        return workload.logical(dict(info.params)).get(tensor)


# ------------------------------------------------------------------------------- functions


def function_title(fn) -> str:
    """`train_step` (or `Model.__call__`, a partial's function) as people call it."""
    target = fn.func if isinstance(fn, functools.partial) else fn
    return getattr(target, "__qualname__", None) or getattr(target, "__name__", None) \
        or type(target).__name__


def where_defined(fn) -> str:
    """`file.py:12`, where `fn` (a function or a class) is defined; "" where unknown."""
    target = fn.func if isinstance(fn, functools.partial) else fn
    try:
        path = inspect.getsourcefile(target) or ""
        line = inspect.getsourcelines(target)[1]
    except (TypeError, OSError):
        return ""
    if not path:
        return ""
    cell = cell_name(path)            # a notebook cell: named as its prompt, "In [3]"
    return f"{cell}, line {line}" if cell else f"{path.rsplit('/', 1)[-1]}:{line}"


class FunctionSource(Source):
    """The user's own function of TensorSpecs (or pytrees of them), as explorer.analyze takes
    it. An input keeps a spec its TensorSpec gives (one that splits a dimension); any other
    takes the first of `specs` (partition rules: regular expression -> spec, a mapping or a
    sequence of pairs, explorer/_src/api/patterns.py) that finds its name. Logical-axis rules apply
    to inputs that carry logical dimension names (`logical`: tensor name -> names, as a Flax
    module's partitioning metadata gives them); a plain TensorSpec has none, so for a plain
    function the rules box is off."""

    def __init__(self, fn, args: Sequence, *, specs: Mapping | Sequence | None = None,
                 logical: Mapping[str, tuple[str | None, ...]] | None = None,
                 groups: Mapping[str, str] | None = None, title: str | None = None,
                 kinds: Mapping[str, TensorKind] | None = None,
                 has_grads: bool | None = None,
                 notes: Sequence[str] = (), where: str | None = None,
                 label: str = "function", out_specs: Any = None):
        if not callable(fn):
            raise InputError(f"{fn!r} is not a function; pass the function to explore first")
        # Arrays and ShapeDtypeStructs become TensorSpecs named by their key paths, as
        # explorer.analyze names them.
        # Traced again at every edit, on widget callbacks: under the contexts of this call.
        self.fn, self.args = bind_context(fn), named_inputs(fn, tuple(args))
        leaves_per_arg = [tensor_leaves(a) for a in self.args]
        names = argument_names(fn, len(self.args))
        self._tensors: list[InputTensor] = []
        self._given: dict[str, Spec] = {}
        logical = dict(logical or {})
        for arg_name, leaves in zip(names, leaves_per_arg, strict=True):
            for t in leaves:
                group = (groups or {}).get(t.name, arg_name)
                self._tensors.append(InputTensor(t.name, t.shape, t.dtype, group,
                                                 logical.get(t.name)))
                self._given[t.name] = t.spec
        # The whole request's checks (names unique, sizes within bounds) before any widget.
        seen = set()
        for t in self._tensors:
            if t.name in seen:
                raise TensorError(f"two inputs are named {t.name!r}; give each tensor its own "
                                  "name", tensor=t.name)
            seen.add(t.name)
        self.patterns = specs or {}
        names = [t.name for t in self._tensors]
        self._matched = match_spec_patterns(names, self.patterns)
        self._unmatched = unmatched(names, self.patterns)
        # Ranks are checked here, with the pattern named, before any widget shows them.
        if self.patterns:
            apply_spec_patterns(self.args, self.patterns)
        self.kinds, self.has_grads = dict(kinds or {}), has_grads
        # Whether this source knows more of what its inputs are than their names and arguments
        # say (a Flax module's own kinds and groups, whether it has gradient points): else
        # explorer.analyze's split by those names is the one split, and `describe` keeps it.
        self.knows_kinds = bool(kinds) or bool(groups) or has_grads is not None
        # The outputs' layout, as jax.jit's out_shardings: checked by each Request (a mesh
        # edit can leave one of its axes out)
        self.out_specs = out_specs
        self.uses_rules = any(t.logical for t in self._tensors)
        self.rules_note = ("" if self.uses_rules else
                           "No logical-axis rules: a TensorSpec carries no logical dimension "
                           "names. Set the specs below (or pass specs= patterns).")
        self._known = tuple(dict.fromkeys(LOGICAL_NAMES + tuple(
            d for t in self._tensors for d in (t.logical or ()) if d is not None)))
        self._title = title or function_title(fn)
        self._where = where_defined(fn) if where is None else where
        self.label = label
        self.error = w.HTML()
        self.error.add_class("explorer-error")
        self.notes = tuple(notes)
        self.sidebar = w.VBox([w.HTML(self._header_html()), self.error])
        self.sidebar.add_class("explorer-function")

    @property
    def title(self) -> str:
        return self._title

    @staticmethod
    def leaf_names(args: Sequence) -> list[str]:
        """The names of the TensorSpecs in `args`, in jax's flattening order."""
        return [t.name for a in args for t in tensor_leaves(a)]

    def _header_html(self) -> str:
        e = html.escape
        where = self._where
        by_group: dict[str, list[InputTensor]] = {}
        for t in self._tensors:
            by_group.setdefault(t.group, []).append(t)
        items = []
        for group, ts in by_group.items():
            if len(ts) == 1:
                t = ts[0]
                label = "" if t.name == group else f"<b>{e(group)}</b>: "
                items.append(f"<li>{label}<code>{e(t.name)}</code> {t.dtype}"
                             f"[{','.join(map(str, t.shape))}]</li>")
            else:
                items.append(f"<li><b>{e(group)}</b>: {len(ts)} tensor"
                             f"{'s' if len(ts) != 1 else ''}</li>")
        notes = "".join(f"<li class='explorer-source-note'>{e(n)}</li>" for n in self.notes)
        return (f"<div class='explorer-function-head'><b>{e(self.label)}</b> <code>{e(self.title)}"
                f"</code>{f' <small>({e(where)})</small>' if where else ''}<br>"
                f"<small>{len(self._tensors)} input tensor{'s' if len(self._tensors) != 1 else ''}"
                f"</small><ul class='explorer-inputs'>{''.join(items)}{notes}</ul></div>")

    def tensors(self) -> list[InputTensor]:
        return list(self._tensors)

    def place(self, mesh, pinned, preset, rules) -> Placement:
        if preset:
            raise RuleError("presets place the built-in workloads' tensors; for a function, "
                            "give specs")
        table: Rules | None = None
        if rules:
            if not self.uses_rules:
                raise RuleError(f"rules need logical dimension names, and {self.title}'s inputs "
                                "carry none; give each tensor a spec instead")
            table = parse_rules(rules, self._known)
            table.check_mesh(mesh)
        specs, origin = {}, {}
        for t in self._tensors:
            if t.name in pinned:
                specs[t.name], origin[t.name] = tuple(pinned[t.name]), "picked"
            elif splits(self._given[t.name]):
                specs[t.name], origin[t.name] = self._given[t.name], "given"
            elif t.name in self._matched:
                pattern, spec = self._matched[t.name]
                specs[t.name], origin[t.name] = spec, f"pattern {pattern!r}"
            elif t.logical and table is not None:
                kind = (TensorKind.PARAM if kind_of(self.kinds, t.name) == TensorKind.PARAM
                        else TensorKind.INPUT)
                specs[t.name] = logical_spec(t.logical, table.pairs(kind), mesh.shape)
                origin[t.name] = "rules"
            else:
                specs[t.name], origin[t.name] = self._given[t.name], "given"
        return Placement(specs, None, origin)

    def inputs(self, specs: Mapping[str, Spec]) -> tuple:
        """The function's arguments with every leaf given its spec from `specs`."""
        return tuple(map_tensor_leaves(a, lambda t: replace(t, spec=specs[t.name]))
                     for a in self.args)

    def analysis(self, request: AppRequest) -> Request:
        return Request(fn=self.fn, inputs=tuple(self.inputs(request.specs)),
                       out_specs=self.out_specs,
                       mesh=request.mesh, partitioner=request.partitioner,
                       target=request.target, mapping=request.mapping,
                       measure=request.measure, compile_for=request.compile_for,
                       origins=request.origins, timeout=request.timeout)

    def describe(self, report: Report, request: AppRequest) -> Report:
        """The report with what was analysed (the function, its specs) and, where the inputs'
        kinds are known, its memory split by kind."""
        info = WorkloadInfo(
            name=f"{self.title}()", params={}, rules=request.rules or "",
            specs={n: format_spec(s) for n, s in request.specs.items()
                   if any(entry_axes(e) for e in s)},
            origin=dict(request.placement.origin))
        report = replace(report, workload=info)
        if self._unmatched:
            note = unmatched_note(self._unmatched, [t.name for t in self._tensors])
            report = replace(report, notes=(*report.notes, note))
        if not self.knows_kinds:
            return report      # split by explorer.analyze, by the same names and arguments
        # Given (a Flax module's), else read from the names and groups of the inputs.
        named = self.kinds or kinds_by_name({t.name: t.group for t in self._tensors})
        return with_kinds(report, named, self.has_grads) if named else report

    def dim_names(self, report, tensor):
        t = next((t for t in self._tensors if t.name == tensor), None)
        return t.logical if t is not None else None
