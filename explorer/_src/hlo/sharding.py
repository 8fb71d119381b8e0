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

Anything else (including XLA's experimental named-sharding text, which
starts with a mesh) raises ``ValueError`` rather than being guessed at.
"""

from __future__ import annotations

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
    total = math.prod(dims)
    iota = _IOTA.fullmatch(rest)
    if iota:
        reshape = ints(iota.group(1))
        perm = ints(iota.group(2)) if iota.group(2) else list(range(len(reshape)))
        if math.prod(reshape) != total or sorted(perm) != list(range(len(reshape))):
            raise ValueError(f"inconsistent iota tile assignment {spec!r}")
        devs = np.arange(total).reshape(reshape).transpose(perm).reshape(dims)
    elif _EXPLICIT.fullmatch(rest):
        flat = ints(rest)
        if len(flat) != total:
            raise ValueError(f"{spec!r} lists {len(flat)} devices for dims {dims}")
        devs = np.asarray(flat, dtype=np.int64).reshape(dims)
    else:
        raise ValueError(f"cannot parse device list {rest!r} in {spec!r}")
    return dims, devs


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
