"""Logical-axis rules: name tensor dimensions once, map the names to mesh axes in one table.

This is the scheme of Mesh-TensorFlow (Shazeer et al. 2018, "layouts"), t5x/flax
(`logical_axis_rules`, `flax.linen.logical_to_mesh_axes`) and MaxText (`logical_axis_rules` in
its base.yml). A workload gives each dimension of each tensor a logical name (`batch`, `embed`,
`mlp`, ...). A rule table maps logical names to mesh axes (None, an axis, or a tuple of axes), so
one edit (`mlp=model`) re-shards every tensor with an `mlp` dimension the same way.

Rules come in two forms, which may be mixed:

- `[KIND:]NAME=AXES`, the explorer's table: a later rule for a name already in the table
  replaces its value but keeps its place. Rules may be scoped to one *kind* of tensor
  (`opt:embed=data` shards only optimizer state), which is how the ZeRO stages differ: the same
  rule applied to more kinds of tensors.
- `(NAME, AXES)` pairs, as flax and MaxText write them (`config.logical_axis_rules`): a name
  may repeat, and the first pair that fits wins. Pairs may name logical names the tensors lack
  (MaxText's tables name dozens); they never apply. A mesh axis a pair names that the mesh lacks
  counts as an axis of size 1, as in MaxText, whose mesh holds every axis its rules name (size
  1 where unused): the pair is resolved with it, then it is dropped from the spec. So on a mesh
  without `fsdp`, `(embed,fsdp),(embed,tensor)` leaves embed whole, as MaxText with fsdp=1 does.
  Pairs come before the NAME=AXES table; a name with a pair ignores its NAME=AXES rules.

Text form: comma-separated items, each `[KIND:]NAME=AXES` or `([KIND:]NAME,AXES)`, where AXES is
`None`, `_`, an axis name, or a parenthesised tuple `(data,expert)`; names may be quoted, `[ ]`
may stand for `( )`, and the whole list may be bracketed, so Python's `[('batch', 'data')]` and
MaxText's YAML `[['embed', ['fsdp', 'sequence']], ['kv', []]]` read as written. It is
tokenized and parsed, never handed to eval.

Resolution (`logical_spec`) follows flax's `logical_to_mesh_axes`: rules are taken in order of
priority, and a rule assigns its mesh axes to the tensor's dimension of that name only if that
dimension has no axes yet and none of those axes is already used by another dimension of the
tensor (a rule of None assigns nothing and ends the search for its dimension). A dimension
whose rules all lose that race gets None: a mesh axis can split only one dimension. So with
`heads=model,mlp=model,act:seq=model` (Megatron sequence parallelism) the residual stream
[batch, seq, embed] is split on seq, while the MLP hidden activation [batch, seq, mlp] is split on
mlp and keeps seq whole, because the mlp rule comes first.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass

from explorer._src.errors import RuleError, choices
from explorer._src.spec.bounds import TEXT_SHOWN, show
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import Entry, entry_axes, format_entry
from explorer._src.spec.tokens import tokenize
from explorer._src.workloads.base import TensorKind

# The logical dimension names of the built-in workloads (t5x/MaxText vocabulary). `kv` is the
# per-head dimension, `kv_heads` the heads of the key/value weights (fewer than `heads` under
# grouped-query attention), `mlp` the feed-forward hidden dimension, `capacity` the per-expert token
# buffer of a mixture-of-experts layer, `stage` a pipeline stage.
LOGICAL_NAMES = ("batch", "seq", "embed", "mlp", "heads", "kv_heads", "kv", "experts", "capacity",
                 "vocab", "layers", "stage")

# What a tensor may be, for rules scoped to one kind (workloads.base.TensorKind), as text.
KINDS = tuple(TensorKind)

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CLOSE = {"(": ")", "[": "]"}


@dataclass(frozen=True)
class Rule:
    kind: TensorKind | None   # None: applies to every kind of tensor
    name: str                 # logical dimension name
    entry: Entry              # mesh axes: None, an axis name, or a tuple of axis names
    first_fit: bool = False   # a (name, axes) pair: the first that fits wins; else NAME=AXES

    def text(self) -> str:
        scope = f"{self.kind}:" if self.kind else ""
        if not self.first_fit:
            return f"{scope}{self.name}={format_entry(self.entry)}"
        axes = entry_axes(self.entry)
        value = ("None" if not axes else _word(axes[0]) if len(axes) == 1 else
                 "(" + ",".join(map(_word, axes)) + ")")
        return f"({scope}{_word(self.name)},{value})"


def _word(name: str) -> str:
    """`name` as the tokenizer reads it back: bare where it is an identifier, else quoted."""
    if _IDENTIFIER.fullmatch(name) and name not in ("None", "_"):
        return name
    return f"'{name}'" if "'" not in name else f'"{name}"'


@dataclass(frozen=True)
class Rules:
    """An ordered rule table: NAME=AXES rules (a later rule for the same name and a kind it
    covers wins) and (NAME, AXES) pairs (the first that fits wins), see the module docstring."""

    rules: tuple[Rule, ...] = ()

    def table(self, kind: TensorKind | None = None) -> dict[str, Entry]:
        """Logical name -> mesh axes of the NAME=AXES rules for tensors of `kind` (None: only
        the unscoped rules). The pairs are not in it: resolve with `pairs`."""
        out: dict[str, Entry] = {}
        for r in self.rules:
            if not r.first_fit and (r.kind is None or r.kind == kind):
                out[r.name] = r.entry
        return out

    def pairs(self, kind: TensorKind | None = None) -> tuple[tuple[str, Entry], ...]:
        """Every rule for tensors of `kind` as (logical name, mesh axes) in priority order, as
        flax takes them: the pairs, then the table's rules for the names no pair has."""
        fits = [(r.name, r.entry) for r in self.rules if r.first_fit and r.kind in (None, kind)]
        named = {n for n, _ in fits}
        return (*fits, *((n, e) for n, e in self.table(kind).items() if n not in named))

    def __add__(self, other: Rules) -> Rules:
        """`other` after self: its rules win where both name the same logical dimension (its
        NAME=AXES rules come later, its pairs earlier)."""
        mine = tuple(r for r in self.rules if r.first_fit)
        return Rules(tuple(r for r in self.rules if not r.first_fit) + other.rules + mine)

    def text(self) -> str:
        return ",".join(r.text() for r in self.rules)

    def check_mesh(self, mesh: MeshSpec, origin: str = "rule") -> None:
        """A NAME=AXES rule over an axis the mesh lacks is an error; a pair's such axes count
        as size 1 (the module docstring)."""
        for r in self.rules:
            for axis in () if r.first_fit else entry_axes(r.entry):
                if axis not in mesh.shape:
                    raise RuleError(
                        f"{origin} {r.text()!r} names mesh axis {axis!r}, which mesh "
                        f"{mesh.text()!r} lacks; mesh axes: {choices(mesh.names)}. Rename a "
                        f"mesh axis to {axis!r} or change the rule", rule=r.text(), axis=axis,
                        mesh=mesh)


