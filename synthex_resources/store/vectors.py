"""Vectors of the records table: filled at write time for searched steps, later for the others."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa

from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.embedder import Embedder
from synthex_resources.store import filters
from synthex_resources.store.filters import RecordFilter
from synthex_resources.store.schemas import LIGHT_COLUMNS, RECORDS, ROW_KEY
from synthex_resources.store.tables import LanceTables


class Vectors:
    def __init__(self, tables: LanceTables, embedder: Callable[[], Embedder],
                 to_record: Callable[[dict[str, Any]], Record], row: Callable[[Record, Any], dict[str, Any]]) -> None:
        self._tables = tables
        self._embedder = embedder
        self._to_record = to_record
        self._row = row

    def fill(self, records: list[Record]) -> None:
        """Give every record a vector, embedding each distinct text once: a text already stored (another
        step, branch or step version with the same content) reuses its stored vector.

        A record with no text (empty or whitespace) gets the zero vector, not the embedding of nothing:
        that embedding sits near every query (an empty summary ranked second for any question), while a
        zero vector has no cosine to anything, so dense search leaves it out (search/dense_index.py; a
        LanceDB cosine query skips it too)."""
        need = [r for r in records if r.embedding is None]
        blank = [r for r in need if not r.content.strip()]
        if blank:
            zero = [0.0] * self._embedder().dim
            for rec in blank:
                rec.embedding = list(zero)
            need = [r for r in need if r.content.strip()]
        if not need:
            return
        by_print: dict[str, list[Record]] = defaultdict(list)
        for rec in need:
            by_print[self._tables.content_fingerprint(rec.content)].append(rec)
        known = self.by_fingerprint(list(by_print))
        missing = [p for p in by_print if p not in known]
        if missing:
            fresh = self._embedder().embed([by_print[p][0].content for p in missing])
            known.update({p: vec.tolist() for p, vec in zip(missing, fresh, strict=True)})
        for p, recs in by_print.items():
            for rec in recs:
                rec.embedding = known[p]

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
