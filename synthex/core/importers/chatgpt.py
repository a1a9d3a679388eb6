"""ChatGPT export (`conversations.json`).

Each conversation's ``mapping`` is a tree: edits and regenerations create sibling branches.
The conversation the user last saw is the path from ``current_node`` up through ``parent``,
so only that path is imported; abandoned edit branches are not.

Fields read, and what a wrong type does (the shared rule is in ``base``):

- errors: the top level (a list of objects); ``conversation_id``/``id`` (a string or integer, required);
  ``title`` (a string or number); ``create_time``/``update_time`` (timestamps); ``mapping`` (an object of
  node objects, required); ``current_node`` (a string); on the imported path, each node's ``parent`` (a
  string), ``children`` (a list of strings, read only when ``current_node`` is absent) and ``message``
  (an object); each message's ``id`` (a string or integer), ``author`` (an object), ``author.role`` (a
  string), ``metadata`` (an object), ``content`` (an object), ``content.parts`` (a list of strings, objects
  or nulls) and ``create_time`` (a timestamp).
- tolerated: a part object without string ``text`` is an attachment, shown as ``[image]`` or
  ``[content_type]``; content without ``parts`` gives its text through a string ``text`` or ``result``
  (code, tool output); content types with neither have no text.
- a visible (not hidden, not system) message with no text is left out with a warning on the item.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synthex.core.errors import SourceError
from synthex.core.importers.base import (
    Intake,
    SourceItem,
    describe,
    get,
    get_id,
    get_time,
    get_title,
    label,
    read_json_objects,
    render_conversation,
    repaired,
    require,
    show,
)
from synthex.core.periods import iso, parse_timestamp


def _part_text(part: Any, index: int, where: str) -> str:
    if part is None or isinstance(part, str):
        return part or ""
    if isinstance(part, dict):
        if isinstance(part.get("text"), str):
            return part["text"]
        kind = part.get("content_type")
        kind = kind if isinstance(kind, str) and kind else "attachment"
        return "[image]" if "image" in kind else f"[{kind}]"
    raise SourceError(
        f"{where}: 'content.parts[{index}]' is {describe(part)}; expected a string or an object"
    )


def _message_text(message: dict[str, Any], where: str) -> str:
    content = get(message, "content", dict, where) or {}
    parts = get(content, "parts", list, where, shown="content.parts")
    if parts is not None:
        text = "\n".join(t for t in (_part_text(p, i, where) for i, p in enumerate(parts)) if t)
    else:  # code, execution output, browsing results...: the text sits under 'text' or 'result'
        text = next((v for v in (content.get("text"), content.get("result")) if isinstance(v, str) and v), "")
    return text.strip()


def _children(mapping: dict[str, Any], node_id: str, where: str) -> list[str]:
    children = get(mapping[node_id], "children", list, f"{where}: node {show(node_id)}") or []
    if not all(isinstance(c, str) for c in children):
        raise SourceError(
            f"{where}: node {show(node_id)}: 'children' is {describe(children)}; expected a list of node ids"
        )
    return children


def _active_path(conv: dict[str, Any], where: str) -> list[tuple[str, dict[str, Any]]]:
    """(node id, node) from the root to the node the user last saw."""
    mapping = require(conv, "mapping", dict, where)
    for key, node in mapping.items():
        if not isinstance(node, dict):
            raise SourceError(f"{where}: 'mapping' node {show(key)} is {describe(node)}; expected an object")
    node_id = get(conv, "current_node", str, where)
    seen: set[str] = set()
    if node_id is None:  # old exports: from the root, follow the last (newest) child down to a leaf
        node_id = next((key for key, node in mapping.items() if node.get("parent") is None), None)
        while node_id in mapping and (children := _children(mapping, node_id, where)):
            seen.add(node_id)
            node_id = children[-1]
            if node_id in seen:
                raise SourceError(f"{where}: 'mapping' has a cycle at node {show(node_id)}")
        seen.clear()
    path: list[tuple[str, dict[str, Any]]] = []
    while node_id is not None:
        if node_id in seen:
            raise SourceError(f"{where}: 'mapping' has a cycle at node {show(node_id)}")
        seen.add(node_id)
        node = mapping.get(node_id)
        if node is None:
            raise SourceError(f"{where}: node {show(node_id)} is referenced but missing from 'mapping'")
        path.append((node_id, node))
        node_id = get(node, "parent", str, f"{where}: node {show(node_id)}")
    path.reverse()
    return path


def parse(path: Path, intake: Intake | None = None) -> list[SourceItem]:
    items: list[SourceItem] = []
    for index, conv in read_json_objects(path, "a ChatGPT export", "conversation",
                                          (intake or Intake()).limits.source_file_bytes):
        id_field = "conversation_id" if conv.get("conversation_id") not in (None, "") else "id"
        raw_id, raw_title = conv.get(id_field), conv.get("title")
        shown_id = label(raw_id) if isinstance(raw_id, str | int) and raw_id != "" else "no id"
        where = f"{path}: conversation #{index} ({shown_id}, {show(raw_title or 'Untitled')})"
        conv_id = get_id(conv, id_field, where)
        if not conv_id:
            raise SourceError(f"{where}: missing required field 'id' / 'conversation_id'")
        title = get_title(conv, "title", where) or "Untitled"
        turns: list[tuple[str, str, str]] = []
        message_ids: list[str] = []
        warnings: list[str] = []
        for node_id, node in _active_path(conv, where):
            message = get(node, "message", dict, f"{where}: node {show(node_id)}")
            if not message:
                continue
            m_where = f"{where}: message {show(node_id)}"
            role = get(get(message, "author", dict, m_where) or {}, "role", str, m_where, "author.role") or ""
            meta = get(message, "metadata", dict, m_where) or {}
            if meta.get("is_visually_hidden_from_conversation") or role == "system":
                continue
            text = _message_text(message, m_where)
            ts = get_time(message, "create_time", m_where)
            message_id = get_id(message, "id", m_where) or node_id
            if not text:  # a tool call, an image-less attachment, a reasoning step...: visible, not silent
                warnings.append(f"{m_where} ({role or 'no role'}) has no text; left out")
                continue
            turns.append((role, iso(ts) if ts else "", text))
            message_ids.append(message_id)
        created = get_time(conv, "create_time", where) or next(
            (parse_timestamp(t[1]) for t in turns if t[1]), None
        )
        if created is None:
            raise SourceError(f"{where}: no 'create_time' and no timestamped message")
        updated = get_time(conv, "update_time", where)
        item = SourceItem(
            key=conv_id,
            content=render_conversation(title, turns),
            created_at=iso(created),
            metadata={
                "time": {"created_at": iso(created), "updated_at": iso(updated) if updated else None},
                "chat": {
                    "conversation_id": conv_id,
                    "title": title,
                    "message_ids": message_ids,
                    "turns": len(turns),
                    "authors": sorted({t[0] for t in turns}),
                },
                "source": {"type": "chatgpt-export", "path": str(path)},
            },
            warnings=warnings,
        )
        items.append(repaired(item, where))
    return items
