"""The word index and the word vectors of word-neighbour expansion (search/strategies/hierarchical_expanded.py scores with
them; drill-down step 6). Both are saved beside the table (search/indexes/sidecar.py):

- ``WordVectors``: word -> unit vector, one per store and embedder, shared by every scope (branch, steps,
  periods) and by the query's own words, so a word is embedded once per store, whatever is searched (kept
  in the store's ``SearchState``, by embedder: not per table version);
- ``WordIndex``: per (table version, scope), which leaves hold which words (presence only: idf comes from
  the columns' document counts at query time), on the versioned base (``WordIndexes``). A scope that only
  appended leaves to the one the index was made for (search/indexes/leaf_scope.py ``extended_from``) is
  extended: only the new leaves' texts are read.

Every content word of the scope's leaves (3 to ``MAX_WORD_LENGTH`` letters, not a stopword) is a column.
Bounds: words of at most ``MAX_WORD_LENGTH`` letters (the FTS index's own limit), at most ``MAX_WORDS``
columns per scope (the most frequent kept: past the bound a store's rarest words take no part). An
encrypted store's texts are decrypted in memory to be read (its index is not saved: the sidecar keeps
nothing of an encrypted store).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import sparse

from synthex.core.enrich.words import STOPWORDS
from synthex_resources.search.indexes.lexicon import leaf_texts
from synthex_resources.search.indexes.lru import LRU
from synthex_resources.search.indexes.sidecar import Entry, SaveGuard, Sidecar
from synthex_resources.search.indexes.versioned import EXTEND, LOAD, VersionedStructure
from synthex_resources.search.tokenize import tokenize
from synthex_resources.search.types import SearchBackend
from synthex_resources.store.pinned import PinnedDataset

if TYPE_CHECKING:  # type hints only: the store builds this structure (no import cycle)
    from synthex_resources.record_store import RecordStore

MAX_WORDS = 50_000  # columns per scope (the most frequent): ~1.5-2.5 min of MiniLM CPU once, at the bound
MAX_WORD_LENGTH = 40  # letters; the FTS index drops longer tokens too (search/tokenize.py PROJECT_INDEX)
QUERY_WORDS_KEPT = 10_000  # words only queries used, kept per store (an LRU)
MIN_LENGTH = 3


def content_words(text: str) -> list[str]:
    return [w for w in tokenize(text)
            if MIN_LENGTH <= len(w) <= MAX_WORD_LENGTH and w.isalpha() and w not in STOPWORDS]


def _without_speaker(text: str) -> str:
    """A turn's text without its speaker prefix ("Caroline: ..."): who speaks is not what the turn says."""
    head, sep, rest = text.partition(":")
    return rest if sep and 0 < len(head) <= 30 and "\n" not in head else text


def _pack(words: Sequence[str]) -> dict[str, np.ndarray]:
    """Words as one UTF-8 byte array and offsets (a fixed-width string array is as wide as the longest word)."""
    encoded = [w.encode() for w in words]
    return {"word_bytes": np.frombuffer(b"".join(encoded), dtype=np.uint8),
            "word_ends": np.cumsum([len(b) for b in encoded], dtype=np.int64)}


def _unpack(arrays: dict[str, np.ndarray]) -> list[str]:
    data, ends = bytes(np.asarray(arrays["word_bytes"])), np.asarray(arrays["word_ends"]).tolist()
    return [data[a:b].decode() for a, b in zip([0, *ends[:-1]], ends, strict=True)]


class WordVectors:
    """Word -> unit vector for one store and embedder: embedded once, shared by every scope and query.
    The words of the store's leaves are kept (bounded by ``MAX_WORDS`` per scope); words only queries used
    are kept in an LRU of ``QUERY_WORDS_KEPT`` (a long-lived server asked ever new words must not grow)."""

    def __init__(self, embedder: str) -> None:
        self.embedder = embedder
        self.vectors: dict[str, np.ndarray] = {}
        self.asked: LRU[str, np.ndarray] = LRU(QUERY_WORDS_KEPT)
        self.embedded = 0  # words sent to the embedder by this object (tests watch it)
        self.lock = threading.Lock()
        self.saved = 0  # how many words the sidecar holds (a save only when it grew)

    def of(self, words: Sequence[str], embed: Callable[[list[str]], np.ndarray], asked: bool = False) -> np.ndarray:
        """(len(words), dim) unit rows; the words not known yet are embedded (outside the lock). ``asked``:
        a query's words (kept in the LRU unless a leaf holds them too)."""
        found: dict[str, np.ndarray] = {}
        with self.lock:
            for w in dict.fromkeys(words):
                vector = self.vectors.get(w)
                if vector is None:
                    vector = self.asked.get(w)
                if vector is not None:
                    found[w] = vector
        missing = [w for w in dict.fromkeys(words) if w not in found]
        if missing:
            fresh = np.asarray(embed(missing), dtype=np.float32)
            found.update(zip(missing, fresh, strict=True))
            with self.lock:
                for w, vector in zip(missing, fresh, strict=True):
                    if asked:
                        self.asked.get_or_make(w, lambda vector=vector: vector)
                    else:
                        self.vectors[w] = vector
                self.embedded += len(missing)
        if not words:
            dim = len(next(iter(self.vectors.values()))) if self.vectors else 1
            return np.zeros((0, dim), dtype=np.float32)
        return np.stack([found[w] for w in words])


