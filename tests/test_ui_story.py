"""Issue 36: the Dagster UI tells the same story as `synthex`, read through Dagster's own APIs (a real
instance, its run launcher, sensors evaluated with ``build_sensor_context``): every run names its branch
and door, a run over a partition key nobody made is refused before any step (no red asset), keys added
by hand are removed, and a partition's data version is the hash of what it holds."""

from __future__ import annotations

import json
from dataclasses import fields, replace

import pytest
from conftest import PIPELINE_PY, cli, graphql, load, write_project
from dagster import (
    AssetCheckSeverity,
    AssetKey,
    AssetRecordsFilter,
    DagsterEventType,
    DagsterRunStatus,
    SensorResult,
    SkipReason,
    build_sensor_context,
)
from dagster._core.definitions.reconstruct import ReconstructableRepository
from test_sensors import Live, dagster_instance, make_project
from test_uiviews import STEPS, launch_like_the_ui, materializations

from synthex.core.project import create_branch_file
from synthex.core.steps.kinds import step_kinds
from synthex_assets import sensors
from synthex_assets import step_assets as assets
from synthex_assets.dagster_internals import partition_range_tags
from synthex_assets.definitions import build_definitions
from synthex_assets.instance import open_instance
from synthex_assets.naming import CODE_LOCATION_MODULE, job_name
from synthex_assets.partitions import register
from synthex_assets.run_launcher import WarmRunLauncher

DATA_VERSION_TAG = "dagster/data_version"
# The tag and metadata names a Dagster user filters runs and reads partitions by, spelled as the UI shows them
# (synthex_assets.run_tags and synthex_assets.served define them). Spelled out, not imported, so this module
# also loads on the code from before issue 36 and each test fails there on its own assertion.
BRANCH_TAG = "synthex/branch"
LAUNCHED_BY_TAG = "synthex/launched_by"
REFUSED_TAG = "synthex/refused"
SERVED_BY_KEY = "served_by"
CONTENT_VERSION_KEY = "synthex/content_version"


def test_the_names_spelled_here_are_the_librarys():
    from synthex_assets import run_tags, served

    assert (run_tags.BRANCH_TAG, run_tags.LAUNCHED_BY_TAG, run_tags.REFUSED_TAG) == \
        (BRANCH_TAG, LAUNCHED_BY_TAG, REFUSED_TAG)
    assert (served.SERVED_BY_KEY, served.CONTENT_VERSION_KEY) == (SERVED_BY_KEY, CONTENT_VERSION_KEY)
    assert run_tags.LAUNCHED_BY_BACKFILL == "backfill"  # tests/test_ui_backfill_tags.py spells it too


# -- item 3: a branch tag and a door tag on every run ------------------------------------------------------
def test_a_cli_run_names_its_branch_and_door(ran_project):
    pipe = load(ran_project.root)
    try:
        [dagster_run_id] = ran_project.run.dagster_run_ids
        tags = pipe.app.instance.get_run_by_id(dagster_run_id).tags
    finally:
        pipe.close()
    assert (tags.get(BRANCH_TAG), tags.get(LAUNCHED_BY_TAG)) == ("main", "synthex")


def test_sensor_and_schedule_requests_name_their_branch_and_door(tmp_path):
    from dagster import build_schedule_context

    with dagster_instance(tmp_path / "dagster") as instance:
        live = Live(make_project(tmp_path / "proj"), instance)
        result = live.tick("notes")
        assert isinstance(result, SensorResult) and result.run_requests
        doors = {(r.tags.get(BRANCH_TAG), r.tags.get(LAUNCHED_BY_TAG)) for r in result.run_requests}
        assert doors == {("main", "sensor")}
        schedule = live.defs.get_schedule_def("live_reconcile")
        requests = schedule(build_schedule_context(instance=instance, resources={"cdc": live.defs.resources["cdc"]}))
        assert requests
        doors = {(r.tags.get(BRANCH_TAG), r.tags.get(LAUNCHED_BY_TAG)) for r in requests}
        assert doors == {("main", "schedule")}


def test_a_run_launched_as_the_ui_does_is_tagged_by_its_first_step(ran_project, tmp_path):
    """A run made by Dagster from the range the user picked (no Synthex tags on it): tagged when it runs."""
    pipe = load(ran_project.copy(tmp_path / "proj"))
    try:
        periods = pipe.app.instance.get_dynamic_partitions("period")
        result = launch_like_the_ui(pipe, periods[0], periods[0], steps=["chatgpt"])
        assert result.success
        tags = pipe.app.instance.get_run_by_id(result.run_id).tags
    finally:
        pipe.close()
    assert (tags.get(BRANCH_TAG), tags.get(LAUNCHED_BY_TAG)) == ("main", "ui")


