"""Issue 24, the demo's full run, second round (session 5): what a run spends is counted, not timed.

- A Dagster event-log file (the index, each run's shard) is set up as Dagster's own ``SqliteEventLogStorage``
  sets it up (same tables and indexes, WAL, the same alembic revision), but the ~90 alembic scripts are
  read once per storage, only when a file must be stamped: checking an existing file's revision is one
  query (Dagster read every script for each check and again for each stamp: 3 reads per run's shard).
- Likewise the run and schedule storages' files (``synthex_assets.sqlite_storage``): opening a set-up file
  reads no script (Dagster read them on every open of the instance).
- Files it makes read back with Dagster's stock class (what the UI's process uses).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from conftest import load, write_project
from dagster import DagsterEventType, DagsterInstance
from sqlalchemy import create_engine

from synthex.core.demo.generate import generate
from synthex_assets.dagster_internals import (
    LAST_KNOWN_STAMPED_SQLITE_ALEMBIC_REVISION,
    InstanceRef,
    SqliteEventLogStorage,
    SqliteRunStorage,
    SqliteScheduleStorage,
)
from synthex_assets.event_log import SqliteEventLog
from synthex_assets.instance import instance_home, open_instance
from synthex_assets.sqlite_storage import SqliteRuns, SqliteSchedules

HEAD = "29b539ebc72a"  # Dagster 1.13.27's alembic head (tests/test_dagster_internals.py pins the release)


def schema(db: Path) -> tuple[set[tuple[str, str, str]], list[tuple[str]], str]:
    """A SQLite file's tables and indexes (type, name, SQL), its alembic revision and journal mode."""
    conn = sqlite3.connect(db)
    try:
        objects = {(t, n, " ".join((s or "").split())) for t, n, s in conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")}
        return objects, conn.execute("SELECT version_num FROM alembic_version").fetchall(), \
            conn.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        conn.close()


def test_files_are_set_up_as_dagster_does_reading_the_scripts_once(tmp_path):
    ours = SqliteEventLog(str(tmp_path / "ours"))
    stock = SqliteEventLogStorage(str(tmp_path / "stock"))
    try:
        assert (ours.files_set_up, ours.alembic_script_loads) == (1, 1)  # the index, made on first open
        for run_id in ("run-a", "run-b", "run-c"):
            with ours.run_connection(run_id):
                pass
        with stock.run_connection("run-a"):
            pass
        # Three new run shards, the scripts not read again.
        assert (ours.files_set_up, ours.alembic_script_loads) == (4, 1)
        for name in ("index", "run-a"):
            mine, dagsters = schema(tmp_path / "ours" / f"{name}.db"), schema(tmp_path / "stock" / f"{name}.db")
            assert mine[0] and mine[1] and mine == dagsters, name
            assert mine[2] == "wal"
    finally:
        ours.dispose()
        stock.dispose()
    # Reopened: existing files are checked by a query, never by reading the scripts.
    again = SqliteEventLog(str(tmp_path / "ours"))
    try:
        with again.run_connection("run-a"):  # one at a time: the storage's lock is not reentrant
            pass
        with again.index_connection():
            pass
        assert (again.files_set_up, again.alembic_script_loads) == (0, 0)
    finally:
        again.dispose()


def test_an_index_with_tables_but_no_revision_is_stamped_as_dagster_stamps_it(tmp_path):
    """Dagster's special case, kept: an index made before Dagster stamped SQLite files gets the last
    revision known then (the index's own first setup), any other such file the head."""
    made = {}
    for name, cls in (("ours", SqliteEventLog), ("stock", SqliteEventLogStorage)):
        storage = cls(str(tmp_path / name))
        storage.dispose()
        conn = sqlite3.connect(tmp_path / name / "index.db")
        conn.execute("DROP TABLE alembic_version")
        conn.commit()
        conn.close()
        engine = create_engine(storage.conn_string_for_shard("index"))
        storage._initdb(engine, for_index_shard=True)  # what a first open calls (Dagster's hook)
        engine.dispose()
        made[name] = schema(tmp_path / name / "index.db")
    assert made["ours"] == made["stock"]
    assert made["ours"][1] == [(LAST_KNOWN_STAMPED_SQLITE_ALEMBIC_REVISION,)]


@pytest.mark.parametrize(("ours", "stock", "name"), [(SqliteRuns, SqliteRunStorage, "runs"),
                                                     (SqliteSchedules, SqliteScheduleStorage, "schedules")])
def test_run_and_schedule_files_are_set_up_as_dagster_does(tmp_path, ours, stock, name):
    for where, cls in (("ours", ours), ("stock", stock)):
        cls.from_local(str(tmp_path / where)).dispose()
    mine, dagsters = schema(tmp_path / "ours" / f"{name}.db"), schema(tmp_path / "stock" / f"{name}.db")
    assert mine[0] and mine == dagsters and mine[1] == [(HEAD,)] and mine[2] == "wal"
    # The data migrations Dagster marks done on a new file (what later opens would otherwise redo).
    marked = [sorted(sqlite3.connect(tmp_path / where / f"{name}.db").execute(
        "SELECT name FROM secondary_indexes").fetchall()) for where in ("ours", "stock")]
    assert marked[0] and marked[0] == marked[1]
    ours.from_local(str(tmp_path / "ours")).dispose()  # reopened: nothing set up again
    assert schema(tmp_path / "ours" / f"{name}.db") == mine


def materialized(entry) -> tuple[str, str, dict]:
    """A materialization as the UI shows it: the asset, the partition, the metadata."""
    event = entry.dagster_event
    return (event.asset_key.to_user_string(), event.partition,
            {k: str(v.value) for k, v in event.event_specific_data.materialization.metadata.items()})


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A tiny project run twice in one process (the second a full run), counting every read of the alembic
    scripts (alembic's own entry point, wrapped) and the event log's own counts after each run."""
    base = tmp_path_factory.mktemp("demo-project")
    export = base / "exports" / "conversations.json"
    export.parent.mkdir(parents=True)
    export.write_text(json.dumps(generate(conversations=3, months=1, seed=7)))
    pipe = load(write_project(base / "proj", export))
    app = pipe.open()
    reads: list[str] = []
    real = ScriptDirectory.from_config.__func__

    def counted(cls, config, *args, **kwargs):
        reads.append(config.get_main_option("script_location"))
        return real(cls, config, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ScriptDirectory, "from_config", classmethod(counted))
        try:
            first = app.run()
            storage = app.instance.event_log_storage
            after_first = (storage.files_set_up, storage.alembic_script_loads, len(reads))
            second = app.run(full=True)
            after_second = (storage.files_set_up, storage.alembic_script_loads, len(reads))
            # A new process's instance on the project (its storages reopened): checking the files reads no script.
            instance = open_instance(app.pipeline)
            opened = (len(instance.all_logs(second.id)), instance.get_run_by_id(first.id) is not None,
                      instance.event_log_storage.files_set_up, len(reads))
            instance.dispose()
            yield {"pipe": pipe, "app": app, "runs": (first, second), "after": (after_first, after_second),
                   "reopened": opened}
        finally:
            pipe.close()


def test_a_run_sets_up_one_file_and_reads_the_scripts_at_most_once(two_runs):
    first, second = two_runs["runs"]
    assert first.steps and second.steps and first.id != second.id
    # Fresh project: the index and the run's shard set up; the scripts read once by each storage that set a
    # file up (runs.db, schedules.db, the event log). The next run: only its shard, no script read again
    # (Dagster: 9 reads on a fresh project's run, 5 on each later run's process).
    assert two_runs["after"] == ((2, 1, 3), (3, 1, 3))
    home = instance_home(two_runs["app"].pipeline)
    shards = sorted(p.stem for p in (home / "history" / "runs").glob("*.db"))
    assert shards == sorted(["index", first.id, second.id])
    events, found, set_up, reads = two_runs["reopened"]
    assert events > 0 and found and set_up == 0 and reads == 3


def test_dagsters_stock_storage_reads_what_the_runs_wrote(two_runs):
    """The UI's process opens the same files with Dagster's own class."""
    app = two_runs["app"]
    home = instance_home(app.pipeline)
    stock = DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))
    try:
        assert type(stock.event_log_storage) is SqliteEventLogStorage
        for run in two_runs["runs"]:
            ours = app.instance.all_logs(run.id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
            theirs = stock.all_logs(run.id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
            assert len(ours) >= 2 and [materialized(e) for e in theirs] == [materialized(e) for e in ours]
            assert stock.get_run_by_id(run.id).is_success
    finally:
        stock.dispose()
