"""Every private piece of jax the explorer uses, in one place, checked when this module is
imported.

jax has public ways to trace, lower and compile a function, but none to compile a module text
lowered in another process for given devices, to re-enter a thread's config contexts elsewhere,
to read the legacy `with mesh:` context, or to find a PRNG implementation by its dtype's tag. The
explorer needs each, so it reaches into `jax._src` for them here, and nowhere else
(`tests/test_layering.py` holds every other module to that): a jax release that moves a piece
breaks this module only. The public stages are used wherever they give the same program: the
caller traces and lowers with `jax.jit(...).trace(...).lower(...)`, and the worker compiles with
`Lowered.compile()`. `jax.export` is not the way across: an export over an abstract mesh keeps
no input shardings (jax 0.10.2), and calling an Exported inside a `jit` over the worker's
devices lowers the program a second time, the cost `lowered_module` removes.

The explorer supports jax from OLDEST_JAX on, and is tested on the oldest and on
NEWEST_TESTED_JAX (the README says which). On import, every piece in PIECES is looked up in the
installed jax, and the parameters the explorer passes are checked against the signatures it
passes them to. An older jax, or any jax that lacks a piece, raises one JaxVersionError that
names the version, the supported range and each missing piece with what it is for, before any
program is traced or compiled. A newer jax with every piece is used, and its Reports say that it
is newer than the newest tested (`jax_note`).
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax

from explorer._src.errors import JaxVersionError

OLDEST_JAX = "0.10.2"
NEWEST_TESTED_JAX = "0.12.0.1"


@dataclass(frozen=True)
class Piece:
    """One private object of jax's: `module.name`, what the explorer uses it for, and the
    keyword parameters it must accept where the explorer calls it with them."""

    module: str
    name: str
    used_for: str
    parameters: tuple[str, ...] = ()

    @property
    def path(self) -> str:
        return f"{self.module}.{self.name}"


_LOWERED = "the caller's module compiled over the worker's devices as jax.jit would"
PIECES: tuple[Piece, ...] = (
    Piece("jax._src.config", "config_states", "re-entering the caller's jax config contexts"),
    Piece("jax._src.config", "config_ext", "telling a config state set in a thread from unset"),
    Piece("jax._src.mesh", "thread_resources", "reading the legacy `with mesh:` context"),
    Piece("jax._src.random.prng", "prngs", "a typed PRNG key's implementation, by its tag"),
    Piece("jax._src.random.prng", "KeyTy", "a typed PRNG key output's dtype"),
    Piece("jax._src.interpreters.partial_eval", "dce_jaxpr",
          "the inputs a traced program never reads, as jax.jit drops them"),
    Piece("jax._src.xla_bridge", "backends_are_initialized",
          "leaving a TPU chip to the compile worker before jax starts"),
    Piece("jax._src.xla_bridge", "backends", "whether this process holds a TPU chip"),
    Piece("jax._src.interpreters.mlir", "make_ir_context", "one MLIR context per thread"),
    Piece("jax._src.util", "_caches", "counting what jax's tracing caches hold in the caller"),
    Piece("jax._src.util", "clear_all_caches",
          "bounding jax's tracing caches in the caller without its compiled calls'"),
    Piece("jax._src.interpreters.pxla", "MeshComputation", _LOWERED,
          ("name", "hlo", "const_args", "donated_invars", "platforms",
           "compiler_options_kvs", "device_assignment")),
    Piece("jax._src.interpreters.pxla", "_create_device_list", _LOWERED),
    Piece("jax._src.interpreters.pxla", "AllArgsInfo", _LOWERED),
    Piece("jax._src.stages", "Lowered", _LOWERED,
          ("lowering", "args_info", "out_tree", "no_kwargs", "in_types", "out_types")),
    Piece("jax._src.stages", "make_args_info", _LOWERED),
    Piece("jax._src.core", "shaped_abstractify", _LOWERED),
    Piece("jax._src.core", "ShapedArray", _LOWERED),
    Piece("jax._src.core", "DebugInfo", _LOWERED),
    Piece("jax._src.dispatch", "should_tuple_args", _LOWERED),
    Piece("jax._src.sharding_impls", "UNSPECIFIED", _LOWERED),
    Piece("jax._src.lib.mlir", "ir", _LOWERED),
)


def version_tuple(version: str) -> tuple[int, ...]:
    """`0.12.0.1` -> (0, 12, 0, 1); a pre-release or dev suffix (`0.13.0.dev20261201`) is
    dropped with everything after it."""
    parts = []
    for part in version.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        parts.append(int(digits.group()))
        if digits.group() != part:
            break
    return tuple(parts)


def missing_pieces(lookup: Callable[[str], Any] = importlib.import_module) -> list[str]:
    """Each piece the installed jax lacks, or whose signature lacks a parameter the explorer
    passes, as `path (used for ...)`."""
    missing = []
    for piece in PIECES:
        try:
            obj = getattr(lookup(piece.module), piece.name)
        except (ImportError, AttributeError):
            missing.append(f"{piece.path} ({piece.used_for})")
            continue
        if piece.parameters:
            try:
                accepted = inspect.signature(obj).parameters
            except (TypeError, ValueError):     # no signature to read (a compiled callable)
                continue
            absent = [p for p in piece.parameters if p not in accepted]
            if absent:
                missing.append(f"{piece.path} with parameters {', '.join(absent)} "
                               f"({piece.used_for})")
    return missing


def check_jax(version: str, lookup: Callable[[str], Any] = importlib.import_module) -> None:
    """Raise a JaxVersionError where jax `version` is older than OLDEST_JAX or lacks a piece."""
    supported = f"jax {OLDEST_JAX} or newer (tested on {OLDEST_JAX} and {NEWEST_TESTED_JAX})"
    if version_tuple(version) < version_tuple(OLDEST_JAX):
        raise JaxVersionError(f"sharding-explorer needs {supported}; jax {version} is "
                              f"installed. Upgrade it: pip install 'jax>={OLDEST_JAX}'.")
    missing = missing_pieces(lookup)
    if missing:
        raise JaxVersionError(
            f"sharding-explorer supports {supported}; jax {version} is installed and lacks "
            f"{len(missing)} of the private pieces the explorer's compile needs: "
            + "; ".join(missing)
            + f". Install a tested jax (pip install 'jax=={NEWEST_TESTED_JAX}') or a "
            "sharding-explorer release that supports this one.")


def jax_note(version: str) -> str:
    """A Report's note where its jax is newer than the newest tested; "" otherwise."""
    if version_tuple(version) > version_tuple(NEWEST_TESTED_JAX):
        return (f"Compiled with jax {version}, newer than the newest this sharding-explorer "
                f"was tested on ({NEWEST_TESTED_JAX}): its pieces were all found, but its "
                "results have not been compared with plain jax's.")
    return ""


