"""Issue 23, live memory through the daemon: readable sensor cursors (JSON, an earlier raw-token cursor
migrated), `synthex run` / `synthex sync` leave the change-tracking state current (the next tick finds
nothing new), the configured sensor interval reaches the sensor definitions, and the instance's run
coordinator launches sensor runs without a queue. Real project, real Dagster instance, real sensor
evaluation (``build_sensor_context`` + the sensor), CLI through CliRunner."""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from dagster import DagsterInstance, SensorResult, SkipReason, build_sensor_context
from dagster._core.instance.ref import InstanceRef
from dagster._core.launcher import RunLauncher
from dagster._core.run_coordinator import DefaultRunCoordinator, RunCoordinator

from synthex.core.definition import SENSOR_INTERVAL_S, PipelineDefinition
from synthex.core.errors import PipelineDefinitionError
from synthex.core.project import load_pipeline
from synthex.core.sources.stream import append_lines
from synthex.surfaces.cli import main as cli
from synthex_assets.definitions import build_definitions
from synthex_assets.instance import EARLIER_INSTANCE_YAMLS, INSTANCE_YAML, ensure_instance_yaml, open_instance
from synthex_assets.run_launcher import PRELOAD, WarmRunLauncher
from synthex_assets.sensors import SourceCursor, sensor_name

PIPELINE = '''
from synthex import Pipeline

pipeline = Pipeline("live-cursor", agent="tester", sensor_interval_s={interval})
pipeline.source("notes", folder="notes")
pipeline.source("inbox", stream="inbox.jsonl")
pipeline.transform("digest", from_="inbox", fn=lambda r: r.content)
'''
SOURCES = ["notes", "inbox"]


def make_project(root: Path, interval: int = 3) -> Path:
    root.mkdir()
    (root / "pipeline.py").write_text(textwrap.dedent(PIPELINE.format(interval=interval)))
    (root / "notes").mkdir()
    (root / "notes" / "2024-03-05-standup.md").write_text("Standup: the Postgres migration slipped")
    (root / "notes" / "2024-04-01-plan.md").write_text("Plan: ship the importer in April")
    append_lines(root / "inbox.jsonl", [{"id": "m1", "text": "book the venue", "created_at": "2024-04-20T08:00:00Z"}])
    return root


