"""Issue 24, a 1-second CLI and a lighter run: commands that only read import neither lancedb nor Dagster;
a run writes a bounded number of Dagster events, through the project's event log (one open connection
per file), and Dagster's own storage class reads them back."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import env_without_openai, load
from dagster import DagsterInstance

from synthex_assets.dagster_internals import SqliteEventLogStorage
from synthex_assets.event_log import SqliteEventLog
from synthex_assets.instance import instance_home, open_instance

READ_COMMANDS = """
import json, sys
from click.testing import CliRunner
from synthex.surfaces.cli import main

seen = {}
for name, args in (("stats", ["stats", "--json"]), ("get", ["get", sys.argv[1], "--json"]),
                   ("search", ["search", "rust", "--mode", "bm25", "--json"]),
                   ("default search", ["search", "rust", "--json"])):  # the template's mode=: the drill-down
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, (args, result.output)
    seen[name] = {"output": result.stdout, "lancedb": "lancedb" in sys.modules, "dagster": "dagster" in sys.modules}
print(json.dumps(seen))
"""


def test_commands_that_only_read_import_neither_lancedb_nor_dagster(ran_project):
    pipe = load(ran_project.root)
    try:
        record = pipe.records("summaries")[0].id
        expected = [h.id for h in pipe.search("rust", mode="bm25")]
        drilled = [h.id for h in pipe.search("rust")]
    finally:
        pipe.close()
    proc = subprocess.run([sys.executable, "-c", READ_COMMANDS, record], cwd=ran_project.root, capture_output=True,
                          text=True, env=env_without_openai(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {cmd: (s["lancedb"], s["dagster"]) for cmd, s in seen.items()} == {
        "stats": (False, False), "get": (False, False), "search": (False, False), "default search": (False, False)}
    # ... and they answered: the record asked for, and BM25's hits in the Python API's order.
    assert json.loads(seen["get"]["output"])["id"] == record
    assert expected and [h["id"] for h in json.loads(seen["search"]["output"])["hits"]] == expected
    assert [h["id"] for h in json.loads(seen["default search"]["output"])["hits"]] == drilled


def test_a_run_writes_a_bounded_number_of_dagster_events_readable_by_dagsters_own_storage(ran_project):
    pipe = load(ran_project.root)
    try:
        instance = open_instance(pipe)
        try:
            assert isinstance(instance.event_log_storage, SqliteEventLog)
            [run] = instance.get_runs()
            events = instance.all_logs(run.run_id)
        finally:
            instance.dispose()
        steps, periods = len(pipe.steps), len({r.period for r in pipe.records("chatgpt")})
    finally:
        pipe.close()
    # Per (step, period): one materialization planned and one recorded (what the UI's partition view
    # shows); per step: start, success, 4 outputs, 3 checks planned and evaluated (provenance, up to date,
    # records_planned since issue 36; a step with on_update hooks has a fourth; none here), one log line;
    # per run 7 (start, success, resources, engine, logs captured). The demo (5 steps x 14 periods) writes
    # exactly this bound: 212 (197 before issue 36 added records_planned).
    bound = 2 * steps * periods + 13 * steps + 7
    assert steps == 5 and periods >= 2 and 2 * steps * periods < len(events) <= bound
    # The same files through Dagster's stock class (what the UI's webserver opens).
    stock = DagsterInstance.from_config(str(instance_home(pipe)))
    try:
        assert type(stock.event_log_storage) is SqliteEventLogStorage
        assert [e.storage_id for e in stock.get_records_for_run(run.run_id).records] == \
            [e.storage_id for e in instance_records(pipe, run.run_id)]
    finally:
        stock.dispose()


def instance_records(pipe, run_id: str) -> list:
    instance = open_instance(pipe)
    try:
        return list(instance.get_records_for_run(run_id).records)
    finally:
        instance.dispose()


def test_the_event_log_keeps_one_connection_per_file_and_closes_them(tmp_path):
    log = SqliteEventLog(str(tmp_path / "runs"))
    for i in range(5):
        with log.run_connection(f"run-{i}") as conn:
            conn.exec_driver_sql("SELECT 1")
    with log.index_connection() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
    assert "index" in log._engines and len([s for s in log._engines if s != "index"]) == 4
    log.dispose()
    assert not log._engines
