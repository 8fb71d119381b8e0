"""analyze_workload: a built-in workload placed by specs, a preset or rules, then analyzed: the
keyword form of `explorer.analyze(explorer.Request(workload=...))`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, overload

from explorer._src.api.analysis_request import MeshLike, Request, RulesLike, SpecLike
from explorer._src.api.analyze import run
from explorer._src.report.report import Report


@overload
def analyze_workload(name: str, mesh: MeshLike, specs: Mapping[str, SpecLike] | None = ...,
                     params: Mapping[str, Any] | None = ..., *, preset: str | None = ...,
                     rules: RulesLike | None = ...,
                     activations: Mapping[str, SpecLike | None] | None = ...,
                     cache_only: Literal[False] = ..., **kwargs: Any) -> Report: ...


@overload
def analyze_workload(name: str, mesh: MeshLike, specs: Mapping[str, SpecLike] | None = ...,
                     params: Mapping[str, Any] | None = ..., *, preset: str | None = ...,
                     rules: RulesLike | None = ...,
                     activations: Mapping[str, SpecLike | None] | None = ...,
                     cache_only: bool, **kwargs: Any) -> Report | None: ...


def analyze_workload(name: str, mesh: MeshLike, specs: Mapping[str, SpecLike] | None = None,
                     params: Mapping[str, Any] | None = None, *, preset: str | None = None,
                     rules: RulesLike | None = None,
                     activations: Mapping[str, SpecLike | None] | None = None,
                     cache_only: bool = False, **kwargs: Any) -> Report | None:
    """Analyze a built-in workload on `mesh`, its tensors placed by specs, a preset or rules.

    The workload's params are resolved and checked, its layout planned (the preset's rules,
    then `rules`, then per-tensor `specs` and per-point `activations`, each winning over the
    one before) and checked against the mesh, all before the compile; then the program is
    compiled by explorer.analyze.

    Args:
        name: a workload of explorer.WORKLOADS (``sharding-explorer workloads`` lists them).
        mesh: text like ``"data=2,model=4"``, a mapping or a MeshSpec; with an ``axis_type``
            keyword when it is not a MeshSpec.
        specs: tensor name -> spec (text, tuple or PartitionSpec); wins over preset and rules.
        params: the workload's size params, e.g. ``{"batch": 512}``, over its defaults; each
            is checked against its bound before any work is done.
        preset: a strategy of explorer.PRESETS (``"zero3"``, ``"megatron"``, ...): logical-axis
            rules for every tensor and constraint point, checked against the mesh axes it
            expects.
        rules: logical-axis rules, text (``"batch=data,mlp=model,opt:embed=data"``), a mapping
            of logical name to mesh axes, a sequence of (logical name, mesh axes) pairs as
            flax and MaxText take them (MaxText's ``config.logical_axis_rules`` as it is: a
            name may repeat, the first pair that fits wins, and a mesh axis the mesh lacks
            counts as one of size 1) or a Rules; applied after the preset's, so they win
            where both name a logical dimension.
        activations: constraint point -> spec, pinned in the program with
            jax.lax.with_sharding_constraint (e.g. ``{"layer0": "data,None,None"}``); wins over
            rules; None or ``"free"`` leaves a point to propagation. ``sharding-explorer
            workloads`` lists each workload's points.
        cache_only: answer only from the caches, never compile: None on a miss.
        **kwargs: passed on to explorer.analyze: ``partitioner``, ``axis_type``, ``timeout``,
            ``pool``, ``use_cache``, ``target``, ``mapping``, ``measure``, ``tpu_topology``,
            ``real_devices``, ``peak``, ``origins``, ``donate``, ``extrapolate``. Without
            ``donate``, a workload that returns its state (``mlp_train``,
            ``transformer_train``, ``pipeline``) donates it, as a training loop does
            (`Workload.donates`), unless its param ``donate_state`` is ``false``.

    Returns:
        The Report, its ``workload`` saying what was analysed and where each spec came from,
        and its memory split by tensor kind (params, grads, optimizer state, activations).
        None only with `cache_only`, when no cache holds the request.

    Raises:
        WorkloadError: an unknown workload or param, a param out of its bounds, or `specs` or
            `activations` that are not a mapping.
        PresetError: an unknown preset, or one that does not fit the mesh or the workload.
        RuleError: malformed rules, or rules naming an unknown logical name or mesh axis.
        ExplorerError: whatever explorer.analyze raises for the mesh, the specs, the target,
            the other keywords and the compile.

    Example:
        The Megatron MLP on 8 devices: ``w1`` (1024 x 4096) split by columns and ``w2`` by rows
        over ``model``, so each device's partial product of the second matmul is summed by one
        all-reduce over ``model`` of its (256 / 2, 1024) float32 block of the output:

        >>> import explorer
        >>> report = explorer.analyze_workload("mlp", "data=2,model=4", preset="megatron")
        >>> report.workload.specs
        {'x': 'data,None', 'w1': 'None,model', 'w2': 'model,None'}
        >>> [f"{c.kind} over {','.join(c.axes)}: {c.shape}" for c in report.collectives]
        ['all-reduce over model: (128, 1024)']
        >>> report.collectives[0].bytes          # 128 * 1024 values of 4 bytes
        524288
        >>> report.tensor("w1").shard_shape      # 4096 / 4 columns on each device
        (1024, 1024)
        >>> explorer.analyze_workload("mlp", "data=2,model=4", preset="megatron",
        ...                           cache_only=True).timing.cached
        True
    """
    run_options = {k: kwargs.pop(k) for k in ("pool", "use_cache") if k in kwargs}
    # The rest are Request fields, `extrapolate` among them, which `run` honours.
    request = Request(workload=name, mesh=mesh, specs=specs, params=params, preset=preset,
                      rules=rules, activations=activations, **kwargs)
    return run(request, cache_only=cache_only, **run_options)