def _tokens(text: str) -> list[tuple[str, str]]:
    def fail(rest):
        raise RuleError(f"cannot read rules {show(text, TEXT_SHOWN)} at {show(rest)}: expected "
                        "NAME=AXES items or (NAME,AXES) pairs separated by ',' (e.g. "
                        "batch=data,mlp=model)")

    # A quoted axis is still a name here.
    return [("name" if k == "quoted" else k, v) for k, v in tokenize(text, fail, brackets=True)]


def _check_kind(kind: str | None, text: str, where: str | None = None) -> TensorKind | None:
    """The rule's scope as the TensorKind its text names; None for a rule of every kind."""
    if kind is not None and kind not in KINDS:
        raise RuleError(f"{where or f'rule {show(text, TEXT_SHOWN)}'} is scoped to tensor kind "
                        f"{show(kind)}, which is unknown; kinds: {choices(KINDS)}", rule=text)
    return None if kind is None else TensorKind(kind)


def _check_name(name: str, kind: str | None, known: Iterable[str], text: str
                ) -> TensorKind | None:
    """`_check_kind`'s TensorKind, once `name` is known to be a logical dimension name."""
    known = tuple(known)
    if name not in known:
        raise RuleError(f"rule {show(text, TEXT_SHOWN)} names logical dimension {show(name)}, "
                        f"which is unknown; logical names: {choices(known)}", rule=text)
    return _check_kind(kind, text)


def _check_pairs(rules: Iterable[Rule], known: Iterable[str]) -> None:
    """Pairs may name logical names the tensors lack (a MaxText table names dozens), but
    pairs none of whose names the tensors have would place nothing: a mistake."""
    pairs = [r for r in rules if r.first_fit]
    for r in pairs:
        _check_kind(r.kind, r.text())
    known = tuple(known)
    if pairs and not any(r.name in known for r in pairs):
        names = list(dict.fromkeys(r.name for r in pairs))
        raise RuleError(f"the (logical name, mesh axes) pairs name no logical dimension the "
                        f"tensors have ({choices(names[:8])}{', ...' if len(names) > 8 else ''}),"
                        f" so they would place nothing; logical names: {choices(known)}",
                        rule=pairs[0].text())


