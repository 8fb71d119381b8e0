"""A function that needs the legacy `with mesh:` mesh while it is traced, as EasyDeL's constraint
helpers do (they read `jax.interpreters.pxla.thread_resources.env.physical_mesh` and assert it is
not empty)."""

from __future__ import annotations

import warnings

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def legacy_mesh():
    """The legacy `with mesh:` mesh, read as model libraries read it (jax deprecates it)."""
    from jax.interpreters import pxla

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return pxla.thread_resources.env.physical_mesh


def reads_the_legacy_mesh(x):
    """x doubled, constrained to be split over `data` on the legacy mesh, which must be there."""
    physical = legacy_mesh()
    assert not physical.empty, "No mesh found under this context manager"
    return jax.lax.with_sharding_constraint(x * 2, NamedSharding(physical, P("data", None)))
