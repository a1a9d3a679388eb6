"""Sensors and the reconcile schedule, end to end through a real Dagster instance: a real folder, DuckDB
file, SQLite file and stream file change; sensor evaluation -> run requests -> runs -> records -> search."""

from __future__ import annotations

import sqlite3
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest
from conftest import load
from dagster import DagsterInstance, SensorResult, SkipReason, build_schedule_context, build_sensor_context

from synthex.core.sources.stream import append_lines
from synthex_assets.dagster_internals import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from synthex_assets.definitions import build_definitions
from synthex_assets.sensors import sensor_name

PIPELINE = '''
from synthex import Pipeline
from synthex.core.prompts import monthly_reflection

pipeline = Pipeline("live", agent="tester")
pipeline.source("notes", folder="notes")
pipeline.source("tickets", table="tickets", dsn="duckdb:///crm.duckdb", pk="id", updated_at="updated_at",
                 created_at="opened_at")
pipeline.source("contacts", table="contacts", dsn="sqlite:///crm.sqlite", pk="id")
pipeline.source("inbox", stream="inbox.jsonl")
pipeline.merge("everything", from_=["notes", "tickets", "contacts", "inbox"])
pipeline.aggregate("monthly", from_="everything", period="month", prompt=monthly_reflection)
pipeline.output("search", from_=["everything"], surface="search")
'''
SOURCES = ["notes", "tickets", "contacts", "inbox"]


def make_project(root: Path) -> Path:
    root.mkdir()
    (root / "pipeline.py").write_text(textwrap.dedent(PIPELINE))
    (root / "notes").mkdir()
    (root / "notes" / "standup.md").write_text("---\ndate: 2024-03-05\n---\nStandup: the Postgres migration slipped")
    with duckdb.connect(str(root / "crm.duckdb")) as db:
        db.execute("CREATE TABLE tickets (id INTEGER, subject VARCHAR, opened_at TIMESTAMP, updated_at TIMESTAMP)")
        db.execute("INSERT INTO tickets VALUES (1, 'printer on floor 3 is jammed', '2024-03-10', '2024-03-10 09:00'), "
                   "(2, 'vpn drops every hour', '2024-04-02', '2024-04-02 10:00:00')")
    with sqlite3.connect(root / "crm.sqlite") as db:
        db.execute("CREATE TABLE contacts (id INTEGER PRIMARY KEY, name TEXT, city TEXT)")
        db.executemany("INSERT INTO contacts VALUES (?, ?, ?)", [(1, "Ana Souza", "Recife"), (2, "Bo Lindqvist", "Umea")])
    append_lines(root / "inbox.jsonl", [{"id": "m1", "text": "remember the quarterly budget review",
                                         "created_at": "2024-04-20T08:00:00Z"}])
    return root


class Live:
    """One project's definitions on one Dagster instance: tick sensors, run what they request."""

    def __init__(self, root: Path, instance: DagsterInstance) -> None:
        self.root, self.instance = root, instance
        self.pipeline = load(root)
        self.defs = build_definitions(self.pipeline)
        self.ran: list[dict[str, str]] = []

    def tick(self, source: str) -> SensorResult | SkipReason:
        sensor = self.defs.get_sensor_def(sensor_name(source))
        context = build_sensor_context(instance=self.instance, resources={"cdc": self.defs.resources["cdc"]},
                                       definitions=self.defs)
        result = sensor(context)
        if isinstance(result, SensorResult):  # what the daemon does with the result
            for request in result.dynamic_partitions_requests or []:
                self.instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        return result

    def execute(self, result: SensorResult) -> None:
        job = self.defs.resolve_job_def("live")
        for request in result.run_requests:
            outcome = job.execute_in_process(instance=self.instance, tags=request.tags,
                                             asset_selection=request.asset_selection, raise_on_error=True)
            assert outcome.success
            self.ran.append(dict(request.tags))

    def contents(self, step: str) -> set[str]:
        return {r.content for r in self.pipeline.records(step)}


def search_top(live: Live, query: str) -> str:
    return live.pipeline.search(query, k=1)[0].content


@contextmanager
def dagster_instance(home: Path) -> Iterator[DagsterInstance]:
    """A real on-disk Dagster instance. Not entered as a context manager: entering sets Dagster's
    process-wide current defs-state storage, which would outlive this test and break later ones."""
    home.mkdir(parents=True, exist_ok=True)
    instance = DagsterInstance.from_config(str(home))
    try:
        yield instance
    finally:
        instance.dispose()


