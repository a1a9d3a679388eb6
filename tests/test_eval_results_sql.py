"""Per-question eval results as the DuckDB table ``eval_results``: written by `synthex eval` (a plain DuckDB
connection) and by the ``eval_locomo`` asset (dagster-duckdb's DuckDBResource), idempotent per eval run id,
sliced with `synthex sql` by category, question, architecture and branch. Last, the ``eval_locomo`` asset's
metadata and threshold check on the same project (was test_eval_assets: main's eval workspaces, built by the
asset test above, are re-used instead of built again on a project of its own)."""

from __future__ import annotations

import json

import duckdb
import pytest
from click.testing import CliRunner
from conftest import load, write_json, write_project
from dagster import DagsterInstance, materialize
from dagster_duckdb import DuckDBResource
from test_eval_cli import fixture

from evals.architectures import resolve
from evals.benchmarks.locomo.benchmark import evaluate_locomo
from evals.dagster_evals import CHECK, eval_definitions
from evals.report import save_eval_results, write_eval_results
from synthex.core.errors import BadInputError
from synthex.surfaces.cli import main
from synthex_resources.sql import SqlConsole, eval_results_path

# The fixture: 2 conversations x 3 answerable single-hop questions (qa[0..2]) + 1 adversarial without evidence.
QUESTION_IDS = [f"conv-{c}/q{i}" for c in range(2) for i in range(3)]


def cli(*args: str):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result


def sql(project, query: str, *extra: str) -> list[dict]:
    out = cli("sql", query, "--json", "--project", str(project), *extra)
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """`synthex eval locomo` (two built-in architectures) on a small LoCoMo file, eval run id ``first``."""
    from synthex.core.demo.generate import generate

    root = tmp_path_factory.mktemp("evalsql")
    export = write_json(root / "exports" / "conversations.json", generate(conversations=12, months=3, seed=3))
    project = write_project(root / "proj", export)
    data = write_json(root / "locomo10.json", fixture())
    out = cli("eval", "locomo", "--data", str(data), "--compare", "raw-bm25,raw-hybrid", "--run-id", "first",
              "--json", "--project", str(project))
    assert out.exit_code == 0, out.output
    return project, data, json.loads(out.stdout)["results"]


def test_cli_eval_writes_one_row_per_question_beside_its_json(evaluated):
    project, _, results = evaluated
    assert eval_results_path(project / ".synthex").exists()
    assert [r["eval_run_id"] for r in results] == ["first", "first"] and "questions" not in results[0]
    rows = sql(project, "select architecture, branch, mode, question_id, category, hits, gold_turns, evaluated_at "
                        "from eval_results where eval_run_id = 'first' order by architecture, question_id")
    assert [(r["architecture"], r["question_id"]) for r in rows] == [
        (a, q) for a in ("raw-bm25", "raw-hybrid") for q in QUESTION_IDS]
    assert {r["category"] for r in rows} == {"single-hop"} and {r["branch"] for r in rows} == {"main"}
    assert {r["mode"] for r in rows} == {"bm25", "hybrid"}
    assert all(len(r["gold_turns"]) == 1 and 0 < len(r["hits"]) <= 10 for r in rows)


def test_slicing_by_category_reproduces_the_reported_means(evaluated):
    project, _, results = evaluated
    rows = sql(project, "select architecture, category, count(*) as n, avg(recall_any_at_10) as r10, "
                        "avg(session_ndcg_any_at_10) as s_ndcg from eval_results where eval_run_id = 'first' "
                        "group by all order by all")
    for row in rows:
        [result] = [r for r in results if r["architecture"] == row["architecture"]]
        cat = result["by_category"][row["category"]]  # LoCoMo's categories are reported at turn level
        assert row["n"] == cat["n"] == 6 and round(row["r10"], 4) == cat["recall_any@10"]
        assert round(row["s_ndcg"], 4) == result["metrics"]["session"]["ndcg_any@10"]
    # The query of the requirement, as written: recall@k is the share of the gold found in the top k.
    out = cli("sql", "select category, avg(recall_at_10) from eval_results group by 1", "--project", str(project))
    assert out.exit_code == 0 and out.stdout.splitlines()[0].split() == ["category", "avg(recall_at_10)"]
    assert "single-hop" in out.stdout


