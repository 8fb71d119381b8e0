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
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Lru(Generic[K, V]):
    """The last `size` values put, by key; a get or a put makes its key the most recent."""

    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"an Lru holds at least 1 entry, not {size}")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        """Keep `value` under `key`, forgetting the least recent entries over `size`."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries
