"""The LoCoMo eval as a Dagster asset (partitioned by branch) with its threshold check."""


from conftest import load, write_json
from dagster import DagsterInstance, materialize
from test_eval_cli import fixture

from evals.dagster_evals import CHECK, eval_definitions


def run_eval(pipe, data, thresholds, search_mode="hybrid"):
    defs = eval_definitions(pipe)
    [eval_asset] = [a for a in defs.assets]
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("branch", ["main"])
    return materialize([eval_asset], instance=instance, partition_key="main", raise_on_error=False,
                       run_config={"ops": {"eval_locomo": {"config": {"data": str(data), "thresholds": thresholds,
                                                                       "search_mode": search_mode}}}})


def test_eval_asset_metadata_and_threshold_check(project, tmp_path):
    data = write_json(tmp_path / "locomo10.json", fixture())
    pipe = load(project)
    result = run_eval(pipe, data, {"session/recall_any@10": 0.0})
    assert result.success
    [mat] = result.asset_materializations_for_node("eval_locomo")
    assert mat.partition == "main"
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