# -- the caller's contexts (explorer/_src/compile/caller_context.py) ---------------------------

def thread_config() -> tuple[tuple[str, Any], ...]:
    """Every jax config state set for this thread (as `with jax.default_matmul_precision(...)`
    sets one), as (name, value) pairs."""
    from jax._src import config

    return tuple((name, state.get_local()) for name, state in config.config_states.items()
                 if state.get_local() is not config.config_ext.unset)


def config_context(name: str, value: Any):
    """The context that sets jax config state `name` to `value` for this thread."""
    from jax._src import config

    return config.config_states[name](value)


def legacy_context_mesh():
    """The Mesh of a legacy `with mesh:` block in force in this thread; None where none is."""
    from jax._src import mesh as mesh_lib

    mesh = mesh_lib.thread_resources.env.physical_mesh
    return None if mesh.empty else mesh


# -- tracing (explorer/_src/compile/lowering.py) -----------------------------------------------

def key_impl_of_tag(tag: str):
    """jax's PRNG implementation whose key dtype is ``key<tag>``; None where none is
    registered."""
    from jax._src.random import prng

    return next((impl for impl in prng.prngs.values() if impl.tag == tag), None)


def unused_inputs(jaxpr) -> tuple[int, ...]:
    """The positions of the inputs a traced program (a ClosedJaxpr) never reads, as jax.jit
    finds them when it drops unused inputs (dead code eliminated first)."""
    from jax._src.interpreters import partial_eval

    _, used = partial_eval.dce_jaxpr(jaxpr.jaxpr, [True] * len(jaxpr.jaxpr.outvars))
    return tuple(i for i, u in enumerate(used) if not u)


def spec_in_type(aval) -> tuple:
    """The PartitionSpec entries an abstract value's type carries (its sharding over the
    context mesh); () where it carries none."""
    spec = getattr(getattr(aval, "sharding", None), "spec", None)
    return () if spec is None else tuple(spec)


def calls_back(lowered) -> bool:
    """Whether a `jax.stages.Lowered` program calls back into the process that lowered it
    (a host callback: `jax.debug.print`, `io_callback`, ...)."""
    return bool(lowered._lowering.compile_args.get("host_callbacks"))


def backends_started() -> tuple[str, ...]:
    """The platforms of the backends jax has started in this process; () where it has started
    none (and so has not yet chosen its platform, nor opened a chip)."""
    from jax._src import xla_bridge

    if not xla_bridge.backends_are_initialized():
        return ()
    return tuple(xla_bridge.backends())


# -- jax's tracing caches in the caller (explorer/_src/compile/lowering.py) --------------------

def traced_cache_entries() -> int:
    """The entries of every cache jax registers for `jax.clear_caches` (its tracing,
    abstract-evaluation, sharding and lowering caches, all Python-level), summed."""
    from jax._src import util

    return sum(cache.cache_info().currsize for cache in list(util._caches)
               if hasattr(cache, "cache_info"))


def clear_traced_caches() -> None:
    """Empty those caches, and only those: unlike `jax.clear_caches`, jax's C++ caches of
    compiled calls are kept, so a jitted function called again as it was before runs its
    executable without a compile (tests/compile/test_jax_caches.py checks it)."""
    from jax._src import util

    util.clear_all_caches()


# -- one MLIR context per thread (explorer/_src/compile/ir_context.py) --------------------------