def test_slicing_by_question_compares_architectures(evaluated):
    project, _, _ = evaluated
    rows = sql(project, "select question_id, list(architecture order by architecture) as archs, "
                        "max(recall_any_at_10) - min(recall_any_at_10) as spread from eval_results "
                        "where eval_run_id = 'first' group by 1 order by 1")
    assert [r["question_id"] for r in rows] == QUESTION_IDS
    assert all(r["archs"] == ["raw-bm25", "raw-hybrid"] for r in rows)


def test_rewriting_an_eval_run_replaces_its_rows(evaluated):
    project, data, _ = evaluated
    count = "select eval_run_id, count(*) as n from eval_results where eval_run_id in ('first', 'second') group by 1 order by 1"
    again = cli("eval", "locomo", "--data", str(data), "--compare", "raw-bm25,raw-hybrid", "--run-id", "first",
                "--project", str(project))
    assert again.exit_code == 0 and "12 per-question rows in" in again.stdout
    assert sql(project, count) == [{"eval_run_id": "first", "n": 12}]  # replaced, not duplicated

    # The storage function directly, with real result rows (their `questions`) on a plain connection.
    [result] = evaluate_locomo(data, resolve(["raw-bm25"], None), project / ".synthex" / "evals" / "work" / "locomo",
                               log=lambda m: None)
    assert len(result["questions"]) == 6
    database = eval_results_path(project / ".synthex")
    for _ in range(2):
        assert save_eval_results([result], database, "second") == 6
    assert sql(project, count) == [{"eval_run_id": "first", "n": 12}, {"eval_run_id": "second", "n": 6}]
    # Another architecture under the same run id is added beside, not over, the first one's rows.
    experiment = result | {"architecture": "experiment", "branch": "experiment"}
    assert save_eval_results([experiment], database, "second") == 6
    by_branch = sql(project, "select branch, count(*) as n from eval_results where eval_run_id = 'second' "
                             "group by 1 order by 1")
    assert by_branch == [{"branch": "experiment", "n": 6}, {"branch": "main", "n": 6}]


def test_eval_results_are_read_only_from_sql(evaluated):
    project, _, _ = evaluated
    refused = cli("sql", "delete from eval_results", "--project", str(project))
    assert refused.exit_code == 2 and "read-only" in refused.stderr
    with SqlConsole(str(project / ".synthex" / "lancedb"), eval_results_path(project / ".synthex")) as console:
        with pytest.raises(duckdb.Error, match="Can only delete from base table"):
            # DuckDB refuses too: a view over the rows read into memory (the file is not even open)
            console.con.execute("delete from eval_results")
        with pytest.raises(BadInputError, match="read-only"):
            console.query("insert into eval_results select * from eval_results")
        assert console.query("select count(*) as n from eval_results").column("n")[0].as_py() > 0


