"""A bounded map that keeps what was used last: the per-version caches of the lexical legs (row masks of
search filters) take one, so each keeps at most its bound and the bookkeeping is written once."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

MASKS_KEPT = 32  # row masks a lexical leg caches per table version (one per distinct search filter)

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``limit`` entries; ``get_or_make`` makes a missing one and drops the least recently used."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"an LRU keeps at least one entry; limit={limit}")
        self.limit = limit
        self._items: OrderedDict[K, V] = OrderedDict()

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
            return value
        value = make()
        self._items[key] = value
        while len(self._items) > self.limit:
            self._items.popitem(last=False)
        return value

    def get(self, key: K) -> V | None:
        """The entry (now the most recently used), or None."""
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` under ``key`` (now the most recently used), dropping the least recently used."""
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)
