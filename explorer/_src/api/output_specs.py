"""`out_specs`: the layout a caller pins on a function's outputs, as jax.jit's `out_shardings`.

A training step jitted with its outputs pinned to its state's layout (MaxText's
train_compile, EasyDeL's Trainer) is another program than the same step with its outputs left
to the partitioner: every output must end in the pinned layout, which may take collectives (a
norm's scale the step computed replicated, all-gathered back to its FSDP layout) and lets the
compiler write each new state leaf into its donated old one. `explorer.analyze(fn, ...,
out_specs=...)` takes what jax.jit's `out_shardings` takes, as specs: a pytree prefix of the
function's output whose leaves are spec text (``"data,None"``), a jax PartitionSpec or a jax
NamedSharding (its spec and memory kind; its mesh's axes must be the request's). A None leaf
leaves that part of the output to the partitioner, as in jax. A plain tuple is a pytree node,
as in jax, not a spec: write ``P("data", None)`` or ``"data,None"``.

The specs are checked here (an axis the mesh lacks is named with the mesh's axes); their fit
to the output's shapes is jax's to check when the function is traced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from explorer._src.errors import InputError, UnknownAxisError, choices
from explorer._src.spec.bounds import show
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import Spec, entry_axes, format_spec, normalize_spec


@dataclass(frozen=True)
class PinnedSpec:
    """One leaf of `out_specs`: the spec an output (or a subtree of outputs) must end in."""

    spec: Spec
    memory_kind: str | None = None      # a NamedSharding's, e.g. "pinned_host"


@dataclass(frozen=True)
class OutputSpecs:
    """`out_specs` checked: jax's tree structure of the prefix and its leaves in order, None
    where the partitioner chooses. Hashable, so that it can key the memo of lowered
    programs."""

    treedef: Any
    leaves: tuple[PinnedSpec | None, ...]

    def shardings(self, mesh):
        """The prefix as jax.jit's `out_shardings`: NamedShardings on `mesh` (the request's
        abstract mesh), None where the partitioner chooses."""
        import jax
        from jax.sharding import NamedSharding, PartitionSpec

        return jax.tree.unflatten(self.treedef, [
            None if leaf is None else NamedSharding(
                mesh, PartitionSpec(*leaf.spec),
                **({"memory_kind": leaf.memory_kind} if leaf.memory_kind else {}))
            for leaf in self.leaves])


def _is_leaf(x) -> bool:
    from jax.sharding import PartitionSpec, Sharding

    return x is None or isinstance(x, str | PartitionSpec | Sharding)


def check_out_specs(value: Any, mesh: MeshSpec) -> OutputSpecs | None:
    """`value` (explorer.analyze's `out_specs`) checked against `mesh`; None for None.

    Raises:
        InputError: a leaf is not spec text, a PartitionSpec, a NamedSharding or None.
        SpecError: a spec is malformed or names an axis `mesh` does not have.
    """
    if value is None:
        return None
    import jax
    from jax.sharding import NamedSharding, Sharding

    leaves, treedef = jax.tree.flatten(value, is_leaf=_is_leaf)
    pinned: list[PinnedSpec | None] = []
    for leaf in leaves:
        if leaf is None:
            pinned.append(None)
            continue
        if isinstance(leaf, Sharding) and not isinstance(leaf, NamedSharding):
            raise InputError(f"out_specs leaf {show(leaf)} is a {type(leaf).__name__}; give "
                             "a NamedSharding, a PartitionSpec or spec text (e.g. "
                             "'data,None'), or None to leave that output to the partitioner")
        if not _is_leaf(leaf):
            raise InputError(f"out_specs leaf {show(leaf)} is not spec text (e.g. "
                             "'data,None'), a jax PartitionSpec, a NamedSharding or None, "
                             "as jax.jit's out_shardings takes (a plain tuple is a pytree "
                             "node there too: write P('data', None))")
        named = isinstance(leaf, NamedSharding)
        spec = normalize_spec(leaf.spec if named else leaf, tensor="out_specs")
        for axis in {a for entry in spec for a in entry_axes(entry)}:
            if axis not in mesh.shape:
                raise UnknownAxisError(
                    f"axis {axis!r} in out_specs {format_spec(spec)!r} is not found in mesh "
                    f"{mesh.text()!r}; valid axes: {choices(mesh.names)}", axis=axis,
                    mesh=mesh)
        kind = leaf.memory_kind if named else None
        pinned.append(PinnedSpec(spec, None if kind in (None, "device") else kind))
    return OutputSpecs(treedef, tuple(pinned))
