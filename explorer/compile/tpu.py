"""TPU topologies for ahead-of-time compiles with no TPU present (through libtpu).

Validated here, before any worker starts, so that a bad name or a missing libtpu is one clear
message rather than a compiler error.
"""

from __future__ import annotations

import importlib.util
import re
from math import prod

from explorer.cost.hardware import tpu_generations
from explorer.errors import InputError, MeshError, choices
from explorer.spec.mesh import MeshSpec


def topology_chips(topology: str) -> int:
    """Chips of a jax TPU topology name such as 'v5e:4x4'; the generations and their torus
    dimensions are the hardware catalog's."""
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
    return prod(dims)


def check_topology(topology: str, mesh: MeshSpec) -> None:
    """Raise unless `topology` is well-formed, fits `mesh`, and libtpu is installed."""
    chips = topology_chips(topology)
    if chips != mesh.device_count:
        raise MeshError(f"TPU topology {topology!r} has {chips} chips but mesh "
                        f"{mesh.text()!r} has {mesh.device_count} devices; they must be equal")
    if importlib.util.find_spec("libtpu") is None:
        raise InputError(
            f"compiling for TPU topology {topology!r} needs libtpu, which is not installed; "
            "install it with: pip install 'sharding-explorer[tpu]' (about 700 MB; no TPU needed)")
