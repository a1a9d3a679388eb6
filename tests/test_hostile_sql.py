"""`synthex sql` is sandboxed (issue 20, item 5): user SQL reads the project's views and nothing else (no file,
URL, extension or setting), and reading the CDC state or the eval results never holds the lock their writers
(`synthex sync`, `synthex eval`) need, however long a console query runs.

One raw-template project, synced once, shared by the module (tests only read it; the one that syncs again
works on a copy). Writers in other processes are real: DuckDB's file lock is per process.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from click.testing import CliRunner
from conftest import env_without_openai, go_offline

from synthex.core.errors import BadInputError
from synthex.surfaces.cli import main
from synthex_resources.cdc_state import CDC_FILE
from synthex_resources.sql import SANDBOX_REASON, SqlConsole, eval_results_path

PROCESS_TIMEOUT = 120


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def own_export(ran_project, root: Path, export: Path) -> None:
    """Point the project at its own copy of the export (the shared one is never touched). The records do
    not change (ids follow content, not paths): a sync then has nothing to run, only CDC state to write."""
    shutil.copy(ran_project.export, export)
    pipeline = root / "pipeline.py"
    pipeline.write_text(pipeline.read_text().replace(str(ran_project.export), str(export)))


@pytest.fixture(scope="module")
def synced(ran_project, tmp_path_factory) -> Path:
    """The shared ran project (conftest.ran_project), copied, after one `synthex sync` (so it has CDC state)."""
    base = tmp_path_factory.mktemp("hostile-sql")
    root = ran_project.copy(base / "proj")
    # `synthex run` commits the CDC state of the export it read (issue 23); this copy reads its own export,
    # so it starts without the shared run's state and the sync below writes the only one.
    (root / ".synthex" / CDC_FILE).unlink(missing_ok=True)
    own_export(ran_project, root, base / "conversations.json")
    with pytest.MonkeyPatch.context() as mp:  # module fixtures run before the autouse offline_env
        go_offline(mp)
        out = cli("sync", "--project", str(root))
    assert out.exit_code == 0, out.output
    assert "chatgpt: 12 new" in out.output and "nothing to run" in out.output
    assert (root / ".synthex" / CDC_FILE).exists()
    return root


@pytest.fixture(scope="module")
def secret(tmp_path_factory) -> Path:
    """A readable file outside the project: what a query must never show."""
    path = tmp_path_factory.mktemp("outside") / "secret.csv"
    path.write_text("name,value\nsecret,do-not-leak-7f3a\n")
    return path


def refused(project: Path, query: str, *extra: str) -> str:
    """The one stderr line `synthex sql QUERY` answers with, after checking it is a refusal (exit 2, no rows)."""
    out = cli("sql", query, "--project", str(project), *extra)
    assert out.exit_code == 2, (query, out.output)
    assert out.stdout == "" and "do-not-leak" not in out.output
    [line] = out.stderr.splitlines()
    return line


def hostile_queries(secret: Path, cdc: Path, tmp: Path) -> list[str]:
    return [
        "select content from read_text('/etc/shadow')",
        f"select content from read_text('{secret}')",
        f"select * from read_csv('{secret}')",
        f"select * from '{secret}'",
        f"select * from read_blob('{secret}')",
        f"select file from glob('{secret.parent}/*')",
        "select * from glob('/root/*')",
        "select * from read_csv('https://127.0.0.1:9/x.csv')",  # loopback: nothing listens, nothing is tried
        f"select * from read_duckdb('{cdc}', table_name='cdc_items')",
        f"select * from parquet_metadata('{secret}')",
        f"with t as (select * from read_text('{secret}')) select * from t",
        f"select count(*) from records where id in (select content from read_text('{secret}'))",
        f"explain analyze select * from read_text('{secret}')",
    ]


REFUSED_STATEMENTS = ["attach '{tmp}/other.duckdb' as other", "copy (select * from records) to '{tmp}/leak.csv'",
                      "export database '{tmp}/dump'", "install httpfs", "load httpfs", "update extensions",
                      "set enable_external_access = true", "reset enable_external_access",
                      "set lock_configuration = false", "pragma enable_profiling", "detach memory",
                      "explain analyze copy (select 1) to '{tmp}/leak.csv'"]


def test_no_file_url_or_extension_beyond_the_views_on_any_output(synced, secret, tmp_path):
    cdc = synced / ".synthex" / CDC_FILE
    queries = hostile_queries(secret, cdc, tmp_path)
    doors = [(q, ()) for q in queries] + [(q, (flag,)) for q in queries[:2] for flag in ("--json", "--csv")]
    for query, extra in doors:
        line = refused(synced, query, *extra)
        assert line.startswith(f"error: {SANDBOX_REASON} (") and "Permission Error" in line, (query, line)


def test_statements_that_reach_outside_are_refused_naming_the_sandbox(synced, tmp_path):
    for statement in REFUSED_STATEMENTS:
        line = refused(synced, statement.format(tmp=tmp_path))
        assert line.startswith("error: synthex sql is read-only: ") and line.endswith(f"({SANDBOX_REASON})"), line
    word = refused(synced, "install httpfs")
    assert "INSTALL statements are refused" in word  # the word the user wrote, not DuckDB's LOAD
    assert not list(tmp_path.iterdir())  # nothing attached, copied or exported


def test_the_sandbox_is_on_and_locked_and_only_the_project_views_exist(synced):
    settings = {"enable_external_access": "false", "autoinstall_known_extensions": "false",
                "autoload_known_extensions": "false", "allow_community_extensions": "false",
                "python_enable_replacements": "false", "lock_configuration": "true"}
    names = ", ".join(f"'{n}'" for n in settings)
    out = cli("sql", f"select name, value from duckdb_settings() where name in ({names})", "--json",
              "--project", str(synced))
    assert out.exit_code == 0, out.output
    assert {r["name"]: r["value"] for r in json.loads(out.stdout)} == settings

    with SqlConsole(str(synced / ".synthex" / "lancedb"), eval_results_path(synced / ".synthex"),
                    cdc_state=synced / ".synthex") as console:
        databases = console.query("select database_name from duckdb_databases() where not internal")
        assert databases.column("database_name").to_pylist() == ["memory"]  # no file attached
        assert console.con.execute("select count(*) from duckdb_tables()").fetchall() == [(0,)]
        views = set(console.query("select view_name from duckdb_views() where not internal")
                    .column("view_name").to_pylist())
        assert views == {"records", "record_vectors", "runs", "run_steps", "cdc_sources", "cdc_items"}
        with pytest.raises(duckdb.Error, match="locked"):  # not even past the statement check
            console.con.execute("set enable_external_access = true")
        with pytest.raises(BadInputError, match="external access is off"):
            console.query("select * from read_text('/etc/hostname')")


def test_cdc_views_equal_the_state_the_sync_wrote(synced):
    direct = duckdb.connect(str(synced / ".synthex" / CDC_FILE), read_only=True)
    try:
        expected = sorted(direct.execute("select source, key, hash from cdc_items").fetchall())
        sources = direct.execute("select source, items from cdc_sources").fetchall()
    finally:
        direct.close()
    assert len(expected) == 12 and sources == [("chatgpt", 12)]
    out = cli("sql", "select source, key, hash from cdc_items order by all", "--json", "--project", str(synced))
    assert out.exit_code == 0, out.output
    assert [(r["source"], r["key"], r["hash"]) for r in json.loads(out.stdout)] == expected


def test_a_project_never_synced_has_empty_cdc_views(synced, tmp_path):
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(synced / "pipeline.py", fresh / "pipeline.py")  # its export is the synced project's
    out = cli("sql", "select (select count(*) from cdc_items) as items, (select count(*) from cdc_sources) as s",
              "--json", "--project", str(fresh))
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == [{"items": 0, "s": 0}]
    assert not (fresh / ".synthex" / CDC_FILE).exists()  # reading created nothing


def _held_query(console: SqlConsole, query: str) -> tuple[threading.Thread, threading.Event, threading.Event,
                                                          dict[str, pa.Table]]:
    """``query`` run on ``console`` in a thread and held inside DuckDB (a UDF that waits) until released."""
    started, release = threading.Event(), threading.Event()
    result: dict[str, pa.Table] = {}

    def hold(values: pa.Array) -> pa.Array:
        started.set()
        release.wait(PROCESS_TIMEOUT)
        return values

    console.con.create_function("hold", hold, ["VARCHAR"], "VARCHAR", type="arrow", side_effects=True)

    def run() -> None:
        result["table"] = console.query(query)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(PROCESS_TIMEOUT), "the held query never started"
    return thread, release, result


def test_a_sync_commits_while_a_console_query_over_the_cdc_state_is_in_progress(synced, ran_project, tmp_path):
    root = tmp_path / "proj"
    shutil.copytree(synced, root, symlinks=True)
    export = tmp_path / "moved" / "conversations.json"  # a new origin: the sync has 12 items to commit
    export.parent.mkdir()
    shutil.copy(ran_project.export, export)
    pipeline = root / "pipeline.py"
    [old_origin] = [r["origin"] for r in json.loads(cli("sql", "select origin from cdc_sources", "--json",
                                                        "--project", str(root)).stdout)]
    pipeline.write_text(pipeline.read_text().replace(old_origin, str(export)))
    with SqlConsole(str(root / ".synthex" / "lancedb"), cdc_state=root / ".synthex") as console:
        thread, release, result = _held_query(console, "select source, hold(key) as key, hash, origin "
                                                       "from cdc_items order by key")
        try:
            sync = subprocess.run([sys.executable, "-m", "synthex.surfaces.cli", "sync", "--project", str(root)],
                                  capture_output=True, text=True, env=env_without_openai(), timeout=PROCESS_TIMEOUT)
            assert thread.is_alive() and "table" not in result  # the console query was in progress all along
        finally:
            release.set()
            thread.join(PROCESS_TIMEOUT)
    assert sync.returncode == 0, sync.stderr
    assert "busy" not in sync.stderr and "chatgpt: 12 new, 0 changed, 0 deleted" in sync.stdout + sync.stderr
    before = result["table"]  # the console's snapshot: the state as it was when the console opened
    assert before.num_rows == 12 and set(before.column("origin").to_pylist()) == {old_origin}
    after = json.loads(cli("sql", "select origin, count(*) as n from cdc_items group by 1 order by 1", "--json",
                           "--project", str(root)).stdout)
    assert {r["origin"]: r["n"] for r in after} == {old_origin: 12, str(export): 12}  # the sync's commit landed


WRITER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])  # read-write: fails at once if another process holds the file
con.execute("CREATE TABLE IF NOT EXISTS written_while_read (x INTEGER)")
con.execute("INSERT INTO written_while_read VALUES (1)")
con.close()
print("written")
"""