@pytest.fixture
def live(tmp_path):
    with dagster_instance(tmp_path / "dagster") as instance:
        yield Live(make_project(tmp_path / "proj"), instance)


def test_sensors_bring_changes_of_every_source_kind_into_memory(live):
    root = live.root
    for source in SOURCES:
        result = live.tick(source)
        assert isinstance(result, SensorResult) and result.run_requests, source
        live.execute(result)
    assert "vpn" in search_top(live, "vpn drops")
    assert "Postgres" in search_top(live, "database migration standup")
    assert "Recife" in search_top(live, "Ana Souza city")
    assert "budget" in search_top(live, "quarterly budget")
    assert {r.period for r in live.pipeline.records("monthly")} == {"1970-01", "2024-03", "2024-04"}

    # Idle ticks: nothing changed, no run requested.
    for source in SOURCES:
        assert isinstance(live.tick(source), SkipReason), source

    # A touched note is not a change (dated by its front matter, identified by its content).
    (root / "notes" / "standup.md").touch()
    assert isinstance(live.tick("notes"), SkipReason)

    # Changes: an updated ticket, a deleted contact, a new stream line in a new month.
    with duckdb.connect(str(root / "crm.duckdb")) as db:
        db.execute("UPDATE tickets SET subject = 'printer on floor 3 replaced', updated_at = '2024-07-01 09:00:00' "
                   "WHERE id = 1")
    with sqlite3.connect(root / "crm.sqlite") as db:
        db.execute("INSERT INTO contacts VALUES (3, 'Chen Wei', 'Xiamen')")
        db.execute("DELETE FROM contacts WHERE id = 2")
    append_lines(root / "inbox.jsonl", [{"id": "m2", "text": "book flights to Oslo", "created_at": "2024-06-01"}])

    tickets = live.tick("tickets")
    (request,) = tickets.run_requests  # only the ticket's month, source and downstream
    assert request.tags[ASSET_PARTITION_RANGE_START_TAG] == request.tags[ASSET_PARTITION_RANGE_END_TAG] == "main|2024-03"
    live.execute(tickets)
    assert "printer on floor 3 replaced" in search_top(live, "printer floor")
    assert not any("jammed" in c for c in live.contents("everything"))

    contacts = live.tick("contacts")
    live.execute(contacts)
    people = live.contents("contacts")
    assert any("Chen Wei" in c for c in people) and not any("Lindqvist" in c for c in people)
    (jan70,) = [r for r in live.pipeline.records("monthly") if r.period == "1970-01"]
    assert len(jan70.source_ids) == 2  # the aggregate was recomputed without the deleted contact

    inbox = live.tick("inbox")
    # New months become partitions (registered by whichever tick planned first), and only they run.
    assert "2024-06" in live.instance.get_dynamic_partitions("period")
    (request,) = inbox.run_requests
    assert request.tags[ASSET_PARTITION_RANGE_START_TAG] == request.tags[ASSET_PARTITION_RANGE_END_TAG] == "main|2024-06"
    live.execute(inbox)
    assert "Oslo" in search_top(live, "flights to Oslo")
    assert "2024-06" in {r.period for r in live.pipeline.records("monthly")}


def test_sensor_state_survives_a_restart_and_the_schedule_reconciles(tmp_path):
    root = make_project(tmp_path / "proj")
    with dagster_instance(tmp_path / "dagster") as instance:
        first = Live(root, instance)
        first.execute(first.tick("inbox"))
        # A new code server (fresh definitions and objects) sees the same CDC state: nothing to do.
        second = Live(root, instance)
        assert isinstance(second.tick("inbox"), SkipReason)

        # A tick whose run never happened (the run failed, the daemon died): the schedule repairs it.
        append_lines(root / "inbox.jsonl", [{"id": "m3", "text": "renew the passport", "created_at": "2024-04-25"}])
        assert isinstance(second.tick("inbox"), SensorResult)  # requested, never executed
        assert isinstance(second.tick("inbox"), SkipReason)  # the sensor has moved on
        schedule = second.defs.get_schedule_def("live_reconcile")
        context = build_schedule_context(instance=instance, resources={"cdc": second.defs.resources["cdc"]})
        requests = schedule.evaluate_tick(context).run_requests
        assert requests and any("inbox" in [k.path[-1] for k in r.asset_selection] for r in requests)
        second.execute(SensorResult(run_requests=requests))
        assert "passport" in search_top(second, "passport")
        assert schedule.evaluate_tick(build_schedule_context(
            instance=instance, resources={"cdc": second.defs.resources["cdc"]})).skip_message
