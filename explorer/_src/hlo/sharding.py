"""HLO sharding text read into a :class:`~explorer._src.spec.layout.Tiling`.

Pure functions over text (numpy and the standard library only), tested against XLA's own
HloSharding where jax is importable.

HLO sharding text forms handled by :func:`tiling_from_hlo`
---------------------------------------------------------
``{replicated}``                     every device holds the whole tensor
``{maximal device=3}``               only device 3 holds it (one tile, one replica)
``{manual}``                         every device holds its own data (shard_map
                                     body); ``manual == N``
``{unreduced}``                      every device holds a partial sum of the
                                     whole tensor; ``unreduced == N``
``{devices=[2,4]<=[8]}``             iota tile assignment, optionally with a
``{devices=[..]<=[2,4]T(1,0)}``      reshape+transpose of ``arange``
``{devices=[2,2]0,2,1,3}``           explicit device list
``last_tile_dim_replicate``          last tile-assignment dim = replicas
``last_tile_dims={manual, ...}``     trailing dims are subgroups of the given
                                     types (manual / unreduced / replicated)
``metadata={...}``, ``shard_as N``,  ignored: they do not change placement
``shard_like N``
``{unknown ...}``                    raises ``ValueError``: the partitioner has
                                     not decided yet, so there is nothing to draw
tuple ``{{..}, {..}}``               rejected (one sharding per array)

XLA's named form, which the XLA of jax 0.12 prints (each dimension's mesh axes, major first):

``{mesh['data'=2,'model'=4], [{'data'}, {}]}``   dim 0 over data; model replicated
``{mesh[...], device_ids=(...), [...]}``         the mesh's devices in another order
``{'model':(2)2}``                               a sub-axis: the part of size 2 after
                                                 the major part of size 2
``{'data', ?}``, ``{?}``                         open: the same placement
``replicated={...}``, ``unreduced={...}``        axes held as copies, or as partial sums
``{mesh[], replicated}``, ``{mesh[...], manual}`` the whole-tensor forms

Anything else raises ``ValueError`` rather than being guessed at.
"""

from __future__ import annotations

import itertools
import math
import re

import numpy as np

from explorer._src.hlo.module import close_bracket, ints
from explorer._src.spec.layout import Tiling

# --------------------------------------------------------------------------- HLO text

# Canonical subgroup order, as XLA's HloSharding::Subgroup sorts them.
_SUBGROUP_ORDER = ("manual", "unreduced", "replicated")
_DEVICES = re.compile(r"devices=\[([\d,\s]*)\](.*)", re.S)
_IOTA = re.compile(r"<=\[([\d,\s]+)\](?:T\(([\d,\s]+)\))?", re.S)
_EXPLICIT = re.compile(r"\d+(?:,\d+)*")


def _scan_top_level(text: str, seps: str) -> list[str]:
    """Split ``text`` at characters in ``seps`` that are outside brackets and quotes.

    Metadata (``op_name="jit(f)/{...}"``) may contain any bracket, so a plain
    regex split would cut it apart.
    """
    parts, buf, depth, quote, escape = [], [], 0, False, False
    for ch in text:
        if quote:
            buf.append(ch)
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                quote = False
            continue
        if ch == '"':
            quote = True
        elif ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced brackets in sharding {text!r}")
        elif depth == 0 and ch in seps:
            parts.append("".join(buf))
            buf = []
            continue
        buf.append(ch)
    if depth or quote:
        raise ValueError(f"unbalanced brackets or quotes in sharding {text!r}")
    parts.append("".join(buf))
    return [p.strip() for p in parts if p.strip()]


def _strip_outer(text: str) -> str:
    """Drop an optional ``sharding=`` prefix and one pair of enclosing braces."""
    t = text.strip()
    if t.startswith("sharding="):
        t = t[len("sharding=") :].strip()
    if t.startswith("{") and t.endswith("}") and len(_scan_top_level(t, " ,")) == 1:
        t = t[1:-1].strip()
    return t


