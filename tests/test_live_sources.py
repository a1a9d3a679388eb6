"""Live sources without Dagster's daemon: stream, API and folder sources, `remember`, and `synthex sync`
(CDC state in a real DuckDB file, runs through a real Dagster instance, records in a real LanceDB)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import load

from synthex.core.errors import BadInputError, PipelineDefinitionError, SourceError
from synthex.core.sources.stream import StreamOrigin, append_lines

STREAM_PIPELINE = '''
from synthex import Pipeline
from synthex.core.prompts import monthly_reflection

pipeline = Pipeline("live", agent="tester")
pipeline.source("inbox", stream="inbox.jsonl")
pipeline.transform("notes", from_="inbox", fn=lambda r: r.content)
pipeline.aggregate("monthly", from_="notes", period="month", prompt=monthly_reflection)
pipeline.output("search", from_=["notes"], surface="search")
'''

FACTS = ["I adopted a grey cat called Miso", "My sister lives in Porto", "I started learning the cello",
         "The team offsite is in Lisbon", "I ran a half marathon in Seville", "My favourite tea is genmaicha"]


def stream_project(root: Path, body: str = STREAM_PIPELINE) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pipeline.py").write_text(textwrap.dedent(body))
    return root


def monthly_sources(pipe, period: str) -> set[str]:
    (record,) = [r for r in pipe.records("monthly") if r.period == period]
    return set(record.source_ids)


def test_remember_sync_update_and_delete_flow_through_the_pipeline(tmp_path):
    pipe = load(stream_project(tmp_path / "p"))
    said = [pipe.remember(text, id=f"fact-{i}", created_at=f"2024-0{3 + i % 2}-0{1 + i}T09:00:00Z")
            for i, text in enumerate(FACTS)]
    report = pipe.sync()
    (change,) = report.changes
    assert (len(change.new), len(change.changed), len(change.deleted)) == (6, 0, 0)
    assert change.periods == ["2024-03", "2024-04"]
    assert {r.id for r in pipe.records("inbox")} == {s["record_id"] for s in said}
    assert pipe.search("cello", k=1)[0].content == "I started learning the cello"

    # Nothing new: the token shortcut answers and no Dagster run is launched.
    again = pipe.sync()
    assert again.changes[0].token_unchanged and again.run.dagster_run_ids == []

    # An update (same id, new text) replaces the item; a deletion line removes one; both reach the
    # month's aggregate, which is recomputed without the old / deleted record.
    update = pipe.remember("I adopted a grey cat called Miso and a dog called Tofu", id="fact-0",
                           created_at="2024-03-01T09:00:00Z")
    append_lines(tmp_path / "p" / "inbox.jsonl", [{"id": "fact-2", "deleted": True}])
    report = pipe.sync()
    (change,) = report.changes
    assert (change.new, change.changed, change.deleted) == ([], ["fact-0"], ["fact-2"])
    ids = {r.id for r in pipe.records("inbox")}
    assert update["record_id"] in ids and said[0]["record_id"] not in ids and said[2]["record_id"] not in ids
    march_notes = {r.id for r in pipe.records("notes") if r.period == "2024-03"}
    assert monthly_sources(pipe, "2024-03") == march_notes and len(march_notes) == 2
    assert "Tofu" in pipe.search("dog", k=1)[0].content


def test_a_stream_is_read_from_its_last_offset_and_only_whole_lines_count(tmp_path):
    path = tmp_path / "s.jsonl"
    append_lines(path, [{"text": "one", "created_at": "2024-01-01"}, {"text": "two", "created_at": "2024-01-02"}])
    origin = StreamOrigin(path)
    assert [i.content for i in origin.items()] == ["one", "two"]
    read_up_to = origin._offset
    assert read_up_to == path.stat().st_size
    with path.open("ab") as handle:  # a writer halfway through its line
        handle.write(b'{"text": "thr')
    assert [i.content for i in origin.items()] == ["one", "two"] and origin._offset == read_up_to
    with path.open("ab") as handle:
        handle.write(b'ee", "created_at": "2024-01-03"}\n')
    assert [i.content for i in origin.items()] == ["one", "two", "three"]
    # The same line appended twice is one item (identity: its id, else its text and date).
    append_lines(path, [{"text": "two", "created_at": "2024-01-02"}])
    assert len(origin.items()) == 3
    # A rewritten (shorter) file is read again from the start.
    path.write_text(json.dumps({"text": "fresh", "created_at": "2024-02-01"}) + "\n")
    assert [i.content for i in origin.items()] == ["fresh"]


def test_a_bad_stream_line_is_one_line_and_is_set_aside(tmp_path):
    # Issue 20: a bad line no longer stops the stream; it is named in the same one line and set aside
    # (tests/test_hostile_stream.py covers the quarantine end to end).
    path = tmp_path / "s.jsonl"
    append_lines(path, [{"text": "kept", "created_at": "2024-01-01"}])
    origin = StreamOrigin(path)
    assert len(origin.items()) == 1
    append_lines(path, [{"text": "good", "created_at": "2024-01-02"}, {"text": "no date"}])
    assert [i.content for i in origin.items()] == ["kept", "good"]
    (line,) = origin.quarantine().lines
    assert str(line) == (f"{path}:3: missing required field 'created_at' (or 'timestamp'): it dates the line")


API_PIPELINE = '''
from synthex import Pipeline
import api_feed

pipeline = Pipeline("feed", agent="tester")
pipeline.source("tickets", api=api_feed.fetch)
pipeline.transform("notes", from_="tickets", fn=lambda r: r.content)
'''

API_FEED = '''
import json, pathlib
HERE = pathlib.Path(__file__).parent
CALLS = HERE / "calls.jsonl"

def fetch(cursor):
    with CALLS.open("a") as f:
        f.write(json.dumps(cursor) + "\\n")
    pages = json.loads((HERE / "pages.json").read_text())
    start = 0 if cursor is None else cursor
    for n, page in enumerate(pages[start:], start=start + 1):
        if page == "boom":
            raise ConnectionError("the API went away")
        yield page, n
'''


def test_an_api_source_pulls_pages_from_its_cursor_and_keeps_what_landed(tmp_path):
    root = stream_project(tmp_path / "api", API_PIPELINE)
    (root / "api_feed.py").write_text(textwrap.dedent(API_FEED))
    page = lambda *ids: [{"id": i, "text": f"ticket {i}: printer on floor {i} is jammed",  # noqa: E731
                          "created_at": f"2024-05-0{1 + int(i[1:]) % 9}"} for i in ids]
    (root / "pages.json").write_text(json.dumps([page("t1", "t2"), page("t3")]))
    pipe = load(root)
    report = pipe.sync()
    assert report.changes[0].pulled == 3 and len(report.changes[0].new) == 3
    assert len(pipe.records("notes")) == 3

    (root / "pages.json").write_text(json.dumps([page("t1", "t2"), page("t3"), page("t4"), "boom"]))
    with pytest.raises(SourceError) as err:
        pipe.sync()
    assert "\n" not in str(err.value) and "ConnectionError: the API went away" in str(err.value)
    assert "(after 1 new item(s))" in str(err.value)
    calls = [json.loads(line) for line in (root / "calls.jsonl").read_text().splitlines()]
    assert calls == [None, 2]  # the second pull started from the cursor the first one saved
    # The page before the failure landed and its cursor was saved: the next pull starts after it.
    (root / "pages.json").write_text(json.dumps([page("t1", "t2"), page("t3"), page("t4")]))
    report = pipe.sync()
    assert report.changes[0].pulled == 0 and report.changes[0].new == ["t4"]
    assert json.loads((root / "calls.jsonl").read_text().splitlines()[-1]) == 3
    assert len(pipe.records("notes")) == 4


def test_remember_refuses_what_it_cannot_store(tmp_path):
    pipe = load(stream_project(tmp_path / "p"))
    with pytest.raises(BadInputError, match="the text is empty"):
        pipe.remember("  ")
    with pytest.raises(BadInputError, match="'created_at' is"):
        pipe.remember("x", created_at="not a date")
    assert not (tmp_path / "p" / "inbox.jsonl").exists()
    folder_only = load(stream_project(tmp_path / "q", STREAM_PIPELINE.replace('stream="inbox.jsonl"', 'folder="notes"')))
    with pytest.raises(PipelineDefinitionError, match="remember needs a stream source"):
        folder_only.remember("x")


def test_synthex_sync_cli_reports_changes_and_names_a_bad_source(tmp_path):
    root = stream_project(tmp_path / "p")
    append_lines(root / "inbox.jsonl", [{"text": FACTS[0], "created_at": "2024-03-01"}])
    exe = Path(sys.executable).with_name("synthex")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    out = subprocess.run([str(exe), "sync", "--project", str(root), "--json"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["sources"][0]["new"] == 1 and data["run"]["status"] == "completed"
    bad = subprocess.run([str(exe), "sync", "--project", str(root), "--source", "nope"], capture_output=True,
                         text=True, env=env, timeout=300)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: unknown source 'nope'; sources: inbox"


ARRIVING_PIPELINE = '''
import json, pathlib
from synthex import Pipeline

INBOX = pathlib.Path(__file__).parent / "inbox.jsonl"

def note(record):
    # Another writer appends while this run is computing (an agent's `remember` during a sync).
    if "first" in record.content:
        with INBOX.open("a") as f:
            f.write(json.dumps({"text": "arrived mid-run", "created_at": "2024-03-09"}) + "\\n")
    return record.content

pipeline = Pipeline("live", agent="tester")
pipeline.source("inbox", stream="inbox.jsonl")
pipeline.transform("notes", from_="inbox", fn=note)
'''


def test_data_arriving_during_a_sync_is_the_next_syncs_work_not_a_failed_run(tmp_path):
    root = stream_project(tmp_path / "p", ARRIVING_PIPELINE)
    append_lines(root / "inbox.jsonl", [{"text": "the first line", "created_at": "2024-03-01"}])
    pipe = load(root)
    first = pipe.sync()
    assert first.run.status == "completed"
    assert [r.content for r in pipe.records("notes")] == ["the first line"]
    second = pipe.sync()
    assert second.changes[0].new and sorted(r.content for r in pipe.records("notes")) == [
        "arrived mid-run", "the first line"]


def test_a_sync_that_waited_for_another_reports_only_what_it_added(tmp_path):
    """Two processes sync the same project: the second waits for the branch lock while the first takes in
    the new lines. Once it holds the lock there is nothing left for it, and it says so (before, it said
    the lines were new, counted before it waited)."""
    from synthex_resources.branch_lock import BranchLock

    root = stream_project(tmp_path / "p", STREAM_PIPELINE.split('pipeline.transform')[0]
                          + 'pipeline.output("search", from_=["inbox"], surface="search")\n')
    append_lines(root / "inbox.jsonl", [{"id": f"f{i}", "text": fact, "created_at": "2024-03-01"}
                                        for i, fact in enumerate(FACTS[:3])])
    waiting, other = load(root), load(root)
    holder = BranchLock(waiting.data_dir, "main", "another-sync").acquire()
    first: list = []

    def the_other_sync_runs_now(message: str) -> None:
        # Called once by the waiting sync, between two tries of the lock: the holder finishes its sync.
        assert "waiting: branch 'main' is being written by run another-sync" in message
        holder.release()
        first.append(other.sync())

    try:
        report = waiting.app.sync(wait=True, on_wait=the_other_sync_runs_now)
    finally:
        holder.release()
    (took,) = first[0].changes
    assert len(took.new) == 3 and first[0].run.dagster_run_ids
    (change,) = report.changes
    assert (change.new, change.changed, change.deleted) == ([], [], []) and change.token_unchanged
    assert report.run.dagster_run_ids == [] and len(waiting.records("inbox")) == 3
