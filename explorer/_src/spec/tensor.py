"""Tensors and their PartitionSpecs as plain data, and the parser for spec text.

A spec has one entry per tensor dimension: None (not split), an axis name, or a tuple of axis
names (split over their product, major to minor). Spec text is tokenized and parsed here; it is
never handed to eval, because it comes from users' widgets and command lines.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import islice
from math import prod

from explorer._src.errors import (
    DivisibilityError,
    DuplicateAxisError,
    RankError,
    SpecError,
    TensorError,
    UnknownAxisError,
    choices,
)
from explorer._src.spec.bounds import MAX_ELEMENTS, MAX_RANK, TEXT_SHOWN, power_text, show
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tokens import tokenize

Entry = None | str | tuple[str, ...]
# A spec: one entry per dimension (None: not split).
Spec = tuple[Entry, ...]

# Bytes per element, by numpy/jax dtype name. Short HLO-style aliases map onto these names.
DTYPE_BYTES = {
    "float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "int32": 4, "int16": 2, "int8": 1, "uint32": 4, "uint16": 2, "uint8": 1, "bool": 1,
}
DTYPE_ALIASES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "s32": "int32",
                 "i32": "int32", "s16": "int16", "s8": "int8", "i8": "int8", "u32": "uint32",
                 "u16": "uint16", "u8": "uint8", "pred": "bool", "f8e4m3fn": "float8_e4m3fn",
                 "f8e5m2": "float8_e5m2"}

class TensorRole(StrEnum):
    """Where a tensor of a Report stands in the program: an input, an output or an
    intermediate (TensorInfo.kind). Here, below the Report, so that the cost model and the
    modules report/report.py imports (report/code.py) name it as the Report does."""

    INPUT = "input"
    OUTPUT = "output"
    INTERMEDIATE = "intermediate"


# Where an input lives, as jax names its memory kinds: the accelerator's own memory, or page-
# locked host memory that the device reads and writes over its host link (PCIe), as ZeRO-Offload
# keeps optimizer state. The program moves a host input to the device where it computes with it
# (`jax.device_put(x, jax.memory.Space.Device)`).
MEMORY_SPACES = ("device", "pinned_host")


def normalize_dtype(dtype) -> str:
    """The dtype's numpy name, from a name, an alias (`bf16`), a numpy/jax dtype or a scalar
    type (`jnp.bfloat16`)."""
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(dtype, type):
        name = dtype.__name__
    else:
        name = getattr(dtype, "name", None)
    name = DTYPE_ALIASES.get(name, name) if isinstance(name, str) else None
    if name not in DTYPE_BYTES:
        raise TensorError(f"dtype {show(dtype)} is not supported; choose one of "
                          f"{choices(DTYPE_BYTES)}")
    return name


@dataclass(frozen=True)
class TensorSpec:
    """One input tensor: its name, global shape, dtype and PartitionSpec (None = replicated).

    `spec` accepts a tuple, a jax PartitionSpec, or text such as "None,model" or "P('data', None)".
    Nothing is allocated: explorer.analyze traces the function on abstract arrays of this
    shape and dtype. The constructor normalizes and checks every field.

    Attributes:
        name: the name the Report gives the input; unique among a request's inputs.
        shape: the global shape, whole numbers >= 1 (an int is read as a 1-d shape), within
            the rank and element bounds.
        dtype: a numpy name (``"bfloat16"``), an alias (``"bf16"``), a numpy or jax dtype;
            stored as the numpy name.
        spec: one entry per dimension: None (not split), a mesh axis name, or a tuple of axis
            names (split over their product, major to minor); () or None for replicated. A
            spec with fewer entries than dimensions leaves the rest unsplit, as jax reads a
            short PartitionSpec; one with more is refused. Checked against the mesh when
            analysed.
        memory_kind: where the input lives, one of MEMORY_SPACES: ``"device"`` (the default)
            or ``"pinned_host"`` (host memory, offloaded); its shards are laid out by `spec`
            either way.

    Raises:
        TensorError: an empty name, a bad shape, an unsupported dtype or memory kind.
        SpecError: a spec that cannot be read.

    Example:
        >>> from explorer import TensorSpec
        >>> w = TensorSpec("w1", (1024, 4096), "bf16", "None,model")
        >>> w.dtype, w.spec, w.nbytes
        ('bfloat16', (None, 'model'), 8388608)
    """

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    spec: tuple[Entry, ...] = field(default=())
    memory_kind: str = "device"

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TensorError(f"tensor name {show(self.name)} must be a non-empty string")
        object.__setattr__(self, "shape", _check_shape(self.name, self.shape))
        object.__setattr__(self, "dtype", normalize_dtype(self.dtype))
        spec = normalize_spec(self.spec, tensor=self.name)
        if 0 < len(spec) < len(self.shape):
            # As jax reads a PartitionSpec shorter than the array's rank: the dimensions it
            # does not name are not split (P('data') on a [batch, seq] array).
            spec = spec + (None,) * (len(self.shape) - len(spec))
        object.__setattr__(self, "spec", spec)
        if self.memory_kind not in MEMORY_SPACES:
            raise TensorError(f"tensor {self.name!r} has memory_kind {show(self.memory_kind)}; "
                              f"choose one of {choices(MEMORY_SPACES)}", tensor=self.name)

    @property
    def rank(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        """The bytes of the whole (global) tensor."""
        return prod(self.shape) * DTYPE_BYTES[self.dtype]


@dataclass(frozen=True)
class KeyDataSpec(TensorSpec):
    """An input that the user's program receives as a typed PRNG key array (jax's ``key<fry>``
    dtype, as every Flax NNX state holds in its ``Rngs``), described as jax lays it out: its
    key data, uint32, with the key's own trailing dimension (2 for threefry, 4 for rbg), which
    no mesh axis splits. The program is traced with the data wrapped back into keys of `impl`
    (jax.random.wrap_key_data), so its parameter is what jax passes for the keys."""

    impl: str = "threefry2x32"       # jax's name of the key's implementation


def _check_shape(name: str, shape) -> tuple[int, ...]:
    """The shape as a tuple of Python ints, each >= 1, of rank <= MAX_RANK and at most
    MAX_ELEMENTS elements: beyond that XLA's int64 byte sizes overflow."""
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if isinstance(shape, str | bytes) or not hasattr(shape, "__iter__"):
        raise TensorError(f"tensor {name!r} has shape {show(shape)}; a shape is a sequence of "
                          "whole numbers, e.g. (1024, 4096)", tensor=name)
    # islice: an endless iterable must not hang the check.
    given = tuple(islice(iter(shape), MAX_RANK + 1))
    if len(given) > MAX_RANK:
        raise TensorError(f"tensor {name!r} has shape {show(shape)} with more than {MAX_RANK} "
                          f"dimensions; the limit is {MAX_RANK}", tensor=name)
    dims = []
    for d in given:
        try:
            if isinstance(d, bool) or type(d).__name__ == "bool_":
                raise TypeError
            dim = operator.index(d)      # int and numpy integers, not floats
        except TypeError:
            dim = None
        if dim is None or dim < 1:
            raise TensorError(f"tensor {name!r} has dimension {show(d)} in shape {show(given)}; "
                              "every dimension must be a whole number >= 1", tensor=name)
        dims.append(dim)
    dims = tuple(dims)
    if prod(dims) > MAX_ELEMENTS:
        raise TensorError(f"tensor {name!r} has shape {show(dims)}, {_elements(prod(dims))} "
                          f"elements; the limit is {power_text(MAX_ELEMENTS)} elements per tensor "
                          "(its bytes must fit XLA's int64 sizes); shrink a dimension",
                          tensor=name)
    return dims


