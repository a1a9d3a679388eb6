"""One engine for the CLI and the UI: a `synthex run` is one Dagster run of the pipeline's own job, and
launching that job the way the UI does (a partition range on the configured resources) leaves the
same records, fires the same hooks and folds the index; a fold never runs out of period order."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import PIPELINE_PY, env_without_openai, load, write_project
from dagster import AssetKey, DagsterEventType

from synthex.core.errors import SynthexError
from synthex_assets.checks import CHECKS
from synthex_assets.dagster_internals import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from synthex_assets.definitions import build_definitions
from synthex_assets.naming import job_name, location_name
from synthex_assets.partitions import register
from synthex_resources.search.engine import SearchEngine

HOOKED = PIPELINE_PY.replace(
    'pipeline.output("context", from_="world-model", surface="projection")',
    'import pathlib\n\n\n'
    'def remember_update(payload):\n'
    '    with open(pathlib.Path(__file__).parent / "hooks.log", "a") as out:\n'
    '        out.write(payload["branch"] + " " + payload["record"]["id"] + "\\n")\n\n\n'
    'pipeline.output("context", from_="world-model", surface="projection", on_update=remember_update)')
STEPS = ["chatgpt", "transcripts", "summaries", "monthly", "world-model"]


def snapshot(pipe) -> dict[str, dict[str, str]]:
    return {s: {r.id: r.content for r in pipe.records(s)} for s in STEPS}


def launch_like_the_ui(pipe, periods: list[str], branch: str = "main", steps: list[str] | None = None):
    """What a single-run backfill from the UI does: the Definitions' own job (configured resources,
    not the CLI's live objects) over a partition range of one branch (``periods[0]`` to ``periods[-1]``
    in the order the instance registered them)."""
    instance = pipe.app.instance
    register(instance, branch, periods)
    job = build_definitions(pipe).resolve_job_def(job_name(pipe.name))
    tags = {ASSET_PARTITION_RANGE_START_TAG: f"{branch}|{periods[0]}",
            ASSET_PARTITION_RANGE_END_TAG: f"{branch}|{periods[-1]}"}
    selection = [AssetKey(s.replace("-", "_")) for s in steps] if steps else None
    return job.execute_in_process(instance=instance, tags=tags, raise_on_error=False, asset_selection=selection)


def failure_message(result) -> tuple[str, str]:
    [failure] = [e for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE]
    return failure.step_key, failure.event_specific_data.error.message


def test_a_synthex_run_is_one_dagster_run_of_the_pipeline_job(tmp_path, ran_project):
    pipe = load(ran_project.root)  # read here; the job snapshot names the project's path, so not a copy
    run = ran_project.run
    instance = pipe.app.instance
    [dagster_run] = instance.get_runs()
    assert dagster_run.run_id == run.id and run.dagster_run_ids == [run.id]
    assert dagster_run.job_name == job_name(pipe.name)  # the pipeline's own job, not an ephemeral one
    # The UI finds it in the project's code location, so it lists, times and re-executes it.
    assert dagster_run.remote_job_origin.location_name == location_name(pipe.name)
    assert dagster_run.tags[ASSET_PARTITION_RANGE_START_TAG].startswith("main|")
    # ...recorded against the job version the location serves (else the UI warns on re-execute).
    location_job = build_definitions(pipe).resolve_job_def(job_name(pipe.name))
    lineage = instance.get_job_snapshot(dagster_run.job_snapshot_id).lineage_snapshot
    assert lineage.parent_snapshot_id == location_job.get_job_snapshot_id()
    periods = pipe.plan(full=True).periods
    materialized = instance.get_materialized_partitions(AssetKey("world_model"))
    assert materialized == {f"main|{p}" for p in periods}
    # Per-partition metadata carries that partition's own figures.
    records = [e.event_log_entry.dagster_event.event_specific_data.materialization
               for e in instance.fetch_materializations(AssetKey("summaries"), limit=100).records]
    per_partition = {m.partition: m.metadata["records_total"].value for m in records}
    assert sum(per_partition.values()) == 12 and len(per_partition) == len(periods)
    # Every step asset's checks ran and passed (hooks_delivered only where a hook can fire: none here).
    checks = [e.dagster_event.event_specific_data
              for e in instance.all_logs(run.id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)]
    assert {(c.asset_key.to_user_string(), c.check_name) for c in checks} == {
        (s.replace("-", "_"), check) for s in STEPS for check in CHECKS if check != "hooks_delivered"}
    assert all(c.passed for c in checks)
    # A run with nothing to do launches nothing.
    again = load(ran_project.copy(tmp_path / "proj"))
    assert again.run().dagster_run_ids == [] and len(again.app.instance.get_runs()) == 1


def test_a_ui_launch_leaves_what_a_cli_run_leaves(tmp_path, small_export):
    cli = load(write_project(tmp_path / "cli", small_export, HOOKED))
    cli.run()
    ui = load(write_project(tmp_path / "ui", small_export, HOOKED))
    periods = ui.plan().periods
    result = launch_like_the_ui(ui, periods)
    assert result.success
    assert snapshot(ui) == snapshot(cli)  # same ids, same contents, every step
    # The hook fired on both paths, for the same final record.
    cli_hooks = (tmp_path / "cli" / "hooks.log").read_text().split()
    ui_hooks = (tmp_path / "ui" / "hooks.log").read_text().split()
    assert cli_hooks[-1] == ui_hooks[-1] == cli.projection("context").id
    # The index was folded on the UI path too, and the plan agrees that nothing is stale.
    assert SearchEngine(ui.app.store).ensure_index(optimize=False, stem=False)["fts_unindexed"] == 0
    assert ui.plan().steps == []
    assert {e.asset_key.to_user_string() for e in result.get_asset_check_evaluations() if e.passed} == {
        s.replace("-", "_") for s in STEPS}
    # `synthex runs` reports the UI's run with Dagster's status and timing.
    [ui_run] = ui.runs()
    assert ui_run.id == result.run_id and ui_run.status == "completed" and ui_run.wall_s > 0


def test_a_fold_refuses_to_run_ahead_of_a_stale_earlier_period(tmp_path, ran_project):
    project = ran_project.copy(tmp_path / "proj")  # after one run
    # A new summary prompt makes every period stale, the fold's chain included.
    write_project(project, ran_project.export, PIPELINE_PY.replace("Summarize this conversation.", "Summarize briefly:"))
    pipe = load(project)
    periods = pipe.plan().periods
    assert len(periods) >= 2
    last_only = launch_like_the_ui(pipe, periods[-1:])
    assert not last_only.success
    step, message = failure_message(last_only)
    assert step == "world_model"
    assert f"main|{periods[-1]}" in message and periods[0] in message and "stale" in message
    # The whole range in one run folds in order and converges with a CLI run.
    assert launch_like_the_ui(pipe, periods).success
    assert pipe.plan().steps == []


def test_run_wall_time_and_per_step_stats_are_recorded(ran_project):
    pipe = load(ran_project.root)  # read-only
    run = ran_project.run
    assert run.wall_s > 0 and run.wall_s >= run.stats.duration * 0.5
    stored = pipe.runs()[0]
    assert stored.id == run.id and stored.wall_s == pytest.approx(run.wall_s, abs=1e-3)
    assert set(stored.step_stats) == set(STEPS)
    assert stored.step_stats["summaries"].output == 12


def test_a_fold_refuses_a_gap_in_its_periods(tmp_path, small_export):
    """Periods registered out of calendar order make a UI range skip one: the fold must not jump it."""
    pipe = load(write_project(tmp_path / "gap", small_export))
    first, middle, last = pipe.plan().periods[:3]
    register(pipe.app.instance, "main", [first, last, middle])  # insertion order: a range first..last skips middle
    gap = launch_like_the_ui(pipe, [first, last])
    step, message = failure_message(gap)
    assert step == "world_model" and middle in message and "not in this run" in message
    assert pipe.records("world-model") == []  # nothing folded past the gap
    assert pipe.run().status == "completed" and pipe.plan().steps == []  # the CLI run fills it in order


def test_up_to_date_fails_when_a_step_is_materialized_over_stale_upstream(tmp_path, ran_project):
    project = ran_project.copy(tmp_path / "proj")  # after one run
    write_project(project, ran_project.export, PIPELINE_PY.replace("Summarize this conversation.", "Summarize briefly:"))
    pipe = load(project)
    result = launch_like_the_ui(pipe, pipe.plan().periods, steps=["monthly"])  # summaries are stale
    assert result.success
    verdicts = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert not verdicts["up_to_date"].passed and "summaries" in verdicts["up_to_date"].metadata["detail"].value
    assert verdicts["provenance_complete"].passed


def test_an_undelivered_hook_fails_its_check_not_the_records(tmp_path, small_export):
    body = PIPELINE_PY.replace(
        'pipeline.output("context", from_="world-model", surface="projection")',
        'def unreachable(payload):\n    raise ConnectionError("hook endpoint down")\n\n\n'
        'pipeline.output("context", from_="world-model", surface="projection", on_update=unreachable)')
    pipe = load(write_project(tmp_path / "hooked", small_export, body))
    with pytest.raises(SynthexError, match=r"world_model:hooks_delivered: .*hook endpoint down"):
        pipe.run()
    assert len(pipe.records("world-model")) == len(pipe.plan(full=True).periods)  # the records are written
    assert pipe.runs()[0].status == "failed"


def test_a_run_with_nothing_to_do_loads_neither_dagster_nor_lancedb(tmp_path, ran_project):
    project = ran_project.copy(tmp_path / "proj")  # after one run
    probe = (f"import sys; from synthex.core.project import load_pipeline; run = load_pipeline({str(project)!r}).run(); "
             "print(run.dagster_run_ids, 'dagster' in sys.modules, 'lancedb' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env=env_without_openai()).stdout.split()
    assert out == ["[]", "False", "False"]


def test_a_hook_url_must_be_http(tmp_path):
    from synthex import Pipeline
    from synthex.core.errors import PipelineDefinitionError

    pipe = Pipeline("hooks", project_dir=tmp_path)
    pipe.source("notes", file=str(tmp_path), format="folder")
    for url in ("file:///etc/passwd", "ftp://host/x", "data:text/plain,hi"):
        with pytest.raises(PipelineDefinitionError, match="callable or an http"):
            pipe.output(f"o{len(pipe.outputs)}", from_="notes", surface="projection", on_update=url)
    pipe.output("ok", from_="notes", surface="projection", on_update="https://example.invalid/hook")


def test_a_code_location_refuses_to_run_a_pipeline_py_that_changed_since_it_loaded(tmp_path, ran_project):
    """After a promote (or any edit) from the CLI, a long-lived UI process must not run the old
    definition: it would take the new records for stale ones and delete them."""
    import os

    project = ran_project.copy(tmp_path / "proj")  # after one run
    pipe = load(project)
    path = project / "pipeline.py"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000_000))
    result = launch_like_the_ui(pipe, pipe.plan(full=True).periods, steps=["chatgpt"])
    assert not result.success
    step, message = failure_message(result)
    assert step == "chatgpt" and "changed since this code location loaded it; reload the code location" in message
