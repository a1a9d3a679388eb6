"""Issue 21, the experiment loop in the Dagster UI and the CLI: the eval asset's partitions show a dimension
named ``branch`` through Dagster's GraphQL API (what the UI reads); its materialization metadata carries the
metrics, the scorecard with each figure's protocol and, on a branch, the comparison with main (table and an
inline PNG); the threshold check targets the materialization of its own run; ``synthex eval report`` prints
the latest result per benchmark x architecture x branch from the eval_results DuckDB file, with the scorecard,
and ``--chart`` writes the comparison chart.

One module-scoped project (``synthex init --template raw --with-evals`` over one conversation of the
LoCoMo-format fixture of test_evalloop: questions of three categories, one temporal), its eval asset materialized on main, then on branch ``exp`` searched with BM25 instead of
hybrid, so the two results differ and a swapped column would show."""

from __future__ import annotations

import base64
import json

import pytest
from conftest import cli, go_offline, graphql, load, write_json
from dagster import DagsterEventType, DagsterInstance, EventRecordsFilter, materialize
from test_evalloop import locomo_small

from evals.dagster_evals import CHECK, dataset_key, eval_partition_key
from evals.report import connect_eval_results, latest_results
from evals.scorecard import TARGETS
from synthex.core.project import create_branch_file
from synthex_assets.code_location import location_definitions
from synthex_resources.sql import eval_results_path

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
BRANCH = "exp"
DIMENSIONS = """
query Dimensions($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode {
      partitionKeysByDimension { name partitionKeys }
      partitionDefinition { dimensionTypes { name dynamicPartitionsDefinitionName } }
    }
  }
  assetCheckExecutions(assetKey: $key, checkName: "retrieval_thresholds", limit: 10) {
    runId partition
    evaluation { timestamp partition success targetMaterialization { timestamp runId } }
  }
}"""


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """(project, instance, the eval asset's declaration, {branch: materialize result})."""
    root = tmp_path_factory.mktemp("eval-ui-project") / "proj"
    with pytest.MonkeyPatch.context() as mp:  # module fixtures run before the autouse offline_env
        go_offline(mp)
        cli("init", "proj", "--demo", "--template", "raw", "--with-evals", "--dir", str(root))
        write_json(root / "data" / "locomo10.json", locomo_small()[:1])
        create_branch_file(root, BRANCH)  # branches/exp.py, overriding nothing: the run config changes its search
        pipe = load(root)
        declaration = pipe.evals["locomo"]
        asset = location_definitions(pipe).get_assets_def("eval_locomo")
        # a persistent instance (a temp dir): the GraphQL workspace below needs one it can hand to processes
        instance = DagsterInstance.local_temp(str(tmp_path_factory.mktemp("dagster-home")))
        instance.add_dynamic_partitions("branch", ["main", BRANCH])
        runs = {}
        for branch, mode in (("main", "hybrid"), (BRANCH, "bm25")):
            runs[branch] = materialize([asset], instance=instance, partition_key=eval_partition_key(declaration, branch),
                                       run_config={"ops": {"eval_locomo": {"config": {"search_mode": mode}}}})
            assert runs[branch].success
    yield root, instance, declaration, runs
    instance.dispose()


def materialization(runs, branch):
    [mat] = runs[branch].asset_materializations_for_node("eval_locomo")
    return mat


def stored_results(root):
    con = connect_eval_results(eval_results_path(root / ".synthex"), read_only=True)
    try:
        return {r["branch"]: r for r in latest_results(con, benchmark="locomo")}
    finally:
        con.close()


def test_graphql_names_the_partition_dimension_branch(evaluated, tmp_path):
    """What the UI shows: Dagster's GraphQL API on a workspace loading the project's code location."""
    root, instance, declaration, runs = evaluated
    data = graphql(instance, root, tmp_path, DIMENSIONS, {"key": {"path": ["eval_locomo"]}})
    node = data["assetNodeOrError"]
    dimensions = {d["name"]: d["partitionKeys"] for d in node["partitionKeysByDimension"]}
    assert dimensions == {"branch": ["main", BRANCH], "dataset": ["locomo10"]}
    assert {"name": "branch", "dynamicPartitionsDefinitionName": "branch"} in node["partitionDefinition"]["dimensionTypes"]
    assert dataset_key(declaration) == "locomo10" and str(eval_partition_key(declaration, BRANCH)) == f"{BRANCH}|locomo10"
    # The check, as the UI lists it: scoped to its partition, evaluated on its own run's materialization and
    # not before it (the UI shows the evaluation's timestamp; issue 23 item 3).
    executions = {e["runId"]: e for e in data["assetCheckExecutions"]}
    assert set(executions) == {runs["main"].run_id, runs[BRANCH].run_id}
    for branch in ("main", BRANCH):
        execution = executions[runs[branch].run_id]
        evaluation = execution["evaluation"]
        assert execution["partition"] == evaluation["partition"] == f"{branch}|locomo10" and evaluation["success"]
        assert evaluation["targetMaterialization"]["runId"] == runs[branch].run_id
        assert evaluation["timestamp"] >= evaluation["targetMaterialization"]["timestamp"]


