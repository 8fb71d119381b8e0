"""Logical-axis rules: name tensor dimensions once, map the names to mesh axes in one table.

This is the scheme of Mesh-TensorFlow (Shazeer et al. 2018, "layouts"), t5x/flax
(`logical_axis_rules`, `flax.linen.logical_to_mesh_axes`) and MaxText (`logical_axis_rules` in
its base.yml). A workload gives each dimension of each tensor a logical name (`batch`, `embed`,
`mlp`, ...). A rule table maps logical names to mesh axes (None, an axis, or a tuple of axes), so
one edit (`mlp=model`) re-shards every tensor with an `mlp` dimension the same way.

Rules may be scoped to one *kind* of tensor (`opt:embed=data` shards only optimizer state), which
is how the ZeRO stages differ: the same rule applied to more kinds of tensors.

Text form: comma-separated `[KIND:]NAME=AXES` items, where AXES is `None`, `_`, an axis name, or
a parenthesised tuple `(data,expert)`. It is tokenized and parsed, never handed to eval.

Resolution (`logical_spec`) follows flax's `logical_to_mesh_axes`: rules are taken in order of
priority (the order they are written; a later rule for a name already in the table replaces its
value but keeps its place), and a rule assigns its mesh axes to the tensor's dimension of that
name only if none of those axes is already used by another dimension of the tensor. A dimension
whose rule loses that race gets None: a mesh axis can split only one dimension. So with
`heads=model,mlp=model,act:seq=model` (Megatron sequence parallelism) the residual stream
[batch, seq, embed] is split on seq, while the MLP hidden activation [batch, seq, mlp] is split on
mlp and keeps seq whole, because the mlp rule comes first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from explorer.errors import RuleError, choices
from explorer.spec.bounds import show
from explorer.spec.mesh import MeshSpec
from explorer.spec.tensor import Entry, entry_axes, format_entry
from explorer.spec.tokens import tokenize

# The logical dimension names of the built-in workloads (t5x/MaxText vocabulary). `kv` is the
# per-head dimension, `kv_heads` the heads of the key/value weights (fewer than `heads` under
# grouped-query attention), `mlp` the feed-forward hidden dimension, `capacity` the per-expert token
# buffer of a mixture-of-experts layer, `stage` a pipeline stage.
LOGICAL_NAMES = ("batch", "seq", "embed", "mlp", "heads", "kv_heads", "kv", "experts", "capacity",
                 "vocab", "layers", "stage")

# What a tensor is, for rules scoped to one kind: model parameters, their gradients, optimizer
# state (Adam's m and v), activations at layer boundaries, and input data (tokens, x).
KINDS = ("param", "grad", "opt", "act", "input")


@dataclass(frozen=True)
class Rule:
    kind: str | None          # None: applies to every kind of tensor
    name: str                 # logical dimension name
    entry: Entry              # mesh axes: None, an axis name, or a tuple of axis names

    def text(self) -> str:
        return (f"{self.kind}:" if self.kind else "") + f"{self.name}={format_entry(self.entry)}"


@dataclass(frozen=True)
class Rules:
    """An ordered rule table; a later rule for the same name (and a kind it covers) wins."""

    rules: tuple[Rule, ...] = ()

    def table(self, kind: str | None = None) -> dict[str, Entry]:
        """Logical name -> mesh axes for tensors of `kind` (None: only the unscoped rules)."""
        out: dict[str, Entry] = {}
        for r in self.rules:
            if r.kind is None or r.kind == kind:
                out[r.name] = r.entry
        return out

    def __add__(self, other: Rules) -> Rules:
        """`other` after self: its rules win where both name the same logical dimension."""
        return Rules(self.rules + other.rules)

    def text(self) -> str:
        return ",".join(r.text() for r in self.rules)

    def check_mesh(self, mesh: MeshSpec, origin: str = "rule") -> None:
        for r in self.rules:
            for axis in entry_axes(r.entry):
                if axis not in mesh.shape:
                    raise RuleError(
                        f"{origin} {r.text()!r} names mesh axis {axis!r}, which mesh "
                        f"{mesh.text()!r} lacks; mesh axes: {choices(mesh.names)}. Rename a "
                        f"mesh axis to {axis!r} or change the rule", rule=r.text(), axis=axis,
                        mesh=mesh)


def _tokens(text: str) -> list[tuple[str, str]]:
    def fail(rest):
        raise RuleError(f"cannot read rules {text!r} at {rest!r}: expected NAME=AXES items "
                        "separated by ',' (e.g. batch=data,mlp=model)")

    # A quoted axis is still a name here.
    return [("name" if k == "quoted" else k, v) for k, v in tokenize(text, fail)]


def _check_name(name: str, kind: str | None, known: Iterable[str], text: str) -> None:
    known = tuple(known)
    if name not in known:
        raise RuleError(f"rule {text!r} names logical dimension {name!r}, which is unknown; "
                        f"logical names: {choices(known)}", rule=text)
    if kind is not None and kind not in KINDS:
        raise RuleError(f"rule {text!r} is scoped to tensor kind {kind!r}, which is unknown; "
                        f"kinds: {choices(KINDS)}", rule=text)


def _entry(value, rule_text: str) -> Entry:
    if value is None or value in ("None", "_", ""):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, tuple | list) and all(isinstance(a, str) for a in value):
        axes = tuple(a for a in value if a not in ("None", "_"))
        return None if not axes else axes[0] if len(axes) == 1 else axes
    raise RuleError(f"rule {rule_text!r}: mesh axes {show(value)} are not None, an axis name or a "
                    "tuple of axis names", rule=rule_text)


def parse_rules(rules, known: Iterable[str] = LOGICAL_NAMES) -> Rules:
    """Rules from text (`batch=data,opt:embed=data,mlp=(model,expert)`), a mapping
    (`{"batch": "data", "opt:embed": "data"}`), a Rules, or None (no rules)."""
    if rules is None:
        return Rules()
    if isinstance(rules, Rules):
        for r in rules.rules:
            _check_name(r.name, r.kind, known, r.text())
        return rules
    if isinstance(rules, Mapping):
        out = []
        for key, value in rules.items():
            if not isinstance(key, str):
                raise RuleError(f"rule key {show(key)} is not a logical dimension name such as "
                                "'batch' or 'opt:embed'")
            kind, _, name = key.rpartition(":")
            kind = kind.strip() or None
            name = name.strip()
            text = f"{key}={value if isinstance(value, str) else show(value)}"
            _check_name(name, kind, known, text)
            out.append(Rule(kind, name, _entry(value, text)))
        return Rules(tuple(out))
    if not isinstance(rules, str):
        raise RuleError(f"rules {show(rules)} are neither text like 'batch=data,mlp=model' nor a "
                        "mapping of logical name to mesh axes")
    return _parse_text(rules, tuple(known))


def _parse_text(text: str, known: tuple[str, ...]) -> Rules:
    toks = _tokens(text)
    out: list[Rule] = []
    i = 0

    def fail(msg):
        raise RuleError(f"cannot read rules {text!r}: {msg}; write NAME=AXES items separated by "
                        "',', e.g. batch=data,mlp=model,embed=None or opt:embed=data")

    def take_name(what):
        nonlocal i
        if i >= len(toks) or toks[i][0] != "name":
            fail(f"expected {what}" + (f", found {toks[i][1]!r}" if i < len(toks) else
                                       " at the end"))
        i += 1
        return toks[i - 1][1]

    while i < len(toks):
        start = i
        name, kind = take_name("a logical dimension name"), None
        if i < len(toks) and toks[i] == ("punct", ":"):
            i += 1
            kind, name = name, take_name("a logical dimension name after ':'")
        if i >= len(toks) or toks[i] != ("punct", "="):
            fail(f"expected '=' after {name!r}")
        i += 1
        if i < len(toks) and toks[i] == ("punct", "("):
            axes, i = [], i + 1
            while i < len(toks) and toks[i] != ("punct", ")"):
                if toks[i][0] == "name":
                    axes.append(toks[i][1])
                elif toks[i] != ("punct", ","):
                    fail(f"unexpected {toks[i][1]!r} inside a tuple of mesh axes")
                i += 1
            if i == len(toks):
                fail("a '(' is not closed")
            i += 1
            value = tuple(axes)
        else:
            value = take_name(f"mesh axes (an axis, None or a tuple) after {name}=")
        rule_text = "".join(t[1] for t in toks[start:i])
        _check_name(name, kind, known, rule_text)
        out.append(Rule(kind, name, _entry(value, rule_text)))
        if i < len(toks):
            if toks[i] != ("punct", ","):
                fail(f"expected ',' between rules, found {toks[i][1]!r}")
            i += 1
    return Rules(tuple(out))


def logical_spec(dims: Iterable[str | None], table: Mapping[str, Entry]) -> tuple[Entry, ...]:
    """The PartitionSpec entries of a tensor with logical dimension names `dims`.

    `table` is taken in order of priority (flax's rule): a logical name gets its mesh axes unless
    one of them is already taken by a dimension whose rule came earlier; then it gets None."""
    dims = tuple(dims)
    out: list[Entry] = [None] * len(dims)
    used: set[str] = set()
    for name, entry in table.items():
        if name not in dims:
            continue
        axes = entry_axes(entry)
        if not axes or used.intersection(axes):
            continue
        used.update(axes)
        out[dims.index(name)] = entry
    return tuple(out)

