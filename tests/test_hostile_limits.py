"""Hostile input at the sources (issue 20 items 2, 4, 8a): size bounds checked before anything is loaded,
notes folders that stay inside their folder, special files never opened, far-future dates refused.

One real project (a notes folder holding a 1 GB sparse note, a link to /etc/passwd, a FIFO and a note
dated 9999) is synced once per module through a real Dagster instance and LanceDB; the other tests read
sources directly (no run) or call ``remember`` on a loaded project.
"""

from __future__ import annotations

import os
import textwrap
import threading
import tracemalloc
from pathlib import Path

import pytest
from conftest import cli, go_offline, load

from synthex import Limits
from synthex.core.errors import BadInputError, PipelineDefinitionError, SourceError
from synthex.core.importers import ParsedSource, load_source
from synthex.core.importers import base as importer_base
from synthex.core.importers.base import Intake, TooLarge, read_capped
from synthex.core.sources.file import FileOrigin
from synthex.core.steps.source import SourceStep

GB = 1024**3
PASSWD = "/etc/passwd"


def note(path: Path, text: str, date: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\ndate: {date}\n---\n{text}\n" if date else text)
    return path


def sparse(path: Path, size: int) -> Path:
    """A file of ``size`` bytes that takes no disk (and, read, would take ``size`` bytes of memory)."""
    with path.open("wb") as handle:
        handle.truncate(size)
    return path


def hostile_folder(folder: Path) -> Path:
    note(folder / "ada.md", "Met Ada to talk about the compiler.", "2024-03-05")
    note(folder / "bike.md", "Bought a second-hand bike.", "2024-04-01")
    note(folder / "future.md", "I come from the year 9999 and take over the context.", "9999-12-31")
    sparse(folder / "huge.md", GB)
    (folder / "passwd.md").symlink_to(PASSWD)
    os.mkfifo(folder / "pipe.md")
    return folder


PIPELINE = '''
from synthex import Pipeline
from synthex.prompts import world_model_prompt

pipeline = Pipeline("hostile", agent="tester")
pipeline.source("notes", folder="notes")
pipeline.fold("world-model", from_="notes", prompt=world_model_prompt)
pipeline.output("context", from_="world-model", surface="projection")
pipeline.output("search", from_=["notes"], surface="search")
'''


@pytest.fixture(scope="module")
def synced(tmp_path_factory):
    """The hostile notes folder, synced once (read-only for the tests that take it)."""
    root = tmp_path_factory.mktemp("hostile") / "proj"
    hostile_folder(root / "notes")
    (root / "pipeline.py").write_text(textwrap.dedent(PIPELINE))
    with pytest.MonkeyPatch.context() as mp:
        go_offline(mp)
        pipe = load(root)
        try:
            report = pipe.sync()
        finally:
            pipe.close()
    return root, report


def test_a_hostile_notes_folder_syncs_what_is_good_and_says_what_it_skipped(synced):
    root, report = synced
    assert report.run.status == "completed"
    pipe = load(root)
    try:
        notes = pipe.records("notes")
        assert sorted(r.meta("source.path") for r in notes) == [str(root / "notes" / "ada.md"),
                                                                 str(root / "notes" / "bike.md")]
        # The note dated 9999 never entered: the context is the world model of the last real month.
        context = pipe.projection("context")
        assert context is not None and context.period == "2024-04"
        stored = pipe.records("notes") + pipe.records("world-model")
        assert stored and all("9999" not in r.content and "root:" not in r.content for r in stored)
        assert not [h for h in pipe.search("root", k=10) if "root:" in h.content]
        warnings = pipe.app.import_warnings()
        assert all("Traceback" not in w and "\n" not in w for w in warnings)
        by_file = {name: [w for w in warnings if f"/{name}" in w or f"item {name}" in w]
                   for name in ("huge.md", "passwd.md", "pipe.md", "future.md")}
        assert all(len(lines) == 1 for lines in by_file.values()), warnings
        assert "note_bytes" in by_file["huge.md"][0] and "1.0 GB" in by_file["huge.md"][0]
        assert "Pipeline(limits=Limits(note_bytes=...))" in by_file["huge.md"][0]
        assert f"a link to {PASSWD}, outside the notes folder" in by_file["passwd.md"][0]
        assert "follow_links=True" in by_file["passwd.md"][0]
        assert "a FIFO" in by_file["pipe.md"][0]
        assert "dated 9999-12-31T00:00:00Z" in by_file["future.md"][0] and "future_days" in by_file["future.md"][0]
        assert all(r.status != "running" for r in pipe.runs())
    finally:
        pipe.close()


def test_plan_prints_the_skipped_files_as_warnings(synced):
    root, _ = synced
    planned = cli("plan", "--project", str(root))
    warned = [line for line in planned.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warned) == 4 and "Everything is up to date." in planned.stdout


# -- sizes: stat'ed before they are opened, read to at most the bound ------------------------------------------

def test_a_1gb_note_is_skipped_without_being_read(tmp_path):
    folder = tmp_path / "notes"
    note(folder / "small.md", "small note")
    sparse(folder / "huge.md", GB)
    parsed = ParsedSource()
    tracemalloc.start()
    try:
        items = parsed.items(folder, "folder")
        origin_token = FileOrigin(folder, "folder").token()  # the sensors' change test: stat, never a read
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [i.key for i in items] == ["small.md"] and origin_token
    [warning] = parsed.warnings
    assert warning.startswith(f"{folder / 'huge.md'}: skipped: the note is 1.0 GB")
    assert peak < 4 * 1024 * 1024  # a read of the note would be 1 GB


def test_a_note_just_over_a_configured_bound_is_skipped_and_one_at_it_is_kept(tmp_path):
    folder = tmp_path / "notes"
    note(folder / "at.md", "x" * 100)
    note(folder / "over.md", "y" * 101)
    parsed = ParsedSource()
    assert [i.key for i in parsed.items(folder, "folder", Limits(note_bytes=100))] == ["at.md"]
    assert parsed.warnings == [f"{folder / 'over.md'}: skipped: the note is 101 bytes, over the note_bytes bound "
                               "of 100 bytes (raise it with Pipeline(limits=Limits(note_bytes=...)))"]
    assert [i.key for i in parsed.items(folder, "folder", Limits(note_bytes=101))] == ["at.md", "over.md"]


def test_a_file_that_grows_while_read_is_cut_at_the_bound(tmp_path, monkeypatch):
    path = tmp_path / "growing.md"
    path.write_bytes(b"z" * 5000)
    real = importer_base.open_regular

    def stat_before_it_grew(p, follow_links=True):  # the stat said 10 bytes; 5000 arrived since
        fd, st = real(p, follow_links)
        return fd, os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid, 10,
                                   st.st_atime, st.st_mtime, st.st_ctime))

    monkeypatch.setattr(importer_base, "open_regular", stat_before_it_grew)
    with pytest.raises(TooLarge, match=r"growing.md: skipped: the note \(it grew while read\) is 1,001 bytes"):
        read_capped(path, 1000, "note_bytes", Limits(note_bytes=1000), "the note")


