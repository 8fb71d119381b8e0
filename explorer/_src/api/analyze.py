"""explorer.analyze: validate a request, answer it from the cache or a compile worker."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, MutableMapping, Sequence
from dataclasses import asdict, replace
from typing import Any, Literal, overload

from explorer._src.api import diskcache
from explorer._src.api.analysis_request import (
    AxisTypeName,
    CompileForName,
    MappingLike,
    MeshLike,
    PartitionerName,
    Request,
    SpecLike,
    SpecPatterns,
    frozen_key,
)
from explorer._src.api.extrapolate import run_extrapolated
from explorer._src.api.patterns import unmatched_note
from explorer._src.api.request import ExtrapolateLike, check_flag
from explorer._src.api.targeting import cpu_refusal, target_of_devices
from explorer._src.compile.lowering import forget_lowered
from explorer._src.compile.pool import WorkerPool, default_pool
from explorer._src.compile.protocol import Backend, CompileRequest
from explorer._src.errors import CompileError, InputError
from explorer._src.lru import Lru
from explorer._src.report.build import build_report
from explorer._src.report.report import Report
from explorer._src.report.value_types import with_value_types

__all__ = ["CACHE_SIZE", "MappingLike", "MeshLike", "Request", "SpecLike", "SpecPatterns",
           "analyze", "clear_cache", "run"]

# The Reports each cache keeps: enough for an app session's undo, redo and revisits (older
# ones come back from the disk cache); more would hold a long session's memory up for nothing.
CACHE_SIZE = 32
# The bytes of program text (StableHLO, propagated and optimized HLO, the HloProto) each Report
# cache holds at most: a long session of large programs (a 32-layer model's texts run to tens
# of MB) would otherwise keep 128 of them, past what a 2 GB Binder pod has for its kernel.
CACHE_TEXT_BYTES = 128 * 2 ** 20


def _text_bytes(report: Report) -> int:
    return (len(report.stablehlo) + len(report.propagated_hlo) + len(report.optimized_hlo)
            + len(report.hlo_proto))


_cache: Lru[str, Report] = Lru(CACHE_SIZE, weigh=_text_bytes, budget=CACHE_TEXT_BYTES)


@overload
def analyze(fn: Callable[..., Any] | Request, *args: Any, mesh: MeshLike | None = ...,
            partitioner: PartitionerName = ..., axis_type: AxisTypeName = ...,
            timeout: float | None = ..., pool: WorkerPool | None = ...,
            use_cache: bool = ..., cache_only: Literal[False] = ..., target: str | None = ...,
            mapping: MappingLike | None = ..., measure: bool = ...,
            tpu_topology: str | None = ..., real_devices: bool = ...,
            specs: SpecPatterns | None = ..., peak: bool = ...,
            compile_for: CompileForName = ..., origins: bool = ...,
            donate: str | Sequence[str] | None = ..., out_specs: Any = ...,
            extrapolate: ExtrapolateLike | None = ...) -> Report: ...


@overload
def analyze(fn: Callable[..., Any] | Request, *args: Any, mesh: MeshLike | None = ...,
            partitioner: PartitionerName = ..., axis_type: AxisTypeName = ...,
            timeout: float | None = ..., pool: WorkerPool | None = ...,
            use_cache: bool = ..., cache_only: bool, target: str | None = ...,
            mapping: MappingLike | None = ..., measure: bool = ...,
            tpu_topology: str | None = ..., real_devices: bool = ...,
            specs: SpecPatterns | None = ..., peak: bool = ...,
            compile_for: CompileForName = ..., origins: bool = ...,
            donate: str | Sequence[str] | None = ..., out_specs: Any = ...,
            extrapolate: ExtrapolateLike | None = ...) -> Report | None: ...


def analyze(fn: Callable[..., Any] | Request, *args: Any, mesh: MeshLike | None = None,
            partitioner: PartitionerName = "shardy",
            axis_type: AxisTypeName = "auto", timeout: float | None = None,
            pool: WorkerPool | None = None, use_cache: bool = True, cache_only: bool = False,
            target: str | None = None, mapping: MappingLike | None = None,
            measure: bool = False, tpu_topology: str | None = None,
            real_devices: bool = False, specs: SpecPatterns | None = None,
            peak: bool = False, compile_for: CompileForName = "target",
            origins: bool = False, donate: str | Sequence[str] | None = None,
            out_specs: Any = None, extrapolate: ExtrapolateLike | None = None
            ) -> Report | None:
    """Compile `fn` on abstract inputs sharded over `mesh` and report what the partitioner did.

    Nothing is allocated: `fn` is traced on abstract arrays of the inputs' shapes, then lowered
    and compiled in a worker process, so any size can be analysed. With a GPU or TPU `target`
    the program is compiled for that hardware by its own compiler, with no device present
    (XLA's GPU compiler with the ``gpu`` extra, libtpu with the ``tpu`` extra); otherwise, or
    where that compiler is not installed, on fake CPU devices, one per mesh device, and the
    Report's ``approximation`` says why. Every argument is checked before any work is done.

    Args:
        fn: the function to compile, called as ``fn(*args)``. It is traced and lowered here,
            in this process and under the caller's contexts (flax's logical axis rules, a mesh
            context, the matmul precision); only the lowered
            module goes to the worker, which compiles it. Leaves of `args` that are not arrays
            are held fixed, as a closure would hold them.
        *args: each an explorer.TensorSpec, an array-like (a jax.ShapeDtypeStruct, a jax or
            numpy array: anything with ``.shape`` and ``.dtype``) or a pytree of them (dicts,
            lists, tuples, namedtuples, Equinox modules, optax states, any registered pytree);
            HLO parameter *i* is the *i*-th leaf in jax's flattening order. An array-like leaf
            is named by its key path inside its argument, dotted (``layers.0.w1``; a whole
            argument by the function's parameter name, and every such name prefixed by its
            argument's where two would clash), and keeps the PartitionSpec of a NamedSharding
            it carries.
        mesh: text like ``"data=2,model=4"`` (an axis may name its own type:
            ``"data=2:explicit,model=4"``), a mapping ``{"data": 2, "model": 4}``, a MeshSpec,
            or a ``jax.sharding.Mesh``, which keeps its axis types and is in force while `fn`
            is traced (``jax.set_mesh`` and the legacy ``with mesh:``). None (omitted): the
            mesh the inputs' NamedShardings name, or the caller's ``jax.set_mesh`` (or ``with
            mesh:``), with its own axis types, as ``jax.jit(fn).lower(*args)`` takes it; an
            InputError where none names one or two differ. Devices are numbered row-major over
            it; fake CPU devices allow at most 2048.
        partitioner: ``"shardy"`` or ``"gspmd"`` (explorer.PARTITIONERS).
        axis_type: the type of the axes whose text names none: ``"auto"`` lets the
            partitioner propagate shardings; ``"explicit"`` makes jax's sharding-in-types check
            every op; ``"manual"``; or a tuple of one per axis (jax's ``AxisType.Explicit``
            and the like are read by their names). A MeshSpec or jax `mesh`, or one taken from
            the inputs, keeps its own.
        timeout: seconds the compile may take (more than 0, at most a day); None for the
            pool's default (120 s for the default pool).
        pool: the WorkerPool that compiles; None for this process's shared one.
        use_cache: answer an equal request from this process's cache (the last 32 Reports)
            or, for a plain compile (no `measure`, no `real_devices`), from the cache on disk
            that all processes share (``EXPLORER_DISK_CACHE=0`` turns that one off); store the
            answer in them. False skips both.
        cache_only: answer only from the caches, never compile: None on a miss. The app shows a
            cached result this way at once, before its debounce.
        target: a hardware target name (see explorer.targets(), e.g. ``"h100-8"``) with as
            many devices as the mesh: the program is compiled for it (see `compile_for`), each
            collective gets ``est_seconds``, the Report an ``estimate`` and a ``trace``.
        mapping: where the mesh axes lie on the target's physical axes: text like
            ``"data=node,model=gpu"``, a mapping of mesh axis to physical axes (``"gpu"``,
            ``"node:2"``, ``("node", 2)`` or a list of those), an AxisMapping, or None for the
            default (the last mesh axes on the fastest links). Only with a `target`.
        measure: also run the compiled program on random inputs and time it
            (``Report.timing.measured_s``). On fake CPU devices that times this CPU, not a
            target; inputs over 1 GiB per device are not run.
        tpu_topology: compile ahead of time for this TPU slice instead (e.g. ``"v5e:4x4"``,
            with as many chips as the mesh has devices); needs libtpu (the ``tpu`` extra) but
            no TPU. The Report then carries the TPU compiler's HLO and estimates.
        real_devices: compile on this machine's own devices (GPUs or TPUs where there are
            some) instead of fake CPU ones; the mesh must have exactly as many, and `measure`
            then times the real hardware. Not with `tpu_topology`.
        specs: partition rules as MaxText, t5x and model zoos write them: a mapping of
            regular expression to spec (text, tuple or PartitionSpec), e.g.
            ``{r"up.*kernel": "None,model"}``, or a sequence of such pairs, e.g.
            ``[(r"layers/[0-9]+/mlp/.*kernel", P(None, "model")), (".*", P())]``. A pattern is
            searched (re.search) in each input's name joined with '.' and with '/'; the first
            that finds it gives the input its spec, except that a spec given with the input
            itself (one that splits a dimension) wins. A pattern that finds no input is named
            in the Report's notes.
        peak: with a `target`, predict at the vendors' nominal peak rates instead of the rates
            measured runs reach (each chip's and link's published fraction of its peak, named
            in the estimate's notes).
        compile_for: ``"target"`` (the default) compiles for a GPU or TPU `target`'s own
            hardware where its compiler is installed; ``"cpu"`` always compiles on fake CPU
            devices and prices that program on the target (an approximation: the CPU backend
            upcasts bf16 around collectives, writes a reduce-scatter as an all-reduce and a
            slice, and runs no collective asynchronously).
        origins: also read why each tensor is laid out as it is (`TensorInfo.origins`: where
            each mesh axis came from and the ops it went through) and name the two origins a
            reshard's why moves between. Shardy only; it costs about a tenth more of an
            analysis (Shardy's record of its propagation is dumped and read), so it is off
            unless asked.
        donate: the inputs the program may overwrite, as a training loop donates its params
            and optimizer state (jax.jit's ``donate_argnums``): a regular expression or a list
            of them, each found in input names as `specs` keys are (``"^params[.]"``,
            ``["w1", "w2"]``). The compiler then writes each output into a donated input's
            buffer of the same shape, dtype and layout, and the memory analysis counts that
            buffer once (``Memory.aliased``); a donated input no output could take is named in
            the notes. A pattern that names no input is refused.
        out_specs: the layout the outputs must end in, as jax.jit's ``out_shardings`` (a
            training step pinning its new state to the old state's layout): a pytree prefix
            of ``fn``'s output whose leaves are spec text, a PartitionSpec or a NamedSharding,
            None leaving that part to the partitioner (the default for the whole output).
        extrapolate: for a built-in workload's stack of identical layers (a ``layers``
            param), compile it at two small layer counts and carry the collectives' runs and
            bytes, the memory, the cost and the predicted times on linearly to its own count
            (``Report.extrapolated`` says so, with the method's measured error): ``True``;
            ``"auto"`` only where the full compile's time, estimated the same way, would pass
            `timeout`; the two counts as ``(3, 5)``, ``"3,5"`` or ``"auto:3,5"`` (default 3
            and 4). The Request's field ``extrapolate``, which this sets (with a Request:
            over its own; None keeps the Request's). A measured run (`measure`) is not
            extrapolated: ``"auto"`` then compiles in full, and the others are refused. With
            `cache_only`, the extrapolation of the two small compiles the caches hold, None
            where they do not hold both.

    Returns:
        The Report; from a cache, with ``timing.cached`` True. None only with `cache_only`,
        when no cache holds the request.

    Raises:
        MeshError: a malformed mesh, one over the device limit, or a `tpu_topology` with
            another chip count.
        SpecError: an input's spec does not fit the mesh or the tensor (UnknownAxisError,
            DuplicateAxisError, RankError, DivisibilityError), or a `specs` key is not a
            regular expression.
        TensorError: an argument leaf is neither a TensorSpec nor array-like, two inputs
            share a name, the inputs pass the count or size bounds, or a `donate` pattern is
            not a regular expression or names no input.
        TargetError: an unknown `target`; MappingError (a TargetError) when the mesh or the
            `mapping` does not fit it.
        ExplorerError: any other bad argument (`fn` not callable,
            `partitioner`, `timeout`, a flag that is not True or False, a `mapping` without a
            `target`, `tpu_topology` with `real_devices` or without libtpu).
        CompileError: jax or XLA rejected the program, or `fn` raised while it was traced
            here; the message is theirs.
        WorkerError: the worker crashed, was killed or ran past `timeout`.

    Example:
        A matmul whose contracting dimension is split over ``model`` leaves each device a
        partial sum of its (256 / 2, 512) block of the result, which one all-reduce over
        ``model`` adds up (groups of the 4 devices that share a ``data`` coordinate):

        >>> import explorer
        >>> def layer(x, w):
        ...     return x @ w
        >>> report = explorer.analyze(
        ...     layer,
        ...     explorer.TensorSpec("x", (256, 1024), "float32", "data,model"),
        ...     explorer.TensorSpec("w", (1024, 512), "float32", "model,None"),
        ...     mesh="data=2,model=4")
        >>> [f"{c.kind} over {','.join(c.axes)}" for c in report.collectives]
        ['all-reduce over model']
        >>> ar = report.collectives[0]
        >>> ar.shape, ar.bytes, ar.groups          # 128 * 512 float32 values per device
        ((128, 512), 262144, ((0, 1, 2, 3), (4, 5, 6, 7)))
        >>> report.tensor("w").shard_shape         # 1024 / 4 rows of w on each device
        (256, 512)

        Asked again, the same request is answered from the cache:

        >>> again = explorer.analyze(
        ...     layer,
        ...     explorer.TensorSpec("x", (256, 1024), "float32", "data,model"),
        ...     explorer.TensorSpec("w", (1024, 512), "float32", "model,None"),
        ...     mesh="data=2,model=4", cache_only=True)
        >>> again.timing.cached
        True
    """
    if isinstance(fn, Request):
        _only_run_options(args, mesh, partitioner, axis_type, timeout, target, mapping, measure,
                          tpu_topology, real_devices, specs, peak, compile_for, origins,
                          donate, out_specs)
        request = fn if extrapolate is None else replace(fn, extrapolate=extrapolate)
    else:
        request = Request(fn=fn, inputs=args, mesh=mesh, partitioner=partitioner,
                          axis_type=axis_type, timeout=timeout, target=target, mapping=mapping,
                          measure=measure, tpu_topology=tpu_topology, real_devices=real_devices,
                          specs=specs, peak=peak, compile_for=compile_for, origins=origins,
                          donate=donate, out_specs=out_specs, extrapolate=extrapolate)
    return run(request, pool=pool, use_cache=use_cache, cache_only=cache_only)


def _only_run_options(args, mesh, *options) -> None:
    """With a Request, analyze takes only how to run it (pool, use_cache, cache_only): the
    request carries everything else, and a second value for a field would be ignored."""
    defaults = ("shardy", "auto", None, None, None, False, None, False, None, False,
                "target", False, None, None)
    if args or mesh is not None or any(
            o is not d and o != d for o, d in zip(options, defaults, strict=True)):
        raise InputError("analyze(request) takes only pool=, use_cache= and cache_only=; the "
                         "Request holds the rest (use dataclasses.replace(request, ...) to "
                         "change a field)")


def run(request: Request, *, pool: WorkerPool | None = None, use_cache: bool = True,
        cache_only: bool = False, spent: MutableMapping[str, float] | None = None
        ) -> Report | None:
    """The Report of a Request, from a cache or a compile worker: the request planned
    (`Request.plan()`, once per Request), and lowered only where no cache holds its Report.
    None only with `cache_only`, on a miss.

    `spent`, when given, gets the seconds this call spent reading the compiler's output into a
    Report (``"read"``) and pricing it on the target (``"price"``), beside the worker start,
    lowering and compile the Report's timing holds.

    A request with `extrapolate` set is answered from its two small compiles (or the full one,
    where the option says so: explorer/_src/api/extrapolate.py), each run here as the plain
    request it is: its own cache key, never the full program's, and with `cache_only` None
    where a cache does not hold each one it needs."""
    use_cache = check_flag(use_cache, "use_cache")
    cache_only = check_flag(cache_only, "cache_only")
    if request.extrapolate:
        return _extrapolated(request, pool, use_cache, cache_only, spent)
    request.plan()          # what needs the inputs placed is refused before any cache is read
    t0 = time.perf_counter()
    found = _compiled(request, pool, use_cache, cache_only, spent)
    if found is None:
        return None                                   # a cache_only miss
    compiled, cached = found
    report = _finished(request, compiled, spent)
    if cached:          # the one copy a cache hit makes: its timing says where it came from
        report = report.with_timing(replace(report.timing, cached=True,
                                            lookup_s=time.perf_counter() - t0))
    return report


class _Missed(Exception):
    """A cache-only lookup of an extrapolated request missed one of the compiles it needs."""


def _extrapolated(request: Request, pool, use_cache: bool, cache_only: bool, spent
                  ) -> Report | None:
    """`run` of a request with `extrapolate` set: each compile it needs `run` as a plain
    request (found by one asked for without the option), the extrapolation made of them."""
    def answer(plain: Request) -> Report:
        report = run(plain, pool=pool, use_cache=use_cache, cache_only=cache_only, spent=spent)
        if report is None:
            raise _Missed
        return report

    try:
        return run_extrapolated(request, answer)
    except _Missed:
        return None


# The Reports as `run` returns them (priced on the target, the workload's description added),
# by the compiled Report they were made from and what the finishing read: a cache hit of an
# unchanged or re-timed request (an app's edit undone, a what-if asked again) is not priced
# again. Each entry holds the compiled Report it was made from, so that a compile that
# replaced it in the cache is never answered with the old one's finish.
_finishes: Lru[Hashable, tuple[Report, Report]] = Lru(
    CACHE_SIZE, weigh=lambda pair: _text_bytes(pair[0]), budget=CACHE_TEXT_BYTES)


def _finished(request: Request, compiled: Report, spent) -> Report:
    """`compiled` as `run` returns it: the spec patterns that found no input named, priced
    on the target (where there is one), the workload's description added."""
    p = request.plan()
    target = request.target or _target_it_ran_on(request, compiled)
    info = p.workload_info(request.workload, request.preset)
    # A user's function's memory is split by what its inputs' names say: part of the key, as
    # the names are not all in the program's (a pytree argument's leaves are named inside it).
    named = _kinds_by_name(request.fn, p.inputs) if info is None and request.fn is not None \
        else None
    key = frozen_key((p.key, p.idle_patterns, target, p.mapping, bool(request.peak),
                   p.compile_plan.approximate, None if info is None else asdict(info), named))
    known = _finishes.get(key) if key is not None else None
    if known is not None and known[0] is compiled:
        return known[1]
    report = compiled
    if p.idle_patterns:
        report = replace(report, notes=(*report.notes, unmatched_note(list(p.idle_patterns),
                                                                      p.names)))
    if target is not None:
        from explorer._src.report.predict import with_target

        t0 = time.perf_counter()
        report = replace(report, approximation=p.compile_plan.approximate)
        report = with_target(report, target, request.mapping, peak=request.peak)
        if target is not request.target:
            measured = report.timing.measured_s is not None
            report = replace(report, notes=(*report.notes, f"predicted for {target}, the "
                                            "devices it was " + (
                                                "measured on, to set the two side by side"
                                                if measured else "compiled for")))
        if spent is not None:
            spent["price"] = time.perf_counter() - t0
    if info is not None:
        from explorer._src.report.memory import with_workload

        report = with_workload(report, info, p.workload)
    elif named:
        from explorer._src.report.memory import with_kinds

        report = with_kinds(report, named, None)      # where its gradients are is unknown
    if key is not None:
        _finishes.put(key, (compiled, report))
    return report


def _kinds_by_name(fn: Callable[..., Any], inputs: tuple) -> dict | None:
    """What a user's function's inputs are, where their names or arguments say it
    (`kinds_by_name`: leaves of `model`/`params` are parameters, of `optimizer`/`opt_state`
    optimizer state); None where no name says anything (its memory then stays unsplit).

    The one split of a user's function's memory: the app's Memory tab shows it as made here
    (explorer._src.ui.sources.FunctionSource.describe splits again only with what a source
    knows beyond the names, a Flax module's own kinds)."""
    from explorer._src.api.pytrees import tensor_leaves
    from explorer._src.compile.lowering import argument_names
    from explorer._src.report.memory import kinds_by_name

    return kinds_by_name({t.name: argument
                          for argument, arg in zip(argument_names(fn, len(inputs)), inputs,
                                                   strict=True)
                          for t in tensor_leaves(arg)})


def _target_it_ran_on(request: Request, report: Report) -> str | None:
    """For a compile for this machine's own accelerators with no target asked for: the
    catalog target those devices are, so that the program is priced for the chips its
    compiler compiled it for, and a measurement, where one was made, meets the prediction."""
    if request.planned.compile_plan.worker.backend is not Backend.REAL:
        return None
    return target_of_devices(report.device_kind, request.planned.mesh.device_count)


def _compiled(request: Request, pool, use_cache: bool, cache_only: bool, spent
              ) -> tuple[Report, bool] | None:
    """The compiled Report, as the caches hold it, and whether a cache held it; None for a
    cache_only miss."""
    p = request.plan()
    measure = bool(request.measure)
    real_devices = p.compile_plan.worker.backend is Backend.REAL
    # Reports of plain compiles persist on disk (explorer/_src/api/diskcache.py); measured runs and
    # real devices depend on this machine at this moment, so they stay in memory only.
    disk = diskcache.default_cache() if use_cache and not measure and not real_devices else None
    if use_cache:
        hit = _cache.get(p.key)
        if hit is None and disk is not None:
            hit = disk.get(p.key)
            if hit is not None:
                _remember(p.key, hit)
        if hit is not None:
            return hit, True
    if cache_only:
        return None
    plan = p.compile_plan
    message = CompileRequest(program=p.lowered, args=p.leaves, mesh=p.mesh,
                             partitioner=p.partitioner, measure=measure,
                             tpu_topology=plan.tpu_topology, gpu=plan.gpu,
                             origins=bool(request.origins), donate=p.donated,
                             slices_per_axis=plan.slices_per_axis)
    # TPU and GPU compiles need no local devices: one shared worker of each serves them all.
    try:
        result = (pool or default_pool()).compile(plan.worker, message, p.timeout)
    except CompileError as e:
        on_cpu = plan.worker.backend is Backend.FAKE_CPU
        instead = cpu_refusal(str(e), p.mesh) if on_cpu else None
        if instead is None:
            raise
        raise CompileError(instead) from None
    t0 = time.perf_counter()
    report = build_report(result, p.mesh, p.partitioner, {t.name: t.spec for t in p.leaves})
    report = with_value_types(
        report, dict(zip((t.name for t in p.leaves), p.lowered.input_types, strict=False)),
        {o.name: o.spec for o in p.lowered.outputs})
    if p.donated:
        report = replace(report, donated=tuple(p.leaves[i].name for i in p.donated))
    if spent is not None:
        spent["read"] = time.perf_counter() - t0
    # Under every key it is known by (a workload's identity, its lowered text): a request for
    # it made before or after this process imported jax finds it.
    for key in p.keys:
        if use_cache:
            _remember(key, report)
        if disk is not None:
            disk.put(key, report)
    return report, False


def _remember(key: str, report: Report) -> None:
    _cache.put(key, report)


def clear_cache() -> None:
    """Forget the Reports held in this process, and the functions' lowered programs kept for
    an unchanged request. The persistent cache on disk is kept (it is shared with other
    processes): removing its folder ($EXPLORER_CACHE_DIR, else ~/.cache/sharding-explorer)
    empties it, and EXPLORER_DISK_CACHE=0 turns it off."""
    _cache.clear()
    _finishes.clear()
    forget_lowered()