def _tile_assignment(spec: str) -> tuple[list[int], np.ndarray]:
    m = _DEVICES.fullmatch(spec)
    if not m:
        raise ValueError(f"cannot parse tile assignment {spec!r}")
    dims, rest = list(ints(m.group(1))), m.group(2).strip()
    if not dims:
        raise ValueError(f"empty tile assignment dims in {spec!r}")
    return dims, _device_list(rest, math.prod(dims), spec).reshape(dims)


def _device_list(text: str, total: int, whole: str) -> np.ndarray:
    """`total` device ids, flat, written as an iota (``<=[2,4]T(1,0)``) or listed
    (``0,2,1,3``)."""
    iota = _IOTA.fullmatch(text)
    if iota:
        reshape = ints(iota.group(1))
        perm = ints(iota.group(2)) if iota.group(2) else list(range(len(reshape)))
        if math.prod(reshape) != total or sorted(perm) != list(range(len(reshape))):
            raise ValueError(f"inconsistent iota device assignment in {whole!r}")
        return np.arange(total).reshape(reshape).transpose(perm).ravel()
    if _EXPLICIT.fullmatch(text):
        flat = np.asarray(ints(text), dtype=np.int64)
        if flat.size != total:
            raise ValueError(f"{whole!r} lists {flat.size} devices for {total}")
        return flat
    raise ValueError(f"cannot parse device list {text!r} in {whole!r}")


def _whole(rank: int, n: int, **kind: int) -> Tiling:
    return Tiling((1,) * rank, n, tuple(range(n)), **kind)


def tiling_from_hlo(text: str, rank: int, num_devices: int) -> Tiling:
    """Parse one (non-tuple) HLO sharding for a tensor of the given rank.

    ``num_devices`` is the computation's device count; it sizes the
    whole-tensor forms (``{replicated}``, ``{manual}``, ``{unreduced}``) and
    bounds the ids in tiled forms.  See the module docstring for the forms
    understood; others raise ``ValueError``.
    """
    if num_devices < 1:
        raise ValueError(f"num_devices must be >= 1, got {num_devices}")
    body = _strip_outer(text)
    if body.startswith("{"):
        raise ValueError(f"{text!r} is a tuple sharding; split it with split_tuple_sharding first")
    tokens = _scan_top_level(body, " \t\n")
    if not tokens:
        raise ValueError(f"empty sharding {text!r}")
    kept = _placement_tokens(tokens)
    if not kept:
        raise ValueError(f"sharding {text!r} names no placement")
    head, rest = kept[0], kept[1:]

    if head in ("replicated", "manual", "unreduced", "unknown"):
        if rest:
            raise ValueError(f"unexpected {rest} after {head!r} in {text!r}")
        if head == "unknown":
            raise ValueError(f"{text!r}: placement not decided yet (pre-propagation HLO)")
        if head == "replicated":
            return _whole(rank, num_devices)
        return _whole(rank, num_devices, **{head: num_devices})

    if head == "maximal":
        m = re.fullmatch(r"device=(\d+)", rest[0]) if len(rest) == 1 else None
        if not m:
            raise ValueError(f"cannot parse maximal sharding {text!r}")
        dev = int(m.group(1))
        if dev >= num_devices:
            raise ValueError(f"device {dev} out of range for {num_devices} devices in {text!r}")
        return Tiling((1,) * rank, 1, (dev,))

    if head.startswith("mesh["):
        return _named_tiling(body, rank, num_devices, text)
    if not head.startswith("devices="):
        raise ValueError(f"unsupported HLO sharding {text!r}")
    dims, devs = _tile_assignment(head)
    types = _subgroup_types(rest, text)
    if len(types) > 1 and "last_tile_dim_replicate" in rest:
        raise ValueError(f"both last_tile_dim_replicate and last_tile_dims in {text!r}")
    if len(dims) - len(types) != rank:
        raise ValueError(
            f"{text!r} tiles {len(dims) - len(types)} data dims but the tensor has rank {rank}"
        )
    flat = devs.ravel()
    if flat.min() < 0 or flat.max() >= num_devices:
        raise ValueError(f"device ids in {text!r} fall outside 0..{num_devices - 1}")
    return _canonical_tiling(dims, devs, types, rank)