def _entry(value, rule_text: str, where: str | None = None) -> Entry:
    if value is None or value in ("None", "_", ""):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, tuple | list) and all(isinstance(a, str) for a in value):
        axes = tuple(a for a in value if a not in ("None", "_"))
        return None if not axes else axes[0] if len(axes) == 1 else axes
    raise RuleError(f"{where or f'rule {rule_text!r}'}: mesh axes {show(value)} are not None, an "
                    "axis name or a tuple of axis names", rule=rule_text)


def parse_rules(rules, known: Iterable[str] = LOGICAL_NAMES) -> Rules:
    """Rules from text (`batch=data,opt:embed=data,mlp=(model,expert)` or pairs
    `(embed,fsdp),(embed,tensor)`), a mapping (`{"batch": "data", "opt:embed": "data"}`), a
    sequence of (logical name, mesh axes) pairs as flax and MaxText take them
    (`config.logical_axis_rules`: a name may repeat, the first pair that fits wins), a Rules, or
    None (no rules). See the module docstring for how pairs resolve."""
    if rules is None:
        return Rules()
    if isinstance(rules, Rules):
        for r in rules.rules:
            if not r.first_fit:
                _check_name(r.name, r.kind, known, r.text())
        _check_pairs(rules.rules, known)
        return rules
    if isinstance(rules, Mapping):
        out = []
        for key, value in rules.items():
            if not isinstance(key, str):
                raise RuleError(f"rule key {show(key)} is not a logical dimension name such as "
                                "'batch' or 'opt:embed'")
            scope, name = _scoped(key)
            text = f"{key}={value if isinstance(value, str) else show(value)}"
            kind = _check_name(name, scope, known, text)
            out.append(Rule(kind, name, _entry(value, text)))
        return Rules(tuple(out))
    if isinstance(rules, Sequence) and not isinstance(rules, str):
        return _parse_pairs(rules, tuple(known))
    if not isinstance(rules, str):
        raise RuleError(f"rules {show(rules)} are neither text like 'batch=data,mlp=model' nor a "
                        "mapping of logical name to mesh axes nor a sequence of (logical name, "
                        "mesh axes) pairs like [('batch', 'data'), ('embed', ('fsdp', 'tensor'))]")
    return _parse_text(rules, tuple(known))


def rules_text(rules) -> str:
    """`rules`, in any form parse_rules takes, as the text that parses back to the same Rules:
    what the app's rules box holds. The logical names are not checked here (whoever parses the
    text checks them against its tensors); a malformed table is refused as parse_rules refuses
    it."""
    if rules is None:
        return ""
    if isinstance(rules, str):
        return rules
    if isinstance(rules, Rules):
        return rules.text()
    keys = (list(rules) if isinstance(rules, Mapping) else
            [p[0] for p in rules if isinstance(p, tuple | list) and p]
            if isinstance(rules, Sequence) else [])
    return parse_rules(rules, tuple(_scoped(k)[1] for k in keys if isinstance(k, str))).text()


def _scoped(key: str) -> tuple[str | None, str]:
    """`opt:embed` -> ("opt", "embed"); `embed` -> (None, "embed")."""
    kind, _, name = key.rpartition(":")
    return kind.strip() or None, name.strip()


def _parse_pairs(rules: Sequence, known: tuple[str, ...]) -> Rules:
    out = []
    for i, pair in enumerate(rules):
        if not (isinstance(pair, tuple | list) and len(pair) == 2 and isinstance(pair[0], str)
                and _scoped(pair[0])[1]):
            raise RuleError(f"rules[{i}] = {show(pair)} is not a (logical name, mesh axes) pair "
                            "such as ('batch', 'data'), ('embed', ('fsdp', 'tensor')) or "
                            "('kv', None)", rule=show(pair))
        scope, name = _scoped(pair[0])
        where = f"rules[{i}] = {show(pair)}"
        kind = _check_kind(scope, show(tuple(pair)), where)
        out.append(Rule(kind, name, _entry(pair[1], show(tuple(pair)), where), first_fit=True))
    _check_pairs(out, known)
    return Rules(tuple(out))


