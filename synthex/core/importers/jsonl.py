"""JSONL: one document per line, ``{"content"|"text", "id"?, "created_at"|"timestamp"?, "title"?, "metadata"?}``.

Fields read, and what a wrong type does (the shared rule is in ``base``); errors name ``file:lineno``:

- errors: a line that is not UTF-8 or not a JSON object; ``content`` (or ``text``: a string, required);
  ``id`` (a string or integer; absent means ``line-N``); ``created_at`` (or ``timestamp``: a timestamp;
  absent means the file's mtime); ``title`` (a string or number); ``metadata`` (an object, at most
  ``MAX_METADATA_DEPTH`` levels deep, kept under ``custom``; its ``chat`` object, the reserved
  namespace of conversation / session / speaker / previous turn, joins the record's ``chat``).
- blank lines are skipped.

The file is bounded by ``Limits.source_file_bytes`` (stat'ed when opened; a file that grows past it while
read is cut there): over it, the file is ``TooLarge`` and skipped with a warning.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from synthex.core.errors import SourceError
from synthex.core.importers.base import (
    Intake,
    SourceItem,
    TooLarge,
    expect_object,
    get,
    get_id,
    get_time,
    get_title,
    loads,
    not_text,
    open_regular,
    repaired,
)
from synthex.core.limits import Limits
from synthex.core.periods import iso

# Custom metadata is stored and hashed as JSON: deeper nesting than any real use would hit the
# recursion limit there (and is almost certainly a generated file gone wrong).
MAX_METADATA_DEPTH = 32


def _too_deep(value: Any, depth: int) -> bool:
    if depth < 0:
        return True
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return any(_too_deep(v, depth - 1) for v in children)


def row_of(line: bytes, where: str) -> dict[str, Any] | None:
    """The object on one line, or None for a blank line."""
    try:
        text = line.decode("utf-8-sig")  # utf-8-sig: a BOM on the first line is not an error
    except UnicodeDecodeError as exc:
        raise not_text(where, line[:8], exc) from exc
    if not text.strip():
        return None
    try:
        row = loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(f"{where}: invalid JSON: {exc.msg}") from exc
    except ValueError as exc:
        raise SourceError(f"{where}: invalid JSON ({exc})") from exc
    return expect_object(row, f"{where}: the line")


def jsonl_rows(path: Path, limits: Limits) -> tuple[list[tuple[int, dict[str, Any]]], os.stat_result]:
    """The objects of a JSONL file as (line number, object), blank lines skipped, and the file's stat;
    bounded by ``limits.source_file_bytes`` (a file over it, or growing past it while read: ``TooLarge``);
    a line that is not UTF-8 or not a JSON object: one line naming ``file:lineno``."""
    cap = limits.source_file_bytes
    try:
        fd, st = open_regular(path)
    except OSError as exc:
        raise SourceError(f"{path}: cannot read file: {exc.strerror or exc}") from exc
    rows: list[tuple[int, dict[str, Any]]] = []
    # bytes: a line that is not UTF-8 is reported with its line number
    with os.fdopen(fd, "rb") as handle:
        if st.st_size > cap:
            raise TooLarge(limits.over("source_file_bytes", f"{path}: skipped: the file", st.st_size))
        read, lineno = 0, 0
        while line := handle.readline(cap + 1 - read):  # never more than the bound, even in one line
            read += len(line)
            if read > cap:
                raise TooLarge(limits.over("source_file_bytes", f"{path}: skipped: the file (it grew while read)",
                                           read))
            lineno += 1
            row = row_of(line, f"{path}:{lineno}")
            if row is not None:
                rows.append((lineno, row))
    return rows, st


def parse(path: Path, intake: Intake | None = None) -> list[SourceItem]:
    rows, st = jsonl_rows(path, (intake or Intake()).limits)
    fallback = iso(datetime.fromtimestamp(st.st_mtime, tz=UTC))
    items: list[SourceItem] = []
    for lineno, row in rows:
        item = item_from_row(row, f"{path}:{lineno}", fallback, {"type": "jsonl", "path": str(path), "line": lineno})
        if item.key == "":
            item.key = f"line-{lineno}"
        items.append(item)
    return items


def item_from_row(row: dict[str, Any], where: str, fallback_created: str | None,
                  source: dict[str, Any]) -> SourceItem:
    """One line's document (the fields above). ``fallback_created`` dates a line without a timestamp
    (None: such a line is an error); an absent id gives an empty key for the caller to fill."""
    content_field = "content" if row.get("content") is not None else "text"
    content = get(row, content_field, str, where)
    if content is None:
        raise SourceError(f"{where}: missing required field 'content' (or 'text')")
    time_field = "created_at" if row.get("created_at") is not None else "timestamp"
    ts = get_time(row, time_field, where)
    if ts is None and fallback_created is None:
        raise SourceError(f"{where}: missing required field 'created_at' (or 'timestamp'): it dates the line")
    created = iso(ts) if ts else fallback_created
    title = get_title(row, "title", where)
    custom = get(row, "metadata", dict, where) or {}
    if _too_deep(custom, MAX_METADATA_DEPTH):
        raise SourceError(f"{where}: 'metadata' is nested deeper than {MAX_METADATA_DEPTH} levels")
    # ``metadata.chat`` is the reserved namespace steps and search recipes read (conversation, session,
    # speaker, previous turn: what the importers of exports fill): it joins the record's own ``chat``.
    chat = get(custom, "chat", dict, where, "metadata.chat") or {}
    custom = {k: v for k, v in custom.items() if k != "chat"}
    item = SourceItem(
        key=get_id(row, "id", where) or "",
        content=content,
        created_at=created,
        metadata={
            "time": {"created_at": created},
            "chat": {**chat, **({"title": title} if title else {})},
            "source": source,
            "custom": custom,
        },
    )
    return repaired(item, where)
