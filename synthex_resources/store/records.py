"""The records table in typed operations: reads take a ``BranchScope`` (the rows a branch reads, its
inherited steps through the branch that serves them), writes name the branch whose own rows they change.

One ``records`` table holds every step and branch (columns step, branch, period): lineage, purge and
search are single queries over it. Upserts go by row key (id, branch) with ``merge_insert``; a matched
row is only rewritten when its content changed.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa

from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.embedder import Embedder
from synthex_resources.store import filters
from synthex_resources.store.filters import RecordFilter
from synthex_resources.store.fragment_append import HeldIdsError, IngestWorkers, append_in_workers
from synthex_resources.store.schemas import (
    EMBEDDER_METADATA_KEY,
    LIGHT_COLUMNS,
    RECORDS,
    ROW_KEY,
    records_schema,
)
from synthex_resources.store.tables import LanceTables
from synthex_resources.store.vectors import EmbedShard, Vectors, embed_shard


class Records:
    def __init__(self, tables: LanceTables, embedder: Callable[[], Embedder]) -> None:
        self._tables = tables
        self._embedder = embedder
        self.vectors = Vectors(tables, embedder, self.to_record, self._row)

    # -- rows <-> records -----------------------------------------------------------------------
    def to_record(self, row: dict[str, Any]) -> Record:
        """A Record from a raw row of the records table."""
        vector = row.get("vector")
        decrypt = self._tables.decrypt
        return Record(
            id=row["id"], content=decrypt(row["content"]), step=row["step"], branch=row["branch"],
            source_ids=list(row.get("sources") or []), materialization_key=row.get("materialization_key", ""),
            run_id=row.get("run_id", ""), created_at=row.get("created_at", ""),
            metadata=json.loads(row.get("metadata") or "{}"), audit=json.loads(decrypt(row.get("audit")) or "{}"),
            embedding=list(vector) if vector is not None else None, period=row.get("period", ""),
            _resolver=self,
        )

    def _row(self, rec: Record, vector: Any) -> dict[str, Any]:
        encrypt = self._tables.encrypt
        return {
            "id": rec.id, "content": encrypt(rec.content), "step": rec.step, "branch": rec.branch,
            "period": rec.period,
            "sources": list(rec.source_ids), "materialization_key": rec.materialization_key, "run_id": rec.run_id,
            "created_at": rec.created_at, "fingerprint": self._tables.content_fingerprint(rec.content),
            "metadata": json.dumps(rec.metadata, ensure_ascii=False, sort_keys=True),
            "audit": encrypt(json.dumps(rec.audit, ensure_ascii=False, sort_keys=True)),
            "vector": None if vector is None else [float(x) for x in vector],
        }

    def rows(self, f: RecordFilter, columns: list[str] | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Raw rows matching ``f`` (light columns by default)."""
        return self._tables.read(RECORDS, filters.where(f), columns or LIGHT_COLUMNS, limit,
                                 version=f.scope.version if f.scope is not None else None)

    def table(self, create: bool = False) -> Any | None:
        """The records table (``LanceTable``: writes and index maintenance through pylance, search through
        lancedb's query builder)."""
        if not create:
            return self._tables.table(RECORDS)
        embedder = self._embedder()
        # An embedder without a name (a test's or a plugin's toy) records none: its store is not checked.
        return self._tables.table(RECORDS, records_schema(embedder.dim, getattr(embedder, "name", None)))

    def embedder_recorded(self) -> str | None:
        """The name of the embedder that wrote this store's vectors, as the records table recorded it when
        it was created (None: no table yet, or a table made before the name was recorded)."""
        dataset = self._tables.dataset(RECORDS)
        metadata = (dataset.schema.metadata or {}) if dataset is not None else {}
        name = metadata.get(EMBEDDER_METADATA_KEY)
        return name.decode() if name else None

    # -- reads ----------------------------------------------------------------------------------
    def get(self, record_id: str, scope: BranchScope | None = None, with_embedding: bool = False) -> Record | None:
        """A record by id: the row ``scope`` reads or, without a scope, any row (rows of one id hold the
        same content: ids are content addresses)."""
        cols = LIGHT_COLUMNS + (["vector"] if with_embedding else [])
        found = self.rows(RecordFilter(scope=scope, ids=(record_id,)), cols, limit=1)
        return self.to_record(found[0]) if found else None

    def ids_with_prefix(self, prefix: str, limit: int = 2) -> list[str]:
        """Record ids starting with ``prefix`` (hex and dashes only; at most ``limit``)."""
        if not re.fullmatch(r"[0-9a-fA-F-]{1,36}", prefix):
            return []
        found = self.rows(RecordFilter(id_prefix=prefix.lower()), ["id"], limit=4 * limit)
        return list(dict.fromkeys(r["id"] for r in found))[:limit]  # one id can have a row per branch

    def rows_by_id(self, ids: Iterable[str], columns: list[str] | None = None,
                   scope: BranchScope | None = None, within: RecordFilter | None = None) -> dict[str, dict[str, Any]]:
        """Raw rows by id (light columns by default), read in chunks; missing ids are absent. With
        ``scope``, the rows that scope reads; ``within``: also matching that filter; else any row of each id."""
        base = within if within is not None else RecordFilter(scope=scope)
        found: dict[str, dict[str, Any]] = {}
        for chunk in filters.chunks(ids):
            for row in self.rows(base.with_ids(chunk), columns):
                found.setdefault(row["id"], row)
        return found

    def all_rows_of(self, ids: Iterable[str]) -> list[dict[str, Any]]:
        """Every row (each branch's copy, every column, vectors included) of ``ids``."""
        out: list[dict[str, Any]] = []
        for chunk in filters.chunks(ids):
            out += self._tables.read(RECORDS, filters.where(RecordFilter(ids=tuple(chunk))))
        return out

    def get_many(self, ids: Iterable[str], scope: BranchScope | None = None) -> list[Record]:
        wanted = list(dict.fromkeys(ids))
        found = self.rows_by_id(wanted, scope=scope)
        return [self.to_record(found[i]) for i in wanted if i in found]

    def list(self, scope: BranchScope, step: str | None = None, period: str | None = None,
             with_embedding: bool = False, steps: list[str] | None = None) -> list[Record]:
        """Records ``scope`` reads: of ``step`` or of ``steps`` (default: every step), in store order."""
        wanted = [step] if step is not None else steps
        f = RecordFilter.of(scope, steps=wanted or None, periods=[period] if period is not None else None)
        cols = LIGHT_COLUMNS + (["vector"] if with_embedding else [])
        return _in_store_order(self.to_record(r) for r in self.rows(f, cols))

    def list_periods(self, scope: BranchScope, steps: list[str], periods: list[str]) -> list[Record]:
        """Records of ``steps`` in ``periods``, one query (store order as in ``list``)."""
        if not steps or not periods:
            return []
        return _in_store_order(self.to_record(r) for r in self.rows(RecordFilter.of(scope, steps=steps, periods=periods)))

    def partition_id_sets(self, scope: BranchScope, step: str, periods: list[str]) -> dict[str, set[str]]:
        """Stored ids of each (step, period) partition ``scope`` reads, in one query."""
        out: dict[str, set[str]] = {p: set() for p in periods}
        if not periods:
            return out
        for row in self.rows(RecordFilter.of(scope, steps=[step], periods=periods), ["id", "period"]):
            out[row["period"]].add(row["id"])
        return out

    def previous_state(self, scope: BranchScope, step: str, period: str) -> Record | None:
        """The record of ``step`` in the latest period before ``period`` (a fold's prior state)."""
        found = self.rows(RecordFilter.of(scope, steps=[step], period_before=period), ["id", "period"])
        if not found:
            return None
        latest = max(found, key=lambda r: (r["period"], r["id"]))
        return self.get(latest["id"], scope)

    def latest(self, scope: BranchScope, step: str) -> Record | None:
        found = self.rows(RecordFilter.of(scope, steps=[step]), ["id", "period"])
        if not found:
            return None
        return self.get(max(found, key=lambda r: (r["period"], r["id"]))["id"], scope)

    def counts(self, scope: BranchScope) -> dict[str, int]:
        """Records per step that ``scope`` reads."""
        out: dict[str, int] = defaultdict(int)
        for row in self.rows(RecordFilter(scope=scope), ["step"]):
            out[row["step"]] += 1
        return dict(out)

    def branches(self, step: str | None = None) -> set[str]:
        """Branches that hold rows of their own (of ``step``, when given)."""
        f = RecordFilter(steps=(step,)) if step is not None else RecordFilter()
        return {r["branch"] for r in self.rows(f, ["branch"])}

    def ids_on_branch(self, branch: str) -> list[str]:
        """Ids of ``branch``'s own rows."""
        return [r["id"] for r in self.rows(RecordFilter(branch=branch), ["id"])]

    def scan(self, columns: list[str], steps: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Every row's ``columns`` (of ``steps``, when given): what doctor and purge sweep."""
        f = RecordFilter.of(steps=list(steps)) if steps is not None else RecordFilter()
        return self.rows(f, columns)

    # -- writes ---------------------------------------------------------------------------------
    def upsert(self, records: list[Record], embed: bool = True, *, delete: RecordFilter | None = None) -> int:
        """Upsert by row key; returns rows written. With ``embed`` the records get vectors now (each
        distinct text embedded once); without, their vector stays empty until a dense search needs it
        (``vectors.ensure``). With ``delete``, the rows matching it and not among ``records`` (by row key)
        are deleted in the same commit: readers see all of it or none."""
        delete_where = filters.where(delete) if delete is not None else None
        if not records:
            if delete_where is not None:
                self._tables.delete(RECORDS, delete_where)
            return 0
        if embed:
            self.vectors.fill(records)
        tbl = self.table(create=True)
        data = pa.Table.from_pylist([self._row(r, r.embedding) for r in records], schema=tbl.schema)

        def merge() -> Any:
            builder = (tbl.merge_insert(ROW_KEY)
                       .when_matched_update_all(where="target.content != source.content")
                       .when_not_matched_insert_all())
            if delete_where is not None:
                builder = builder.when_not_matched_by_source_delete(delete_where)
            return builder.execute(data, on_bad_vectors="null")  # a record written without a vector keeps it empty

        self._tables.commit(merge)
        return len(records)

    def write_partitions(self, scope: BranchScope, step: str, parts: dict[str, tuple[list[Record], set[str]]],
                         embed: bool = True) -> dict[str, int]:
        """Several partitions of one step in ONE commit: upsert all new records and delete the rows each
        partition no longer expects (ids stored in it, on the branch serving it, not in its keep set)
        with a single ``merge_insert``. Returns rows removed per period.

        A reader (search, stats, the UI) sees each partition as it was or as it is now, never old and new
        rows together; a kill before the commit leaves the partitions as they were (the next plan redoes
        them), a kill after it leaves them done.
        """
        stored = self.partition_id_sets(scope, step, list(parts))
        stale = {period: stored[period] - keep for period, (_, keep) in parts.items()}
        gone = sorted({i for ids in stale.values() for i in ids})
        # Exactly the rows ``partition_id_sets`` read (this step's rows on its serving branch, in these
        # periods) that are no longer expected; one filter, not chunked: it is part of the one commit.
        delete = RecordFilter.of(scope, steps=[step], periods=list(parts), ids=gone) if gone else None
        self.upsert([r for new, _ in parts.values() for r in new], embed=embed, delete=delete)
        return {period: len(ids) for period, ids in stale.items()}

    def append_new(self, records: list[Record], workers: IngestWorkers) -> bool:
        """Write ``records``, none of whose ids the table holds, as one append: ``workers``' processes embed
        contiguous shards of them and write each shard's rows as Lance fragments, committed here once
        (store/fragment_append.py). Rows, vectors and columns are the ones ``upsert(records)`` writes.
        False, with nothing written, when an id repeats or the table holds one (on any branch, also one
        committed while the workers ran): the caller writes them the usual way (``write_partitions``).
        A kill before the commit leaves no row: the fragments written so far are referenced by no version."""
        ids = [r.id for r in records]
        if not records or len(set(ids)) != len(ids) or self.rows_by_id(ids, ["id"]):
            return False
        spec = self._embedder().for_worker()  # type: ignore[attr-defined]  (checked by the run: check_ingest)
        self.vectors.reuse(records)  # blank texts, texts stored already: as ``fill`` does, here
        tbl = self.table(create=True)
        rows = pa.Table.from_pylist([self._row(r, r.embedding) for r in records], schema=tbl.schema)
        texts = [(i, r.content) for i, r in enumerate(records) if r.embedding is None]
        # Contiguous shards (the table keeps the records' order), each with an equal share of the texts to
        # embed: shard n starts at the row of text len(texts) * n // workers.
        n_workers = workers.workers
        starts = [texts[len(texts) * n // n_workers][0] if len(texts) * n // n_workers < len(texts) else len(records)
                  for n in range(1, n_workers)]
        bounds = [0, *starts, len(records)]
        jobs = [EmbedShard(rows.slice(first, last - first), tuple((i - first, t) for i, t in texts if first <= i < last),
                           spec)
                for first, last in zip(bounds, bounds[1:], strict=False) if last > first]
        try:
            self._tables.commit(lambda: append_in_workers(
                self._tables.dataset_path(RECORDS), tbl.schema, embed_shard, jobs, workers=n_workers,
                pool=workers.pool(), storage_options=self._tables.storage_options))
        except HeldIdsError:
            return False
        return True

    def delete_ids(self, ids: Iterable[str], branch: str | None = None, chunk: int = filters.ID_CHUNK) -> int:
        """Delete the rows of ``ids`` on ``branch`` (on every branch when None), one commit per ``chunk`` ids."""
        ids = list(ids)
        if not ids or self.table() is None:
            return 0
        for part in filters.chunks(ids, chunk):
            self._tables.delete(RECORDS, filters.where(RecordFilter(ids=tuple(part), branch=branch)))
        return len(ids)

    def move_step_rows(self, step: str, from_branch: str, to_branch: str, marker: str) -> int:
        """Make ``to_branch``'s rows of ``step`` exactly ``from_branch``'s, then drop ``from_branch``'s
        (promote), in three commits however many rows: copy (tagged ``run_id = marker``, vectors
        included), delete ``to_branch``'s other rows of the step, delete the source rows. Re-running
        after a crash at any point converges: the marker is the same, copies are idempotent."""
        tbl = self.table()
        if tbl is None:
            return 0
        source = RecordFilter(steps=(step,), branch=from_branch)
        rows = self._tables.read_arrow(RECORDS, filters.where(source))
        if rows is None:
            return 0
        if rows.num_rows:
            rows = rows.set_column(rows.schema.get_field_index("branch"), "branch",
                                   pa.array([to_branch] * rows.num_rows, pa.string()))
            rows = rows.set_column(rows.schema.get_field_index("run_id"), "run_id",
                                   pa.array([marker] * rows.num_rows, pa.string()))
            rows = rows.cast(tbl.schema)
            self._tables.commit(lambda: tbl.merge_insert(ROW_KEY).when_matched_update_all()
                                .when_not_matched_insert_all().execute(rows, on_bad_vectors="null"))
        elif not self.rows(RecordFilter(steps=(step,), branch=to_branch, run_id=marker), ["id"], limit=1):
            return 0  # nothing to move and no earlier copy: leave the target as it is
        self._tables.delete(RECORDS, filters.where(RecordFilter(steps=(step,), branch=to_branch, run_id_not=marker)))
        self._tables.delete(RECORDS, filters.where(source))
        return rows.num_rows


def _in_store_order(records: Iterable[Record]) -> list[Record]:
    return sorted(records, key=lambda r: (r.meta("time.created_at") or "", r.id))