def test_duckdb_writers_are_never_blocked_by_an_open_console(synced, tmp_path):
    data = tmp_path / ".synthex"
    shutil.copytree(synced / ".synthex", data, symlinks=True)
    results = eval_results_path(data)
    results.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(results)) as con:
        con.execute("CREATE TABLE eval_results AS SELECT 'q1' AS question_id, 0.5 AS recall_at_10")
    with SqlConsole(str(data / "lancedb"), results, cdc_state=data) as console:
        thread, release, result = _held_query(console, "select hold(question_id) as q, (select count(*) from "
                                                       "cdc_items) as n from eval_results")
        try:
            for path in (results, data / CDC_FILE):
                proc = subprocess.run([sys.executable, "-c", WRITER, str(path)], capture_output=True, text=True,
                                      timeout=PROCESS_TIMEOUT)
                assert proc.returncode == 0 and proc.stdout.strip() == "written", proc.stderr
            assert thread.is_alive()
        finally:
            release.set()
            thread.join(PROCESS_TIMEOUT)
    assert result["table"].to_pylist() == [{"q": "q1", "n": 12}]


HOLDER = """
import pathlib, sys, duckdb
con = duckdb.connect(sys.argv[1])  # a sync's writer, holding the file until told to stop
pathlib.Path(sys.argv[2]).touch()
sys.stdin.read()
"""


