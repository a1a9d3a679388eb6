"""Markdown previews of new records for the UI's materialization metadata."""

from __future__ import annotations

import html

from synthex.record import Record

PREVIEW_RECORDS = 3
PREVIEW_CHARS = 200


def preview_markdown(records: list[Record]) -> str:
    """A small table of the first records; record text is escaped so it renders as text, never as markup."""
    if not records:
        return "_no new records in this partition_"
    rows = ["| id | content |", "|---|---|"]
    for rec in records[:PREVIEW_RECORDS]:
        text = rec.content.replace("\n", " ")
        clipped = text[:PREVIEW_CHARS] + ("…" if len(text) > PREVIEW_CHARS else "")
        rows.append(f"| `{rec.id[:8]}` | {escape_markdown(clipped)} |")
    return "\n".join(rows)


def escape_markdown(text: str) -> str:
    """HTML-escape, then backslash every markdown control character (no links, images or tables)."""
    escaped = html.escape(text, quote=False)
    return "".join("\\" + ch if ch in "\\`*_{}[]()#+-.!|<>~" else ch for ch in escaped)
