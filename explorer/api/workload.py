"""analyze_workload: a built-in workload placed by specs, a preset or rules, then analyzed."""

from __future__ import annotations

import functools
from collections.abc import Mapping

from explorer.api.analyze import analyze
from explorer.api.request import check_mesh, check_target, check_timeout
from explorer.errors import WorkloadError
from explorer.report.memory import with_workload
from explorer.report.report import WorkloadInfo
from explorer.spec.bounds import show
from explorer.strategy.plan import check_planned, plan
from explorer.workloads.registry import get_workload


def analyze_workload(name: str, mesh, specs: Mapping | None = None,
                     params: Mapping | None = None, *, preset: str | None = None, rules=None,
                     activations: Mapping | None = None, **kwargs):
    """Analyze a built-in workload on `mesh`.

    Args:
        name: a workload from explorer.WORKLOADS (`sharding-explorer workloads` lists them).
        mesh: text like "data=2,model=4", a mapping, or a MeshSpec.
        specs: tensor name -> spec (text, tuple or PartitionSpec); wins over preset and rules.
        params: the workload's size params, e.g. {"batch": 512}; each is checked against its
            bound before any work is done.
        preset: a strategy from explorer.PRESETS (`"zero3"`, `"megatron"`, ...): logical-axis
            rules for every tensor and constraint point, checked against the mesh axes it
            expects.
        rules: logical-axis rules, text (`"batch=data,mlp=model,opt:embed=data"`) or a mapping;
            applied after the preset's, so they win where both name a logical dimension.
        activations: constraint point -> spec, pinned in the program with
            jax.lax.with_sharding_constraint (e.g. `{"layer0": "data,None,None"}`); wins over
            rules; None or "free" leaves a point to propagation. See the workload's points
            (`sharding-explorer workloads`).
        **kwargs: passed to explorer.analyze (partitioner, axis_type, timeout, target, ...).
    """
    # Everything cheap is checked first, so that bad input never waits for a plan or a compile.
    workload = get_workload(name)
    for what, value in (("specs", specs), ("activations", activations)):
        if value is not None and not isinstance(value, Mapping):
            raise WorkloadError(f"{what} {show(value)} are not a mapping of name to spec, "
                                "e.g. {'x': 'data,None'}")
    kwargs["timeout"] = check_timeout(kwargs.get("timeout"))
    resolved = workload.resolve(params)
    mesh_spec = check_mesh(mesh, kwargs.pop("axis_type", "auto"),
                           tpu_topology=kwargs.get("tpu_topology"),
                           real_devices=kwargs.get("real_devices", False))
    check_target(kwargs.get("target"), kwargs.get("mapping"), mesh_spec)
    if workload.check is not None:
        workload.check(resolved, mesh_spec)
    layout = plan(workload, resolved, mesh_spec, specs, preset, rules, activations)
    tensors = workload.tensors(resolved, {**dict(specs or {}), **layout.specs})
    check_planned(tensors, layout, mesh_spec)
    fn = workload.build(resolved)
    if layout.constraints:
        fn = functools.partial(fn, constraints=layout.constraints)
    report = analyze(fn, *tensors, mesh=mesh_spec, **kwargs)
    if report is None:
        return None                                   # a cache_only miss
    extra = workload.info(resolved) if workload.info is not None else {}
    info = WorkloadInfo(name=name, params=resolved, preset=preset, extra=extra, **layout.info())
    return with_workload(report, info, workload)
