"""Folder sources: notes are dated by their content (front matter, then the file name), not by mtime, so a
touch or a fresh clone keeps every dated note's id and period."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synthex.core.importers import load_source
from synthex.core.importers.base import Intake
from synthex.core.importers.folder import parse, split_front_matter

MTIME = datetime(2021, 6, 15, 12, 0, tzinfo=UTC).timestamp()


def write(path: Path, text: str, mtime: float = MTIME) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (mtime, mtime))
    return path


def by_key(folder: Path) -> dict[str, object]:
    return {item.key: item for item in load_source(folder)}


def one_line(folder: Path) -> str:
    """The one note of ``folder`` set aside, as its one line (``file: problem``); the folder's read goes on
    without it (issue 32: a bad note never stops the folder)."""
    intake = Intake()
    load_source(folder, intake=intake)
    [note] = intake.set_aside
    message = str(note)
    assert "\n" not in message
    return message


def test_front_matter_dates_the_note_and_is_not_content(tmp_path):
    write(tmp_path / "n" / "standup.md", "---\ntitle: Stand-up\ndate: 2024-03-05T10:30:00+02:00\n"
                                         "tags: [work, daily]\n---\n\n# Notes\nShip it.\n")
    write(tmp_path / "n" / "idea.md", "---\ncreated: 2023-11-02\n---\nAn idea.")
    write(tmp_path / "n" / "both.md", "---\ndate: 2022-01-01\ncreated: 2020-01-01\n---\nBoth.")
    write(tmp_path / "n" / "empty-date.md", "---\ndate:\ncreated: '2020-02-02 08:00'\n---\nFallback key.")
    items = by_key(tmp_path / "n")
    standup = items["standup.md"]
    assert standup.content == "# Notes\nShip it."
    assert standup.created_at == "2024-03-05T08:30:00Z"
    assert standup.metadata["time"] == {"created_at": "2024-03-05T08:30:00Z", "dated_by": "front-matter"}
    assert standup.metadata["chat"] == {"title": "Stand-up"}
    assert standup.metadata["custom"] == {"title": "Stand-up", "date": "2024-03-05T10:30:00+02:00",
                                          "tags": ["work", "daily"]}
    assert items["idea.md"].created_at == "2023-11-02T00:00:00Z"
    assert items["idea.md"].metadata["chat"] == {"title": "idea"}  # no title: the file name
    assert items["both.md"].created_at == "2022-01-01T00:00:00Z"  # date wins over created
    assert items["empty-date.md"].created_at == "2020-02-02T08:00:00Z"


def test_a_date_in_the_file_name_or_path(tmp_path):
    folder = tmp_path / "n"
    for rel in ("2024-03-05-standup.md", "2024-03-06.md", "20240307 notes.md", "2024_03_08.txt",
                "journal/2024/03/09.md", "journal/2024/03/10-retro.md", "2024-03-11/notes.md",
                "log/2024/03/12/standup.md"):
        write(folder / rel, f"note {rel}")
    items = by_key(folder)
    days = {key: item.created_at[:10] for key, item in items.items()}
    assert days == {"2024-03-05-standup.md": "2024-03-05", "2024-03-06.md": "2024-03-06",
                    "20240307 notes.md": "2024-03-07", "2024_03_08.txt": "2024-03-08",
                    "journal/2024/03/09.md": "2024-03-09", "journal/2024/03/10-retro.md": "2024-03-10",
                    "2024-03-11/notes.md": "2024-03-11", "log/2024/03/12/standup.md": "2024-03-12"}
    assert {item.metadata["time"]["dated_by"] for item in items.values()} == {"file-name"}
    assert all(item.created_at.endswith("T00:00:00Z") for item in items.values())


def test_front_matter_beats_the_file_name_and_a_single_file_is_dated_by_its_name(tmp_path):
    note = write(tmp_path / "2024-03-05-x.md", "---\ndate: 2025-01-01\n---\nbody")
    assert load_source(note)[0].created_at == "2025-01-01T00:00:00Z"
    plain = write(tmp_path / "2024-03-05-y.md", "body")
    [item] = load_source(plain)
    assert item.key == "2024-03-05-y.md" and item.created_at == "2024-03-05T00:00:00Z"


@pytest.mark.parametrize("name", ["notes.md", "20241345 ticket.md", "12345678.md", "v2024-03-05.md",
                                  "1850-01-01.md", "2024-03-055.md", "2024/3/05.md"])
def test_the_mtime_is_the_fallback(tmp_path, name):
    write(tmp_path / "n" / name, "---\ntitle: no date here\n---\nbody")
    [item] = load_source(tmp_path / "n")
    assert item.created_at == "2021-06-15T12:00:00Z"
    assert item.metadata["time"]["dated_by"] == "mtime"
    assert item.metadata["chat"] == {"title": "no date here"}


def test_a_touch_or_a_clone_keeps_ids_and_periods_of_dated_notes(tmp_path):
    folder = tmp_path / "notes"
    write(folder / "fm.md", "---\ndate: 2024-01-10\n---\nfront matter")
    write(folder / "2024-02-11-named.md", "file name")
    write(folder / "journal/2024/03/12.md", "folder path")
    write(folder / "undated.md", "mtime")
    before = load_source(folder)
    later = datetime(2030, 1, 1, tzinfo=UTC).timestamp()
    for path in folder.rglob("*.md"):
        os.utime(path, (later, later))  # `touch`
    clone = tmp_path / "clone"
    shutil.copytree(folder, clone, copy_function=shutil.copyfile)  # a fresh clone: new files, new mtimes
    for after in (load_source(folder), load_source(clone)):
        assert [i.key for i in after] == [i.key for i in before]
        assert [i.content for i in after] == [i.content for i in before]
        dated = [(i.key, i.created_at) for i in after if i.key != "undated.md"]
        assert dated == [(i.key, i.created_at) for i in before if i.key != "undated.md"]
        assert [i.metadata["time"]["dated_by"] for i in after] == ["file-name", "front-matter", "file-name", "mtime"]
    assert load_source(folder)[-1].created_at == "2030-01-01T00:00:00Z"  # only the undated note moved


@pytest.mark.parametrize("value,reason", [
    ("March 5", "not a date (expected an ISO date"),
    ("2024", "not a date (expected an ISO date"),
    ("1709600000", "not a date (expected an ISO date"),
    ("'2024-13-01'", "not a date"),
    ("[2024-03-05]", "is a list ['2024-03-05']"),
    ("0999-01-01", "outside the years 1000-9999"),
])
def test_a_bad_front_matter_date_is_one_line_naming_file_and_field(tmp_path, value, reason):
    path = write(tmp_path / "n" / "bad.md", f"---\ntitle: x\ncreated: {value}\n---\nbody")
    message = one_line(tmp_path / "n")
    assert message.startswith(f"{path}: front matter: 'created' is ")
    assert reason in message


def test_a_bad_title_is_one_line(tmp_path):
    path = write(tmp_path / "n" / "bad.md", "---\ntitle: [a, b]\n---\nbody")
    assert one_line(tmp_path / "n") == f"{path}: front matter: 'title' is a list ['a', 'b']; expected a string or a number"


def test_what_is_not_front_matter_stays_content(tmp_path):
    folder = tmp_path / "n"
    write(folder / "rule.md", "---\nJust a horizontal rule and some prose.\n---\nMore text.")
    write(folder / "open.md", "---\ndate: 2024-01-01\nno closing line")
    write(folder / "late.md", "Intro\n---\ndate: 2024-01-01\n---\n")
    items = by_key(folder)
    assert items["rule.md"].content == "---\nJust a horizontal rule and some prose.\n---\nMore text."
    assert items["open.md"].content == "---\ndate: 2024-01-01\nno closing line"
    assert all(item.metadata["time"]["dated_by"] == "mtime" and "custom" not in item.metadata
               for item in items.values())


def test_front_matter_only_and_empty_files_are_skipped(tmp_path):
    folder = tmp_path / "n"
    write(folder / "empty.md", "")
    write(folder / "blank.md", " \n\n")
    write(folder / "meta-only.md", "---\ndate: 2024-01-01\n---\n\n")
    write(folder / "kept.md", "x")
    assert list(by_key(folder)) == ["kept.md"]


def test_the_tiny_front_matter_parser():
    text = ("\ufeff---\r\ntitle: \"Quoted: \\\"yes\\\"\"\r\ndate: 2024-03-05 10:00:00 +02:00  # a comment\r\n"
            "# a comment line\r\ntags:\r\n  - one\r\n- two\r\nsummary: |\r\n  line 1\r\n\r\n  line 2\r\n"
            "author:\r\n  name: Ada\r\nwrapped: a plain\r\n  scalar\r\nnothing: ~\r\nit: 'it''s'\r\n...\r\nbody\r\n")
    keys, body = split_front_matter(text)
    assert keys == {"title": 'Quoted: "yes"', "date": "2024-03-05 10:00:00 +02:00", "tags": ["one", "two"],
                    "summary": "line 1\n\nline 2", "author": "name: Ada", "wrapped": "a plain scalar",
                    "nothing": None, "it": "it's"}
    assert body == "body\r\n"
    assert split_front_matter("---\n---\nbody") == ({}, "body")


def test_an_escaped_lone_surrogate_in_front_matter_is_repaired_with_a_warning(tmp_path):
    path = write(tmp_path / "n" / "emoji.md", '---\ntitle: "half \\ud83d"\n---\nbody')
    [item] = load_source(tmp_path / "n")
    assert item.metadata["chat"]["title"] == "half \ufffd"
    assert item.warnings == [f"{path}: unpaired UTF-16 surrogates replaced with U+FFFD"]


def test_unreadable_and_non_utf8_files_are_still_named(tmp_path):
    folder = tmp_path / "n"
    write(folder / "ok.md", "fine")
    (folder / "latin.md").write_bytes(b"caf\xe9")
    assert one_line(folder).startswith(f"{folder / 'latin.md'}: not UTF-8 text")
    (folder / "latin.md").unlink()
    (folder / "broken.md").symlink_to(folder / "missing-target.md")
    assert one_line(folder).startswith(f"{folder / 'broken.md'}: cannot read file")


# -- properties -------------------------------------------------------------------------------------------

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
stamps = st.datetimes(min_value=datetime(1000, 1, 2), max_value=datetime(9999, 12, 30)).map(
    lambda d: d.replace(microsecond=0))
bodies = st.text(min_size=1).filter(lambda t: t.strip())


@PROPERTY
@given(stamp=stamps, body=bodies, spelling=st.sampled_from(["T", " "]), with_title=st.booleans())
def test_any_body_with_a_valid_front_matter_date_parses_to_that_date_and_the_body(
        tmp_path_factory, stamp, body, spelling, with_title):
    folder = tmp_path_factory.mktemp("prop")
    title = "title: Some title\n" if with_title else ""
    (folder / "note.md").write_text(f"---\n{title}date: {stamp.isoformat(sep=spelling)}\n---\n{body}",
                                    encoding="utf-8", newline="")
    [item] = parse(folder)
    assert item.created_at == stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert item.content == body.strip()
    assert item.metadata["time"]["dated_by"] == "front-matter"


@PROPERTY
@given(head=st.sampled_from([b"", b"---\n", b"---\ndate: ", b"---\ntitle: ", b"\xef\xbb\xbf---\n"]),
       data=st.binary(max_size=200) | st.text(max_size=120).map(lambda t: t.encode("utf-8", "surrogatepass")),
       tail=st.sampled_from([b"", b"\n---\nbody", b"\n...\n", b"\n---"]),
       name=st.sampled_from(["n.md", "2024-02-30.md", "20240101.txt", "2024/01/02.md"]))
def test_any_bytes_parse_or_are_set_aside_in_one_line(tmp_path_factory, head, data, tail, name):
    folder = tmp_path_factory.mktemp("bytes")
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(head + data + tail)
    intake = Intake()
    items = parse(folder, intake)  # a note it cannot take in is set aside in one line, never raised
    if intake.set_aside:
        [note] = intake.set_aside
        assert not items and "\n" not in str(note) and note.file == str(path)
        return
    for item in items:
        json.dumps([item.content, item.metadata], ensure_ascii=False).encode("utf-8")  # storable
        assert item.created_at.endswith("Z") and item.metadata["time"]["dated_by"] in (
            "front-matter", "file-name", "mtime")