def test_an_export_over_source_file_bytes_is_skipped_before_it_is_read(tmp_path):
    export = tmp_path / "conversations.json"
    sparse(export, GB)  # never parsed: a parse would fail on the NUL bytes, a read would take 1 GB
    intake = Intake(Limits(source_file_bytes=GB - 1))
    assert load_source(export, "auto", intake) == []
    [warning] = intake.warnings
    assert warning.startswith(f"{export}: skipped: the file is 1.0 GB") and "source_file_bytes" in warning


def test_a_jsonl_file_of_one_endless_line_is_read_to_the_bound_only(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b'{"content": "' + b"a" * 4000 + b'"}\n{"content": "second"}\n')
    intake = Intake(Limits(source_file_bytes=1000))
    assert load_source(path, "jsonl", intake) == []
    assert "skipped: the file is 4,038 bytes, over the source_file_bytes bound of 1,000 bytes" in intake.warnings[0]


def test_an_item_over_record_chars_is_left_out_and_the_others_keep_their_ids(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"id": "a", "content": "short", "created_at": "2024-01-01"}\n'
                    '{"id": "b", "content": "' + "long " * 30 + '", "created_at": "2024-01-02"}\n')
    loose = SourceStep.build("docs", file=str(path), format="jsonl")
    tight = SourceStep.build("docs", file=str(path), format="jsonl")
    tight.use_limits(Limits(record_chars=100))
    assert [i.key for i in loose.items()] == ["a", "b"] and [i.key for i in tight.items()] == ["a"]
    assert tight.version_hash() == loose.version_hash()  # so record "a" has the same id either way
    assert tight.warnings() == [f"{path}: item b: skipped: its text is 150 characters, over the record_chars bound "
                                "of 100 characters (raise it with Pipeline(limits=Limits(record_chars=...)))"]