def _elements(n: int) -> str:
    return str(n) if n < 10 ** 30 else f"about 2**{n.bit_length() - 1}"


def normalize_spec(spec, tensor: str | None = None) -> tuple[Entry, ...]:
    """Spec entries as a tuple of None | str | tuple[str, ...], from any accepted form: None,
    text, a tuple or list of entries, or a jax PartitionSpec."""
    if spec is None:
        return ()
    if isinstance(spec, str):
        return parse_spec(spec, tensor=tensor)
    if hasattr(spec, "partitions") and hasattr(spec, "unreduced"):   # a jax PartitionSpec
        if spec.unreduced or getattr(spec, "reduced", None):
            raise SpecError(f"spec {show(spec)} of tensor {tensor!r} has unreduced or reduced "
                            "axes, which an input cannot have; give its entries only",
                            tensor=tensor)
        spec = tuple(spec.partitions)
    if not isinstance(spec, tuple | list):
        raise SpecError(f"spec {show(spec)} of tensor {tensor!r} is not text (e.g. "
                        "'data,None'), a tuple of entries (e.g. ('data', None)) or a jax "
                        "PartitionSpec", tensor=tensor)
    entries = []
    for entry in spec:
        if entry is None or isinstance(entry, str):
            entries.append(None if entry in (None, "_", "None") else entry)
        elif isinstance(entry, tuple | list):
            if not all(isinstance(a, str) for a in entry):
                raise SpecError(f"spec entry {show(entry)} of tensor {tensor!r} must hold axis "
                                "names", tensor=tensor)
            entries.append(tuple(entry) if len(entry) > 1 else (entry[0] if entry else None))
        else:
            raise SpecError(f"spec entry {show(entry)} of tensor {tensor!r} is not None, an "
                            "axis name or a tuple of axis names", tensor=tensor)
    return tuple(entries)


def _tokens(text: str, tensor: str | None):
    def fail(rest):
        raise SpecError(f"cannot read spec {show(text, TEXT_SHOWN)} at {show(rest)}: expected "
                        "an axis name, None, _, '(' ,')' or ','", tensor=tensor)

    toks = tokenize(text, fail)
    bad = next((v for k, v in toks if k == "punct" and v in "=:"), None)
    if bad:
        fail(text[text.index(bad):].strip())
    return toks


