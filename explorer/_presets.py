"""Strategy presets: the parallelism schemes of the large-model literature as logical-axis rules.

A preset is a rule table (see _rules.py) plus the mesh axes it expects. Axes are named `data`,
`model`, `expert` and `stage`. A preset *requires* some axes (an error names the missing one) and
may use *optional* ones when the mesh has them (`megatron` adds data parallelism when the mesh
has a `data` axis). docs/strategies.md explains each preset, the collectives it should cost and
where the compiler differs.

`plan()` turns a preset, user rules, per-tensor specs and activation specs into the specs of
every input tensor and the constraint table of the program: per-tensor specs win over rules, and
activation specs win over rules for constraint points.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ._errors import PresetError, RuleError, SpecError, WorkloadError, choices
from ._mesh import MeshSpec
from ._rules import LOGICAL_NAMES, Rule, Rules, logical_spec, parse_rules
from ._spec import Entry, TensorSpec, check_spec, entry_axes, format_spec, normalize_spec


@dataclass(frozen=True)
class Preset:
    name: str
    title: str
    source: str                       # the paper or public doc it comes from
    rules: str                        # rule text; see _rules.py
    requires: tuple[str, ...]         # mesh axes it needs
    optional: tuple[str, ...] = ()    # mesh axes it uses when the mesh has them
    workloads: tuple[str, ...] | None = None   # the workloads it applies to; None: any
    expects: str = ""                 # the collectives the literature predicts

    def rules_for(self, mesh: MeshSpec) -> Rules:
        """The rule table on `mesh`: required axes checked, missing optional axes dropped."""
        missing = [a for a in self.requires if a not in mesh.shape]
        if missing:
            axis = missing[0]
            raise PresetError(
                f"preset {self.name!r} needs mesh axis {axis!r}, which mesh {mesh.text()!r} "
                f"lacks; it expects axes {choices(self.requires + self.optional)} (optional: "
                f"{choices(self.optional)}); name a mesh axis {axis!r}, e.g. --mesh "
                f"{_example_mesh(self)}", axis=axis, mesh=mesh)
        out = []
        for r in parse_rules(self.rules).rules:
            axes = tuple(a for a in entry_axes(r.entry) if a in mesh.shape)
            out.append(Rule(r.kind, r.name, None if not axes else
                            axes[0] if len(axes) == 1 else axes))
        return Rules(tuple(out))

    def to_dict(self) -> dict:
        return {"name": self.name, "title": self.title, "source": self.source,
                "rules": self.rules, "requires": list(self.requires),
                "optional": list(self.optional),
                "workloads": None if self.workloads is None else list(self.workloads),
                "expects": self.expects}


def _example_mesh(p: Preset) -> str:
    sizes = {1: (8,), 2: (2, 4), 3: (2, 2, 2)}[min(3, max(1, len(p.requires)))]
    return ",".join(f"{a}={s}" for a, s in zip(p.requires, sizes, strict=False))


_ZERO = "Rajbhandari et al. 2020, ZeRO (arXiv:1910.02054) §5; DeepSpeed ZeRO docs"
_MEGATRON = "Shoeybi et al. 2019, Megatron-LM (arXiv:1909.08053) §3"

PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("dp", "data parallel", "Sergeev & Del Balso 2018, Horovod (arXiv:1802.05799): ring "
           "all-reduce of the gradients", "batch=data", ("data",),
           expects="all-reduce of every gradient over data: V = params bytes"),
    Preset("zero1", "ZeRO stage 1: optimizer state sharded", _ZERO,
           "batch=data,opt:embed=data", ("data",),
           expects="gradients reduced over data, the updated params all-gathered over data"),
    Preset("zero2", "ZeRO stage 2: optimizer state and gradients sharded", _ZERO,
           "batch=data,opt:embed=data,grad:embed=data", ("data",),
           expects="gradients reduce-scattered over data, updated params all-gathered"),
    Preset("zero3", "ZeRO stage 3: params, gradients and optimizer state sharded", _ZERO,
           "batch=data,param:embed=data,grad:embed=data,opt:embed=data", ("data",),
           expects="params all-gathered over data before use (forward and backward), "
                   "gradients reduce-scattered"),
    Preset("fsdp", "fully sharded data parallel (= ZeRO-3)",
           "Zhao et al. 2023, PyTorch FSDP (arXiv:2304.11277); Xu et al. 2020 "
           "(arXiv:2004.13336), weight-update sharding",
           "batch=data,param:embed=data,grad:embed=data,opt:embed=data", ("data",),
           expects="as zero3"),
    Preset("megatron", "Megatron-LM tensor parallelism", _MEGATRON,
           "batch=data,heads=model,mlp=model,vocab=model", ("model",), ("data",),
           expects="one all-reduce over model after each attention and each MLP in the "
                   "forward pass: V = batch·seq·embed bytes"),
    Preset("megatron_sp", "Megatron tensor + sequence parallelism",
           "Korthikanti et al. 2022, Reducing Activation Recomputation in Large Transformer "
           "Models (arXiv:2205.05198) §4.2.2",
           "batch=data,heads=model,mlp=model,vocab=model,act:seq=model,input:seq=model",
           ("model",), ("data",),
           expects="each all-reduce becomes a reduce-scatter over model after the block and "
                   "an all-gather over model before the next"),
    Preset("2d", "GSPMD 2-D sharding: weights over data×model, activations batch×embed",
           "Xu et al. 2021, GSPMD (arXiv:2105.04663), 2D sharding of the Transformer; as "
           "google/praxis LanguageModel.set_sharding_params_v1 writes it",
           "batch=data,heads=model,mlp=model,vocab=model,param:embed=data,grad:embed=data,"
           "opt:embed=data,act:embed=model,input:embed=model", ("data", "model"),
           expects="weights all-gathered over data; activations all-gathered / "
                   "reduce-scattered over model around each matmul"),
    Preset("fsdp_tp", "FSDP over data + tensor parallelism over model",
           "MaxText configs/base.yml logical_axis_rules (embed→fsdp, mlp/heads→tensor); "
           "PyTorch FSDP + tensor parallel (2-D) recipe",
           "batch=data,heads=model,mlp=model,vocab=model,param:embed=data,grad:embed=data,"
           "opt:embed=data", ("data", "model"),
           expects="params all-gathered over data; one all-reduce over model per attention "
                   "and per MLP"),
    Preset("ep", "expert parallelism",
           "Lepikhin et al. 2020, GShard (arXiv:2006.16668); Fedus et al. 2021, Switch "
           "Transformer (arXiv:2101.03961)",
           "experts=expert,batch=expert", ("expert",),
           expects="an all-to-all over expert to dispatch tokens to their experts and one "
                   "to bring them back: V = experts·batch·capacity·embed bytes / |expert|"),
    Preset("pp", "pipeline parallelism over stages",
           "Huang et al. 2019, GPipe (arXiv:1811.06965); Narayanan et al. 2021, PipeDream-"
           "Flush / 1F1B (arXiv:2104.04473)",
           "stage=stage,layers=stage,batch=data", ("stage",), ("data",),
           workloads=("pipeline",),
           expects="collective-permutes over stage carrying activations between stages"),
)}


def get_preset(name: str) -> Preset:
    if not isinstance(name, str) or name not in PRESETS:
        raise PresetError(f"preset {name!r} is unknown; choose one of {choices(PRESETS)}")
    return PRESETS[name]


@dataclass(frozen=True)
class Plan:
    """What a preset, rules and specs resolve to for one workload on one mesh."""

    specs: dict[str, tuple[Entry, ...]]            # input tensor -> spec, where not replicated
    origin: dict[str, str]                         # input tensor -> where its spec came from
    constraints: tuple[tuple[str, tuple[Entry, ...]], ...]   # the program's constraint table
    activations: dict[str, tuple[Entry, ...]] = field(default_factory=dict)  # point -> spec
    point_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    rules: Rules = field(default_factory=Rules)

    def info(self) -> dict:
        return {"rules": self.rules.text(),
                "specs": {n: format_spec(s) for n, s in self.specs.items()},
                "activations": {n: format_spec(s) for n, s in self.activations.items()},
                "origin": dict(self.origin)}


def plan(workload, params: dict, mesh: MeshSpec, specs: Mapping | None = None,
         preset: str | None = None, rules=None, activations: Mapping | None = None) -> Plan:
    """Resolve a request's layout: rules (preset, then user rules) for every tensor and point
    with logical dims; per-tensor `specs` and per-point `activations` override them. An
    activation spec of None or "free" leaves that point unconstrained."""
    specs = dict(specs or {})
    activations = dict(activations or {})
    logical = workload.logical(params) if workload.logical is not None else {}
    kinds = workload.kinds(params) if getattr(workload, "kinds", None) is not None else {}
    points = workload.points(params) if getattr(workload, "points", None) is not None else {}
    shapes = workload.shapes(params)

    known = tuple(dict.fromkeys(LOGICAL_NAMES + tuple(
        d for dims in [*logical.values(), *(p.dims for p in points.values())]
        for d in dims if d is not None)))
    table = Rules()
    origin_of_rules = "rule"
    if preset is not None:
        p = get_preset(preset)
        if p.workloads is not None and workload.name not in p.workloads:
            from ._workloads import WORKLOADS

            missing = [w for w in p.workloads if w not in WORKLOADS]
            if missing:
                raise PresetError(
                    f"preset {p.name!r} needs workload {missing[0]!r}, which is not available "
                    f"in this installation; built-in workloads: {choices(WORKLOADS)}")
            raise PresetError(f"preset {p.name!r} applies only to workload(s) "
                              f"{choices(p.workloads)}, not {workload.name!r}; use "
                              f"--workload {p.workloads[0]}")
        table = p.rules_for(mesh)
        origin_of_rules = f"preset {p.name!r}"
    user_rules = parse_rules(rules, known)
    user_rules.check_mesh(mesh)
    table = table + user_rules
    if rules is not None:
        origin_of_rules += " + rules" if preset is not None else ""
    if table.rules and not logical:
        raise RuleError(f"workload {workload.name!r} declares no logical dimension names, so "
                        "presets and rules cannot place its tensors; give a spec per tensor "
                        "instead (--spec NAME=...)")

    unknown = [n for n in activations if n not in points]
    if unknown and points:
        raise WorkloadError(f"workload {workload.name!r} has no constraint point "
                            f"{unknown[0]!r}; its points are {choices(points)}")
    if unknown:
        from ._workloads import WORKLOADS

        with_points = [w.name for w in WORKLOADS.values() if getattr(w, "points", None)]
        raise WorkloadError(f"workload {workload.name!r} has no constraint points, so "
                            f"activation spec {unknown[0]!r} cannot be applied; workloads with "
                            f"points: {choices(with_points)}")

    out_specs: dict[str, tuple[Entry, ...]] = {}
    origin: dict[str, str] = {}         # tensor or point -> "spec", "activation" or the rules'
    point_shapes: dict[str, tuple[int, ...]] = {}
    tables: dict[str, dict] = {}

    def by_rules(dims, kind):
        if kind not in tables:
            tables[kind] = table.table(kind)
        return logical_spec(dims, tables[kind])

    if table.rules:
        for name, dims in logical.items():
            spec = by_rules(tuple(dims), kinds.get(name, "param"))
            if any(entry_axes(e) for e in spec):
                out_specs[name], origin[name] = spec, origin_of_rules
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
    if getattr(workload, "returns_state", False):
        # State comes out in the layout it went in: replicated unless a spec or rule split it.
        for name in shapes:
            if kinds.get(name, "param") in ("param", "opt"):
                constraints[name] = out_specs.get(name, ())
    return Plan(out_specs, origin, tuple(constraints.items()), point_specs, point_shapes, table)


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
            how = (f"--activation {t.name}=..." if is_point else f"--spec {t.name}=...")
            if origin == "activation":
                source, fix = "its activation spec", f"change it with {how}"
            else:
                source = f"{origin}: {plan_.rules.text()}"
                fix = f"override it with {how} or change the rule"
            raise type(e)(f"{e} [{what}: spec {format_spec(t.spec)!r} from {source}; {fix}]",
                          tensor=e.tensor, axis=e.axis, mesh=e.mesh) from None
