"""The catalog's targets by name: the named catalog (`targets`), the name grammar a name is
read with (`get_target`), the names with a given device count (`targets_with_chips`), a TPU
target's jax topology, and the dtypes a target computes in.

Target names:

- TPU: ``tpu-<generation>-<slice shape>``, e.g. ``tpu-v5e-16x16``, ``tpu-v5p-4x4x4``; several
  slices joined by the data-center network add ``-<N>slices``: ``tpu-v5e-16x16-4slices``.
  The shape may be written in either order (``tpu-v5e-8x4`` is Google's 4x8 slice).
- NVIDIA: ``<gpu>-<G>`` for G GPUs of one NVLink node (G in 1, 2, 4, 8), ``<gpu>-8x<N>`` for N
  DGX nodes of 8 GPUs joined by InfiniBand: ``h100-8``, ``h100-8x4`` (32 GPUs).
- ``bow-2000``: one Graphcore Bow-2000 IPU-Machine (4 IPUs).
- ``cpu``: the host the explorer compiles on; it has no sourced speeds, so nothing is predicted.
"""

from __future__ import annotations

import re
from math import prod

from explorer._src.cost.catalog.gpu import _GPU, _GPU_SIZES, GPUS_PER_NODE, _gpu_target
from explorer._src.cost.catalog.others import _bow_target, _cpu_target
from explorer._src.cost.catalog.tpu import (
    _TPU,
    _tpu_shape_ok,
    _tpu_shapes_with,
    _tpu_target,
    tpu_generations,
)
from explorer._src.cost.catalog.types import Target
from explorer._src.errors import TargetError, choices

# ---------------------------------------------------------------------------------------------
# The catalog.

def _catalog() -> dict[str, Target]:
    out: dict[str, Target] = {}

    def add(t: Target) -> None:
        out[t.name] = t

    for gen_name in ("v5e", "v6e", "v4", "v5p"):
        for shape in _TPU[gen_name].shapes:
            add(_tpu_target(gen_name, shape))
    add(_tpu_target("v5e", (16, 16), 2))
    add(_tpu_target("v5e", (16, 16), 4))
    add(_tpu_target("v6e", (16, 16), 2))
    add(_tpu_target("v5p", (8, 16, 16), 2))
    for gpu in _GPU:
        for g in _GPU_SIZES:
            add(_gpu_target(gpu, g))
        for nodes in (2, 4, 16, 32):
            add(_gpu_target(gpu, GPUS_PER_NODE, nodes))
    add(_bow_target())
    add(_cpu_target())
    return out


_CATALOG = _catalog()

_TPU_NAME = re.compile(r"tpu-(?P<gen>v\w+?)-(?P<shape>\d+(?:x\d+)*)(?:-(?P<slices>\d+)slices)?")
_GPU_NAME = re.compile(r"(?P<gpu>[a-z]\d+)-(?P<gpus>\d+)(?:x(?P<nodes>\d+))?")


def targets() -> dict[str, Target]:
    """The named targets, in listing order (TPUs by generation, GPUs, IPU, CPU).

    get_target() also accepts any other valid name of the same grammar, such as
    ``tpu-v5e-8x4`` or ``h100-8x64``.

    Returns:
        Name -> Target; a new dict on each call.
    """
    return dict(_CATALOG)


def get_target(name: str | Target) -> Target:
    """The Target called `name`; the error lists the valid names and the name grammar.

    Args:
        name: a catalog name (see targets()) or any name of the grammar in this module's
            docstring, case and surrounding spaces ignored; a Target is returned as it is.

    Returns:
        The Target.

    Raises:
        TargetError: an unknown name, a TPU generation or slice shape that does not exist,
            or a GPU count that is not a node or whole nodes.

    Example:
        >>> from explorer import get_target
        >>> t = get_target("h100-8x4")          # 4 DGX nodes of 8 GPUs
        >>> t.chips, [(a.name, a.size) for a in t.axes]
        (32, [('node', 4), ('gpu', 8)])
    """
    if isinstance(name, Target):
        return name
    if not isinstance(name, str):
        raise TargetError(f"target {name!r} is not a name; {_grammar()}")
    key = name.strip().lower()
    if key in _CATALOG:
        return _CATALOG[key]
    m = _TPU_NAME.fullmatch(key)
    if m:
        return _parse_tpu(name, m)
    m = _GPU_NAME.fullmatch(key)
    if m and m["gpu"] in _GPU:
        return _parse_gpu(name, m)
    raise TargetError(f"unknown target {name!r}; {_grammar()}", target=name)


def _grammar() -> str:
    gens = ", ".join(f"'tpu-{g}-...'" for g in _TPU)
    return (f"valid targets: {choices(_CATALOG)}. Also any valid TPU slice ({gens}, "
            "plus '-<N>slices' for several slices over DCN) and any "
            f"'<gpu>-8x<N>' for N DGX nodes, gpu one of {choices(_GPU)}")


