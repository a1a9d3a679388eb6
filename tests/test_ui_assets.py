"""Issue 36 item 8: what a Dagster user expects of an asset, read through Dagster's public API (the
``Definitions``' asset specs): a step's group and owners from the pipeline, its code version readable (step
name + short hash), and ``automation=`` as Dagster's declarative ``AutomationCondition``."""

from __future__ import annotations

import textwrap

import pytest
from conftest import load, write_project
from dagster import AssetKey, AutomationCondition, DefaultSensorStatus

from synthex.core.definition import PipelineDefinition
from synthex.core.errors import PipelineDefinitionError
from synthex_assets import sensors
from synthex_assets.definitions import build_definitions
from synthex_assets.naming import asset_name, job_name

OWNED = '''
from synthex import Pipeline



def text(record):  # a named function: a lambda's version is its source line, options included
    return record.content


def count(records, group):
    return str(len(records))


pipeline = Pipeline("owned", agent="a")
pipeline.source("chatgpt", file="{export}", format="chatgpt-export", group="intake", owners=["team:data"])
pipeline.transform("transcripts", from_="chatgpt", fn=text, group="intake",
                   owners=["ana@example.com", "team:memory"], automation="eager")
pipeline.aggregate("monthly", from_="transcripts", fn=count)
pipeline.output("search", from_=["transcripts"], surface="search")
'''


def specs(pipe: PipelineDefinition) -> dict[str, object]:
    defs = build_definitions(pipe)
    return {s.key.to_user_string(): s for s in defs.resolve_all_asset_specs()}


def test_group_owners_version_and_automation_reach_the_asset_specs(tmp_path, small_export):
    pipe = load(write_project(tmp_path / "p", small_export, OWNED))
    found = specs(pipe)
    assert found["chatgpt"].group_name == "intake" and found["chatgpt"].owners == ["team:data"]
    assert found["transcripts"].owners == ["ana@example.com", "team:memory"]
    assert found["monthly"].group_name == "owned" and found["monthly"].owners == []  # the pipeline's group
    for step in ("chatgpt", "transcripts", "monthly"):
        version = pipe.steps[step].version_hash()
        assert found[step].code_version == f"{step}@{version[:10]}"
    eager = found["transcripts"].automation_condition
    assert eager is not None and eager.get_label() == AutomationCondition.eager().get_label()
    assert found["monthly"].automation_condition is None and found["chatgpt"].automation_condition is None


def test_a_plain_pipelines_code_versions_read_as_step_and_short_hash(project):
    """Without any of the new options (so it also runs on a pipeline.py from before them): the UI's code
    version names the step and starts with its version hash."""
    pipe = load(project)
    found = specs(pipe)
    assert {s: found[asset_name(s)].code_version for s in pipe.steps} == \
        {s: f"{s}@{pipe.steps[s].version_hash()[:10]}" for s in pipe.steps}


def test_options_change_no_version_and_survive_a_toml_round_trip(tmp_path, small_export):
    root = write_project(tmp_path / "p", small_export, OWNED)
    owned = load(root)
    plain = load(write_project(tmp_path / "q", small_export, OWNED.replace(', group="intake", owners=["team:data"]', "")
                               .replace(', group="intake",\n                   owners=["ana@example.com", '
                                        '"team:memory"], automation="eager"', "")))
    assert plain.steps["transcripts"].owners == () and plain.steps["transcripts"].automation is None
    assert {s: owned.steps[s].version_hash() for s in owned.steps} == \
        {s: plain.steps[s].version_hash() for s in plain.steps}
    toml = owned.to_toml_dict()["steps"]
    assert toml[1]["group"] == "intake" and toml[1]["owners"] == ["ana@example.com", "team:memory"]
    assert toml[1]["automation"] == "eager" and "owners" not in toml[2]
    (root / "shared.toml").write_text(owned.to_toml(), encoding="utf-8")
    back = PipelineDefinition.from_toml(root / "shared.toml", trust=True, allow_effects=True)
    assert back.steps["transcripts"].owners == ("ana@example.com", "team:memory")
    assert back.steps["transcripts"].automation == "eager" and back.steps["chatgpt"].group == "intake"


@pytest.mark.parametrize(("option", "said"), [
    ('owners=["ana"]', "owner 'ana' is neither an email"),
    ('owners=["team:"]', "owner 'team:' is neither an email"),
    ('owners="team:a b"', "owner 'team:a b' is neither an email"),
    ('group="my group"', "group='my group': a group is 1-64 letters"),
    ('automation="always"', "automation='always'; expected one of eager"),
])
def test_a_bad_option_is_one_line_naming_the_step(tmp_path, small_export, option, said):
    body = textwrap.dedent(f'''
        from synthex import Pipeline

        pipeline = Pipeline("bad", agent="a")
        pipeline.source("chatgpt", file="{{export}}", format="chatgpt-export")
        pipeline.transform("transcripts", from_="chatgpt", fn=lambda r: r.content, {option})
        ''')
    with pytest.raises(PipelineDefinitionError) as caught:
        load(write_project(tmp_path / "p", small_export, body))
    assert "step 'transcripts'" in str(caught.value) and said in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_source_cannot_ask_for_automation(tmp_path, small_export):
    body = OWNED.replace('owners=["team:data"])', 'automation="eager")')
    with pytest.raises(PipelineDefinitionError, match="source 'chatgpt': automation='eager': a source is synced"):
        load(write_project(tmp_path / "p", small_export, body))


def test_an_automation_run_says_so():
    from synthex_assets.run_tags import LAUNCHED_BY_AUTOMATION, launched_by  # (the module is issue 36's)

    tags = {"dagster/from_automation_condition": "true", "dagster/sensor_name": "default_automation_condition_sensor"}
    assert launched_by(tags) == LAUNCHED_BY_AUTOMATION


def test_the_automated_steps_have_a_running_automation_sensor_and_other_pipelines_none(tmp_path, small_export):
    pipe = load(write_project(tmp_path / "p", small_export, OWNED))
    sensor = build_definitions(pipe).resolve_sensor_def(sensors.automation_sensor_name(pipe))
    assert sensor.default_status == DefaultSensorStatus.RUNNING
    assert sensor.asset_selection.resolve(build_definitions(pipe).resolve_asset_graph()) == {AssetKey("transcripts")}
    plain = load(write_project(tmp_path / "q", small_export, OWNED.replace(', automation="eager"', "")))
    assert all(s.name != sensors.automation_sensor_name(plain) for s in build_definitions(plain).sensors)


def test_the_job_a_ui_asset_backfill_runs_executes_in_process(project):
    """An asset backfill (Lineage / Catalog "Materialize") runs Dagster's implicit asset job: in process, like
    the pipeline's own job, not a new Python per step (item 7: most of a backfill run's time)."""
    defs = build_definitions(load(project))
    implicit = defs.resolve_implicit_job_def_def_for_assets([AssetKey("summaries")])
    assert implicit is not None and implicit.executor_def.name == "in_process"
    assert defs.resolve_job_def(job_name(load(project).name)).executor_def.name == "in_process"
