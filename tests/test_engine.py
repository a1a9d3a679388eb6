"""The engine end to end: real LanceDB in a temp dir, the project's real (temporary) Dagster instance."""

from collections import Counter

import pytest
from conftest import PIPELINE_PY, load, write_project
from dagster import AssetKey

from synthex import Pipeline
from synthex.core.errors import PipelineDefinitionError, StepError
from synthex.core.naming import check_branch_name
from synthex.core.scope import BranchScope


def counts(pipe):
    return {k: v["records"] for k, v in pipe.stats()["steps"].items()}


def test_full_run_then_no_change_run(project, ran_project, tmp_path):
    plan = load(project).plan()  # the same project as the session's, before its run
    assert plan.steps == ["chatgpt", "transcripts", "summaries", "monthly", "world-model"]
    assert plan.estimates["records"] > 0 and plan.estimates["cost"] == 0.0
    pipe = load(ran_project.copy(tmp_path / "ran"))
    run = ran_project.run
    assert run.status == "completed"
    c = counts(pipe)
    assert c["chatgpt"] == c["transcripts"] == c["summaries"] == 12
    periods = len(plan.periods)
    assert c["monthly"] == periods and c["world-model"] == periods
    assert run.stats.output == sum(c.values())
    # Dagster saw one materialization per (step, period), with our metadata.
    instance = pipe.app.instance
    event = instance.get_latest_materialization_event(AssetKey("summaries"))
    meta = event.asset_materialization.metadata
    assert {"records_created", "records_skipped", "errors", "tokens", "duration_s", "preview"} <= set(meta)
    assert event.asset_materialization.partition.startswith("main|")
    # No change: nothing planned, no Dagster run launched.
    assert pipe.plan().steps == []
    again = pipe.run()
    assert again.dagster_run_ids == [] and again.stats.output == 0
    assert counts(pipe) == c


def test_prompt_change_recomputes_only_downstream(tmp_path, ran_project):
    project = ran_project.copy(tmp_path / "proj")
    pipe = load(project)
    first = ran_project.run
    ids_before = {s: {r.id for r in pipe.records(s)} for s in pipe.steps}
    write_project(project, ran_project.export, PIPELINE_PY.replace("Summarize this conversation.", "Summarize briefly:"))
    pipe = load(project)
    run = pipe.run()
    created = {s: v.output for s, v in run.step_stats.items()}
    assert created.get("chatgpt", 0) == 0 and created.get("transcripts", 0) == 0
    assert created["summaries"] == 12
    assert created["monthly"] == first.step_stats["monthly"].output
    assert created["world-model"] == first.step_stats["world-model"].output
    after = {s: {r.id for r in pipe.records(s)} for s in pipe.steps}
    assert after["transcripts"] == ids_before["transcripts"]
    assert not (after["summaries"] & ids_before["summaries"])  # old versions replaced, not duplicated
    assert len(after["summaries"]) == 12


def test_provenance_get_sources_leaves_lineage(ran_project):
    pipe = load(ran_project.root)  # read-only
    world = pipe.store().records.latest(BranchScope.own(), "world-model")
    monthly = world.sources()
    assert {r.step for r in monthly} <= {"monthly", "world-model"}
    leaves = world.leaves()
    assert leaves and all(r.step == "chatgpt" for r in leaves)
    summary = pipe.records("summaries")[0]
    tree = pipe.get(summary.id).lineage()
    assert tree["step"] == "summaries"
    assert tree["sources"][0]["step"] == "transcripts"
    assert tree["sources"][0]["sources"][0]["step"] == "chatgpt"
    assert tree["sources"][0]["sources"][0]["sources"] == []
    d = summary.to_dict()
    assert {"id", "content", "step", "branch", "sources", "materialization_key", "run_id", "created_at",
            "metadata", "audit"} <= set(d)
    assert {"prompt_template_hash", "rendered_prompt_hash", "model", "temperature", "raw_response"} <= set(d["audit"])
    assert "offline" in d["audit"]["model"] and "not an LLM" in d["audit"]["model"]
    assert d["metadata"]["step"]["version_hash"] == pipe.steps["summaries"].version_hash()


def test_failing_prompt_names_step_and_record_and_keeps_data(tmp_path, ran_project):
    project = ran_project.copy(tmp_path / "proj")
    pipe = load(project)
    before = counts(pipe)
    broken = PIPELINE_PY.replace('return "Summarize this conversation.', 'raise ValueError("boom")\n    return "')
    assert broken != PIPELINE_PY
    write_project(project, ran_project.export, broken)
    pipe = load(project)
    with pytest.raises(StepError) as err:
        pipe.run()
    message = str(err.value)
    assert "step 'summaries'" in message and "ValueError: boom" in message and "record " in message
    assert counts(pipe) == before  # nothing lost or half-written
    assert pipe.runs()[0].status == "failed"


def test_toml_round_trip(project, tmp_path):
    pipe = load(project)
    text = pipe.to_toml(tmp_path / "p.toml")
    assert 'prompt = "pipeline:summarize"' in text
    again = Pipeline.from_toml(tmp_path / "p.toml", project_dir=project, allow_effects=True)
    assert list(again.steps) == list(pipe.steps)
    assert {s: again.steps[s].version_hash() for s in again.steps} == {s: pipe.steps[s].version_hash() for s in pipe.steps}
    assert again.outputs.keys() == pipe.outputs.keys()


def test_definition_errors(small_export):
    pipe = Pipeline("x")
    pipe.source("src", file=str(small_export))
    with pytest.raises(PipelineDefinitionError, match="not defined"):
        pipe.transform("t", from_="nope", fn=str)
    with pytest.raises(PipelineDefinitionError, match="period"):
        pipe.aggregate("a", from_="src", period="fortnight", prompt=lambda rs, p: "")
    with pytest.raises(PipelineDefinitionError, match="not allowed"):
        check_branch_name("feature|x")


def test_merge_of_two_sources_dedupes(tmp_path, small_export):
    body = '''
from synthex import Pipeline
pipeline = Pipeline("m")
pipeline.source("a", file={export!r})
pipeline.source("b", file={export!r})
pipeline.merge("unified", from_=["a", "b"])
'''
    root = write_project(tmp_path / "m", small_export, body)
    pipe = load(root)
    pipe.run()
    c = counts(pipe)
    assert c == {"a": 12, "b": 12, "unified": 12}
    unified = pipe.records("unified")
    assert all(len(r.source_ids) == 2 for r in unified)
    assert Counter(r.step for u in unified for r in u.sources()) == {"a": 12, "b": 12}


def test_fold_failing_mid_sequence_keeps_stored_states(tmp_path, ran_project):
    project = ran_project.copy(tmp_path / "proj")
    pipe = load(project)
    before = counts(pipe)
    body = PIPELINE_PY.replace(
        'pipeline.fold("world-model", from_="monthly", prompt=world_model_prompt)',
        'def picky(record, state):\n'
        '    if state:\n'
        '        raise RuntimeError("state too large")\n'
        '    return world_model_prompt(record, state)\n\n\n'
        'pipeline.fold("world-model", from_="monthly", prompt=picky)')
    write_project(project, ran_project.export, body)
    pipe = load(project)
    with pytest.raises(StepError, match=r"step 'world-model'.*RuntimeError: state too large"):
        pipe.run()
    assert counts(pipe) == before  # the failing period kept its previous record; nothing half-written
    run = pipe.runs()[0]
    assert run.status == "failed" and "state too large" in run.error
    assert run.dagster_run_ids  # the first period went through Dagster before the failure