# -- folders stay inside: links and special files ------------------------------------------------------------

def test_links_out_of_the_folder_are_skipped_unless_the_source_follows_them(tmp_path):
    outside = note(tmp_path / "elsewhere" / "shared.md", "a shared note").parent
    folder = tmp_path / "notes"
    note(folder / "sub" / "inner.md", "inside")
    (folder / "passwd.md").symlink_to(PASSWD)
    (folder / "alias.md").symlink_to(folder / "sub" / "inner.md")  # inside: read as before
    (folder / "linked").symlink_to(outside, target_is_directory=True)
    (folder / "inside-dir").symlink_to(folder / "sub", target_is_directory=True)  # not walked twice
    parsed = ParsedSource()
    assert [i.key for i in parsed.items(folder, "folder")] == ["alias.md", "sub/inner.md"]
    assert parsed.warnings == [
        f"{folder / 'linked'}: skipped: a link to the folder {outside}, outside the notes folder "
        "(follow_links=True on the source allows it)",
        f"{folder / 'passwd.md'}: skipped: a link to {PASSWD}, outside the notes folder "
        "(follow_links=True on the source allows it)"]
    followed = ParsedSource()
    assert [i.key for i in followed.items(folder, "folder", follow_links=True)] == [
        "alias.md", "linked/shared.md", "passwd.md", "sub/inner.md"]
    assert followed.warnings == []


def test_follow_links_is_a_folder_option_that_keeps_versions_and_round_trips_through_toml(tmp_path):
    from synthex.core.definition import PipelineDefinition

    plain = PipelineDefinition("p", project_dir=tmp_path)
    plain.source("notes", folder="notes")
    following = PipelineDefinition("p", project_dir=tmp_path)
    following.source("notes", folder="notes", follow_links=True)
    assert following.steps["notes"].version_hash() == plain.steps["notes"].version_hash()
    assert plain.to_toml_dict()["steps"][0] == {"name": "notes", "kind": "source", "file": "notes", "format": "folder"}
    (tmp_path / "p.toml").write_text(following.to_toml())
    again = PipelineDefinition.from_toml(tmp_path / "p.toml", allow_effects=True)
    assert again.steps["notes"].reader().follow_links is True
    with pytest.raises(PipelineDefinitionError, match="follow_links= takes True or False"):
        plain.source("other", folder="notes", follow_links="yes")
    with pytest.raises(PipelineDefinitionError, match="follow_links= belongs to a folder= source"):
        plain.source("export", file="x.json", follow_links=True)


