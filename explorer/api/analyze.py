"""explorer.analyze: validate a request, answer it from the cache or a compile worker."""

from __future__ import annotations

import hashlib
import pickle
import re
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import replace

from explorer.api import diskcache
from explorer.api.request import (
    check_flag,
    check_function,
    check_inputs,
    check_mesh,
    check_partitioner,
    check_target,
    check_timeout,
)
from explorer.compile.pool import default_pool
from explorer.compile.protocol import CompileRequest, WorkerKey
from explorer.compile.sources import pickle_function
from explorer.errors import RankError, SpecError, TensorError, choices
from explorer.report.build import build_report
from explorer.report.report import Report
from explorer.spec.bounds import MAX_PYTREE_DEPTH, MAX_TENSORS, power_text, show
from explorer.spec.tensor import Entry, TensorSpec, format_spec, normalize_spec

CACHE_SIZE = 128

_cache: OrderedDict[str, Report] = OrderedDict()
_cache_lock = threading.Lock()


def tensor_leaves(tree) -> list[TensorSpec]:
    """The TensorSpecs of a pytree of them, in jax's flattening order.

    Checked on the way, before anything is sent to a worker: every leaf a TensorSpec, dict keys
    that jax can sort, at most MAX_PYTREE_DEPTH levels and MAX_TENSORS leaves."""
    out: list[TensorSpec] = []
    _collect(tree, out, 0)
    _check_count(out)
    return out


def _check_count(out: list[TensorSpec]) -> None:
    if len(out) > MAX_TENSORS:
        raise TensorError(f"more than {power_text(MAX_TENSORS)} input tensors; the limit is "
                          f"{power_text(MAX_TENSORS)}")


def _collect(tree, out: list[TensorSpec], depth: int) -> None:
    if depth > MAX_PYTREE_DEPTH:
        raise TensorError(f"the inputs are nested more than {MAX_PYTREE_DEPTH} levels deep; "
                          "pass a flatter pytree of TensorSpecs")
    _check_count(out)       # on the way too, so that a huge tree stops early
    if isinstance(tree, TensorSpec):
        out.append(tree)
    elif type(tree) is dict:
        try:
            keys = sorted(tree)            # jax flattens a dict in sorted key order
        except TypeError:
            kinds = sorted({type(k).__name__ for k in tree})
            raise TensorError(f"a dict of inputs has keys of types {choices(kinds)} "
                              f"({show(list(tree))}), which cannot be sorted, and jax "
                              "flattens a dict in sorted key order; use keys of one type, "
                              "e.g. all str") from None
        for k in keys:
            _collect(tree[k], out, depth + 1)
    elif isinstance(tree, list | tuple) and not hasattr(tree, "_fields"):
        for item in tree:
            _collect(item, out, depth + 1)
    elif tree is None:
        return
    else:
        _collect_other(tree, out)


def _collect_other(tree, out: list[TensorSpec]) -> None:
    """Other pytrees (namedtuples, flax state, ...): ask jax how they flatten."""
    import jax

    try:
        leaves = jax.tree.leaves(tree, is_leaf=lambda x: isinstance(x, TensorSpec))
    except (TypeError, ValueError, RecursionError) as e:
        raise TensorError(f"the inputs {show(tree)} cannot be flattened as a pytree ({e}); "
                          "describe each input as TensorSpec(name, shape, dtype, spec)") from None
    bad = [x for x in leaves if not isinstance(x, TensorSpec)]
    if bad:
        raise TensorError(f"argument leaf {show(bad[0])} is not an explorer.TensorSpec; "
                          "describe each input as TensorSpec(name, shape, dtype, spec)")
    out.extend(leaves)


# --------------------------------------------------------------------------- regex specs


def spec_patterns(specs) -> list[tuple[str, re.Pattern, tuple[Entry, ...]]]:
    """`specs` (regular expression -> spec, as MaxText and t5x write partition rules) checked
    and compiled, in the order given: (pattern text, compiled pattern, spec entries)."""
    if not isinstance(specs, Mapping):
        raise SpecError(f"specs={show(specs)} is not a mapping of regular expression to spec, "
                        "e.g. {r'up.*kernel': 'None,model'}")
    out = []
    for pattern, spec in specs.items():
        if not isinstance(pattern, str):
            raise SpecError(f"spec pattern {show(pattern)} is not text; the keys of specs= are "
                            "regular expressions matched against tensor names")
        try:
            compiled = re.compile(pattern)
        except re.error as e:
            raise SpecError(f"spec pattern {pattern!r} is not a regular expression ({e})"
                            ) from None
        try:
            entries = normalize_spec(spec, tensor=pattern)
        except SpecError as e:
            raise SpecError(f"the spec of pattern {pattern!r}: {e}") from None
        out.append((pattern, compiled, entries))
    return out


def match_spec_patterns(names, specs) -> dict[str, tuple[str, tuple[Entry, ...]]]:
    """For each name that a pattern of `specs` finds (re.search; the first pattern that matches
    wins), the pattern and its spec."""
    patterns = spec_patterns(specs)
    out = {}
    for name in names:
        for text, compiled, entries in patterns:
            if compiled.search(name):
                out[name] = (text, entries)
                break
    return out


def map_tensor_leaves(tree, fn: Callable[[TensorSpec], TensorSpec]):
    """`tree` with every TensorSpec leaf replaced by fn(leaf), in the same structure."""
    if isinstance(tree, TensorSpec):
        return fn(tree)
    if type(tree) is dict:
        return {k: map_tensor_leaves(v, fn) for k, v in tree.items()}
    if type(tree) in (list, tuple):
        return type(tree)(map_tensor_leaves(v, fn) for v in tree)
    if tree is None:
        return None
    import jax

    return jax.tree.map(lambda x: fn(x) if isinstance(x, TensorSpec) else x, tree,
                        is_leaf=lambda x: isinstance(x, TensorSpec))


def apply_spec_patterns(args, specs):
    """`args` (pytrees of TensorSpecs) with each leaf that a pattern of `specs` finds by name
    given that pattern's spec (first match wins); other leaves keep their own spec."""
    tensor_leaves(args)                     # the pytree's checks, before any matching
    patterns = spec_patterns(specs)

    def place(t: TensorSpec) -> TensorSpec:
        for text, compiled, entries in patterns:
            if compiled.search(t.name):
                if entries and len(entries) != t.rank:
                    raise RankError(
                        f"spec pattern {text!r} gives {format_spec(entries)!r} ({len(entries)} "
                        f"entries) to tensor {t.name!r} of rank {t.rank} {list(t.shape)}; "
                        "narrow the pattern or give one entry per dimension", tensor=t.name)
                return replace(t, spec=entries)
        return t

    return map_tensor_leaves(args, place)


