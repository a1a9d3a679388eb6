"""Importers against hostile input: every bad export is one SourceError line naming the file, the
record and the field, never another exception (issue 9). Property tests substitute arbitrary JSON into
each field an importer reads; regression tests pin the cases the issue reported."""

from __future__ import annotations

import copy
import gzip
import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synthex.core.errors import SourceError
from synthex.core.hashing import fingerprint
from synthex.core.importers import ParsedSource, load_source
from synthex.core.periods import month_of

# -- valid exports, the base every case mutates ------------------------------------------------------


def chatgpt_export() -> list[dict[str, Any]]:
    def node(nid: str, parent: str | None, children: list[str], role: str | None = None, text: str = "") -> dict:
        message = None if role is None else {
            "id": nid, "author": {"role": role}, "create_time": 1700000000, "metadata": {},
            "content": {"content_type": "text", "parts": [text]}}
        return {"id": nid, "message": message, "parent": parent, "children": children}

    mapping = {"root": node("root", None, ["u1"]), "u1": node("u1", "root", ["a1"], "user", "hi"),
               "a1": node("a1", "u1", [], "assistant", "hello")}
    return [{"id": "c1", "conversation_id": "c1", "title": "Trip", "create_time": 1700000000,
             "update_time": 1700000100, "current_node": "a1", "mapping": mapping}]


def claude_export() -> list[dict[str, Any]]:
    return [{"uuid": "k1", "name": "Plans", "created_at": "2024-03-02T10:00:00Z", "chat_messages": [
        {"sender": "human", "text": "Plan Kyoto", "content": [{"type": "text", "text": "Plan Kyoto"}],
         "created_at": "2024-03-02T10:00:00Z"},
        {"sender": "assistant", "text": "", "content": [{"type": "text", "text": "Go."}],
         "created_at": "2024-03-02T10:00:05Z"}]}]


def jsonl_rows() -> list[Any]:
    return [{"id": "a", "content": "first", "created_at": "2024-01-05T00:00:00Z", "title": "A",
             "metadata": {"k": "v"}},
            {"text": "second", "timestamp": 1700000000}]


def write(path: Path, data: Any) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in data) if path.suffix == ".jsonl" else json.dumps(data))
    return path


def one_line_error(path: Path, fmt: str = "auto") -> str:
    """The SourceError ``load_source`` raises: one line that names the file."""
    with pytest.raises(SourceError) as err:
        load_source(path, fmt)
    message = str(err.value)
    assert len(message.splitlines()) == 1, message
    assert str(path) in message
    return message


def check_items_or_one_line(path: Path, fmt: str) -> None:
    """The fuzz property: items fit for the pipeline, or a one-line SourceError naming the file."""
    try:
        items = load_source(path, fmt)
    except SourceError as err:
        message = str(err)
        assert len(message.splitlines()) == 1 and str(path) in message, message
        return
    for item in items:
        month_of(item.created_at)  # the source step partitions by month
        fingerprint(item.content + item.key)  # and hashes UTF-8: no lone surrogates left
        json.dumps(item.metadata, ensure_ascii=False).encode()
        assert all(len(w.splitlines()) == 1 and str(path) in w for w in item.warnings)


# -- strategies ----------------------------------------------------------------------------------------

DELETE = object()  # substitute "field missing" rather than a value
# Values the issue reported plus the edges of timestamps and text.
SPECIAL = [1e20, -1e20, 10**30, -1, 0, 1700000000, 1.7e12, "9999999-01-01", "nan", "inf", "-inf", "1e20",
           "2024-01-01", "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00", "", " ", "human", "user",
           "system", "\ud800", "a\udfffb", "line\nbreak", "root", "u1", "a1"]
SCALARS = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
           | st.sampled_from(SPECIAL))
JSON_VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8)
SUBSTITUTES = JSON_VALUES | st.just(DELETE)

