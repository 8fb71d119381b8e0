"""A user's program traced and lowered where it was called; compiled in the worker.

Whatever a function's meaning depends on outside its closure is only in the caller's process:
flax's `logical_axis_rules` (without which every `nn.with_logical_constraint` is dropped),
`jax.default_matmul_precision`, the caller's own `jax.set_mesh` or `with mesh:`, config flags.
A function re-traced in another process loses them, and compiles as another program with no
word. So a user's function is traced here, on abstract inputs over an abstract mesh of the
request's shape (no device, nothing allocated), and lowered to StableHLO for the platform the
worker compiles for; the module text travels, never the function. The worker compiles that
module for the target's devices (explorer/_src/compile/backend.py, `compile_request`).

`lower_program` runs in the caller (it imports jax); `LoweredProgram` is plain data that both
sides import.
"""

from __future__ import annotations

import functools
import inspect
import re
import time
from collections.abc import Callable, Hashable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any, Protocol

from explorer._src.compile.caller_context import CallerContext, context_of, mesh_in_force
from explorer._src.compile.ir_context import shared_ir_context
from explorer._src.compile.sources import cell_name
from explorer._src.errors import CompileError
from explorer._src.lru import Lru
from explorer._src.spec.mesh import JAX_AXIS_TYPE_NAMES, MeshSpec
from explorer._src.spec.tensor import KeyDataSpec, TensorSpec