def analyze(fn, *args, mesh, partitioner: str = "shardy", axis_type: str = "auto",
            timeout: float | None = None, pool=None, use_cache: bool = True,
            cache_only: bool = False, target: str | None = None, mapping=None,
            measure: bool = False, tpu_topology: str | None = None,
            real_devices: bool = False, specs: Mapping | None = None,
            peak: bool = False) -> Report | None:
    """Compile `fn` on abstract inputs sharded over `mesh` and report what the partitioner did.

    Each arg is an explorer.TensorSpec or a pytree of them. `mesh` is text like
    "data=2,model=4" or a mapping. Nothing is allocated, so any size can be analysed.
    With `cache_only`, answer only from the cache (None on a miss): the UI shows cached
    results at once, before its debounce. Besides this process's cache, compile-only requests
    are answered from and stored in a cache on disk shared by all processes
    (explorer/api/diskcache.py; EXPLORER_DISK_CACHE=0 turns it off); `use_cache=False` skips
    both. With `target` (see explorer.targets()), every
    collective gets a predicted time and the report an `estimate`; `mapping` places mesh axes
    on the target's links (text like "data=node,model=gpu", a dict, or None for the default).
    Predictions use the rates measured runs reach (each chip's and link's published measured
    fraction of its nominal rate, named in the estimate's notes); `peak=True` uses the vendors'
    nominal peaks instead.
    With `measure`, the worker also runs the program on random inputs and times it (on fake CPU
    devices that times this CPU; inputs over 1 GiB per device are not run). With `tpu_topology`
    (e.g. "v5e:4x4"; needs libtpu, the `tpu` extra) the program is compiled ahead of time for
    that TPU slice instead, and the report carries the TPU compiler's HLO and estimates.
    With `real_devices`, the worker uses this machine's own devices (GPUs or TPUs where there
    are some) instead of fake CPU ones: the mesh must have exactly as many devices, and
    `measure` then times the real hardware.
    With `specs` (regular expression -> spec, e.g. {r"up.*kernel": "None,model"}), each input
    whose name a pattern finds (re.search, first match wins) gets that pattern's spec instead of
    its own.
    """
    if specs is not None:
        args = apply_spec_patterns(args, specs)
    check_function(fn)
    timeout = check_timeout(timeout)
    measure, use_cache, cache_only, peak = (check_flag(v, n) for v, n in (
        (measure, "measure"), (use_cache, "use_cache"), (cache_only, "cache_only"),
        (peak, "peak")))
    mesh_spec = check_mesh(mesh, axis_type, tpu_topology=tpu_topology, real_devices=real_devices)
    # Target and mapping are checked before the compile, so a bad one costs nothing.
    check_target(target, mapping, mesh_spec)
    report = _analyze(fn, args, mesh_spec, partitioner, timeout, pool, use_cache,
                      cache_only, measure, tpu_topology, real_devices)
    if report is None or target is None:
        return report
    from explorer.report.predict import with_target

    return with_target(report, target, mapping, peak=peak)


def _analyze(fn, args, mesh_spec, partitioner, timeout, pool, use_cache, cache_only,
             measure, tpu_topology, real_devices):
    check_partitioner(partitioner)
    check_inputs(tensor_leaves(args), mesh_spec)

    fn_bytes = pickle_function(fn)
    request = (mesh_spec, partitioner, args, bool(measure), tpu_topology, bool(real_devices))
    key = hashlib.sha256(fn_bytes + pickle.dumps(request)).hexdigest()
    # Reports of plain compiles persist on disk (explorer/api/diskcache.py); measured runs and
    # real devices depend on this machine at this moment, so they stay in memory only.
    disk = diskcache.default_cache() if use_cache and not measure and not real_devices else None
    if use_cache:
        t0 = time.perf_counter()
        with _cache_lock:
            hit = _cache.get(key)
            if hit is not None:
                _cache.move_to_end(key)
        if hit is None and disk is not None:
            hit = disk.get(key)
            if hit is not None:
                _remember(key, hit)
        if hit is not None:
            return hit.with_timing(replace(hit.timing, cached=True,
                                           lookup_s=time.perf_counter() - t0))

    if cache_only:
        return None
    message = CompileRequest(fn=fn_bytes, args=args, mesh=mesh_spec, partitioner=partitioner,
                             sys_path=tuple(sys.path), measure=bool(measure),
                             tpu_topology=tpu_topology)
    # TPU compiles need no local devices: one shared worker with libtpu loaded serves them all.
    worker_key = (WorkerKey.tpu() if tpu_topology else WorkerKey.real() if real_devices
                  else WorkerKey.fake_cpu(mesh_spec.device_count))
    result = (pool or default_pool()).compile(worker_key, message, timeout)
    report = build_report(result, mesh_spec, partitioner)
    if use_cache:
        _remember(key, report)
    if disk is not None:
        disk.put(key, report)
    return report


def _remember(key: str, report: Report) -> None:
    with _cache_lock:
        _cache[key] = report
        _cache.move_to_end(key)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)


def clear_cache() -> None:
    """Forget the Reports held in this process. The persistent cache on disk is kept (it is
    shared with other processes); `explorer.api.diskcache.default_cache().clear()` empties it,
    and EXPLORER_DISK_CACHE=0 turns it off."""
    with _cache_lock:
        _cache.clear()
