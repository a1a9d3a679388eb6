"""The LanceDB record store: records (with vectors), runs, per-partition run stats, LLM cache.

One ``records`` table holds every step and branch (columns step, branch, period): lineage,
purge and search are single queries over it. Upserts go by deterministic id with
``merge_insert``; a matched row is only rewritten when its content changed.

Reads and writes take different doors onto the same Lance datasets: filtered reads go through
``pylance`` (the Lance format's own reader: 0.4 s to import, ~2 ms a read), writes, full-text and
vector search through ``lancedb`` (3 s to import here, almost all of it its REST-namespace client).
So a command that only reads (``get``, ``stats``, ``plan``, a run with nothing to do) never loads
``lancedb``. Both open the latest version on every read, so the UI and the CLI see each other's writes.
"""

from __future__ import annotations

import json
import re
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from synthex.hashing import fingerprint
from synthex.record import Record, Run, RunStats
from synthex_resources.commits import with_commit_retry
from synthex_resources.embedder import Embedder, EmbedderConfig
from synthex_resources.encryption import StoreCipher, configured_key, ensure_marker, open_cipher

RECORDS, RUNS, RUN_STEPS, LLM_CACHE = "records", "runs", "run_steps", "llm_cache"
# A record id is a content address (no branch in it); a row is one branch's copy of a record.
ROW_KEY = ["id", "branch"]
LIGHT_COLUMNS = ["id", "content", "step", "branch", "period", "sources", "materialization_key", "run_id",
                 "created_at", "metadata", "audit"]


class _VersionPin:
    """The table version one search reads (RecordStore.pinned_version)."""

    def __init__(self) -> None:
        self.version: int | None = None
        self.lock = threading.Lock()


def q(value: str) -> str:
    """Quote a string for a LanceDB SQL filter."""
    return "'" + str(value).replace("'", "''") + "'"


def records_schema(dim: int) -> pa.Schema:
    return pa.schema([
        ("id", pa.string()),
        ("content", pa.string()),
        ("step", pa.string()),
        ("branch", pa.string()),
        ("period", pa.string()),
        ("sources", pa.list_(pa.string())),
        ("materialization_key", pa.string()),
        ("run_id", pa.string()),
        ("created_at", pa.string()),
        ("fingerprint", pa.string()),
        ("metadata", pa.string()),  # JSON: reserved keys of §3.4 and custom.*
        ("audit", pa.string()),  # JSON: prompt_template_hash, rendered_prompt_hash, model, ...
        ("vector", pa.list_(pa.float32(), dim)),
    ])


RUNS_SCHEMA = pa.schema([("id", pa.string()), ("pipeline", pa.string()), ("branch", pa.string()),
                         ("status", pa.string()), ("started_at", pa.string()), ("data", pa.string())])
RUN_STEPS_SCHEMA = pa.schema([("id", pa.string()), ("run_id", pa.string()), ("pipeline", pa.string()),
                              ("branch", pa.string()), ("step", pa.string()), ("period", pa.string()),
                              ("recorded_at", pa.string()), ("stats", pa.string())])
CACHE_SCHEMA = pa.schema([("key", pa.string()), ("model", pa.string()), ("response", pa.string()),
                          ("raw", pa.string()), ("tokens_in", pa.int64()), ("tokens_out", pa.int64())])
_UNRESOLVED = object()  # RecordStore._cipher before the key check ran (None means: a plaintext store)


