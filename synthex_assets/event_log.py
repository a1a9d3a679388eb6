"""The project's Dagster event log: Dagster's own SQLite storage (same files, same schema, so runs written
before it read back and the UI reads what it writes), keeping one open connection per database file.

Why: Dagster's ``SqliteEventLogStorage`` opens a new SQLite engine and connection for every read and
every write and closes it afterwards. On a WAL database closing the last connection checkpoints the WAL
and fsyncs, so each of a run's ~200 events cost several opens, commits and checkpoints (~5 s of the demo's
20 s run on a quiet 2-core machine, docs/benchmarks.md, issue 24). Here a connection stays open per file
(run shard or index), so an event costs one commit; what each commit guarantees is unchanged (the
database's own journal and synchronous settings).

Configured in the project's ``dagster.yaml`` (synthex_assets/instance.py), so the UI's process uses it too.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy.exc
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, event, inspect, text

from synthex_assets.dagster_internals import (
    LAST_KNOWN_STAMPED_SQLITE_ALEMBIC_REVISION,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    ConfigurableClassData,
    SqlEventLogStorageMetadata,
    SqliteEventLogStorage,
    event_log_alembic_config,
)

OPEN_SHARDS = 4  # run shards kept open besides the index: the run being written and a few the UI reads
INIT_RETRIES = 10  # a file another process is setting up at the same moment: retried, as Dagster does
# What SQLite says when another process set the file up first (Dagster's ``_initdb`` retries on the same).
CONCURRENT_INIT = re.compile(r"table [A-Za-z_]* already exists|database is locked|"
                             r"UNIQUE constraint failed: alembic_version\.version_num")


class SqliteEventLog(SqliteEventLogStorage):
    """``SqliteEventLogStorage`` with one long-lived connection per database file (the index, and the
    ``OPEN_SHARDS`` run shards used last)."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        self._engines: OrderedDict[str, Any] = OrderedDict()  # shard -> its engine (one pooled connection)
        self._tables_present: set[str] = set()  # index tables seen (a schema migration only adds tables)
        self._tables_present_columns: set[tuple[str, str]] = set()  # (table, column) seen, likewise
        # Inside ``dynamic_partitions_held``: partitions definition name -> its keys as read (else None).
        self._held_partitions: dict[str, list[str]] | None = None
        self._alembic_scripts: ScriptDirectory | None = None  # read when a file is first stamped
        self.alembic_script_loads = 0  # how often (once per storage: counted by tests/test_demo_run_event_log.py)
        self.files_set_up = 0  # database files this storage created (the index, each run's shard)
        super().__init__(base_dir, inst_data)

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None, config_value: dict) -> SqliteEventLog:
        return cls(inst_data=inst_data, **config_value)  # Dagster's own returns its base class

    def _engine(self, shard: str) -> Any:
        """The open engine of ``shard`` (the caller holds ``_db_lock``, as Dagster's ``_connect`` does)."""
        engine = self._engines.get(shard)
        if engine is not None:
            self._engines.move_to_end(shard)
            return engine
        engine = create_engine(
            self.conn_string_for_shard(shard),
            # One connection, reused (the storage serializes its users with its own lock); overflow only
            # for Dagster's schema check on a new file, which inspects while a connection is out.
            pool_size=1, max_overflow=4, pool_pre_ping=False,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False},
        )
        event.listen(engine, "connect", _relaxed_sync)
        self._engines[shard] = engine
        runs_open = [s for s in self._engines if s != "index"]
        for stale in runs_open[:-OPEN_SHARDS]:
            self._engines.pop(stale).dispose()
        return engine

    @contextlib.contextmanager
    def _connect(self, shard: str) -> Iterator[Any]:
        with self._db_lock:
            engine = self._engine(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def _initdb(self, engine: Any, for_index_shard: bool = False) -> None:
        """Dagster's ``_initdb`` (tables, WAL, alembic stamp on a file without a revision; nothing on one
        with a revision: Dagster does not migrate there either), reading the alembic scripts once per storage.

        Why: Dagster's checks each file's revision against the head of its ~90 alembic scripts, loading
        every script anew for each check and again for each stamp: three loads for each run's new shard and
        the index (~0.1-0.2 s each on a 2-core machine). A file's own revision is one query; the scripts
        are needed only to stamp a new file, and then read once."""
        retries = INIT_RETRIES
        while True:
            try:
                with engine.connect() as connection:
                    if MigrationContext.configure(connection).get_current_revision() is None:
                        self._set_up(engine, connection, for_index_shard)
                return
            except (sqlalchemy.exc.DatabaseError, sqlite3.DatabaseError, sqlite3.OperationalError) as exc:
                if retries == 0 or not CONCURRENT_INIT.search(str(exc)):
                    raise
                time.sleep(0.2)
                retries -= 1

    def _set_up(self, engine: Any, connection: Any, for_index_shard: bool) -> None:
        """A file without an alembic revision: its tables, WAL and the revision, as Dagster's ``_initdb``."""
        # An index made before Dagster stamped SQLite files (tables, no revision) gets that last known revision.
        unstamped_index = for_index_shard and "event_logs" in inspect(engine).get_table_names()
        SqlEventLogStorageMetadata.create_all(engine)
        connection.execute(text("PRAGMA journal_mode=WAL;"))
        MigrationContext.configure(connection).stamp(
            self._scripts(), LAST_KNOWN_STAMPED_SQLITE_ALEMBIC_REVISION if unstamped_index else "head")
        connection.commit()
        self.files_set_up += 1

    def _scripts(self) -> ScriptDirectory:
        if self._alembic_scripts is None:
            self._alembic_scripts = ScriptDirectory.from_config(event_log_alembic_config())
            self.alembic_script_loads += 1
        return self._alembic_scripts

    def has_table(self, table_name: str) -> bool:
        """Dagster asks before every partition lookup and asset event (~550 times in the demo run), each time
        through a new engine; a table once there stays there (until ``wipe``)."""
        if table_name in self._tables_present:
            return True
        present = super().has_table(table_name)
        if present:
            self._tables_present.add(table_name)
        return present

    def _has_asset_key_col_on_connection(self, conn: Any, column_name: str) -> bool:
        """Dagster reflects the asset-key table's columns on every asset event; a column once there stays."""
        if ("asset_keys", column_name) in self._tables_present_columns:
            return True
        present = super()._has_asset_key_col_on_connection(conn, column_name)
        if present:
            self._tables_present_columns.add(("asset_keys", column_name))
        return present

    # -- dynamic partitions, read once per run ------------------------------------------------------------
    @contextlib.contextmanager
    def dynamic_partitions_held(self) -> Iterator[None]:
        """Inside: each dynamic partitions definition's keys are read once and reads answered from that.

        Why: while a run executes, Dagster asks whether a partition exists before every per-partition
        metadata entry and materialization (``has_dynamic_partition``: 376 queries in the demo run, each
        through SQLAlchemy). A run registers its partitions before it starts (``synthex_assets.partitions``),
        so its answers do not change; a partition this process adds or deletes drops what was read. Nested
        holds share the outer one."""
        if self._held_partitions is not None:
            yield
            return
        self._held_partitions = {}
        try:
            yield
        finally:
            self._held_partitions = None

    def get_dynamic_partitions(self, partitions_def_name: str) -> list[str]:
        held = self._held_partitions
        if held is None:
            return list(super().get_dynamic_partitions(partitions_def_name))
        keys = held.get(partitions_def_name)
        if keys is None:
            keys = held[partitions_def_name] = list(super().get_dynamic_partitions(partitions_def_name))
        return list(keys)

    def has_dynamic_partition(self, partitions_def_name: str, partition_key: str) -> bool:
        if self._held_partitions is None:
            return super().has_dynamic_partition(partitions_def_name, partition_key)
        return partition_key in self.get_dynamic_partitions(partitions_def_name)

    def add_dynamic_partitions(self, partitions_def_name: str, partition_keys: Sequence[str]) -> None:
        if self._held_partitions is not None:
            self._held_partitions.pop(partitions_def_name, None)
        super().add_dynamic_partitions(partitions_def_name, partition_keys)

    def delete_dynamic_partition(self, partitions_def_name: str, partition_key: str) -> None:
        if self._held_partitions is not None:
            self._held_partitions.pop(partitions_def_name, None)
        super().delete_dynamic_partition(partitions_def_name, partition_key)

    def close_connections(self) -> None:
        """Close every open database file (before files are removed, and when the instance is disposed)."""
        with self._db_lock:
            while self._engines:
                self._engines.popitem()[1].dispose()

    def wipe(self) -> None:
        self.close_connections()
        self._tables_present.clear()
        self._tables_present_columns.clear()
        super().wipe()

    def dispose(self) -> None:
        self.close_connections()
        super().dispose()


def _relaxed_sync(dbapi_connection: Any, _record: Any) -> None:
    """WAL with synchronous=NORMAL: a commit survives the process being killed (the WAL is written before
    the commit returns) and the file is never corrupted; only an OS crash or power loss can drop the last
    few events of a run (the records themselves are in LanceDB, not here). FULL fsyncs every commit:
    ~5 commits per event."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


@contextlib.contextmanager
def dynamic_partitions_held(instance: Any) -> Iterator[None]:
    """``SqliteEventLog.dynamic_partitions_held`` on ``instance``'s event log (a run executing in this
    process); nothing on a storage of the user's own."""
    storage = instance.event_log_storage
    if isinstance(storage, SqliteEventLog):
        with storage.dynamic_partitions_held():
            yield
    else:
        yield
