"""The module Shardy writes after propagation (`02.after_propagation.mlir`, dumped when the pass
regex names `shardy-verbose`) → its values and ops, each with its sharding, where every mesh
axis of it came from (`sdy.sharding_origins`), the propagation steps that moved an axis
(`sdy.propagation_edges`) and the op's factor rule (`sdy.sharding_rule`). Pure text reading.

The module is printed without locations, so nothing here knows a line of code; the reader of
origins (explorer._src.report.origins) finds each value's instruction in the propagated HLO.

What is read, as jax 0.10.2's Shardy prints it:
- a value's sharding `#sdy.sharding<@mesh, [{"data"}, {}]>` (an op's results in
  `#sdy.sharding_per_value<[...]>`): the mesh axes of each dimension, major first;
- its origins `{data = "input: 0", model = "constraint_1"}` (an op's results as a list of such);
  the origin texts are kept as written (`self`, `input: i`, `output: i`, `constraint_N`,
  `mc_N_input: i`, `mc_N_output: i`);
- edges `#sdy.propagation_edges<[{step-3 = [{"data" = operand-0 -> [result-0]}]}]>`: at step 3,
  axis `data` went from the op's operand 0 to its result 0;
- a while's or shard_map's per-result origins and edges (`sdy.result_sharding_origins`), listed
  only for the results that carry an axis;
- the factor rule `([i, k], [k, j])->([i, j]) {i=16, j=64, k=32} reduction={k}`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

# The mesh axes of each dimension of a value, major first: (("data",), ()).
Split = tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Edge:
    """One propagation step of one axis across an op: from its `source` (``operand-0``,
    ``result-0``) to its `targets`."""

    step: int
    axis: str
    source: str
    targets: tuple[str, ...]


@dataclass(frozen=True)
class FactorRule:
    """An op's sharding rule: the factors of each operand's and result's dimensions (a
    dimension may hold several, as a reshape merges them), and the factors the op reduces over,
    needs whole, or lets no axis through."""

    operands: tuple[tuple[tuple[str, ...], ...], ...]
    results: tuple[tuple[tuple[str, ...], ...], ...]
    sizes: dict[str, int]
    reduction: frozenset[str] = frozenset()
    need_replication: frozenset[str] = frozenset()
    blocked: frozenset[str] = frozenset()


@dataclass(eq=False)
class Value:
    """One SSA value: a function argument, an op's result or a region's block argument."""

    name: str
    dims: tuple[int, ...] | None
    op: Op | None = None            # the op that defines it (a result); None for arguments
    index: int = 0                  # result or argument number
    owner: Op | None = None         # the region op of a block argument (while, shard_map)
    split: Split | None = None
    origins: dict[str, str] = field(default_factory=dict)

    @property
    def is_argument(self) -> bool:
        return self.op is None and self.owner is None


@dataclass(eq=False)
class Op:
    """One op, with its results and operands as Values, and the regions it holds."""

    name: str                       # "stablehlo.dot_general", "sdy.reshard", ...
    results: list[Value]
    operands: list[Value]
    edges: tuple[Edge, ...] = ()
    origin_name: str = ""           # `sdy.sharding_origin_name`: "constraint_0", "mc_0"
    rule: FactorRule | None = None
    regions: list[list[Op]] = field(default_factory=list)
    region_args: list[list[Value]] = field(default_factory=list)
    # Per result of a while or shard_map: its own propagation edges.
    result_edges: tuple[tuple[Edge, ...], ...] = ()
    # A shard_map's in_shardings, one per operand (its in_specs).
    in_splits: tuple[Split | None, ...] = ()
    parent: Op | None = None
    text: str = ""                  # the op's text up to its regions, attributes included

    @property
    def short(self) -> str:
        """The op's name without its dialect: `dot_general`, `reshard`, `while`."""
        return self.name.split(".", 1)[-1].strip('"')

    def terminator(self, region: int) -> Op | None:
        ops = self.regions[region] if region < len(self.regions) else []
        return ops[-1] if ops and ops[-1].short == "return" else None


