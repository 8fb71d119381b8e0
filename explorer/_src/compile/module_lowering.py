"""The caller's lowered module, set up to compile over the worker's devices as jax would.

The caller traced and lowered the user's program (explorer/_src/compile/lowering.py); the worker
holds only its StableHLO text and the abstract inputs and outputs. jax has no public way to
compile a module text for given devices, so this builds the object `jax.jit(...).lower(...)`
would have built for that module (jax 0.10.2's `pxla.MeshComputation` inside a
`stages.Lowered`): the same parameters in the same order with the same shardings, donation and
device assignment, and the same results. Its `compile()` is jax's own, so the executable, its
layouts, its memory and cost analyses and its calls are jax's.

Before, the worker lowered a shell function with the program's signature and swapped its module
for the caller's: a second lowering of every program, about 3 ms of a small program's 70 ms
analysis (docs/performance.md). The fields below are the ones jax 0.10.2's
`pxla.lower_sharding_computation` fills for a program with no effects, constants, callbacks,
layouts or shape polymorphism, which a module lowered elsewhere and compiled here is: jax is
pinned to that release (pyproject.toml), and tests/compile/ check the result against plain
jax's compile of the same programs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from explorer._src.compile.ir_context import shared_ir_context
from explorer._src.compile.lowering import OutputShape, key_impl


def lowered_module(stablehlo: str, structs: Sequence[Any],
                   outputs: Sequence[OutputShape], mesh, donate: Sequence[int],
                   platform: str):
    """`stablehlo` (parameters: the flat `structs`, jax.ShapeDtypeStructs sharded over
    `mesh`, whose devices it compiles for; results: `outputs`) as a `jax.stages.Lowered`,
    ready for `compile()`. `donate`: positions of donated inputs. `platform`: the platform it
    was lowered for ("cpu", "tpu", "cuda")."""
    import jax
    from jax._src import core, dispatch, stages
    from jax._src.interpreters import mlir, pxla
    from jax._src.lib.mlir import ir
    from jax._src.sharding_impls import UNSPECIFIED

    in_avals = [core.shaped_abstractify(s) for s in structs]
    out_avals = [_output_aval(o) for o in outputs]
    devices = pxla._create_device_list(tuple(mesh.devices.flat))
    backend = devices[0].client
    with shared_ir_context():
        context = mlir.make_ir_context()
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


def _output_aval(output: OutputShape):
    """The abstract value of one output: a typed key array for a ``key<...>`` dtype."""
    import jax.numpy as jnp
    from jax._src import core
    from jax._src.random import prng

    impl = key_impl(output.dtype)
    dtype = prng.KeyTy(impl) if impl is not None else jnp.dtype(output.dtype)
    return core.ShapedArray(output.shape, dtype)
