"""What an instruction's op_name says: the jax primitive, a sharding constraint's name, the
parts of a combined collective, the backward pass, the op as people read it."""

from __future__ import annotations

import re

# Primitives of jax whose lowering is a collective the program itself asked for.
EXPLICIT_PRIMITIVES = {
    "psum", "psum_invariant", "pmax", "pmin", "pmean", "ppermute", "pshuffle", "pswapaxes",
    "all_to_all", "all_gather", "all_gather_invariant", "psum_scatter", "reduce_scatter",
    "pbroadcast", "ragged_all_to_all",
}
# jax lowers some primitives under another name than the one the program calls.
AS_WRITTEN = {"psum_invariant": "psum", "all_gather_invariant": "all_gather"}

# A `/` that separates scopes, not one inside an einsum's parentheses.
_SCOPE = re.compile(r"/(?![^()]*\))")


def primitive(op_name: str, with_einsum: bool = False) -> str:
    """The jax primitive of an op_name: `jit(f)/jvp(bsd,df->bsf)/dot_general` -> `dot_general`
    (with its einsum, `dot_general bsd,df->bsf`, when asked)."""
    if not op_name:
        return ""
    first = op_name.split(";")[0]
    parts = _SCOPE.split(first)
    prim = parts[-1]
    if with_einsum and len(parts) > 1:
        m = re.search(r"\(([^()]*->[^()]*)\)", parts[-2])
        if m:
            return f"{prim} {m.group(1)}"
    return prim


def constraint_point(op_name: str) -> str | None:
    """"" or " `name`" for a sharding constraint (the name of its named scope, as the built-in
    workloads give every constraint point); None when the op is not a constraint."""
    if primitive(op_name) != "sharding_constraint":
        return None
    parts = _SCOPE.split(op_name.split(";")[0])
    scope = parts[-2] if len(parts) > 1 else ""
    scope = re.sub(r"^(?:transpose\()?(?:jvp\()?([^()]*)\)*$", r"\1", scope)
    return f"`{scope}` " if scope and not scope.startswith("jit(") else ""


def combined_op_names(op_name: str) -> list[str]:
    """The op_names XLA joined when it combined collectives: `prefix/(a:b:c)`."""
    m = re.match(r"^(.*?/)?\((.*)\)$", op_name)
    if not m or ":" not in m.group(2):
        return []
    return [(m.group(1) or "") + part for part in m.group(2).split(":")]


def is_backward(op_name: str) -> bool:
    """Whether the op belongs to a backward pass (jax writes `transpose(...)` into its scope)."""
    return "transpose(" in op_name


def short_op(op_name: str) -> str:
    """The tail of a jax op name as people read it: `dot_general`. A combined op
    (`jit(f)/(a/dot_general:b/reduce_sum)`) gives its distinct tails: `dot_general+reduce_sum`;
    fused ones (`a;b`) likewise. No stray brackets."""
    body = op_name.strip()
    parts = []
    for piece in re.split(r"[:;]", body):
        tail = piece.strip().rsplit("/", 1)[-1]
        # Unbalanced brackets belong to the combined op's list, not to the op.
        while tail.endswith(")") and tail.count(")") > tail.count("("):
            tail = tail[:-1]
        while tail.startswith("(") and tail.count("(") > tail.count(")"):
            tail = tail[1:]
        if tail and tail not in parts:
            parts.append(tail)
    return "+".join(parts)