@dataclass
class Function:
    """The entry function: its arguments and results (each a Value carrying the sharding and
    origins of that argument or result), the results' own edges, and its ops in order."""

    name: str
    arguments: list[Value]
    results: list[Value]
    result_edges: list[tuple[Edge, ...]]
    returned: list[Value]           # the values the function returns, one per result
    ops: list[Op]

    def walk(self):
        """Every op, nested regions included, in printed order."""
        todo = list(reversed(self.ops))
        while todo:
            op = todo.pop()
            yield op
            for region in reversed(op.regions):
                todo.extend(reversed(region))


# -- small text readers ------------------------------------------------------------------------

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_TENSOR = re.compile(r"tensor<([^>]*)>")
_SSA = re.compile(r"%[\w.$-]+(?:#\d+)?")
_AXIS = r'(?:"[^"]*"(?::\(\d+\)\d+)?|[\w.$-]+)'


@lru_cache(maxsize=256)       # an op's text is blanked once for the several attributes read
def _blank_strings(text: str) -> str:
    """`text` with the inside of every string literal blanked (same length), so that brackets
    and `%` inside strings do not count."""
    return _STRING.sub(lambda m: '"' + " " * (len(m.group(0)) - 2) + '"', text)


_BRACKET = re.compile(r"[()\[\]{}<>]|->")
_BRACKET_OR_COMMA = re.compile(r"[()\[\]{}<>,]|->")
_PAIRS = {"(": ")", "[": "]", "{": "}", "<": ">"}


def _close(text: str, start: int) -> int:
    """Index just past the bracket that opens at text[start] (strings already blanked; `->`
    is not a bracket)."""
    stack = []
    for m in _BRACKET.finditer(text, start):
        c = m.group()
        if c in _PAIRS:
            stack.append(_PAIRS[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return m.end()
    return len(text)


def _split_top(text: str) -> list[str]:
    """`text` split at the commas outside brackets and strings."""
    blank = _blank_strings(text)
    parts, depth, start = [], 0, 0
    for m in _BRACKET_OR_COMMA.finditer(blank):
        c = m.group()
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:m.start()])
            start = m.end()
    if text[start:].strip():
        parts.append(text[start:])
    return parts


_KEY = re.compile(r"(?:^|[\s{,])([\w.]+) = ")


@lru_cache(maxsize=256)
def _keys(text: str) -> dict[str, int]:
    """Where the value of each `key = ` of an op's text starts (its first occurrence), found
    in one pass for the several attributes read."""
    starts: dict[str, int] = {}
    for m in _KEY.finditer(_blank_strings(text)):
        starts.setdefault(m.group(1), m.end())
    return starts


def _attribute(text: str, key: str) -> str | None:
    """The raw value of `key = ...` in an attribute dictionary, bracket-balanced."""
    blank = _blank_strings(text)
    start = _keys(text).get(key)
    if start is None or start >= len(blank):
        return None
    if blank[start] in "([{<#\"":
        if blank[start] == "#":          # #sdy.sharding<...>: up to its closing bracket
            bracket = blank.find("<", start)
            return text[start:_close(blank, bracket)] if bracket >= 0 else None
        if blank[start] == '"':
            end = blank.find('"', start + 1)
            return text[start:end + 1]
        return text[start:_close(blank, start)]
    m2 = re.match(r"[^,}\s]+", text[start:])
    return m2.group(0) if m2 else None


def tensor_dims(type_text: str) -> tuple[int, ...] | None:
    """`tensor<16x32xf32>` -> (16, 32); `tensor<f32>` -> (); None for a non-tensor or dynamic
    shape."""
    m = _TENSOR.search(type_text)
    if not m:
        return None
    parts = m.group(1).split("x")
    dims = parts[:-1]
    if any(not d.isdigit() for d in dims):
        return None
    return tuple(int(d) for d in dims)


def _axis_name(text: str) -> str:
    """An axis as written in a sharding or an origin key: `"data"` -> data, `"model":(1)2` ->
    model:(1)2 (a sub-axis keeps its part)."""
    return text.replace('"', "").strip()