def word_vectors(engine: SearchBackend) -> WordVectors:
    """The store's word vectors for its embedder: in memory, else loaded from beside the table."""
    return store_word_vectors(engine.store)


def store_word_vectors(store: RecordStore) -> WordVectors:
    """``word_vectors`` of a store (``search_state.word_vectors``, by the embedder's name)."""
    name = str(getattr(store.embedder, "name", type(store.embedder).__name__))
    return store.search_state.word_vectors(name, lambda: _loaded_vectors(store, name))


def _loaded_vectors(store: RecordStore, name: str) -> WordVectors:
    found = WordVectors(name)
    entry = store.search_state.sidecar.load("word-vectors", name)
    if entry is None:
        return found
    try:
        words = _unpack(entry.arrays)
        vectors = np.asarray(entry.arrays["vectors"], dtype=np.float32)
    except (KeyError, ValueError, UnicodeDecodeError):
        return found  # a malformed entry is no entry
    if len(words) == len(vectors):
        found.vectors.update(zip(words, vectors, strict=True))
        found.saved = len(words)
    return found


def _save_vectors(vectors: WordVectors, saving: SaveGuard, read: PinnedDataset | None) -> None:
    """The store's word vectors saved beside the table (``read``: the version whose texts gave the words)."""
    with vectors.lock:
        if read is None or len(vectors.vectors) <= vectors.saved:  # nothing new: nothing written
            return
        words = list(vectors.vectors)
        matrix = np.stack([vectors.vectors[w] for w in words])
        vectors.saved = len(words)
    saving.save("word-vectors", vectors.embedder, read.state,
                lambda: ({"embedder": vectors.embedder}, {**_pack(words), "vectors": matrix}), mapped=("vectors",))


@dataclass
class WordIndex:
    words: list[str]  # the columns
    leaf_words: sparse.csr_matrix  # leaves x words, 1 where the leaf holds the word
    vectors: np.ndarray  # columns x dim, unit rows
    leaf_ids: list[str] | None = None

    def __post_init__(self) -> None:
        self.columns = self.leaf_words.tocsc()  # each word's leaves: one contiguous slice
        self.df = np.diff(self.columns.indptr)


def _leaf_word_lists(texts: Sequence[str]) -> list[list[str]]:
    return [list(dict.fromkeys(content_words(_without_speaker(t)))) for t in texts]


def build_word_index(texts: Sequence[str], vectors_of: Callable[[list[str]], np.ndarray],
                     leaf_ids: list[str] | None = None) -> WordIndex:
    """The word index of leaves with these texts (``vectors_of``: words -> their unit vectors)."""
    per_leaf = _leaf_word_lists(texts)
    df: dict[str, int] = {}
    for words in per_leaf:
        for w in words:
            df[w] = df.get(w, 0) + 1
    kept = sorted(df, key=lambda w: (-df[w], w))[:MAX_WORDS]
    return WordIndex(kept, _rows(per_leaf, {w: j for j, w in enumerate(kept)}, len(kept)), vectors_of(kept),
                     leaf_ids)


def _rows(per_leaf: list[list[str]], column: dict[str, int], width: int) -> sparse.csr_matrix:
    cols = [[column[w] for w in words if w in column] for words in per_leaf]
    indptr = np.cumsum([0, *map(len, cols)])
    indices = np.fromiter((j for row in cols for j in row), dtype=np.int64, count=int(indptr[-1]))
    return sparse.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(len(per_leaf), width))


def extend_word_index(old: WordIndex, texts: Sequence[str], vectors_of: Callable[[list[str]], np.ndarray],
                      leaf_ids: list[str] | None = None) -> WordIndex:
    """``old`` with rows for appended leaves of these texts; their new words become new columns (while
    the columns are under ``MAX_WORDS``)."""
    per_leaf = _leaf_word_lists(texts)
    column = {w: j for j, w in enumerate(old.words)}
    fresh = [w for w in dict.fromkeys(w for words in per_leaf for w in words) if w not in column]
    fresh = fresh[: max(0, MAX_WORDS - len(old.words))]
    for w in fresh:
        column[w] = len(column)
    words = old.words + fresh
    added = _rows(per_leaf, column, len(words))
    grown = sparse.csr_matrix((old.leaf_words.data, old.leaf_words.indices, old.leaf_words.indptr),
                              shape=(old.leaf_words.shape[0], len(words)))
    vectors = np.vstack([old.vectors, vectors_of(fresh)]) if fresh else old.vectors
    return WordIndex(words, sparse.vstack([grown, added], format="csr"), vectors, leaf_ids)


