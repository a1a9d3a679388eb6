import json

import pytest

from synthex.core.errors import SourceError
from synthex.core.importers import detect_format, load_source


def _chatgpt_conv():
    """A conversation with an edited (abandoned) first answer, a hidden system node and multimodal parts."""

    def node(nid, role, parts, parent, children, ctype="text", hidden=False, ts=1700000000):
        msg = None if role is None else {
            "id": nid, "author": {"role": role}, "create_time": ts,
            "content": {"content_type": ctype, "parts": parts},
            "metadata": {"is_visually_hidden_from_conversation": True} if hidden else {}}
        return {"id": nid, "message": msg, "parent": parent, "children": children}

    mapping = {
        "root": node("root", None, None, None, ["sys"]),
        "sys": node("sys", "system", [""], "root", ["u1"], hidden=True),
        "u1": node("u1", "user", [{"content_type": "image_asset_pointer", "asset_pointer": "file-x"},
                                  "What is in this picture of my cat?"], "sys", ["a_old", "a_new"],
                   ctype="multimodal_text"),
        "a_old": node("a_old", "assistant", ["OLD ANSWER from an abandoned branch"], "u1", []),
        "a_new": node("a_new", "assistant", ["A tabby cat sitting on a keyboard."], "u1", ["u2"]),
        "u2": node("u2", "user", ["Thanks!"], "a_new", []),
    }
    return {"title": None, "create_time": 1700000000.5, "update_time": 1700000100, "mapping": mapping,
            "current_node": "u2", "conversation_id": "conv-1", "id": "conv-1"}


def test_chatgpt_follows_current_node_and_skips_abandoned_branches(tmp_path):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([_chatgpt_conv()]))
    assert detect_format(path) == "chatgpt-export"
    [item] = load_source(path)
    assert "OLD ANSWER" not in item.content
    assert "A tabby cat sitting on a keyboard." in item.content
    assert "[image]" in item.content and "What is in this picture of my cat?" in item.content
    assert item.metadata["chat"]["title"] == "Untitled"
    assert item.metadata["chat"]["message_ids"] == ["u1", "a_new", "u2"]
    assert item.metadata["time"]["created_at"] == "2023-11-14T22:13:20Z"
    assert item.metadata["source"]["type"] == "chatgpt-export"
    assert "system" not in item.metadata["chat"]["authors"]


def test_claude_export(tmp_path):
    path = tmp_path / "claude.json"
    path.write_text(json.dumps([{
        "uuid": "c-1", "name": "Trip", "created_at": "2024-03-02T10:00:00.000000Z",
        "chat_messages": [
            {"uuid": "m1", "text": "Plan Kyoto", "sender": "human", "created_at": "2024-03-02T10:00:00Z"},
            {"uuid": "m2", "text": "", "content": [{"type": "text", "text": "Go to Fushimi Inari."}],
             "sender": "assistant", "created_at": "2024-03-02T10:00:05Z"},
        ]}]))
    assert detect_format(path) == "claude-export"
    [item] = load_source(path)
    assert item.content == "# Trip\n\nuser: Plan Kyoto\n\nassistant: Go to Fushimi Inari."
    assert item.created_at == "2024-03-02T10:00:00Z"
    assert item.metadata["source"]["type"] == "claude-export"


def test_folder_and_jsonl(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Note A\nRust notes")
    (folder / "b.txt").write_text("plain text")
    (folder / "skip.bin").write_bytes(b"\x00")
    assert detect_format(folder) == "folder"
    assert [i.key for i in load_source(folder)] == ["a.md", "b.txt"]
    jl = tmp_path / "docs.jsonl"
    jl.write_text('{"id": "x", "content": "hello", "created_at": "2024-01-05T00:00:00Z"}\n\n{"text": "bye"}\n')
    items = load_source(jl)
    assert [i.key for i in items] == ["x", "line-3"]
    assert items[0].created_at == "2024-01-05T00:00:00Z"


@pytest.mark.parametrize("text,fmt,expected", [
    ('[{"mapping": {}, "title": "x"', "auto", "invalid JSON"),
    ('{"hello": 1}', "auto", "unknown format"),
    ('[{"title": "no mapping", "id": "c1"}]', "chatgpt-export", "missing required field 'mapping'"),
    ('[{"uuid": "u", "name": "n"}]', "claude-export", "missing required field 'chat_messages'"),
])
def test_bad_input_names_the_file_and_problem(tmp_path, text, fmt, expected):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(SourceError) as err:
        load_source(path, fmt)
    assert str(path) in str(err.value)
    assert expected in str(err.value)


def test_jsonl_missing_content_names_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"content": "ok"}\n{"title": "no content"}\n')
    with pytest.raises(SourceError, match=r"x.jsonl:2: missing required field 'content'"):
        load_source(path)


def test_a_source_is_parsed_once_while_its_file_is_unchanged(tmp_path, monkeypatch):
    import os

    from synthex.core.importers import ParsedSource, base, formats

    path = tmp_path / "notes.jsonl"
    path.write_text('{"id": "a", "text": "first note", "created_at": "2024-01-02"}\n')
    parses = []
    real = formats.load_source
    monkeypatch.setattr(formats, "load_source", lambda p, fmt="auto", *rest: parses.append(p) or real(p, fmt, *rest))
    monkeypatch.setattr(base, "RACY_SECONDS", 0.0)  # the file was written just now; trust its stat here
    parsed = ParsedSource()
    first = parsed.items(path, "jsonl")
    assert parsed.items(path, "jsonl") is first and len(parses) == 1  # unchanged: no parse, no hash
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10_000_000))  # touched, same bytes
    assert parsed.items(path, "jsonl") is first and len(parses) == 1  # re-hashed, not re-parsed
    path.write_text('{"id": "a", "text": "first note, edited", "created_at": "2024-01-02"}\n')
    assert [i.content for i in parsed.items(path, "jsonl")] != [i.content for i in first] and len(parses) == 2
    # A same-size edit that keeps the mtime (cp -p, rsync -t) is still seen: the ctime moved.
    before = path.stat()
    path.write_text('{"id": "a", "text": "first note, EDITED", "created_at": "2024-01-02"}\n')
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert "EDITED" in parsed.items(path, "jsonl")[0].content and len(parses) == 3


def test_an_export_cut_mid_way_says_it_looks_truncated_in_one_line(tmp_path):
    """A download or extraction that stopped mid-way ends inside a string, where the parser names the
    string's start, not the end of the file: the error still says the file looks truncated, and where."""
    from synthex.core.demo.generate import generate

    text = json.dumps(generate(conversations=3, months=1, seed=3))
    for cut in (len(text) // 2, len(text) // 3, len(text) - 1):
        path = tmp_path / f"cut-{cut}.json"
        path.write_text(text[:cut])
        with pytest.raises(SourceError) as err:
            load_source(path)
        message = str(err.value)
        assert "\n" not in message and message.startswith(f"{path}: invalid JSON: the file looks truncated")
        assert f"it ends at character {cut}" in message and "line 1 column" in message
    wrong = tmp_path / "wrong.json"
    wrong.write_text('[{"mapping": {}, "title": "x"}}, {"mapping": {}}]')  # broken, not cut: no such hint
    with pytest.raises(SourceError) as err:
        load_source(wrong)
    assert "truncated" not in str(err.value) and "invalid JSON at line 1 column 31" in str(err.value)
