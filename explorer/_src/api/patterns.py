"""Spec patterns: partition rules as model libraries write them, regular expression -> spec.

MaxText, t5x and the model zoos place parameters with a table of `(regex, PartitionSpec)`
pairs, usually ending in a catch-all `('.*', P())`, matched against each parameter's path. The
explorer takes the same table as a dict or as a sequence of pairs. Libraries join a path with
'/' (`model/layers/0/mlp/down_proj/kernel`); the explorer names a tensor with '.'
(`model.layers.0.mlp.down_proj.kernel`); a pattern is searched (re.search) in both forms, so a
table copied from a library matches as it did there.

Which spec a tensor gets: a spec given with the tensor itself (a TensorSpec's spec that splits
some dimension) is the user's word about that one tensor and wins over every pattern;
otherwise the first pattern that finds the name; otherwise the tensor's own (replicated). A
pattern that finds no tensor at all is named (`unmatched`), since a table written for other
names otherwise silently leaves everything replicated.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from explorer._src.api.pytrees import map_tensor_leaves, tensor_leaves
from explorer._src.errors import RankError, SpecError
from explorer._src.spec.bounds import show
from explorer._src.spec.tensor import Entry, TensorSpec, entry_axes, format_spec, normalize_spec

# How a library joins a parameter's path, besides the explorer's own '.'.
_LIBRARY_SEPARATOR = "/"
_EXAMPLE = "{r'up.*kernel': 'None,model'} or [(r'layers/\\d+/mlp/.*kernel', P(None, 'model'))]"


@dataclass(frozen=True)
class SpecPattern:
    text: str                      # the regular expression as written
    regex: re.Pattern[str]
    spec: tuple[Entry, ...]

    def finds(self, name: str) -> bool:
        """Whether the pattern is found in `name`, '.'-joined or '/'-joined."""
        return bool(self.regex.search(name)
                    or self.regex.search(name.replace(".", _LIBRARY_SEPARATOR)))


def _pairs(specs: Any) -> list[tuple[Any, Any]]:
    if isinstance(specs, Mapping):
        return list(specs.items())
    if isinstance(specs, Sequence) and not isinstance(specs, str | bytes) and all(
            isinstance(p, Sequence) and not isinstance(p, str | bytes) and len(p) == 2
            for p in specs):
        return [tuple(p) for p in specs]
    raise SpecError(f"specs={show(specs)} is neither a mapping of regular expression to spec "
                    f"nor a sequence of (regular expression, spec) pairs, e.g. {_EXAMPLE}")


def spec_patterns(specs: Any) -> list[SpecPattern]:
    """`specs` (a mapping or a sequence of pairs: regular expression -> spec) checked and
    compiled, in the order given."""
    out = []
    for pattern, spec in _pairs(specs):
        if not isinstance(pattern, str):
            raise SpecError(f"spec pattern {show(pattern)} is not text; the keys of specs= are "
                            "regular expressions matched against tensor names")
        try:
            compiled = re.compile(pattern)
        except re.error as e:
            raise SpecError(f"spec pattern {pattern!r} is not a regular expression ({e})"
                            ) from None
        try:
            entries = normalize_spec(spec, tensor=pattern)
        except SpecError as e:
            raise SpecError(f"the spec of pattern {pattern!r}: {e}") from None
        out.append(SpecPattern(pattern, compiled, entries))
    return out


def splits(spec: Sequence[Entry]) -> bool:
    """Whether a spec splits any dimension: a tensor given such a spec keeps it."""
    return any(entry_axes(e) for e in spec)


def match_spec_patterns(names: Iterable[str], specs: Any
                        ) -> dict[str, tuple[str, tuple[Entry, ...]]]:
    """For each name that a pattern of `specs` finds (the first that does), the pattern's text
    and its spec."""
    patterns = spec_patterns(specs)
    out = {}
    for name in names:
        found = next((p for p in patterns if p.finds(name)), None)
        if found is not None:
            out[name] = (found.text, found.spec)
    return out


def unmatched(names: Iterable[str], specs: Any) -> list[str]:
    """The patterns of `specs` that find none of `names`, in the order given."""
    names = list(names)
    return [p.text for p in spec_patterns(specs) if not any(p.finds(n) for n in names)]


def unmatched_note(patterns: Sequence[str], names: Sequence[str]) -> str:
    """The Report's note for patterns that placed nothing, with names to write them against."""
    shown = ", ".join(repr(p) for p in patterns[:5]) + (
        f" and {len(patterns) - 5} more" if len(patterns) > 5 else "")
    examples = ", ".join(repr(n) for n in names[:3])
    return (f"spec pattern{'s' if len(patterns) != 1 else ''} {shown} matched no input tensor, "
            f"so {'they' if len(patterns) != 1 else 'it'} placed nothing; patterns are searched "
            f"(re.search) in the '.'- and '/'-joined names, e.g. {examples}")


def apply_spec_patterns(args: tuple[Any, ...], specs: Any) -> tuple[Any, ...]:
    """`args` (pytrees of TensorSpecs) with each leaf that has no spec of its own (none that
    splits a dimension) given the spec of the first pattern of `specs` that finds its name;
    other leaves keep their own spec."""
    tensor_leaves(args)                     # the pytree's checks, before any matching
    patterns = spec_patterns(specs)

    def place(t: TensorSpec) -> TensorSpec:
        if splits(t.spec):
            return t
        found = next((p for p in patterns if p.finds(t.name)), None)
        if found is None:
            return t
        if len(found.spec) > t.rank:
            raise RankError(
                f"spec pattern {found.text!r} gives {format_spec(found.spec)!r} "
                f"({len(found.spec)} entries) to tensor {t.name!r} of rank {t.rank} "
                f"{list(t.shape)}; narrow the pattern or give at most one entry per dimension",
                tensor=t.name)
        # A shorter spec leaves the remaining dimensions unsplit, as jax reads it.
        return replace(t, spec=found.spec + (None,) * (t.rank - len(found.spec))
                       if found.spec else ())

    return map_tensor_leaves(args, place)
