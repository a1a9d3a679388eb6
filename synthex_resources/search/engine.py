"""The search engine over the record store.

- lexical: BM25 from LanceDB's native FTS index on ``content`` (persisted, updated as rows are
  written, filterable); the query is tokenized by our regex tokenizer first.
- dense: cosine over the ``vector`` column, written once at record write time.
- exact: verbatim substring match (case-insensitive) in the chosen steps.
Every filter (steps, branch, periods, metadata) is applied inside the index query (prefilter).

How the legs become one ranking is the search strategy's (search/strategies/base.py): the engine builds the
request and calls ``strategy.search(self, request)``. Built-ins (search/strategies/builtin.py): BM25 or
dense alone, hybrid (reciprocal rank fusion of both candidate lists, ties broken by record id so the
ranking does not depend on ingest order, then near-duplicate collapse and an optional reranker) and
leaf-sum (the ``conversational`` strategy: representation records lend their scores to their leaf
turns, which are ranked instead, search/strategies/conversational_fusion.py).

An encrypted store (synthex_resources/encryption.py) has no FTS index (it would index ciphertext): its
lexical leg is BM25 over the decrypted text in memory (search/indexes/memory_lexical.py), scored like the FTS
path, and exact search decrypts the rows in scope. Dense search is unchanged (vectors stay plaintext).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np

from synthex.core.naming import DEFAULT_SEARCH_MODE
from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.commits import with_commit_retry
from synthex_resources.embedder import embed_queries
from synthex_resources.record_store import LIGHT_COLUMNS, RECORDS, RecordStore
from synthex_resources.search.indexes.dense_index import dense_index
from synthex_resources.search.indexes.memory_lexical import memory_bm25
from synthex_resources.search.indexes.postings import fts_stats, holds_live_rows, postings_bm25
from synthex_resources.search.strategies.base import SearchStrategy
from synthex_resources.search.strategies.builtin import BUILTIN_STRATEGIES
from synthex_resources.search.tokenize import PROJECT_INDEX, IndexAnalyzer, tokenize
from synthex_resources.search.types import SearchHit, SearchRequest, SearchResults
from synthex_resources.search.via import annotate_via
from synthex_resources.store import filters
from synthex_resources.store.filters import RecordFilter
from synthex_resources.store.tables import BitmapIndex, FtsIndex

__all__ = ["FTS_COLUMN", "SearchEngine", "SearchHit", "SearchResults", "top_with_ties"]

FTS_COLUMN = "content"
COMPACT_FROM_FRAGMENTS = 64  # ensure_index compacts the records table from this many fragments


def top_with_ties(fetch: Callable[[int], list[tuple[str, float]]], n: int) -> list[tuple[str, float]]:
    """The top ``n`` (id, score) pairs of an index query, best first, ties by id.

    An index returns an arbitrary part of a group of equal scores at its limit (whatever its row order,
    i.e. the order records were written in, puts first). So fetch past ``n`` until the list ends or its
    last score is below the n-th: then every record tied with the n-th is in hand, and the id decides
    which of them make the cut. ``fetch(limit)`` runs the query with that limit.
    """
    if n <= 0:
        return []
    # Twice the wanted number at first: a fetch costs about the same at 2n as at 1.25n, and on the 1M bench
    # corpus half the queries needed a second fetch from 1.25n (a tie group at the cut).
    limit = 2 * n + 10
    while True:
        pairs = sorted(fetch(limit), key=lambda p: (-p[1], p[0]))
        if len(pairs) < limit or pairs[-1][1] < pairs[n - 1][1]:
            return pairs[:n]
        limit *= 2


class SearchEngine:
    """Cheap to construct: what is worth keeping (matrix, bookkeeping) lives on the store."""

    def __init__(self, store: RecordStore) -> None:
        self.store = store

    def pool(self) -> ThreadPoolExecutor:
        """Threads that run the lexical and dense legs side by side."""
        return self.store.search_state.pool

    def submit(self, fn: Callable[[], Any]) -> Future:
        """Run ``fn`` on the pool, reading the same table version as the search that submits it."""
        holder = self.store.current_pin()

        def run() -> Any:
            with self.store.pinned_version(holder):
                return fn()

        return self.pool().submit(run)

    def query_vector_future(self, query: str) -> Future:
        """The query's embedding, computed on the pool (the caller answers the lexical leg meanwhile)."""
        embedder = self.store.embedder
        return self.pool().submit(lambda: embed_queries(embedder, [query])[0])

    def lexical_future(self, query: str, where: str, n: int) -> Future:
        """The lexical leg as a future: answered at once on this thread when the persisted postings serve the
        store (about a millisecond: handing it to a pool thread costs more than the work), else submitted to
        the pool, where LanceDB's FTS query waits on I/O beside the dense leg."""
        ds = self.store.dataset(RECORDS) if self.store.cipher is None else None
        if ds is not None and postings_bm25(self.store).usable(ds):
            done: Future = Future()
            try:
                done.set_result(self.lexical(query, where, n))
            except Exception as exc:  # noqa: BLE001 - raised where the caller takes the result, as from the pool
                done.set_exception(exc)
            return done
        return self.submit(lambda: self.lexical(query, where, n))

    # -- index maintenance ------------------------------------------------------------------------
    def ensure_index(self, optimize: bool = True, stem: bool = False, warm_postings: bool = True) -> dict[str, Any]:
        """Create the FTS index if missing (or rebuild it if its stemming differs from ``stem``); with
        ``optimize``, fold unindexed rows into it. Returns stats.

        Rows written after the index was built are searched too (LanceDB scans the unindexed part),
        so optimizing is about latency, not correctness. Stemming (English Snowball, inside LanceDB's
        tokenizer, so queries are stemmed the same way) is a per-project choice: it lost on LongMemEval
        in the lethe notes and won on LoCoMo here (docs/benchmarks.md). ``warm_postings``: a large store's
        persisted postings are brought up to date now (off for a purge, which clears them right after).
        """
        tbl = self.store.records_table()
        if tbl is None:
            return {"rows": 0, "fts_indexed": 0, "fts_unindexed": 0}
        started = time.perf_counter()
        names = {i.name: i for i in tbl.list_indices()}
        if self.store.cipher is not None:
            # Encrypted: an FTS index would hold ciphertext tokens. Lexical search builds its index in
            # memory from the decrypted text at the first search (search/indexes/memory_lexical.py). The id index
            # takes the FTS index's place as the trigger of compaction after writes.
            if "id_idx" not in names:
                with_commit_retry(lambda: tbl.create_scalar_index("id", index_type="BTREE", replace=True))
            elif optimize:
                stats = tbl.index_stats("id_idx")
                if stats is not None and stats.num_unindexed_rows > 0:
                    with_commit_retry(tbl.optimize)
            self._ensure_scope_indexes(tbl, names)
            return {"rows": tbl.count_rows(), "fts_indexed": 0, "fts_unindexed": 0, "lexical": "in-memory (encrypted)",
                    "index_update_s": round(time.perf_counter() - started, 3)}
        current = names.get(f"{FTS_COLUMN}_idx")
        if current is not None and bool((current.index_details or {}).get("stem", False)) != stem:
            with_commit_retry(lambda: tbl.drop_index(f"{FTS_COLUMN}_idx"))
            current = None
        if current is None:
            config = FtsIndex(**PROJECT_INDEX, stem=stem, with_position=False)
            with_commit_retry(lambda: tbl.create_index(FTS_COLUMN, config=config, replace=True))
        elif optimize:
            stats = tbl.index_stats(f"{FTS_COLUMN}_idx")
            if stats is not None and stats.num_unindexed_rows > 0:
                self._fold_new_rows(tbl)
        if "id_idx" not in names:
            # id lookups: drill-down, dense hits
            with_commit_retry(lambda: tbl.create_scalar_index("id", index_type="BTREE", replace=True))
        self._ensure_scope_indexes(tbl, names)
        postings = postings_bm25(self.store)
        ds = self.store.dataset(RECORDS) if warm_postings else None  # a purge does not: it drops them next
        if ds is not None and postings.usable(ds) and ds.count_rows() >= postings.rows_from:
            postings.current()  # a large store's: brought up to date (and saved) now; a small one's at its first search
        stats = tbl.index_stats(f"{FTS_COLUMN}_idx")
        return {"rows": tbl.count_rows(), "fts_indexed": stats.num_indexed_rows if stats else 0,
                "fts_unindexed": stats.num_unindexed_rows if stats else 0,
                "index_update_s": round(time.perf_counter() - started, 3)}

    def settle_lexical_index(self) -> bool:
        """Rebuild the FTS index (same tokenizer) when it does not hold exactly the live rows: rows written
        since wait outside it, or rows deleted since still count in its BM25 statistics. Afterwards LanceDB
        ranks on the live rows and the persisted postings answer the lexical leg of a small store too
        (``holds_live_rows``, search/indexes/postings.py). Returns whether it rebuilt. An eval calls it after a
        workspace's searches (the first one rewrites the leaf rows with their vectors)."""
        ds = self.store.dataset(RECORDS)
        tbl = self.store.records_table() if ds is not None and self.store.cipher is None else None
        stats = fts_stats(ds) if tbl is not None else None
        if stats is None or holds_live_rows(ds, stats):
            return False
        params = stats["indices"][0]["params"]
        if IndexAnalyzer.of_index(params) is None:  # not a project's index: left as it is
            return False
        config = FtsIndex(**PROJECT_INDEX, stem=bool(params.get("stem")), with_position=bool(params.get("with_position")))
        with_commit_retry(lambda: tbl.create_index(FTS_COLUMN, config=config, replace=True))
        return True

    def _fold_new_rows(self, tbl: Any) -> None:
        """Bring the indexes up to date with rows written since. The fragments are compacted only once
        there are ``COMPACT_FROM_FRAGMENTS`` of them: a compaction rewrites fragments, and the in-memory
        dense matrix and leaf-sum bookkeeping follow a rewrite by reloading (seconds to tens of seconds
        at 1M records), where they follow appended fragments in milliseconds (docs/benchmarks.md)."""
        ds = self.store.dataset(RECORDS)
        if ds is not None and len(ds.get_fragments()) < COMPACT_FROM_FRAGMENTS:
            with_commit_retry(lambda: self.store.dataset(RECORDS).optimize.optimize_indices())
        else:
            # Compaction loses the race to any concurrent update or delete (a run on another branch).
            with_commit_retry(tbl.optimize)

    @staticmethod
    def _ensure_scope_indexes(tbl: Any, names: dict[str, Any]) -> None:
        """Bitmap indexes on ``step`` and ``branch``, the columns of every search's prefilter. Without
        them Lance evaluates the filter by reading both columns of every row: at 1M records that took
        ~70-90 ms of a ~100 ms BM25 query here, against ~13 ms with them (docs/benchmarks.md). Few
        distinct values per column, so the bitmaps are small and cheap to build (0.4 s at 1M)."""
        for column in ("step", "branch"):
            if f"{column}_idx" not in names:
                with_commit_retry(lambda column=column: tbl.create_index(column, config=BitmapIndex(), replace=True))

    # -- filters ----------------------------------------------------------------------------------
    @staticmethod
    def record_filter(steps: list[str] | None, scope: BranchScope, periods: list[str] | None = None,
                      metadata: dict[str, Any] | None = None) -> RecordFilter:
        """What a search reads: the scope's rows (inherited steps through the branch serving them) of
        ``steps`` in ``periods``; metadata is a prefilter on the stored JSON, verified exactly later."""
        return RecordFilter.of(scope, steps=steps or None, periods=periods or None, metadata=metadata)

    def where(self, steps: list[str] | None, scope: BranchScope, periods: list[str] | None = None,
              metadata: dict[str, Any] | None = None) -> str:
        """The search's filter as the index queries take it (``store.filters`` writes it)."""
        return filters.where(self.record_filter(steps, scope, periods, metadata)) or "TRUE"

    @staticmethod
    def metadata_matches(rec: Record, metadata: dict[str, Any] | None) -> bool:
        """Whether ``rec`` holds every (dotted key, value) of ``metadata`` (``SearchBackend``)."""
        return all(rec.meta(k) == v for k, v in (metadata or {}).items())

    # -- candidate lists: (id, score) pairs, best first, ties by id -------------------------------
    def lexical(self, query: str, where: str, n: int) -> list[tuple[str, float]]:
        """BM25 top ``n``, ties by id, whatever order the records were written in (``top_with_ties``)."""
        tokens = tokenize(query)
        if not tokens or n <= 0:
            return []
        if self.store.cipher is not None:
            return memory_bm25(self.store).search(tokens, where, n)
        ds = self.store.dataset(RECORDS)  # the pinned version
        if ds is None:
            return []
        postings = postings_bm25(self.store)
        if postings.usable(ds):  # the persisted postings, which rank as the FTS index (search/indexes/postings.py)
            return postings.search(tokens, where, n)
        text = " ".join(tokens)

        def fetch(limit: int) -> list[tuple[str, float]]:
            # pylance's own full-text query on the same index (what lancedb's FTS search runs, same scores
            # and order), so a lexical search never imports lancedb (~3-4 s: tests/test_cli_light_imports.py).
            try:
                rows = ds.to_table(columns=["id", "_score"], full_text_query={"query": text, "columns": [FTS_COLUMN]},
                                   filter=where, prefilter=True, limit=limit)
            except ValueError as exc:
                if "INVERTED index" not in str(exc):
                    raise
                return unindexed(limit)  # no FTS index yet (before a step's first ensure_index)
            return list(zip(rows["id"].to_pylist(), (float(s) for s in rows["_score"].to_pylist()), strict=True))

        def unindexed(limit: int) -> list[tuple[str, float]]:
            # LanceDB searches a table without an FTS index by scanning it; pylance refuses to
            tbl = self.store.records_table()
            found = (tbl.search(text, query_type="fts", fts_columns=FTS_COLUMN)
                     .where(where, prefilter=True).select(["id", "_score"]).limit(limit).to_list())
            return [(r["id"], float(r["_score"])) for r in found]

        return top_with_ties(fetch, n)

    def dense(self, query: str, where: RecordFilter, n: int, vector: np.ndarray | None = None,
              steps: list[str] | None = None, scope: BranchScope | None = None, periods: list[str] | None = None,
              in_memory: bool = True) -> list[tuple[str, float]]:
        """Cosine top-n. Step/branch/period filters use the in-memory matrix; other filters use LanceDB."""
        if self.store.records_read_version() is None:  # no table (asked without importing lancedb)
            return []
        scope = scope or BranchScope.own()
        qvec = vector if vector is not None else embed_queries(self.store.embedder, [query])[0]
        if in_memory:
            return [(rid, sim) for rid, sim, _ in dense_index(self.store).search(qvec, steps, scope, periods, n)]
        tbl = self.store.records_table()
        if tbl is None:
            return []
        self.store.vectors.ensure(scope, steps)

        def fetch(limit: int) -> list[tuple[str, float]]:
            rows = (tbl.search(qvec.tolist(), vector_column_name="vector", query_type="vector").metric("cosine")
                    .where(filters.where(replace(where, with_vector=True)), prefilter=True).select(["id", "_distance"])
                    .limit(limit).to_list())
            return [(r["id"], 1.0 - float(r["_distance"])) for r in rows]

        return top_with_ties(fetch, n)

    # -- search -----------------------------------------------------------------------------------
    def search(self, query: str, steps: list[str] | None = None, scope: BranchScope | None = None, k: int = 10,
               strategy: SearchStrategy | None = None, periods: list[str] | None = None,
               metadata: dict[str, Any] | None = None, exact: bool = False,
               query_vector: np.ndarray | None = None, as_of: datetime | str | None = None) -> SearchResults:
        """The top ``k`` hits as ``strategy`` ranks them (``exact``: verbatim matches instead), with the
        search's warnings (``SearchResults.warnings``: a reranker that could not rank). ``as_of``: when the
        question is asked; leaf-sum search (the conversational strategy) resolves relative dates in the
        query against it ("last week", search/strategies/conversational_temporal.py). Others ignore it."""
        scope = scope or BranchScope.own()
        # no strategy: the default mode, named once in the core (DEFAULT_SEARCH_MODE), a built-in
        strategy = strategy if strategy is not None else BUILTIN_STRATEGIES[DEFAULT_SEARCH_MODE]
        with self.store.pinned_version():
            hits = self._search(query, steps, scope, k, strategy, periods, metadata, exact, query_vector, as_of)
            if not exact:  # a drilled-down leaf names the searched records it was reached through
                annotate_via(self, hits, steps, scope, periods)
            return hits

    def _search(self, query: str, steps: list[str] | None, scope: BranchScope, k: int, strategy: SearchStrategy,
                periods: list[str] | None, metadata: dict[str, Any] | None, exact: bool,
                query_vector: np.ndarray | None, as_of: datetime | str | None) -> SearchResults:
        rows_filter = self.record_filter(steps, scope, periods, metadata)
        where = filters.where(rows_filter) or "TRUE"
        if exact:
            return SearchResults(self.exact(query, rows_filter, k, metadata))
        request = SearchRequest(query=query, steps=steps, scope=scope, k=k, where=where, rows=rows_filter,
                                periods=periods,
                                metadata=metadata, query_vector=query_vector, as_of=as_of)
        return strategy.search(self, request)

    def collapse_near_duplicates(self, order: list[str], threshold: float | None, want: int,
                  in_memory: bool) -> tuple[list[str], dict[str, list[str]]]:
        """Walk the fused order, folding each candidate into an earlier kept one above ``threshold`` cosine."""
        if threshold is None:
            return order[:want], {}
        if in_memory:
            vectors = dense_index(self.store).vectors_of(order)
        else:
            rows = self.store.records.rows_by_id(order, ["id", "vector"])
            vectors = {i: np.asarray(r["vector"], dtype=np.float32) for i, r in rows.items() if r.get("vector") is not None}
        kept: list[str] = []
        kept_vectors: list[np.ndarray] = []
        collapsed: dict[str, list[str]] = {}
        for rid in order:
            vec = vectors.get(rid)
            if vec is not None and kept_vectors:
                sims = np.stack(kept_vectors) @ vec
                best = int(np.argmax(sims))
                if float(sims[best]) > threshold:
                    collapsed.setdefault(kept[best], []).append(rid)
                    continue
            kept.append(rid)
            if vec is not None:
                kept_vectors.append(vec)
            else:
                kept_vectors.append(np.zeros_like(next(iter(vectors.values()))) if vectors else np.zeros(1, np.float32))
            if len(kept) >= want:
                break
        return kept, collapsed

    def exact(self, phrase: str, rows_filter: RecordFilter, k: int,
              metadata: dict[str, Any] | None = None) -> list[SearchHit]:
        """Verbatim (case-insensitive) substring search; score = occurrences; order by score, time, id."""
        tbl = self.store.records_table()
        needle = phrase.lower().strip()
        if tbl is None or not needle:
            return []
        if self.store.cipher is not None:  # ciphertext on disk: match the decrypted text kept in memory
            return self._exact_encrypted(needle, rows_filter, k, metadata)
        matching = filters.where(replace(rows_filter, content_contains=needle))
        rows = tbl.search().where(matching).select(
            LIGHT_COLUMNS).limit(None).to_arrow().to_pylist()
        hits = [self.hit(r, float(r["content"].lower().count(needle)), {}) for r in rows]
        hits = [h for h in hits if self.metadata_matches(h, metadata)]
        hits.sort(key=lambda h: (-h.score, h.meta("time.created_at") or "", h.id))
        return hits[:k]

    def _exact_encrypted(self, needle: str, rows_filter: RecordFilter, k: int,
                         metadata: dict[str, Any] | None) -> list[SearchHit]:
        """``exact`` on an encrypted store: occurrences counted in memory, then only the top ``k`` rows (and
        every row tied with the k-th) are read and decrypted, in the same order as the plaintext path."""
        counts = memory_bm25(self.store).exact(needle, filters.where(rows_filter) or "TRUE")
        if not counts:
            return []
        kth = 0 if metadata else sorted(counts.values(), reverse=True)[min(k, len(counts)) - 1]
        ids = sorted(i for i, c in counts.items() if c >= kth)
        columns = LIGHT_COLUMNS if metadata else ["id", "metadata"]

        def rows_of(wanted: list[str], cols: list[str]) -> list[dict[str, Any]]:
            return list(self.store.records.rows_by_id(wanted, cols, within=rows_filter).values())

        if metadata:
            hits = [h for h in (self.hit(r, float(counts[r["id"]]), {}) for r in rows_of(ids, columns))
                    if self.metadata_matches(h, metadata)]
            hits.sort(key=lambda h: (-h.score, h.meta("time.created_at") or "", h.id))
            return hits[:k]
        created = {r["id"]: (json.loads(r["metadata"] or "{}").get("time") or {}).get("created_at") or ""
                   for r in rows_of(ids, columns)}
        top = sorted(created, key=lambda i: (-counts[i], created[i], i))[:k]
        rows = {r["id"]: r for r in rows_of(top, LIGHT_COLUMNS)}
        return [self.hit(rows[i], float(counts[i]), {}) for i in top if i in rows]

    def hit(self, row: dict[str, Any], score: float, ranks: dict[str, int]) -> SearchHit:
        """The hit of a stored row, with its score and per-leg ranks (``SearchBackend``)."""
        rec = self.store.to_record(row)
        return SearchHit(**{f: getattr(rec, f) for f in rec.__dataclass_fields__}, score=score, ranks=ranks)
