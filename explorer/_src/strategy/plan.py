"""The plan: what a preset, logical-axis rules, per-tensor specs and activation specs resolve to
for one workload on one mesh, and the check of the result with the origin of each spec."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from explorer._src.errors import PresetError, RuleError, SpecError, WorkloadError, choices
from explorer._src.spec.bounds import show
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import (
    Entry,
    TensorSpec,
    check_spec,
    entry_axes,
    format_spec,
    normalize_spec,
)
from explorer._src.strategy.presets import get_preset
from explorer._src.strategy.rules import LOGICAL_NAMES, Rules, logical_spec, parse_rules
from explorer._src.workloads.base import STATE_KINDS, TensorKind, Workload, kind_of
from explorer._src.workloads.registry import WORKLOADS


@dataclass(frozen=True)
class Plan:
    """What a preset, rules and specs resolve to for one workload on one mesh."""

    specs: dict[str, tuple[Entry, ...]]            # input tensor -> spec, where not replicated
    origin: dict[str, str]                         # input tensor -> where its spec came from
    constraints: tuple[tuple[str, tuple[Entry, ...]], ...]   # the program's constraint table
    activations: dict[str, tuple[Entry, ...]] = field(default_factory=dict)  # point -> spec
    point_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    rules: Rules = field(default_factory=Rules)
    # input tensor -> the spec the preset and rules give it, where they split it (before a
    # per-tensor spec overrides it): what a hand-set spec keeps the rules from placing
    by_rules: dict[str, tuple[Entry, ...]] = field(default_factory=dict)

    def info(self) -> dict:
        return {"rules": self.rules.text(),
                "specs": {n: format_spec(s) for n, s in self.specs.items()},
                "activations": {n: format_spec(s) for n, s in self.activations.items()},
                "origin": dict(self.origin)}


def plan(workload: Workload, params: dict, mesh: MeshSpec, specs: Mapping | None = None,
         preset: str | None = None, rules=None, activations: Mapping | None = None) -> Plan:
    """Resolve a request's layout: rules (preset, then user rules) for every tensor and point
    with logical dims; per-tensor `specs` and per-point `activations` override them. An
    activation spec of None or "free" leaves that point unconstrained."""
    specs = dict(specs or {})
    activations = dict(activations or {})
    logical = workload.logical(params) if workload.logical is not None else {}
    kinds = workload.kinds(params) if workload.kinds is not None else {}
    points = workload.points(params) if workload.points is not None else {}
    shapes = workload.shapes(params)

    known = tuple(dict.fromkeys(LOGICAL_NAMES + tuple(
        d for dims in [*logical.values(), *(p.dims for p in points.values())]
        for d in dims if d is not None)))
    table, origin_of_rules = _rule_table(workload, mesh, preset, rules, known)
    if table.rules and not logical:
        raise RuleError(f"workload {workload.name!r} declares no logical dimension names, so "
                        "presets and rules cannot place its tensors; give a spec per tensor "
                        "instead")
    _check_points(workload, activations, points)

    out_specs: dict[str, tuple[Entry, ...]] = {}
    origin: dict[str, str] = {}         # tensor or point -> "spec", "activation" or the rules'
    point_shapes: dict[str, tuple[int, ...]] = {}
    tables: dict[TensorKind, tuple] = {}
    mesh_axes = frozenset(mesh.names)

    def by_rules(dims, kind: TensorKind):
        if kind not in tables:
            tables[kind] = table.pairs(kind)
        # A pair's mesh axis the mesh lacks counts as size 1: resolved with, then dropped.
        return logical_spec(dims, tables[kind], mesh_axes)

    if table.rules:
        for name, dims in logical.items():
            spec = by_rules(tuple(dims), kind_of(kinds, name))
            if any(entry_axes(e) for e in spec):
                out_specs[name], origin[name] = spec, origin_of_rules
    ruled = dict(out_specs)                 # what the rules give, before specs override
    for name, spec in specs.items():
        if name in shapes:
            out_specs[name], origin[name] = normalize_spec(spec, tensor=name), "spec"
    # Unknown tensor names in `specs` are reported by Workload.tensors, with the choices.

    point_specs: dict[str, tuple[Entry, ...]] = {}
    for name, point in points.items():
        if name in activations and _is_free(activations[name]):
            continue                       # no constraint here, whatever the rules say
        if name in activations:
            point_specs[name] = normalize_spec(activations[name], tensor=name)
            origin[name] = "activation"
        elif table.rules:
            point_specs[name] = by_rules(point.dims, point.kind)
            origin[name] = origin_of_rules
        else:
            continue
        point_shapes[name] = point.shape

    constraints = dict(point_specs)
    if workload.returns_state:
        # State comes out in the layout it went in: replicated unless a spec or rule split it.
        for name in shapes:
            if kind_of(kinds, name) in STATE_KINDS:
                constraints[name] = out_specs.get(name, ())
    return Plan(out_specs, origin, tuple(constraints.items()), point_specs, point_shapes, table,
                ruled)


def _rule_table(workload: Workload, mesh: MeshSpec, preset: str | None, rules,
                known: tuple[str, ...]) -> tuple[Rules, str]:
    """The preset's rules for `mesh`, then the user's `rules` (over the logical names `known`),
    and where a spec they give comes from, as the plan's origin names it."""
    table = Rules()
    origin_of_rules = "rule"
    if preset is not None:
        p = get_preset(preset)
        if p.workloads is not None and workload.name not in p.workloads:
            missing = [w for w in p.workloads if w not in WORKLOADS]
            if missing:
                raise PresetError(
                    f"preset {p.name!r} needs workload {missing[0]!r}, which is not available "
                    f"in this installation; built-in workloads: {choices(WORKLOADS)}")
            raise PresetError(f"preset {p.name!r} applies only to workload(s) "
                              f"{choices(p.workloads)}, not {workload.name!r}; use "
                              f"workload {p.workloads[0]!r}")
        table = p.rules_for(mesh)
        origin_of_rules = f"preset {p.name!r}"
    user_rules = parse_rules(rules, known)
    user_rules.check_mesh(mesh)
    table = table + user_rules
    if rules is not None:
        origin_of_rules += " + rules" if preset is not None else ""
    return table, origin_of_rules


