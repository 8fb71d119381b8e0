"""A small least-recently-used map, safe across threads: the caches whose key is not the
arguments of one function (so functools.lru_cache does not fit them) keep their last entries
in one.

- explorer._src.api.analyze: the last Reports, by the request's digest, filled after a compile;
- explorer._src.hlo.schedule: the schedules of the last module texts, read with a parsed module
  the caller may already hold;
- explorer._src.compile.lowering: the last lowered programs, by everything their lowering read,
  where that can be hashed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Lru(Generic[K, V]):
    """The last `size` values put, by key; a get or a put makes its key the most recent.

    With `weigh` (a value's bytes, say) and `budget`, the least recent entries also go while
    the values' weights sum over `budget`, so that a cache of large values (Reports holding a
    big program's texts) stays within a memory budget, not only a count; the most recent
    entry is kept whatever it weighs.
    """

    def __init__(self, size: int, weigh: Callable[[V], int] | None = None,
                 budget: int | None = None):
        if size < 1:
            raise ValueError(f"an Lru holds at least 1 entry, not {size}")
        if (weigh is None) != (budget is None):
            raise ValueError("an Lru takes both weigh and budget, or neither")
        self.size = size
        self.budget = budget
        self._weigh = weigh
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._weights: dict[K, int] = {}
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        """Keep `value` under `key`, forgetting the least recent entries over `size` (and
        over `budget`, where the Lru weighs its values)."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            if self._weigh is not None:
                self._weights[key] = self._weigh(value)
            while len(self._entries) > self.size or (
                    self.budget is not None and len(self._entries) > 1
                    and sum(self._weights.values()) > self.budget):
                old, _ = self._entries.popitem(last=False)
                self._weights.pop(old, None)

    @property
    def weight(self) -> int:
        """The weights of the values held, summed (0 where the Lru does not weigh them)."""
        with self._lock:
            return sum(self._weights.values())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._weights.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries
