"""The layout rules, one module each, and which are tried, in order, for each kind of
collective. A rule is a plain function `(ctx, target) -> Why | None` (see base.py); the first
that answers gives the reason. `explicit` is not in the table: it needs no layout, so the
reader tries it first for every kind, before it checks that there are layouts to compare."""

from __future__ import annotations

from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.report.why.rules.base import WhyRule
from explorer._src.report.why.rules.explicit import explicit
from explorer._src.report.why.rules.gather import gather, gather_exact
from explorer._src.report.why.rules.indexing import indexing, slicing
from explorer._src.report.why.rules.partial_sum import partial_sum
from explorer._src.report.why.rules.reshard import reshard_operand, reshard_result

# A reduction first asks what was partial; a gather whether an operand is needed whole (the
# operand that is whole in exactly the result's shape before one XLA reshaped on the way);
# a data movement only how the layout moved.
RULES: dict[CollectiveKind, tuple[WhyRule, ...]] = {
    CollectiveKind.ALL_REDUCE: (partial_sum, indexing, reshard_operand),
    CollectiveKind.REDUCE_SCATTER: (partial_sum, indexing, reshard_operand),
    CollectiveKind.ALL_GATHER: (indexing, gather_exact, gather, reshard_operand,
                                reshard_result),
    CollectiveKind.ALL_TO_ALL: (reshard_operand, reshard_result),
    # Only a shard_map writes one (jax.lax.ragged_all_to_all): `explicit` answers first.
    CollectiveKind.RAGGED_ALL_TO_ALL: (reshard_operand, reshard_result),
    # A permute that no layout change explains may move a slice's parts (slicing).
    CollectiveKind.COLLECTIVE_PERMUTE: (reshard_operand, reshard_result, slicing),
}

__all__ = ["RULES", "WhyRule", "explicit"]
