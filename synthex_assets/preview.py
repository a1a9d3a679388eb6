"""Markdown previews of new records for the UI's materialization metadata.

Materialization metadata lands in Dagster's event log (SQLite or Postgres, unencrypted). With encryption
at rest on (``SYNTHEX_ENCRYPTION_KEY``, synthex_resources/encryption.py) a preview shows no record text:
ids and lengths only.
"""

from __future__ import annotations

import html

from synthex.core.record import Record
from synthex_resources.encryption import encryption_configured

PREVIEW_RECORDS = 3
PREVIEW_CHARS = 200


def preview_markdown(records: list[Record], hide_content: bool | None = None) -> str:
    """A small table of the first records; record text is escaped so it renders as text, never as markup.
    ``hide_content`` (default: whether encryption at rest is on) shows each record's length instead."""
    if not records:
        return "_no new records in this partition_"
    if hide_content is None:
        hide_content = encryption_configured()
    if hide_content:
        rows = ["| id | characters |", "|---|---|"]
        rows += [f"| `{rec.id[:8]}` | {len(rec.content)} |" for rec in records[:PREVIEW_RECORDS]]
        return "\n".join(rows) + "\n\n_record text hidden: the store is encrypted_"
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
