"""What search keeps for one store, as named attributes (``SearchState``), and what may be tuned in it
(``SearchSettings``).

The store creates its search state with itself (``RecordStore(uri, search=SearchSettings(...))``) and
drops it at ``close()``. Each part is made at its first use (so opening a store imports none of numpy,
scipy or the search modules), under the state's lock, once. Tests and benchmarks choose a part's
parameters through ``SearchSettings`` when they create the store: nothing is injected by calling first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from synthex_resources.record_store import RecordStore
    from synthex_resources.search.indexes.dense_index import DenseIndex
    from synthex_resources.search.indexes.drill_down_keys import DrillDownKeys
    from synthex_resources.search.indexes.leaf_scope import LeafScopes
    from synthex_resources.search.indexes.lexicon import Lexicons
    from synthex_resources.search.indexes.memory_lexical import MemoryBM25
    from synthex_resources.search.indexes.postings import PostingsBM25
    from synthex_resources.search.indexes.sidecar import Sidecar
    from synthex_resources.search.indexes.versioned import VersionedStructure
    from synthex_resources.search.indexes.via_inverse import ViaInverses
    from synthex_resources.search.indexes.word_index import WordIndexes, WordVectors

T = TypeVar("T")
S = TypeVar("S", bound="VersionedStructure[Any, Any]")


@dataclass(frozen=True)
class SearchSettings:
    """Parameters of a store's search structures; None: the module's default (named beside each)."""

    dense_mode: str = "auto"  # search/indexes/dense_index.py MODES
    dense_ann_from: int | None = None  # dense_index.ANN_FROM
    postings_rows_from: int | None = None  # postings.POSTINGS_FROM
    postings_enabled: bool = True  # False: LanceDB's FTS answers every lexical query (a reference)
    scope_incremental_from: int | None = None  # leaf_scope.INCREMENTAL_FROM


class _Part(Generic[T]):
    """An attribute of ``SearchState`` made at its first read, under the state's lock, once."""

    def __init__(self, make: Callable[[SearchState], T]) -> None:
        self.make = make

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, state: SearchState | None, owner: type) -> T:
        if state is None:
            return self  # type: ignore[return-value]
        with state._lock:
            if self.name not in state._parts:
                state._parts[self.name] = self.make(state)
            return state._parts[self.name]


def _sidecar(state: SearchState) -> Sidecar:
    from synthex_resources.search.indexes.sidecar import Sidecar, folder_of

    return Sidecar(folder_of(state.store))


def _dense(state: SearchState) -> DenseIndex:
    from synthex_resources.search.indexes.dense_index import ANN_FROM, DenseIndex

    s = state.settings
    return DenseIndex(state.store, mode=s.dense_mode,
                      ann_from=s.dense_ann_from if s.dense_ann_from is not None else ANN_FROM)


def _postings(state: SearchState) -> PostingsBM25:
    from synthex_resources.search.indexes.postings import POSTINGS_FROM, PostingsBM25

    s = state.settings
    return PostingsBM25(state.store, rows_from=s.postings_rows_from if s.postings_rows_from is not None
                        else POSTINGS_FROM, enabled=s.postings_enabled)


def _memory_bm25(state: SearchState) -> MemoryBM25:
    from synthex_resources.search.indexes.memory_lexical import MemoryBM25

    return MemoryBM25(state.store)


def _scopes(state: SearchState) -> LeafScopes:
    from synthex_resources.search.indexes.leaf_scope import INCREMENTAL_FROM, LeafScopes

    s = state.settings
    return LeafScopes(lambda: state.sidecar, s.scope_incremental_from if s.scope_incremental_from is not None
                      else INCREMENTAL_FROM)


def _lexicons(state: SearchState) -> Lexicons:
    from synthex_resources.search.indexes.lexicon import Lexicons

    return Lexicons(lambda: state.sidecar, state.store)