def test_a_fifo_is_never_opened_in_a_folder_and_is_one_line_as_a_file_source(tmp_path):
    folder = tmp_path / "notes"
    note(folder / "ok.md", "fine")
    os.mkfifo(folder / "pipe.md")
    (folder / "to-pipe.md").symlink_to(folder / "pipe.md")
    done: dict[str, object] = {}

    def parse() -> None:  # a thread: opening the FIFO for reading would block until a writer comes
        parsed = ParsedSource()
        done["keys"] = [i.key for i in parsed.items(folder, "folder")]
        done["warnings"] = parsed.warnings
        try:
            load_source(folder / "pipe.md", "jsonl")
        except SourceError as exc:
            done["error"] = str(exc)

    worker = threading.Thread(target=parse, daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():  # unblock it, then fail
        with open(folder / "pipe.md", "wb"):
            pass
        pytest.fail("reading the folder blocked on its FIFO")
    assert done["keys"] == ["ok.md"]
    assert done["warnings"] == [f"{folder / 'pipe.md'}: skipped: a FIFO, not a regular file (never opened)",
                                f"{folder / 'to-pipe.md'}: skipped: a link to a FIFO, not a regular file (never opened)"]
    assert done["error"] == f"{folder / 'pipe.md'}: a FIFO, not a regular file; not read"


# -- dates ---------------------------------------------------------------------------------------------------

def test_far_future_items_are_refused_whatever_the_source_and_near_ones_kept(tmp_path):
    from datetime import UTC, datetime, timedelta

    soon = (datetime.now(UTC) + timedelta(hours=12)).strftime("%Y-%m-%dT%H:%M:%SZ")
    later = (datetime.now(UTC) + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(f'{{"id": "{key}", "content": "{key}", "created_at": "{when}"}}\n' for key, when in
                            [("past", "2024-01-01"), ("soon", soon), ("later", later), ("y9999", "9999-12-31")]))
    step = SourceStep.build("docs", file=str(path), format="jsonl")
    assert [i.key for i in step.items()] == ["past", "soon"]
    assert [w.split(": skipped: ")[0] for w in step.warnings()] == [f"{path}: item later", f"{path}: item y9999"]
    assert "dated 9999-12-31T00:00:00Z, more than the future_days bound of 1 day(s)" in step.warnings()[1]
    step.use_limits(Limits(future_days=5))
    assert [i.key for i in step.items()] == ["past", "soon", "later"]


# -- remember ------------------------------------------------------------------------------------------------

def test_remember_refuses_a_text_over_remember_bytes_before_writing_anything(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "pipeline.py").write_text(textwrap.dedent('''
        from synthex import Limits, Pipeline

        pipeline = Pipeline("inbox", agent="tester", limits=Limits(remember_bytes=1000))
        pipeline.source("inbox", stream="inbox.jsonl")
    '''))
    pipe = load(root)
    try:
        with pytest.raises(BadInputError) as refused:
            pipe.remember("é" * 600)  # 600 characters, 1200 bytes
        assert str(refused.value) == ("remember: refused: the text is 1,200 bytes, over the remember_bytes bound of "
                                      "1,000 bytes (raise it with Pipeline(limits=Limits(remember_bytes=...)))")
        with pytest.raises(BadInputError, match=r"the text is at least 50.0 MB \(52,428,800 bytes\)"):
            pipe.remember("x" * (50 * 1024 * 1024))
        assert not (root / "inbox.jsonl").exists()
        pipe.remember("e" * 1000)
        assert (root / "inbox.jsonl").exists()
    finally:
        pipe.close()


def test_remember_refuses_a_date_past_future_days_instead_of_queueing_a_line_no_sync_imports(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "pipeline.py").write_text(textwrap.dedent('''
        from synthex import Pipeline

        pipeline = Pipeline("inbox", agent="tester")
        pipeline.source("inbox", stream="inbox.jsonl")
    '''))
    pipe = load(root)
    try:
        with pytest.raises(BadInputError) as refused:
            pipe.remember("from the far future", created_at="9999-12-31T00:00:00Z")
        assert str(refused.value).startswith("remember: item 'sha-")
        assert ("refused: dated 9999-12-31T00:00:00Z, more than the future_days bound of 1 day(s) after now"
                in str(refused.value))
        assert not (root / "inbox.jsonl").exists()
        assert pipe.remember("from the past", created_at="2024-01-01T00:00:00Z")["status"].name == "QUEUED"
        assert (root / "inbox.jsonl").read_text().count("\n") == 1
    finally:
        pipe.close()
