"""The Lance datasets under one store URI: connection, encryption, table versions. Private to the storage
layer: the typed parts (``records``, ``vectors``, ``runs``, ``llm_cache``, ``hook_cursors``) and the search
internals use it; nothing above storage does.

Reads and writes go through ``pylance`` (the Lance format's own library: 0.4 s to import, ~2 ms a
read): filtered reads, and the write path (``LanceTable``: create, ``merge_insert``, delete, index
builds and maintenance). ``lancedb`` (2.4 CPU-seconds more to import here, almost all of it its
REST-namespace client) is opened only for what pylance has no door for: LanceDB's query builder
(``tbl.search``: vector search off the in-memory path, FTS over an unindexed table, exact substring
search) and whatever else a caller asks a ``LanceTable`` for. So a run, ``get``, ``stats``, ``plan``
and a BM25 search never load ``lancedb`` (tests/test_demo_run_hashing.py, test_cli_light_imports.py). Both libraries
write LanceDB's on-disk format (the same datasets, manifests and indexes) and open the latest version
on every operation, so the UI and the CLI see each other's writes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from synthex.core.errors import SynthexError
from synthex.core.hashing import fingerprint
from synthex_resources.commits import with_commit_retry
from synthex_resources.encryption import StoreCipher, configured_key, ensure_marker, open_cipher
from synthex_resources.store.pinned import PinnedDataset
from synthex_resources.store.schemas import RECORDS

_UNRESOLVED = object()  # LanceTables._cipher before the key check ran (None means: a plaintext store)


class StoreUnavailableError(SynthexError):
    """The store could not be read (an object store refusing access, a network error): never read as
    "no table", which would make a run recompute, or a sync delete, everything."""


class VersionPin:
    """The records table one search reads (``LanceTables.pinned_version``): opened once, at the version
    of the search's first ask, and read by every later ask of that search (its threads included)."""

    def __init__(self) -> None:
        self.read: PinnedDataset | None = None  # None: not asked yet, or the search wrote since (unpinned)
        self.lock = threading.Lock()

    @property
    def version(self) -> int | None:
        read = self.read
        return None if read is None else read.version