def _word_indexes(state: SearchState) -> WordIndexes:
    from synthex_resources.search.indexes.word_index import WordIndexes

    return WordIndexes(lambda: state.sidecar, state.store)


def _drill_down_keys(state: SearchState) -> DrillDownKeys:
    from synthex_resources.search.indexes.drill_down_keys import DrillDownKeys

    return DrillDownKeys()


def _via(state: SearchState) -> ViaInverses:
    from synthex_resources.search.indexes.via_inverse import ViaInverses

    return ViaInverses()


def _pool(state: SearchState) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=4, thread_name_prefix="synthex-search")


class SearchState:
    """The search structures of one store object, each named (see each module for what it holds)."""

    sidecar: _Part[Sidecar] = _Part(_sidecar)  # search/indexes/sidecar.py: what is saved beside the table
    dense: _Part[DenseIndex] = _Part(_dense)  # search/indexes/dense_index.py: the vectors' matrix and IVF index
    postings: _Part[PostingsBM25] = _Part(_postings)  # search/indexes/postings.py: BM25 of a plaintext store
    memory_bm25: _Part[MemoryBM25] = _Part(_memory_bm25)  # search/indexes/memory_lexical.py: BM25 of an encrypted one
    scopes: _Part[LeafScopes] = _Part(_scopes)  # search/indexes/leaf_scope.py: leaf-sum bookkeeping per scope
    lexicons: _Part[Lexicons] = _Part(_lexicons)  # search/indexes/lexicon.py: rare terms per scope
    word_indexes: _Part[WordIndexes] = _Part(_word_indexes)  # search/indexes/word_index.py: words per scope
    drill_down_keys: _Part[DrillDownKeys] = _Part(_drill_down_keys)  # search/indexes/drill_down_keys.py: aggregates' keys
    via: _Part[ViaInverses] = _Part(_via)  # search/indexes/via_inverse.py: leaf -> its records
    pool: _Part[ThreadPoolExecutor] = _Part(_pool)  # threads running the lexical and dense legs side by side

    def __init__(self, store: RecordStore, settings: SearchSettings | None = None) -> None:
        self.store = store
        self.settings = settings or SearchSettings()
        self._lock = threading.RLock()
        self._parts: dict[str, Any] = {}
        self._word_vectors: dict[str, WordVectors] = {}
        self._structures: dict[type, VersionedStructure[Any, Any]] = {}

    def structure(self, kind: type[S]) -> S:
        """The store's one instance of a strategy's own versioned structure class (a plugin's, or any not
        named above): made at the first ask as ``kind(sidecar)``, kept until ``close``. Keyed by the class
        itself, so asking for another kind cannot land on this one's entries."""
        with self._lock:
            found = self._structures.get(kind)
            if found is None:
                found = self._structures[kind] = kind(lambda: self.sidecar)
            return found  # type: ignore[return-value]

    def word_vectors(self, embedder: str, load: Callable[[], WordVectors]) -> WordVectors:
        """The word vectors of the embedder named ``embedder`` (``load``: made at the first ask)."""
        with self._lock:
            found = self._word_vectors.get(embedder)
            if found is None:  # one per embedder: shared by every scope and every query of this store
                found = self._word_vectors[embedder] = load()
            return found

    def built(self) -> dict[str, Any]:
        """The parts made so far, by attribute name (a plugin's structures by class name): what the ablations
        size; nothing is made by asking."""
        with self._lock:
            return {**self._parts, **{kind.__name__: value for kind, value in self._structures.items()}}

    def close(self) -> None:
        """Stop the threads this state started and drop every structure and word vectors it holds (saves still
        running finish on their own; a part or structure with ``shutdown`` is shut down)."""
        with self._lock:
            parts, self._parts = self._parts, {}
            structures, self._structures = self._structures, {}
            self._word_vectors = {}  # loaded again at the next ask: a closed state holds nothing
        for value in [*parts.values(), *structures.values()]:
            shutdown = getattr(value, "shutdown", None)
            if callable(shutdown):
                shutdown(wait=False)