def _texts(store: RecordStore, read: PinnedDataset | None, leaf_ids: list[str], leaf_steps: list[str]) -> list[str]:
    return [str(content) for content, _meta in leaf_texts(store.cipher, read, leaf_ids, leaf_steps)]  # decrypted there


def _to_entry(index: WordIndex, scope_token: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    m = index.leaf_words
    return ({"scope_token": scope_token, "shape": list(m.shape)},
            {"indices": m.indices, "indptr": m.indptr, **_pack(index.words)})


def _from_entry(entry: Entry, leaf_ids: list[str], vectors_of: Callable[[list[str]], np.ndarray]) -> WordIndex | None:
    try:
        a, shape = entry.arrays, tuple(int(x) for x in entry.meta["shape"])
        words = _unpack(a)
        m = sparse.csr_matrix((np.ones(len(a["indices"])), a["indices"], a["indptr"]), shape=shape)
    except (KeyError, TypeError, ValueError, UnicodeDecodeError):
        return None  # a malformed entry is no entry
    if len(words) != shape[1] or shape[0] != len(leaf_ids):
        return None
    return WordIndex(words, m, vectors_of(words), leaf_ids)


class WordIndexes(VersionedStructure[str, WordIndex]):
    """The word index per (table version of the scope, scope filter); the store's
    ``search_state.word_indexes``. The context of each ask is the scope's bookkeeping."""

    kind = "words"

    def __init__(self, sidecar: Callable[[], Sidecar] | None, store: RecordStore) -> None:
        super().__init__(sidecar)
        self.store = store

    def _vectors_of(self) -> Callable[[list[str]], np.ndarray]:
        vectors, embed = store_word_vectors(self.store), self.store.embedder.embed
        return lambda words: vectors.of(words, embed)

    def _extended(self, read: PinnedDataset | None, base: WordIndex, scope: Any) -> WordIndex:
        """``base`` plus the leaves the scope appended to its leaves (only their texts read)."""
        new_ids = scope.leaf_ids[len(base.leaf_ids or []):]
        return extend_word_index(base, _texts(self.store, read, new_ids, list(scope.leaf_steps or [])),
                                 self._vectors_of(), scope.leaf_ids)

    def build(self, read: PinnedDataset | None, key: str, context: Any) -> WordIndex:
        texts = _texts(self.store, read, context.leaf_ids, list(context.leaf_steps or []))
        return build_word_index(texts, self._vectors_of(), context.leaf_ids)

    def extend(self, read: PinnedDataset | None, key: str, previous: WordIndex,
               context: Any) -> tuple[WordIndex, str] | None:
        if context.extended_from is not None and previous.leaf_ids is context.extended_from:
            return self._extended(read, previous, context), EXTEND
        return None

    def from_entry(self, read: PinnedDataset, key: str, entry: Entry, context: Any) -> tuple[WordIndex, str] | None:
        """Saved for this very scope: as it is; for the scope this one extends (an earlier process's, before a
        write): extended, its leaves coming first in this scope in the same order (search/indexes/leaf_scope.py)."""
        owner = entry.meta.get("scope_token")
        if owner == context.token:
            index = _from_entry(entry, context.leaf_ids, self._vectors_of())
            return (index, LOAD) if index is not None else None
        if owner is not None and owner == context.base_token:
            n = int(entry.meta.get("shape", [0])[0])
            base = _from_entry(entry, context.leaf_ids[:n], self._vectors_of()) if n <= len(context.leaf_ids) else None
            if base is not None:
                return self._extended(read, base, context), EXTEND
        return None

    def to_entry(self, value: WordIndex, context: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        return _to_entry(value, context.token)

    def saved(self, read: PinnedDataset | None, value: WordIndex, how: str, saving: SaveGuard | None,
              context: Any) -> None:
        if saving is not None:
            _save_vectors(store_word_vectors(self.store), saving, read)


def word_index(engine: SearchBackend, where: str, scope: Any) -> WordIndex:
    """The scope's word index at the table version the scope was made of (``scope.read``: keyed by it, the
    texts read from it, saved with its state): cached; else extended from the previous version's when the
    scope only appended leaves; else loaded from beside the table when an earlier process made it for this
    very scope; else built from the leaves' texts."""
    return engine.store.search_state.word_indexes.get(scope.read, where, scope)
