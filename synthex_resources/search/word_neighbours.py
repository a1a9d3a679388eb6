"""Word-neighbour query expansion: step 6 of drill-down search (``expansion_weight``; issue 22).

A list question ("What outdoor activities has Andrew done?", "Which cities has John been to?") is
answered by turns that name instances of what it asks for (rock climbing, fishing; Seattle, Chicago)
and often share no word with it: on LoCoMo dev7, 205 of the 259 multi-hop evidence turns that ranked
21st or lower shared no content word with their question (docs/benchmarks.md). Expanding a query's
words with their nearest neighbours in the collection's own vocabulary, by word embeddings, is the
classic remedy (Kuzi, Shtok and Kurland, CIKM 2016; Roy et al., Neu-IR 2016); here the embedder is the
store's own (MiniLM offline), so no model is added.

How it scores: every content word of the scope's leaves (3+ letters, not a stopword, not a number) is
embedded once. For a query, each content word that is not a speaker's name or a question word is
embedded and compared with that vocabulary; a leaf takes, per query word, the best ``similarity x idf``
among its own words whose cosine reaches ``expansion_similarity`` (the word itself counts: cosine 1),
summed over the query words. Drill-down multiplies the turn scores by ``1 + weight x this / its max``, so
it reorders what the other legs found and lifts turns naming an instance of the asked-for thing.

The structure (vocabulary, its vectors, leaves x words) is cached per (table version, scope) and saved
beside the table (search/sidecar.py); a rebuild after a write embeds only words no earlier build of the
scope embedded. Words are bounded (``MAX_WORDS``, the most frequent first): the first expanded query of a
large store pays for embedding them once.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse

from synthex.core.enrich.words import STOPWORDS
from synthex_resources.record_store import RECORDS
from synthex_resources.search.multihop import leaf_texts
from synthex_resources.search.sidecar import Entry, TableState, sidecar
from synthex_resources.search.tokenize import tokenize
from synthex_resources.search.types import SearchBackend

MAX_WORDS = 50_000  # words embedded per scope (the most frequent): ~90 s of MiniLM CPU once, at the bound
MIN_LENGTH = 3
# Words that say what form a question has, not what it is about.
QUESTION_WORDS = frozenset("""what which when where who whom whose why how many much kind kinds type types sort
does did do has have had ever mention mentioned mentions name names""".split())
# A turn's speaker prefix ("Caroline: ..."): not part of what the turn says.
_SPEAKER_PREFIX = re.compile(r"^[^:\n]{1,30}:\s")


def content_words(text: str) -> list[str]:
    return [w for w in tokenize(text) if len(w) >= MIN_LENGTH and w.isalpha() and w not in STOPWORDS]


@dataclass
class WordIndex:
    words: list[str]
    vectors: np.ndarray  # words x dim, unit rows (the store's embedder)
    leaf_words: sparse.csc_matrix  # leaves x words: log(1 + leaves / df) where the leaf has the word
    embedder: str
    leaf_ids: list[str] | None = None


class _WordIndexCache:
    def __init__(self) -> None:
        self.scopes: dict[tuple[int, str], WordIndex] = {}
        self.lock = threading.Lock()
        self.builds = 0  # indexes built (not cached, not loaded) by this store object: tests watch it


def _build(engine: SearchBackend, scope: Any, known: dict[str, np.ndarray]) -> WordIndex:
    texts = [str(content) for content, _meta in leaf_texts(engine, scope.leaf_ids, list(scope.leaf_steps or []))]
    return build_word_index(texts, known, engine.store.embedder.embed, _embedder_name(engine), scope.leaf_ids)


def build_word_index(texts: Sequence[str], known: dict[str, np.ndarray], embed: Callable[[list[str]], np.ndarray],
                     embedder: str, leaf_ids: list[str] | None = None) -> WordIndex:
    """The word index of leaves with these texts: ``known`` word vectors are reused, the rest embedded."""
    per_leaf = [set(content_words(_SPEAKER_PREFIX.sub("", text, count=1))) for text in texts]
    df: dict[str, int] = {}
    for words in per_leaf:
        for w in words:
            df[w] = df.get(w, 0) + 1
    kept = sorted(df, key=lambda w: (-df[w], w))[:MAX_WORDS]
    column = {w: j for j, w in enumerate(kept)}
    idf = np.log1p(max(len(per_leaf), 1) / np.asarray([df[w] for w in kept], dtype=np.float64))
    cols = [[column[w] for w in words if w in column] for words in per_leaf]
    indptr = np.cumsum([0, *map(len, cols)])
    indices = np.fromiter((j for row in cols for j in row), dtype=np.int64, count=int(indptr[-1]))
    leaf_words = sparse.csr_matrix((idf[indices], indices, indptr), shape=(len(per_leaf), len(kept))).tocsc()
    missing = [w for w in kept if w not in known]
    fresh = np.asarray(embed(missing), dtype=np.float32) if missing else None
    dim = fresh.shape[1] if fresh is not None else (len(next(iter(known.values()))) if known else 1)
    vectors = np.zeros((len(kept), dim), dtype=np.float32)
    at = {w: i for i, w in enumerate(missing)}
    for j, w in enumerate(kept):
        vectors[j] = fresh[at[w]] if w in at else known[w]
    return WordIndex(kept, vectors, leaf_words, embedder, leaf_ids)


def _embedder_name(engine: SearchBackend) -> str:
    return str(getattr(engine.store.embedder, "name", type(engine.store.embedder).__name__))


def _to_entry(index: WordIndex, scope_token: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    m = index.leaf_words.tocsr()
    return ({"scope_token": scope_token, "shape": list(m.shape), "embedder": index.embedder},
            {"data": m.data, "indices": m.indices, "indptr": m.indptr,
             "words": np.asarray(index.words, dtype=str), "vectors": index.vectors})


def _from_entry(entry: Entry, leaf_ids: list[str]) -> WordIndex:
    a = entry.arrays
    m = sparse.csr_matrix((a["data"], a["indices"], a["indptr"]), shape=tuple(entry.meta["shape"]))
    return WordIndex(a["words"].tolist(), np.asarray(a["vectors"]), m.tocsc(), entry.meta["embedder"], leaf_ids)


def word_index(engine: SearchBackend, where: str, scope: Any) -> WordIndex:
    """The scope's word index at the table's current version: cached, else loaded from beside the table
    when an earlier process built it for this very scope, else built (reusing the vectors of any earlier
    build of the scope by the same embedder: a write embeds only its new words)."""
    version = engine.store.records_read_version()
    key = (version if version is not None else -1, where)
    cache: _WordIndexCache = engine.store.derived("word_neighbours", _WordIndexCache)
    with cache.lock:
        if key in cache.scopes:
            return cache.scopes[key]
        older = [k for k in cache.scopes if k[1] == where]
        previous = cache.scopes[older[-1]] if older else None
        for old in older:
            del cache.scopes[old]
        persisted = sidecar(engine.store)
        entry = persisted.load("words", where)
        name = _embedder_name(engine)
        index = None
        if entry is not None and entry.meta.get("embedder") == name and entry.meta.get("scope_token") == scope.token \
                and entry.meta["shape"][0] == len(scope.leaf_ids):
            index = _from_entry(entry, scope.leaf_ids)
        if index is None:
            known: dict[str, np.ndarray] = {}
            for old_index in (_from_entry(entry, []) if entry is not None else None, previous):
                if old_index is not None and old_index.embedder == name:
                    known.update(zip(old_index.words, old_index.vectors, strict=True))
            index = _build(engine, scope, known)
            cache.builds += 1
            ds = engine.store.dataset(RECORDS)
            if ds is not None:
                built = index
                persisted.save("words", where, TableState.of(ds), lambda: _to_entry(built, scope.token))
        cache.scopes[key] = index
        return index


def query_words(query: str, participants: set[str]) -> list[str]:
    """The words of ``query`` the expansion looks for: content words, not a speaker's name, not a
    question word ("what", "kind", "mention")."""
    return list(dict.fromkeys(w for w in content_words(query) if w not in participants and w not in QUESTION_WORDS))


def expansion_scores(index: WordIndex, words: list[str], word_vectors: np.ndarray, similarity: float) -> np.ndarray:
    """Per leaf: the sum over ``words`` of the best ``cosine x idf`` among its words at cosine >= ``similarity``."""
    n = index.leaf_words.shape[0]
    out = np.zeros(n)
    if not words or not index.words:
        return out
    sims = np.asarray(word_vectors, dtype=np.float32) @ index.vectors.T  # query words x vocabulary
    columns = index.leaf_words  # CSC: each word's leaves and their idf are one contiguous slice
    for row in sims:
        best = np.zeros(n)
        for j in np.flatnonzero(row >= similarity):
            start, end = columns.indptr[j], columns.indptr[j + 1]
            leaves = columns.indices[start:end]
            best[leaves] = np.maximum(best[leaves], row[j] * columns.data[start:end])
        out += best
    return out
