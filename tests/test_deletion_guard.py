"""One deletion policy on every door (synthex.core.deletions): a deletion a source reports itself (a row gone
from a table) propagates; a suspicious shrink (an export emptied, a snapshot losing more than 20 % of at
least 10 items, a table returning no rows) is held back with the same line on the CLI (`synthex sync`,
`synthex status`), the Python API, a sensor tick, the reconcile schedule and a run launched like the UI
does; `--allow-deletions` proceeds. Real DuckDB table, real folder, real LanceDB, real Dagster instances."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import duckdb
import pytest
from conftest import cli, go_offline, load
from dagster import AssetKey, SensorResult, SkipReason, build_schedule_context
from test_cli import synthex
from test_runtime import failure_message, launch_like_the_ui
from test_sensors import Live, dagster_instance

from synthex.core.deletions import (
    DELETIONS_TAG,
    DeletionConsent,
    DeletionGuard,
    DeletionOutcome,
    DeletionReporting,
    DeletionsHeldBack,
    consent_from_tags,
    refusal_line,
)
from synthex.core.errors import BadInputError
from synthex.core.sources.table import TableOrigin
from synthex_assets.dagster_internals import partition_range_tags
from synthex_assets.definitions import build_definitions
from synthex_assets.naming import job_name

PIPELINE = '''
from synthex import Pipeline

pipeline = Pipeline("guarded", agent="tester")
pipeline.source("tickets", table="tickets", dsn="duckdb:///crm.duckdb", pk="id", created_at="opened_at")
pipeline.source("notes", folder="notes")
'''
TICKETS = {1: "printer on floor 3 is jammed", 2: "vpn drops every hour"}
NOTE_PERIODS = ["2024-01", "2024-02", "2024-03"]


def write_notes(root: Path, numbers: range) -> None:
    (root / "notes").mkdir(exist_ok=True)
    for n in numbers:
        (root / "notes" / f"n{n}.md").write_text(
            f"---\ndate: {NOTE_PERIODS[n % 3]}-05\n---\nnote {n}: the {n}th thing worth remembering")


def make_project(root: Path, notes: int = 10) -> Path:
    root.mkdir(parents=True)
    (root / "pipeline.py").write_text(textwrap.dedent(PIPELINE))
    write_notes(root, range(notes))
    with duckdb.connect(str(root / "crm.duckdb")) as db:
        db.execute("CREATE TABLE tickets (id INTEGER, subject VARCHAR, opened_at TIMESTAMP)")
        db.executemany("INSERT INTO tickets VALUES (?, ?, '2024-03-10')", list(TICKETS.items()))
    return root


def delete_tickets(root: Path, *ids: int) -> None:
    with duckdb.connect(str(root / "crm.duckdb")) as db:
        db.execute(f"DELETE FROM tickets WHERE id IN ({', '.join(map(str, ids))})")


def contents(root: Path, step: str) -> set[str]:
    pipe = load(root)
    try:
        return {r.content for r in pipe.records(step)}
    finally:
        pipe.close()


class GuardedLive(Live):
    """The sensor harness of test_sensors on this module's pipeline."""

    def execute(self, result: SensorResult) -> None:
        job = self.defs.resolve_job_def(job_name(self.pipeline.name))
        for request in result.run_requests:
            outcome = job.execute_in_process(instance=self.instance, tags=request.tags,
                                             asset_selection=request.asset_selection, raise_on_error=True)
            assert outcome.success


@pytest.fixture(scope="module")
def synced(tmp_path_factory) -> Path:
    """A project whose two sources were synced once (records and CDC state): copied by each test."""
    root = make_project(tmp_path_factory.mktemp("guard") / "base")
    with pytest.MonkeyPatch.context() as mp:  # module fixtures run before the autouse offline_env
        go_offline(mp)
        pipe = load(root)
        try:
            assert pipe.sync().run.status == "completed"
        finally:
            pipe.close()
    assert len(contents(root, "notes")) == 10 and len(contents(root, "tickets")) == 2
    return root


def copy_of(synced: Path, dest: Path) -> Path:
    shutil.copytree(synced, dest, symlinks=True)
    return dest


