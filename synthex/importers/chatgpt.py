"""ChatGPT export (`conversations.json`).

Each conversation's ``mapping`` is a tree: edits and regenerations create sibling branches.
The conversation the user last saw is the path from ``current_node`` up through ``parent``,
so only that path is imported; abandoned edit branches are not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synthex.errors import SourceError
from synthex.importers.base import SourceItem, read_json_objects, render_conversation
from synthex.periods import iso, parse_timestamp


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict):
        if isinstance(part.get("text"), str):
            return part["text"]
        kind = part.get("content_type", "attachment")
        if "image" in kind:
            return "[image]"
        return f"[{kind}]"
    return ""


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content") or {}
    parts = content.get("parts")
    if isinstance(parts, list):
        text = "\n".join(t for t in (_part_text(p) for p in parts) if t)
    else:
        text = content.get("text") or content.get("result") or ""
    return text.strip()


def _active_path(conv: dict[str, Any], where: str) -> list[dict[str, Any]]:
    mapping = conv.get("mapping")
    if not isinstance(mapping, dict):
        raise SourceError(f"{where}: missing required field 'mapping'")
    node_id = conv.get("current_node")
    if node_id is None:  # old exports: take the deepest leaf, following first children
        roots = [n for n in mapping.values() if n.get("parent") is None]
        node_id = roots[0]["id"] if roots else None
        while node_id and mapping.get(node_id, {}).get("children"):
            node_id = mapping[node_id]["children"][-1]
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    while node_id is not None:
        if node_id in seen:
            raise SourceError(f"{where}: 'mapping' has a cycle at node {node_id}")
        seen.add(node_id)
        node = mapping.get(node_id)
        if node is None:
            raise SourceError(f"{where}: node {node_id} is referenced but missing from 'mapping'")
        path.append(node)
        node_id = node.get("parent")
    path.reverse()
    return path


def parse(path: Path) -> list[SourceItem]:
    items: list[SourceItem] = []
    for index, conv in read_json_objects(path, "a ChatGPT export", "conversation"):
        conv_id = conv.get("conversation_id") or conv.get("id")
        title = conv.get("title") or "Untitled"
        where = f"{path}: conversation #{index} ({conv_id or 'no id'}, {title!r})"
        if not conv_id:
            raise SourceError(f"{where}: missing required field 'id' / 'conversation_id'")
        turns: list[tuple[str, str, str]] = []
        message_ids: list[str] = []
        for node in _active_path(conv, where):
            message = node.get("message")
            if not message:
                continue
            role = (message.get("author") or {}).get("role", "")
            meta = message.get("metadata") or {}
            if meta.get("is_visually_hidden_from_conversation"):
                continue
            text = _message_text(message)
            if not text or role == "system":
                continue
            ts = parse_timestamp(message.get("create_time"))
            turns.append((role, iso(ts) if ts else "", text))
            message_ids.append(message.get("id") or node.get("id"))
        created = parse_timestamp(conv.get("create_time")) or next(
            (parse_timestamp(t[1]) for t in turns if t[1]), None
        )
        if created is None:
            raise SourceError(f"{where}: no 'create_time' and no timestamped message")
        updated = parse_timestamp(conv.get("update_time"))
        items.append(
            SourceItem(
                key=str(conv_id),
                content=render_conversation(title, turns),
                created_at=iso(created),
                metadata={
                    "time": {"created_at": iso(created), "updated_at": iso(updated) if updated else None},
                    "chat": {
                        "conversation_id": str(conv_id),
                        "title": title,
                        "message_ids": message_ids,
                        "turns": len(turns),
                        "authors": sorted({t[0] for t in turns}),
                    },
                    "source": {"type": "chatgpt-export", "path": str(path)},
                },
            )
        )
    return items
