"""Vectors of the records table: filled at write time for searched steps, later for the others."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.embedder import Embedder, WorkerEmbedder
from synthex_resources.store import filters
from synthex_resources.store.filters import RecordFilter
from synthex_resources.store.fragment_append import ShardWorker
from synthex_resources.store.schemas import LIGHT_COLUMNS, RECORDS, ROW_KEY
from synthex_resources.store.tables import LanceTables


class Vectors:
    def __init__(self, tables: LanceTables, embedder: Callable[[], Embedder],
                 to_record: Callable[[dict[str, Any]], Record], row: Callable[[Record, Any], dict[str, Any]]) -> None:
        self._tables = tables
        self._embedder = embedder
        self._to_record = to_record
        self._row = row

    def fill(self, records: list[Record], memo: dict[str, list[float]] | None = None) -> None:
        """Give every record a vector, embedding each distinct text once: a text already stored (another
        step, branch or step version with the same content) reuses its stored vector, and so does a text in
        ``memo`` (fingerprint -> vector: what earlier calls sharing it found or embedded; updated here).

        A record with no text (empty or whitespace) gets the zero vector, not the embedding of nothing:
        that embedding sits near every query (an empty summary ranked second for any question), while a
        zero vector has no cosine to anything, so dense search leaves it out (search/indexes/dense_index.py; a
        LanceDB cosine query skips it too)."""
        missing = self.reuse(records, memo)
        if not missing:
            return
        fresh = self._embedder().embed([recs[0].content for recs in missing.values()])
        known = {p: vec.tolist() for p, vec in zip(missing, fresh, strict=True)}
        if memo is not None:
            memo.update(known)
        for p, recs in missing.items():
            for rec in recs:
                rec.embedding = known[p]

    def reuse(self, records: list[Record], memo: dict[str, list[float]] | None = None) -> dict[str, list[Record]]:
        """``fill`` without embedding: blank texts get the zero vector, texts stored already or in ``memo``
        their vector. Returns the rest, fingerprint -> its records (each distinct text to embed once)."""
        need = [r for r in records if r.embedding is None]
        blank = [r for r in need if not r.content.strip()]
        if blank:
            zero = [0.0] * self._embedder().dim
            for rec in blank:
                rec.embedding = list(zero)
            need = [r for r in need if r.content.strip()]
        if not need:
            return {}
        by_print: dict[str, list[Record]] = defaultdict(list)
        for rec in need:
            by_print[self._tables.content_fingerprint(rec.content)].append(rec)
        known = {p: memo[p] for p in by_print if p in memo} if memo else {}
        unknown = [p for p in by_print if p not in known]
        if unknown:
            known.update(self.by_fingerprint(unknown))
        if memo is not None:
            memo.update(known)
        for p, recs in by_print.items():
            if p in known:
                for rec in recs:
                    rec.embedding = known[p]
        return {p: recs for p, recs in by_print.items() if p not in known}

    def ensure(self, scope: BranchScope, steps: Iterable[str] | None = None) -> int:
        """Embed and store the vectors that records of ``steps`` in ``scope`` were written without (steps
        outside every search surface are not embedded at write time). Returns how many were filled."""
        where = filters.where(RecordFilter.of(scope, steps=list(steps) if steps else None, without_vector=True))
        records = [self._to_record(r) for r in self._tables.read(RECORDS, where, LIGHT_COLUMNS)]
        if not records:
            return 0
        self.fill(records)
        tbl = self._tables.table(RECORDS)
        data = pa.Table.from_pylist([self._row(r, r.embedding) for r in records], schema=tbl.schema)
        # Only rows still without a vector and with the content that was embedded: a row rewritten
        # meanwhile (a run on the branch) keeps what that run wrote.
        self._tables.commit(lambda: (tbl.merge_insert(ROW_KEY)
                                     .when_matched_update_all(
                                         where="target.vector IS NULL AND target.content = source.content")
                                     .execute(data)))
        return len(records)

    def by_fingerprint(self, prints: list[str]) -> dict[str, list[float]]:
        """Stored vectors by content fingerprint (any row with that content)."""
        found: dict[str, list[float]] = {}
        if self._tables.table(RECORDS) is None:
            return found
        for chunk in filters.chunks(prints):
            where = filters.where(RecordFilter(fingerprints=tuple(chunk)))
            for row in self._tables.read(RECORDS, where, ["fingerprint", "vector"]):
                if row["vector"] is not None:
                    found[row["fingerprint"]] = list(row["vector"])
        return found


class EmbedAhead:
    """Fills the vectors of records on one background thread while the caller goes on computing the next
    ones (a step's partitions, one after another); ``wait()`` before writing them.

    Why: embedding is the largest part of a demo run's CPU, and ONNX runs without the GIL, so a search
    step's partition is embedded while the next partition's Python runs (issue 24). The vectors are the
    ones ``Vectors.fill`` gives at write time, bit for bit (a text's vector does not depend on its batch),
    and each distinct text is still embedded once: the calls share one memo, used by the worker only."""

    def __init__(self, vectors: Vectors) -> None:
        self._vectors = vectors
        self._memo: dict[str, list[float]] = {}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="synthex-embed")
        self._pending: list[Future[None]] = []

    def submit(self, records: list[Record]) -> None:
        if records:
            self._pending.append(self._pool.submit(self._vectors.fill, list(records), self._memo))

    def wait(self) -> None:
        """Every submitted record has its vector (raises what the embedding raised)."""
        pending, self._pending = self._pending, []
        for future in pending:
            future.result()

    def close(self) -> None:
        """Stop: work not started is dropped, the batch being embedded finishes first."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> EmbedAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class EmbedShard:
    """One ingest worker's part of an append (``Records.append_new``): its rows as the store writes them
    (content encrypted when the store is), the vector empty where ``texts`` names a row, and those texts:
    (row in ``rows``, plaintext) to embed with ``embedder`` rebuilt in the worker."""

    rows: pa.Table
    texts: tuple[tuple[int, str], ...]
    embedder: WorkerEmbedder


def embed_shard(shard: EmbedShard, worker: ShardWorker) -> pa.Table:
    """In a worker: ``shard``'s rows with their vectors, each distinct text embedded once, by the embedder
    ``worker`` keeps for the spec (loaded on its first shard; module level, so a spawned worker imports it).
    The vectors are ``Vectors.fill``'s, bit for bit: a text's vector depends neither on its batch nor on
    the ONNX thread count."""
    distinct = list(dict.fromkeys(text for _, text in shard.texts))
    fresh = worker.embedder(shard.embedder).embed(distinct) if distinct else []
    by_text = {text: vec.tolist() for text, vec in zip(distinct, fresh, strict=True)}
    column = shard.rows.column("vector").to_pylist()
    for row, text in shard.texts:
        column[row] = by_text[text]
    index = shard.rows.schema.get_field_index("vector")
    return shard.rows.set_column(index, shard.rows.schema.field(index), pa.array(column, shard.rows.schema.field(index).type))