CG_NODE = (0, "mapping", "u1")
CG_MSG = (*CG_NODE, "message")
CHATGPT_FIELDS = [
    (), (0,), (0, "id"), (0, "conversation_id"), (0, "title"), (0, "create_time"), (0, "update_time"),
    (0, "current_node"), (0, "mapping"), (0, "mapping", "root"), CG_NODE, (*CG_NODE, "parent"),
    (*CG_NODE, "children"), (0, "mapping", "root", "children"), (0, "mapping", "root", "parent"), CG_MSG,
    (*CG_MSG, "id"), (*CG_MSG, "author"), (*CG_MSG, "author", "role"), (*CG_MSG, "content"),
    (*CG_MSG, "content", "parts"), (*CG_MSG, "content", "parts", 0), (*CG_MSG, "content", "content_type"),
    (*CG_MSG, "content", "text"), (*CG_MSG, "content", "result"), (*CG_MSG, "metadata"),
    (*CG_MSG, "metadata", "is_visually_hidden_from_conversation"), (*CG_MSG, "create_time"),
]
CL_MSG = (0, "chat_messages", 1)
CLAUDE_FIELDS = [
    (), (0,), (0, "uuid"), (0, "name"), (0, "created_at"), (0, "chat_messages"), CL_MSG, (*CL_MSG, "sender"),
    (*CL_MSG, "text"), (*CL_MSG, "content"), (*CL_MSG, "content", 0), (*CL_MSG, "content", 0, "text"),
    (*CL_MSG, "content", 0, "type"), (*CL_MSG, "created_at"), (0, "chat_messages", 0, "text"),
]
JSONL_FIELDS = [
    (0,), (0, "content"), (0, "text"), (0, "id"), (0, "created_at"), (0, "timestamp"), (0, "title"),
    (0, "metadata"), (0, "metadata", "k"), (1, "text"), (1, "id"), (1, "timestamp"),
]


def substitute(data: Any, path: tuple, value: Any) -> Any:
    """``data`` with the field at ``path`` replaced (or deleted); a path an earlier change broke is skipped."""
    if not path:
        return [] if value is DELETE else value
    parent = data
    try:
        for key in path[:-1]:
            parent = parent[key]
        if value is DELETE:
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
    except (KeyError, IndexError, TypeError):
        pass
    return data


def changes(fields: list[tuple]) -> st.SearchStrategy:
    return st.lists(st.tuples(st.sampled_from(fields), SUBSTITUTES), min_size=1, max_size=3)


# FUZZ_EXAMPLES=5000 for a deeper local search; the default keeps the file well under 60 s on 2 cores.
FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", 150)), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def fuzz(path: Path, base: Any, edits: list[tuple[tuple, Any]], fmt: str) -> None:
    data = base
    for field_path, value in edits:
        data = substitute(data, field_path, value if value is DELETE else copy.deepcopy(value))
    write(path, data if path.suffix != ".jsonl" or isinstance(data, list) else [data])
    check_items_or_one_line(path, fmt)
    check_items_or_one_line(path, "auto")


@FUZZ
@given(edits=changes(CHATGPT_FIELDS), old_format=st.booleans())
def test_fuzz_chatgpt_fields(fuzz_dir, edits, old_format):
    base = chatgpt_export()
    if old_format:  # exports without current_node: the importer walks 'children' down from the root
        del base[0]["current_node"]
    fuzz(fuzz_dir / "conversations.json", base, edits, "chatgpt-export")


@FUZZ
@given(edits=changes(CLAUDE_FIELDS))
def test_fuzz_claude_fields(fuzz_dir, edits):
    fuzz(fuzz_dir / "claude.json", claude_export(), edits, "claude-export")


@FUZZ
@given(edits=changes(JSONL_FIELDS))
def test_fuzz_jsonl_fields(fuzz_dir, edits):
    fuzz(fuzz_dir / "docs.jsonl", jsonl_rows(), edits, "jsonl")


MAGIC = [b"", b"\x89PNG\r\n\x1a\n", b"\x1f\x8b\x08", b"PK\x03\x04", b"\xef\xbb\xbf", b"[", b'{"a": ']


@FUZZ
@given(head=st.sampled_from(MAGIC), body=st.binary(max_size=200) | st.text(max_size=60).map(str.encode),
       suffix=st.sampled_from([".json", ".jsonl", ".md"]),
       fmt=st.sampled_from(["auto", "chatgpt-export", "claude-export", "jsonl", "folder"]))