class LanceTables:
    def __init__(self, uri: str, storage_options: dict[str, str] | None = None,
                 encryption_key: str | None = None) -> None:
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
        self._tables: dict[str, Any] = {}
        self._pin = threading.local()  # .holder: the VersionPin of the search running on this thread
        self._pinned_dataset: Any | None = None  # the records dataset at the version searches last pinned
        self.lock = threading.RLock()

    def forget(self) -> None:
        """Drop open table handles (they point at versions a purge may remove)."""
        with self.lock:
            self._tables.clear()
            self._pinned_dataset = None

    # -- encryption at rest ------------------------------------------------------------------------------
    @property
    def cipher(self) -> StoreCipher | None:
        """The store's cipher (None: a plaintext store). Raises EncryptionError, one line, when the key and
        the store disagree: an encrypted store opened without its key or with another, a plaintext store
        opened with a key. Every table access checks it first, so no read returns ciphertext as text."""
        if self._cipher is _UNRESOLVED:
            with self.lock:
                if self._cipher is _UNRESOLVED:
                    key = self._encryption_key if self._encryption_key is not None else configured_key()
                    self._cipher = open_cipher(self.uri, key, self.storage_options)
        return self._cipher

    def encrypt(self, text: str | None) -> str | None:
        cipher = self.cipher
        if cipher is None or text is None:
            return text
        if not self._marker_checked:  # the first encrypted write creates (or re-checks) the key check
            with self.lock:
                if not self._marker_checked:
                    ensure_marker(self.uri, cipher, self.storage_options)
                    self._marker_checked = True
        return cipher.encrypt(text)

    def decrypt(self, value: str | None) -> str | None:
        cipher = self.cipher
        return value if cipher is None or value is None else cipher.decrypt(value)

    def content_fingerprint(self, content: str) -> str:
        """The stored ``fingerprint`` of a text: keyed (HMAC) in an encrypted store, so it confirms no guess."""
        cipher = self.cipher
        return fingerprint(content) if cipher is None else cipher.fingerprint(content)

    # -- datasets and tables -------------------------------------------------------------------------
    @property
    def db(self) -> Any:
        """The lancedb connection, opened on first write or search (importing lancedb costs ~3 s here)."""
        if self._db is None:
            import lancedb

            # Check for other processes' commits on every read: the UI and the CLI share one store.
            self._db = lancedb.connect(self.uri, read_consistency_interval=timedelta(0),
                                       storage_options=self.storage_options)
        return self._db

    def dataset_path(self, name: str) -> str:
        return f"{self.uri.rstrip('/')}/{name}.lance"

    def table_names(self) -> list[str]:
        return sorted(self.db.table_names())

    def dataset(self, name: str, version: int | None = None) -> Any | None:
        """Table ``name`` as a pylance dataset, at ``version`` or the latest (None when it does not exist).
        Inside a search (``pinned_version``) the records table without a version, or at the pinned one, is
        the dataset the search's pin holds (``read_dataset``): never a newer version another thread's
        search opened meanwhile. A read the object store refuses is ``StoreUnavailableError``, never
        "no table"."""
        self.cipher  # noqa: B018 (refuses a store whose key is missing or wrong)
        if name == RECORDS:
            holder = getattr(self._pin, "holder", None)
            if holder is not None and (version is None or version == holder.version):
                read = self.read_dataset()
                return None if read is None else read.dataset
            if version is not None:
                cached = self._pinned_dataset
                if cached is not None and cached.version == version:
                    # the dataset a search opened at this version, its index caches warm (a fresh open costs a
                    # manifest read and cold index lookups: 15 against 8 ms at 1M records)
                    return cached
                ds = self.latest(name, version)
                if ds is not None:  # a read at an older version (a scope's own) is asked several times a search
                    self._pinned_dataset = ds
                return ds
        return self.latest(name, version)

    def latest(self, name: str, version: int | None = None) -> Any | None:
        """Table ``name`` opened afresh, at ``version`` or the latest, whatever a search on this thread pinned
        (the write door, ``LanceTable``, and a search learning its version read this)."""
        import lance

        self.cipher  # noqa: B018 (refuses a store whose key is missing or wrong)
        path = self.dataset_path(name)
        local = "://" not in path
        if local and not Path(path).exists():
            return None
        try:
            return lance.dataset(path, version=version, storage_options=self.storage_options)
        except (FileNotFoundError, ValueError) as exc:
            if local or _means_missing(exc):
                return None
            raise StoreUnavailableError(f"{path}: cannot be read: {exc}") from None
        except OSError as exc:
            if _means_missing(exc):
                return None
            raise StoreUnavailableError(f"{path}: cannot be read: {exc}") from None

    def read(self, name: str, where: str | None = None, columns: list[str] | None = None,
             limit: int | None = None, version: int | None = None) -> list[dict[str, Any]]:
        """Rows of table ``name`` matching ``where`` (built by ``store.filters``, never by callers)."""
        ds = self.dataset(name, version)
        if ds is None:
            return []
        return ds.to_table(columns=columns, filter=where, limit=limit).to_pylist()

    def read_arrow(self, name: str, where: str | None = None, columns: list[str] | None = None) -> pa.Table | None:
        ds = self.dataset(name)
        return None if ds is None else ds.to_table(columns=columns, filter=where)

    def table(self, name: str, create_schema: pa.Schema | None = None) -> LanceTable | None:
        """Table ``name``'s write door (``LanceTable``), creating the table with ``create_schema`` when it
        does not exist (None when it does not and no schema is given)."""
        self.cipher  # noqa: B018 (refuses a store whose key is missing or wrong)
        with self.lock:
            if name in self._tables:
                return self._tables[name]
            if self.dataset(name) is None:
                if create_schema is None:
                    return None
                with_commit_retry(lambda: self._create(name, create_schema))
            tbl = LanceTable(self, name)
            self._tables[name] = tbl
            return tbl

    def _create(self, name: str, schema: pa.Schema) -> None:
        """An empty dataset, as ``lancedb``'s ``create_table(..., exist_ok=True)`` writes one (same data
        storage version, v2 manifest paths, no stable row ids); another process creating it first wins."""
        import lance

        try:
            lance.write_dataset(schema.empty_table(), self.dataset_path(name), mode="create",
                                storage_options=self.storage_options)
        except (OSError, ValueError) as exc:
            if self.dataset(name) is None or "exist" not in str(exc).lower():
                raise

    def lancedb_table(self, name: str) -> Any:
        """Table ``name`` through ``lancedb`` (its query builder), imported and opened on first use."""
        return self.db.open_table(name)

    def upsert_rows(self, name: str, schema: pa.Schema, rows: list[dict[str, Any]], key: str = "id") -> None:
        """Insert or replace rows of a small bookkeeping table (runs, stats, cache, hook deliveries) by
        ``key``, in one commit, creating the table on first use."""
        if not rows:
            return
        tbl = self.table(name, schema)
        data = pa.Table.from_pylist(rows, schema=schema)
        self.commit(lambda: tbl.merge_insert(key).when_matched_update_all()
                    .when_not_matched_insert_all().execute(data))

    def delete(self, name: str, where: str) -> None:
        tbl = self.table(name)
        if tbl is not None:
            self.commit(lambda: tbl.delete(where))

    def commit(self, write: Callable[[], Any]) -> Any:
        """One write, retried on Lance's commit conflicts; the search that made it reads the new version next."""
        with self.lock:
            self.unpin()
            return with_commit_retry(write)

    # -- one table version per search ------------------------------------------------------------------
    def records_version(self, tbl: Any) -> int:
        """The records table's version: asked afresh (a manifest check, ~1-10 ms) except inside
        ``pinned_version()``, where the first answer is reused by every later ask of that search."""
        if getattr(self._pin, "holder", None) is None:
            return tbl.version
        read = self.read_dataset()
        return tbl.version if read is None else read.version

    def read_version(self) -> int | None:
        """The records table's version a search reads (None: no table): ``read_dataset``'s."""
        read = self.read_dataset()
        return None if read is None else read.version

    def read_dataset(self) -> PinnedDataset | None:
        """The records table a search reads (None: no table), asked through pylance, not lancedb (whose
        import took 3-4 s quiet, over 20 s under load here). Inside ``pinned_version()`` the one its pin
        holds, opened at the first ask (this sets it); else the latest, opened now. Whatever a search keys
        by a version reads that version's rows from this object and saves its state (store/pinned.py)."""
        holder = getattr(self._pin, "holder", None)
        if holder is not None:
            read = holder.read
            if read is not None:
                return read
        ds = self.latest(RECORDS)
        if ds is None:
            return None
        cached = self._pinned_dataset
        # One opened by an earlier search at this same version is read instead, its file readers and caches
        # warm: a take of 10 hits' rows from a fresh open cost ~4 ms more at 1M records (docs/benchmarks.md).
        if cached is not None and cached.version == ds.version:
            ds = cached
        else:
            self._pinned_dataset = ds
        if holder is None:
            return PinnedDataset.of(ds)
        with holder.lock:
            if holder.read is None:
                holder.read = PinnedDataset.of(ds)
            return holder.read

    @contextmanager
    def pinned_version(self, holder: VersionPin | None = None) -> Iterator[VersionPin]:
        """One search asks for the table version in several places (dense matrix, leaf bookkeeping,
        lexicon); inside this block, on this thread, they share one answer. ``holder``: the pin of the
        search this thread works for (its worker threads pass the caller's, see ``current_pin``). A
        commit made meanwhile is seen by the next search, as it would be had it landed a moment later;
        a write through this store clears the pin of the search that made it."""
        outer = getattr(self._pin, "holder", None)
        self._pin.holder = holder or outer or VersionPin()
        try:
            yield self._pin.holder
        finally:
            self._pin.holder = outer

    def current_pin(self) -> VersionPin | None:
        return getattr(self._pin, "holder", None)

    def unpin(self) -> None:
        holder = getattr(self._pin, "holder", None)
        if holder is not None:
            with holder.lock:
                holder.read = None


