"""Change-data-capture state of a project's sources, kept in DuckDB: what each source held when it
was last synced, so a sync (or a sensor tick) can say what is new, changed or deleted.

Per source: the origin's change token (equal tokens: nothing changed, nothing else is read), the
``updated_at`` watermark of a watermarked table, and per item its key, content hash and period. A
watermarked table is read incrementally (rows at or after the watermark) and its deletes are found
by comparing the current primary keys with the stored ones; every other origin (files, folders,
tables without a timestamp column, streams, API landings) is compared item by item on its hashes
(``../shared/seeds/synaptic-streaming-invariance.md``: a watermark or a per-row content hash,
deletes by a join against the stored primary keys).

The class takes a DuckDB connection and knows nothing of Dagster: sensors hand it one from
dagster-duckdb's ``DuckDBResource``, the CLI one from ``open_cdc_state``.

DuckDB stays the one store of this state. Beside it, ``cdc.tokens.json`` is a read-only copy of the
stored tokens alone (``TokenSnapshot``), so that a no-change ``synthex run`` can see its sources unchanged
without importing DuckDB (about 0.2 s of its 1 s). It can never disagree with the database: every write of
a token (``CdcState.commit`` / ``forget``) first removes it, and it is written only from the database's
own rows; both happen under one ``flock`` (``cdc.tokens.lock``), so no reader of the old state can write
it after a writer removed it. Absent, unreadable, or beside another ``cdc.duckdb`` file (its inode):
the caller reads DuckDB.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synthex.core.atomic_file import write_file_atomic
from synthex.core.errors import SynthexError
from synthex.core.importers import SourceItem
from synthex.core.periods import month_of, now_iso
from synthex.core.sources import SourceOrigin
from synthex.core.sources.quarantine import Quarantine

if TYPE_CHECKING:  # imported where a connection is made: a no-change run never imports DuckDB
    import duckdb

CDC_FILE = "cdc.duckdb"
TOKENS_FILE = "cdc.tokens.json"  # the stored tokens alone (TokenSnapshot), removed before any token write
TOKENS_LOCK = "cdc.tokens.lock"
LOCK_WAIT_S = 10.0  # another process (a sensor tick, a sync) holds the DuckDB file: wait this long

SCHEMA = """
CREATE TABLE IF NOT EXISTS cdc_sources (source VARCHAR, origin VARCHAR, token VARCHAR, watermark VARCHAR,
                                        items BIGINT, synced_at VARCHAR);