def test_fuzz_arbitrary_bytes(fuzz_dir, head, body, suffix, fmt):
    path = fuzz_dir / f"blob{suffix}"
    path.write_bytes(head + body)
    check_items_or_one_line(path, fmt)


# -- regressions: the cases issue 9 reported -----------------------------------------------------------


def chatgpt_with(tmp_path: Path, path: tuple, value: Any, old_format: bool = False) -> Path:
    data = chatgpt_export()
    if old_format:
        del data[0]["current_node"]
    return write(tmp_path / "conversations.json", substitute(data, path, value))


CONV = "conversation #0 (c1, 'Trip')"


@pytest.mark.parametrize("path,value,old_format,expected", [
    (CG_NODE, "oops", False, "'mapping' node 'u1' is a string 'oops'; expected an object"),
    ((*CG_MSG, "content"), "hi", False, "message 'u1': 'content' is a string 'hi'; expected an object"),
    ((0, "create_time"), 1e20, False, "'create_time' is a number 1e+20, not a timestamp (after the year 9999)"),
    ((0, "create_time"), -1e20, False, "'create_time' is a number -1e+20, not a timestamp (negative"),
    ((0, "create_time"), 10**30, False, "'create_time' is a number 1000000000000000000000000000000, not a"),
    ((*CG_MSG, "create_time"), "9999999-01-01", False, "message 'u1': 'create_time' is a string '9999999-01-01'"),
    ((*CG_MSG, "create_time"), "inf", False, "message 'u1': 'create_time' is a string 'inf', not a timestamp"),
    ((*CG_MSG, "author"), ["user"], False, "message 'u1': 'author' is a list ['user']; expected an object"),
    ((*CG_MSG, "author", "role"), 3, False, "message 'u1': 'author.role' is a number 3; expected a string"),
    ((*CG_MSG, "content", "parts"), {"0": "hi"}, False, "message 'u1': 'content.parts' is an object"),
    ((*CG_MSG, "content", "parts", 0), 7, False, "message 'u1': 'content.parts[0]' is a number 7; expected"),
    ((*CG_NODE, "parent"), ["root"], False, "node 'u1': 'parent' is a list ['root']; expected a string"),
    ((0, "mapping", "root", "children"), "u1", True, "node 'root': 'children' is a string 'u1'; expected a list"),
    ((0, "current_node"), {"id": "a1"}, False, "'current_node' is an object {'id': 'a1'}; expected a string"),
    ((0, "conversation_id"), {"x": 1}, False, "'conversation_id' is an object {'x': 1}; expected a string or"),
    ((0, "title"), {"t": 1}, False, "'title' is an object {'t': 1}; expected a string or a number"),
    ((*CG_MSG, "metadata"), "meta", False, "message 'u1': 'metadata' is a string 'meta'; expected an object"),
])
def test_chatgpt_wrong_types_are_one_line(tmp_path, path, value, old_format, expected):
    message = one_line_error(chatgpt_with(tmp_path, path, value, old_format))
    assert "conversation #0 (" in message and expected in message


def test_chatgpt_cycle_in_children_is_one_line(tmp_path):
    path = chatgpt_with(tmp_path, (0, "mapping", "a1", "children"), ["u1"], old_format=True)
    assert "'mapping' has a cycle at node 'u1'" in one_line_error(path)


def test_chatgpt_number_title_is_stringified(tmp_path):
    [item] = load_source(chatgpt_with(tmp_path, (0, "title"), 2024))
    assert item.content.startswith("# 2024\n") and item.metadata["chat"]["title"] == "2024"


def claude_with(tmp_path: Path, path: tuple, value: Any) -> Path:
    return write(tmp_path / "claude.json", substitute(claude_export(), path, value))