# -- item 4: partition keys cannot be invented ------------------------------------------------------------
def create_location_run(instance, root, start: str, end: str, extra_tags: dict[str, str]) -> str:
    """A run of the project's job as the webserver or the backfill daemon creates one, before it launches."""
    pipeline = load(root)
    job = build_definitions(pipeline).resolve_job_def(job_name(pipeline.name))
    origin = ReconstructableRepository.for_module(CODE_LOCATION_MODULE, "defs", working_directory=str(root)) \
        .get_reconstructable_job(job.name).get_python_origin()
    run = instance.create_run_for_job(job, tags={**partition_range_tags(start, end), **extra_tags},
                                      job_code_origin=origin)
    return run.run_id


@pytest.mark.parametrize("bad", ["period", "branch"])
def test_a_run_over_an_invented_key_is_refused_before_any_step(ran_project, tmp_path, monkeypatch, bad):
    root = ran_project.copy(tmp_path / "proj")
    monkeypatch.setenv("SYNTHEX_PROJECT", str(root))  # as `synthex ui` sets it for the webserver and daemon
    pipeline = load(root)
    instance = open_instance(pipeline)
    try:
        assert isinstance(instance.run_launcher, WarmRunLauncher)
        periods = instance.get_dynamic_partitions("period")
        if bad == "period":
            instance.add_dynamic_partitions("period", ["not-a-month"])  # the UI's "Add a partition"
            start, end, named = f"main|{periods[0]}", "main|not-a-month", "period 'not-a-month' is not a period"
        else:
            instance.add_dynamic_partitions("branch", ["ghost"])
            start, end, named = f"ghost|{periods[0]}", f"ghost|{periods[-1]}", "branch 'ghost' is not a branch"
        run_id = create_location_run(instance, root, start, end, {"dagster/backfill": "bkf1"})
        instance.launch_run(run_id, workspace=None)
        run = instance.get_run_by_id(run_id)
        # Canceled, not failed: Dagster counts the planned partitions of a failed run as failed (red).
        assert run.status is DagsterRunStatus.CANCELED
        why = run.tags[REFUSED_TAG]
        assert named in why and "synthex branch create" in why and "YYYY-MM" in why and "\n" not in why
        assert run.tags[LAUNCHED_BY_TAG] == "backfill" and run.tags[BRANCH_TAG] == start.split("|")[0]
        assert instance.get_records_for_run(run_id, of_type=DagsterEventType.STEP_START).records == []
        assert all(materializations(instance, a, run_id) == [] for a in ("chatgpt", "summaries"))
        [canceled] = instance.get_records_for_run(run_id, of_type=DagsterEventType.RUN_CANCELED).records
        assert why in canceled.event_log_entry.dagster_event.message
    finally:
        instance.dispose()
        pipeline.close()


def test_a_run_dagsters_automation_requests_is_tagged_by_the_launcher(ran_project, tmp_path, monkeypatch):
    """A run the daemon creates for a step's ``automation=`` carries Dagster's automation tags only; the
    project's run launcher names its branch and door. Over an invented period, so the launcher refuses it
    and no run process starts (the tags are set before the refusal)."""
    root = ran_project.copy(tmp_path / "proj")
    monkeypatch.setenv("SYNTHEX_PROJECT", str(root))
    pipeline = load(root)
    instance = open_instance(pipeline)
    try:
        first = instance.get_dynamic_partitions("period")[0]
        instance.add_dynamic_partitions("period", ["not-a-month"])
        automation = {"dagster/from_automation_condition": "true",
                      "dagster/sensor_name": "default_automation_condition_sensor"}
        run_id = create_location_run(instance, root, f"main|{first}", "main|not-a-month", automation)
        instance.launch_run(run_id, workspace=None)
        tags = instance.get_run_by_id(run_id).tags
        assert (tags.get(BRANCH_TAG), tags.get(LAUNCHED_BY_TAG)) == ("main", "automation")
    finally:
        instance.dispose()
        pipeline.close()