def test_a_cdc_state_held_by_a_writer_leaves_the_other_views_working(synced, tmp_path):
    data = tmp_path / ".synthex"
    shutil.copytree(synced / ".synthex", data, symlinks=True)
    marker = tmp_path / "holding"
    with SqlConsole(str(data / "lancedb"), cdc_state=data) as free:
        records = free.query("select count(*) as n from records").column("n")[0].as_py()
        assert records > 0 and free.query("select count(*) as n from cdc_items").column("n")[0].as_py() == 12
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(data / CDC_FILE), str(marker)],
                              stdin=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + PROCESS_TIMEOUT
        while not marker.exists() and holder.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert marker.exists(), "the writer never took the file"
        with SqlConsole(str(data / "lancedb"), cdc_state=data, snapshot_wait_s=0.3) as console:
            assert console.query("select count(*) as n from records").column("n")[0].as_py() == records
            with pytest.raises(BadInputError) as busy:
                console.query("select count(*) from cdc_items")
        [line] = str(busy.value).splitlines()
        assert "cdc_items" in line and "being written by another process" in line and "try again" in line
    finally:
        holder.communicate("", timeout=PROCESS_TIMEOUT)


def test_the_sql_command_loads_neither_lancedb_nor_dagster(synced):
    probe = ("import sys; from click.testing import CliRunner; from synthex.surfaces.cli import main; "
             f"r = CliRunner().invoke(main, ['sql', 'select count(*) as n from cdc_items', '--json', '--project', "
             f"{str(synced)!r}]); print(r.exit_code, r.stdout.replace(' ', '').replace(chr(10), ''), "
             "'lancedb' in sys.modules, 'dagster' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env_without_openai(),
                         timeout=PROCESS_TIMEOUT, check=True).stdout.split()
    assert out == ["0", '[{"n":12}]', "False", "False"]