def _parse_tpu(name: str, m: re.Match) -> Target:
    gen_name = m["gen"]
    if gen_name not in _TPU:
        raise TargetError(f"unknown TPU generation {gen_name!r} in {name!r}; generations: "
                          f"{choices(_TPU)}", target=name)
    gen = _TPU[gen_name]
    shape = tuple(int(d) for d in m["shape"].split("x"))
    if len(shape) != gen.rank or not _tpu_shape_ok(gen, shape):
        listed = ", ".join("x".join(map(str, s)) for s in gen.shapes)
        more = (" or any whole number of 4x4x4 cubes up to "
                f"{gen.max_chips} chips" if gen.rank == 3 else "")
        raise TargetError(f"{name!r}: TPU {gen_name} has no {m['shape']} slice; TPU "
                          f"{gen_name} slices are {listed}{more} (axes in either order)",
                          target=name)
    slices = int(m["slices"]) if m["slices"] else 1
    if slices < 1:
        raise TargetError(f"{name!r}: the slice count must be at least 1", target=name)
    return _tpu_target(gen_name, shape, slices)


def _parse_gpu(name: str, m: re.Match) -> Target:
    gpus = int(m["gpus"])
    nodes = int(m["nodes"]) if m["nodes"] else 1
    if nodes > 1 and gpus != GPUS_PER_NODE:
        raise TargetError(f"{name!r}: multi-node targets use whole nodes of "
                          f"{GPUS_PER_NODE} GPUs, e.g. '{m['gpu']}-8x{nodes}'", target=name)
    if nodes < 1:
        raise TargetError(f"{name!r}: the node count must be at least 1, e.g. "
                          f"'{m['gpu']}-8x2' for 2 nodes of {GPUS_PER_NODE} GPUs", target=name)
    if gpus not in _GPU_SIZES:
        raise TargetError(f"{name!r}: a node has {GPUS_PER_NODE} GPUs; write "
                          f"'{m['gpu']}-G' with G in {choices(_GPU_SIZES)} or "
                          f"'{m['gpu']}-8xN' for N nodes", target=name)
    return _gpu_target(m["gpu"], gpus, nodes)


def tpu_topology_of(target: Target) -> str | None:
    """jax's topology name of a one-slice TPU target (`tpu-v5e-4x4` -> `v5e:4x4`); None for a
    target of several slices."""
    slices = tpu_slices_of(target)
    return slices[0] if slices is not None and slices[1] == 1 else None


def tpu_slices_of(target: Target) -> tuple[str, int] | None:
    """jax's topology name of a TPU target's slice and how many of them it joins by DCN:
    `tpu-v5e-4x4` -> ("v5e:4x4", 1), `tpu-v5e-16x16-4slices` -> ("v5e:16x16", 4); None for a
    target that is no TPU slice."""
    m = _TPU_NAME.fullmatch(target.name)
    if m is None or m["gen"] not in tpu_generations():
        return None
    return f"{m['gen']}:{m['shape']}", int(m["slices"] or 1)


# Multi-node GPU targets up to this many nodes, and multi-slice TPU targets of slices of at
# least this many chips, up to this many slices, are offered for a device count
# (targets_with_chips); the grammar accepts larger ones.
MAX_GPU_NODES = 128
MIN_SLICE_CHIPS = 16
MAX_SLICES = 64


def targets_with_chips(n: int) -> list[str]:
    """Every target name of the grammar with exactly n devices, by family: NVIDIA nodes (one
    node's 1, 2, 4 or 8 GPUs, or 2 to MAX_GPU_NODES whole nodes of 8), GPUs first where n is a
    multiple of 8; then each TPU generation's slices of n chips, then its multi-slice targets
    (2 to MAX_SLICES slices of at least MIN_SLICE_CHIPS chips, one documented shape each)."""
    if n < 1:
        return []
    gpus = []
    for gpu in ("h100", "h200", "a100", "b200"):
        if n in _GPU_SIZES:
            gpus.append(f"{gpu}-{n}")
        elif n % GPUS_PER_NODE == 0 and 2 <= n // GPUS_PER_NODE <= MAX_GPU_NODES:
            gpus.append(f"{gpu}-{GPUS_PER_NODE}x{n // GPUS_PER_NODE}")
    tpus = []
    for gen_name in ("v5e", "v5p", "v6e", "v4"):
        gen = _TPU[gen_name]
        tpus += [f"tpu-{gen_name}-{'x'.join(map(str, s))}" for s in _tpu_shapes_with(gen, n)]
        for slices in range(2, MAX_SLICES + 1):
            if n % slices or n // slices < MIN_SLICE_CHIPS:
                continue
            shape = next((s for s in gen.shapes if prod(s) == n // slices), None)
            if shape is not None:
                tpus.append(f"tpu-{gen_name}-{'x'.join(map(str, shape))}-{slices}slices")
    return gpus + tpus if n % GPUS_PER_NODE == 0 else tpus + gpus


# The dtypes a program computes in on every target: jax and XLA compile them for the CPU, the
# GPUs and the TPUs alike.
COMPUTE_DTYPES = ("float32", "bfloat16", "float16")
_FP8 = ("float8_e4m3fn", "float8_e5m2")


def compute_dtypes(target: str | Target | None = None) -> tuple[str, ...]:
    """The dtypes a workload may compute in on `target`: float32, bfloat16 and float16
    everywhere, and the 8-bit floats where the chip has a published rate for them (H100, H200,
    B200); for no target, the three."""
    if not target:
        return COMPUTE_DTYPES
    chip = get_target(target).chip
    return COMPUTE_DTYPES + tuple(d for d in _FP8 if d in chip.peak_flops)