def test_partition_keys_added_by_hand_are_removed_by_a_sensor(project, tmp_path):
    pipe = load(project)
    create_branch_file(project, "exp")
    defs = build_definitions(pipe)
    with dagster_instance(tmp_path / "dagster") as instance:
        register(instance, "exp", ["2024-01", "2024-02"])
        instance.add_dynamic_partitions("period", ["not-a-month", "all"])
        instance.add_dynamic_partitions("branch", ["ghost"])
        sensor = defs.get_sensor_def(sensors.partition_keys_sensor_name(pipe))
        result = sensor(build_sensor_context(instance=instance, definitions=defs))
        assert isinstance(result, SensorResult) and not result.run_requests
        deleted = {r.partitions_def_name: list(r.partition_keys) for r in result.dynamic_partitions_requests}
        assert deleted == {"period": ["not-a-month"], "branch": ["ghost"]}
        for request in result.dynamic_partitions_requests:  # what the daemon does with them
            for key in request.partition_keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)
        assert instance.get_dynamic_partitions("period") == ["2024-01", "2024-02", "all"]
        assert set(instance.get_dynamic_partitions("branch")) == {"main", "exp"}
        assert isinstance(sensor(build_sensor_context(instance=instance, definitions=defs)), SkipReason)


# -- item 2: a partition's data version is the hash of its records -----------------------------------------
def pairs(records) -> list[tuple[str, str]]:
    return [(r.id, r.content) for r in records]


def data_versions(instance, asset: str, run_id: str) -> dict[str, str]:
    return {m.partition: m.tags[DATA_VERSION_TAG] for m in materializations(instance, asset, run_id)}


def test_a_no_op_rematerialization_keeps_each_partitions_data_version(ran_project, tmp_path):
    pipe = load(ran_project.copy(tmp_path / "proj"))
    try:
        instance = pipe.app.instance
        [cli_run] = ran_project.run.dagster_run_ids
        periods = sorted(instance.get_dynamic_partitions("period"))
        before = {s: data_versions(instance, s, cli_run) for s in ("summaries", "monthly")}
        assert set(before["summaries"]) == {f"main|{p}" for p in periods}
        # The same range again, every record skipped: the same versions, so nothing downstream is stale.
        again = launch_like_the_ui(pipe, periods[0], periods[-1], steps=["summaries"])
        assert again.success
        assert data_versions(instance, "summaries", again.run_id) == before["summaries"]
        # One partition alone: its version is exactly the hash of what it holds (its metadata says the same).
        one = launch_like_the_ui(pipe, periods[1], periods[1], steps=["summaries"])
        [mat] = materializations(instance, "summaries", one.run_id)
        held = [r for r in pipe.records("summaries") if r.period == periods[1]]
        version = assets.content_version
        assert mat.tags[DATA_VERSION_TAG] == mat.metadata[CONTENT_VERSION_KEY].value == version(pairs(held))
        edited = [(held[0].id, held[0].content + " (edited)"), *pairs(held[1:])]
        assert version(edited) != version(pairs(held)) != version(pairs(held[1:]))
        assert version(reversed(pairs(held))) == version(pairs(held))  # order does not matter
        assert mat.metadata["changed"].value is False
        latest = instance.get_latest_materialization_event(AssetKey("summaries"))
        assert latest.run_id == one.run_id
    finally:
        pipe.close()


STALE_QUERY = """
query Stale($key: AssetKeyInput!, $partitions: [String!]!) {
  assetNodeOrError(assetKey: $key) { ... on AssetNode { staleStatusByPartition(partitions: $partitions) } }
}"""


def stale_statuses(instance, root, tmp_path, asset: str, partitions: list[str]) -> dict[str, str]:
    """What the UI shows for each partition of ``asset``: Dagster's own staleness, through its GraphQL."""
    variables = {"key": {"path": [asset]}, "partitions": partitions}
    data = graphql(instance, root, tmp_path, STALE_QUERY, variables)
    return dict(zip(partitions, data["assetNodeOrError"]["staleStatusByPartition"], strict=True))


