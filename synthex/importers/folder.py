"""A folder of .md/.txt files (or one such file): one document per file, dated by mtime.

Errors: a file that cannot be read or is not UTF-8 (naming the file). Empty files are skipped.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from synthex.errors import SourceError
from synthex.importers.base import SourceItem, not_text
from synthex.periods import iso

SUFFIXES = (".md", ".txt", ".markdown")


def parse(path: Path) -> list[SourceItem]:
    files = (
        [path]
        if path.is_file()
        else sorted(p for p in path.rglob("*") if p.suffix.lower() in SUFFIXES and not p.is_dir())
    )
    items: list[SourceItem] = []
    for file in files:
        try:
            raw = file.read_bytes()
            mtime = file.stat().st_mtime
        except OSError as exc:  # unreadable, or a broken symlink found by rglob
            raise SourceError(f"{file}: cannot read file: {exc.strerror or exc}") from exc
        try:
            text = raw.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            raise not_text(file, raw[:8], exc) from exc
        if not text:
            continue
        rel = str(file.relative_to(path)) if path.is_dir() else file.name
        created = iso(datetime.fromtimestamp(mtime, tz=UTC))
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
