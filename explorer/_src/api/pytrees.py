"""The inputs as pytrees: flattening and its checks, names from key paths, and the flat call.

Users arrive with the abstract state their library gives them (`jax.eval_shape(init)`): an
Equinox module filtered to its arrays, a Flax linen param dict, an optax state, a plain dict.
`named_inputs` turns every leaf that has a ``.shape`` and a ``.dtype`` (a jax.ShapeDtypeStruct,
a jax or numpy array) into a TensorSpec named by its key path, ``layers.0.w1`` for jax's
``['layers'][0]['w1']`` or ``.layers[0].w1``; a leaf that carries a NamedSharding keeps its
PartitionSpec.

Leaves that are neither (an int, a string, a callable in a model's state) are no inputs: the
program holds them fixed (explorer/_src/compile/lowering.py). A search varies the inputs' specs by
name over flat TensorSpecs: `flat_call` gives it the function called on the leaves flat, with
the user's pytrees (their own classes included) rebuilt around them where it is traced.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from explorer._src.compile.lowering import argument_names, key_impl, leaf_name
from explorer._src.errors import TensorError, choices
from explorer._src.spec.bounds import MAX_PYTREE_DEPTH, MAX_TENSORS, power_text, show
from explorer._src.spec.tensor import KeyDataSpec, TensorSpec, normalize_dtype, normalize_spec


def _is_spec(x) -> bool:
    return isinstance(x, TensorSpec)


def is_array_like(x) -> bool:
    """A leaf that describes a tensor without being a TensorSpec: a jax.ShapeDtypeStruct, a jax
    or numpy array, anything with a ``shape`` and a ``dtype``."""
    return not isinstance(x, TensorSpec) and hasattr(x, "shape") and hasattr(x, "dtype")


# ------------------------------------------------------------------ flattening and its checks


def tensor_leaves(tree: Any) -> list[TensorSpec]:
    """The TensorSpecs of a pytree of them, in jax's flattening order.

    Checked on the way, before anything is sent to a worker: every leaf a TensorSpec, dict keys
    that jax can sort, at most MAX_PYTREE_DEPTH levels and MAX_TENSORS leaves."""
    out: list[TensorSpec] = []
    _collect(tree, out, 0)
    _check_count(len(out))
    return out


def _check_count(count: int) -> None:
    if count > MAX_TENSORS:
        raise TensorError(f"more than {power_text(MAX_TENSORS)} input tensors; the limit is "
                          f"{power_text(MAX_TENSORS)}")


def _collect(tree, out: list[TensorSpec], depth: int) -> None:
    if depth > MAX_PYTREE_DEPTH:
        raise TensorError(f"the inputs are nested more than {MAX_PYTREE_DEPTH} levels deep; "
                          "pass a flatter pytree of TensorSpecs")
    _check_count(len(out))      # on the way too, so that a huge tree stops early
    if isinstance(tree, TensorSpec):
        out.append(tree)
    elif type(tree) is dict:
        for k in _sorted_keys(tree):
            _collect(tree[k], out, depth + 1)
    elif isinstance(tree, list | tuple) and not hasattr(tree, "_fields"):
        for item in tree:
            _collect(item, out, depth + 1)
    elif tree is None:
        return
    else:
        _collect_other(tree, out)


def _sorted_keys(tree: dict) -> list:
    try:
        return sorted(tree)            # jax flattens a dict in sorted key order
    except TypeError:
        kinds = sorted({type(k).__name__ for k in tree})
        raise TensorError(f"a dict of inputs has keys of types {choices(kinds)} "
                          f"({show(list(tree))}), which cannot be sorted, and jax "
                          "flattens a dict in sorted key order; use keys of one type, "
                          "e.g. all str") from None


def _collect_other(tree, out: list[TensorSpec]) -> None:
    """Other pytrees (namedtuples, flax state, ...): ask jax how they flatten."""
    import jax

    try:
        leaves = jax.tree.leaves(tree, is_leaf=_is_spec)
    except _FLATTEN_ERRORS as e:
        raise _not_a_pytree(tree, e) from None
    # Other leaves (ints, strings, callables, as model states carry) are not inputs: the
    # program holds them fixed (explorer/_src/compile/lowering.py).
    out.extend(x for x in leaves if isinstance(x, TensorSpec))


# What jax's flattening raises for a pytree it cannot flatten: a failing flatten function, or
# (SystemError, from its C++ core) a nesting deeper than Python's recursion limit.
_FLATTEN_ERRORS = (TypeError, ValueError, RecursionError, SystemError)


def _not_a_pytree(tree, e: Exception) -> TensorError:
    reason = ("nested too deeply" if isinstance(e, RecursionError | SystemError)
              else f"{type(e).__name__}: {e}")
    return TensorError(f"the inputs {show(tree)} cannot be flattened as a pytree ({reason}); "
                       "describe each input as TensorSpec(name, shape, dtype, spec), or pass "
                       "a pytree of arrays or jax.ShapeDtypeStructs")


def map_tensor_leaves(tree: Any, fn: Callable[[TensorSpec], TensorSpec]) -> Any:
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
                        is_leaf=_is_spec)


def is_plain(tree: Any) -> bool:
    """Only TensorSpecs and None in dicts, lists and tuples (no namedtuple, no user class):
    what pickles by value everywhere, so that it can travel to the worker as it is."""
    if tree is None or isinstance(tree, TensorSpec):
        return True
    if type(tree) is dict:
        return all(is_plain(v) for v in tree.values())
    if type(tree) in (list, tuple):
        return all(is_plain(v) for v in tree)
    return False


# ------------------------------------------------------------------------- names from paths


def named_inputs(fn: Callable[..., Any], args: tuple) -> tuple:
    """`args` with every array-like leaf replaced by a TensorSpec of its shape and dtype, named
    by its key path inside its argument (`leaf_name`). A leaf that is a whole argument is named
    by `fn`'s parameter (``x``; ``arg1`` where there is none). Where two leaves would share a
    name (``params`` and ``grads`` of one structure), or one would take a TensorSpec's name,
    every name made here gets its argument's name in front (``grads.layers.0.w1``).

    A leaf whose sharding is a NamedSharding keeps its PartitionSpec (padded with None to the
    leaf's rank); one without a sharding, or on a single device, starts replicated. TensorSpec
    leaves are kept as they are, and `args` is returned unchanged when it holds nothing else.

    Raises:
        TensorError: a leaf that is neither a TensorSpec nor array-like (named by its path), an
            unsupported dtype or shape, a sharding that names no mesh axes, or a pytree that
            cannot be flattened or holds more than MAX_TENSORS leaves.
    """
    if is_plain(tuple(args)):
        return tuple(args)      # TensorSpecs only: nothing to name, and no need to load jax
    per_arg = [_leaves_with_paths(a) for a in args]
    _check_count(sum(map(len, per_arg)))
    if not any(is_array_like(leaf) for leaves in per_arg for _, leaf in leaves):
        return tuple(args)
    params = argument_names(fn, len(args))
    paths = {(i, j): path for i, leaves in enumerate(per_arg)
             for j, (path, leaf) in enumerate(leaves) if _check_leaf(leaf, path, params[i])}
    names = {k: leaf_name(path) or params[k[0]] for k, path in paths.items()}
    given = [leaf.name for leaves in per_arg for _, leaf in leaves if _is_spec(leaf)]
    counts = Counter([*names.values(), *given])
    if any(counts[n] > 1 for n in names.values()):
        names = {k: ".".join(p for p in (params[k[0]], leaf_name(path)) if p)
                 for k, path in paths.items()}
    out = []
    for i, (arg, leaves) in enumerate(zip(args, per_arg, strict=True)):
        if any(k[0] == i for k in names):
            arg = _replace_leaves(arg, [_tensor_spec(names[i, j], leaf) if (i, j) in names
                                        else leaf for j, (_, leaf) in enumerate(leaves)])
        out.append(arg)
    return tuple(out)


def _leaves_with_paths(arg) -> list[tuple[tuple, Any]]:
    import jax

    _check_depth(arg, 0)
    try:
        return jax.tree_util.tree_flatten_with_path(arg, is_leaf=_is_spec)[0]
    except _FLATTEN_ERRORS as e:
        raise _not_a_pytree(arg, e) from None


def _check_depth(tree, depth: int) -> None:
    """The nesting bound and sortable dict keys over the plain containers, before jax's
    recursive flattening sees them (its C++ core fails without a message past Python's
    recursion limit, and says only that a comparator raised for mixed keys)."""
    if depth > MAX_PYTREE_DEPTH:
        raise TensorError(f"the inputs are nested more than {MAX_PYTREE_DEPTH} levels deep; "
                          "pass a flatter pytree")
    if type(tree) is dict:
        for k in _sorted_keys(tree):
            _check_depth(tree[k], depth + 1)
    elif type(tree) in (list, tuple):
        for v in tree:
            _check_depth(v, depth + 1)


def _check_leaf(leaf, path: tuple, param: str) -> bool:
    """True for an array-like leaf (an input, to be named); False for a TensorSpec (named
    already) and for any other leaf (an int, a string, a callable: held fixed in the program,
    as a closure would hold it, explorer/_src/compile/lowering.py)."""
    return not _is_spec(leaf) and is_array_like(leaf)


def _tensor_spec(name: str, leaf) -> TensorSpec:
    shape = tuple(leaf.shape)
    key = key_impl(leaf.dtype)
    if key is not None:
        return _key_data_spec(name, leaf, shape, key)
    try:       # by its name, so that a refused dtype reads 'float64', not dtype('float64')
        dtype = normalize_dtype(getattr(leaf.dtype, "name", leaf.dtype))
    except TensorError as e:
        raise TensorError(f"input {name!r}: {e}", tensor=name) from None
    return TensorSpec(name, shape, dtype, _sharding_spec(name, leaf, len(shape)))


def _key_data_spec(name: str, leaf, shape: tuple, impl) -> KeyDataSpec:
    """A typed PRNG key array as jax lays it out: its uint32 key data, the key's own trailing
    dimensions whole."""
    trailing = tuple(impl.key_shape)
    spec = _sharding_spec(name, leaf, len(shape))       # padded to the key array's rank
    return KeyDataSpec(name, shape + trailing, "uint32",
                       spec + (None,) * len(trailing) if spec else (), impl=impl.name)


def _sharding_spec(name: str, leaf, rank: int) -> tuple:
    """The spec entries a leaf's sharding gives: a NamedSharding's PartitionSpec padded with
    None to the rank (jax reads a short one so), () for none or one that replicates."""
    sharding = getattr(leaf, "sharding", None)
    if sharding is None:
        return ()
    spec = getattr(sharding, "spec", None)
    if spec is None:
        if getattr(sharding, "is_fully_replicated", False):
            return ()       # one device (an array made outside a mesh), or replicated
        raise TensorError(f"input {name!r} carries a {type(sharding).__name__}, which names no "
                          "mesh axes; give it a NamedSharding (or a ShapeDtypeStruct without a "
                          "sharding and a specs= pattern)", tensor=name)
    entries = normalize_spec(spec, tensor=name)
    return entries + (None,) * (rank - len(entries)) if len(entries) < rank else entries


def _replace_leaves(arg, leaves: list) -> Any:
    import jax

    return jax.tree.unflatten(jax.tree.structure(arg, is_leaf=_is_spec), leaves)


# -------------------------------------------------------------------------------- flat call


class FlatCall:
    """`fn` called on the leaves of `template` (a tuple of argument pytrees of TensorSpecs),
    flat: one abstract array per TensorSpec, in jax's order, and this rebuilds the user's
    pytrees around them. It keeps `fn`'s name, which jax gives the program."""

    def __init__(self, fn: Callable[..., Any], template: tuple):
        self.fn, self.template = fn, template
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)

    def __call__(self, *leaves):
        import jax

        treedef = jax.tree.structure(self.template, is_leaf=_is_spec)
        return self.fn(*jax.tree.unflatten(treedef, leaves))


def flat_call(fn: Callable[..., Any], args: tuple) -> tuple[Callable[..., Any], tuple]:
    """(`fn`, `args`) with the inputs flat: unchanged when `args` are plain (`is_plain`), else
    a FlatCall of `fn` and the TensorSpecs flat."""
    if all(is_plain(a) for a in args):
        return fn, tuple(args)
    return FlatCall(fn, tuple(args)), tuple(tensor_leaves(tuple(args)))
