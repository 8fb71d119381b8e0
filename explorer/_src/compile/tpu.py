"""TPU topologies for ahead-of-time compiles with no TPU present (through libtpu).

Validated here, before any worker starts, so that a bad name or a missing libtpu is one clear
message rather than a compiler error.
"""

from __future__ import annotations

import importlib.util
import re
from math import prod

from explorer._src.cost.catalog.tpu import tpu_generations
from explorer._src.errors import InputError, MeshError, choices
from explorer._src.spec.mesh import MeshSpec


def topology_chips(topology: str) -> int:
    """Chips of a jax TPU topology name such as 'v5e:4x4'; the generations and their torus
    dimensions are the hardware catalog's."""
    return prod(topology_shape(topology)[1])


def topology_shape(topology: str) -> tuple[str, list[int]]:
    """The generation and the dimensions of a jax TPU topology name: 'v5e:4x4' -> ('v5e',
    [4, 4]); an InputError for a name that is not one."""
    generations = tpu_generations()
    m = re.fullmatch(r"([a-z0-9]+):(\d+(?:x\d+)*)", topology or "")
    if not m or m.group(1) not in generations:
        raise InputError(
            f"TPU topology {topology!r} is not written as GENERATION:SHAPE; generations "
            f"{choices(generations)}, e.g. 'v5e:4x4', 'v6e:16x16' or 'v4:16x16x16'")
    gen, dims = m.group(1), [int(d) for d in m.group(2).split("x")]
    rank = generations[gen]
    if len(dims) != rank or min(dims) < 1:
        raise InputError(
            f"TPU topology {topology!r}: a {gen} slice has {rank} dimensions, e.g. "
            f"{gen}:{'x'.join(['4'] * rank)}")
    return gen, dims


# The chips of one TPU host, as libtpu lays a slice out by default (jax's
# get_topology_desc(chips_per_host_bounds=...)): 2x2x1 for v4, v5e, v5p and v6e alike.
HOST_BOUNDS = (2, 2, 1)


def host_bounds(topology: str) -> tuple[int, int, int]:
    """The chips_per_host_bounds to compile `topology` with: libtpu's default host of 2x2x1
    chips, shrunk along a dimension where the slice is smaller than one host (a one-chip
    `v6e:1x1` is a host of 1x1x1), since libtpu refuses a slice its hosts do not divide.

    Raises:
        InputError: a dimension that is neither below the host's nor a multiple of it (e.g.
            v5e:3x3), which libtpu refuses only after starting the compile."""
    gen, dims = topology_shape(topology)
    rank = len(dims)
    x, y, z = dims + [1] * (3 - rank)
    bounds = (min(x, HOST_BOUNDS[0]), min(y, HOST_BOUNDS[1]), min(z, HOST_BOUNDS[2]))
    for i, (d, b) in enumerate(zip((x, y, z), bounds, strict=True)):
        if d % b:
            examples = f"{gen}:2x2 or {gen}:4x4" if rank == 2 else f"{gen}:2x2x1 or {gen}:4x4x4"
            raise InputError(
                f"TPU topology {topology!r} cannot be laid out on TPU hosts: a host holds "
                f"{'x'.join(map(str, HOST_BOUNDS))} chips, and dimension {i} ({d}) is neither "
                f"below {HOST_BOUNDS[i]} nor a multiple of it; e.g. {examples}")
    return bounds


def check_topology(topology: str, mesh: MeshSpec) -> None:
    """Raise unless `topology` is well-formed, can be laid out on hosts, fits `mesh`, and
    libtpu is installed."""
    host_bounds(topology)                  # well-formed and laid out on hosts, or raises
    chips = topology_chips(topology)
    if chips != mesh.device_count:
        raise MeshError(f"TPU topology {topology!r} has {chips} chips but mesh "
                        f"{mesh.text()!r} has {mesh.device_count} devices; they must be equal")
    if not libtpu_installed():
        raise InputError(
            f"compiling for TPU topology {topology!r} needs libtpu, which is not installed; "
            "install it with: pip install 'sharding-explorer[tpu]' (about 700 MB; no TPU needed)")


def libtpu_installed() -> bool:
    """Whether libtpu (the tpu extra), which compiles for TPU topologies, can be imported."""
    return importlib.util.find_spec("libtpu") is not None


def tpu_backend(topology: str, slices: int = 1) -> str:
    """A TPU compile's `CompileResult.backend`: "tpu v5e:4x4" for one slice, "tpu v5e:4x4 x2"
    for two of them joined by the data-center network."""
    return f"tpu {topology}" + (f" x{slices}" if slices > 1 else "")


def tpu_backend_slices(backend: str) -> tuple[str, int] | None:
    """The topology and slice count of a `tpu_backend` text; None for another backend."""
    m = re.fullmatch(r"tpu (\S+)(?: x(\d+))?", backend)
    return (m.group(1), int(m.group(2) or 1)) if m else None