def read_split(text: str) -> Split | None:
    """The dimensions of one sharding `<@mesh, [{"data"}, {}, {"x", "y"}]>`: the axes of
    each, major first (an open dimension's `?` and a priority's `p1` are not axes)."""
    start = text.find("[")
    if start < 0:
        return None
    blank = _blank_strings(text)
    inner = text[start + 1:_close(blank, start) - 1]
    dims = []
    for part in _split_top(inner):
        part = part.strip()
        if not part.startswith("{"):
            return None
        body = part[1:part.rfind("}")]
        dims.append(tuple(_axis_name(a) for a in _split_top(body)
                          if a.strip() and a.strip() != "?"))
    return tuple(dims)


def read_shardings(value: str | None) -> list[Split | None]:
    """`#sdy.sharding<...>` -> one split; `#sdy.sharding_per_value<[<...>, <...>]>` -> one per
    result."""
    if not value:
        return []
    if value.startswith("#sdy.sharding_per_value"):
        start = value.find("[")
        blank = _blank_strings(value)
        inner = value[start + 1:_close(blank, start) - 1]
        return [read_split(p) for p in _split_top(inner)]
    return [read_split(value[value.find("<"):])]


_ORIGIN = re.compile(r"(" + _AXIS + r')\s*=\s*"([^"]*)"')


def parse_sharding_origins(value: str | None) -> list[dict[str, str]]:
    """`{data = "input: 0"}` -> [{"data": "input: 0"}]; `[{...}, {...}]` -> one per result."""
    if not value:
        return []
    value = value.strip()
    if value.startswith("["):
        return [parse_sharding_origins(p)[0] if p.strip() else {} for p in _split_top(value[1:-1])]
    return [{_axis_name(k): v for k, v in _ORIGIN.findall(value)}]


_STEP = re.compile(r"step-(\d+)\s*=")
_EDGE = re.compile(r"\{(" + _AXIS + r")\s*=\s*((?:operand|result)-\d+)\s*->\s*\[([^\]]*)\]\}")


def read_edges(value: str | None) -> tuple[Edge, ...]:
    """`#sdy.propagation_edges<[{step-0 = [{"data" = operand-0 -> [result-0]}]}]>` -> Edges."""
    if not value:
        return ()
    out = []
    steps = list(_STEP.finditer(value))
    for n, m in enumerate(steps):
        end = steps[n + 1].start() if n + 1 < len(steps) else len(value)
        for axis, source, targets in _EDGE.findall(value[m.end():end]):
            out.append(Edge(int(m.group(1)), _axis_name(axis), source,
                            tuple(t.strip() for t in targets.split(",") if t.strip())))
    return tuple(out)


def _edge_lists(value: str | None) -> tuple[tuple[Edge, ...], ...]:
    """`[#sdy.propagation_edges<...>, ...]` -> the edges of each entry."""
    if not value or not value.strip().startswith("["):
        return ()
    return tuple(read_edges(p) for p in _split_top(value.strip()[1:-1]))


_FACTOR = re.compile(r"[a-z](?:_\d+)?")


def _factor_set(text: str, key: str) -> frozenset[str]:
    m = re.search(r"\b" + key + r"=\{([^}]*)\}", text)
    return frozenset(f.strip() for f in m.group(1).split(",") if f.strip()) if m else frozenset()


def read_rule(value: str | None) -> FactorRule | None:
    """`#sdy.op_sharding_rule<([i, k], [k, j])->([i, j]) {i=16, j=64, k=32} reduction={k}>`."""
    if not value:
        return None
    m = re.search(r"\((.*?)\)->\((.*?)\)", value)
    if not m:
        return None

    def mappings(text: str) -> tuple[tuple[tuple[str, ...], ...], ...]:
        out = []
        for group in re.findall(r"\[([^\]]*)\]", text):
            out.append(tuple(tuple(_FACTOR.findall(d.strip())) for d in group.split(",")
                             if d.strip()))
        return tuple(out)

    sizes_m = re.search(r"\)\s*\{([^}]*)\}", value[m.end() - 1:])
    sizes = {}
    if sizes_m:
        for k, v in re.findall(r"([a-z](?:_\d+)?)=(\d+)", sizes_m.group(1)):
            sizes[k] = int(v)
    return FactorRule(mappings(m.group(1)), mappings(m.group(2)), sizes,
                      _factor_set(value, "reduction"), _factor_set(value, "need_replication"),
                      _factor_set(value, "blocked_propagation"))


