"""Where a request's mesh comes from: `mesh=`, or, where it is omitted, the inputs and the caller.

JAX's docs write a sharded program with no mesh beside it: every input carries a
`NamedSharding(mesh, P(...))` (a jax array, or a `jax.ShapeDtypeStruct(..., sharding=...)`), or
the caller is inside `jax.set_mesh(mesh)` (or the legacy `with mesh:`), and
`jax.jit(f).lower(*args)` needs nothing more. So with `mesh=` omitted the mesh is the one those
name, with the axis types it has; where two of them differ, nothing is guessed: the request is
refused, naming both.

A jax mesh the program's code may hold itself (a `shard_map(..., mesh=mesh)`) is only equal to
the request's if it is the same abstract mesh, device kind included; so the program is traced
over the user's own mesh wherever one equal to the request's is at hand (`MeshChoice.trace`),
and over one made from the request's axes only where none is.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from explorer._src.compile.caller_context import CallerContext
from explorer._src.compile.lowering import argument_names
from explorer._src.errors import InputError
from explorer._src.spec.mesh import AxisType, MeshSpec, check_axis_type, parse_mesh
from explorer._src.spec.tensor import TensorSpec

MISSING = ("mesh= is missing, and nothing else names one: no input carries a NamedSharding and "
           "the call is under no jax.set_mesh(mesh); give the device mesh, e.g. "
           "mesh='data=2,model=4' (or a jax.sharding.Mesh), or give the inputs "
           "NamedShardings on your mesh")


@dataclass(frozen=True)
class MeshChoice:
    """The request's mesh, and the jax meshes of the user's that go with it."""

    spec: MeshSpec
    # The user's own jax mesh (a Mesh or an AbstractMesh) equal to `spec`, which the program
    # is traced over; None where the user gave none (a mesh given as text).
    trace: Any = None
    # A jax Mesh given as mesh=, put in force (jax.set_mesh and the legacy `with mesh:`) while
    # the program is traced, as it would be where the program runs under it.
    in_force: Any = None


def is_jax_mesh(mesh) -> bool:
    """A jax.sharding.Mesh or AbstractMesh (never imports jax: a caller that has not imported
    it cannot hold one)."""
    if "jax" not in sys.modules:
        return False
    from jax.sharding import AbstractMesh, Mesh

    return isinstance(mesh, Mesh | AbstractMesh)


def is_concrete(mesh) -> bool:
    """A jax.sharding.Mesh, of devices (not an AbstractMesh)."""
    if "jax" not in sys.modules:
        return False
    from jax.sharding import Mesh

    return isinstance(mesh, Mesh)


def spec_of(mesh) -> MeshSpec:
    """A jax mesh as a MeshSpec: its axis names, sizes and each axis's type."""
    kinds = tuple(check_axis_type(t) for t in mesh.axis_types)
    return MeshSpec(tuple(mesh.axis_names), tuple(int(s) for s in mesh.axis_sizes), kinds)


def choose_mesh(given, axis_type: AxisType | str, fn, inputs: tuple,
                context: CallerContext) -> MeshChoice:
    """The request's mesh: `given` (text, a mapping, a MeshSpec or a jax mesh), or where it is
    None, the mesh the NamedShardings of `fn`'s `inputs` and the caller's mesh contexts
    name.

    Raises:
        InputError: `given` is None and nothing names a mesh, or two of them differ (both
            named, with where each came from).
        MeshError: a malformed `given`.
    """
    found = _meshes_found(fn, inputs, context)
    if given is None:
        if not found:
            raise InputError(MISSING)
        (first_where, first), *others = found
        spec = spec_of(first)
        for where, mesh in others:
            other = spec_of(mesh)
            if other != spec:
                raise InputError(
                    f"mesh= is missing, and the meshes that name one differ: {first_where} is "
                    f"on {_described(spec)}, {where} on {_described(other)}; put them on one "
                    "mesh, or choose one with mesh=")
        return MeshChoice(spec, trace=_abstract(first))
    if is_jax_mesh(given):
        spec = spec_of(given)
        return MeshChoice(spec, trace=_abstract(given),
                          in_force=given if is_concrete(given) else None)
    spec = parse_mesh(given, axis_type)
    same = next((m for _, m in found if spec_of(m) == spec), None)
    return MeshChoice(spec, trace=None if same is None else _abstract(same))


def _described(spec: MeshSpec) -> str:
    return f"{spec.text()} ({spec.types_text()} axes)" if not spec.mixed else spec.text()


def _abstract(mesh):
    """A jax mesh's abstract mesh (an AbstractMesh is its own)."""
    return mesh.abstract_mesh if is_concrete(mesh) else mesh


def _meshes_found(fn, inputs: tuple, context: CallerContext) -> list[tuple[str, Any]]:
    """(where, jax mesh) of every mesh the inputs' shardings and the caller's contexts name,
    the inputs first, in argument order."""
    found: list[tuple[str, Any]] = []
    if "jax" in sys.modules:
        import jax
        from jax.sharding import NamedSharding

        from explorer._src.api.pytrees import leaf_name

        params = argument_names(fn, len(inputs)) if fn is not None else []
        try:
            leaves = jax.tree_util.tree_flatten_with_path(
                inputs, is_leaf=lambda x: isinstance(x, TensorSpec))[0]
        except (TypeError, ValueError):
            # Inputs jax cannot flatten (a dict with keys of mixed types) name no mesh; the
            # inputs' own checks say what is wrong with them, after the mesh is chosen.
            leaves = []
        for path, leaf in leaves:
            sharding = getattr(leaf, "sharding", None)
            if isinstance(sharding, NamedSharding) and is_jax_mesh(sharding.mesh):
                name = ".".join(p for p in (params[path[0].idx], leaf_name(path[1:])) if p)
                found.append((f"input {name!r}", sharding.mesh))
    if context.mesh is not None:
        found.append(("the caller's jax.set_mesh", context.mesh))
    if context.legacy_mesh is not None:
        found.append(("the caller's `with mesh:`", context.legacy_mesh))
    return found
