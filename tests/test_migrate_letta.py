"""Letta agent files (.af v2 and legacy v1, also as a JSON string) and archival passages come in whole
(issue 37): messages as turns, blocks and passages as records of their own kind, tool calls as metadata."""

from __future__ import annotations

import json

import pytest
from conftest import cli, load

from synthex.core.errors import SourceError
from synthex.core.importers import detect_format, load_source

SEND = {"id": "call-1", "type": "function",
        "function": {"name": "send_message", "arguments": json.dumps({"message": "Noted: you sail on Sundays."})}}
SEARCH = {"id": "call-2", "type": "function", "function": {"name": "archival_memory_search", "arguments": "{}"}}


def message(mid, role, text=None, created="2025-03-01T10:00:00+00:00", **more):
    content = [{"type": "text", "text": text}] if text is not None else []
    return {"type": "message", "id": mid, "role": role, "content": content, "agent_id": "agent-0",
            "created_at": created, "tool_calls": None, "tool_returns": [], **more}


AGENT_FILE_V2 = {
    "agents": [{
        "id": "agent-0", "name": "sailor", "description": "remembers hobbies", "system": "You are Sam.",
        "block_ids": ["block-0"], "tool_ids": ["tool-0"], "source_ids": [], "group_ids": [],
        "in_context_message_ids": ["message-0", "message-1"],
        "messages": [
            message("message-0", "user", "I go sailing every Sunday"),
            message("message-1", "assistant", None, "2025-03-01T10:00:05+00:00", tool_calls=[SEND]),
            message("message-2", "assistant", None, "2025-03-01T10:00:06+00:00", tool_calls=[SEARCH]),
            message("message-3", "tool", "no results", "2025-03-01T10:00:07+00:00", tool_call_id="call-2",
                    tool_returns=[{"status": "success", "func_response": "no results"}]),
        ],
    }],
    "groups": [], "files": [], "sources": [], "mcp_servers": [],
    "blocks": [{"id": "block-0", "label": "human", "value": "Name: Chad. Hobby: sailing", "limit": 2000}],
    "tools": [{"id": "tool-0", "name": "send_message", "description": "Sends a message", "tool_type": "letta_core"}],
    "metadata": {"revision_id": "rev-42"}, "created_at": "2025-03-01T09:00:00+00:00",
}
AGENT_FILE_V1 = {
    "name": "old-agent", "version": "0.6.7", "created_at": "2024-05-01T08:00:00Z",
    "core_memory": [{"label": "persona", "value": "I am a pirate", "limit": 500}],
    "messages": [{"role": "user", "text": "ahoy", "created_at": "2024-05-01T08:01:00Z", "in_context": True},
                 {"role": "assistant", "created_at": "2024-05-01T08:01:02Z", "in_context": False,
                  "tool_calls": [SEND]}],
}
PASSAGES = [{"id": "passage-1", "text": "Chad's boat is called Wavelet", "agent_id": "agent-0",
             "created_at": "2025-02-01T00:00:00Z", "embedding": [0.1, 0.2], "metadata": {}}]


def by_kind(items):
    out = {}
    for item in items:
        out.setdefault(item.metadata["source"]["kind"], []).append(item)
    return out


def test_a_v2_agent_file_keeps_every_part(tmp_path):
    path = tmp_path / "sailor.af"
    path.write_text(json.dumps(AGENT_FILE_V2))
    assert detect_format(path) == "letta-agent"
    kinds = by_kind(load_source(path))
    assert {k: len(v) for k, v in kinds.items()} == {"agent": 1, "message": 2, "tool-call": 1, "tool-return": 1,
                                                      "block": 1, "tool": 1, "agent-file": 1}
    spoken = next(m for m in kinds["message"] if m.metadata["source"]["role"] == "assistant")
    assert spoken.content == "Noted: you sail on Sundays."  # the send_message argument
    assert spoken.metadata["source"]["tool_calls"] == [SEND] and spoken.metadata["source"]["in_context"] is True
    assert spoken.metadata["chat"] == {"conversation_id": "agent-0", "title": "sailor", "author": "assistant",
                                       "message_id": "message-1"}
    assert kinds["tool-return"][0].metadata["source"]["tool_returns"] == [{"status": "success",
                                                                          "func_response": "no results"}]
    assert kinds["block"][0].content == "human: Name: Chad. Hobby: sailing"
    assert kinds["block"][0].metadata["source"]["scope"] == {"agent_id": ["agent-0"]}
    assert kinds["agent-file"][0].metadata["source"]["revision_id"] == "rev-42"
    raw_messages = [i.metadata["source"]["raw"] for k in ("message", "tool-call", "tool-return") for i in kinds[k]]
    assert sorted(m["id"] for m in raw_messages) == ["message-0", "message-1", "message-2", "message-3"]


def test_a_legacy_agent_file_and_one_held_in_a_json_string(tmp_path):
    path = tmp_path / "old.af"
    path.write_text(json.dumps(json.dumps(AGENT_FILE_V1)))  # published examples are sometimes a JSON string
    assert detect_format(path) == "letta-agent"
    kinds = by_kind(load_source(path))
    assert [m.content for m in kinds["message"]] == ["ahoy", "Noted: you sail on Sundays."]
    assert [m.metadata["source"]["in_context"] for m in kinds["message"]] == [True, False]
    assert kinds["block"][0].content == "persona: I am a pirate"


def test_hostile_agent_file_is_one_line(tmp_path):
    bad = json.loads(json.dumps(AGENT_FILE_V2))
    bad["agents"][0]["messages"][0]["role"] = 5
    path = tmp_path / "bad.af"
    path.write_text(json.dumps(bad))
    with pytest.raises(SourceError) as caught:
        load_source(path, "letta-agent")
    assert str(caught.value) == f"{path}: agent agent-0 message #0 (message-0): 'role' is a number 5; expected a string"


def test_a_letta_agent_and_its_passages_are_searched_as_they_were(tmp_path):
    agent, passages = tmp_path / "sailor.af", tmp_path / "archival.json"
    agent.write_text(json.dumps(AGENT_FILE_V2))
    passages.write_text(json.dumps(PASSAGES))
    assert detect_format(passages) == "letta-passages"
    cli("init", "sailor", "--from", str(agent), "--from", str(passages), "--dir", str(tmp_path / "proj"))
    pipe = load(tmp_path / "proj")
    try:
        assert pipe.run().status == "completed"
        turns = pipe.records("letta_messages")
        blocks = pipe.records("letta_blocks")
        passage = pipe.records("letta_passages")
        found = [h.step for h in pipe.search("Wavelet boat", k=3)]
        lineage = {s.meta("source.kind") for s in passage[0].sources()}
    finally:
        pipe.close()
    assert len(turns) == 2 and len(blocks) == 1 and len(passage) == 1
    assert found[0] == "letta_passages"
    assert lineage == {"passage", "agent"}  # the passage's agent, through lineage