def new_ir_context():
    """An MLIR context as jax makes one for a lowering (all its dialects loaded), or the
    thread's held one inside explorer/_src/compile/ir_context.py's `shared_ir_context()`."""
    from jax._src.interpreters import mlir

    return mlir.make_ir_context()


def ir_context_maker() -> Callable[[], Any]:
    """jax's function that makes a new MLIR context for each lowering."""
    from jax._src.interpreters import mlir

    return mlir.make_ir_context


def replace_ir_context_maker(make: Callable[[], Any]) -> None:
    """Put `make` in the place of jax's MLIR context maker, for every lowering after this."""
    from jax._src.interpreters import mlir

    mlir.make_ir_context = make


# -- the caller's module as jax's Lowered (explorer/_src/compile/backend.py) --------------------

def lowered_module(stablehlo: str, context, structs: Sequence[Any], outputs: Sequence[Any],
                   mesh, donate: Sequence[int], platform: str):
    """`stablehlo`, parsed in the MLIR `context` (`new_ir_context()`; parameters: the flat
    `structs`, jax.ShapeDtypeStructs sharded over `mesh`, whose devices it compiles for;
    results: `outputs`, each with a name, shape and dtype, a typed key's dtype written
    ``key<tag>``) as a `jax.stages.Lowered`, ready for `compile()`.
    `donate`: positions of donated inputs. `platform`: the platform it was lowered for ("cpu",
    "tpu", "cuda").

    This is the object `jax.jit(...).lower(...)` builds for that module (its `MeshComputation`
    inside a `stages.Lowered`): the same parameters in the same order with the same shardings,
    donation and device assignment, and the same results. Its `compile()` is jax's own, so the
    executable, its layouts, memory and cost analyses and its calls are jax's, and nothing is
    lowered a second time. The fields are the ones `pxla.lower_sharding_computation` fills (the
    same keys from jax 0.10.2 to 0.12.0.1) for a program with no effects, constants, callbacks,
    layouts or shape polymorphism, which a module lowered elsewhere and compiled here is;
    tests/compile/test_module_lowering.py checks them against plain jax's, on every tested jax.
    """
    from jax._src import core, dispatch, stages
    from jax._src.interpreters import pxla
    from jax._src.lib.mlir import ir
    from jax._src.sharding_impls import UNSPECIFIED

    in_avals = [core.shaped_abstractify(s) for s in structs]
    out_avals = [output_aval(o.shape, str(o.dtype), o.spec, mesh) for o in outputs]
    devices = pxla._create_device_list(tuple(mesh.devices.flat))
    backend = devices[0].client
    with context:
        module = ir.Module.parse(stablehlo)
        name = ir.StringAttr(module.operation.attributes["sym_name"]).value   # jit_<fn>
    count = len(in_avals)
    debug = core.DebugInfo("jit", name.removeprefix("jit_"),
                           tuple(f"args[{i}]" for i in range(count)),
                           tuple(o.name for o in outputs))
    computation = pxla.MeshComputation(
        name, module, [], tuple(i in donate for i in range(count)), (platform,),
        (), devices,
        global_in_avals=in_avals, global_out_avals=out_avals,
        in_shardings=tuple(s.sharding for s in structs),
        out_shardings=(UNSPECIFIED,) * len(out_avals),
        tuple_args=dispatch.should_tuple_args(count, backend.platform),
        unordered_effects=[], ordered_effects=[], host_callbacks=[], keepalive=[],
        kept_var_idx=set(range(count)), mut=None, backend=backend,
        num_devices=len(devices), committed=True,
        in_layouts=(None,) * count, out_layouts=(None,) * len(out_avals),
        shape_poly_state=None, all_args_info=pxla.AllArgsInfo(in_avals, debug),
        pgle_profiler=None, intermediate_shardings=[], context_mesh=mesh)
    in_tree = jax.tree.structure((tuple(in_avals), {}))
    out_tree = jax.tree.structure(tuple(out_avals))
    args_info = stages.make_args_info(in_tree, (tuple(in_avals), {}), tuple(donate))
    return stages.Lowered(computation, args_info, out_tree, no_kwargs=True,
                          in_types=(in_tree, in_avals), out_types=(out_tree, out_avals))


def output_aval(shape: tuple[int, ...], dtype: str, spec: tuple, mesh):
    """The abstract value of one output, as the caller's trace typed it: a typed key array for
    a ``key<tag>`` dtype; its type's sharding, `spec`, over `mesh` (all None over Auto axes,
    the layout itself over Explicit ones)."""
    import jax.numpy as jnp
    from jax._src import core
    from jax._src.random import prng
    from jax.sharding import NamedSharding, PartitionSpec

    impl = (key_impl_of_tag(dtype[len("key<"):-1])
            if dtype.startswith("key<") and dtype.endswith(">") else None)
    sharding = NamedSharding(mesh.abstract_mesh, PartitionSpec(*spec))
    return core.ShapedArray(shape, prng.KeyTy(impl) if impl is not None else jnp.dtype(dtype),
                            sharding=sharding)


check_jax(jax.__version__)
