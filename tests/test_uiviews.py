"""The Dagster UI as a Dagster user reads it (issue 23), through a real instance's event log: a step's
latest materialization is its newest period, a run that changes nothing still shows what a partition
holds, an invented period is refused, checks sit where they can fail (and fail), and the offline
stand-in is named."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest
from conftest import PIPELINE_PY, load, write_project
from dagster import AssetKey, DagsterEventType, DagsterInstance, deserialize_value, serialize_value

from synthex.core.record import Record
from synthex.core.steps.transform import TransformStep
from synthex_assets import dagster_internals as internals
from synthex_assets.checks import HOOKS, PROVENANCE, RECORDS_PLANNED, UP_TO_DATE
from synthex_assets.dagster_internals import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    DefaultPartitionsSubset,
)
from synthex_assets.definitions import build_definitions
from synthex_assets.naming import job_name
from synthex_assets.partitions import STEP_PARTITIONS, is_period, register
from synthex_assets.step_assets import LLM_TAG, OFFLINE_TAG_VALUE
from synthex_resources.llm import OFFLINE_STAND_IN, LLMConfig

STEPS = ["chatgpt", "transcripts", "summaries", "monthly", "world_model"]


def launch_like_the_ui(pipe, start: str, end: str, steps: list[str] | None = None, branch: str = "main"):
    """A single-run backfill as the UI launches it: the location's own job (configured resources) over
    the partition range ``branch|start`` .. ``branch|end``."""
    job = build_definitions(pipe).resolve_job_def(job_name(pipe.name))
    tags = {ASSET_PARTITION_RANGE_START_TAG: f"{branch}|{start}", ASSET_PARTITION_RANGE_END_TAG: f"{branch}|{end}"}
    selection = [AssetKey(s.replace("-", "_")) for s in steps] if steps else None
    return job.execute_in_process(instance=pipe.app.instance, tags=tags, raise_on_error=False,
                                  asset_selection=selection)


def materializations(instance: DagsterInstance, asset: str, run_id: str | None = None) -> list:
    """The asset's materializations, oldest first (of one run when ``run_id``)."""
    records = instance.fetch_materializations(AssetKey(asset), limit=1000, ascending=True).records
    return [r.asset_materialization for r in records if run_id is None or r.run_id == run_id]


@pytest.fixture(scope="module")
def noop_rerun(ran_project, tmp_path_factory):
    """The session's run project (one CLI run), then a UI backfill over every period that changes nothing."""
    pipe = load(ran_project.copy(tmp_path_factory.mktemp("uiviews") / "proj"))
    periods = pipe.plan(full=True).periods
    instance = pipe.app.instance
    cli_run = {s: materializations(instance, s) for s in STEPS}
    result = launch_like_the_ui(pipe, periods[0], periods[-1])
    assert result.success
    yield pipe, periods, cli_run, result.run_id
    pipe.close()


def test_a_steps_latest_materialization_is_its_newest_period(noop_rerun):
    pipe, periods, cli_run, _ = noop_rerun
    assert len(periods) >= 3  # else any order would pass
    for step in STEPS:
        # One run recorded the step's partitions oldest period first...
        assert [m.partition for m in cli_run[step]] == [f"main|{p}" for p in periods], step
        assert all(m.metadata["changed"].value for m in cli_run[step])
        # ...so the asset's latest materialization is its newest period.
        latest = pipe.app.instance.get_latest_materialization_event(AssetKey(step)).asset_materialization
        assert latest.partition == f"main|{periods[-1]}", step


def test_a_run_that_changes_nothing_keeps_showing_what_a_partition_holds(noop_rerun):
    pipe, periods, _, run_id = noop_rerun
    instance = pipe.app.instance
    newest = max(pipe.records("world-model"), key=lambda r: r.period)
    [world] = [m for m in materializations(instance, "world_model", run_id) if m.partition == f"main|{newest.period}"]
    assert world.metadata["changed"].value is False
    assert world.metadata["records_created"].value == 0 and world.metadata["records_total"].value == 1
    preview = world.metadata["preview"].value
    assert "unchanged by this run; 1 record(s) held" in preview
    assert f"`{newest.id[:8]}`" in preview  # the world model the partition holds, not "no new records"
    summaries = {m.partition: m for m in materializations(instance, "summaries", run_id)}
    assert list(summaries) == [f"main|{p}" for p in periods]  # the no-op run in period order too
    for period in periods:
        held = [r for r in pipe.records("summaries") if r.period == period]
        meta = summaries[f"main|{period}"].metadata
        assert meta["changed"].value is False and meta["records_total"].value == len(held) > 0
        assert sum(f"`{r.id[:8]}`" in meta["preview"].value for r in held) == min(3, len(held))


def test_the_period_order_survives_dagsters_serialization():
    """The ordered subset is stored as, and read back anywhere as, Dagster's own class."""
    chronological = [f"{'dev' if m % 3 == 0 else 'main'}|2024-{m:02d}" for m in range(1, 13)]
    subset = STEP_PARTITIONS.empty_subset().with_partition_keys(reversed(chronological))
    assert isinstance(subset, DefaultPartitionsSubset)
    assert list(subset.get_partition_keys()) == chronological  # a set's order would match 1 time in 12!
    back = deserialize_value(serialize_value(subset))
    assert type(back) is internals._default_subset.DefaultPartitionsSubset and back.subset == subset.subset


