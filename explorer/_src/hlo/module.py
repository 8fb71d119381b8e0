"""Readers of XLA HLO module text: instructions, shapes, metadata and source locations.

Pure functions over text, so that they can be tested on captured modules and run outside the
compile workers. jaxlib's HloModule objects expose only names, opcodes and operands, so the text
is the one complete source.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from math import prod

from explorer._src.hlo.collectives import collective_kind

# Bytes per element of HLO primitive types. Sub-byte types count as fractions.
HLO_DTYPE_BYTES = {
    "pred": 1, "s2": 0.25, "u2": 0.25, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "s16": 2,
    "u16": 2, "s32": 4, "u32": 4, "s64": 8, "u64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8,
    "c64": 8, "c128": 16, "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3": 1, "f8e4m3fnuz": 1,
    "f8e5m2fnuz": 1, "f8e4m3b11fnuz": 1, "f8e3m4": 1, "f4e2m1fn": 0.5, "f8e8m0fnu": 1,
}
HLO_TO_NUMPY = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "f64": "float64",
                "s32": "int32", "s16": "int16", "s8": "int8", "s64": "int64", "u32": "uint32",
                "u16": "uint16", "u8": "uint8", "u64": "uint64", "pred": "bool",
                "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}

_ARRAY = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\]")
_COMMENT = re.compile(r"/\*.*?\*/")
# The patterns the readers apply to every instruction, compiled once here: re's own cache
# costs a lookup per call, and parsing a Report's modules makes some thousand such calls.
_OPERAND = re.compile(r"%([^\s,()]+)")
_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_STACK_FRAME_ID = re.compile(r"stack_frame_id=(\d+)")
_OPCODE = re.compile(r"([a-z][\w\-]*)\(")


@dataclass(frozen=True)
class Array:
    dtype: str
    dims: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return int(prod(self.dims) * HLO_DTYPE_BYTES.get(self.dtype, 4))

    def text(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


def ints(text: str | None) -> tuple[int, ...]:
    """Every integer in an HLO attribute, in order, signs kept: `{1,-2}` -> (1, -2), `32x8` ->
    (32, 8), None -> (). The one integer-list reader of the HLO readers."""
    return tuple(int(x) for x in _INT.findall(text or ""))


_INT = re.compile(r"-?\d+")


def parse_shape(text: str) -> list[Array]:
    """The arrays of an HLO shape, flattening tuples: `(f32[8,4]{1,0}, bf16[2])` -> two Arrays."""
    text = _COMMENT.sub("", text)
    arrays = []
    for dtype, dims in _ARRAY.findall(text):
        if dtype == "token":
            continue
        # Layouts and dynamic bounds (`<=8`) follow the dims; keep the static sizes only.
        arrays.append(Array(dtype, tuple(int(d.lstrip("<=")) for d in dims.split(",") if d)))
    return arrays


def shape_memory_spaces(text: str) -> list[tuple[Array, int]]:
    """Each array of an HLO shape with the memory space its layout names (`S(5)`: host memory,
    see HOST_MEMORY_SPACE), 0 (the device's main memory) where it names none."""
    text = _COMMENT.sub("", text)
    out = []
    for m in _ARRAY.finditer(text):
        dtype, dims = m.groups()
        if dtype == "token":
            continue
        array = Array(dtype, tuple(int(d.lstrip("<=")) for d in dims.split(",") if d))
        layout = text[m.end():close_bracket(text, m.end())] if text[m.end():m.end() + 1] == "{" \
            else ""
        space = _MEMORY_SPACE.search(layout)
        out.append((array, int(space.group(1)) if space else 0))
    return out


@dataclass(frozen=True)
class Instruction:
    """One instruction line of an HLO module. The fields are the line's raw parts; what is read
    from them (operands, arrays, metadata) is parsed once, on first use, and kept."""
    name: str
    shape: str             # the shape text, tuple shapes included
    opcode: str
    operand_text: str      # the text between the opcode's parentheses
    attrs: str             # everything after the operand list
    computation: str
    is_root: bool = False

    @cached_property
    def operands(self) -> tuple[str, ...]:
        return tuple(_OPERAND.findall(_COMMENT.sub("", self.operand_text)))

    @cached_property
    def arrays(self) -> tuple[Array, ...]:
        return tuple(parse_shape(self.shape))

    @cached_property
    def memory_spaces(self) -> tuple[tuple[Array, int], ...]:
        """Its arrays with their memory spaces (shape_memory_spaces)."""
        return tuple(shape_memory_spaces(self.shape))

    def attr(self, key: str) -> str | None:
        """The raw value of `key=...`, brace- and paren-balanced; read once per key (the
        readers ask each fusion for its `calls` many times)."""
        read = self._attr_values
        if key not in read:
            read[key] = balanced_value(self.attrs, key)
        return read[key]

    @cached_property
    def _attr_values(self) -> dict[str, str | None]:
        return {}

    @property
    def custom_call_target(self) -> str:
        """What a custom-call runs (e.g. "AllocateBuffer", "tpu_custom_call"); "" otherwise."""
        return (self.attr("custom_call_target") or "").strip('"')

    def callee(self, *keys: str) -> str:
        """The name of the computation this instruction calls through the first of `keys` it
        carries (`calls` when none are given: a fusion's or async-start's body); "" if none."""
        for key in keys or ("calls",):
            value = self.attr(key)
            if value:
                return value.lstrip("%")
        return ""

    @cached_property
    def op_name(self) -> str:
        m = _OP_NAME.search(self.attrs)
        return m.group(1) if m else ""

    @cached_property
    def stack_frame_id(self) -> int | None:
        m = _STACK_FRAME_ID.search(self.attrs)
        return int(m.group(1)) if m else None

    @cached_property
    def sharding(self) -> str | None:
        return self.attr("sharding")


@lru_cache(maxsize=128)
def _key_pattern(key: str) -> re.Pattern:
    """Where `key=` starts an attribute: at the start or after a space or comma."""
    return re.compile(r"(?:^|[\s,])" + re.escape(key) + r"=")


def balanced_value(text: str, key: str) -> str | None:
    """The value of `key=` in an attribute list, up to the comma that closes it at depth 0."""
    m = _key_pattern(key).search(text)
    if not m:
        return None
    start = i = m.end()
    depth = 0
    in_str = False
    while i < len(text):
        c = text[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "{([":
            depth += 1
        elif c in "})]":
            if depth == 0:
                break
            depth -= 1
        elif c == "," and depth == 0:
            break
        i += 1
    return text[start:i].strip()


def close_bracket(text: str, start: int) -> int:
    """Index just past the bracket group that opens at text[start]; ValueError if it never
    closes (a truncated line)."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
    raise ValueError(f"unbalanced brackets in {text[start:start + 80]!r}")


_MEMORY_SPACE = re.compile(r"S\((\d+)\)")
# XLA's memory space of host memory, `S(5)` in a layout: where jax's memory kind pinned_host
# puts an array (XLA's Layout::kHostMemorySpace).
HOST_MEMORY_SPACE = 5


def subshape(shape: str, index: tuple[int, ...]) -> str | None:
    """The text of part `index` of an HLO shape: "(f32[2], (s32[], bf16[4]))" at (1, 1) is
    "bf16[4]"; None when the index does not exist."""
    shape = _COMMENT.sub("", shape)      # XLA marks long tuples' parts: /*index=5*/
    for i in index:
        shape = shape.strip()
        if not shape.startswith("("):
            return None
        parts = split_top_level(shape[1:close_bracket(shape, 0) - 1])
        if i >= len(parts):
            return None
        shape = parts[i]
    return shape.strip()


def split_top_level(text: str) -> list[str]:
    """Split at the commas outside any brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:])
    return parts