def test_eval_asset_writes_through_its_duckdb_resource(evaluated, tmp_path):
    project, data, _ = evaluated
    pipe = load(project)
    pipe.eval_asset("locomo", data=str(data))  # opt-in (test_eval_assets.py: what pipeline.py declares)
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("branch", ["main"])
    config = {"ops": {"eval_locomo": {"config": {"data": str(data), "thresholds": {}}}}}

    # The plugin's default resource: the project's eval results file, the one `synthex sql` reads.
    [asset] = eval_definitions(pipe).assets
    default_run = materialize([asset], instance=instance, partition_key="main|locomo10", run_config=config)
    assert default_run.success
    rows = sql(project, f"select architecture, branch, mode, count(*) as n from eval_results "
                        f"where eval_run_id = '{default_run.run_id}' group by all")
    # searched as the project searches: the default template's mode= (the eval asset's search_mode unset)
    assert rows == [{"architecture": "main", "branch": "main", "mode": "hierarchical", "n": 6}]

    # A DuckDBResource pointed elsewhere: the rows land there, keyed by the Dagster run id.
    database = tmp_path / "results" / "dagster.duckdb"
    [asset] = eval_definitions(pipe, eval_results=DuckDBResource(database=str(database))).assets
    run = materialize([asset], instance=instance, partition_key="main|locomo10", run_config=config)
    [mat] = run.asset_materializations_for_node("eval_locomo")
    assert mat.metadata["eval_run_id"].value == run.run_id and mat.metadata["question_rows"].value == 6
    assert mat.metadata["eval_results"].value == str(database)
    elsewhere = sql(project, "select eval_run_id, question_id from eval_results order by question_id",
                    "--eval-results", str(database))
    assert elsewhere == [{"eval_run_id": run.run_id, "question_id": q} for q in QUESTION_IDS]

    # The same storage function through the resource's connection: re-writing the run id replaces its rows.
    resource = DuckDBResource(database=str(database))
    [result] = evaluate_locomo(data, resolve(["raw-bm25"], None), project / ".synthex" / "evals" / "work" / "locomo",
                               log=lambda m: None)
    for _ in range(2):
        with resource.get_connection() as con:
            write_eval_results(con, run.run_id, [result | {"architecture": "main"}])
    with resource.get_connection() as con:
        assert con.execute("select count(*), count(distinct mode) from eval_results").fetchone() == (6, 1)
        assert con.execute("select distinct mode from eval_results").fetchone() == ("bm25",)


def run_eval(pipe, data, thresholds, search_mode="hybrid"):
    if "locomo" not in pipe.evals:
        pipe.eval_asset("locomo", data=str(data))
    defs = eval_definitions(pipe)
    [eval_asset] = [a for a in defs.assets]
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("branch", ["main"])
    return materialize([eval_asset], instance=instance, partition_key="main|locomo10", raise_on_error=False,
                       run_config={"ops": {"eval_locomo": {"config": {"data": str(data), "thresholds": thresholds,
                                                                       "search_mode": search_mode}}}})


def test_eval_asset_metadata_and_threshold_check(evaluated):
    """The LoCoMo eval as a Dagster asset (partitioned by branch) with its threshold check."""
    project, data, _ = evaluated
    pipe = load(project)
    result = run_eval(pipe, data, {"session/recall_any@10": 0.0})
    assert result.success
    [mat] = result.asset_materializations_for_node("eval_locomo")
    assert mat.partition == "main|locomo10"
    assert {"turn/recall_any@10", "session/ndcg_any@10", "n_questions", "chart"} <= set(mat.metadata)
    assert mat.metadata["chart"].value.startswith("![LoCoMo retrieval](data:image/png;base64,iVBORw0KGgo")  # a PNG
    [check] = result.get_asset_check_evaluations()
    assert check.check_name == CHECK and check.passed

    failing = run_eval(pipe, data, {"turn/recall_all@10": 1.01})
    [check] = failing.get_asset_check_evaluations()
    assert not check.passed and "turn/recall_all@10" in check.metadata["failing"].value

    # The same branch scored with another search recipe, from config (re-uses the ingested workspace).
    conversational = run_eval(pipe, data, {"turn/recall_any@10": 0.5}, search_mode="conversational")
    [mat] = conversational.asset_materializations_for_node("eval_locomo")
    assert conversational.success and mat.metadata["turn/recall_any@10"].value >= 0.5


def test_locomo_split_check_reads_the_runs_rows_back_by_conversation(evaluated):
    """``evals.benchmarks.locomo.split_check``: the run's rows split by the conversation's number in the file; "all"
    equals the run's own means, each part its own questions."""
    from evals.benchmarks.locomo.split_check import split_figures

    project, data, results = evaluated
    figures = split_figures(project, data, "first", 1, 1)
    for result in results:
        parts = figures[result["architecture"]]
        assert (parts["conversations 1-1"]["n"], parts["others"]["n"], parts["all"]["n"]) == (3, 3, 6)
        assert parts["all"]["session any@5"] == result["metrics"]["session"]["recall_any@5"]
        assert parts["all"]["turn all@10"] == result["metrics"]["turn"]["recall_all@10"]
    by_category = split_figures(project, data, "first", 1, 1, by_category=True)["raw-bm25"]
    assert set(by_category) == {"conversations 1-1 / single-hop", "others / single-hop", "all / single-hop"}