def parse_spec(text: str, tensor: str | None = None) -> tuple[Entry, ...]:
    """Parse `None,model`, `_,model`, `(data,fsdp),None`, or the same wrapped as `P('data', None)`.

    Empty text, or `replicated` (format_spec's text for a spec of no entries), means
    replicated. The text is tokenized, never evaluated; axis names may be quoted.

    Args:
        text: the spec text.
        tensor: the tensor it is for, named in the error.

    Returns:
        One entry per dimension: None, an axis name, or a tuple of axis names; () for
        replicated.

    Raises:
        SpecError: text that is not a spec.

    Example:
        >>> from explorer import parse_spec
        >>> parse_spec("(data,fsdp),None")
        (('data', 'fsdp'), None)
        >>> parse_spec("P('data', None)")
        ('data', None)
        >>> parse_spec("replicated")
        ()
    """
    if not isinstance(text, str):
        raise SpecError(f"spec {show(text)} is not text such as 'data,None'; to pass entries, "
                        "use a tuple or a TensorSpec", tensor=tensor)
    if text.strip() == "replicated":
        return ()
    toks = _tokens(text, tensor)
    if len(toks) >= 2 and toks[0] in (("name", "P"), ("name", "PartitionSpec")) \
            and toks[1] == ("punct", "("):
        if toks[-1] != ("punct", ")"):
            raise SpecError(f"spec {show(text, TEXT_SHOWN)} opens P( but does not close it",
                            tensor=tensor)
        toks = toks[2:-1]
    entries: list[Entry] = []
    i = 0

    def fail(msg):
        raise SpecError(f"cannot read spec {show(text, TEXT_SHOWN)}: {msg}", tensor=tensor)

    while i < len(toks):
        kind, val = toks[i]
        if kind == "punct" and val == "(":
            names, i = [], i + 1
            while i < len(toks) and toks[i] != ("punct", ")"):
                k, v = toks[i]
                if k == "quoted" or (k == "name" and v not in ("None", "_")):
                    names.append(v)
                elif toks[i] != ("punct", ","):
                    fail(f"unexpected {show(v)} inside a tuple of axis names")
                i += 1
            if i == len(toks):
                fail("a '(' is not closed")
            entries.append(tuple(names) if len(names) > 1 else (names[0] if names else None))
            i += 1
        elif kind == "name" and val in ("None", "_"):
            entries.append(None)
            i += 1
        elif kind in ("name", "quoted"):
            entries.append(val)
            i += 1
        else:
            fail(f"unexpected {show(val)} where an entry should be")
        if i < len(toks):
            if toks[i] != ("punct", ","):
                fail(f"expected ',' between entries, found {show(toks[i][1])}")
            i += 1
    return tuple(entries)


def entry_axes(entry: Entry) -> tuple[str, ...]:
    if entry is None:
        return ()
    return (entry,) if isinstance(entry, str) else tuple(entry)


def format_entry(entry: Entry) -> str:
    axes = entry_axes(entry)
    if not axes:
        return "None"
    return axes[0] if len(axes) == 1 else "(" + ",".join(axes) + ")"


def format_spec(spec: tuple[Entry, ...]) -> str:
    """Spec as the text the parser reads back, e.g. `data,None`; `replicated` for no entries."""
    if not any(entry_axes(e) for e in spec):
        return "replicated"
    return ",".join(format_entry(e) for e in spec)


def check_spec(tensor: TensorSpec, mesh: MeshSpec) -> None:
    """Raise the SpecError subclass naming what is wrong with this tensor's spec on this mesh."""
    name, spec, shape = tensor.name, tensor.spec, tensor.shape
    if spec and len(spec) != len(shape):
        raise RankError(
            f"spec {show(format_spec(spec), TEXT_SHOWN)} of tensor {name!r} has {len(spec)} "
            f"entries but the tensor has rank {len(shape)} (shape {shape}); give at most one entry "
            "per dimension, None for a dimension that is not split", tensor=name, mesh=mesh)
    used: dict[str, int] = {}
    for dim, entry in enumerate(spec):
        for axis in entry_axes(entry):
            if axis not in mesh.shape:
                raise UnknownAxisError(
                    f"axis {show(axis)} in the spec of tensor {name!r} is not found in mesh "
                    f"{mesh.text()!r}; valid axes: {choices(mesh.names)}",
                    tensor=name, axis=axis, mesh=mesh)
            if axis in used:
                raise DuplicateAxisError(
                    f"axis {axis!r} is used for dimensions {used[axis]} and {dim} of tensor "
                    f"{name!r}; a mesh axis can split only one dimension", tensor=name,
                    axis=axis, mesh=mesh)
            used[axis] = dim
        axes = entry_axes(entry)
        size = prod(mesh.size(a) for a in axes)
        if shape[dim] % size:
            raise DivisibilityError(
                f"tensor {name!r}: shape={shape} is incompatible with mesh {mesh.text()!r}: "
                f"dimension {dim} (size {shape[dim]}) is not divisible by "
                f"{'×'.join(axes)}={size}; choose a size that is a multiple of {size} or "
                "fewer axes", tensor=name, axis=axes[-1], mesh=mesh)