CREATE TABLE IF NOT EXISTS cdc_items (source VARCHAR, origin VARCHAR, key VARCHAR, hash VARCHAR, period VARCHAR);
"""


def item_hash(item: SourceItem) -> str:
    """What a change of an item is: its text or its date (the two things its record is made of)."""
    return hashlib.sha256(f"{item.created_at}\n{item.content}".encode()).hexdigest()[:32]


@dataclass
class SourceChanges:
    """What one source gained, changed and lost since its last sync, and the periods that touches."""

    source: str
    origin: str
    token: str
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    periods: list[str] = field(default_factory=list)
    watermark: str | None = None
    items: int = 0
    token_unchanged: bool = False
    pulled: int = 0  # API items fetched into the landing stream by this sync
    # A stream's lines set aside (malformed, undatable: synthex.core.sources.quarantine), whether whole
    # lines wait beyond this read's batch (Limits.stream_batch_lines), and how far it was read.
    quarantine: Quarantine | None = None
    waiting: bool = False
    position: Any = field(default=None, repr=False)
    empty: str | None = None  # why the source yields no item although it holds data (SourceOrigin.why_empty)
    _upserts: list[tuple[str, str, str]] = field(default_factory=list, repr=False)

    @property
    def any(self) -> bool:
        return bool(self.new or self.changed or self.deleted)

    def summary(self) -> str:
        return self._counts() + "".join(f"; {note}" for note in self.notes())

    def _counts(self) -> str:
        if self.token_unchanged:
            return f"{self.source}: unchanged"
        where = f" (periods {', '.join(self.periods[:6])}{' ...' if len(self.periods) > 6 else ''})" \
            if self.periods else ""
        pulled = f", {self.pulled} fetched" if self.pulled else ""
        return (f"{self.source}: {len(self.new)} new, {len(self.changed)} changed, {len(self.deleted)} deleted"
                f"{pulled}{where}")

    def notes(self) -> list[str]:
        """What the counts do not say: why a source holding data yields nothing, lines set aside, lines left
        for the next sync."""
        out = [self.empty] if self.empty else []
        out += [self.quarantine.summary()] if self.quarantine else []
        if self.waiting:
            out.append("more lines wait for the next sync (at most Limits.stream_batch_lines per sync)")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "origin": self.origin, "new": len(self.new), "changed": len(self.changed),
                "deleted": len(self.deleted), "periods": self.periods, "items": self.items,
                "unchanged": self.token_unchanged, "pulled": self.pulled,
                "quarantined": self.quarantine.to_dict() if self.quarantine else None, "waiting": self.waiting,
                "empty": self.empty}


@dataclass(frozen=True)
class SourceState:
    """One source's committed state (what a sensor's readable cursor reports)."""

    source: str
    origin: str
    items: int
    watermark: str | None
    synced_at: str | None


@contextmanager
def _tokens_lock(data_dir: Path) -> Iterator[None]:
    """Held while the token snapshot is removed and the tokens written, or read and the snapshot written.
    An ``flock`` on a file of its own: it excludes other processes and other connections of this one."""
    fd = os.open(data_dir / TOKENS_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


class TokenSnapshot:
    """The tokens stored in ``cdc.duckdb`` when nothing has written one since (see the module's docstring).
    ``detect`` answers like ``CdcState.detect`` for a source whose token is unchanged; any other answer
    (``token_unchanged`` false) means: ask ``CdcState``."""

    def __init__(self, tokens: dict[tuple[str, str], str]) -> None:
        self.tokens = tokens

    @classmethod
    def load(cls, data_dir: Path) -> TokenSnapshot | None:
        """The snapshot beside ``data_dir``'s CDC file, or None (none, unreadable, or of another file)."""
        try:
            doc = json.loads((data_dir / TOKENS_FILE).read_text(encoding="utf-8"))
            inode, rows = doc["inode"], doc["tokens"]
            tokens = {(str(source), str(origin)): str(token) for source, origin, token in rows}
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if inode is None or inode != _inode(data_dir / CDC_FILE):  # the file was replaced or removed
            return None
        return cls(tokens)

    def detect(self, source: str, origin: SourceOrigin,
               hidden: Callable[[str], bool] | None = None) -> SourceChanges:
        where = origin.describe()
        token = origin.token()
        return SourceChanges(source, where, token, token_unchanged=self.tokens.get((source, where)) == token)


class CdcState:
    def __init__(self, connection: duckdb.DuckDBPyConnection) -> None:
        self.conn = connection
        self.conn.execute(SCHEMA)
        row = connection.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
                                 ).fetchone()
        # The directory of the token snapshot (None for an in-memory database: no snapshot).
        self.data_dir = Path(row[0]).parent if row and row[0] else None

    @contextmanager
    def _writing_tokens(self) -> Iterator[None]:
        """Around a write of stored tokens: the snapshot goes first, under the lock its writer takes."""
        if self.data_dir is None:
            yield
            return
        with _tokens_lock(self.data_dir):
            (self.data_dir / TOKENS_FILE).unlink(missing_ok=True)
            yield

    def save_token_snapshot(self) -> None:
        """Write ``cdc.tokens.json`` from the stored tokens (atomically; under the lock, see the module)."""
        if self.data_dir is None:
            return
        with _tokens_lock(self.data_dir):
            rows = self.conn.execute("SELECT source, origin, token FROM cdc_sources ORDER BY source, origin").fetchall()
            doc = {"inode": _inode(self.data_dir / CDC_FILE), "tokens": [list(r) for r in rows]}
            write_file_atomic(self.data_dir / TOKENS_FILE, json.dumps(doc))

    def _source_row(self, source: str, origin: str) -> tuple[str, str | None] | None:
        row = self.conn.execute("SELECT token, watermark FROM cdc_sources WHERE source = ? AND origin = ?",
                                [source, origin]).fetchone()
        return (row[0], row[1]) if row else None

    def _stored(self, source: str, origin: str) -> dict[str, tuple[str, str]]:
        rows = self.conn.execute("SELECT key, hash, period FROM cdc_items WHERE source = ? AND origin = ?",
                                 [source, origin]).fetchall()
        return {k: (h, p) for k, h, p in rows}

    def detect(self, source: str, origin: SourceOrigin,
               hidden: Callable[[str], bool] | None = None) -> SourceChanges:
        """Compare the origin with the stored state (nothing is written: ``commit`` does that). Items whose
        key ``hidden`` names (purged: ``synthex purge``) are not looked at, so their hash is never stored."""
        where = origin.describe()
        token = origin.token()
        before = self._source_row(source, where)
        if before is not None and before[0] == token:
            return SourceChanges(source, where, token, token_unchanged=True)
        stored = self._stored(source, where)
        watermark = None
        if getattr(origin, "watermarked", False):
            # A watermarked table: only rows updated since the last sync are read and compared;
            # deletes are the stored keys missing from the table's current primary keys.
            candidates, keys, watermark = origin.changed_since(before[1] if before else None)  # type: ignore[attr-defined]
            current = set(keys)
        else:
            candidates = origin.items()
            current = {i.key for i in candidates}
        if hidden is not None:
            candidates = [i for i in candidates if not hidden(i.key)]
            current = {k for k in current if not hidden(k)}
        changes = SourceChanges(source, where, token, watermark=watermark, items=len(current))
        periods: set[str] = set()
        for item in candidates:
            digest, period = item_hash(item), month_of(item.created_at)
            old = stored.get(item.key)
            if old is not None and old[0] == digest:
                continue
            (changes.new if old is None else changes.changed).append(item.key)
            periods.add(period)
            if old is not None:
                periods.add(old[1])
            changes._upserts.append((item.key, digest, period))
        changes.deleted = sorted(set(stored) - current)
        periods.update(stored[k][1] for k in changes.deleted)
        changes.periods = sorted(periods)
        return changes

    def commit(self, changes: SourceChanges) -> None:
        """Make ``changes`` the stored state of its source, in one transaction."""
        if changes.token_unchanged:
            return
        with self._writing_tokens():
            self._commit(self.conn, changes)

    @staticmethod
    def _commit(conn: duckdb.DuckDBPyConnection, changes: SourceChanges) -> None:
        import pyarrow as pa

        conn.execute("BEGIN TRANSACTION")
        try:
            gone = changes.deleted + [k for k, _, _ in changes._upserts]
            if gone:
                keys = pa.table({"key": pa.array(gone, pa.string())})  # noqa: F841 - scanned by name below
                conn.execute("DELETE FROM cdc_items WHERE source = ? AND origin = ? AND key IN (SELECT key FROM keys)",
                             [changes.source, changes.origin])
            if changes._upserts:
                rows = pa.table({"key": [k for k, _, _ in changes._upserts],  # noqa: F841
                                 "hash": [h for _, h, _ in changes._upserts],
                                 "period": [p for _, _, p in changes._upserts]})
                conn.execute("INSERT INTO cdc_items SELECT ?, ?, key, hash, period FROM rows",
                             [changes.source, changes.origin])
            conn.execute("DELETE FROM cdc_sources WHERE source = ? AND origin = ?", [changes.source, changes.origin])
            conn.execute("INSERT INTO cdc_sources VALUES (?, ?, ?, ?, ?, ?)",
                         [changes.source, changes.origin, changes.token, changes.watermark, changes.items, now_iso()])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def forget(self, source: str) -> None:
        """Drop a source's state: its next sync compares every item again."""
        with self._writing_tokens():
            self.conn.execute("DELETE FROM cdc_items WHERE source = ?", [source])
            self.conn.execute("DELETE FROM cdc_sources WHERE source = ?", [source])

    def item_keys(self, source: str) -> list[str]:
        """The keys of every item of ``source`` the state holds (a purge picks the ones it forgets)."""
        return [k for (k,) in self.conn.execute("SELECT key FROM cdc_items WHERE source = ?", [source]).fetchall()]

    def forget_items(self, source: str, keys: list[str]) -> int:
        """Drop the stored state (key, content hash) of some items of ``source``; returns rows removed."""
        if not keys:
            return 0
        import pyarrow as pa

        gone = pa.table({"key": pa.array(keys, pa.string())})  # noqa: F841 - scanned by name below
        before = self.conn.execute("SELECT count(*) FROM cdc_items WHERE source = ?", [source]).fetchone()[0]
        self.conn.execute("DELETE FROM cdc_items WHERE source = ? AND key IN (SELECT key FROM gone)", [source])
        return before - self.conn.execute("SELECT count(*) FROM cdc_items WHERE source = ?", [source]).fetchone()[0]

    def source_state(self, source: str, origin: str) -> SourceState | None:
        row = self.conn.execute("SELECT items, watermark, synced_at FROM cdc_sources WHERE source = ? AND origin = ?",
                                [source, origin]).fetchone()
        return SourceState(source, origin, int(row[0] or 0), row[1], row[2]) if row else None

    def sources(self) -> list[dict[str, Any]]:
        rows = self.conn.execute("SELECT source, origin, token, watermark, items, synced_at FROM cdc_sources "
                                 "ORDER BY source").fetchall()
        return [dict(zip(("source", "origin", "token", "watermark", "items", "synced_at"), r, strict=True))
                for r in rows]


def connect_with_wait(path: Path, wait_s: float = LOCK_WAIT_S) -> duckdb.DuckDBPyConnection:
    """A read-write DuckDB connection; a DuckDB file has one writing process at a time, so while a sensor
    tick or another sync holds it, wait (a tick holds it for milliseconds)."""
    import duckdb

    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    delay = 0.02
    while True:
        try:
            return duckdb.connect(str(path))
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                raise SynthexError(f"{path}: the CDC state is busy or unreadable: {str(exc).splitlines()[0]}") from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


@contextmanager
def open_cdc_state(data_dir: Path) -> Iterator[CdcState]:
    """The project's CDC state (``<data dir>/cdc.duckdb``), connection closed on exit; on a normal exit
    the token snapshot is written from it (``TokenSnapshot``: the next no-change run reads that)."""
    conn = connect_with_wait(data_dir / CDC_FILE)
    try:
        state = CdcState(conn)
        yield state
        state.save_token_snapshot()
    finally:
        conn.close()
