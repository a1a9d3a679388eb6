"""A folder of .md/.txt files (or one such file): one document per file, dated by mtime."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from synthex.errors import SourceError
from synthex.importers.base import SourceItem
from synthex.periods import iso

SUFFIXES = (".md", ".txt", ".markdown")


def parse(path: Path) -> list[SourceItem]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix.lower() in SUFFIXES)
    items: list[SourceItem] = []
    for file in files:
        try:
            text = file.read_text(encoding="utf-8").strip()
        except UnicodeDecodeError as exc:
            raise SourceError(f"{file}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
        if not text:
            continue
        rel = str(file.relative_to(path)) if path.is_dir() else file.name
        created = iso(datetime.fromtimestamp(file.stat().st_mtime, tz=UTC))
        items.append(
            SourceItem(
                key=rel,
                content=text,
                created_at=created,
                metadata={
                    "time": {"created_at": created},
                    "chat": {"title": file.stem},
                    "source": {"type": "folder", "path": str(file)},
                },
            )
        )
    return items
