"""BM25 over decrypted text, in memory: the lexical leg of an encrypted store.

LanceDB's FTS index would be built over ciphertext, so an encrypted store (synthex_resources/encryption.py)
searches an in-memory inverted index instead, built from the plaintext at the first lexical search and
kept in the store's search state (``search_state.memory_bm25``) until it is closed. Nothing of it reaches the disk.

Scoring is LanceDB's BM25 in its float32 arithmetic (search/indexes/bm25.py, shared with search/indexes/postings.py), checked
against its FTS index (tests/test_encryption.py): k1 = 1.2, b = 0.75, ``idf = ln(1 + (N - n + 0.5) / (n + 0.5))``,
``score = sum over query tokens (repeats count) of idf * (k1 + 1) * tf / (tf + k1 * (1 - b + b * len /
avglen))``, with N, n and the mean length taken over
every row of the table (all steps and branches: LanceDB's corpus statistics are global too, filters only
select the rows). Documents and queries are split by ``search/tokenize.py``; LanceDB's ``simple``
tokenizer agrees on ASCII text (on accented letters it folds ``café`` to ``cafe`` where the regex gives
``caf``; the query side here uses the same regex, so a query still finds its word). No stemming:
``Pipeline(lexical_stem=True)`` has no effect on an encrypted store (LanceDB's stemmer is reachable here now,
search/tokenize.py ``IndexAnalyzer``, but stemming would change an encrypted stemmed project's rankings).

Upkeep per table version (what changed is found from plaintext columns; only new texts are decrypted):
the rows' ``(_rowid, id, fingerprint)`` are read, texts whose fingerprint is not known yet are decrypted
and tokenized (each distinct text once), texts no row holds any more are forgotten, and the postings
(CSR arrays sorted by term) are rebuilt from the per-text term counts with numpy. Filters (steps,
branches, periods, metadata) are the same SQL the FTS path prefilters with, evaluated by Lance on the
same table version into a row mask (cached per filter). Memory: a few bytes per (text, distinct term)
plus the ids. Exact (substring) search keeps the lower-cased plaintext of the texts it has scanned (filled
at the first exact search of a scope, dropped with the store): memory traded for not decrypting every
row of the scope on every query.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from synthex_resources.search.indexes import bm25
from synthex_resources.search.indexes.lru import LRU, MASKS_KEPT
from synthex_resources.search.indexes.versioned import VersionedStructure
from synthex_resources.search.tokenize import tokenize
from synthex_resources.store import filters
from synthex_resources.store.filters import RecordFilter
from synthex_resources.store.pinned import PinnedDataset

if TYPE_CHECKING:  # type hints only: the store builds this structure (no import cycle)
    from synthex_resources.record_store import RecordStore

CORPUS = "corpus"  # the one key: a corpus holds every row of the table
FETCH_ALL_SHARE = 0.25  # decrypt by scanning the table when this share of its texts is new


@dataclass
class _Text:
    length: int
    terms: np.ndarray  # int32 term ids
    counts: np.ndarray  # int32 occurrences of each term


_NO_TEXT = _Text(0, np.zeros(0, np.int32), np.zeros(0, np.int32))  # a row whose text could not be read


@dataclass
class _Corpus:
    version: int
    dataset: Any  # the Lance dataset pinned at ``version`` (filters are evaluated on it)
    rowids: np.ndarray  # uint64, ascending; row i of every array below is the row with rowids[i]
    ids: np.ndarray  # object array of record ids
    prints: list[str]  # stored fingerprint of each row (the key of ``texts`` and ``lowered``)
    norms: np.ndarray  # float32 k1 * (1 - b + b * length / mean length), per row (search/indexes/bm25.py)
    offsets: np.ndarray  # int64 (terms + 1): postings of term t are [offsets[t], offsets[t + 1])
    post_rows: np.ndarray  # int64 rows
    post_counts: np.ndarray  # float32 tf
    masks: LRU[str, np.ndarray] = field(default_factory=lambda: LRU(MASKS_KEPT))


class MemoryBM25(VersionedStructure[str, _Corpus]):
    """The in-memory BM25 index of one store (``search_state.memory_bm25``): one corpus per table version
    (key ``CORPUS``), rebuilt from the per-text term counts, which outlive versions. Never saved."""

    def __init__(self, store: RecordStore) -> None:
        super().__init__()
        self.store = store
        self.vocab: dict[str, int] = {}
        self.texts: dict[str, _Text] = {}  # by stored fingerprint (one entry per distinct text)
        self.lowered: dict[str, str] = {}  # by fingerprint: lower-cased plaintext, for exact search
        self.decrypted = 0  # texts decrypted and tokenized so far (upkeep is incremental: tests watch it)

    # -- upkeep -----------------------------------------------------------------------------------
    def _text(self, content: str) -> _Text:
        tokens = tokenize(content)
        counted = Counter(tokens)
        terms = np.fromiter((self.vocab.setdefault(t, len(self.vocab)) for t in counted), np.int32, len(counted))
        return _Text(len(tokens), terms, np.fromiter(counted.values(), np.int32, len(counted)))

    def _learn(self, ds: Any, prints: set[str], total: int, into: dict[str, Any], make: Any) -> None:
        """``into[fp] = make(plaintext)`` for the texts of ``prints``, each decrypted once."""
        cipher = self.store.cipher
        if not prints:
            return

        def take(table: Any) -> None:
            for fp, value in zip(table.column("fingerprint").to_pylist(), table.column("content").to_pylist(),
                                 strict=True):
                if fp in prints and fp not in into:
                    into[fp] = make(cipher.decrypt(value) if cipher is not None else value)
                    self.decrypted += 1

        if len(prints) >= FETCH_ALL_SHARE * total:
            take(ds.to_table(columns=["fingerprint", "content"]))
            return
        for chunk in filters.chunks(sorted(prints)):
            take(ds.to_table(columns=["fingerprint", "content"],
                             filter=filters.where(RecordFilter(fingerprints=tuple(chunk)))))

    def build(self, read: PinnedDataset | None, key: str, context: Any) -> _Corpus:
        assert read is not None  # ``corpus`` asks only of a table
        ds = read.dataset
        table = ds.to_table(columns=["id", "fingerprint"], with_row_id=True)
        rowids = table.column("_rowid").to_numpy()
        order = np.argsort(rowids, kind="stable")
        prints = table.column("fingerprint").to_pylist()
        prints = [prints[i] for i in order]
        ids = np.asarray(table.column("id").to_pylist(), dtype=object)[order]
        present = set(prints)
        self._learn(ds, {p for p in present if p not in self.texts}, len(present), self.texts, self._text)
        for known in (self.texts, self.lowered):
            for gone in [p for p in known if p not in present]:
                del known[gone]
        texts = [self.texts.get(p, _NO_TEXT) for p in prints]
        n = len(texts)
        lengths = np.fromiter((t.length for t in texts), np.float64, n)
        sizes = np.fromiter((len(t.terms) for t in texts), np.int64, n)
        terms = np.concatenate([t.terms for t in texts]) if n else np.zeros(0, np.int32)
        counts = np.concatenate([t.counts for t in texts]) if n else np.zeros(0, np.int32)
        rows = np.repeat(np.arange(n, dtype=np.int64), sizes)
        by_term = np.argsort(terms, kind="stable")
        offsets = np.zeros(len(self.vocab) + 1, np.int64)
        np.cumsum(np.bincount(terms, minlength=len(self.vocab)), out=offsets[1:])
        norms = bm25.doc_norms(lengths, int(lengths.sum()), n)
        return _Corpus(version=ds.version, dataset=ds, rowids=rowids[order], ids=ids, prints=prints, norms=norms,
                       offsets=offsets,
                       post_rows=rows[by_term], post_counts=counts[by_term].astype(np.float32))

    def corpus(self) -> _Corpus | None:
        """The index at the table's latest version (updated first when the table changed)."""
        read = self.store.read_dataset()  # the version the index is keyed by and built from
        if read is None:
            return None
        with self.lock:  # the per-text maps are shared by every version's corpus and by ``exact``
            return self.get(read, CORPUS)

    def _mask(self, corpus: _Corpus, where: str) -> np.ndarray:
        def made() -> np.ndarray:
            found = corpus.dataset.to_table(columns=["id"], filter=where, with_row_id=True).column("_rowid").to_numpy()
            mask = np.zeros(len(corpus.ids), dtype=bool)
            mask[np.searchsorted(corpus.rowids, found)] = True
            return mask

        return corpus.masks.get_or_make(where, made)

    # -- search -----------------------------------------------------------------------------------
    def exact(self, needle: str, where: str) -> dict[str, int]:
        """Occurrences of ``needle`` (lower-case) per record id, among the rows matching ``where``."""
        corpus = self.corpus()
        if corpus is None or not needle:
            return {}
        with self.lock:
            rows = np.flatnonzero(self._mask(corpus, where))
            prints = [corpus.prints[i] for i in rows]
            missing = {p for p in prints if p not in self.lowered}
            if missing:  # the first exact search of this scope: decrypt its texts once
                self._learn(corpus.dataset, missing, len(set(corpus.prints)), self.lowered, str.lower)
        found: dict[str, int] = {}
        for i, fp in zip(rows, prints, strict=True):
            text = self.lowered.get(fp)
            if text is not None and needle in text:
                found[corpus.ids[i]] = text.count(needle)
        return found

    def search(self, tokens: list[str], where: str, n: int) -> list[tuple[str, float]]:
        """BM25 top ``n`` (id, score) among the rows matching ``where``, best first, ties by id."""
        corpus = self.corpus()
        if corpus is None or not tokens or n <= 0 or not len(corpus.ids):
            return []
        with self.lock:
            mask = self._mask(corpus, where)
        total = len(corpus.ids)
        scores = np.zeros(total, dtype=np.float32)
        for token in tokens:  # a repeated query token counts again, as in LanceDB
            term = self.vocab.get(token)
            if term is None or term + 1 >= len(corpus.offsets):
                continue
            start, end = corpus.offsets[term], corpus.offsets[term + 1]
            if start == end:
                continue
            bm25.add_term(scores, corpus.post_rows[start:end], corpus.post_counts[start:end],
                          bm25.idf(int(end - start), total), corpus.norms)
        candidates = np.flatnonzero((scores > 0) & mask)
        return bm25.top(candidates, scores[candidates], corpus.ids, n)


def memory_bm25(store: RecordStore) -> MemoryBM25:
    """The store's in-memory BM25 index (one per store object; it lives and dies with the store)."""
    return store.search_state.memory_bm25