@dataclass(frozen=True)
class OutputShape:
    """One flat output of a lowered program: its name (``out.w1``, the output pytree's key
    path in the inputs' dotted form, `output_name`), global shape and dtype (jax's name:
    ``float32``, ``key<fry>``), and the PartitionSpec entries its type carries (jax's abstract
    value's sharding: the layout an Explicit mesh axis puts in the type, all None over Auto
    axes)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    spec: tuple = ()


@dataclass(frozen=True)
class LoweredProgram:
    """A program as jax lowered it in the caller's process, for one platform.

    `stablehlo` is the module text with its debug locations (the caller's files and lines),
    which the worker parses and compiles; its parameters are the request's flat inputs in
    order, every one kept (jax.jit's keep_unused=True), so that HLO parameter i is input i."""

    stablehlo: str
    platform: str                        # lowered for: "cpu", "tpu" or "cuda"
    outputs: tuple[OutputShape, ...]
    lower_s: float                       # seconds the trace and the lowering took here
    # Inputs the program never reads: jax.jit's default (keep_unused=False) would drop them.
    unused: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()          # how it was traced, where that is not the plain way
    # The program calls back into the process that traced it (jax.debug.print, pure_callback,
    # io_callback): it compiles anywhere, but only that process could run it.
    calls_back: bool = False
    # The PartitionSpec entries each input's type carries, in order (as OutputShape.spec).
    input_types: tuple[tuple, ...] = ()


# What jax 0.10 raises when a shard_map's own mesh is not the context mesh.
OWN_SHARD_MAP_MESH = "should match the mesh passed to shard_map"


def _is_spec(x) -> bool:
    return isinstance(x, TensorSpec)


# The programs lowered last, by everything their lowering read (`_memo_key`): an unchanged
# request (an Undo, the same call again) is answered without tracing, as jax's own caches
# answer a jitted function called again. Like jax's, the memo sees the function, its inputs and
# the contexts, not the globals the function reads.
LOWERED_MEMO_SIZE = 16
_LOWERED: Lru[Hashable, LoweredProgram] = Lru(LOWERED_MEMO_SIZE)


# jax keeps what it traced, for every new shape, in caches keyed on functions that live as long
# as the process (jax.numpy's own jitted functions, the user's): some hold up to 2048 or 4096
# entries, jax 0.10.2's `trace_to_jaxpr` any number. The caller traces each distinct request
# once and keeps only plain data, so those entries serve it nothing more, yet a long session of
# distinct requests grew by them: 52 entries and 60 kB of Python objects (98 kB of RSS) for each
# small MLP (docs/performance.md, "The caller over many compiles"). Past JAX_CACHE_BOUND entries
# they are emptied, jax's C++ caches of compiled calls kept (jax_private.clear_traced_caches):
# a user's jitted function called again as before runs without a compile. What the user pays,
# once per clear: a jitted call jax answers in Python (a first call at a new shape,
# `jit(f).lower(x)`) traces again, and `.lower(x).compile()` compiles again. So not at every
# request: every 38 distinct small programs, every big one (whose trace alone passes the bound).
# Entries, not bytes, are what jax counts: 2000 of the small MLP's hold about 2.3 MB.
JAX_CACHE_BOUND = 2000


def bound_jax_caches() -> bool:
    """Empty jax's tracing caches where they hold more than JAX_CACHE_BOUND entries; whether
    they were emptied."""
    from explorer._src.compile import jax_private

    if jax_private.traced_cache_entries() <= JAX_CACHE_BOUND:
        return False
    jax_private.clear_traced_caches()
    return True


class PinnedOutputs(Protocol):
    """The layout the caller pins on the outputs (explorer/_src/api/output_specs.py)."""

    def shardings(self, mesh) -> Any:
        """jax.jit's `out_shardings` on `mesh`, the request's abstract mesh."""


def lower_program(fn: Callable[..., Any], args: tuple, mesh: MeshSpec, platform: str,
                  partitioner: str, donated: Sequence[int] = (),
                  out_specs: PinnedOutputs | None = None, over=None,
                  in_force=None) -> LoweredProgram:
    """`fn` traced and lowered (`trace_and_lower`), or the same program lowered before under
    the same contexts (a memo of the last LOWERED_MEMO_SIZE)."""
    key = _memo_key(fn, args, mesh, platform, partitioner, tuple(donated), out_specs,
                    (over, in_force))
    known = _LOWERED.get(key) if key is not None else None
    if known is not None:
        # Nothing was traced this time: no lowering time is spent.
        return replace(known, lower_s=0.0)
    try:
        lowered = trace_and_lower(fn, args, mesh, platform, partitioner, donated, out_specs,
                                  over=over, in_force=in_force)
    finally:
        bound_jax_caches()           # a refused trace fills them too
    if key is not None:
        _LOWERED.put(key, lowered)
    return lowered


def forget_lowered() -> None:
    """Forget the lowered programs kept (explorer.clear_cache calls it)."""
    _LOWERED.clear()


def _memo_key(fn, args: tuple, mesh: MeshSpec, platform: str, partitioner: str,
              donated: tuple[int, ...], out_specs: PinnedOutputs | None,
              meshes: tuple) -> Hashable | None:
    """Everything a lowering reads: the function (and the contexts it was bound to), the
    arguments' structure, inputs and fixed leaves, the mesh, platform, partitioner, donation,
    pinned outputs, and the contexts in force here; None where any of it cannot be hashed (a
    fixed leaf that is a list), and nothing is remembered."""
    import jax

    leaves, treedef = jax.tree.flatten(args, is_leaf=_is_spec)
    key = (fn, treedef, tuple(leaves), mesh, platform, partitioner, donated, out_specs,
           meshes, CallerContext.here())
    try:
        hash(key)
    except (TypeError, ValueError):
        return None
    return key


def trace_and_lower(fn: Callable[..., Any], args: tuple, mesh: MeshSpec, platform: str,
                    partitioner: str, donated: Sequence[int] = (),
                    out_specs: PinnedOutputs | None = None, over=None,
                    in_force=None) -> LoweredProgram:
    """Trace `fn` on `args` (a tuple of argument pytrees whose array leaves are TensorSpecs;
    other leaves are held fixed, as a closure would hold them) sharded over an abstract `mesh`,
    in this process and under its contexts (and those `fn` was bound to where it was handed
    over, explorer/_src/compile/caller_context.py), and lower it for `platform`.

    `donated` are positions among the TensorSpecs in jax's order (as jax.jit's donate_argnums
    would name whole arguments); a KeyDataSpec is traced as the typed PRNG key array the
    function was given. `out_specs` pins the outputs' layout, as jax.jit's
    `out_shardings` does. `over` is the user's own jax mesh equal to `mesh` (its abstract
    mesh), traced over in place of one made from `mesh`'s axes, so that a `shard_map` the
    program gives that mesh finds it is the context's; `in_force`, a jax Mesh the caller gave
    as the mesh, is set (jax.set_mesh and the legacy `with mesh:`) while the program is traced.

    Raises:
        CompileError: the function raised while it was traced or lowered here (jax refused
            it, or it has a bug); the message names the function and carries the error.
    """
    import jax

    from explorer._src.compile import jax_private

    abstract = over if over is not None else abstract_mesh(mesh)
    program, structs, donate_argnums = _jittable(fn, args, abstract, tuple(donated))
    jitted = jax.jit(program, keep_unused=True,
                     **({"donate_argnums": donate_argnums} if donate_argnums else {}),
                     **({"out_shardings": out_specs.shardings(abstract)} if out_specs else {}))
    notes: list[str] = []
    t0 = time.perf_counter()
    _exclude_this_file()
    context = context_of(fn)
    try:
        # Each op's location is its innermost frame of the user's code (what the Report reads),
        # not the whole stack up to the caller's call: the same program called from two
        # places lowers to the same text, and so the same cache key.
        with context.entered() if context is not None else nullcontext(), \
                mesh_in_force(in_force), \
                jax_private.config_context("jax_use_shardy_partitioner",
                                           partitioner == "shardy"), \
                jax_private.config_context("jax_traceback_in_locations_limit", 1):
            try:
                with jax.sharding.use_abstract_mesh(abstract):
                    traced = jitted.trace(*structs)
            except ValueError as e:
                if OWN_SHARD_MAP_MESH not in str(e):
                    raise
                # A shard_map over a mesh of its own (an expert mesh) is refused under another
                # context mesh; it is traced under the caller's contexts alone, as it runs.
                traced = jitted.trace(*structs)
                own = [m for m in shard_map_meshes(traced.jaxpr.jaxpr)
                       if (tuple(m.axis_names), tuple(m.axis_sizes)) != (mesh.names, mesh.sizes)]
                if own:
                    notes.append(f"a shard_map in the program runs over a mesh of its own "
                                 f"({_mesh_text(own[0])}), which jax refuses under the "
                                 "explored mesh's context; the program was traced under the "
                                 "caller's own mesh context alone")
            with shared_ir_context():        # jax's new context per lowering: 4-5 ms
                lowered = traced.lower(lowering_platforms=(platform,))
            text = _cells_named(lowered.as_text(debug_info=True))
    except Exception as e:
        raise CompileError(
            f"{_describe(fn)} raised while it was traced in this process for the "
            f"{mesh.text()} mesh: {type(e).__name__}: {e}") from e
    lower_s = time.perf_counter() - t0
    out_paths = jax.tree_util.tree_flatten_with_path(lowered.out_info)[0]
    outputs = tuple(OutputShape(output_name(path), tuple(info.shape),
                                str(info.dtype), jax_private.spec_in_type(aval))
                    for (path, info), aval in zip(out_paths, traced.jaxpr.out_avals,
                                                  strict=True))
    return LoweredProgram(stablehlo=text, platform=platform, outputs=outputs,
                          lower_s=lower_s, unused=jax_private.unused_inputs(traced.jaxpr),
                          notes=tuple(notes), calls_back=jax_private.calls_back(lowered),
                          input_types=tuple(map(jax_private.spec_in_type,
                                                traced.jaxpr.in_avals)))


def shard_map_meshes(jaxpr) -> list:
    """The meshes of the shard_maps in `jaxpr` (a jax core Jaxpr), those of nested ones
    included."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "shard_map":
            found.append(eqn.params["mesh"])
        for value in eqn.params.values():
            for sub in value if isinstance(value, tuple | list) else (value,):
                inner = getattr(sub, "jaxpr", sub)     # a ClosedJaxpr's, or a Jaxpr
                if hasattr(inner, "eqns"):
                    found.extend(shard_map_meshes(inner))
    return found


def _mesh_text(mesh) -> str:
    return ",".join(f"{n}={s}" for n, s in zip(mesh.axis_names, mesh.axis_sizes, strict=True))


def _jittable(fn, args: tuple, mesh, donated: tuple[int, ...]):
    """(program, its abstract arguments, donate_argnums): `fn` as jax.jit traces it, given
    only arrays. Each argument keeps its structure and the parameter name `fn` gives it, so
    that jax names the HLO parameters as it would for the user's own jit (``params['w1']``);
    leaves that are not inputs are taken out and put back inside; a typed key input is traced
    as a typed key (`_struct`). Where only some inputs of an argument are donated (jax donates whole
    arguments), the inputs are passed flat instead."""
    import jax

    leaves, treedef = jax.tree.flatten(args, is_leaf=_is_spec)
    inputs = [i for i, leaf in enumerate(leaves) if _is_spec(leaf)]
    structs = [_struct(leaves[i], mesh) for i in inputs]

    def rebuild(arrays) -> tuple:
        full = list(leaves)
        for i, array in zip(inputs, arrays, strict=True):
            full[i] = array
        return jax.tree.unflatten(treedef, full)

    counts = [len(tensor_positions(a)) for a in args]
    starts = [sum(counts[:k]) for k in range(len(args))]
    whole = tuple(k for k in range(len(args)) if counts[k]
                  and all(starts[k] + j in donated for j in range(counts[k])))
    if sum(counts[k] for k in whole) != len(donated):
        def flat(*arrays):
            return fn(*rebuild(arrays))

        return _named_as(flat, fn), structs, donated

    def program(*arg_trees):
        return fn(*rebuild(jax.tree.leaves(arg_trees)))

    program.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY)
         for n in argument_names(fn, len(args))])
    trees = jax.tree.unflatten(jax.tree.structure(
        tuple(_without_static(a) for a in args), is_leaf=_is_spec), structs)
    return _named_as(program, fn), tuple(trees), whole


def tensor_positions(tree) -> list[int]:
    """The positions of the TensorSpec leaves among all the leaves of `tree`."""
    import jax

    return [i for i, x in enumerate(jax.tree.leaves(tree, is_leaf=_is_spec)) if _is_spec(x)]


def _without_static(tree):
    """`tree` with every leaf that is not a TensorSpec replaced by None (no leaf to jax)."""
    import jax

    return jax.tree.map(lambda x: x if _is_spec(x) else None, tree, is_leaf=_is_spec)


def _named_as(program, fn):
    """`program` under `fn`'s name, which jax gives the module and every op_name."""
    program.__name__ = getattr(fn, "__name__", type(fn).__name__)
    program.__qualname__ = getattr(fn, "__qualname__", program.__name__)
    return program


# A file location in MLIR's text: loc("/path/to/file.py":12:4 to :20).
_FILE_LOCATION = re.compile(r'loc\("([^"]+)":\d+')


def _cells_named(text: str) -> str:
    """The module text with every notebook cell's file (ipykernel's temporary file) named as
    its prompt, "In [3]", as the Report shows a cell's lines."""
    for path in set(_FILE_LOCATION.findall(text)):
        name = cell_name(path)
        if name is not None:
            text = text.replace(f'"{path}"', f'"{name}"')
    return text


@functools.cache
def _exclude_this_file() -> None:
    """Ops the wrapper of `_jittable` makes are located at the user's call,
    not in this file: jax excludes it from source locations as it excludes its own files
    (once: jax keeps a list, which every frame is checked against)."""
    from jax.extend import source_info_util

    source_info_util.register_exclusion(__file__)


def abstract_mesh(mesh: MeshSpec):
    """jax's AbstractMesh of the request's mesh: its axes, sizes and axis types, no devices."""
    from jax.sharding import AbstractMesh

    return AbstractMesh(mesh.sizes, mesh.names, axis_types=jax_axis_types(mesh))


def jax_axis_types(mesh: MeshSpec) -> tuple:
    """The mesh's axis types as jax's (jax.sharding.AxisType), one per axis."""
    from jax.sharding import AxisType

    return tuple(getattr(AxisType, JAX_AXIS_TYPE_NAMES[t]) for t in mesh.axis_types)


def _struct(spec: TensorSpec, mesh):
    """The abstract argument jax.jit is traced on: a typed PRNG key array for a KeyDataSpec
    (its data's trailing dimension is the key's own), as the user's program receives it, so
    that jax lowers, donates and aliases it as it would the user's keys."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    keys = isinstance(spec, KeyDataSpec)
    entries = spec.spec[:len(spec.shape) - 1] if keys else spec.spec
    sharding = NamedSharding(mesh, PartitionSpec(*entries),
                             **({} if spec.memory_kind == "device"
                                else {"memory_kind": spec.memory_kind}))
    if keys:
        return jax.ShapeDtypeStruct(spec.shape[:-1], _key_dtype(spec.impl), sharding=sharding)
    return jax.ShapeDtypeStruct(spec.shape, jnp.dtype(spec.dtype), sharding=sharding)


@functools.cache
def _key_dtype(impl: str):
    """jax's typed key dtype of the PRNG implementation named `impl` (``key<fry>``)."""
    import jax

    return jax.eval_shape(lambda: jax.random.key(0, impl=impl)).dtype


def key_impl(dtype):
    """jax's PRNG implementation of a typed key dtype (a dtype, or its name: ``key<fry>``);
    None for any other dtype."""
    name = str(dtype)
    if not (name.startswith("key<") and name.endswith(">")):
        return None       # not a key: no need to ask jax
    from explorer._src.compile import jax_private  # jax has no public lookup by the tag

    return jax_private.key_impl_of_tag(name[len("key<"):-1])


def argument_names(fn: Callable[..., Any], count: int) -> list[str]:
    """The names of `fn`'s first `count` positional parameters; ``arg{k}`` past them or where
    `fn` has no signature."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):       # builtins and some callables have no signature
        params = []
    return [params[k] if k < len(params) else f"arg{k}" for k in range(count)]


def leaf_name(path: tuple) -> str:
    """A key path as jax.tree_util.keystr writes it, simplified to dotted parts: dict keys,
    sequence indices and attribute names joined by dots (``['layers'][0]['w1']`` and
    ``.layers[0].w1`` are both ``layers.0.w1``). The one form of every name the explorer
    gives a leaf: an input's (api/pytrees.py) and an output's (`output_name`)."""
    from jax.tree_util import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey, keystr

    parts = []
    for key in path:
        if isinstance(key, DictKey):
            parts.append(str(key.key))
        elif isinstance(key, SequenceKey):
            parts.append(str(key.idx))
        elif isinstance(key, GetAttrKey):
            parts.append(key.name)
        elif isinstance(key, FlattenedIndexKey):
            parts.append(str(key.key))
        else:       # a key type of a user's pytree node: its keystr, without the punctuation
            parts.append(keystr((key,)).strip(".[]'\""))
    return ".".join(parts)


def output_name(path: tuple) -> str:
    """A flat output's name: ``out`` and its key path in the inputs' dotted form
    (``out.blocks.0`` for jax's ``out['blocks'][0]``, ``out.1`` for the second of a tuple);
    ``out`` for a program's one array."""
    return ".".join(p for p in ("out", leaf_name(path)) if p)


def _describe(fn) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return f"function {name!r}" if name else f"callable {type(fn).__name__}"


def platform_of(backend: str, real_platform: Callable[[], str]) -> str:
    """The platform a worker of `backend` (a protocol.Backend value) compiles for, as jax's
    lowering names it; `real_platform()` for the machine's own devices."""
    return {"cpu": "cpu", "tpu": "tpu", "gpu": "cuda"}.get(backend) or real_platform()


# libtpu lets one process at a time hold a TPU chip; a second fails with "Internal error when
# accessing libtpu multi-process lockfile" (seen on a v5e VM). Lowering here asks jax for a
# default device, which initializes every platform jax has, the TPU included.
CHIP_IS_HELD = ("this process's jax already holds the TPU (it ran on it before), and libtpu "
                "lets one process use a TPU chip at a time, so the compile worker cannot run "
                "the program on it. Call explorer.analyze(..., real_devices=True) in a fresh "
                "process before jax runs anything on the TPU, or predict it with target=... "
                "(no chip needed)")
CHIP_LEFT_TO_WORKER = ("this process's jax was set to the CPU (jax_platforms='cpu') before "
                       "tracing, so that the compile worker can hold the TPU chip: libtpu lets "
                       "one process use it at a time")


def leave_the_chip_to_the_worker(platform: str) -> str:
    """Before a trace here for a worker that runs on this machine's TPU: keep this process off
    the chip. Where jax has not started yet, it is set to the CPU here, and the note returned
    says so; where it already holds the TPU, the worker could not open it, and a CompileError
    says what to do. "" where nothing was needed (another platform, jax already on the CPU)."""
    if platform != "tpu":
        return ""
    import jax

    from explorer._src.compile import jax_private

    started = jax_private.backends_started()
    if started:
        if "tpu" in started:
            raise CompileError(CHIP_IS_HELD)
        return ""
    jax.config.update("jax_platforms", "cpu")
    return CHIP_LEFT_TO_WORKER