# -- the module --------------------------------------------------------------------------------

_OP_START = re.compile(r"^\s*(?:(%[\w.$-]+(?::\d+)?(?:\s*,\s*%[\w.$-]+)*)\s*=\s*)?"
                       r'("[\w.]+"|[a-z_]\w*\.[\w.]+|return\b)')
_RESULT_TYPES = re.compile(r"->\s*(.*)$")


class MlirError(ValueError):
    """The text is not a module this reader knows."""


def _head(text: str) -> str:
    """The part of an op's text before its attribute dictionary and type: where its operands
    are named (strings blanked)."""
    blank = _blank_strings(text)
    depth = 0
    for i, c in enumerate(blank):
        if c in "([<":
            depth += 1
        elif c in ")]" or (c == ">" and not (i and blank[i - 1] == "-")):
            depth -= 1
        elif depth == 0 and (c == "{" and i and blank[i - 1] == " "
                             or blank.startswith(" : ", i) or blank.startswith(" attributes ", i)):
            return blank[:i]
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
    return blank


def _result_dims(text: str) -> list[tuple[int, ...] | None]:
    """The result types of an op, from its trailing `: (operands) -> results` or `: type`
    (a while's are followed by its `attributes {...}`)."""
    blank = _blank_strings(text)
    attrs = blank.rfind(" attributes {")
    if attrs >= 0:
        blank, text = blank[:attrs], text[:attrs]
    # The type comes after every attribute, and types hold no ` : `.
    colon = blank.rfind(" : ")
    if colon < 0:
        return []
    types = text[colon + 3:]
    m = _RESULT_TYPES.search(types)
    if m:
        types = m.group(1).strip()
        if types.startswith("("):
            types = types[1:_close(_blank_strings(types), 0) - 1]
    return [tensor_dims(t) for t in _split_top(types)]


class _Scopes:
    """SSA names in nested regions: a region sees its own names and its ancestors'."""

    def __init__(self) -> None:
        self.stack: list[dict[str, Value]] = [{}]

    def define(self, v: Value) -> None:
        self.stack[-1][v.name] = v

    def get(self, name: str) -> Value | None:
        for scope in reversed(self.stack):
            if name in scope:
                return scope[name]
        return None


def _block_args(text: str, owner: Op) -> list[Value]:
    """`(%arg2: tensor<8x64xf32>, ...)` or `^bb0(%arg1: tensor<f32>, ...):` -> Values."""
    return [Value(name, tensor_dims(t), owner=owner, index=i)
            for i, (name, t) in enumerate(re.findall(r"(%[\w.$-]+)\s*:\s*([^,)]+)", text))]