def test_the_guard_judges_by_how_a_source_reports_deletions():
    guard = DeletionGuard()

    def outcome(now: int, before: int, reporting: DeletionReporting, empty: bool | None = None) -> DeletionOutcome:
        return guard.judge("s", "where", "main", now=now, before=before, empty=now == 0 if empty is None else empty,
                           reporting=reporting).outcome

    snapshot, explicit = DeletionReporting.SNAPSHOT, DeletionReporting.EXPLICIT
    assert outcome(7, 10, snapshot) is DeletionOutcome.SHRUNK  # 30 % of 10
    assert outcome(9, 10, snapshot) is DeletionOutcome.SMALL
    assert outcome(8, 10, snapshot) is DeletionOutcome.SMALL  # exactly 20 % is not more than 20 %
    assert outcome(1, 2, snapshot) is DeletionOutcome.SMALL  # 50 %, but of fewer than 10 items
    assert outcome(0, 2, snapshot) is DeletionOutcome.EMPTIED
    assert outcome(1, 2, explicit) is DeletionOutcome.EXPLICIT
    assert outcome(3, 100, explicit) is DeletionOutcome.EXPLICIT  # a source's own deletions: any share
    assert outcome(0, 2, explicit) is DeletionOutcome.EMPTIED  # a table that suddenly returns no rows
    # A stream whose every line was deleted by a `deleted` line still holds those lines: it said so.
    assert outcome(0, 2, explicit, empty=False) is DeletionOutcome.EXPLICIT
    assert outcome(10, 10, snapshot) is outcome(12, 10, snapshot) is DeletionOutcome.NONE
    assert [o for o in DeletionOutcome if o.held_back] == [DeletionOutcome.EMPTIED, DeletionOutcome.SHRUNK]
    assert TableOrigin.deletions is explicit


def test_a_run_tag_consents_for_its_own_run_only():
    def consent(value: str, run_id: str = "r1") -> DeletionConsent | None:
        return consent_from_tags({DELETIONS_TAG: value}, run_id)

    assert consent("guarded:r1") is DeletionConsent.GUARDED  # a CLI run: judged under its branch lock
    assert consent("allowed:r1") is DeletionConsent.ALLOWED
    assert consent("allowed") is DeletionConsent.ALLOWED  # typed in the UI's launchpad for this launch
    # Copied to another run by a re-execution from the UI: that run is judged again.
    assert consent("guarded:r1", "r2") is None and consent("allowed:r1", "r2") is None
    assert consent("guarded") is None  # nobody judged this run
    assert consent_from_tags({}, "r1") is None
    with pytest.raises(BadInputError, match=r"^run tag synthex/deletions='allow': expected synthex/deletions=allowed$"):
        consent("allow")


def test_one_deleted_row_of_a_two_row_table_propagates_on_every_door(synced, tmp_path):
    def only_the_first_ticket(root: Path) -> bool:
        left = contents(root, "tickets")
        return len(left) == 1 and TICKETS[1] in next(iter(left)) and TICKETS[2] not in next(iter(left))

    by_cli = copy_of(synced, tmp_path / "cli")
    delete_tickets(by_cli, 2)
    proc = cli("sync", "--project", by_cli)  # the command, in this process: what it prints and does
    assert "tickets: 0 new, 0 changed, 1 deleted" in proc.stdout
    assert only_the_first_ticket(by_cli)

    api = copy_of(synced, tmp_path / "api")
    delete_tickets(api, 2)
    pipe = load(api)
    report = pipe.sync()
    assert [len(c.deleted) for c in report.changes if c.source == "tickets"] == [1]
    # The run's ops were told the door judged, for this run only (a re-execution is judged again).
    assert pipe.app.instance.get_run_by_id(report.run.id).tags[DELETIONS_TAG] == f"guarded:{report.run.id}"
    pipe.close()
    assert only_the_first_ticket(api)

    sensed = copy_of(synced, tmp_path / "sensor")
    delete_tickets(sensed, 2)
    with dagster_instance(tmp_path / "dagster") as instance:
        live = GuardedLive(sensed, instance)
        tick = live.tick("tickets")
        assert isinstance(tick, SensorResult) and tick.run_requests
        live.execute(tick)
    assert only_the_first_ticket(sensed)

    ui = copy_of(synced, tmp_path / "ui")
    delete_tickets(ui, 2)
    pipe = load(ui)
    assert launch_like_the_ui(pipe, ["2024-03"], steps=["tickets"]).success  # the op judged: explicit, applied
    pipe.close()
    assert only_the_first_ticket(ui)

    # The table's last row gone: a table that suddenly returns no rows is held back.
    delete_tickets(api, 1)
    pipe = load(api)
    with pytest.raises(DeletionsHeldBack, match=r"tickets: .*crm.duckdb#tickets holds 0 item\(s\), the store 1 "
                                                r"\(1 would be deleted, 100 %\): the source suddenly returns nothing"):
        pipe.sync()
    assert len(pipe.records("tickets")) == 1
    pipe.close()