@pytest.mark.parametrize(("first", "last"), [(0, 1), (1, 1)], ids=["two-periods", "one-period"])
def test_a_no_op_backfill_over_another_range_keeps_versions_and_leaves_downstream_fresh(ran_project, tmp_path,
                                                                                        first, last):
    """The issue's walk: the CLI run made every period; a UI backfill of ``summaries`` over only some of them
    skips every record. Each of those partitions holds what it held, so it keeps its data version (a version
    that stood for the run's whole range would move here) and ``monthly`` below it is not stale."""
    root = ran_project.copy(tmp_path / "proj")
    pipe = load(root)
    try:
        instance = pipe.app.instance
        [cli_run] = ran_project.run.dagster_run_ids
        periods = sorted(instance.get_dynamic_partitions("period"))
        assert len(periods) >= 3  # so the backfill's range is not the run's
        keys = [f"main|{p}" for p in periods]
        before = data_versions(instance, "summaries", cli_run)
        assert set(before) == set(keys)
        assert set(stale_statuses(instance, root, tmp_path, "monthly", keys).values()) == {"FRESH"}
        backfill = launch_like_the_ui(pipe, periods[first], periods[last], steps=["summaries"])
        assert backfill.success
        redone = materializations(instance, "summaries", backfill.run_id)
        assert [m.partition for m in redone] == keys[first:last + 1]
        assert not any(m.metadata["changed"].value for m in redone)
        seen = (data_versions(instance, "summaries", backfill.run_id),
                stale_statuses(instance, root, tmp_path, "monthly", keys))
        assert seen == ({k: before[k] for k in keys[first:last + 1]}, dict.fromkeys(keys, "FRESH"))
    finally:
        pipe.close()


def edit_first_user_message(export) -> None:
    """The export with its first conversation's user messages reworded (the same conversation and month)."""
    conversations = json.loads(export.read_text())
    for node in conversations[0]["mapping"].values():
        message = node.get("message")
        if message and message["author"]["role"] == "user" and message["content"]["parts"][0]:
            message["content"]["parts"][0] += " Later: the orders table moved to its own database."
    conversations[0]["update_time"] += 60  # as ChatGPT marks an edited conversation
    export.write_text(json.dumps(conversations))


def content_versions(instance, asset: str, run_id: str) -> dict[str, str]:
    return {m.partition: m.metadata[CONTENT_VERSION_KEY].value for m in materializations(instance, asset, run_id)}


def test_a_changed_record_changes_its_partitions_data_version(project, small_export):
    create_branch_file(project, "exp")  # before any run: main's run itself shows exp's partitions as served
    pipe = load(project)
    try:
        [first] = pipe.run().dagster_run_ids
        instance = pipe.app.instance
        main_partitions = {k for k in instance.get_materialized_partitions(AssetKey("monthly")) if k.startswith("main|")}
        assert {k.replace("main|", "exp|") for k in main_partitions} <= \
            instance.get_materialized_partitions(AssetKey("monthly"))
        before = {s: (data_versions(instance, s, first), content_versions(instance, s, first))
                  for s in ("chatgpt", "summaries")}
        assert len(set(before["chatgpt"][1].values())) == len(before["chatgpt"][1]) > 1  # one per partition
        edit_first_user_message(small_export)
        second = pipe.run()
        assert second.status == "completed"
        [again] = second.dagster_run_ids
        for step in ("chatgpt", "summaries"):
            tags, contents = data_versions(instance, step, again), content_versions(instance, step, again)
            # Exactly the edited month holds other records now; every other partition the run redid holds
            # the same ones, with the same content version.
            [edited] = [k for k in contents if contents[k] != before[step][1][k]]
            assert all(contents[k] == before[step][1][k] for k in contents if k != edited)
            held = [r for r in pipe.records(step) if f"main|{r.period}" == edited]
            assert contents[edited] == assets.content_version(pairs(held))
            assert tags[edited] != before[step][0][edited], step  # what Dagster's staleness reads moved too
            # The branch reads that month through main: its served partition is recorded again, with main's
            # new content (before, a served partition kept the content it was first recorded with).
            [served] = instance.fetch_materializations(AssetRecordsFilter(asset_key=AssetKey(step), asset_partitions=[
                edited.replace("main|", "exp|")]), limit=1).records
            assert served.asset_materialization.metadata[SERVED_BY_KEY].value == "main"
            assert served.asset_materialization.metadata[CONTENT_VERSION_KEY].value == contents[edited], step
    finally:
        pipe.close()