_MESH_AXIS = re.compile(r"'([^']*)'=(\d+)")
_AXIS_REF = re.compile(r"'([^']*)'(?::\((\d+)\)(\d+))?")


def _named_tiling(body: str, rank: int, num_devices: int, text: str) -> Tiling:
    """The Tiling of XLA's named form (see the module doc): the mesh's device array, each
    mesh axis cut at the sub-axes any entry names, then the parts each dimension is split
    over in order, the unreduced parts, and the rest as copies."""
    parts = _scan_top_level(body, ",")
    mesh = re.fullmatch(r"mesh\[(.*)\]", parts[0], re.S)
    if mesh is None:
        raise ValueError(f"cannot parse the mesh of {text!r}")
    axes = _MESH_AXIS.findall(mesh.group(1))
    names, sizes = [a for a, _ in axes], [int(n) for _, n in axes]
    devices, dims, unreduced = None, None, []
    for part in parts[1:]:
        if part == "replicated":
            return _whole(rank, num_devices)
        if part == "manual":
            return _whole(rank, num_devices, manual=num_devices)
        if part.startswith("device_ids="):
            devices = _mesh_devices(part[len("device_ids="):].strip(), sizes, text)
        elif part.startswith("["):
            dims = [_axis_refs(d, names, sizes, text)
                    for d in _scan_top_level(part[1:-1], ",")]
        elif part.startswith("unreduced="):
            unreduced = _axis_refs(part[len("unreduced="):], names, sizes, text)
        elif part.startswith("replicated=") or part.startswith("metadata="):
            pass              # copies are what no dimension and no partial sum is over
        else:
            raise ValueError(f"unsupported part {part!r} of the named sharding {text!r}")
    if dims is None or len(dims) != rank:
        raise ValueError(f"{text!r} does not shard the {rank} dims of its tensor")
    if math.prod(sizes) != num_devices:
        raise ValueError(f"{text!r} has a mesh of {math.prod(sizes)} devices, not "
                         f"{num_devices}")
    if devices is None:
        devices = np.arange(num_devices).reshape(sizes)
    # Cut each axis at every sub-axis boundary any entry names (a part of pre-size p and size
    # n spans [p, p*n) of the axis's major-to-minor cumulative sizes).
    cuts = [{1, size} for size in sizes]
    for axis, pre, size in (r for refs in dims + [unreduced] for r in refs):
        cuts[axis] |= {pre, pre * size}
    bounds = [sorted(c) for c in cuts]
    fine = [(axis, lo) for axis, b in enumerate(bounds) for lo in b[:-1]]
    devices = devices.reshape([hi // lo for b in bounds for lo, hi in itertools.pairwise(b)])

    def parts_of(refs) -> list[int]:
        return [i for axis, pre, size in refs for i, (a, lo) in enumerate(fine)
                if a == axis and pre <= lo < pre * size]

    tiled = [parts_of(refs) for refs in dims]
    summed = parts_of(unreduced)
    used = {i for group in tiled for i in group} | set(summed)
    if len(used) != sum(map(len, tiled)) + len(summed):
        raise ValueError(f"{text!r} uses a mesh axis twice")
    copies = [i for i in range(len(fine)) if i not in used]
    order = [i for group in tiled for i in group] + summed + copies
    shape = [math.prod(devices.shape[i] for i in group) for group in tiled]
    shape += [math.prod(devices.shape[i] for i in summed),
              math.prod(devices.shape[i] for i in copies)]
    return _canonical_tiling(shape, devices.transpose(order).reshape(shape),
                             ["unreduced", "replicated"], rank)


def _axis_refs(text: str, names: list[str], sizes: list[int],
               whole: str) -> list[tuple[int, int, int]]:
    """``{'data', 'model':(2)2, ?}`` as (axis index, pre-size, size) per entry, major first;
    an open dimension's ``?`` places nothing."""
    inner = text.strip()
    if not (inner.startswith("{") and inner.endswith("}")):
        raise ValueError(f"cannot parse the axes {text!r} of {whole!r}")
    refs = []
    for entry in _scan_top_level(inner[1:-1], ","):
        if entry == "?":
            continue
        m = _AXIS_REF.fullmatch(entry)
        if m is None or m.group(1) not in names:
            raise ValueError(f"unknown mesh axis {entry!r} in {whole!r}")
        axis = names.index(m.group(1))
        pre, size = (int(m.group(2)), int(m.group(3))) if m.group(2) else (1, sizes[axis])
        if sizes[axis] % (pre * size):
            raise ValueError(f"sub-axis {entry!r} does not divide its axis in {whole!r}")
        refs.append((axis, pre, size))
    return refs


def _mesh_devices(text: str, sizes: list[int], whole: str) -> np.ndarray:
    """A named mesh's ``device_ids=(...)``: an iota (``[8,4]T(1,0)``) or an explicit list, in
    the mesh's shape."""
    inner = text[1:-1].strip() if text.startswith("(") and text.endswith(")") else text
    inner = inner.replace(" ", "")
    # An iota is written here without the `<=` of a tile assignment's.
    written = "<=" + inner if inner.startswith("[") else inner
    return _device_list(written, math.prod(sizes), whole).reshape(sizes)


def _placement_tokens(tokens: list[str]) -> list[str]:
    """The tokens that place the tensor: those that only steer propagation (``shard_as N``,
    ``shard_like N``) or carry provenance (``metadata=``) are dropped."""
    kept, i = [], 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("metadata="):
            i += 1
        elif tok in ("shard_as", "shard_like"):
            i += 2
        else:
            kept.append(tok)
            i += 1
    return kept


def _subgroup_types(attributes: list[str], text: str) -> list[str]:
    """The types of the trailing tile-assignment dims, one per dim, from the attributes after
    ``devices=[...]`` (``last_tile_dim_replicate``, ``last_tile_dims={...}``) of `text`."""
    types: list[str] = []
    for tok in attributes:
        if tok == "last_tile_dim_replicate":
            types.append("replicated")
        elif tok.startswith("last_tile_dims="):
            inner = tok[len("last_tile_dims=") :].strip()
            if not (inner.startswith("{") and inner.endswith("}")):
                raise ValueError(f"cannot parse {tok!r} in {text!r}")
            for t in _scan_top_level(inner[1:-1], ", "):
                if t not in _SUBGROUP_ORDER:
                    raise ValueError(f"unknown subgroup type {t!r} in {text!r}")
                types.append(t)
        else:
            raise ValueError(f"unsupported attribute {tok!r} in {text!r}")
    return types


def _canonical_tiling(dims: list[int], devs: np.ndarray, types: list[str],
                      rank: int) -> Tiling:
    """The Tiling of a checked tile assignment: the subgroup dims brought into XLA's canonical
    order and same-typed ones merged, so spellings XLA treats as equal give equal Tilings."""
    tiles = tuple(dims[:rank])
    order = sorted(range(len(types)), key=lambda j: _SUBGROUP_ORDER.index(types[j]))
    devs = devs.transpose(list(range(rank)) + [rank + j for j in order])
    group = {
        t: math.prod(dims[rank + j] for j in range(len(types)) if types[j] == t)
        for t in _SUBGROUP_ORDER
    }
    devs = devs.reshape(tiles + (group["manual"], group["unreduced"], group["replicated"]))
    if math.prod(tiles) == 1 and sum(g > 1 for g in group.values()) <= 1:
        # One group spanning everything: XLA calls this {manual}/{unreduced}/
        # {replicated}, where device order is meaningless too.
        devs = np.sort(devs, axis=None)
    replicas = group["manual"] * group["unreduced"] * group["replicated"]
    return Tiling(
        tiles,
        replicas,
        tuple(devs.ravel()),
        manual=group["manual"],
        unreduced=group["unreduced"],
    )


def tuple_parts(sharding: str) -> list[str]:
    """The element shardings of a tuple sharding `{{a}, {b}}`: `["{a}", "{b}"]`; ValueError
    for text cut short."""
    text = re.sub(r"/\*.*?\*/", "", sharding).strip()[1:-1]
    parts, i = [], 0
    while i < len(text):
        if text[i] == "{":
            end = close_bracket(text, i)
            parts.append(text[i:end])
            i = end
        else:
            i += 1
    return parts
