"""Issue 23, the last figures: a run the warm run launcher started can be terminated through Dagster's
public API and ends CANCELED with nothing half-written; a sensor-launched run's work follows the change,
not the store.

Real project, real Dagster instance with the project's dagster.yaml (``WarmRunLauncher``: the run is
forked from its forkserver and loads the project's code location itself), real LanceDB store. The kill
lands at a known point: the transform's function touches a marker file and waits for a second one that
never comes, so Terminate always meets the run inside the step, after the source step wrote its records.
"""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from dagster import AssetKey, DagsterInstance, DagsterRunStatus
from dagster._core.definitions.reconstruct import ReconstructableRepository

from synthex.core.project import load_pipeline
from synthex.core.scope import BranchScope
from synthex.core.sources.stream import append_lines
from synthex.surfaces.cli import main as cli
from synthex_assets.dagster_internals import partition_range_tags
from synthex_assets.definitions import build_definitions
from synthex_assets.instance import open_instance
from synthex_assets.naming import CODE_LOCATION_MODULE, asset_name, job_name
from synthex_assets.partitions import register
from synthex_assets.run_launcher import PID_TAG, WarmRunLauncher
from synthex_resources.branch_lock import BranchLock
from synthex_resources.record_store import open_store

GATED = '''
import time
from pathlib import Path

from synthex import Pipeline

GATE = Path(__file__).resolve().parent / "gate"


def gated(record):
    """Says it was reached, then waits until the test opens the gate (it never does before Terminate)."""
    (GATE / "reached").touch()
    while not (GATE / "open").exists():
        time.sleep(0.02)
    return record.content


pipeline = Pipeline("terminate-me", agent="tester")
pipeline.source("inbox", stream="inbox.jsonl")
pipeline.transform("digest", from_="inbox", fn=gated)
'''
LINES = [{"id": f"m{i}", "text": f"message {i} about the harbour", "created_at": f"2024-0{3 + i % 2}-1{i}T08:00:00Z"}
         for i in range(4)]