@dataclass(frozen=True)
class FtsIndex:
    """A full-text (inverted) index's tokenizer: LanceDB's ``lancedb.index.FTS`` fields and defaults, so an
    index built here is the one ``tbl.create_index(column, config=FTS(...))`` built (same parameters in
    the index's details, same search results)."""

    with_position: bool = False
    base_tokenizer: str = "simple"
    language: str = "English"
    max_token_length: int | None = 40
    lower_case: bool = True
    stem: bool = True
    remove_stop_words: bool = True
    ascii_folding: bool = True
    ngram_min_length: int = 3
    ngram_max_length: int = 3
    prefix_only: bool = False
    custom_stop_words: list[str] | None = field(default=None, hash=False)

    def build(self, ds: Any, column: str, replace: bool) -> None:
        params = asdict(self)
        params["min_ngram_length"] = params.pop("ngram_min_length")
        params["max_ngram_length"] = params.pop("ngram_max_length")
        if params["custom_stop_words"] is None:
            del params["custom_stop_words"]
        ds.create_scalar_index(column, "INVERTED", name=f"{column}_idx", replace=replace, **params)


@dataclass(frozen=True)
class BitmapIndex:
    """A bitmap index (``lancedb.index.Bitmap``): few distinct values per column."""

    def build(self, ds: Any, column: str, replace: bool) -> None:
        ds.create_scalar_index(column, "BITMAP", name=f"{column}_idx", replace=replace)


@dataclass(frozen=True)
class IndexInfo:
    """One index of a table, in the figures LanceDB's ``list_indices`` gives (``index_details``: an FTS
    index's tokenizer parameters, {} for others)."""

    name: str
    index_type: str
    columns: list[str]
    num_indexed_rows: int
    size_bytes: int
    index_details: dict[str, Any]


@dataclass(frozen=True)
class IndexStats:
    num_indexed_rows: int
    num_unindexed_rows: int


