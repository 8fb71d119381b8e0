"""explorer.search's own options, beside the explorer Request it searches (whose layout is what
varies): what to vary (the space, the names or tensors, the mesh's other shapes), when to stop
(a budget, patience, cancel, a progress callback that returns False), whether to prune, where
to compile (this process's worker pool or a Ray cluster), and the pipeline search's limits.

SearchOptions is checked when it is made, as a Request is: each error an InputError naming the
option, its value and what it takes. What depends on the program (a space it has, the names it
uses, an option only the pipeline search takes) is checked by the search (search.py), once it
knows the program from the Request."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from explorer._src.api.request import check_flag, check_timeout
from explorer._src.errors import InputError, choices
from explorer._src.layout_search.connect import PROBE_TIMEOUT_S, check_address
from explorer._src.layout_search.result import Progress, SearchSpace
from explorer._src.spec.bounds import show
from explorer._src.workloads.pipeline import MICROBATCHES


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """How to search a Request: explorer.search's keywords that are not the Request's fields,
    with the same meaning (see explorer.search). `dataclasses.replace` makes an edited copy,
    checked the same way.

    Example:
        >>> from explorer._src.layout_search.options import SearchOptions
        >>> SearchOptions(space="rules", budget_s=60).budget_s
        60.0
        >>> SearchOptions(verify=0)
        Traceback (most recent call last):
        ...
        explorer.InputError: verify=0 is not a whole number from 1 to 100
    """

    space: SearchSpace | None = None     # None: the program's own (search.py's _check_space)
    names: Sequence[str] | None = None   # a rules search's logical names (None: all)
    tensors: Sequence[str] | None = None  # a specs search's tensors (None: all)
    mesh_shapes: bool = True
    budget_s: float | None = None
    prune: bool = True
    patience: int | None = None
    progress: Callable[[Progress], Any] | None = None
    cancel: Any = None                   # anything with is_set(), e.g. a threading.Event
    cluster: str | None = None           # a Ray address; None: this process's worker pool
    node_timeout: float | None = None    # None: PROBE_TIMEOUT_S (`probe_timeout`)
    pool: Any = None                     # the worker pool of a search on this machine
    max_microbatches: int | None = None  # the pipeline search's; None: its default
    verify: int = 3                      # the pipeline search's plans compiled that fit

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "prune", check_flag(self.prune, "prune"))
        set_(self, "mesh_shapes", check_flag(self.mesh_shapes, "mesh_shapes"))
        _check_callbacks(self.cancel, self.progress)
        set_(self, "space", _check_space_name(self.space))
        set_(self, "budget_s", _check_budget(self.budget_s))
        set_(self, "patience", _check_patience(self.patience))
        set_(self, "verify", _check_verify(self.verify))
        set_(self, "max_microbatches", _check_microbatches(self.max_microbatches))
        set_(self, "cluster", None if self.cluster is None else check_address(self.cluster))
        set_(self, "node_timeout", _check_node_timeout(self.node_timeout, self.cluster))

    @property
    def probe_timeout(self) -> float:
        """The seconds each node of the cluster gets to answer the check before the search."""
        return PROBE_TIMEOUT_S if self.node_timeout is None else self.node_timeout


def _check_space_name(space) -> SearchSpace | None:
    """One of the spaces by name (whether the program has it is the search's check)."""
    if space is None:
        return None
    codes = [s.value for s in SearchSpace]
    if not isinstance(space, str) or space not in codes:
        raise InputError(f"space {show(space)} is not one of {choices(codes)}")
    return SearchSpace(space)


def _check_node_timeout(node_timeout, cluster: str | None) -> float | None:
    checked = check_timeout(node_timeout, "node_timeout")
    if checked is not None and cluster is None:
        raise InputError(f"node_timeout={show(node_timeout)} applies to a search on a Ray "
                         "cluster; give cluster= as well (e.g. cluster='127.0.0.1:6379'), or "
                         "leave node_timeout out")
    return checked


def _check_budget(budget_s) -> float | None:
    if budget_s is None:
        return None
    if isinstance(budget_s, bool) or not isinstance(budget_s, int | float) \
            or not math.isfinite(budget_s) or budget_s <= 0:
        raise InputError(f"budget_s={show(budget_s)} is not a positive number of seconds; "
                         "pass e.g. budget_s=60, or None for no limit")
    return float(budget_s)


def _check_microbatches(limit) -> int | None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                              or not 1 <= limit <= MICROBATCHES.high):
        raise InputError(f"max_microbatches={show(limit)} is not a whole number from 1 to "
                         f"{MICROBATCHES.high}")
    return limit


def _check_callbacks(cancel, progress) -> None:
    if cancel is not None and not callable(getattr(cancel, "is_set", None)):
        raise InputError(f"cancel {show(cancel)} is not a threading.Event (anything with "
                         "is_set())")
    if progress is not None and not callable(progress):
        raise InputError(f"progress {show(progress)} is not a function of a Progress")


def _check_verify(verify) -> int:
    if isinstance(verify, bool) or not isinstance(verify, int) or not 1 <= verify <= 100:
        raise InputError(f"verify={show(verify)} is not a whole number from 1 to 100")
    return verify


def _check_patience(patience) -> int | None:
    if patience is not None and (isinstance(patience, bool) or not isinstance(patience, int)
                                 or patience < 1):
        raise InputError(f"patience={show(patience)} is not a whole number >= 1 (compiles "
                         "without improvement before the search stops), or None")
    return patience
