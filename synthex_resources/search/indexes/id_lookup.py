"""Id -> row lookups over arrays, answered by binary search instead of a dict.

At 1M records a Python dict of id -> row took 1-3 s to build from the persisted id array, in the first
query of every new process (docs/benchmarks.md, issue 24). Here the ids stay one numpy string array and
their sort order (``np.argsort``, ~0.4 s at 1M random ids, ~0.04 s when already sorted) is computed once,
then persisted beside them in the search sidecar (search/indexes/sidecar.py) so a new process only maps it. A
batch of ids is looked up with one ``np.searchsorted`` (~8 ms for 4,000 ids at 1M).

Duplicate ids resolve like ``dict(zip(ids, rows))`` does: the last one wins (the sort is stable and the
search takes the rightmost equal key).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

# Up to this many ids, single-id lookups (``get``, ``in``, ``[]``) go through a dict built at the first one
# (~20 ms at 100k): callers that loop over a few hundred ids stay as fast as with the dicts this replaced.
# Past it, lookups are binary searches until a dict built in the background is ready (``IdLookup``).
DICT_AFTER = 4  # batch lookups before that build starts: a new process's first query makes 1-3 per lookup
DICT_UP_TO = 200_000


def as_text(ids: Sequence[str] | np.ndarray) -> np.ndarray:
    """``ids`` as a numpy unicode array (the form the lookups search)."""
    if isinstance(ids, np.ndarray) and ids.dtype.kind == "U":
        return ids
    values = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
    return np.asarray(values, dtype=str) if values else np.zeros(0, dtype="<U1")


def sort_order(ids: np.ndarray) -> np.ndarray:
    """The stable argsort of ``ids`` (int64), with a linear check first: ids written in order need no sort."""
    if len(ids) < 2 or bool((ids[1:] >= ids[:-1]).all()):
        return np.arange(len(ids), dtype=np.int64)
    return np.argsort(ids, kind="stable").astype(np.int64, copy=False)


def merged_order(old_ids: np.ndarray, old_order: np.ndarray, new_ids: np.ndarray) -> np.ndarray:
    """The sort order of ``old_ids`` followed by ``new_ids`` from ``old_order`` (O(n) instead of a new sort;
    equal ids keep array order, so the appended one is last)."""
    new_order = sort_order(new_ids)
    at = np.searchsorted(old_ids[old_order], new_ids[new_order], side="right")
    return np.insert(old_order, at, len(old_ids) + new_order)


class IdLookup(Mapping[str, int]):
    """``id -> row`` over ``ids`` (row i holds ``ids[i]``), optionally restricted to the rows ``live`` marks.

    ``order``: the sort order of ``ids`` when known (persisted); computed at the first lookup otherwise."""

    def __init__(self, ids: np.ndarray, order: np.ndarray | None = None, live: np.ndarray | None = None,
                 dict_from: int = DICT_UP_TO) -> None:
        self.ids = ids
        # Past ``dict_from`` ids the dict is built in a background thread from the ``DICT_AFTER``-th batch
        # lookup on: a binary search over strings costs ~3 us per id (~8 ms for a query's 3,000 at 1M), a dict
        # ~0.1 us, so a new process answers at once and its later queries are as fast as before (issue 24).
        # Not from the first lookup: building a 1M-entry dict holds the GIL for ~1 s, which slowed the first
        # query it ran beside from 2.8 s to 4.2 s.
        self.dict_from = dict_from
        self.batches = 0
        self._dict_thread: threading.Thread | None = None
        self._order = order
        self.live = live
        self._searched: tuple[np.ndarray, np.ndarray] | None = None  # (sorted ids, their rows), live ones only
        self._dict: dict[str, int] | None = None  # id -> row once built (see ``dict_from``)
        self.sorts = 0  # sort orders this object computed (0 when it was given one: tests watch it)

    @property
    def order(self) -> np.ndarray:
        """The stable sort order of every id (live or not): what is persisted."""
        if self._order is None:
            self._order = sort_order(self.ids)
            self.sorts += 1
        return self._order

    def _sorted(self) -> tuple[np.ndarray, np.ndarray]:
        if self._searched is None:
            order = self.order
            in_order = len(order) > 0 and order[0] == 0 and bool((np.diff(order) == 1).all())
            if self.live is not None:
                order = order[self.live[order]]  # a subsequence of a sorted order is sorted
            # ids written in sorted order (the common case for generated ids) need no sorted copy
            self._searched = (self.ids if in_order and self.live is None else self.ids[order], order)
        return self._searched

    def _build_dict(self) -> None:
        rows = np.arange(len(self.ids)) if self.live is None else np.flatnonzero(self.live)
        self._dict = dict(zip(self.ids[rows].tolist(), rows.tolist(), strict=True))  # duplicates: the last wins

    def wait_dict(self) -> None:
        """Join the background dict build, if one was started (tests)."""
        if self._dict_thread is not None:
            self._dict_thread.join()

    def rows(self, keys: Iterable[str] | np.ndarray) -> np.ndarray:
        """The row of each of ``keys`` (int64), -1 where it is absent."""
        ready = self._dict
        if ready is not None:
            listed = keys.tolist() if isinstance(keys, np.ndarray) else list(keys)
            return np.fromiter((ready.get(k, -1) for k in listed), np.int64, len(listed))
        self.batches += 1
        if self._dict_thread is None and len(self.ids) > self.dict_from and self.batches >= DICT_AFTER:
            self._dict_thread = threading.Thread(target=self._build_dict, name="synthex-id-lookup", daemon=True)
            self._dict_thread.start()
        wanted = as_text(keys if isinstance(keys, np.ndarray) else list(keys))
        if not len(wanted):
            return np.zeros(0, dtype=np.int64)
        keys_sorted, rows = self._sorted()
        if not len(keys_sorted):
            return np.full(len(wanted), -1, dtype=np.int64)
        fits = None
        if wanted.itemsize > keys_sorted.itemsize:
            # searchsorted would cast the whole sorted array to the wider type (a copy of every id, per call);
            # a key longer than the longest id is absent anyway, the others fit the ids' type
            fits = np.char.str_len(wanted) <= keys_sorted.itemsize // 4
            wanted = np.where(fits, wanted, "").astype(keys_sorted.dtype)
        at = np.searchsorted(keys_sorted, wanted, side="right") - 1
        safe = np.maximum(at, 0)
        found = (at >= 0) & (keys_sorted[safe] == wanted)
        if fits is not None:
            found &= fits
        return np.where(found, rows[safe], -1).astype(np.int64, copy=False)

    def single_rows(self, keys: Sequence[str]) -> np.ndarray:
        """The row of each of ``keys`` held by exactly one live row (int64); -1 where it is absent or held
        by several. One binary search (whatever dict is built): the equal ids sit side by side."""
        wanted = as_text(list(keys))
        keys_sorted, rows = self._sorted()
        if not len(wanted) or not len(keys_sorted):
            return np.full(len(wanted), -1, dtype=np.int64)
        fits = np.char.str_len(wanted) <= keys_sorted.itemsize // 4
        wanted = np.where(fits, wanted, "").astype(keys_sorted.dtype)  # longer than every id: absent
        at = np.searchsorted(keys_sorted, wanted, side="right") - 1
        safe = np.maximum(at, 0)
        found = fits & (at >= 0) & (keys_sorted[safe] == wanted)
        found &= (at == 0) | (keys_sorted[np.maximum(at - 1, 0)] != wanted)  # the one row of its id
        return np.where(found, rows[safe], -1).astype(np.int64, copy=False)

    # -- Mapping: for the few callers that look up one id at a time -----------------------------------
    def _one(self, key: object) -> int:
        if not isinstance(key, str):
            return -1
        if self._dict is None and len(self.ids) <= self.dict_from:
            self._build_dict()
        if self._dict is not None:
            return self._dict.get(key, -1)
        return int(self.rows([key])[0])

    def __getitem__(self, key: str) -> int:
        row = self._one(key)
        if row < 0:
            raise KeyError(key)
        return row

    def __contains__(self, key: object) -> bool:
        return self._one(key) >= 0

    def __iter__(self) -> Iterator[str]:  # the distinct live ids, in the order a dict of them would keep
        ids = self.ids if self.live is None else self.ids[self.live]
        return iter(dict.fromkeys(ids.tolist()))

    def __len__(self) -> int:
        return len(np.unique(self._sorted()[0]))

    def get(self, key: str, default: Any = None) -> Any:
        row = self._one(key)
        return row if row >= 0 else default


class GroupLookup(Mapping[str, list[int]]):
    """``record id -> [leaf positions]`` stored flat: ``records[i]``'s values are ``values[starts[i]:starts[i+1]]``.
    The records are unique. ``order``: the records' sort order when known."""

    def __init__(self, records: np.ndarray, sizes: np.ndarray, values: np.ndarray,
                 order: np.ndarray | None = None) -> None:
        self.records = records
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.flat = np.asarray(values, dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.index = IdLookup(records, order)
        self.single = bool((self.sizes == 1).all())  # one value per record (the common case)

    @staticmethod
    def of(groups: Mapping[str, Sequence[int]]) -> GroupLookup:
        records = list(groups)
        sizes = np.fromiter((len(v) for v in groups.values()), np.int64, len(records))
        values = np.fromiter((p for v in groups.values() for p in v), np.int64, int(sizes.sum()))
        return GroupLookup(as_text(records), sizes, values)

    def pairs(self, keys: Sequence[str] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For ``keys``: (index into ``keys``, value) for every value of every key found, in key order."""
        found = self.index.rows(keys)
        hit = np.flatnonzero(found >= 0)
        recs = found[hit]
        if self.single:
            return hit, self.flat[recs]
        counts = self.sizes[recs]
        which = np.repeat(hit, counts)
        # each found record's values: its start plus 0..size-1
        offsets = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        return which, self.flat[np.repeat(self.starts[recs], counts) + offsets]

    def appended(self, more: Mapping[str, Sequence[int]]) -> GroupLookup:
        """These groups followed by ``more`` (records new to this one), the sort order merged, not redone."""
        extra = GroupLookup.of(more)
        records = np.concatenate([self.records, extra.records]) if len(extra.records) else self.records
        merged = merged_order(self.records, self.index.order, extra.records) if len(extra.records) else self.index.order
        return GroupLookup(records, np.concatenate([self.sizes, extra.sizes]),
                           np.concatenate([self.flat, extra.flat]), merged)

    def __getitem__(self, key: str) -> list[int]:
        row = self.index.get(key)
        if row is None:
            raise KeyError(key)
        return self.flat[self.starts[row]:self.starts[row + 1]].tolist()

    def get(self, key: str, default: Any = None) -> Any:
        row = self.index.get(key)
        return default if row is None else self.flat[self.starts[row]:self.starts[row + 1]].tolist()

    def __contains__(self, key: object) -> bool:
        return key in self.index

    def __iter__(self) -> Iterator[str]:
        return iter(self.records.tolist())

    def __len__(self) -> int:
        return len(self.records)

    def values(self) -> Any:  # one pass over the arrays, not a lookup per key
        flat, starts = self.flat.tolist(), self.starts.tolist()
        return [flat[s:e] for s, e in zip(starts, starts[1:], strict=False)]

    def items(self) -> Any:
        return list(zip(self.records.tolist(), self.values(), strict=True))