def _check_points(workload: Workload, activations: Mapping, points: Mapping) -> None:
    """Every activation spec names one of the workload's constraint points."""
    unknown = [n for n in activations if n not in points]
    if unknown and points:
        raise WorkloadError(f"workload {workload.name!r} has no constraint point "
                            f"{show(unknown[0])}; its points are {choices(points)}")
    if unknown:
        with_points = [w.name for w in WORKLOADS.values() if w.points is not None]
        raise WorkloadError(f"workload {workload.name!r} has no constraint points, so "
                            f"activation spec {show(unknown[0])} cannot be applied; workloads with "
                            f"points: {choices(with_points)}")


def _is_free(spec) -> bool:
    """`None` or "free": leave the point to the partitioner's propagation."""
    return spec is None or (isinstance(spec, str) and spec.strip().lower() == "free")


def check_planned(tensors: list[TensorSpec], plan_: Plan, mesh: MeshSpec) -> None:
    """check_spec on every input, then every constraint point; an error says where the spec
    came from when it was not written for that tensor."""
    points = [TensorSpec(n, plan_.point_shapes[n], spec=s) for n, s in plan_.activations.items()]
    for t in [*tensors, *points]:
        is_point = t.name in plan_.activations
        try:
            check_spec(t, mesh)
        except SpecError as e:
            origin = plan_.origin.get(t.name, "spec")
            if origin == "spec":
                raise
            what = f"constraint point {t.name!r} (an activation, not an input)" if is_point \
                else f"tensor {t.name!r}"
            # Said without CLI flags: the API, the CLI and the app each have their own way.
            how = (f"an activation spec for {t.name!r}" if is_point
                   else f"a spec for tensor {t.name!r}")
            if origin == "activation":
                source, fix = "its activation spec", f"change it with {how}"
            else:
                source = f"{origin}: {plan_.rules.text()}"
                fix = f"override it with {how} or change the rule"
            raise type(e)(f"{e} [{what}: spec {format_spec(t.spec)!r} from {source}; {fix}]",
                          tensor=e.tensor, axis=e.axis, mesh=e.mesh) from None