def test_metadata_carries_the_metrics_and_the_scorecard_with_protocols(evaluated):
    root, _, _, runs = evaluated
    stored = stored_results(root)
    assert set(stored) == {"main", BRANCH}
    for branch in ("main", BRANCH):
        mat, result = materialization(runs, branch), stored[branch]
        assert mat.partition == f"{branch}|locomo10"
        assert result["eval_run_id"] == runs[branch].run_id == mat.metadata["eval_run_id"].value
        for level in ("turn", "session"):
            for metric in ("recall_any@10", "recall_all@10", "ndcg_any@10", "mrr"):
                assert mat.metadata[f"{level}/{metric}"].value == result["metrics"][level][metric]
        card = result["scorecard"]
        assert list(card) == list(TARGETS)  # all five figures, measured or saying why not
        measured = {name: e["value"] for name, e in card.items() if e["value"] is not None}
        assert {"precision@5", "temporal_accuracy", "provenance_completeness"} <= set(measured)
        assert {k.removeprefix("scorecard/"): v.value for k, v in mat.metadata.items()
                if k.startswith("scorecard/")} == measured
        table = mat.metadata["scorecard"].value.splitlines()
        assert table[0] == "| figure | value | target | met | protocol |" and len(table) == 2 + len(TARGETS)
        freshness = next(line for line in table if line.startswith("| freshness |"))
        assert "not measurable" in freshness and "no knowledge-update questions" in freshness
        precision = next(line for line in table if line.startswith("| precision@5 |"))
        assert f"| {measured['precision@5']:.4f} | > 0.8 |" in precision and "first 5 ranked turns" in precision
        protocol = mat.metadata["protocol"].value
        assert "**turn**" in protocol and "**session**" in protocol and "top 10" in protocol
    assert stored[BRANCH]["mode"] == "bm25" and stored["main"]["mode"] == "hybrid"
    assert stored[BRANCH]["metrics"]["turn"] != stored["main"]["metrics"]["turn"]  # the two columns differ


def test_a_branch_materialization_compares_with_main_inline(evaluated):
    root, _, _, runs = evaluated
    stored = stored_results(root)
    on_main = materialization(runs, "main")
    assert "compare_main" not in on_main.metadata  # main is not compared with itself
    mat = materialization(runs, BRANCH)
    lines = mat.metadata["compare_main"].value.splitlines()
    assert lines[0].startswith(f"Against main's eval run {runs['main'].run_id} ")
    assert f"| level | metric | {BRANCH} | main | delta |" in lines
    a, b = stored[BRANCH]["metrics"]["turn"]["mrr"], stored["main"]["metrics"]["turn"]["mrr"]
    assert f"| turn | mrr | {a:.4f} | {b:.4f} | {a - b:+.4f} |" in lines
    assert any(line.startswith("| scorecard | precision@5 |") for line in lines)
    png = mat.metadata["compare_chart_file"].value
    assert png.endswith(f"eval_locomo-{BRANCH}-vs-main.png")
    with open(png, "rb") as f:
        data = f.read()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000
    inline = mat.metadata["compare_chart"].value
    assert inline.startswith(f"![{BRANCH} vs main retrieval](data:image/png;base64,")
    assert base64.b64decode(inline.split("base64,", 1)[1].rstrip(")")) == data


def test_the_check_targets_the_materialization_of_its_own_run(evaluated):
    """Issue 23 item 3: the check's evaluation must not point at (or predate) an earlier materialization."""
    _, instance, _, runs = evaluated
    for branch in ("main", BRANCH):
        [check] = runs[branch].get_asset_check_evaluations()
        assert check.check_name == CHECK and check.passed  # 0.5 <= turn recall_any@10 on this fixture
        [record] = instance.get_event_records(EventRecordsFilter(DagsterEventType.ASSET_MATERIALIZATION),
                                              limit=1, ascending=False) if branch == BRANCH else [None]
        target = check.target_materialization_data
        assert target is not None and target.run_id == runs[branch].run_id
        if record is not None:
            assert target.storage_id == record.storage_id and target.timestamp == record.timestamp


def test_eval_report_prints_the_latest_rows_with_the_scorecard_and_writes_the_chart(evaluated, tmp_path):
    root, _, _, runs = evaluated
    stored = stored_results(root)
    out = cli("eval", "report", "--project", root).stdout
    assert "## locomo" in out and str(eval_results_path(root / ".synthex")) in out
    for branch, label in (("main", "main"), (BRANCH, BRANCH)):
        turn = stored[branch]["metrics"]["turn"]
        assert f"| {label} | {runs[branch].run_id} |" in out
        row = next(line for line in out.splitlines() if line.startswith(f"| {label} | 3 |"))
        assert f"| {turn['recall_any@10']:.4f} |" in row and f"| {turn['mrr']:.4f} |" in row
    card_row = next(line for line in out.splitlines() if line.startswith("| precision@5 | > 0.8 |"))
    assert card_row.count("(met)") + card_row.count("(not met)") == 2
    assert "- precision@5: turn level:" in out and "- freshness: LoCoMo has no knowledge-update questions" in out

    png = tmp_path / "compare.png"
    charted = cli("eval", "report", "--project", root, "--branch", BRANCH, "--chart", png, "--json")
    payload = json.loads(charted.stdout)
    assert [r["branch"] for r in payload["results"]] == [BRANCH] and payload["chart"] == str(png)
    assert png.read_bytes().startswith(PNG_MAGIC)

    missing = cli("eval", "report", "--project", root, "--branch", "nope", check=False)
    assert missing.returncode != 0 and "no eval result on branch 'nope'" in missing.stderr


def test_the_schedule_requests_main_on_the_declared_data(evaluated):
    from dagster import build_schedule_context

    root, instance, _, _ = evaluated
    repository = location_definitions(load(root)).get_repository_def()
    schedule = repository.get_schedule_def("eval_locomo_schedule")
    [request] = schedule.evaluate_tick(build_schedule_context(instance=instance, repository_def=repository)).run_requests
    assert request.partition_key == "main|locomo10"