def _signature(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """`@main(%arg0: T {attrs}, ...) -> (T {attrs}, ...)`: each argument as (name, rest) and
    each result's text."""
    blank = _blank_strings(text)
    start = blank.find("(")
    end = _close(blank, start)
    args = []
    for part in _split_top(text[start + 1:end - 1]):
        name, _, rest = part.strip().partition(":")
        args.append((name.strip(), rest.strip()))
    rest = text[end:].strip()
    results: list[str] = []
    if rest.startswith("->"):
        rest = rest[2:].strip()
        if rest.startswith("("):
            results = _split_top(rest[1:_close(_blank_strings(rest), 0) - 1])
        else:
            results = [rest.rsplit("{", 1)[0] if rest.endswith("{") else rest]
    return args, results


def _annotated(name: str, text: str, **where) -> Value:
    shardings = read_shardings(_attribute(text, "sdy.sharding"))
    origins = parse_sharding_origins(_attribute(text, "sdy.sharding_origins"))
    return Value(name, tensor_dims(text), split=shardings[0] if shardings else None,
                 origins=origins[0] if origins else {}, **where)


def _new_op(text: str, scopes: _Scopes) -> Op:
    m = _OP_START.match(text)
    names_text, op_name = m.group(1), m.group(2)
    op = Op(op_name, [], [], text=text)
    head = _head(text)[m.end():]
    short = op.short
    if short == "while":
        # `stablehlo.while(%iterArg = %0, ...)`: block arguments = operands.
        pairs = re.findall(r"(%[\w.$-]+)\s*=\s*(%[\w.$-]+(?:#\d+)?)", head)
        op.operands = [v for _, o in pairs if (v := scopes.get(o)) is not None]
        args = [Value(a, None, owner=op, index=i) for i, (a, _) in enumerate(pairs)]
        op.region_args = [args, args]            # cond and body share the names
    else:
        if short in ("manual_computation", "named_computation"):
            # `(%operands) in_shardings=... (%arg2: T) {`: the last group holds block args.
            groups = re.findall(r"\(([^()]*)\)", head)
            head = groups[0] if groups else ""
        op.operands = [v for ref in _SSA.findall(head) if (v := scopes.get(ref)) is not None]
    dims = _result_dims(text)
    names: list[str] = []
    if names_text:
        for part in names_text.split(","):
            part = part.strip()
            if ":" in part:
                base, count = part.split(":")
                names += [f"{base}#{k}" for k in range(int(count))]
            else:
                names.append(part)
    shardings = read_shardings(_attribute(text, "sdy.sharding"))
    if short in ("reshard", "sharding_constraint") and "<" in head:
        # `sdy.reshard %0 <@mesh, [...]>`: the layout it asks for is written inline.
        shardings = [read_split(text[m.end() + head.find("<"):])]
    origins = parse_sharding_origins(_attribute(text, "sdy.sharding_origins"))
    for k, name in enumerate(names):
        op.results.append(Value(name, dims[k] if k < len(dims) else None, op=op, index=k,
                                split=shardings[k] if k < len(shardings) else None,
                                origins=origins[k] if k < len(origins) else {}))
    _annotate(op, text)
    return op


def _annotate(op: Op, text: str) -> None:
    """The attributes that may follow an op's regions (a shard_map's, a while's)."""
    op.edges = op.edges or read_edges(_attribute(text, "sdy.propagation_edges"))
    name = _attribute(text, "sdy.sharding_origin_name")
    if name:
        op.origin_name = name.strip('"')
    op.rule = op.rule or read_rule(_attribute(text, "sdy.sharding_rule"))
    per_result = parse_sharding_origins(_attribute(text, "sdy.result_sharding_origins"))
    if per_result:
        # Listed only for the results that carry an axis, in order.
        carrying = [r for r in op.results if r.split and any(r.split)]
        if len(carrying) == len(per_result):
            for r, o in zip(carrying, per_result, strict=True):
                r.origins = o
        edges = _edge_lists(_attribute(text, "sdy.result_propagation_edges"))
        if len(edges) == len(carrying):
            index = {id(r): e for r, e in zip(carrying, edges, strict=True)}
            op.result_edges = tuple(index.get(id(r), ()) for r in op.results)
    if not op.results:
        return
    if op.short == "manual_computation":
        spaced = text.replace("_shardings=", "_shardings = ")
        ins = _attribute(spaced, "in_shardings")
        if ins and not op.in_splits:
            op.in_splits = tuple(read_shardings(f"#sdy.sharding_per_value<{ins}>"))
        # A shard_map's results are laid out as its out_shardings say.
        outs = _attribute(spaced, "out_shardings")
        for r, s in zip(op.results, read_shardings(f"#sdy.sharding_per_value<{outs}>")
                        if outs else [], strict=False):
            r.split = r.split or s
    shardings = read_shardings(_attribute(text, "sdy.sharding"))
    for r, s in zip(op.results, shardings, strict=False):
        r.split = r.split or s


def parse_mlir(text: str) -> Function:
    """The entry function (`@main`) of a Shardy module, its nested regions included."""
    lines = text.splitlines()
    i = 0
    while i < len(lines) and not re.match(r"\s*func\.func\s+(?:public\s+)?@main\b", lines[i]):
        i += 1
    if i == len(lines):
        raise MlirError("no `func.func @main` in the module")
    header = lines[i].strip()
    # The signature may continue over lines only in unusual printing; jax's is one line.
    args_text, results_text = _signature(header[header.find("@main") + len("@main"):])
    scopes = _Scopes()
    arguments = []
    for k, (name, rest) in enumerate(args_text):
        v = _annotated(name, rest, index=k)
        arguments.append(v)
        scopes.define(v)
    results = [_annotated(f"result{k}", t, index=k) for k, t in enumerate(results_text)]
    result_edges = [read_edges(_attribute(t, "sdy.propagation_edges")) for t in results_text]
    top: list[Op] = []
    # The stack of open regions: (the op that holds it or None for the function, its ops).
    stack: list[tuple[Op | None, list[Op]]] = [(None, top)]
    last: list[Op | None] = [None]               # the last op at each level
    returned: list[Value] = []
    i += 1
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        i += 1
        if not stripped:
            continue
        blank = _blank_strings(stripped)
        if stripped.startswith("}"):
            owner, _ = stack.pop()
            last.pop()
            scopes.stack.pop()
            if owner is None:
                break                                # the function's end
            rest = stripped.lstrip("})").strip()
            if blank.rstrip().endswith("{"):         # `} do {`: the op's next region
                _open(owner, stack, last, scopes, rest)
            elif rest:
                owner.text += " " + rest
                _annotate(owner, rest)
                # A region op's result types follow its last region.
                for r, dims in zip(owner.results, _result_dims(rest), strict=False):
                    r.dims = r.dims if r.dims is not None else dims
            continue
        if stripped.startswith("^"):                  # a block label with its arguments
            owner = stack[-1][0]
            if owner is not None:
                for v in _block_args(stripped, owner):
                    scopes.define(v)
                    owner.region_args[-1].append(v)
            continue
        m = _OP_START.match(stripped)
        if m is None:
            # `cond {`, `reducer(%a: T, %b: T) {`: a region of the op before it.
            if blank.rstrip().endswith("{") and last[-1] is not None:
                _open(last[-1], stack, last, scopes, stripped)
            continue
        op = _new_op(stripped, scopes)
        op.parent = stack[-1][0]
        stack[-1][1].append(op)
        last[-1] = op
        for r in op.results:
            scopes.define(r)
        if op.short == "return" and stack[-1][0] is None:
            returned = op.operands
        if blank.rstrip().endswith("{"):
            _open(op, stack, last, scopes, "")
    if len(returned) != len(results):
        raise MlirError(f"@main returns {len(returned)} values for {len(results)} results")
    return Function("main", arguments, results, result_edges, returned, top)


def _open(op: Op, stack, last, scopes: _Scopes, line: str) -> None:
    """Open the next region of `op`; its block arguments are those of the while (shared by
    cond and body) or those the line names."""
    region: list[Op] = []
    n = len(op.regions)
    op.regions.append(region)
    stack.append((op, region))
    last.append(None)
    scopes.stack.append({})
    if op.short == "while":
        args = op.region_args[n] if n < len(op.region_args) else []
    else:
        # The shard_map's `(%arg2: T) {` is on its own line; other ops name theirs here.
        args = _block_args(_trailing_group(op.text) if n == 0 and not line else line, op)
        op.region_args.append(args)
    for v in args:
        scopes.define(v)


def _trailing_group(text: str) -> str:
    """The last parenthesised group of an op's opening line (a shard_map's block args)."""
    groups = re.findall(r"\(([^()]*)\)\s*\{?\s*$", _blank_strings(text))
    if not groups:
        return ""
    start = _blank_strings(text).rfind("(" + groups[-1] + ")")
    return text[start:start + len(groups[-1]) + 2]
