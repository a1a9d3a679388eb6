"""The project's Dagster run and schedule storages: Dagster's own SQLite ones (same files, same schema), opened
without reading the alembic scripts when the file is already set up.

Why: Dagster's ``SqliteRunStorage`` and ``SqliteScheduleStorage`` check their file's alembic revision against
the head of its ~90 migration scripts on every open, reading each script anew (and again to stamp a new
file): every process that opens the instance paid ~0.1-0.2 s per storage on a 2-core machine (issue 24). A
file's own revision is one query; Dagster does not migrate on open (``dagster instance migrate`` does), so
the head is needed only to stamp a new file. A new file is set up as Dagster sets it up.

Configured by ``synthex_assets.instance.storage_overrides`` beside the event log (synthex_assets/event_log.py);
the UI's process reads the same files with Dagster's stock classes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.pool import NullPool

from synthex_assets.dagster_internals import (
    LAST_KNOWN_STAMPED_SQLITE_ALEMBIC_REVISION,
    ConfigurableClassData,
    InstanceInfo,
    RunStorageSqlMetadata,
    ScheduleStorageSqlMetadata,
    SqliteRunStorage,
    SqliteScheduleStorage,
    create_db_conn_string,
    event_log_alembic_config,
)


def alembic_scripts() -> ScriptDirectory:
    """Dagster's alembic scripts (one directory for its run, event and schedule storages), read anew."""
    return ScriptDirectory.from_config(event_log_alembic_config())


def open_or_set_up(engine: Any, metadata: Any, marker_table: str) -> tuple[bool, list[str]]:
    """What Dagster's ``from_local`` does to a run or schedule storage's file: on a file without an alembic
    revision, its tables, WAL and the revision (the last one Dagster knew before it stamped SQLite files when
    ``marker_table`` is there already, else the head). Returns whether the file was new (stamped at the head,
    Dagster then migrates and optimizes its data) and the file's tables."""
    with engine.connect() as connection:
        tables = inspect(engine).get_table_names()
        if MigrationContext.configure(connection).get_current_revision() is not None:
            return False, tables
        new = marker_table not in tables
        metadata.create_all(engine)
        connection.execute(text("PRAGMA journal_mode=WAL;"))
        MigrationContext.configure(connection).stamp(
            alembic_scripts(), "head" if new else LAST_KNOWN_STAMPED_SQLITE_ALEMBIC_REVISION)
        connection.commit()
        return new, inspect(engine).get_table_names()


def _opened(cls: Any, base_dir: str, inst_data: ConfigurableClassData | None, name: str, metadata: Any,
            marker_table: str, set_up: Callable[[Any, list[str]], None] | None = None) -> Any:
    """A run or schedule storage of class ``cls`` on ``<base_dir>/<name>.db``, set up as ``from_local`` does
    (``set_up``: what else the storage's ``from_local`` creates beside its tables), migrated when new."""
    os.makedirs(base_dir, exist_ok=True)
    conn_string = create_db_conn_string(base_dir, name)
    engine = create_engine(conn_string, poolclass=NullPool)
    new, tables = open_or_set_up(engine, metadata, marker_table)
    if set_up is not None:
        set_up(engine, tables)
    engine.dispose()
    storage = cls(conn_string, inst_data)
    if new:
        storage.migrate()
        storage.optimize()
    return storage


def _instance_info(engine: Any, tables: list[str]) -> None:
    if "instance_info" not in tables:
        InstanceInfo.create(engine)


class SqliteRuns(SqliteRunStorage):
    """``SqliteRunStorage`` opened without reading the alembic scripts when its file is set up (module doc)."""

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None, config_value: dict) -> SqliteRuns:
        return cls.from_local(inst_data=inst_data, **config_value)

    @classmethod
    def from_local(cls, base_dir: str, inst_data: ConfigurableClassData | None = None) -> SqliteRuns:
        return _opened(cls, base_dir, inst_data, "runs", RunStorageSqlMetadata, "runs", _instance_info)


class SqliteSchedules(SqliteScheduleStorage):
    """``SqliteScheduleStorage`` opened without reading the alembic scripts when its file is set up."""

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None, config_value: dict) -> SqliteSchedules:
        return cls.from_local(inst_data=inst_data, **config_value)

    @classmethod
    def from_local(cls, base_dir: str, inst_data: ConfigurableClassData | None = None) -> SqliteSchedules:
        return _opened(cls, base_dir, inst_data, "schedules", ScheduleStorageSqlMetadata, "job_ticks")
