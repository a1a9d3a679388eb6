"""Claude export (`conversations.json`): conversations with ``chat_messages`` (sender human/assistant).

Fields read, and what a wrong type does (the shared rule is in ``base``):

- errors: the top level (a list of objects); ``uuid`` (a string or integer, required); ``name`` (a
  string or number); ``created_at`` (a timestamp); ``chat_messages`` (a list of objects, required); each
  message's ``sender`` ("human" or "assistant"), ``text`` (a string), ``content`` (a list of objects, each
  with an optional string ``text``) and ``created_at`` (a timestamp).
- a message's text is its ``text``, or else the ``text`` of its content blocks; a message with neither
  (only a tool call or an attachment) is left out with a warning on the item.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synthex.core.errors import SourceError
from synthex.core.importers.base import (
    Intake,
    SourceItem,
    describe,
    expect_object,
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

_ROLE = {"human": "user", "assistant": "assistant"}


def _message_text(message: dict[str, Any], where: str) -> str:
    text = get(message, "text", str, where) or ""
    blocks = get(message, "content", list, where) or []
    block_texts = []
    for b_index, block in enumerate(blocks):
        block = expect_object(block, f"{where}: 'content[{b_index}]'")
        block_texts.append(get(block, "text", str, where, f"content[{b_index}].text") or "")
    if text.strip():
        return text.strip()
    return "\n".join(t for t in block_texts if t).strip()


def parse(path: Path, intake: Intake | None = None) -> list[SourceItem]:
    items: list[SourceItem] = []
    for index, conv in read_json_objects(path, "a Claude export", "conversation",
                                          (intake or Intake()).limits.source_file_bytes):
        raw_id, raw_name = conv.get("uuid"), conv.get("name")
        shown_id = label(raw_id) if isinstance(raw_id, str | int) and raw_id != "" else "no uuid"
        where = f"{path}: conversation #{index} ({shown_id}, {show(raw_name or 'Untitled')})"
        conv_id = get_id(conv, "uuid", where)
        if not conv_id:
            raise SourceError(f"{where}: missing required field 'uuid'")
        title = get_title(conv, "name", where) or "Untitled"
        messages = require(conv, "chat_messages", list, where)
        turns: list[tuple[str, str, str]] = []
        warnings: list[str] = []
        for m_index, message in enumerate(messages):
            m_where = f"{where}: message #{m_index}"
            message = expect_object(message, m_where)
            sender = message.get("sender")
            if not isinstance(sender, str) or sender not in _ROLE:
                raise SourceError(
                    f"{m_where}: 'sender' is {describe(sender)}; expected 'human' or 'assistant'"
                )
            text = _message_text(message, m_where)
            ts = get_time(message, "created_at", m_where)
            if not text:  # only a tool call or an attachment: left out, but visibly
                warnings.append(f"{m_where} ({sender}) has no text; left out")
                continue
            turns.append((_ROLE[sender], iso(ts) if ts else "", text))
        created = get_time(conv, "created_at", where) or next(
            (parse_timestamp(t[1]) for t in turns if t[1]), None
        )
        if created is None:
            raise SourceError(f"{where}: no 'created_at' and no timestamped message")
        item = SourceItem(
            key=conv_id,
            content=render_conversation(title, turns),
            created_at=iso(created),
            metadata={
                "time": {"created_at": iso(created)},
                "chat": {
                    "conversation_id": conv_id,
                    "title": title,
                    "turns": len(turns),
                    "authors": sorted({t[0] for t in turns}),
                },
                "source": {"type": "claude-export", "path": str(path)},
            },
            warnings=warnings,
        )
        items.append(repaired(item, where))
    return items
