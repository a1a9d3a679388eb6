"""``pipeline.eval_asset("longmemeval", data=...)`` in pipeline.py: the project gets its ``eval_longmemeval`` asset,
job and threshold check as for LoCoMo (test_eval_assets.py), scored by the official protocol on a LongMemEval-format
fixture (test_longmemeval.py's: one scored question, one abstention and one with no user-side target left out)."""

from __future__ import annotations

from conftest import load, write_json
from dagster import DagsterInstance, materialize
from test_eval_assets import eval_names
from test_longmemeval import PROTOCOL_FIXTURE

from evals.dagster_evals import CHECK
from synthex_assets.code_location import location_definitions

PIPELINE = '''from synthex import Pipeline

pipeline = Pipeline("assistant", agent="t")
pipeline.source("chats", file="data/chats.jsonl")
pipeline.output("search", from_=["chats"], surface="search")
pipeline.eval_asset("longmemeval", data="data/lme_dev.json",
                    thresholds={"session/recall_all@5": 1.0, "turn/recall_any@1": 1.01})
'''


def test_a_longmemeval_declaration_gets_its_asset_job_and_threshold_check(tmp_path):
    project = tmp_path / "proj"
    write_json(project / "data" / "lme_dev.json", PROTOCOL_FIXTURE)
    (project / "data" / "chats.jsonl").write_text(
        '{"id": "m1", "role": "user", "content": "hello", "created_at": "2024-01-01T00:00:00Z"}\n')
    (project / "pipeline.py").write_text(PIPELINE)
    defs = location_definitions(load(project))
    assert eval_names(defs) == ({"eval_longmemeval"}, {"eval_longmemeval_job"}, set())  # no schedule declared
    asset = defs.get_assets_def("eval_longmemeval")
    assert asset.partitions_def.partition_dimension_names == ["branch", "dataset"]
    assert "LongMemEval" in asset.descriptions_by_key[asset.key]

    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("branch", ["main"])
    result = materialize([asset], instance=instance, partition_key="main|lme_dev", raise_on_error=False)
    assert result.success  # a non-blocking check: the asset materializes, the check fails
    [mat] = result.asset_materializations_for_node("eval_longmemeval")
    assert mat.partition == "main|lme_dev"
    assert mat.metadata["n_questions"].value == 1  # the official protocol left out the abstention and no-target ones
    assert mat.metadata["session/recall_all@5"].value == 1.0  # answer_a's user turn is found
    [check] = result.get_asset_check_evaluations()
    assert check.check_name == CHECK and not check.passed
    assert check.description == "turn/recall_any@1 = 1.0000 < threshold 1.01"
