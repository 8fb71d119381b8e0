"""A Flax NNX module as a function of named tensors, for the app (explorer.ui.explore_module).

`nnx.split` separates the module's static structure (the graphdef) from its state. Every
parameter becomes an explorer.TensorSpec named by its path joined with dots (`up.kernel`,
`layers.0.attn.q.kernel`); other state (batch statistics, RNG counters) likewise, as inputs of
their own group. The program the explorer compiles merges them back (`nnx.merge`) and calls the
module, or the user's `fn(model, *inputs)` (explorer._src.workloads.flax_module.call_module, run in
the compile worker), so it computes exactly what the model computes.

A parameter made with `nnx.with_partitioning(init, names)` carries those names: when they are
all axes of the mesh they are its spec; otherwise they are logical dimension names (MaxText's
`embed`, `mlp`, ...) that the app's logical-axis rules map to mesh axes. RNG keys have a key
dtype no TensorSpec describes; the program makes them itself (a fixed key), which changes no
layout.

flax is imported only when a module is given: the rest of the app never needs it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from explorer._src.errors import TensorError
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import DTYPE_BYTES, TensorSpec, normalize_dtype
from explorer._src.ui.sources import FunctionSource, where_defined
from explorer._src.workloads.base import TensorKind
from explorer._src.workloads.flax_module import call_module

# Where Flax keeps a Variable's partitioning names (the key changed across flax versions).
_SHARDING_KEYS = ("out_sharding", "sharding_names", "sharding")
PARAMS, STATE, INPUTS = "parameters", "other state", "inputs"


def path_name(path: Sequence) -> str:
    """A state path as the app names it: ('layers', 0, 'kernel') -> `layers.0.kernel`."""
    return ".".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)


def _sharding_names(variable) -> tuple | None:
    meta = variable.get_metadata() if hasattr(variable, "get_metadata") else {}
    for key in _SHARDING_KEYS:
        names = meta.get(key)
        if names:
            return tuple(names)
    return None


def _is_key(dtype) -> bool:
    return "key<" in str(dtype)


@dataclass(frozen=True)
class ModuleTensor:
    path: tuple
    name: str
    shape: tuple[int, ...]
    dtype: str
    names: tuple | None              # the partitioning metadata, if any


def module_tensors(state) -> tuple[list[ModuleTensor], list[tuple]]:
    """The tensors of an nnx State, and the paths of its RNG keys (not tensors)."""
    from flax import nnx

    tensors, keys = [], []
    for path, variable in nnx.to_flat_state(state):
        value = variable.get_value() if hasattr(variable, "get_value") else variable.value
        dtype = getattr(value, "dtype", None)
        if _is_key(dtype):
            keys.append(tuple(path))
            continue
        name = path_name(path)
        try:
            dtype = normalize_dtype(dtype)
        except TensorError:
            raise TensorError(f"model state {name!r} has dtype {dtype}, which the explorer "
                              f"cannot describe; supported dtypes: {', '.join(DTYPE_BYTES)}",
                              tensor=name) from None
        tensors.append(ModuleTensor(tuple(path), name, tuple(getattr(value, "shape", ())),
                                    dtype, _sharding_names(variable)))
    return tensors, keys


def _nested(tensors: Sequence[ModuleTensor], make: Callable[[ModuleTensor], TensorSpec]) -> dict:
    """The tensors as the nested dict nnx.to_pure_dict gives (the structure nnx.merge takes)."""
    out: dict = {}
    for t in tensors:
        node = out
        for k in t.path[:-1]:
            node = node.setdefault(k, {})
        node[t.path[-1]] = make(t)
    return out


def module_source(model, inputs: Sequence, mesh: MeshSpec, *, specs: Mapping | None = None,
                  fn: Callable | None = None, out_specs: Any = None) -> FunctionSource:
    """A FunctionSource for `model` called on `inputs` (TensorSpecs or pytrees of them), or for
    `fn(model, *inputs)` when given; `out_specs` pins its outputs (explorer.analyze's)."""
    from flax import nnx

    if not isinstance(model, nnx.Module):
        raise TensorError(f"{type(model).__name__} is not a flax.nnx.Module; for a function of "
                          "TensorSpecs use explorer.ui.explore")
    graphdef, params, state = nnx.split(model, nnx.Param, ...)
    param_tensors, param_keys = module_tensors(params)
    state_tensors, keys = module_tensors(state)
    keys += param_keys
    logical, defaults = {}, {}
    for t in param_tensors + state_tensors:
        if t.names is None:
            continue
        axes = [a for e in t.names for a in ((e,) if isinstance(e, str) else (e or ()))]
        if all(a in mesh.names for a in axes):
            defaults[t.name] = t.names
        else:
            logical[t.name] = tuple(e if isinstance(e, str) or e is None else None
                                    for e in t.names)

    def spec_of(t: ModuleTensor) -> TensorSpec:
        return TensorSpec(t.name, t.shape, t.dtype, defaults.get(t.name))

    args = (_nested(param_tensors, spec_of), _nested(state_tensors, spec_of), *inputs)
    program = functools.partial(call_module, graphdef=graphdef, call=fn, keys=tuple(keys))
    groups = {t.name: PARAMS for t in param_tensors} | {t.name: STATE for t in state_tensors}
    input_names = FunctionSource.leaf_names(inputs)
    groups |= {n: INPUTS for n in input_names}
    kinds = {t.name: TensorKind.PARAM for t in param_tensors} | {
        n: TensorKind.INPUT for n in [*(t.name for t in state_tensors), *input_names]}
    title = type(model).__name__ + (f" · {getattr(fn, '__name__', 'fn')}" if fn else "")
    notes = []
    if keys:
        notes.append(f"{len(keys)} RNG key(s) are made inside the program (a fixed key), not "
                     "passed in")
    if logical:
        notes.append(f"{len(logical)} parameter(s) carry logical names: the rules map them")
    if defaults:
        notes.append(f"{len(defaults)} parameter(s) take their spec from with_partitioning")
    return FunctionSource(program, args, specs=specs, logical=logical, groups=groups,
                          title=title, kinds=kinds, has_grads=False if fn is None else None,
                          notes=notes, label="model", out_specs=out_specs,
                          where=where_defined(fn if fn is not None else type(model)))