def test_an_edit_moves_only_its_partitions_data_version(project, small_export):
    """One reworded conversation: its month's data version moves (before issue 36 none moved, the version was
    Dagster's hash of code and inputs), every other month holds the same records and keeps its version, so
    nothing below those months reads as stale (each partition's materialization carries its own version:
    step_assets.record_partition_materializations)."""
    pipe = load(project)
    try:
        instance = pipe.app.instance
        [first] = pipe.run().dagster_run_ids
        before = data_versions(instance, "chatgpt", first)
        edit_first_user_message(small_export)
        [again] = pipe.run().dagster_run_ids
        after = data_versions(instance, "chatgpt", again)
        edited = {r.period for r in pipe.records("chatgpt") if "orders table moved" in str(r.content)}
        assert len(edited) == 1 and len(after) > 1  # one month edited, others redone beside it
        moved = {k for k in after if after[k] != before[k]}
        assert moved == {f"main|{p}" for p in edited}
    finally:
        pipe.close()


# -- item 6: checks that mean something -------------------------------------------------------------------
WITH_A_MERGE = PIPELINE_PY + '''
pipeline.merge("everything", from_=["summaries", "monthly"])
'''


def misfiling(step, limits):
    """``step`` as a step of its own kind whose first new record of each partition has an id no work item has:
    the defect ``records_planned`` exists for (the next run deletes it as stale and makes it again). Its
    period and content stay, so the steps downstream read it as usual (each step's own defect is its own)."""
    class Misfiling(type(step)):
        def produce(self, items, ctx):
            records, tokens = super().produce(items, ctx)
            return [replace(r, id=r.id[::-1]) if i == 0 else r for i, r in enumerate(records)], tokens

    defective = Misfiling(**{f.name: getattr(step, f.name) for f in fields(step) if f.init})
    defective.use_limits(limits)
    return defective


def test_a_check_of_every_step_kind_fails_on_a_real_defect_and_names_its_partitions(tmp_path, small_export):
    pipe = load(write_project(tmp_path / "proj", small_export, WITH_A_MERGE))
    try:
        # the design's five kinds (§3.5); the migration importers' kinds (migrated, restored, restored-source)
        # are made by `synthex init --from` another system's file, not by a pipeline like this one
        five = {"source", "transform", "aggregate", "fold", "merge"}
        assert {type(s).kind for s in pipe.steps.values()} == five <= set(step_kinds().names())
        for name in list(pipe.steps):
            pipe.steps[name] = misfiling(pipe.steps[name], pipe.limits)
        periods = pipe.plan(full=True).periods
        register(pipe.app.instance, "main", periods)
        result = launch_like_the_ui(pipe, periods[0], periods[-1])
        assert result.success  # the records are written; what failed is a check
        verdicts = {(e.asset_key.to_user_string(), e.check_name): e for e in result.get_asset_check_evaluations()}
        for asset in ("chatgpt", "transcripts", "summaries", "monthly", "world_model", "everything"):
            planned = verdicts[(asset, "records_planned")]
            assert not planned.passed and planned.severity is AssetCheckSeverity.ERROR, asset
            detail = planned.metadata["detail"].value
            assert "unplanned or misfiled: " in detail and "unplanned or misfiled: none" not in detail
            failing = planned.metadata["failing_partitions"].value
            assert failing.startswith(f"main|{periods[0]}"), (asset, failing)
            # Stale-but-right is a warning, not an error (it passed here: every partition was made).
            assert verdicts[(asset, "up_to_date")].severity is AssetCheckSeverity.WARN
            assert verdicts[(asset, "provenance_complete")].severity is AssetCheckSeverity.ERROR
    finally:
        pipe.close()


def test_the_offline_stand_in_reports_no_tokens(ran_project):
    pipe = load(ran_project.root)
    try:
        [run_id] = ran_project.run.dagster_run_ids
        [*summaries] = materializations(pipe.app.instance, "summaries", run_id)
    finally:
        pipe.close()
    assert summaries and all(m.metadata["tokens"].value == 0 for m in summaries)
    assert all(m.metadata["tokens_if_a_model"].value > 0 for m in summaries)  # the planner's estimate, named


