"""Collective device groups read out of XLA optimized-HLO text, and the mesh axes they span.

Conventions
-----------
A mesh with axis names ``("data", "model")`` and sizes ``(2, 4)`` numbers its logical devices
row-major: the device at mesh coordinates ``c`` is ``np.arange(8).reshape(2, 4)[c]``. The ids that
appear in ``replica_groups`` / ``source_target_pairs`` of an SPMD-partitioned module (compiled with
``use_global_device_ids=true``) are these logical ids, i.e. positions in the flattened
``mesh.devices`` array, not the physical ``Device.id`` values. Permuting the device array of a
``jax.sharding.Mesh`` therefore does not change the text at all.

The three textual forms of ``replica_groups``
---------------------------------------------
1. Explicit list: ``replica_groups={{0,4},{1,5},{2,6},{3,7}}``. Each inner brace is one group, in
   the order XLA uses (the order matters for all-gather / all-to-all concatenation).
   ``replica_groups={}`` means a single group holding every device. ``shard_map`` collectives
   (``psum``, ``all_gather``, ...) come out in this form.

2. Iota: ``replica_groups=[G,S]<=[d0,d1,...]T(p0,p1,...)``. Take ``np.arange(d0*d1*...)``,
   reshape it to ``(d0, d1, ...)``, transpose by the permutation (omitted means identity), and
   reshape to ``(G, S)``: the ``G`` rows are the groups of ``S`` devices. For example
   ``[4,2]<=[2,4]T(1,0)`` is ``{{0,4},{1,5},{2,6},{3,7}}``. The SPMD partitioner prints this form
   when XLA's mesh-axes materialization is off (``--xla_enable_rgv3_materialization=false``).

3. Mesh axes (XLA's "replica group v3"; the default for partitioner-made collectives, under both
   Shardy and GSPMD, in the XLA that ships with jax 0.10.2):
   ``replica_groups=mesh['a'=2,'b'=4][, device_ids=(...)] {'b','a'}``.
   The mesh part defines a device array: ``device_ids`` flattened (``np.arange(N)`` when absent)
   reshaped to the axis sizes. ``device_ids`` is printed either as an iota ``[d0,...]T(perm)``
   (``np.arange(N).reshape(d).transpose(perm)`` flattened) or, per XLA's printer, as a plain
   comma list of ids when the order is no iota (not seen from jax, since logical ids are). The
   braces list the axes that one group spans; all other axes are held fixed. Groups come out in
   row-major order of the held axes, and within a group devices run row-major over the listed
   axes *in the listed order* (so ``{'b','a'}`` walks ``b`` slowest). ``{}`` makes every device its
   own group. An axis reference may be a sub-axis ``'a':(pre)size``: split axis ``a`` of size
   ``n`` into ``(pre, size, n // (pre*size))`` major-to-minor and span the middle factor; several
   sub-axes of one axis split it into the factors between them.

   The axis names are usually NOT the user's mesh axes. By default XLA makes up a synthetic mesh
   per collective (``'axis_0'``, ``'axis_1'``, ..., often with a size-1 spacer axis) whose
   ``device_ids`` re-order the devices so that one axis covers the group. For a ``data=2,
   model=4`` mesh, a sum over ``model`` prints as
   ``mesh['axis_0'=4,'axis_1'=1,'axis_2'=2], device_ids=([2,4]T(1,0)) {'axis_0'}`` and a sum over
   both axes as ``mesh['axis_0'=8,'axis_1'=1] {'axis_0'}``. Only with
   ``--xla_enable_hlo_sharding_v3=true`` do the user's names appear
   (``mesh['data'=2,'model'=4] {'model'}``), and even then some collectives keep synthetic
   names. So the names are never trusted here: the groups are expanded to device ids and the
   user's axes are recovered by comparing device sets (``axes_of_groups``).

``source_target_pairs={{0,1},{1,2}}`` of a collective-permute is always an explicit list; pairs
whose source equals the target (devices that keep their own data) are common.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum

import numpy as np

from explorer._src.hlo.module import close_bracket, ints

# The lookbehind keeps an attribute or name that merely ends in "replica_groups" from matching.
_RG_RE = re.compile(r"(?<![\w.])replica_groups=")
_STP_RE = re.compile(r"(?<![\w.])source_target_pairs=\{")
_INTS = r"\d+(?:\s*,\s*\d+)*"
_IOTA_RE = re.compile(rf"\[({_INTS})\]<=\[({_INTS})\](?:T\(({_INTS})\))?")
_MESH_RE = re.compile(r"mesh\[([^\]]*)\]")
# device_ids is either an iota over a reshape (`[8,4]T(1,0)`) or a flat comma list of ids.
_DEVICE_IDS_RE = re.compile(rf"\s*,\s*device_ids=\(\s*(\[{_INTS}\](?:T\({_INTS}\))?|{_INTS})\s*\)")
_MESH_AXIS_RE = re.compile(r"\s*(?:'([^']*)'|\"([^\"]*)\"|([^=,\s]+))\s*=\s*(\d+)\s*")
_AXIS_REF_RE = re.compile(
    r"\s*(?:'([^']*)'|\"([^\"]*)\"|([^:,\s{}()]+))\s*(?::\s*\(\s*(\d+)\s*\)\s*(\d+))?\s*"
)


def _iota(reshape_dims: list[int], perm: list[int] | None) -> np.ndarray:
    """Flat ``np.arange(prod).reshape(reshape_dims).transpose(perm)``, as XLA's iota tiles."""
    arr = np.arange(int(np.prod(reshape_dims))).reshape(reshape_dims)
    if perm is not None:
        if sorted(perm) != list(range(len(reshape_dims))):
            raise ValueError(f"bad iota transpose {perm} for dims {reshape_dims}")
        arr = arr.transpose(perm)
    return arr.reshape(-1)