class RecordStore:
    """Plain-Python API over the LanceDB tables (the Dagster resource below wraps it)."""

    def __init__(self, uri: str, embedder: Embedder | Callable[[], Embedder] | None = None,
                 storage_options: dict[str, str] | None = None, encryption_key: str | None = None) -> None:
        self.uri = uri
        # Encryption at rest (synthex_resources/encryption.py): ``encryption_key`` or, when None, the
        # SYNTHEX_ENCRYPTION_KEY environment variable; resolved against the store's key check on first use.
        self._encryption_key = encryption_key
        self._cipher: Any = _UNRESOLVED
        self._marker_checked = False
        # Object-store settings (endpoint, region, keys) for s3:// and similar URIs; None lets both
        # libraries read the usual AWS_* environment variables.
        self.storage_options = storage_options
        self._db: Any = None
        self._embedder = embedder
        self._tables: dict[str, Any] = {}
        self._pin = threading.local()  # .holder: the _VersionPin of the search running on this thread
        self._pinned_dataset: Any | None = None  # the records dataset at the version searches last pinned
        self._lock = threading.RLock()
        # Derived state that lives as long as this store (the dense matrix, leaf-sum bookkeeping, the
        # search thread pools): built by the search layer through ``derived``, dropped by ``close``.
        self._derived: dict[str, Any] = {}
        # Copy-on-write branches: branch -> {step: the branch whose rows serve it}; a branch without a
        # view (main, or one nobody described) reads its own rows only.
        self._views: dict[str, dict[str, str]] = {}

    def derived(self, name: str, build: Callable[[], Any]) -> Any:
        """The store-scoped object ``name``, built on first use."""
        with self._lock:
            if name not in self._derived:
                self._derived[name] = build()
            return self._derived[name]

    def close(self) -> None:
        """Drop caches and stop thread pools; the store can still be used (it rebuilds on demand)."""
        with self._lock:
            derived, self._derived = self._derived, {}
            self._tables.clear()
            self._pinned_dataset = None
        for value in derived.values():
            shutdown = getattr(value, "shutdown", None)
            if callable(shutdown):
                shutdown(wait=False)

    # -- encryption at rest ------------------------------------------------------------------------------
    @property
    def cipher(self) -> StoreCipher | None:
        """The store's cipher (None: a plaintext store). Raises EncryptionError, one line, when the key and
        the store disagree: an encrypted store opened without its key or with another, a plaintext store
        opened with a key. Every table access checks it first, so no read returns ciphertext as text."""
        if self._cipher is _UNRESOLVED:
            with self._lock:
                if self._cipher is _UNRESOLVED:
                    key = self._encryption_key if self._encryption_key is not None else configured_key()
                    self._cipher = open_cipher(self.uri, key, self.storage_options)
        return self._cipher

    def _encrypt(self, text: str | None) -> str | None:
        cipher = self.cipher
        if cipher is None or text is None:
            return text
        if not self._marker_checked:  # the first encrypted write creates (or re-checks) the key check
            with self._lock:
                if not self._marker_checked:
                    ensure_marker(self.uri, cipher, self.storage_options)
                    self._marker_checked = True
        return cipher.encrypt(text)

    def _decrypt(self, value: str | None) -> str | None:
        cipher = self.cipher
        return value if cipher is None or value is None else cipher.decrypt(value)

    def content_fingerprint(self, content: str) -> str:
        """The stored ``fingerprint`` of a text: keyed (HMAC) in an encrypted store, so it confirms no guess."""
        cipher = self.cipher
        return fingerprint(content) if cipher is None else cipher.fingerprint(content)

    # -- branch views (copy-on-write) ---------------------------------------------------------------
    def set_view(self, branch: str, serving: dict[str, str]) -> None:
        """Reads of ``branch`` take each step's rows from ``serving[step]`` (its own or an ancestor's)."""
        self._views[branch] = dict(serving)

    def serving(self, step: str, branch: str) -> str:
        return self._views.get(branch, {}).get(step, branch)

    def scope_groups(self, branch: str, steps: list[str] | None = None) -> dict[str, list[str] | None]:
        """serving branch -> the steps read from it (None: every step) for a read of ``branch``."""
        view = self._views.get(branch)
        if not view or all(b == branch for b in view.values()):
            return {branch: list(steps) if steps else None}
        groups: dict[str, list[str] | None] = {}
        for step in steps or list(view):
            groups.setdefault(self.serving(step, branch), []).append(step)  # type: ignore[union-attr]
        return groups

    def scope(self, branch: str, steps: list[str] | None = None) -> str:
        """SQL filter for the rows a read of ``branch`` (and ``steps``) sees."""
        parts = []
        for served_by, names in self.scope_groups(branch, steps).items():
            clause = f"branch = {q(served_by)}"
            if names:
                clause += " AND step IN (" + ",".join(q(n) for n in names) + ")"
            parts.append(f"({clause})")
        return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"

    # -- tables -----------------------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = EmbedderConfig().create()
        if callable(self._embedder) and not hasattr(self._embedder, "embed"):
            self._embedder = self._embedder()
        return self._embedder  # type: ignore[return-value]

    @property
    def db(self) -> Any:
        """The lancedb connection, opened on first write or search (importing lancedb costs ~3 s here)."""
        if self._db is None:
            import lancedb

            # Check for other processes' commits on every read: the UI and the CLI share one store.
            self._db = lancedb.connect(self.uri, read_consistency_interval=timedelta(0),
                                       storage_options=self.storage_options)
        return self._db

    def _dataset_path(self, name: str) -> str:
        return f"{self.uri.rstrip('/')}/{name}.lance"

    def dataset(self, name: str) -> Any | None:
        """The latest version of table ``name`` as a pylance dataset (None when it does not exist)."""
        import lance

        self.cipher  # noqa: B018 (refuses a store whose key is missing or wrong)
        holder = getattr(self._pin, "holder", None)
        pinned = holder.version if holder is not None and name == RECORDS else None
        cached = self._pinned_dataset
        if pinned is not None and cached is not None and cached.version == pinned:
            # Inside a search: the dataset opened at the version it reads, with its index caches warm
            # (a fresh open costs a manifest read and cold index lookups: 15 against 8 ms at 1M records).
            return cached
        path = self._dataset_path(name)
        if "://" not in path and not Path(path).exists():
            return None
        try:
            ds = lance.dataset(path, storage_options=self.storage_options)
        except (FileNotFoundError, ValueError, OSError):
            return None
        if pinned is not None and ds.version == pinned:
            self._pinned_dataset = ds
        return ds

    def read(self, name: str, where: str | None = None, columns: list[str] | None = None,
             limit: int | None = None) -> list[dict[str, Any]]:
        """Rows of table ``name`` matching the SQL filter ``where`` (the same dialect LanceDB takes)."""
        ds = self.dataset(name)
        if ds is None:
            return []
        return ds.to_table(columns=columns, filter=where, limit=limit).to_pylist()

    def table(self, name: str, create_schema: pa.Schema | None = None) -> Any | None:
        self.cipher  # noqa: B018 (refuses a store whose key is missing or wrong)
        with self._lock:
            if name in self._tables:
                return self._tables[name]
            try:
                tbl = self.db.open_table(name)
            except (FileNotFoundError, ValueError):
                if create_schema is None:
                    return None
                tbl = with_commit_retry(lambda: self.db.create_table(name, schema=create_schema, exist_ok=True))
            self._tables[name] = tbl
            return tbl

    def upsert_rows(self, name: str, schema: pa.Schema, rows: list[dict[str, Any]], key: str = "id") -> None:
        """Insert or replace rows of a small bookkeeping table (runs, stats, cache, hook deliveries) by
        ``key``, in one commit, creating the table on first use."""
        if not rows:
            return
        tbl = self.table(name, schema)
        data = pa.Table.from_pylist(rows, schema=schema)
        with self._lock:
            self._unpin()  # the search that made this write reads the new version next
            with_commit_retry(lambda: tbl.merge_insert(key).when_matched_update_all()
                              .when_not_matched_insert_all().execute(data))

    def delete_rows(self, name: str, where: str) -> None:
        tbl = self.table(name)
        if tbl is not None:
            with self._lock:
                self._unpin()  # the search that made this write reads the new version next
                with_commit_retry(lambda: tbl.delete(where))

    def records_table(self, create: bool = False) -> Any | None:
        return self.table(RECORDS, records_schema(self.embedder.dim) if create else None)

    def records_version(self, tbl: Any) -> int:
        """The records table's version: asked afresh (a manifest check, ~1-10 ms) except inside
        ``pinned_version()``, where the first answer is reused by every later ask of that search."""
        holder = getattr(self._pin, "holder", None)
        if holder is None:
            return tbl.version
        with holder.lock:
            if holder.version is None:
                holder.version = tbl.version
            return holder.version

    @contextmanager
    def pinned_version(self, holder: _VersionPin | None = None) -> Iterator[_VersionPin]:
        """One search asks for the table version in several places (dense matrix, leaf bookkeeping,
        lexicon); inside this block, on this thread, they share one answer. ``holder``: the pin of the
        search this thread works for (its worker threads pass the caller's, see ``current_pin``). A
        commit made meanwhile is seen by the next search, as it would be had it landed a moment later;
        a write through this store clears the pin of the search that made it."""
        outer = getattr(self._pin, "holder", None)
        self._pin.holder = holder or outer or _VersionPin()
        try:
            yield self._pin.holder
        finally:
            self._pin.holder = outer

    def current_pin(self) -> _VersionPin | None:
        return getattr(self._pin, "holder", None)

    def _unpin(self) -> None:
        holder = getattr(self._pin, "holder", None)
        if holder is not None:
            holder.version = None

    # -- records: read --------------------------------------------------------------------------
    def _rows(self, where: str, columns: list[str] | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        return self.read(RECORDS, where, columns or LIGHT_COLUMNS, limit)

    def to_record(self, row: dict[str, Any]) -> Record:
        """A Record from a raw row of the records table."""
        vector = row.get("vector")
        return Record(
            id=row["id"], content=self._decrypt(row["content"]), step=row["step"], branch=row["branch"],
            source_ids=list(row.get("sources") or []), materialization_key=row.get("materialization_key", ""),
            run_id=row.get("run_id", ""), created_at=row.get("created_at", ""),
            metadata=json.loads(row.get("metadata") or "{}"), audit=json.loads(self._decrypt(row.get("audit")) or "{}"),
            embedding=list(vector) if vector is not None else None, period=row.get("period", ""),
            _resolver=self,
        )

    def get(self, record_id: str, with_embedding: bool = False, branch: str | None = None) -> Record | None:
        """A record by id: the row ``branch`` reads (through its view) or, without a branch, any row
        (rows of one id hold the same content: ids are content addresses)."""
        cols = LIGHT_COLUMNS + (["vector"] if with_embedding else [])
        where = f"id = {q(record_id)}" + (f" AND {self.scope(branch)}" if branch else "")
        rows = self._rows(where, cols, limit=1)
        return self.to_record(rows[0]) if rows else None

    def ids_with_prefix(self, prefix: str, limit: int = 2) -> list[str]:
        """Record ids starting with ``prefix`` (hex and dashes only; at most ``limit``)."""
        if not re.fullmatch(r"[0-9a-fA-F-]{1,36}", prefix):
            return []
        rows = self._rows(f"id LIKE {q(prefix.lower() + '%')}", ["id"], limit=4 * limit)
        return list(dict.fromkeys(r["id"] for r in rows))[:limit]  # one id can have a row per branch

    def rows_by_id(self, ids: Iterable[str], columns: list[str] | None = None,
                   branch: str | None = None) -> dict[str, dict[str, Any]]:
        """Raw rows by id (light columns by default), read in chunks of 500 ids; missing ids are absent.
        With ``branch``, the rows that branch reads (its view); without, any row of each id."""
        wanted = list(dict.fromkeys(ids))
        found: dict[str, dict[str, Any]] = {}
        scope = f" AND {self.scope(branch)}" if branch else ""
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            for row in self._rows("id IN (" + ",".join(q(i) for i in chunk) + ")" + scope, columns):
                found.setdefault(row["id"], row)
        return found

    def get_many(self, ids: Iterable[str], branch: str | None = None) -> list[Record]:
        wanted = list(dict.fromkeys(ids))
        found = self.rows_by_id(wanted, branch=branch)
        return [self.to_record(found[i]) for i in wanted if i in found]

    def list(self, step: str | None = None, branch: str = "main", period: str | None = None,
             with_embedding: bool = False, steps: list[str] | None = None) -> list[Record]:
        """Records of a branch (through its view): of ``step`` or of ``steps`` (default: every step)."""
        clauses = [self.scope(branch, [step] if step is not None else steps)]
        if period is not None:
            clauses.append(f"period = {q(period)}")
        cols = LIGHT_COLUMNS + (["vector"] if with_embedding else [])
        rows = self._rows(" AND ".join(clauses), cols)
        return sorted((self.to_record(r) for r in rows),
                      key=lambda r: (r.meta("time.created_at") or "", r.id))

    def partition_id_sets(self, step: str, branch: str, periods: list[str]) -> dict[str, set[str]]:
        """Stored ids of each (step, branch, period) partition, in one query."""
        out: dict[str, set[str]] = {p: set() for p in periods}
        if not periods:
            return out
        where = f"{self.scope(branch, [step])} AND period IN (" + ",".join(q(p) for p in periods) + ")"
        for row in self._rows(where, ["id", "period"]):
            out[row["period"]].add(row["id"])
        return out

    def list_periods(self, steps: list[str], branch: str, periods: list[str]) -> list[Record]:
        """Records of ``steps`` in ``periods`` of a branch, one query (store order as in ``list``)."""
        if not steps or not periods:
            return []
        where = f"{self.scope(branch, steps)} AND period IN (" + ",".join(q(p) for p in periods) + ")"
        return sorted((self.to_record(r) for r in self._rows(where)),
                      key=lambda r: (r.meta("time.created_at") or "", r.id))

    def previous_state(self, step: str, branch: str, period: str) -> Record | None:
        """The record of ``step`` in the latest period before ``period`` (a fold's prior state)."""
        rows = self._rows(f"{self.scope(branch, [step])} AND period < {q(period)}", ["id", "period"])
        if not rows:
            return None
        latest = max(rows, key=lambda r: (r["period"], r["id"]))
        return self.get(latest["id"], branch=branch)

    def latest(self, step: str, branch: str = "main") -> Record | None:
        rows = self._rows(self.scope(branch, [step]), ["id", "period"])
        if not rows:
            return None
        return self.get(max(rows, key=lambda r: (r["period"], r["id"]))["id"], branch=branch)

    def counts(self, branch: str = "main") -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for row in self._rows(self.scope(branch), ["step"]):
            out[row["step"]] += 1
        return dict(out)

    # -- records: write -------------------------------------------------------------------------
    def _row(self, rec: Record, vector: Any) -> dict[str, Any]:
        return {
            "id": rec.id, "content": self._encrypt(rec.content), "step": rec.step, "branch": rec.branch,
            "period": rec.period,
            "sources": list(rec.source_ids), "materialization_key": rec.materialization_key, "run_id": rec.run_id,
            "created_at": rec.created_at, "fingerprint": self.content_fingerprint(rec.content),
            "metadata": json.dumps(rec.metadata, ensure_ascii=False, sort_keys=True),
            "audit": self._encrypt(json.dumps(rec.audit, ensure_ascii=False, sort_keys=True)),
            "vector": None if vector is None else [float(x) for x in vector],
        }

    def upsert(self, records: list[Record], embed: bool = True, delete_where: str | None = None) -> int:
        """Upsert by id; returns rows written. With ``embed`` the records get vectors now (each distinct
        text embedded once); without, their vector stays empty until a dense search needs it
        (``ensure_vectors``). With ``delete_where``, the rows matching that filter and not among
        ``records`` (by row key) are deleted in the same commit: readers see all of it or none."""
        if not records:
            if delete_where is not None:
                self.delete_rows(RECORDS, delete_where)
            return 0
        if embed:
            self._fill_vectors(records)
        tbl = self.records_table(create=True)
        data = pa.Table.from_pylist([self._row(r, r.embedding) for r in records], schema=tbl.schema)

        def merge() -> Any:
            builder = (tbl.merge_insert(ROW_KEY)
                       .when_matched_update_all(where="target.content != source.content")
                       .when_not_matched_insert_all())
            if delete_where is not None:
                builder = builder.when_not_matched_by_source_delete(delete_where)
            return builder.execute(data, on_bad_vectors="null")  # a record written without a vector keeps it empty

        with self._lock:
            self._unpin()  # the search that made this write reads the new version next
            with_commit_retry(merge)
        return len(records)

    def _fill_vectors(self, records: list[Record]) -> None:
        """Give every record a vector, embedding each distinct text once: a text already stored (another
        step, branch or step version with the same content) reuses its stored vector."""
        need = [r for r in records if r.embedding is None]
        if not need:
            return
        by_print: dict[str, list[Record]] = defaultdict(list)
        for rec in need:
            by_print[self.content_fingerprint(rec.content)].append(rec)
        known = self.vectors_by_fingerprint(list(by_print))
        missing = [p for p in by_print if p not in known]
        if missing:
            fresh = self.embedder.embed([by_print[p][0].content for p in missing])
            known.update({p: vec.tolist() for p, vec in zip(missing, fresh, strict=True)})
        for p, recs in by_print.items():
            for rec in recs:
                rec.embedding = known[p]

    def ensure_vectors(self, steps: list[str] | None, branch: str) -> int:
        """Embed and store the vectors that records of ``steps`` on ``branch`` were written without (steps
        outside every search surface are not embedded at write time). Returns how many were filled."""
        clauses = ["vector IS NULL", self.scope(branch, steps)]
        records = [self.to_record(r) for r in self._rows(" AND ".join(clauses))]
        if not records:
            return 0
        self._fill_vectors(records)
        tbl = self.records_table()
        data = pa.Table.from_pylist([self._row(r, r.embedding) for r in records], schema=tbl.schema)
        with self._lock:
            self._unpin()  # the search that made this write reads the new version next
            # Only rows still without a vector and with the content that was embedded: a row rewritten
            # meanwhile (a run on the branch) keeps what that run wrote.
            with_commit_retry(lambda: (tbl.merge_insert(ROW_KEY)
                                       .when_matched_update_all(
                                           where="target.vector IS NULL AND target.content = source.content")
                                       .execute(data)))
        return len(records)

    def vectors_by_fingerprint(self, prints: list[str]) -> dict[str, list[float]]:
        """Stored vectors by content fingerprint (any row with that content)."""
        tbl = self.records_table()
        found: dict[str, list[float]] = {}
        if tbl is None:
            return found
        for start in range(0, len(prints), 500):
            where = "fingerprint IN (" + ",".join(q(p) for p in prints[start:start + 500]) + ")"
            for row in self._rows(where, ["fingerprint", "vector"]):
                if row["vector"] is not None:
                    found[row["fingerprint"]] = list(row["vector"])
        return found

    def delete_ids(self, ids: Iterable[str], branch: str | None = None) -> int:
        """Delete the rows of ``ids`` on ``branch`` (on every branch when None)."""
        ids = list(ids)
        tbl = self.records_table()
        if tbl is None or not ids:
            return 0
        on_branch = f" AND branch = {q(branch)}" if branch is not None else ""
        with self._lock:
            self._unpin()  # the search that made this write reads the new version next
            for start in range(0, len(ids), 500):
                where = "id IN (" + ",".join(q(i) for i in ids[start:start + 500]) + ")" + on_branch
                with_commit_retry(lambda where=where: tbl.delete(where))
        return len(ids)

    def write_partitions(self, step: str, branch: str, parts: dict[str, tuple[list[Record], set[str]]],
                         embed: bool = True) -> dict[str, int]:
        """Several partitions of one step in ONE commit: upsert all new records and delete the rows each
        partition no longer expects (ids stored in it, on the branch serving it, not in its keep set)
        with a single ``merge_insert``. Returns rows removed per period.

        A reader (search, stats, the UI) sees each partition as it was or as it is now, never old and new
        rows together; a kill before the commit leaves the partitions as they were (the next plan redoes
        them), a kill after it leaves them done.
        """
        stored = self.partition_id_sets(step, branch, list(parts))
        stale = {period: stored[period] - keep for period, (_, keep) in parts.items()}
        gone = sorted({i for ids in stale.values() for i in ids})
        delete_where = None
        if gone:
            # Exactly the rows ``partition_id_sets`` read (this step's rows on its serving branch, in
            # these periods) that are no longer expected.
            delete_where = (f"{self.scope(branch, [step])} AND period IN (" + ",".join(q(p) for p in parts)
                            + ") AND id IN (" + ",".join(q(i) for i in gone) + ")")
        self.upsert([r for new, _ in parts.values() for r in new], embed=embed, delete_where=delete_where)
        return {period: len(ids) for period, ids in stale.items()}

    def move_step_rows(self, step: str, from_branch: str, to_branch: str, marker: str) -> int:
        """Make ``to_branch``'s rows of ``step`` exactly ``from_branch``'s, then drop ``from_branch``'s
        (promote), in three commits however many rows: copy (tagged ``run_id = marker``, vectors
        included), delete ``to_branch``'s other rows of the step, delete the source rows. Re-running
        after a crash at any point converges: the marker is the same, copies are idempotent."""
        ds = self.dataset(RECORDS)
        tbl = self.records_table()
        if ds is None or tbl is None:
            return 0
        rows = ds.to_table(filter=f"step = {q(step)} AND branch = {q(from_branch)}")
        if rows.num_rows:
            rows = rows.set_column(rows.schema.get_field_index("branch"), "branch",
                                   pa.array([to_branch] * rows.num_rows, pa.string()))
            rows = rows.set_column(rows.schema.get_field_index("run_id"), "run_id",
                                   pa.array([marker] * rows.num_rows, pa.string()))
            rows = rows.cast(tbl.schema)
            with self._lock:
                self._unpin()  # the search that made this write reads the new version next
                with_commit_retry(lambda: tbl.merge_insert(ROW_KEY).when_matched_update_all()
                                  .when_not_matched_insert_all().execute(rows, on_bad_vectors="null"))
        elif self.read(RECORDS, f"step = {q(step)} AND branch = {q(to_branch)} AND run_id = {q(marker)}",
                       ["id"], limit=1) == []:
            return 0  # nothing to move and no earlier copy: leave the target as it is
        self.delete_rows(RECORDS, f"step = {q(step)} AND branch = {q(to_branch)} AND run_id != {q(marker)}")
        self.delete_rows(RECORDS, f"step = {q(step)} AND branch = {q(from_branch)}")
        return rows.num_rows

    # -- runs -------------------------------------------------------------------------------------
    def save_run(self, run: Run) -> None:
        self.upsert_rows(RUNS, RUNS_SCHEMA, [{"id": run.id, "pipeline": run.pipeline, "branch": run.branch,
                                              "status": run.status, "started_at": run.started_at,
                                              "data": json.dumps(run.to_dict())}])

    def record_step_stats(self, run_id: str, pipeline: str, step: str, recorded_at: str,
                          per_partition: list[tuple[str, str, RunStats]]) -> None:
        """Stats of one step's (branch, period, stats) partitions in a run, one commit."""
        if not per_partition:
            return
        rows = [{"id": f"{run_id}/{step}/{branch}/{period}", "run_id": run_id, "pipeline": pipeline,
                 "branch": branch, "step": step, "period": period, "recorded_at": recorded_at,
                 "stats": json.dumps(stats.to_dict())} for branch, period, stats in per_partition]
        self.upsert_rows(RUN_STEPS, RUN_STEPS_SCHEMA, rows)

    def step_stats(self, run_id: str) -> dict[str, RunStats]:
        out: dict[str, RunStats] = {}
        for row in self.read(RUN_STEPS, f"run_id = {q(run_id)}"):
            out.setdefault(row["step"], RunStats()).add(RunStats(**json.loads(row["stats"])))
        return out

    def runs(self, limit: int = 20) -> list[Run]:
        """Runs started from the CLI/Python, plus runs launched elsewhere (e.g. the Dagster UI)."""
        found: dict[str, Run] = {}
        for row in self.read(RUNS):
            found[row["id"]] = Run.from_dict(json.loads(row["data"]))
        by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in self.read(RUN_STEPS):
            if row["run_id"] not in found:
                by_run[row["run_id"]].append(row)
        for run_id, rows in by_run.items():
            run = Run(id=run_id, pipeline=rows[0]["pipeline"], branch=rows[0]["branch"],
                      steps=sorted({r["step"] for r in rows}), status="completed",
                      started_at=min(r["recorded_at"] for r in rows),
                      completed_at=max(r["recorded_at"] for r in rows))
            for r in rows:
                stats = RunStats(**json.loads(r["stats"]))
                run.stats.add(stats)
                run.step_stats.setdefault(r["step"], RunStats()).add(stats)
            found[run_id] = run
        return sorted(found.values(), key=lambda r: r.started_at, reverse=True)[:limit]

    # -- LLM response cache (design doc §3.6 replay) ----------------------------------------------------
    def cache_get_many(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        if not keys:
            return {}
        out: dict[str, dict[str, Any]] = {}
        for start in range(0, len(keys), 500):
            where = "key IN (" + ",".join(q(k) for k in keys[start:start + 500]) + ")"
            for row in self.read(LLM_CACHE, where):
                if self.cipher is not None:
                    row = {**row, "response": self._decrypt(row["response"]), "raw": self._decrypt(row["raw"])}
                out[row["key"]] = row
        return out

    def cache_put_many(self, rows: list[dict[str, Any]]) -> None:
        if self.cipher is not None:
            rows = [{**r, "response": self._encrypt(r.get("response")), "raw": self._encrypt(r.get("raw"))}
                    for r in rows]
        self.upsert_rows(LLM_CACHE, CACHE_SCHEMA, rows, key="key")


def open_store(uri: str, embedder: Embedder | Callable[[], Embedder] | None = None) -> RecordStore:
    """A new RecordStore on ``uri`` (keep it: it owns its caches). The embedder (an object, or a factory
    called on first write) defaults to the environment's (``EmbedderConfig``)."""
    return RecordStore(uri, embedder=embedder or EmbedderConfig().create)