# -- item 1: copy-on-write partitions show as materialized, served by main ---------------------------------
def test_a_new_branch_shows_its_parents_partitions_as_served(ran_project, tmp_path):
    root = ran_project.copy(tmp_path / "proj")
    cli("branch", "create", "exp", cwd=root)
    pipe = load(root)
    try:
        instance = pipe.app.instance
        periods = sorted(p for p in instance.get_dynamic_partitions("period"))
        for asset in STEPS:
            key = AssetKey(asset)
            materialized = instance.get_materialized_partitions(key)  # what the UI's fill and "missing" count
            assert {f"exp|{p}" for p in periods} <= materialized, asset
            served = instance.fetch_materializations(AssetRecordsFilter(asset_key=key, asset_partitions=[
                f"exp|{periods[0]}"]), limit=1).records[0].asset_materialization
            main = instance.fetch_materializations(AssetRecordsFilter(asset_key=key, asset_partitions=[
                f"main|{periods[0]}"]), limit=1).records[0].asset_materialization
            assert served.metadata[SERVED_BY_KEY].value == "main"
            assert served.metadata[CONTENT_VERSION_KEY].value == main.metadata[CONTENT_VERSION_KEY].value
            # the same records, the same data version (what Dagster's staleness reads)
            assert served.tags[DATA_VERSION_TAG] == main.tags[DATA_VERSION_TAG] == \
                main.metadata[CONTENT_VERSION_KEY].value, asset
            assert "served by main" in served.metadata["preview"].value
        # Item 9, as docs/architecture.md says: Dagster's "latest materialization" (the asset overview) is of any
        # partition, so after the branch is created it is one of exp's served ones; main's newest stays what
        # the Partitions tab shows for branch main.
        latest = instance.get_latest_materialization_event(AssetKey("summaries"))
        assert latest.dagster_event.partition.startswith("exp|")
        [main_newest] = instance.fetch_materializations(AssetRecordsFilter(asset_key=AssetKey("summaries"),
                                                                           asset_partitions=[f"main|{periods[-1]}"]),
                                                        limit=1).records
        assert SERVED_BY_KEY not in main_newest.asset_materialization.metadata
        # Created again (idempotent): nothing is reported twice.
        from synthex_assets.served import record_served_partitions

        count = len(materializations(instance, "summaries"))
        assert record_served_partitions(instance, pipe.for_branch("exp")) == 0
        assert len(materializations(instance, "summaries")) == count
        # A UI run of the branch over an inherited step says so on its partition.
        result = launch_like_the_ui(pipe, periods[0], periods[0], steps=["summaries"], branch="exp")
        assert result.success
        [mat] = materializations(instance, "summaries", result.run_id)
        assert mat.partition == f"exp|{periods[0]}" and mat.metadata[SERVED_BY_KEY].value == "main"
        assert mat.tags[DATA_VERSION_TAG] == mat.metadata[CONTENT_VERSION_KEY].value == \
            main_newest_version(instance, "summaries", periods[0])
        assert instance.get_run_by_id(result.run_id).tags[BRANCH_TAG] == "exp"
        # What the UI reads: Dagster's GraphQL on a workspace loading the project's code location.
        data = graphql(instance, root, tmp_path, UI_QUERY, {"key": {"path": ["summaries"]}})
        stats = data["assetNodeOrError"]["partitionStats"]
        assert stats["numMaterialized"] == stats["numPartitions"] == 2 * len(periods)  # 100 % filled
        assert [r["runId"] for r in data["runsOrError"]["results"]] == [result.run_id]  # filtered by branch
    finally:
        pipe.close()


def main_newest_version(instance, asset: str, period: str) -> str:
    [record] = instance.fetch_materializations(AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[
        f"main|{period}"]), limit=1).records
    return record.asset_materialization.metadata[CONTENT_VERSION_KEY].value


UI_QUERY = """
query Story($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) { ... on AssetNode { partitionStats { numMaterialized numPartitions } } }
  runsOrError(filter: {tags: [{key: "synthex/branch", value: "exp"}]}) { ... on Runs { results { runId } } }
}"""


# -- item 5 (explained, not changed): one period list for every asset ---------------------------------------
def test_each_asset_explains_periods_it_has_no_data_for(project):
    graph = build_definitions(load(project)).resolve_asset_graph()
    for asset in STEPS:
        node = graph.get(AssetKey(asset))
        assert "Missing here with nothing to make" in node.description
        assert "served by its parent" in node.metadata["synthex/partitions"]


def test_synthex_run_says_the_stand_in_used_no_tokens(tmp_path):
    from synthex.core.demo.generate import generate

    export = tmp_path / "exports" / "conversations.json"
    export.parent.mkdir(parents=True)
    export.write_text(json.dumps(generate(conversations=4, months=1, seed=3)))
    root = write_project(tmp_path / "proj", export)
    out = cli("run", cwd=root).stdout
    assert "tokens: 0 (offline stand-in, not an LLM; ~" in out and " if a model)" in out
