"""Letta agent files (``.af``) and archival passages.

- ``letta-agent``: schema v2, as letta-ai/letta ``letta/schemas/agent_file.py`` (``AgentFileSchema``)
  defines it: ``agents`` (each with its ``messages``, ``in_context_message_ids``, ``block_ids``,
  ``tool_ids``, ``source_ids``, ``group_ids``), ``blocks``, ``tools``, ``sources``, ``files``, ``groups``,
  ``mcp_servers``, ``metadata`` (``revision_id``...) and ``created_at``; and the legacy v1 (one agent at the
  top: ``core_memory`` blocks, ``messages`` with ``in_context``, ``version``). A file that is a JSON string
  holding that JSON is unwrapped.
- ``letta-passages``: archival memory as ``GET /v1/agents/{id}/archival-memory`` returns it (a JSON list
  of passages ``{"id": "passage-...", "text", "agent_id", "created_at", ...}``).

Items: each message a ``message`` (a turn: ``chat.conversation_id`` is the agent, ``chat.author`` the role;
an assistant's text is its text content, else the ``message`` argument of its ``send_message`` tool call),
a message with no text of its own a ``tool-call`` (an assistant calling other tools) or ``tool-return``
(role tool); tool calls and returns stay in ``source.tool_calls`` / ``source.tool_returns``. Each block a
``block`` (``label: value``), passage a ``passage``, file a ``file``; agents, tools, sources, groups and MCP
servers items of their own kind (their raw records; an agent's raw record without its messages, which
are items of their own), and the file's own ``metadata`` / ``created_at`` one ``agent-file`` item.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from synthex.core.errors import SourceError
from synthex.core.importers.base import Intake, SourceItem, describe, expect_object, get_time, read_json
from synthex.core.importers.migrate.items import id_of, item_key, migration_item, text_of, where_of
from synthex.core.importers.migrate.registry import MigrationFormat, Sniff, unwrap_json_string
from synthex.core.periods import iso

SYSTEM = "letta"
FORMAT_AGENT, FORMAT_PASSAGES = "letta-agent", "letta-passages"
V2_LISTS = ("agents", "blocks", "tools", "sources", "files", "groups", "mcp_servers")
KIND_OF = {"blocks": "block", "tools": "tool", "sources": "letta-source", "files": "file", "groups": "group",
           "mcp_servers": "mcp-server"}


def _text_parts(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise SourceError(f"{where}: 'content' is {describe(content)}; expected a string or a list of parts")
    texts = []
    for index, part in enumerate(content):
        part = expect_object(part, f"{where}: content[{index}]")
        if part.get("type") in ("text", None) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "\n".join(t for t in texts if t)


def _send_message_text(calls: Any, where: str) -> str:
    """The ``message`` argument of ``send_message`` calls (how Letta agents answered before v1 agents)."""
    if not isinstance(calls, list):
        return ""
    texts = []
    for index, call in enumerate(calls):
        function = expect_object(call, f"{where}: tool_calls[{index}]").get("function")
        if not isinstance(function, dict) or function.get("name") != "send_message":
            continue
        arguments = function.get("arguments")
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            raise SourceError(f"{where}: tool_calls[{index}].function.arguments is not JSON") from None
        if isinstance(parsed, dict) and isinstance(parsed.get("message"), str):
            texts.append(parsed["message"])
    return "\n".join(texts)


def _tool_summary(calls: Any) -> str:
    names = [c.get("function", {}).get("name", "?") for c in calls or [] if isinstance(c, dict)]
    return ", ".join(str(n) for n in names)


class _Reader:
    def __init__(self, path: Path, fallback: str) -> None:
        self.path, self.fallback, self.items = path, fallback, []

    def add(self, **fields: Any) -> None:
        self.items.append(migration_item(path=self.path, fmt=FORMAT_AGENT, system=SYSTEM, **fields))

    def dated(self, obj: dict[str, Any], where: str, *names: str) -> tuple[str, dict[str, str]]:
        axes = {}
        for name in names:
            ts = get_time(obj, name, where)
            if ts is not None:
                axes[name] = iso(ts)
        return next(iter(axes.values()), self.fallback), axes

    def message(self, agent: dict[str, Any], message: Any, index: int, in_context: set[str] | None) -> None:
        agent_id, agent_name = agent["__id"], agent.get("name")
        original = message.get("id") if isinstance(message, dict) else None
        where = where_of(self.path, f"agent {agent_id} message", index, original)
        message = expect_object(message, where)
        original = id_of(message, "id", where, required=False) or f"{agent_id}/{index}"
        role = text_of(message, "role", where)
        text = _text_parts(message.get("content"), where) or (message.get("text") if isinstance(message.get("text"), str) else "")
        calls, returns = message.get("tool_calls"), message.get("tool_returns")
        spoken = _send_message_text(calls, where) if role == "assistant" else ""
        kind = "message"
        content = spoken or text
        if role == "tool":
            kind = "tool-return"
        elif not content and calls:
            kind, content = "tool-call", f"(calls {_tool_summary(calls)})"
        if not content:
            content = f"({role} message with no text)"
            kind = "tool-call" if calls else "empty-message"
        created, axes = self.dated(message, where, "created_at", "updated_at")
        context = original in in_context if in_context is not None else message.get("in_context")
        raw = {k: v for k, v in message.items() if k != "embedding"}
        self.add(kind=kind, original_id=original, content=content, created_at=created, time_axes=axes, where=where,
                 scope={"agent_id": agent_id, **({"group_id": message["group_id"]} if message.get("group_id") else {})},
                 raw=raw, derived_from=[item_key("agent", agent_id)],
                 chat={"conversation_id": agent_id, "title": agent_name or agent_id, "author": role,
                       "message_id": original},
                 extra={"role": role, "in_context": context, "tool_calls": calls, "tool_returns": returns,
                        "tool_call_id": message.get("tool_call_id"), "send_message": bool(spoken)})

    def agent(self, agent: dict[str, Any], index: int, legacy: bool) -> None:
        where = where_of(self.path, "agent", index, agent.get("id"))
        agent_id = id_of(agent, "id", where, required=not legacy) or str(agent.get("name") or f"agent-{index}")
        agent["__id"] = agent_id
        created, axes = self.dated(agent, where, "created_at", "updated_at")
        messages = agent.get("messages") or []
        if not isinstance(messages, list):
            raise SourceError(f"{where}: 'messages' is {describe(messages)}; expected a list")
        in_context = None if legacy else {str(i) for i in agent.get("in_context_message_ids") or []}
        raw = {k: v for k, v in agent.items() if k not in ("messages", "__id")}
        description = agent.get("description") if isinstance(agent.get("description"), str) else ""
        self.add(kind="agent", original_id=agent_id, content=f"Letta agent {agent.get('name') or agent_id}"
                 + (f": {description}" if description else ""), created_at=created, time_axes=axes, where=where,
                 scope={"agent_id": agent_id}, raw={**raw, "messages": len(messages)})
        for m_index, message in enumerate(messages):
            self.message(agent, message, m_index, in_context)
        if legacy:  # v1 keeps the agent's blocks on it
            blocks = agent.get("core_memory") or (agent.get("memory") or {}).get("blocks") or []
            for b_index, block in enumerate(blocks if isinstance(blocks, list) else []):
                self.block(block, b_index, [agent_id])

    def block(self, block: Any, index: int, agents: list[str]) -> None:
        where = where_of(self.path, "block", index, block.get("id") if isinstance(block, dict) else None)
        block = expect_object(block, where)
        original = id_of(block, "id", where, required=False) or f"{text_of(block, 'label', where)}-{index}"
        label, value = text_of(block, "label", where, required=False), text_of(block, "value", where)
        created, axes = self.dated(block, where, "created_at", "updated_at")
        self.add(kind="block", original_id=original, content=f"{label}: {value}" if label else value,
                 created_at=created, time_axes=axes, where=where, scope={"agent_id": agents} if agents else {},
                 raw=block, derived_from=[item_key("agent", a) for a in agents], extra={"label": label or None})

    def other(self, kind: str, obj: Any, index: int) -> None:
        where = where_of(self.path, kind, index, obj.get("id") if isinstance(obj, dict) else None)
        obj = expect_object(obj, where)
        original = id_of(obj, "id", where)
        created, axes = self.dated(obj, where, "created_at", "updated_at", "file_creation_date")
        name = obj.get("name") or obj.get("file_name") or obj.get("server_name") or original
        text = obj.get("content") if kind == "file" and isinstance(obj.get("content"), str) else ""
        description = obj.get("description") if isinstance(obj.get("description"), str) else ""
        content = text or f"{kind} {name}" + (f": {description}" if description else "")
        self.add(kind=kind, original_id=original, content=content, created_at=created, time_axes=axes, where=where,
                 raw=obj, scope={"source_id": obj["source_id"]} if isinstance(obj.get("source_id"), str) else {})


def parse_agent_file(path: Path, intake: Intake | None = None) -> list[SourceItem]:
    data = unwrap_json_string(read_json(path, (intake or Intake()).limits.source_file_bytes))
    if not isinstance(data, dict):
        raise SourceError(f"{path}: expected a Letta agent file (a JSON object), found {describe(data)}")
    fallback = get_time(data, "created_at", f"{path}: the file")
    from datetime import UTC, datetime

    reader = _Reader(path, iso(fallback) if fallback else iso(datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)))
    if "agents" in data:
        for name in V2_LISTS:
            if data.get(name) is not None and not isinstance(data[name], list):
                raise SourceError(f"{path}: '{name}' is {describe(data[name])}; expected a list")
        agents = [expect_object(a, f"{path}: agent #{i}") for i, a in enumerate(data["agents"])]
        for index, agent in enumerate(agents):
            reader.agent(agent, index, legacy=False)
        used_by: dict[str, list[str]] = {}
        for agent in agents:
            for block_id in agent.get("block_ids") or []:
                used_by.setdefault(str(block_id), []).append(agent["__id"])
        for index, block in enumerate(data.get("blocks") or []):
            reader.block(block, index, used_by.get(str(block.get("id")) if isinstance(block, dict) else "", []))
        for name, kind in KIND_OF.items():
            if name != "blocks":
                for index, obj in enumerate(data.get(name) or []):
                    reader.other(kind, obj, index)
        header = {k: v for k, v in data.items() if k not in V2_LISTS}
        revision = (data.get("metadata") or {}).get("revision_id") if isinstance(data.get("metadata"), dict) else None
        reader.add(kind="agent-file", original_id=str(revision or path.name), where=f"{path}: the file",
                   content=f"Letta agent file {path.name}" + (f" (revision {revision})" if revision else ""),
                   created_at=reader.fallback, raw=header, extra={"schema": 2, "revision_id": revision})
    else:  # legacy v1: the agent at the top
        reader.agent(data, 0, legacy=True)
        reader.add(kind="agent-file", original_id=path.name, where=f"{path}: the file",
                   content=f"Letta agent file {path.name} (version {data.get('version')})", created_at=reader.fallback,
                   raw={"version": data.get("version")}, extra={"schema": 1})
    return reader.items


def parse_passages(path: Path, intake: Intake | None = None) -> list[SourceItem]:
    data = unwrap_json_string(read_json(path, (intake or Intake()).limits.source_file_bytes))
    if not isinstance(data, list):
        raise SourceError(f"{path}: expected Letta archival memory (a JSON list of passages), found {describe(data)}")
    items = []
    for index, passage in enumerate(data):
        where = where_of(path, "passage", index, passage.get("id") if isinstance(passage, dict) else None)
        passage = expect_object(passage, where)
        created = get_time(passage, "created_at", where)
        if created is None:
            raise SourceError(f"{where}: missing required field 'created_at'")
        axes = {k: iso(t) for k in ("updated_at",) if (t := get_time(passage, k, where)) is not None}
        scope = {k: str(passage[k]) for k in ("agent_id", "archive_id", "source_id", "file_id", "organization_id")
                 if isinstance(passage.get(k), str)}
        raw = {k: v for k, v in passage.items() if k != "embedding"}  # the vector is the embedder's, made again
        items.append(migration_item(
            path=path, fmt=FORMAT_PASSAGES, system=SYSTEM, kind="passage", original_id=id_of(passage, "id", where),
            content=text_of(passage, "text", where), created_at=iso(created), time_axes=axes, where=where, scope=scope,
            raw=raw, derived_from=[item_key("agent", scope["agent_id"])] if "agent_id" in scope else [],
            extra={"embedding_dim": len(passage["embedding"]) if isinstance(passage.get("embedding"), list) else None}))
    return items


def _is_agent_file(found: Sniff) -> bool:
    if found.path.suffix.lower() != ".af" and b'"agents"' not in found.head and b"core_memory" not in found.head \
            and not found.head.lstrip().startswith(b'"'):
        return False
    data = found.json()
    if not isinstance(data, dict):
        return False
    agents = data.get("agents")
    return (isinstance(agents, list) and "blocks" in data) or ("core_memory" in data and "messages" in data)


def _is_passages(found: Sniff) -> bool:
    if b"passage-" not in found.head:
        return False
    data = found.json()
    return (isinstance(data, list) and bool(data) and isinstance(data[0], dict) and "text" in data[0]
            and str(data[0].get("id", "")).startswith("passage-"))


def register(registry: Any) -> None:
    registry.register(MigrationFormat(
        name=FORMAT_AGENT, system=SYSTEM, description="a Letta agent file .af (schema v2, or legacy v1)",
        sniff=_is_agent_file, parse=parse_agent_file, step="letta", turn_kind="message",
        views=(("messages", ("message",), True), ("blocks", ("block",), True), ("files", ("file",), True))))
    registry.register(MigrationFormat(
        name=FORMAT_PASSAGES, system=SYSTEM, description="Letta archival passages (GET .../archival-memory)",
        sniff=_is_passages, parse=parse_passages, step="letta_archival",
        views=(("passages", ("passage",), True),)))