@pytest.mark.parametrize("path,value,expected", [
    (CL_MSG, "hello", "message #1 is a string 'hello'; expected an object"),
    (CL_MSG, 42, "message #1 is a number 42; expected an object"),
    ((*CL_MSG, "sender"), ["human"], "message #1: 'sender' is a list ['human']; expected 'human' or 'assistant'"),
    ((*CL_MSG, "text"), {"t": "x"}, "message #1: 'text' is an object {'t': 'x'}; expected a string"),
    ((*CL_MSG, "content"), "Go.", "message #1: 'content' is a string 'Go.'; expected a list"),
    ((*CL_MSG, "content", 0), 5, "message #1: 'content[0]' is a number 5; expected an object"),
    ((*CL_MSG, "created_at"), True, "message #1: 'created_at' is a boolean true, not a timestamp"),
    ((*CL_MSG, "created_at"), [2024], "message #1: 'created_at' is a list [2024], not a timestamp"),
    ((0, "created_at"), "nan", "'created_at' is a string 'nan', not a timestamp (not a number)"),
    ((0, "created_at"), -5, "'created_at' is a number -5, not a timestamp (negative epoch seconds"),
    ((0, "uuid"), ["k1"], "'uuid' is a list ['k1']; expected a string or an integer"),
    ((0, "name"), ["Plans"], "'name' is a list ['Plans']; expected a string or a number"),
])
def test_claude_wrong_types_are_one_line(tmp_path, path, value, expected):
    message = one_line_error(claude_with(tmp_path, path, value))
    assert "conversation #0 (" in message and expected in message


@pytest.mark.parametrize("line,expected", [
    ('{"content": "x", "metadata": "m"}', ":2: 'metadata' is a string 'm'; expected an object"),
    ('{"content": "x", "id": {"a": 1}}', ":2: 'id' is an object {'a': 1}; expected a string or an integer"),
    ('{"content": "x", "title": [1]}', ":2: 'title' is a list [1]; expected a string or a number"),
    ('{"content": ["x"]}', ":2: 'content' is a list ['x']; expected a string"),
    ('{"text": "x", "timestamp": 1e20}', ":2: 'timestamp' is a number 1e+20, not a timestamp"),
    ('{"content": "x", "created_at": false}', ":2: 'created_at' is a boolean false, not a timestamp"),
    ('{"content": "x", "created_at": NaN}', ":2: 'created_at' is a number nan, not a timestamp (not a number)"),
    ('{"content": "x", "created_at": 1' + "0" * 5000 + "}", ":2: invalid JSON"),
    ("[" * 100_000 + "]" * 100_000, ":2: invalid JSON (nested too deeply)"),
    ('{"content": "x", "metadata": ' + '{"a": ' * 100 + "1" + "}" * 101, ":2: 'metadata' is nested deeper than"),
], ids=["metadata-string", "id-object", "title-list", "content-list", "timestamp-1e20", "created_at-false",
        "created_at-NaN", "huge-int", "deep-list", "deep-metadata"])
def test_jsonl_wrong_types_name_the_line(tmp_path, line, expected):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"content": "ok"}\n' + line + "\n")
    assert expected in one_line_error(path)


def test_jsonl_non_utf8_names_the_line(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b'{"content": "ok"}\n{"content": "caf\xe9"}\n')
    assert ":2: not UTF-8 text" in one_line_error(path)


BINARIES = {
    "random": bytes(range(256)) * 4,
    "png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(40),
    "gzip": gzip.compress(b'[{"mapping": {}}]'),
    "empty": b"",
    "null": b"null",
    "number": b"42",
    "string": b'"conversations"',
}


@pytest.mark.parametrize("kind", BINARIES)
@pytest.mark.parametrize("fmt", ["auto", "chatgpt-export", "claude-export", "jsonl", "folder"])
def test_binary_or_wrong_json_files_are_one_line(tmp_path, kind, fmt):
    path = tmp_path / "export.json"
    path.write_bytes(BINARIES[kind])
    try:
        load_source(path, fmt)  # an empty file or a JSON scalar is a valid (empty) jsonl / text file
    except SourceError as err:
        assert len(str(err).splitlines()) == 1 and str(path) in str(err)
    if fmt in ("auto", "chatgpt-export", "claude-export"):
        one_line_error(path, fmt)


def test_archives_get_a_hint(tmp_path):
    path = tmp_path / "export.json"
    path.write_bytes(BINARIES["gzip"])
    assert "gzip" in one_line_error(path)
    path.write_bytes(b"PK\x03\x04" + bytes(30))
    assert "zip archive" in one_line_error(path)
    path.write_bytes(b"")
    assert "the file is empty" in one_line_error(path)


