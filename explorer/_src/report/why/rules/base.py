"""What a rule is: a plain function `(ctx, target) -> Why | None`, None when its case is not
what the modules show. Most rules read one anchor at a time, the most likely meant first."""

from __future__ import annotations

from collections.abc import Callable

from explorer._src.hlo.module import Instruction
from explorer._src.report.why.context import Context
from explorer._src.report.why.reason import Why
from explorer._src.report.why.targets import CollectiveToExplain

WhyRule = Callable[[Context, CollectiveToExplain], Why | None]


def first_anchor(t: CollectiveToExplain, read: Callable[[Instruction], Why | None]) -> Why | None:
    """The first answer `read` gives for the target's anchors, in rank order."""
    for a in t.ranked:
        why = read(a)
        if why is not None:
            return why
    return None