def wait_for(predicate, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def launch_location_run(instance: DagsterInstance, root: Path, steps: list[str], periods: list[str]) -> str:
    """Create and launch a run of the project's job as the daemon does for a sensor's request: with the code
    location's origin (the run process loads the location itself) through the instance's run launcher."""
    pipeline = load_pipeline(root)
    job = build_definitions(pipeline).resolve_job_def(job_name(pipeline.name))
    origin = ReconstructableRepository.for_module(CODE_LOCATION_MODULE, "defs", working_directory=str(root)) \
        .get_reconstructable_job(job.name).get_python_origin()
    register(instance, "main", periods)
    selection = {AssetKey(asset_name(s)) for s in steps}
    run = instance.create_run_for_job(job.get_subset(asset_selection=selection), asset_selection=selection,
                                      tags=partition_range_tags(f"main|{periods[0]}", f"main|{periods[-1]}"),
                                      job_code_origin=origin)
    instance.launch_run(run.run_id, workspace=None)  # the warm launcher needs no workspace: the run has its origin
    return run.run_id


def test_terminate_a_warm_launched_run(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pipeline.py").write_text(textwrap.dedent(GATED))
    (root / "gate").mkdir()
    append_lines(root / "inbox.jsonl", LINES)
    monkeypatch.setenv("SYNTHEX_PROJECT", str(root))  # as `synthex ui` sets it for the daemon's runs
    pipeline = load_pipeline(root)
    instance = open_instance(pipeline)
    try:
        assert isinstance(instance.run_launcher, WarmRunLauncher)
        run_id = launch_location_run(instance, root, ["inbox", "digest"], ["2024-03", "2024-04"])
        wait_for(lambda: (root / "gate" / "reached").exists(), "the run to reach the gated step")
        run = instance.get_run_by_id(run_id)
        assert run.status is DagsterRunStatus.STARTED and PID_TAG in run.tags  # forked by the warm launcher

        # The kill lands here: the source step has written, the transform is inside its first record.
        store = open_store(pipeline.store_uri)
        try:
            assert len(store.records.list(BranchScope.own(), steps=["inbox"])) == len(LINES)
            assert store.records.list(BranchScope.own(), steps=["digest"]) == []
        finally:
            store.close()

        assert instance.run_launcher.terminate(run_id)  # what the UI's Terminate button calls
        run = instance.get_run_by_id(run_id)
        assert run.status is DagsterRunStatus.CANCELED, run.status
        pid = int(run.tags[PID_TAG])
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    finally:
        instance.dispose()

    # Nothing half-written: the source's records whole, none of the transform's; the branch is free again
    # (the kernel released the killed run's lock), so the next run or tick completes the partitions.
    store = open_store(pipeline.store_uri)
    try:
        assert sorted(r.content for r in store.records.list(BranchScope.own(), steps=["inbox"])) == \
            sorted(line["text"] for line in LINES)
        assert store.records.list(BranchScope.own(), steps=["digest"]) == []
    finally:
        store.close()
    BranchLock(pipeline.data_dir, "main", "after-terminate").acquire().release()


STREAM = '''
from synthex import Pipeline

pipeline = Pipeline("plan-the-change", agent="tester")
pipeline.source("inbox", stream="inbox.jsonl")
pipeline.transform("digest", from_="inbox", fn=lambda r: r.content.upper())
'''


def lines_in(months: list[str], per_month: int, tag: str) -> list[dict[str, str]]:
    return [{"id": f"{tag}-{m}-{i}", "text": f"{tag} line {i} of {m}", "created_at": f"{m}-0{1 + i % 9}T08:00:00Z"}
            for m in months for i in range(per_month)]


def test_a_sensor_tick_and_its_run_plan_only_the_changed_period(tmp_path, monkeypatch):
    from dagster import SensorResult, build_sensor_context

    from synthex.core.definition import PipelineDefinition
    from synthex_assets import sensors
    from synthex_assets.sensors import SourceCursor, sensor_name
    from synthex_resources.planner import compute_partition_plan

    planned: list[sensors.TickPlan] = []
    real_plan_requests = sensors.plan_requests

    def recording_plan_requests(*args, **kwargs) -> sensors.TickPlan:
        """The sensor's own plan (the real function), kept so the test can read its records_read."""
        planned.append(real_plan_requests(*args, **kwargs))
        return planned[-1]

    monkeypatch.setattr(sensors, "plan_requests", recording_plan_requests)

    root = tmp_path / "proj"
    root.mkdir()
    (root / "pipeline.py").write_text(textwrap.dedent(STREAM))
    others = ["2024-01", "2024-02", "2024-04", "2024-05"]
    append_lines(root / "inbox.jsonl", lines_in(["2024-03"], 2, "a") + lines_in(others, 2, "a"))
    assert CliRunner().invoke(cli, ["run", "--project", str(root)], catch_exceptions=False).exit_code == 0
    pipeline = load_pipeline(root)
    defs = build_definitions(pipeline)
    instance = DagsterInstance.ephemeral()

    def stored(period: str | None = None) -> int:
        store = open_store(pipeline.store_uri)
        try:
            return sum(1 for r in store.records.list(BranchScope.own()) if period in (None, r.period))
        finally:
            store.close()

    def tick_and_plan(pipeline: PipelineDefinition) -> tuple[list[str], int, int]:
        """A real tick: the partitions its run request covers; what the tick's plan read, and what the
        run's up-to-date check plan of the periods the tick saw change (its cursor says which) reads."""
        context = build_sensor_context(instance=instance, resources={"cdc": defs.resources["cdc"]}, definitions=defs)
        result = defs.get_sensor_def(sensor_name("inbox"))(context)
        assert isinstance(result, SensorResult) and len(result.run_requests) == 1
        tags = result.run_requests[0].tags
        covered = sorted({v for k, v in tags.items() if "partition_range" in k})
        periods = SourceCursor.parse(context.cursor).last_change.periods
        tick = planned.pop()
        store = open_store(pipeline.store_uri)
        try:
            check = compute_partition_plan(pipeline, store, "main", ["inbox", "digest"], periods=periods)
            full = compute_partition_plan(pipeline, store, "main", ["inbox", "digest"])
        finally:
            store.close()
        # Exact: the plan of some periods is the full plan's work in those periods.
        assert check.work == {k: w for k, w in full.work.items() if k[1] in periods}
        assert full.records_read == stored()
        return covered, tick.records_read, check.records_read

    append_lines(root / "inbox.jsonl", lines_in(["2024-03"], 1, "b"))
    covered, tick_read, check_read = tick_and_plan(pipeline)
    assert covered == ["main|2024-03"]
    assert tick_read == check_read == stored("2024-03") == 4  # 2 lines x (inbox, digest); not the other 16

    # The store grows fourfold in the other periods (and line b is synced); the same kind of change reads the same records.
    append_lines(root / "inbox.jsonl", lines_in(others, 6, "c"))
    assert CliRunner().invoke(cli, ["sync", "--project", str(root)], catch_exceptions=False).exit_code == 0
    assert (stored("2024-03"), stored()) == (6, 6 + 2 * 8 * len(others))  # the sync also wrote line b
    append_lines(root / "inbox.jsonl", lines_in(["2024-03"], 1, "d"))
    covered, tick_read, check_read = tick_and_plan(pipeline)
    assert covered == ["main|2024-03"]
    assert tick_read == check_read == stored("2024-03") == 6
    instance.dispose()
