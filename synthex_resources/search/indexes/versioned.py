"""One lifecycle for the structures search derives from the records table (``VersionedStructure``).

A structure (the leaf-sum bookkeeping, the multi-hop lexicon, the word index, the drill-down keys, the
via inverse, the in-memory BM25, the dense matrix, the postings) is made of the rows of one table version
and is valid for that version only. This base owns what every one of them needs, so that a structure
states only its own parts (its key, ``build``, ``extend``, what a saved entry gives, ``to_entry``):

- the version: ``get(read, key)`` takes the ``PinnedDataset`` the search reads (store/pinned.py) and keys
  the cache by ``(read.version, key)``; the hooks get that same object, read their rows from it, and the
  save carries its ``state``. Keyed by one version and made of, or saved as, another cannot happen here;
- eviction: a new version of a key drops the older versions of that key (one entry per key);
- locking: the structure's lock (``lock``) guards its cache only; an entry is made under the lock of its
  key, so a key is made once, never twice by two concurrent searches, while searches of other keys go on
  (a word index may take minutes to embed its words). A structure with one key (the dense matrix, the
  postings) may hold ``lock`` around ``get`` to keep its other state in step with the entry;
- the purge guard: ``Sidecar.guard()`` is taken before any hook reads a row, and the save goes through
  it, so a purge in between drops the save (search/indexes/sidecar.py);
- persistence: when nothing in memory can be extended, the sidecar entry saved for the key (``kind``,
  ``entry_key``) is offered to ``from_entry``; whatever was not loaded as it is is saved after it is made.

``how`` the last new entry was made is kept in ``last`` ("build", "extend", "load", or a structure's own
name of an extension: tests and benchmarks read it), with counts (``builds``, ``extensions``, ``loads``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

import numpy as np

from synthex_resources.search.indexes.sidecar import Entry, SaveGuard, Sidecar
from synthex_resources.store.pinned import PinnedDataset

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

BUILD, EXTEND, LOAD = "build", "extend", "load"
REUSE = "reuse"  # an older version's entry serves this one as it is (the same rows: an index update)


class VersionedStructure(Generic[K, V]):
    """Entries by (table version, key); subclasses override the hooks below (template method)."""

    kind = ""  # the sidecar kind its entries are saved under; "": kept in memory only

    def __init__(self, sidecar: Callable[[], Sidecar] | None = None) -> None:
        self.entries: dict[tuple[int, K], V] = {}
        self.lock = threading.RLock()
        self.last = ""  # how the last new entry was made: "build" / "extend" / "load"
        self.builds = 0  # entries built from every row by this object (tests watch it)
        self.extensions = 0  # entries extended from an older one by appended rows only
        self.loads = 0  # entries taken as saved by an earlier process
        self._sidecar = sidecar
        # held while an entry of that key is made; one per key that ever had an entry, as ``entries`` keeps one
        # entry per key (other versions are dropped, keys never): both grow with the keys asked, not the versions
        self._key_locks: dict[K, threading.RLock] = {}
        self._making = threading.local()  # ``guard``, per thread making an entry

    # -- the hooks a structure overrides -----------------------------------------------------------
    def build(self, read: PinnedDataset | None, key: K, context: Any) -> V:
        """The entry of ``key`` made of every row of ``read`` (None: no table)."""
        raise NotImplementedError

    def extend(self, read: PinnedDataset | None, key: K, previous: V, context: Any) -> tuple[V, str] | None:
        """``previous`` (this key's entry at another version) brought to ``read`` and how ("extend", or
        ``REUSE`` when it serves as it is); None: it cannot be (the sidecar is asked next, then a build)."""
        return None

    def from_entry(self, read: PinnedDataset, key: K, entry: Entry, context: Any) -> tuple[V, str] | None:
        """The entry an earlier process saved, as it is ("load") or extended ("extend"); None: unusable."""
        return None

    def to_entry(self, value: V, context: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """``value`` as a sidecar entry (its description, its arrays)."""
        raise NotImplementedError

    def entry_key(self, key: K) -> str:
        return str(key)

    def load_saved(self, sidecar: Sidecar, read: PinnedDataset, key: K, context: Any) -> tuple[V, str] | None:
        """What the sidecar holds for ``key``, through ``from_entry`` (a structure saved as several entries
        overrides this and ``save``)."""
        entry = sidecar.load(self.kind, self.entry_key(key)) if self.kind else None
        return self.from_entry(read, key, entry, context) if entry is not None else None

    def save(self, saving: SaveGuard, read: PinnedDataset, key: K, value: V, how: str, context: Any) -> None:
        """Save a new entry with the state of the version it was made of, unless it is as saved."""
        if how not in (LOAD, REUSE) and self.kind:
            saving.save(self.kind, self.entry_key(key), read.state, lambda: self.to_entry(value, context))

    def saved(self, read: PinnedDataset | None, value: V, how: str, saving: SaveGuard | None, context: Any) -> None:
        """Called after a new entry was kept (and its save started): what else it saves (word vectors)."""

    # -- the lifecycle -------------------------------------------------------------------------------
    @property
    def guard(self) -> SaveGuard | None:
        """The purge guard of the entry this thread is making (taken by ``get`` before any hook reads a
        row; None outside ``get``): a hook that saves more than its entry (the dense matrix's IVF index)
        keeps it."""
        return getattr(self._making, "guard", None)

    def get(self, read: PinnedDataset | None, key: K, context: Any = None) -> V:
        """The entry of ``key`` at ``read``'s version: cached, else extended from this key's entry at
        another version, else taken from the sidecar, else built; then kept, the key's other versions
        dropped, and saved with ``read.state`` unless it was taken as saved."""
        version = read.version if read is not None else -1
        with self.lock:
            if (version, key) in self.entries:
                return self.entries[(version, key)]
            key_lock = self._key_locks.setdefault(key, threading.RLock())
        with key_lock:  # one maker per key; other keys are made (and read) meanwhile
            with self.lock:
                if (version, key) in self.entries:  # made by another thread while this one waited
                    return self.entries[(version, key)]
                older = [k for k in self.entries if k[1] == key]
                previous = self.entries[older[-1]] if older else None
            sidecar = self._sidecar() if self._sidecar is not None else None
            saving = sidecar.guard() if sidecar is not None else None  # before any row is read
            self._making.guard = saving
            try:
                made: tuple[V, str] | None = None
                if previous is not None:
                    made = self.extend(read, key, previous, context)
                if made is None and read is not None and sidecar is not None:
                    made = self.load_saved(sidecar, read, key, context)
                value, how = made if made is not None else (self.build(read, key, context), BUILD)
                with self.lock:
                    for old in [k for k in self.entries if k[1] == key]:
                        del self.entries[old]  # another table version of the same key
                    self.entries[(version, key)] = value
                    self._count(how)
                if read is not None and saving is not None:
                    self.save(saving, read, key, value, how, context)
                self.saved(read, value, how, saving, context)
            finally:
                self._making.guard = None
            return value

    def _count(self, how: str) -> None:
        if how != REUSE:
            self.last = how
        if how == BUILD:
            self.builds += 1
        elif how == LOAD:
            self.loads += 1
        elif how != REUSE:
            self.extensions += 1