def memory_space(shape: str) -> int:
    """The memory space of an array shape's layout, `{1,0:T(8,128)S(1)}` -> 1; 0 when none."""
    layout = shape[shape.find("{"):] if "{" in shape else ""
    m = _MEMORY_SPACE.search(layout)
    return int(m.group(1)) if m else 0


def entry_memory_spaces(text: str) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The memory space of each entry parameter and of each element of the entry's result, from
    the module's `entry_computation_layout={(p0, p1)->(r0, r1)}`; None when the module has none.
    An offloaded input or output reads HOST_MEMORY_SPACE; the layout is the one place every
    backend writes it (the CPU's parameter instructions do not)."""
    at = text.find("entry_computation_layout={")
    if at < 0:
        return None
    start = at + len("entry_computation_layout=")
    body = _COMMENT.sub("", text[start + 1:close_bracket(text, start) - 1])
    params_end = close_bracket(body, 0)
    params = split_top_level(body[1:params_end - 1])
    result = body[params_end:].lstrip()
    result = result[2:].strip() if result.startswith("->") else result
    results = (split_top_level(result[1:close_bracket(result, 0) - 1])
               if result.startswith("(") else [result])
    return (tuple(memory_space(p) for p in params if p.strip()),
            tuple(memory_space(r) for r in results if r.strip()))


# One entry of the module header's `input_output_alias={ {0}: (2, {}, may-alias), ... }`: the
# output index, the parameter number and the parameter's index (a donated input).
_ALIAS = re.compile(r"\{([\d,\s]*)\}:\s*\((\d+),\s*\{[\d,\s]*\}")


def input_output_aliases(text: str) -> dict[tuple[int, ...], int]:
    """The outputs written into an input's buffer (donated inputs), from the module header's
    `input_output_alias={ {1}: (3, {}, may-alias) }`: output index (() for a single array) ->
    entry parameter number; {} when the header has none (nothing donated, or nothing the
    compiler could reuse)."""
    header = next((line for line in text.splitlines() if line.startswith("HloModule ")), "")
    at = header.find("input_output_alias={")
    if at < 0:
        return {}
    start = at + len("input_output_alias=")
    body = header[start + 1:close_bracket(header, start) - 1]
    return {ints(index): int(param) for index, param in _ALIAS.findall(body)}


_HEAD = re.compile(r"\s*(ROOT\s+)?%?([^\s=]+)\s*=\s*")
_COMP = re.compile(r"^(ENTRY\s+)?%?([^\s(]+)\s*\(.*\{\s*$")


def parse_instruction(line: str, computation: str = "") -> Instruction | None:
    """One instruction line, or None for a line that is not one (or is cut short)."""
    try:
        return _parse_instruction(line, computation)
    except ValueError:
        return None


def _parse_instruction(line: str, computation: str) -> Instruction | None:
    m = _HEAD.match(line)
    if not m:
        return None
    rest = line[m.end():]
    if rest.startswith("("):
        end = close_bracket(rest, 0)
        shape, rest = rest[:end], rest[end:].lstrip()
    else:
        shape, _, rest = rest.partition(" ")
    op = _OPCODE.match(rest)
    if not op:
        return None
    end = close_bracket(rest, op.end() - 1)
    return Instruction(m.group(2), shape, op.group(1), rest[op.end():end - 1],
                       rest[end:].lstrip(", "),
                       computation, bool(m.group(1)))


# One parse of one module text, compared by identity (eq=False): readers keep what they derive
# from a module (explorer._src.hlo.chains) in a WeakKeyDictionary keyed on it.
@dataclass(eq=False)
class HloModule:
    name: str
    entry: str
    computations: dict[str, list[Instruction]]
    frames: dict[int, tuple[str, int, str]]   # stack frame id -> (file, line, function)

    def instructions(self):
        for instrs in self.computations.values():
            yield from instrs

    def by_name(self) -> dict[str, Instruction]:
        return {i.name: i for i in self.instructions()}

    @cached_property
    def collectives(self) -> dict[str, tuple[Instruction, ...]]:
        """Computation name -> its collective instructions (explorer._src.hlo.collectives; -start
        ops included), in order; read once, for the several readers that look for them."""
        return {name: tuple(i for i in instrs if collective_kind(i.opcode)[0] is not None)
                for name, instrs in self.computations.items()}

    @cached_property
    def users(self) -> dict[str, tuple[Instruction, ...]]:
        """Instruction name -> the instructions that use it (name it as an operand), in module
        order; read once, for the several readers that walk a value forward."""
        users: dict[str, list[Instruction]] = {}
        for instr in self.instructions():
            for name in instr.operands:
                users.setdefault(name, []).append(instr)
        return {name: tuple(found) for name, found in users.items()}

    def called(self, instr: Instruction, *keys: str) -> list[Instruction]:
        """The instructions of the computation `instr` calls (see `Instruction.callee`); [] when
        it calls none or the module lacks it."""
        return self.computations.get(instr.callee(*keys), [])

    def source(self, instr: Instruction) -> tuple[str, int, str] | None:
        """The user's file, line and function that produced `instr`, if the metadata says."""
        if instr.stack_frame_id is not None:
            return self.frames.get(instr.stack_frame_id)
        f = re.search(r'source_file="([^"]*)"', instr.attrs)
        ln = re.search(r"source_line=(\d+)", instr.attrs)
        if f and ln:
            return (f.group(1), int(ln.group(1)), "")
        return None


def short_path(path: str) -> str:
    """A source path as people read it: package-relative inside explorer, cwd-relative below it."""
    norm = path.replace(os.sep, "/")
    if "/explorer/" in norm:
        return "explorer/" + norm.rsplit("/explorer/", 1)[1]
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def parse_module(text: str) -> HloModule:
    """Parse the text of one HLO module (as printed by as_text() or an XLA dump)."""
    name, entry = "", ""
    computations: dict[str, list[Instruction]] = {}
    tables: dict[str, dict[int, str]] = {t: {} for t in _TABLES}
    table = None
    current = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            table = None
            continue
        if stripped.startswith("HloModule "):
            name = stripped.split()[1].rstrip(",")
            continue
        if stripped in _TABLES:
            table = stripped
            continue
        if table is not None:
            key, _, value = stripped.partition(" ")
            if key.isdigit():
                tables[table][int(key)] = value
                continue
            table = None
        if current is None:
            m = _COMP.match(stripped)
            if m:
                current = m.group(2)
                computations[current] = []
                if m.group(1):
                    entry = current
            continue
        if stripped == "}":
            current = None
            continue
        instr = parse_instruction(line, current)
        if instr is not None:
            computations[current].append(instr)
    return HloModule(name, entry, computations, _resolve_frames(tables))


@lru_cache(maxsize=128)
def _key_number(key: str) -> re.Pattern:
    return re.compile(key + r"=(\d+)")


def _field(value: str, key: str) -> int:
    m = _key_number(key).search(value)
    return int(m.group(1)) if m else 0


def _resolve_frames(tables) -> dict[int, tuple[str, int, str]]:
    files = {k: v.strip('"') for k, v in tables["FileNames"].items()}
    funcs = {k: v.strip('"') for k, v in tables["FunctionNames"].items()}
    frames = {}
    for fid, value in tables["StackFrames"].items():
        loc = tables["FileLocations"].get(_field(value, "file_location_id"), "")
        frames[fid] = (files.get(_field(loc, "file_name_id"), "?"), _field(loc, "line"),
                       funcs.get(_field(loc, "function_name_id"), ""))
    return frames