def test_an_invented_period_is_refused_and_nothing_is_materialized(ran_project, tmp_path):
    pipe = load(ran_project.copy(tmp_path / "proj"))
    try:
        instance = pipe.app.instance
        periods = instance.get_dynamic_partitions("period")  # registered by the run
        before = {s: len(materializations(instance, s)) for s in STEPS}
        counts = {s: len(pipe.records(s)) for s in pipe.steps}
        instance.add_dynamic_partitions("period", ["not-a-month"])  # what the UI's "Add a partition" does
        assert not is_period("not-a-month") and not is_period("2024-13") and is_period("all")
        assert all(is_period(p) for p in periods)
        result = launch_like_the_ui(pipe, periods[0], "not-a-month")
        assert not result.success
        failures = [e for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE]
        assert [f.step_key for f in failures] == ["chatgpt"]  # the first step; the others never start
        message = failures[0].event_specific_data.error.message.strip()
        assert "main|not-a-month: not a period (a calendar month, YYYY-MM" in message and "\n" not in message
        assert instance.get_records_for_run(result.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION).records == []
        assert {s: len(materializations(instance, s)) for s in STEPS} == before
        assert {s: len(pipe.records(s)) for s in pipe.steps} == counts
    finally:
        pipe.close()


class DanglingTransform(TransformStep):
    """A transform whose records name a source id that is not in the store (a provenance bug)."""

    def produce(self, items, ctx) -> tuple[list[Record], int]:
        records, tokens = super().produce(items, ctx)
        return [replace(r, source_ids=[*r.source_ids, "0000000000000000-missing"]) for r in records], tokens


HOOK_ON_TRANSCRIPTS = PIPELINE_PY + '''

def unreachable(payload):
    raise ConnectionError("hook endpoint down")


pipeline.output("latest-transcript", from_="transcripts", surface="projection", on_update=unreachable)
'''


def test_each_check_sits_where_it_can_fail_and_fails(tmp_path, small_export):
    pipe = load(write_project(tmp_path / "proj", small_export, HOOK_ON_TRANSCRIPTS))
    try:
        graph = build_definitions(pipe).resolve_asset_graph()
        carried = {(k.asset_key.to_user_string(), k.name) for k in graph.asset_check_keys}
        assert carried == {(s, str(c)) for s in STEPS for c in (PROVENANCE, RECORDS_PLANNED, UP_TO_DATE)} | \
            {("transcripts", str(HOOKS))}
        step = pipe.steps["transcripts"]
        dangling = DanglingTransform(**{f.name: getattr(step, f.name) for f in fields(step) if f.init})
        dangling.use_limits(pipe.limits)
        pipe.steps["transcripts"] = dangling
        periods = pipe.plan(full=True).periods
        register(pipe.app.instance, "main", periods)
        first = launch_like_the_ui(pipe, periods[0], periods[-1], steps=["chatgpt", "transcripts"])
        assert first.success  # the records are written; what failed is a check
        verdicts = {(e.asset_key.to_user_string(), e.check_name): e for e in first.get_asset_check_evaluations()}
        assert set(verdicts) == {("chatgpt", "provenance_complete"), ("chatgpt", "up_to_date"),
                                 ("transcripts", "provenance_complete"), ("transcripts", "up_to_date"),
                                 ("transcripts", "hooks_delivered"),
                                 ("chatgpt", "records_planned"), ("transcripts", "records_planned")}
        provenance = verdicts[("transcripts", "provenance_complete")]
        assert not provenance.passed and "0000000000000000-missing" in provenance.metadata["detail"].value
        hooks = verdicts[("transcripts", "hooks_delivered")]
        assert not hooks.passed and "hook endpoint down" in hooks.metadata["detail"].value
        assert verdicts[("chatgpt", "provenance_complete")].passed and verdicts[("transcripts", "up_to_date")].passed
        # The result names the partitions its run covered (Dagster records it with no partition).
        assert provenance.metadata["partitions"].value == f"main|{periods[0]} .. main|{periods[-1]} ({len(periods)})"
        assert provenance.partition is None
        # monthly alone: the summaries it reads are missing, so it is not up to date.
        second = launch_like_the_ui(pipe, periods[0], periods[-1], steps=["monthly"])
        assert second.success
        up_to_date = {e.check_name: e for e in second.get_asset_check_evaluations()}["up_to_date"]
        assert not up_to_date.passed and "summaries main|" in up_to_date.metadata["detail"].value
    finally:
        pipe.close()


def test_the_offline_stand_in_is_named_in_the_ui(noop_rerun):
    pipe, periods, cli_run, run_id = noop_rerun
    assert LLMConfig().is_offline()
    defs = build_definitions(pipe)
    graph = defs.resolve_asset_graph()
    summaries = graph.get(AssetKey("summaries"))
    assert f"Model: {OFFLINE_STAND_IN}" in summaries.description
    assert f"'model': '{OFFLINE_STAND_IN}'" in summaries.metadata["synthex/config"]
    assert "Model:" not in graph.get(AssetKey("transcripts")).description  # plain Python: no model named
    assert defs.resources["llm"].model == OFFLINE_STAND_IN  # the resource config, not "model: None"
    assert LLMConfig(model=OFFLINE_STAND_IN).resolved()["model"] == "gpt-4o-mini"  # never sent as a model
    # Every materialization of a model step says who wrote it; the run is tagged.
    assert all(m.metadata[LLM_TAG].value == OFFLINE_STAND_IN for m in cli_run["summaries"] + cli_run["monthly"])
    assert LLM_TAG not in cli_run["transcripts"][0].metadata
    assert pipe.app.instance.get_run_by_id(run_id).tags[LLM_TAG] == OFFLINE_TAG_VALUE
