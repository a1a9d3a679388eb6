"""Evals in the Dagster UI only when the project asks (``pipeline.eval_asset`` in pipeline.py, or
``synthex init --with-evals``): the asset partitioned by the ``branch`` dynamic partitions, its data file
taken from the project, a described job and schedule, and a threshold check that fails in one line."""

from __future__ import annotations

import pytest
from conftest import cli, load, write_json
from dagster import DagsterInstance, materialize
from test_eval_cli import fixture

from evals.dagster_evals import CHECK
from synthex.core.definition import PipelineDefinition
from synthex.core.errors import PipelineDefinitionError
from synthex_assets.code_location import location_definitions
from synthex_assets.partitions import BRANCHES

STREAM_ONLY = 'from synthex import Pipeline\n\npipeline = Pipeline("streamy", agent="t")\n' \
              'pipeline.source("memory", stream="memory.jsonl")\n'


def eval_names(defs) -> tuple[set[str], set[str], set[str]]:
    """(eval asset keys, eval jobs, schedules) of a location's Definitions."""
    assets = {k.to_user_string() for k in defs.resolve_all_asset_keys() if k.to_user_string().startswith("eval_")}
    repo = defs.get_repository_def()
    jobs = {j.name for j in repo.get_all_jobs() if j.name.startswith(("eval_", "nightly_eval"))}
    return assets, jobs, {s.name for s in repo.schedule_defs if s.name.startswith(("eval_", "nightly_eval"))}


@pytest.fixture(scope="module")
def initialized(tmp_path_factory):
    """`synthex init --with-evals` (the raw template over the demo export): the declaration, not yet its data."""
    root = tmp_path_factory.mktemp("eval-assets-project")
    cli("init", "withevals", "--demo", "--template", "raw", "--with-evals", "--dir", str(root / "withevals"))
    return root / "withevals"


def test_a_project_that_asks_for_no_eval_has_none(tmp_path):
    (tmp_path / "streamy").mkdir()
    (tmp_path / "streamy" / "pipeline.py").write_text(STREAM_ONLY)
    pipe = load(tmp_path / "streamy")
    assert pipe.evals == {}
    defs = location_definitions(pipe)
    assert "memory" in {k.to_user_string() for k in defs.resolve_all_asset_keys()}  # the location did load
    assert eval_names(defs) == (set(), set(), set())
    assert {s.name for s in defs.get_repository_def().schedule_defs} == {"streamy_reconcile"}  # its own only


def test_init_with_evals_declares_the_asset_job_and_schedule(initialized):
    text = (initialized / "pipeline.py").read_text()
    assert 'pipeline.eval_asset("locomo", data="data/locomo10.json", schedule="0 3 * * *"' in text
    pipe = load(initialized)
    [declaration] = pipe.evals.values()
    # The data file is the project's, not a path next to the installed evals package.
    assert declaration.data_path(pipe.project_dir) == initialized.resolve() / "data" / "locomo10.json"
    assert declaration.thresholds == {"turn/recall_any@10": 0.5}

    defs = location_definitions(pipe)
    assert eval_names(defs) == ({"eval_locomo"}, {"eval_locomo_job"}, {"eval_locomo_schedule"})
    asset = defs.get_assets_def("eval_locomo")
    # branch x dataset: a dimension named "branch" in the UI (test_eval_ui_loop), the step assets' BRANCHES
    assert asset.partitions_def.get_partitions_def_for_dimension("branch") is BRANCHES and BRANCHES.name == "branch"
    assert asset.partitions_def.partition_dimension_names == ["branch", "dataset"]
    assert "data/locomo10.json" in asset.descriptions_by_key[asset.key]
    repo = defs.get_repository_def()
    job = repo.get_job("eval_locomo_job")
    assert job.partitions_def == asset.partitions_def and "LoCoMo" in job.description
    schedule = repo.get_schedule_def("eval_locomo_schedule")
    assert schedule.cron_schedule == "0 3 * * *" and schedule.job_name == "eval_locomo_job"
    assert "main" in schedule.description


def test_the_declaration_round_trips_through_export_toml(initialized, tmp_path):
    pipe = load(initialized)
    pipe.evals.clear()
    pipe.eval_asset("locomo", data="data/locomo10.json", schedule="0 3 * * *",
                    thresholds={"turn.recall_all@10": 0.7, "session/ndcg_any@10": 0.2}, blocking=True)
    assert pipe.evals["locomo"].thresholds == {"turn/recall_all@10": 0.7, "session/ndcg_any@10": 0.2}
    toml = tmp_path / "pipeline.toml"
    pipe.to_toml(toml)
    again = PipelineDefinition.from_toml(toml, project_dir=initialized)
    assert again.evals == pipe.evals
    with pytest.raises(PipelineDefinitionError, match="threshold metric 'recall@10'"):
        again.eval_asset("longmemeval", data="x.json", thresholds={"recall@10": 0.5})
    with pytest.raises(PipelineDefinitionError, match="already declared"):
        again.eval_asset("locomo", data="x.json")


def materialize_eval(project, **config):
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("branch", ["main"])
    defs = location_definitions(load(project))
    return materialize([defs.get_assets_def("eval_locomo")], instance=instance, partition_key="main|locomo10",
                       raise_on_error=False, run_config={"ops": {"eval_locomo": {"config": config}}} if config else None)


def test_a_missing_data_file_fails_in_one_line_naming_it(initialized):
    result = materialize_eval(initialized)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    message = failure.step_failure_data.error.message.strip()
    missing = str(initialized.resolve() / "data" / "locomo10.json")
    assert f"data file {missing} does not exist" in message and "\n" not in message


def test_a_threshold_above_the_score_fails_the_check_naming_metric_value_and_threshold(initialized, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    write_json(project / "data" / "locomo10.json", fixture())
    (project / "pipeline.py").write_text(
        (initialized / "pipeline.py").read_text().replace(
            'thresholds={"turn/recall_any@10": 0.5}', 'thresholds={"turn/recall_all@10": 1.01, "session/recall_any@10": 0.0}'))
    result = materialize_eval(project)
    assert result.success  # a non-blocking check: the asset materializes, the check fails
    [mat] = result.asset_materializations_for_node("eval_locomo")
    score = mat.metadata["turn/recall_all@10"].value
    assert mat.partition == "main|locomo10" and 0.0 < score < 1.01
    [check] = result.get_asset_check_evaluations()
    assert check.check_name == CHECK and not check.passed
    assert check.description == f"turn/recall_all@10 = {score:.4f} < threshold 1.01"
    assert set(check.metadata["failing"].value) == {"turn/recall_all@10"}

    # Run config may replace the declared thresholds: met, the same check passes.
    passing = materialize_eval(project, thresholds={"turn.recall_all@10": 0.0})
    [check] = passing.get_asset_check_evaluations()
    assert check.passed and check.description == "all 1 thresholds met"