class LanceTable:
    """One table of the store, written through pylance: what the store's write path and index maintenance
    need, opening the latest version for every operation (another process's commit is seen at once, as
    lancedb's ``read_consistency_interval=0`` did). Anything else (``search``, ``add``, ``stats``...) is
    LanceDB's table's, opened on first use (``__getattr__``): the few callers of LanceDB's query builder
    pay its import, writers do not."""

    def __init__(self, tables: LanceTables, name: str) -> None:
        self._tables = tables
        self.name = name
        self._lancedb: Any = None  # LanceDB's handle, opened on first use (it reads the latest version itself)

    def dataset(self) -> Any:
        ds = self._tables.latest(self.name)  # the write door: never a search's pinned version
        if ds is None:
            raise StoreUnavailableError(f"{self._tables.dataset_path(self.name)}: the table is gone")
        return ds

    @property
    def schema(self) -> pa.Schema:
        return self.dataset().schema

    @property
    def version(self) -> int:
        return self.dataset().version

    def count_rows(self, filter: str | None = None) -> int:  # noqa: A002 (LanceDB's name)
        return self.dataset().count_rows(filter)

    def merge_insert(self, on: str | list[str]) -> MergeInsert:
        return MergeInsert(self, on)

    def delete(self, where: str) -> None:
        self.dataset().delete(where)

    # -- indexes -------------------------------------------------------------------------------------
    def list_indices(self) -> list[IndexInfo]:
        ds = self.dataset()
        out = []
        for d in ds.describe_indices():
            kind = d.type_url.rsplit(".", 1)[-1].removesuffix("IndexDetails")
            details: dict[str, Any] = {}
            if kind == "Inverted":
                kind = "FTS"
                details = dict((ds.stats.index_stats(d.name).get("indices") or [{}])[0].get("params") or {})
            out.append(IndexInfo(name=d.name, index_type=kind, columns=list(d.field_names),
                                 num_indexed_rows=d.num_rows_indexed, size_bytes=d.total_size_bytes,
                                 index_details=details))
        return out

    def index_stats(self, name: str) -> IndexStats | None:
        ds = self.dataset()
        if not any(d.name == name for d in ds.describe_indices()):
            return None
        stats = ds.stats.index_stats(name)
        return IndexStats(num_indexed_rows=int(stats["num_indexed_rows"]),
                          num_unindexed_rows=int(stats["num_unindexed_rows"]))

    def create_scalar_index(self, column: str, index_type: str = "BTREE", replace: bool = True) -> None:
        self.dataset().create_scalar_index(column, index_type, name=f"{column}_idx", replace=replace)

    def create_index(self, column: str, config: FtsIndex | BitmapIndex, replace: bool = True) -> None:
        config.build(self.dataset(), column, replace)

    def drop_index(self, name: str) -> None:
        self.dataset().drop_index(name)

    def optimize(self) -> None:
        """LanceDB's ``optimize()``: compact the fragments, drop versions older than 7 days (keeping
        files a commit in flight may still use), fold new rows into the indexes."""
        ds = self.dataset()
        ds.optimize.compact_files()
        ds = self.dataset()
        ds.cleanup_old_versions(older_than=timedelta(days=7), delete_unverified=False)
        self.dataset().optimize.optimize_indices()

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        if self._lancedb is None:
            self._lancedb = self._tables.lancedb_table(self.name)
        return getattr(self._lancedb, attr)


class MergeInsert:
    """LanceDB's ``merge_insert`` builder over pylance's: the same clauses and conditions (``target.``,
    ``source.``), one commit per ``execute``, against the table's latest version at that moment."""

    def __init__(self, table: LanceTable, on: str | list[str]) -> None:
        self._table = table
        self._on = on
        self._clauses: list[Callable[[Any], Any]] = []

    def when_matched_update_all(self, where: str | None = None) -> MergeInsert:
        self._clauses.append(lambda b: b.when_matched_update_all(where))
        return self

    def when_not_matched_insert_all(self) -> MergeInsert:
        self._clauses.append(lambda b: b.when_not_matched_insert_all())
        return self

    def when_not_matched_by_source_delete(self, condition: str | None = None) -> MergeInsert:
        self._clauses.append(lambda b: b.when_not_matched_by_source_delete(condition))
        return self

    def execute(self, data: pa.Table, on_bad_vectors: str = "error") -> dict[str, Any]:
        """``on_bad_vectors`` is accepted for LanceDB's signature: rows here are built against the table's
        schema, a vector is a full one or null (LanceDB's "null" changes nothing else)."""
        builder = self._table.dataset().merge_insert(self._on)
        for clause in self._clauses:
            builder = clause(builder)
        return builder.execute(data)


def _means_missing(exc: BaseException) -> bool:
    """An object store's answer that the dataset is not there (as opposed to: cannot be reached)."""
    text = str(exc).lower()
    return any(s in text for s in ("not found", "no such file", "does not exist", "notfound", "was not found"))
