"""Claude export (`conversations.json`): conversations with ``chat_messages`` (sender human/assistant)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synthex.errors import SourceError
from synthex.importers.base import SourceItem, read_json_objects, render_conversation
from synthex.periods import iso, parse_timestamp

_ROLE = {"human": "user", "assistant": "assistant"}


def _message_text(message: dict[str, Any]) -> str:
    text = message.get("text")
    if isinstance(text, str) and text.strip():
        return text.strip()
    parts = message.get("content") or []
    return "\n".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("text")).strip()


def parse(path: Path) -> list[SourceItem]:
    items: list[SourceItem] = []
    for index, conv in read_json_objects(path, "a Claude export", "conversation"):
        conv_id = conv.get("uuid")
        title = conv.get("name") or "Untitled"
        where = f"{path}: conversation #{index} ({conv_id or 'no uuid'}, {title!r})"
        if not conv_id:
            raise SourceError(f"{where}: missing required field 'uuid'")
        messages = conv.get("chat_messages")
        if not isinstance(messages, list):
            raise SourceError(f"{where}: missing required field 'chat_messages'")
        turns: list[tuple[str, str, str]] = []
        for m_index, message in enumerate(messages):
            sender = message.get("sender")
            if sender not in _ROLE:
                raise SourceError(f"{where}: message #{m_index} has sender {sender!r}; expected human/assistant")
            text = _message_text(message)
            if not text:
                continue
            ts = parse_timestamp(message.get("created_at"))
            turns.append((_ROLE[sender], iso(ts) if ts else "", text))
        created = parse_timestamp(conv.get("created_at")) or next(
            (parse_timestamp(t[1]) for t in turns if t[1]), None
        )
        if created is None:
            raise SourceError(f"{where}: no 'created_at' and no timestamped message")
        items.append(
            SourceItem(
                key=str(conv_id),
                content=render_conversation(title, turns),
                created_at=iso(created),
                metadata={
                    "time": {"created_at": iso(created)},
                    "chat": {
                        "conversation_id": str(conv_id),
                        "title": title,
                        "turns": len(turns),
                        "authors": sorted({t[0] for t in turns}),
                    },
                    "source": {"type": "claude-export", "path": str(path)},
                },
            )
        )
    return items