def _parse_text(text: str, known: tuple[str, ...]) -> Rules:
    toks = _tokens(text)
    out: list[Rule] = []
    i = 0

    def fail(msg):
        raise RuleError(f"cannot read rules {show(text, TEXT_SHOWN)}: {msg}; write NAME=AXES items "
                        "separated by ',', e.g. batch=data,mlp=model,embed=None or "
                        "opt:embed=data, or (NAME,AXES) pairs, e.g. (embed,fsdp),(embed,tensor)")

    def at(j):
        return toks[j] if j < len(toks) else ("end", "")

    def take(punct, what):
        nonlocal i
        if at(i) != ("punct", punct):
            fail(f"expected {what}" + (f", found {show(toks[i][1])}" if i < len(toks) else
                                       " at the end"))
        i += 1

    def take_name(what):
        nonlocal i
        if at(i)[0] != "name":
            fail(f"expected {what}" + (f", found {show(toks[i][1])}" if i < len(toks) else
                                       " at the end"))
        i += 1
        return toks[i - 1][1]

    def take_scoped_name():
        nonlocal i
        name, kind = take_name("a logical dimension name"), None
        if at(i) == ("punct", ":"):
            i += 1
            kind, name = name, take_name("a logical dimension name after ':'")
        return kind, name

    def take_axes(after):
        nonlocal i
        opener = at(i)[1] if at(i)[0] == "punct" else ""
        if opener not in _CLOSE:
            return take_name(f"mesh axes (an axis, None or a tuple) after {after}")
        axes, i = [], i + 1
        while i < len(toks) and toks[i] != ("punct", _CLOSE[opener]):
            if toks[i][0] == "name":
                axes.append(toks[i][1])
            elif toks[i] != ("punct", ","):
                fail(f"unexpected {show(toks[i][1])} inside a tuple of mesh axes")
            i += 1
        if i == len(toks):
            fail(f"a {opener!r} is not closed")
        i += 1
        return tuple(axes)

    # The whole list bracketed, as Python and YAML write a list of pairs: `[(batch,data), ...]`.
    if at(0)[0] == at(1)[0] == "punct" and at(0)[1] in _CLOSE and \
            at(1)[1] in (*_CLOSE, _CLOSE[at(0)[1]]):
        if toks[-1] != ("punct", _CLOSE[toks[0][1]]):
            fail(f"a {toks[0][1]!r} around the pairs is not closed")
        toks = toks[1:-1]               # `[]` leaves no rules
    while i < len(toks):
        start = i
        opener = toks[i][1] if toks[i][0] == "punct" else ""
        if opener in _CLOSE:            # a (NAME, AXES) pair
            i += 1
            scope, name = take_scoped_name()
            take(",", f"',' after {show(name)} in a (NAME,AXES) pair")
            value = take_axes(f"({name},")
            take(_CLOSE[opener], f"{_CLOSE[opener]!r} closing the pair for {show(name)}")
            rule_text = "".join(t[1] for t in toks[start:i])
            kind = _check_kind(scope, rule_text)
            out.append(Rule(kind, name, _entry(value, rule_text), first_fit=True))
        else:
            scope, name = take_scoped_name()
            if at(i) != ("punct", "="):
                fail(f"expected '=' after {show(name)}")
            i += 1
            value = take_axes(f"{name}=")
            rule_text = "".join(t[1] for t in toks[start:i])
            kind = _check_name(name, scope, known, rule_text)
            out.append(Rule(kind, name, _entry(value, rule_text)))
        if i < len(toks):
            if toks[i] != ("punct", ","):
                fail(f"expected ',' between rules, found {show(toks[i][1])}")
            i += 1
    _check_pairs(out, known)
    return Rules(tuple(out))


def logical_spec(dims: Iterable[str | None],
                 table: Mapping[str, Entry] | Iterable[tuple[str, Entry]],
                 mesh_axes: Container[str] | None = None) -> tuple[Entry, ...]:
    """The PartitionSpec entries of a tensor with logical dimension names `dims`.

    `table` (a mapping, or (name, mesh axes) pairs where a name may repeat: `Rules.pairs`) is
    taken in order of priority, as flax's `logical_to_mesh_axes` takes it: a dimension gets the
    mesh axes of the first rule for its name whose axes no other dimension took before; a rule
    of None leaves it whole. With `mesh_axes`, the axes not in it are then dropped from the
    entries, as a mesh axis of size 1 would split nothing."""
    dims = tuple(dims)
    out: list[Entry] = [None] * len(dims)
    done: set[int] = set()
    used: set[str] = set()
    for name, entry in table.items() if isinstance(table, Mapping) else table:
        if name not in dims:
            continue
        pos, axes = dims.index(name), entry_axes(entry)
        if pos in done or used.intersection(axes):
            continue
        done.add(pos)
        used.update(axes)
        out[pos] = entry
    if mesh_axes is not None:
        out = [_present(e, mesh_axes) for e in out]
    return tuple(out)


def _present(entry: Entry, mesh_axes: Container[str]) -> Entry:
    axes = entry_axes(entry)
    kept = tuple(a for a in axes if a in mesh_axes)
    if len(kept) == len(axes):
        return entry
    return None if not kept else kept[0] if len(kept) == 1 else kept