def test_an_emptied_export_is_held_back_on_every_door_with_the_same_line(synced, tmp_path):
    root = copy_of(synced, tmp_path / "proj")
    with dagster_instance(tmp_path / "dagster") as instance:
        # The CDC state names a folder by its path: the copy's folder is new to it. One tick records it
        # (its records are in the store already: no run to request).
        first = GuardedLive(root, instance).tick("notes")
        assert isinstance(first, SensorResult) and not first.run_requests
    for note in (root / "notes").glob("*.md"):
        note.unlink()
    pipe = load(root)
    [verdict] = pipe.app.held_back()
    line = refusal_line([verdict])
    assert line.startswith(f"refusing to delete memory: notes: {root / 'notes'} holds 0 item(s), the store 10 "
                           f"(10 would be deleted, 100 %): the source became empty; re-run with --allow-deletions")
    pipe.close()

    # Python API
    pipe = load(root)
    with pytest.raises(DeletionsHeldBack) as refused:
        pipe.sync()
    assert str(refused.value) == line
    pipe.close()

    # CLI: sync says it as its one error line (a real process: its exit code and stderr); status lists the
    # source as held back (what it prints: in this process).
    proc = synthex("sync", "--project", str(root), check=False)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1] == f"error: {line}"
    assert f"held back: {line}" in cli("status", "--project", root).stdout
    [main] = json.loads(cli("status", "--json", "--project", root).stdout)["branches"]
    [held] = main["held_back"]
    assert held["message"] == line and (held["source"], held["outcome"], held["deleted"]) == ("notes", "emptied", 10)

    # A sensor tick and the reconcile schedule: no run requested, the same line, again at every tick.
    with dagster_instance(tmp_path / "dagster") as instance:
        live = GuardedLive(root, instance)
        for _ in range(2):
            tick = live.tick("notes")
            assert isinstance(tick, SkipReason) and tick.skip_message == line
        schedule = live.defs.get_schedule_def("guarded_reconcile")
        reconcile = schedule.evaluate_tick(build_schedule_context(
            instance=instance, resources={"cdc": live.defs.resources["cdc"]}))
        assert not reconcile.run_requests and reconcile.skip_message == line
        assert isinstance(live.tick("notes"), SkipReason)  # the schedule did not commit the held-back change

    # A run launched from the UI: the source step's op refuses with the same line.
    pipe = load(root)
    result = launch_like_the_ui(pipe, NOTE_PERIODS, steps=["notes"])
    assert not result.success
    step, message = failure_message(result)
    assert step == "notes" and message.strip().splitlines()[-1].endswith(line)
    # A re-execution of a CLI run copies its tags: the consent was that run's, so the op judges again.
    job = build_definitions(pipe).resolve_job_def(job_name(pipe.name))
    copied = job.execute_in_process(
        instance=pipe.app.instance, raise_on_error=False, asset_selection=[AssetKey("notes")],
        tags={**partition_range_tags(f"main|{NOTE_PERIODS[0]}", f"main|{NOTE_PERIODS[-1]}"),
              DELETIONS_TAG: "guarded:an-earlier-run"})
    assert not copied.success and failure_message(copied)[1].strip().splitlines()[-1].endswith(line)
    assert len(pipe.records("notes")) == 10  # nothing deleted on any door
    pipe.close()

    # --allow-deletions proceeds.
    proc = cli("sync", "--allow-deletions", "--project", root)
    assert "notes: 0 new, 0 changed, 10 deleted" in proc.stdout
    assert contents(root, "notes") == set() and len(contents(root, "tickets")) == 2
    assert "held back" not in cli("status", "--project", root).stdout


def test_ten_items_to_seven_is_held_back_and_ten_to_nine_is_not(synced, tmp_path):
    root = copy_of(synced, tmp_path / "proj")
    for n in (0, 1, 2):
        (root / "notes" / f"n{n}.md").unlink()
    proc = synthex("sync", "--project", str(root), check=False)
    assert proc.returncode == 1 and "notes: " in proc.stderr and "holds 7 item(s), the store 10" in proc.stderr
    assert "more than 20 % of at least 10 items gone" in proc.stderr
    pipe = load(root)
    with pytest.raises(DeletionsHeldBack, match="holds 7 item"):
        pipe.run()
    assert len(pipe.records("notes")) == 10
    pipe.close()

    write_notes(root, range(3))  # restored: nothing to delete
    (root / "notes" / "n0.md").unlink()  # 10 -> 9
    pipe = load(root)
    assert pipe.sync().run.status == "completed"
    assert len(pipe.records("notes")) == 9
    pipe.close()