def test_lone_surrogates_are_replaced_with_a_warning(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"id": "a", "content": "cut emoji \\ud83d here", "metadata": {"k\\udfff": "v\\ud800"}}\n')
    [item] = load_source(path)
    assert item.content == "cut emoji \ufffd here" and item.metadata["custom"] == {"k\ufffd": "v\ufffd"}
    assert item.warnings == [f"{path}:1: unpaired UTF-16 surrogates replaced with U+FFFD"]


# -- warnings: turns left out for having no text ----------------------------------------------------------


def test_claude_turn_without_text_is_left_out_with_a_warning(tmp_path):
    data = claude_export()
    data[0]["chat_messages"].append({"sender": "human", "text": "", "created_at": "2024-03-02T10:01:00Z",
                                     "content": [{"type": "tool_use", "name": "search", "input": {}}]})
    [item] = load_source(write(tmp_path / "claude.json", data))
    assert item.content == "# Plans\n\nuser: Plan Kyoto\n\nassistant: Go."
    assert item.warnings == [f"{tmp_path / 'claude.json'}: conversation #0 (k1, 'Plans'): "
                             "message #2 (human) has no text; left out"]


def test_empty_chatgpt_user_message_warns_but_root_and_system_do_not(tmp_path):
    data = chatgpt_export()
    mapping = data[0]["mapping"]
    mapping["root"]["message"] = {"id": "root", "author": {"role": "system"}, "content": {"parts": [""]}}
    mapping["u1"]["message"]["content"]["parts"] = [""]
    path = write(tmp_path / "conversations.json", data)
    [item] = load_source(path)
    assert item.content == "# Trip\n\nassistant: hello"
    assert item.warnings == [f"{path}: {CONV}: message 'u1' (user) has no text; left out"]
    parsed = ParsedSource()
    parsed.items(path)
    assert parsed.warnings == item.warnings


# -- a 5 MB message: parsed whole, in bounded memory -------------------------------------------------------

BIG = 5 * 1024 * 1024
# A parse holds the message about three times (measured 15 MiB): the file's decoded text, the parsed
# string and the rendered content (the raw bytes are dropped once decoded). 8 copies (40 MiB) leaves room
# for the allocator and still flags an importer that copies the text per part or per line, or quadratically.
PEAK_BOUND = 8 * BIG


def big_export(tmp_path: Path, fmt: str, text: str) -> Path:
    if fmt == "chatgpt-export":
        data = chatgpt_export()
        data[0]["mapping"]["u1"]["message"]["content"]["parts"] = [text]
        return write(tmp_path / "conversations.json", data)
    if fmt == "claude-export":
        data = claude_export()
        data[0]["chat_messages"][0]["text"] = text
        return write(tmp_path / "claude.json", data)
    return write(tmp_path / "docs.jsonl", [{"id": "big", "content": text}])


@pytest.mark.parametrize("fmt", ["chatgpt-export", "claude-export", "jsonl"])
def test_a_5mb_message_parses_in_bounded_memory(tmp_path, fmt):
    text = "word " * (BIG // 5 - 1) + "end."
    path = big_export(tmp_path, fmt, text)
    tracemalloc.start()
    try:
        items = load_source(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    [item] = items
    assert text in item.content
    print(f"{fmt}: peak {peak / 2**20:.1f} MiB for a {len(text) / 2**20:.1f} MiB message")
    assert peak < PEAK_BOUND


def test_parsed_source_reports_an_unreadable_file_in_one_line(tmp_path, monkeypatch):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"content": "x"}\n')

    def unreadable(self, *args):
        raise PermissionError(13, "Permission denied", str(self))

    from synthex.core.importers import base

    monkeypatch.setattr(Path, "read_bytes", unreadable)  # running as root ignores chmod
    monkeypatch.setattr(base, "open_regular", unreadable)  # what reads files within their bounds
    with pytest.raises(SourceError, match=r"docs.jsonl: cannot read file: Permission denied$"):
        ParsedSource().items(path)
