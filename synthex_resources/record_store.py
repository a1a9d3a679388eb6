"""The record store: one object, with a lifetime, over the Lance datasets under one URI.

It is made of small typed parts, each the only door onto its table (``synthex_resources/store/``):

- ``records``: the records table (reads take a ``BranchScope``; writes name the branch they change);
- ``vectors``: embeddings of records (filled once per distinct text);
- ``runs``: runs and their per-partition stats;
- ``llm_cache``: model responses for replay;
- ``hook_cursors``: what each ``on_update`` hook last delivered.

Filters are typed (``store.filters.RecordFilter``) and turned into SQL in one function. The store keeps no
"current branch": a caller resolves a scope (``PipelineDefinition.scope``) and passes it. What the store
does keep, it owns for its lifetime: open tables and its search state (``search_state``, a
``SearchState``: the dense matrix, the postings, the leaf-sum bookkeeping, the thread pool, each a named
attribute, search/state.py), dropped by ``close()``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from synthex.core.errors import BadInputError
from synthex.core.record import Record
from synthex_resources.embedder import Embedder, EmbedderConfig, OnnxEmbedder
from synthex_resources.encryption import StoreCipher
from synthex_resources.search.state import SearchSettings, SearchState
from synthex_resources.store.hook_cursors import HookCursors
from synthex_resources.store.llm_cache import LLMCache
from synthex_resources.store.pinned import PinnedDataset
from synthex_resources.store.records import Records
from synthex_resources.store.runs import RunLog
from synthex_resources.store.schemas import (  # noqa: F401 - the table names, re-exported for callers
    CACHE_SCHEMA,
    LIGHT_COLUMNS,
    LLM_CACHE,
    RECORDS,
    RUN_STEPS,
    RUNS,
    records_schema,
)
from synthex_resources.store.tables import LanceTables, StoreUnavailableError, VersionPin  # noqa: F401


class RecordStore:
    def __init__(self, uri: str, embedder: Embedder | Callable[[], Embedder] | None = None,
                 storage_options: dict[str, str] | None = None, encryption_key: str | None = None,
                 search: SearchSettings | None = None) -> None:
        self.uri = uri
        self.storage_options = storage_options
        self.tables = LanceTables(uri, storage_options, encryption_key)
        self._embedder = embedder
        self._embedder_checked = False  # against the store's recorded embedder, once, at the first use
        self._lock = threading.RLock()
        self._embedder_lock = threading.Lock()
        # What search keeps for this store, as named attributes (``search``: its parameters, chosen here).
        self.search_state = SearchState(self, search)
        self.records = Records(self.tables, lambda: self.embedder)
        self.vectors = self.records.vectors
        self.runs = RunLog(self.tables)
        self.llm_cache = LLMCache(self.tables)
        self.hook_cursors = HookCursors(self.tables)

    @property
    def embedder(self) -> Embedder:
        with self._embedder_lock:  # a run's embedding thread (store.vectors.EmbedAhead) may ask first
            if self._embedder is None:
                self._embedder = EmbedderConfig().create()
            if callable(self._embedder) and not hasattr(self._embedder, "embed"):
                self._embedder = self._embedder()
            if not self._embedder_checked:
                self._check_embedder(self._embedder)  # type: ignore[arg-type]
                self._embedder_checked = True
            return self._embedder  # type: ignore[return-value]

    def _check_embedder(self, embedder: Embedder) -> None:
        """Refuse, in one line, an embedder other than the one whose vectors the store holds: two models of
        one width (MiniLM and bge-small are both 384) would otherwise mix in one table, silently."""
        recorded, name = self.records.embedder_recorded(), getattr(embedder, "name", None)
        if recorded is not None and name is not None and recorded != name:
            raise BadInputError(f"store {self.uri}: its vectors were written by the embedder {recorded!r}, and "
                                f"this store is opened with {name!r} (SYNTHEX_EMBEDDER or the store's "
                                f"embedder setting): use {recorded!r}, or a new store for the other model")

    def warm_embedder(self) -> None:
        """Start loading the offline embedding model on a background thread (a run that will embed calls
        this first, so the model loads while Dagster imports and the run is created: ~0.3-0.6 s of a demo
        run's wall time on 2 cores). Other embedders have nothing to load."""
        embedder = self.embedder
        if isinstance(embedder, OnnxEmbedder):
            embedder.load_in_background()

    def close(self) -> None:
        """Drop caches and stop thread pools; the store can still be used (it rebuilds on demand)."""
        with self._lock:
            state, self.search_state = self.search_state, SearchState(self, self.search_state.settings)
            self.tables.forget()
        state.close()

    # -- what the search layer reads below the typed parts ------------------------------------------
    @property
    def cipher(self) -> StoreCipher | None:
        return self.tables.cipher

    def content_fingerprint(self, content: str) -> str:
        return self.tables.content_fingerprint(content)

    def dataset(self, name: str, version: int | None = None) -> Any | None:
        return self.tables.dataset(name, version)

    def records_table(self, create: bool = False) -> Any | None:
        return self.records.table(create)

    def records_version(self, tbl: Any) -> int:
        return self.tables.records_version(tbl)

    def records_read_version(self) -> int | None:
        """The records table's version a search reads, without importing lancedb (``LanceTables.read_version``)."""
        return self.tables.read_version()

    def read_dataset(self) -> PinnedDataset | None:
        """The records table a search reads, at one version with its state (``LanceTables.read_dataset``):
        what every structure kept per table version is keyed by, read from and saved as."""
        return self.tables.read_dataset()

    @contextmanager
    def pinned_version(self, holder: VersionPin | None = None) -> Iterator[VersionPin]:
        with self.tables.pinned_version(holder) as pin:
            yield pin

    def current_pin(self) -> VersionPin | None:
        return self.tables.current_pin()

    def to_record(self, row: dict[str, Any]) -> Record:
        return self.records.to_record(row)


def open_store(uri: str, embedder: Embedder | Callable[[], Embedder] | None = None,
               search: SearchSettings | None = None) -> RecordStore:
    """A new RecordStore on ``uri`` (keep it: it owns its caches). The embedder (an object, or a factory
    called on first write) defaults to the environment's (``EmbedderConfig``); ``search``: the parameters
    of its search structures (search/state.py)."""
    return RecordStore(uri, embedder=embedder or EmbedderConfig().create, search=search)
