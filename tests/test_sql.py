"""`synthex sql`: DuckDB over the project's LanceDB tables (Arrow scan, no copy), read-only, one-line errors."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys

import duckdb
import pyarrow as pa
import pytest
from click.testing import CliRunner
from conftest import env_without_openai, write_project

from synthex.core.errors import BadInputError
from synthex.surfaces.cli import main
from synthex_resources.sql import SqlConsole

COUNT_BY_STEP = "select step, count(*) as n from records where branch = 'main' group by step order by step"


@pytest.fixture
def ran(ran_project):
    """The shared small project run once (conftest.ran_project: 12 conversations over 3 months); read-only here."""
    return ran_project.root


def sql(*args: str):
    return CliRunner().invoke(main, ["sql", *args], catch_exceptions=False)


def test_counts_per_step_equal_stats_in_table_json_and_csv(ran):
    stats = CliRunner().invoke(main, ["stats", "--json", "--project", str(ran)])
    assert stats.exit_code == 0, stats.output
    expected = {step: info["records"] for step, info in json.loads(stats.stdout)["steps"].items()}
    assert set(expected) == {"chatgpt", "transcripts", "summaries", "monthly", "world-model"}
    assert expected["chatgpt"] == 12 and all(n > 0 for n in expected.values())

    as_json = sql(COUNT_BY_STEP, "--json", "--project", str(ran))
    assert as_json.exit_code == 0, as_json.output
    rows = json.loads(as_json.stdout)
    assert {r["step"]: r["n"] for r in rows} == expected

    as_csv = sql(COUNT_BY_STEP, "--csv", "--project", str(ran))
    parsed = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert {r["step"]: int(r["n"]) for r in parsed} == expected

    table = sql(COUNT_BY_STEP, "--project", str(ran)).stdout.splitlines()
    assert table[0].split() == ["step", "n"] and set(table[1]) == {"-", " "}
    assert {ln.split()[0]: int(ln.split()[1]) for ln in table[2:-1]} == expected
    assert table[-1] == f"({len(expected)} rows)"


def test_records_view_has_no_vector_and_record_vectors_has_them(ran):
    out = json.loads(sql("select * from records where step = 'summaries' limit 1", "--json", "--project", str(ran)).stdout)
    assert "vector" not in out[0] and {"id", "content", "step", "branch", "period", "sources", "metadata"} <= set(out[0])
    dims = json.loads(sql("select step, array_length(vector) as dim from record_vectors where step = 'summaries' "
                          "limit 1", "--json", "--project", str(ran)).stdout)
    assert dims == [{"step": "summaries", "dim": 384}]


def test_runs_view_has_the_run(ran, ran_project):
    run_id = ran_project.run.id
    runs = json.loads(sql(f"select id, status from runs where id = '{run_id}'", "--json", "--project", str(ran)).stdout)
    assert runs == [{"id": run_id, "status": "completed"}]
    steps = json.loads(sql(f"select count(distinct step) as n from run_steps where run_id = '{run_id}'", "--json",
                           "--project", str(ran)).stdout)
    assert steps == [{"n": 5}]


def test_bad_sql_and_refused_writes_are_one_line_with_exit_2(ran, tmp_path):
    cmd = [sys.executable, "-m", "synthex.surfaces.cli", "sql", "selec step from records", "--project", str(ran)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env_without_openai(), timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: bad SQL: Parser Error: syntax error")

    missing = sql("select nope from records", "--project", str(ran))
    assert missing.exit_code == 2 and len(missing.stderr.splitlines()) == 1
    assert 'Referenced column "nope" not found' in missing.stderr

    copy_target = tmp_path / "leak.csv"
    for statement in ["insert into records (id) values ('x')", "update records set step = 'x'", "delete from records",
                      "drop view records", "create table t as select * from records",
                      f"copy (select * from records) to '{copy_target}'",
                      f"explain analyze copy (select 1) to '{copy_target}'",
                      "explain (format json) insert into records (id) values ('x')",
                      f"attach '{tmp_path / 'other.duckdb'}' as other", "install httpfs", "set threads = 1"]:
        refused = sql(statement, "--project", str(ran))
        assert refused.exit_code == 2, statement
        [line] = refused.stderr.splitlines()
        assert line.startswith("error: synthex sql is read-only: ") and "statements are refused" in line, line
    assert not copy_target.exists() and not (tmp_path / "other.duckdb").exists()
    stats = json.loads(CliRunner().invoke(main, ["stats", "--json", "--project", str(ran)]).stdout)
    after = json.loads(sql(COUNT_BY_STEP, "--json", "--project", str(ran)).stdout)
    assert {r["step"]: r["n"] for r in after} == {s: i["records"] for s, i in stats["steps"].items()}


def test_the_views_cannot_be_written_even_past_the_statement_check(ran):
    with SqlConsole(str(ran / ".synthex" / "lancedb")) as console:
        for statement in ["insert into records (id) values ('x')", "delete from records"]:
            with pytest.raises(duckdb.Error):
                console.con.execute(statement)  # DuckDB's own refusal: a view over an Arrow scan
        with pytest.raises(BadInputError, match="give one statement"):
            console.query("select 1; drop view records")


def test_views_scan_the_lance_dataset_through_arrow_without_copying(ran, tmp_path):
    lancedb_dir = tmp_path / "lancedb"
    shutil.copytree(ran / ".synthex" / "lancedb", lancedb_dir)  # this test appends a row: not to `ran`
    count = "select count(*) as n from records"
    with SqlConsole(str(lancedb_dir)) as console:
        plan = console.query("explain select id from records where step = 'monthly'").column("explain_value")[0].as_py()
        assert "ARROW_SCAN" in plan  # DuckDB scans the Lance dataset, not a table of its own
        assert "Projections: id" in plan and "step" in plan.split("Filters:")[1]  # pushed down to the Lance scanner
        assert console.con.execute("select count(*) from duckdb_tables()").fetchone() == (0,)  # nothing copied in
        view_sql = {r[0]: r[1] for r in console.con.execute("select view_name, sql from duckdb_views() "
                                                            "where not internal").fetchall()}
        assert set(view_sql) == {"records", "record_vectors", "runs", "run_steps"}
        assert all("arrow_scan" in text.lower() for text in view_sql.values())
        before = console.query(count).column("n")[0].as_py()

        import lance

        path = str(lancedb_dir / "records.lance")
        row = lance.dataset(path).to_table(limit=1)
        row = row.set_column(row.schema.get_field_index("id"), "id", pa.array(["added-after-the-console-opened"]))
        lance.write_dataset(row, path, mode="append")
        assert console.query(count).column("n")[0].as_py() == before  # one console, one snapshot of the table
    with SqlConsole(str(lancedb_dir)) as fresh:  # the latest version, read in place
        assert fresh.query(count).column("n")[0].as_py() == before + 1
        assert fresh.query("select id from records where id like 'added-%'").column("id").to_pylist() == [
            "added-after-the-console-opened"]


def test_a_project_not_run_yet_has_empty_views_and_no_eval_results(tmp_path, small_export):
    project = write_project(tmp_path / "fresh", small_export)
    out = sql("select count(*) as n from records", "--json", "--project", str(project))
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == [{"n": 0}]
    evals = sql("select * from eval_results", "--project", str(project))
    assert evals.exit_code == 2
    [line] = evals.stderr.splitlines()
    assert "eval_results" in line and "run `synthex eval locomo ...` first" in line
