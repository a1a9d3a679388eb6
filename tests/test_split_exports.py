"""Issue 32 item 6: a large account's export split into parts imports every part, and a source that yields
nothing from a folder holding files says why (never an empty memory without a word).

ChatGPT splits a large export into conversations-000.json, conversations-001.json, ... beside chat.html and
conversations.json.index; Claude splits one into several zips (batches), each with its own
conversations.json, extracted side by side. Real parts: files in a tmp dir, `synthex init` / run / sync /
status through the CLI (real DuckDB CDC state, Dagster run, LanceDB store)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from conftest import cli, load

from synthex.core.demo.generate import generate
from synthex.core.errors import SourceError
from synthex.core.importers import detect_format, load_source
from synthex.core.importers.base import Intake
from synthex.core.importers.formats import change_token

OLD = 1_600_000_000  # mtimes in the past: the change token is the stat signature, no "racy" hashing
ONE_SOURCE = '''
from synthex import Pipeline

pipeline = Pipeline("split", agent="tester")
pipeline.source("{name}", file={path!r}, format={fmt!r})
pipeline.output("search", from_=["{name}"], surface="search")
'''


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    os.utime(path, (OLD, OLD))
    return path


def chatgpt_split(folder: Path, conversations: list[dict], per_part: int = 4) -> Path:
    """What ChatGPT's export of a large account unzips to (parts, the index, the viewer, the account)."""
    for number, start in enumerate(range(0, len(conversations), per_part)):
        write(folder / f"conversations-{number:03d}.json", conversations[start:start + per_part])
    write(folder / "conversations.json.index", {"parts": number + 1})
    write(folder / "chat.html", "<html>the export's viewer</html>")
    write(folder / "user.json", {"email": "someone@example.com"})
    write(folder / "dalle-generations" / "x.webp", "not an image")
    return folder


def claude_conversation(uuid: str, text: str) -> dict:
    return {"uuid": uuid, "name": text, "created_at": "2024-03-02T10:00:00Z", "chat_messages": [
        {"uuid": f"{uuid}-m", "sender": "human", "text": text, "created_at": "2024-03-02T10:00:00Z"}]}


def test_init_from_a_split_chatgpt_export_reads_every_part_and_syncs_a_new_one(tmp_path):
    conversations = generate(conversations=12, months=3, seed=3)
    single = load_source(write(tmp_path / "one" / "conversations.json", conversations))
    split = chatgpt_split(tmp_path / "export", conversations)

    created = cli("init", str(tmp_path / "proj"), "--from", split, "--template", "raw")
    assert created.returncode == 0
    text = (tmp_path / "proj" / "pipeline.py").read_text()
    assert f"pipeline.source('chatgpt', file={str(split)!r}, format='chatgpt-export')" in text
    # The same items, keys and texts as the export in one file: the same record ids.
    items = load_source(split, "chatgpt-export")
    assert [(i.key, i.content) for i in items] == [(i.key, i.content) for i in single]
    assert items[5].metadata["source"]["path"] == str(split / "conversations-001.json")
    # What the change token reads is the parts alone: the viewer or the images beside them are no change.
    token = change_token(split, "chatgpt-export")
    write(split / "chat.html", "<html>rewritten</html>")
    assert change_token(split, "chatgpt-export") == token

    ran = cli("run", "--project", tmp_path / "proj")
    assert "records:" in ran.stdout
    pipe = load(tmp_path / "proj")
    try:
        assert len(pipe.records("chatgpt")) == 12
    finally:
        pipe.close()
    more = generate(conversations=2, months=1, seed=5)
    for conv in more:
        conv["id"] = conv["conversation_id"] = f"later-{conv['id']}"
    write(split / "conversations-003.json", more)
    synced = cli("sync", "--project", tmp_path / "proj", "--json")
    assert json.loads(synced.stdout)["sources"][0]["new"] == 2


def test_a_claude_export_in_batches_is_one_source_over_every_batch(tmp_path):
    folder = tmp_path / "claude"
    write(folder / "data-2024-batch-0000" / "conversations.json", [claude_conversation("c1", "Plan Kyoto")])
    write(folder / "data-2024-batch-0000" / "users.json", [{"uuid": "u"}])
    write(folder / "data-2024-batch-0001" / "conversations.json", [claude_conversation("c2", "Book the ryokan")])
    assert detect_format(folder) == "claude-export"
    assert [i.key for i in load_source(folder)] == ["c1", "c2"]
    # Two exports in one folder of parts: the part of the other one is named as such, in one line.
    mixed = chatgpt_split(tmp_path / "mixed", generate(conversations=4, months=1, seed=3))
    write(mixed / "conversations-001.json", [claude_conversation("c3", "Kyoto again")])
    with pytest.raises(SourceError) as err:
        load_source(mixed)
    assert str(err.value) == (f"{mixed / 'conversations-001.json'}: a Claude export among the parts of a ChatGPT "
                              f"export; give each export its own --from")


def test_a_folder_source_that_yields_nothing_says_why_in_run_sync_and_status(tmp_path):
    split = chatgpt_split(tmp_path / "export", generate(conversations=8, months=2, seed=3))
    root = tmp_path / "old"
    root.mkdir()  # a project made before split exports were recognized: the folder read as notes
    (root / "pipeline.py").write_text(textwrap.dedent(ONE_SOURCE.format(name="documents", path=str(split),
                                                                         fmt="folder")))
    why = (f"{split}: no notes (.md, .txt, .markdown) here, but a ChatGPT export split into 2 part(s) "
           f"(conversations-000.json, conversations-001.json): read it with pipeline.source(NAME, "
           f"file={str(split)!r}, format='chatgpt-export'), as `synthex init --from` does")
    assert f"warning: {why}" in cli("run", "--project", root).stderr
    assert f"documents: unchanged; {why}" in cli("sync", "--project", root).stdout
    assert f"source documents: nothing imported: {why}" in cli("status", "--project", root).stdout

    pdfs = tmp_path / "papers"
    write(pdfs / "a.pdf", "%PDF-1.4")
    write(pdfs / "b" / "c.pdf", "%PDF-1.4")
    intake = Intake()
    assert load_source(pdfs, "folder", intake) == []
    assert intake.nothing == f"{pdfs}: no notes (.md, .txt, .markdown) among its 2 file(s): nothing is imported from it"
    empty = tmp_path / "empty"
    empty.mkdir()
    intake = Intake()
    assert load_source(empty, "folder", intake) == [] and intake.nothing is None  # nothing there, nothing to say