def _parse_explicit(body: str, num_devices: int) -> list[list[int]]:
    inner = body[1:-1].strip()
    if not inner:
        return [list(range(num_devices))]
    groups = re.findall(r"\{([^{}]*)\}", inner)
    return [list(ints(g)) if g.strip() else [] for g in groups]


def _mesh_split(
    sizes: list[int], refs: list[tuple[int, tuple[int, int] | None]]
) -> tuple[list[int], list[int]]:
    """Factor every mesh axis so each referenced (sub-)axis is one dimension of its own.

    Returns the factored dimension sizes (mesh order, major to minor within an axis) and, for
    each ref in the given order, the index of its dimension. A full-axis ref is the sub-axis
    ``(1, n)``; padding factors fill the gaps between and after sub-axes of one axis.
    """
    by_axis: dict[int, list[int]] = {}
    for k, (axis, _) in enumerate(refs):
        by_axis.setdefault(axis, []).append(k)
    dims: list[int] = []
    ref_dim = [0] * len(refs)
    for axis, n in enumerate(sizes):
        ks = by_axis.get(axis, [])
        if not ks:
            dims.append(n)
            continue
        spans = {k: refs[k][1] or (1, n) for k in ks}
        covered = 1
        for k in sorted(ks, key=lambda k: spans[k][0]):
            pre, size = spans[k]
            if pre % covered or pre < covered:
                raise ValueError(f"overlapping sub-axes on mesh axis {axis}")
            if pre > covered:
                dims.append(pre // covered)
            ref_dim[k] = len(dims)
            dims.append(size)
            covered = pre * size
        if n % covered:
            raise ValueError(f"sub-axes of mesh axis {axis} (size {n}) do not divide it")
        if covered < n:
            dims.append(n // covered)
    return dims, ref_dim


def _parse_mesh(text: str) -> list[list[int]]:
    """Groups of the ``mesh[...] [, device_ids=(...)] {axes}`` form (text starts at ``mesh[``)."""
    m = _MESH_RE.match(text)
    if m is None:
        raise ValueError(f"cannot parse mesh replica groups {text[:120]!r}")
    names: list[str] = []
    sizes: list[int] = []
    for entry in m.group(1).split(","):
        am = _MESH_AXIS_RE.fullmatch(entry)
        if am is None:
            raise ValueError(f"cannot parse mesh axis {entry!r}")
        names.append(next(g for g in am.groups()[:3] if g is not None))
        sizes.append(int(am.group(4)))
    n = int(np.prod(sizes))
    pos = m.end()

    devices = np.arange(n)
    dm = _DEVICE_IDS_RE.match(text, pos)
    if dm is not None:
        spec = dm.group(1)
        if spec.startswith("["):
            im = re.fullmatch(rf"\[({_INTS})\](?:T\(({_INTS})\))?", spec)
            assert im is not None  # guaranteed by _DEVICE_IDS_RE
            devices = _iota(ints(im.group(1)), ints(im.group(2)) if im.group(2) else None)
        else:
            devices = np.array(ints(spec))
        if devices.size != n:
            raise ValueError(f"device_ids has {devices.size} ids for a mesh of {n}")
        pos = dm.end()

    am = re.compile(r"\s*\{([^{}]*)\}").match(text, pos)
    if am is None:
        raise ValueError(f"mesh replica groups without an axes list: {text[:160]!r}")
    refs: list[tuple[int, tuple[int, int] | None]] = []
    if am.group(1).strip():
        for entry in am.group(1).split(","):
            rm = _AXIS_REF_RE.fullmatch(entry)
            if rm is None:
                raise ValueError(f"cannot parse mesh axis reference {entry!r}")
            name = next(g for g in rm.groups()[:3] if g is not None)
            if name not in names:
                raise ValueError(f"axis {name!r} is not in mesh {names}")
            sub = (int(rm.group(4)), int(rm.group(5))) if rm.group(4) else None
            refs.append((names.index(name), sub))

    dims, ref_dim = _mesh_split(sizes, refs)
    # Held dims first (mesh order), spanned dims last in the listed order, then every row of
    # group_size consecutive entries is one group: XLA's own expansion of this form.
    held = [d for d in range(len(dims)) if d not in ref_dim]
    group_size = int(np.prod([dims[d] for d in ref_dim], dtype=np.int64))
    arr = devices.reshape(dims).transpose(held + ref_dim).reshape(-1, group_size)
    return arr.tolist()


def device_groups(line: str, num_devices: int) -> list[list[int]] | None:
    """Device groups of one HLO instruction line's ``replica_groups=...`` attribute.

    Expanded to explicit lists of device ids, each group in the order the HLO gives. None if the
    line has no ``replica_groups``. An empty ``replica_groups={}`` means one group of all devices
    ``[0..num_devices-1]``. Raises ValueError on text that is none of the three known forms.
    """
    m = _RG_RE.search(line)
    if m is None:
        return None
    start = m.end()
    rest = line[start:]
    if rest.startswith("{"):
        return _parse_explicit(rest[: close_bracket(rest, 0)], num_devices)
    if rest.startswith("["):
        im = _IOTA_RE.match(rest)
        if im is None:
            raise ValueError(f"cannot parse iota replica groups {rest[:120]!r}")
        shape = ints(im.group(1))
        if len(shape) != 2:
            raise ValueError(f"iota replica groups {im.group(0)!r} are not [groups,size]")
        num_groups, group_size = shape
        flat = _iota(ints(im.group(2)), ints(im.group(3)) if im.group(3) else None)
        if num_groups * group_size != flat.size:
            raise ValueError(f"iota replica groups {im.group(0)!r} do not cover their devices")
        return flat.reshape(num_groups, group_size).tolist()
    if rest.startswith("mesh["):
        return _parse_mesh(rest)
    raise ValueError(f"unknown replica_groups form {rest[:120]!r}")


def source_target_pairs(line: str) -> list[tuple[int, int]] | None:
    """The ``source_target_pairs={{0,1},{1,2}}`` of a collective-permute line; None if absent."""
    m = _STP_RE.search(line)
    if m is None:
        return None
    start = m.end() - 1
    body = line[start : close_bracket(line, start)]
    pairs = []
    for inner in re.findall(r"\{([^{}]*)\}", body[1:-1]):
        ids = ints(inner)
        if len(ids) != 2:
            raise ValueError(f"source_target_pairs entry {{{inner}}} is not a pair")
        pairs.append((ids[0], ids[1]))
    return pairs


def _groups_along(axis_sizes: tuple[int, ...], axes: list[int]) -> set[frozenset[int]]:
    """Device groups of a collective over ``axes`` of a row-major mesh, as sets."""
    ids = np.arange(int(np.prod(axis_sizes))).reshape(axis_sizes)
    held = [a for a in range(len(axis_sizes)) if a not in axes]
    size = int(np.prod([axis_sizes[a] for a in axes], dtype=np.int64))
    rows = ids.transpose(held + axes).reshape(-1, size)
    return {frozenset(r) for r in rows.tolist()}


def axes_of_groups(
    groups: list[list[int]], axis_sizes: tuple[int, ...], axis_names: tuple[str, ...],
    within: Sequence[Sequence[int]] | None = None,
) -> tuple[str, ...]:
    """The mesh axes (mesh order) whose device groups, as sets, equal ``groups`` as sets.

    `within`: blocks of devices (a partition of the mesh) that the collective was cut at. Its
    groups are then those of a collective over the axes, each cut into its parts in one
    block. libtpu cuts a collective of a multi-slice program at the slices' edges: the part
    inside each slice has the groups of the axes cut by the slices, its DCN leg those cut by
    the chips of one partition id in every slice (explorer._src.hlo.megascale.SliceLayout's
    `members` and `peers`). On a mesh axis that spans the slices only in part (data=4 on 2
    slices), each part is over that axis, on one tier of its links.

    Size-1 axes are never included. Groups that are all singletons give ``()``, as do groups that
    match no subset of axes (including ids outside the mesh).
    """
    sizes = tuple(int(s) for s in axis_sizes)
    # The only candidate is the set of axes along which some group varies: a collective over any
    # other subset would differ there. Checking that candidate fully settles the match.
    axes = _varying(groups, sizes, axis_names)
    if not axes:
        return ()
    expected = _groups_along(sizes, axes)
    if within is not None:
        expected = _cut(expected, within)
    if {frozenset(g) for g in groups} != expected:
        return ()
    return tuple(axis_names[a] for a in axes)


def _cut(groups: set[frozenset[int]], blocks: Sequence[Sequence[int]]) -> set[frozenset[int]]:
    """Each group cut into its parts in one block; devices in no block stay together."""
    block_of = {d: k for k, block in enumerate(blocks) for d in block}
    return {frozenset(d for d in g if block_of.get(d) == k)
            for g in groups for k in {block_of.get(d) for d in g}}


def spanned_axes(
    groups: list[list[int]], axis_sizes: tuple[int, ...], axis_names: tuple[str, ...]
) -> tuple[str, ...]:
    """The mesh axes (mesh order) along which some group varies: those that hold its groups.
    Equal to axes_of_groups where the groups are whole axes; for groups that are part of an
    axis (e.g. every fourth device of `data=16`, a split the TPU compiler makes itself) the
    axes that contain them."""
    return tuple(axis_names[a] for a in _varying(groups, tuple(int(s) for s in axis_sizes),
                                                 axis_names))


def _varying(groups: list[list[int]], sizes: tuple[int, ...],
             axis_names: tuple[str, ...]) -> list[int]:
    if len(sizes) != len(axis_names):
        raise ValueError(f"{len(sizes)} axis sizes for {len(axis_names)} axis names")
    n = int(np.prod(sizes, dtype=np.int64))
    flat = [d for g in groups for d in g]
    if not sizes or not flat or any(d < 0 or d >= n for d in flat):
        return []
    coords = np.stack(np.unravel_index(np.asarray(flat), sizes), axis=1)
    varying: set[int] = set()
    offset = 0
    for g in groups:
        block = coords[offset : offset + len(g)]
        offset += len(g)
        if len(g) > 1:
            varying.update(np.flatnonzero((block != block[0]).any(axis=0)).tolist())
    return sorted(varying)


def connected_groups(pairs: list[tuple[int, int]]) -> list[list[int]]:
    """Devices that exchange data through a permute's (source, target) pairs, as connected
    groups (a ring is one group), each in ascending order, by their smallest device."""
    parent: dict[int, int] = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for s, t in pairs:
        parent[find(s)] = find(t)
    groups: dict[int, list[int]] = {}
    for d in sorted(parent):
        groups.setdefault(find(d), []).append(d)
    return list(groups.values())


def axes_of_pairs(
    pairs: list[tuple[int, int]], axis_sizes: tuple[int, ...], axis_names: tuple[str, ...]
) -> tuple[str, ...]:
    """For collective-permute: the mesh axes (mesh order) along which any pair's coordinates differ.

    Pairs with source == target contribute nothing. Raises ValueError for an id outside the mesh.
    """
    sizes = tuple(int(s) for s in axis_sizes)
    if len(sizes) != len(axis_names):
        raise ValueError(f"{len(sizes)} axis sizes for {len(axis_names)} axis names")
    n = int(np.prod(sizes, dtype=np.int64))
    moved = [(s, t) for s, t in pairs if s != t]
    if not sizes or not moved:
        return ()
    src, dst = np.asarray(moved).T
    if src.min() < 0 or dst.min() < 0 or max(src.max(), dst.max()) >= n:
        raise ValueError(f"source_target_pairs name a device outside a mesh of {n}")
    differ = np.stack(np.unravel_index(src, sizes)) != np.stack(np.unravel_index(dst, sizes))
    return tuple(name for name, d in zip(axis_names, differ.any(axis=1), strict=True) if d)


class RingDirection(StrEnum):
    """Which way a collective-permute's data goes round the ring of one mesh axis."""

    NEXT = "+"        # every device sends to the next (coordinate + 1, the last to the first)
    PREVIOUS = "-"    # every device sends to the previous
    NONE = ""         # any other permute, or no permute at all


def ring_direction(
    pairs: list[tuple[int, int]], axis_sizes: tuple[int, ...], axis_names: tuple[str, ...]
) -> RingDirection:
    """For collective-permute: NEXT ("+") when every device sends to the next device along one
    mesh axis (coordinate + 1, the last to the first), PREVIOUS ("-") when every one sends to
    the previous, NONE ("") for any other permute (several axes, longer hops, or a ring of two,
    where both are one).

    On a torus the two directions of a ring run on different links, so a "+" and a "-"
    permute of the same ring can be in flight together (the bidirectional collective matmul).
    """
    axes = axes_of_pairs(pairs, axis_sizes, axis_names)
    if len(axes) != 1:
        return RingDirection.NONE
    a = axis_names.index(axes[0])
    size = int(axis_sizes[a])
    moved = [(s, t) for s, t in pairs if s != t]
    if size < 3 or not moved:
        return RingDirection.NONE
    src, dst = np.asarray(moved).T
    sizes = tuple(int(s) for s in axis_sizes)
    steps = set(((np.unravel_index(dst, sizes)[a] - np.unravel_index(src, sizes)[a]) % size)
                .tolist())
    if steps == {1}:
        return RingDirection.NEXT
    return RingDirection.PREVIOUS if steps == {size - 1} else RingDirection.NONE