# -- limits of its own (issue 32, item 9) ------------------------------------------------------------

@pytest.fixture
def unrun_project(tmp_path) -> Path:
    """A project that was never run: the views exist with no rows; enough for statements over range()."""
    from conftest import write_project, write_small_export

    return write_project(tmp_path / "proj", write_small_export(tmp_path / "exports" / "conversations.json"))


ENDLESS = "select count(*) from range(10000000000000)"  # 10^13 rows: about half an hour of both cores


def settings(project: Path, *extra: str) -> dict[str, str]:
    out = cli("sql", "select current_setting('memory_limit') as memory_limit, "
              "current_setting('temp_directory') as temp_directory", "--json", "--project", str(project), *extra)
    assert out.exit_code == 0, out.output
    [row] = json.loads(out.stdout)
    return row


def test_a_statement_is_stopped_at_the_timeout_in_one_line(unrun_project):
    out = cli("sql", ENDLESS, "--timeout", "1", "--project", str(unrun_project))
    assert out.exit_code == 1 and out.stdout == "", out.output
    assert out.stderr.splitlines() == ["error: the statement stopped after 1 s (the sql_timeout_s bound); raise it "
                                       "with --timeout SECONDS or Pipeline(limits=Limits(sql_timeout_s=...))"]


def test_memory_and_temp_directory_are_the_consoles_own_and_locked(unrun_project):
    from synthex.core.limits import MB, Limits
    from synthex_resources.sql import SqlLimits, StatementLimitError, sql_limits

    temp = str(unrun_project / ".synthex" / "sql-tmp")  # never DuckDB's default, `.tmp` in the working dir
    assert settings(unrun_project) == {"memory_limit": "1.0 GiB", "temp_directory": temp}  # not 80 % of RAM
    assert settings(unrun_project, "--memory-limit", "256MB") == {"memory_limit": "256.0 MiB", "temp_directory": temp}
    assert "is not a size" in cli("sql", "select 1", "--memory-limit", "lots", "--project", str(unrun_project)).output
    assert "SET statements are refused" in refused(unrun_project, "set memory_limit = '100GB'")

    # The project's own bounds (Pipeline(limits=...)), when no flag overrides them.
    limits = sql_limits(Limits(sql_memory_bytes=512 * MB, sql_timeout_s=0.5), unrun_project / ".synthex")
    with SqlConsole(str(unrun_project / ".synthex" / "lancedb"), limits=limits) as console:
        assert console.query("select current_setting('memory_limit') as m").column("m").to_pylist() == ["512.0 MiB"]
        with pytest.raises(duckdb.Error, match="locked"):  # not even past the statement check
            console.con.execute("set memory_limit = '100GB'")
        with pytest.raises(StatementLimitError, match=r"^the statement stopped after 0\.5 s"):
            console.query(ENDLESS)
        # The interrupt never reaches the console's next statement.
        assert console.query("select count(*) as n from range(1000000)").column("n").to_pylist() == [1_000_000]
    # Over the memory bound with nowhere to spill: one line naming the bound, not DuckDB's five.
    with SqlConsole(str(unrun_project / ".synthex" / "lancedb"), limits=SqlLimits(memory_bytes=16 * MB)) as console:
        with pytest.raises(StatementLimitError) as over:
            console.query("select count(*) from (select md5(i::varchar) m from range(1000000) t(i) order by m)")
    assert str(over.value) == ("the statement needed more memory than the sql_memory_bytes bound of 16 MB "
                               "(with no temp directory to spill to)")
