"""JSONL: one document per line, ``{"content"|"text", "id"?, "created_at"|"timestamp"?, "title"?, "metadata"?}``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from synthex.errors import SourceError
from synthex.importers.base import SourceItem
from synthex.periods import iso, parse_timestamp


def parse(path: Path) -> list[SourceItem]:
    fallback = iso(datetime.fromtimestamp(path.stat().st_mtime, tz=UTC))
    items: list[SourceItem] = []
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SourceError(f"{path}:{lineno}: invalid JSON: {exc.msg}") from exc
            if not isinstance(row, dict):
                raise SourceError(f"{path}:{lineno}: expected a JSON object")
            content = row.get("content", row.get("text"))
            if not isinstance(content, str):
                raise SourceError(f"{path}:{lineno}: missing required field 'content' (or 'text')")
            raw_ts = row.get("created_at", row.get("timestamp"))
            ts = parse_timestamp(raw_ts)
            if raw_ts is not None and ts is None:
                raise SourceError(f"{path}:{lineno}: 'created_at' {raw_ts!r} is not a timestamp")
            created = iso(ts) if ts else fallback
            custom = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
            items.append(
                SourceItem(
                    key=str(row.get("id", f"line-{lineno}")),
                    content=content,
                    created_at=created,
                    metadata={
                        "time": {"created_at": created},
                        "chat": {"title": row.get("title")} if row.get("title") else {},
                        "source": {"type": "jsonl", "path": str(path), "line": lineno},
                        "custom": custom,
                    },
                )
            )
    return items