class Project:
    """One project, its definitions and its own Dagster instance (the one `synthex run` and `synthex ui` use)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.pipeline = load_pipeline(root)
        self.defs = build_definitions(self.pipeline)
        self.instance: DagsterInstance = open_instance(self.pipeline)

    def tick(self, source: str, cursor: str | None = None) -> tuple[SensorResult | SkipReason, str | None]:
        """Evaluate the source's sensor as the daemon would; the result and the cursor it leaves."""
        context = build_sensor_context(instance=self.instance, resources={"cdc": self.defs.resources["cdc"]},
                                       definitions=self.defs, cursor=cursor)
        result = self.defs.get_sensor_def(sensor_name(source))(context)
        return result, context.cursor

    def cli(self, *args: str) -> str:
        result = CliRunner().invoke(cli, [*args, "--project", str(self.root)], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output


def assert_nothing_new(result: SensorResult | SkipReason, source: str) -> None:
    # Before issue 23 the first tick after `synthex run` said "notes: 2 new, 0 changed, 0 deleted".
    assert isinstance(result, SkipReason), (source, result)
    assert result.skip_message in (f"{source}: unchanged", f"{source}: 0 new, 0 changed, 0 deleted"), result.skip_message


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Project:
    root = make_project(tmp_path_factory.mktemp("live") / "proj")
    project = Project(root)
    project.cli("run")
    yield project
    project.instance.dispose()


def test_run_and_sync_leave_change_tracking_current(project):
    for source in SOURCES:  # right after `synthex run`
        assert_nothing_new(project.tick(source)[0], source)

    before = SourceCursor.parse(project.tick("inbox")[1])
    append_lines(project.root / "inbox.jsonl", [{"id": "m2", "text": "call the caterer", "created_at": "2024-04-21"}])
    (project.root / "notes" / "2024-05-02-retro.md").write_text("Retro: the demo went well")
    project.cli("sync")
    for source in SOURCES:
        assert_nothing_new(project.tick(source)[0], source)
    # The cursor follows what the sync committed (an idle tick behind the state rewrites it).
    after = SourceCursor.parse(project.tick("inbox", cursor=before.to_json())[1])
    assert (before.items, after.items) == (1, 2) and after.synced_at >= before.synced_at
    assert "call the caterer" in {r.content for r in project.pipeline.records("digest")}


def test_cursor_is_readable_json_and_an_old_cursor_is_migrated(project):
    stream = project.pipeline.steps["inbox"].reader()
    old_cursors = [
        stream.token(),  # what the sensor stored before: "dev:inode:size:mtime_ns"
        repr(((str(project.root / "notes" / "a.md"), 12, 1732600000123456789, 1732600000123456789, 42),)),
        "{not json", "[1, 2]", json.dumps({"format": 1, "source": "inbox"}),  # edited by hand in the UI
    ]
    for old in old_cursors:
        result, cursor = project.tick("inbox", cursor=old)
        assert isinstance(result, SkipReason)
        data = json.loads(cursor)
        assert data["source"] == "inbox" and data["where"] == "inbox.jsonl" and data["items"] == 2
        assert str(project.root) not in cursor  # a path relative to the project, no nanoseconds
        for stamp in ("modified_at", "synced_at"):
            assert data[stamp].endswith("Z") or "+" in data[stamp], (stamp, data[stamp])
        assert SourceCursor.parse(cursor) == SourceCursor.parse(json.dumps(data))

    # An idle tick with a current cursor writes nothing; a change updates the cursor with what it found.
    # The notes are made older than the 2 s in which a file's token is its content hash, not its stat
    # (synthex/core/importers/formats.py): otherwise the next tick sees a new token for the same notes (a
    # touch, committed) whenever this test starts within 2 s of the last write to them.
    settled = time.time() - 10
    for note in (project.root / "notes").rglob("*"):
        os.utime(note, (settled, settled))
    result, current = project.tick("notes")
    assert isinstance(result, SkipReason) and SourceCursor.parse(current).where == "notes"
    assert project.tick("notes", cursor=current)[1] == current
    (project.root / "notes" / "2024-06-09-offsite.md").write_text("Offsite: the lake house in June")
    result, changed = project.tick("notes", cursor=current)
    assert isinstance(result, SensorResult) and result.run_requests
    after = SourceCursor.parse(changed)
    assert after.items == SourceCursor.parse(current).items + 1
    assert (after.last_change.new, after.last_change.changed, after.last_change.deleted) == (1, 0, 0)
    assert after.last_change.periods == ["2024-06"]


def test_configured_interval_reaches_the_sensor_definitions(tmp_path):
    project = load_pipeline(make_project(tmp_path / "proj", interval=7))
    defs = build_definitions(project)
    assert [defs.get_sensor_def(sensor_name(s)).minimum_interval_seconds for s in SOURCES] == [6, 6]  # 7 - 1 (*)
    default = PipelineDefinition("plain", project_dir=tmp_path)
    default.source("inbox", stream="inbox.jsonl")
    assert build_definitions(default).get_sensor_def(sensor_name("inbox")).minimum_interval_seconds == SENSOR_INTERVAL_S - 1
    # (*) one second less than configured, so Dagster's 5 s daemon loop ticks on time (sensors.daemon_minimum_interval)
    # The TOML form of the pipeline keeps it (and leaves the default out).
    assert project.to_toml_dict()["pipeline"]["sensor_interval_s"] == 7
    assert "sensor_interval_s" not in default.to_toml_dict()["pipeline"]
    (tmp_path / "pipeline.toml").write_text('[pipeline]\nname = "t"\nsensor_interval_s = 9\n')
    assert PipelineDefinition.from_toml(tmp_path / "pipeline.toml").sensor_interval_s == 9
    for bad in (0, -5, 2.5, "10", True):
        with pytest.raises(PipelineDefinitionError, match="sensor_interval_s"):
            PipelineDefinition("bad", sensor_interval_s=bad)


def test_instance_launches_runs_without_a_queue(tmp_path):
    homes = {"new": tmp_path / "new", "earlier": tmp_path / "earlier", "own": tmp_path / "own"}
    (homes["earlier"]).mkdir()
    (homes["earlier"] / "dagster.yaml").write_text(EARLIER_INSTANCE_YAMLS[-1])
    own = "telemetry:\n  enabled: false\n"
    (homes["own"]).mkdir()
    (homes["own"] / "dagster.yaml").write_text(own)
    for name in ("new", "earlier", "own"):
        ensure_instance_yaml(homes[name])
    for name in ("new", "earlier"):
        assert (homes[name] / "dagster.yaml").read_text() == INSTANCE_YAML
        # What DagsterInstance.from_config(home) would build, without creating its storage.
        ref = InstanceRef.from_dir(str(homes[name]))
        assert isinstance(ref.run_coordinator_data.rehydrate(as_type=RunCoordinator), DefaultRunCoordinator)
        assert isinstance(ref.run_launcher_data.rehydrate(as_type=RunLauncher), WarmRunLauncher)
    assert (homes["own"] / "dagster.yaml").read_text() == own  # the user's own file is never rewritten
    assert {"dagster", "lancedb", "synthex_assets.definitions"} <= set(PRELOAD)  # what a run's start waited for

