"""Format detection and the shared shape every importer returns."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synthex.errors import SourceError

FORMATS = ("chatgpt-export", "claude-export", "folder", "jsonl")


@dataclass
class SourceItem:
    """One conversation or document: becomes one source record."""

    key: str  # stable identity inside the file (conversation id, relative path, line id)
    content: str
    created_at: str  # ISO-8601 UTC
    metadata: dict[str, Any] = field(default_factory=dict)


def read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SourceError(f"{path}: cannot read file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        hint = " (the file looks truncated)" if exc.pos >= len(text.rstrip()) - 1 else ""
        raise SourceError(f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}{hint}") from exc


def read_json_objects(path: Path, what: str, item: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, object) of a JSON file that is a list of objects; anything else is an error naming the file."""
    data = read_json(path)
    if not isinstance(data, list):
        raise SourceError(f"{path}: {what} is a JSON list of {item}s")
    for index, obj in enumerate(data):
        if not isinstance(obj, dict):
            raise SourceError(f"{path}: {item} #{index} is not an object")
        yield index, obj


def detect_format(path: Path) -> str:
    """Guess the export format of ``path`` (a file or a folder)."""
    if path.is_dir():
        return "folder"
    if not path.exists():
        raise SourceError(f"{path}: no such file or folder")
    if path.suffix.lower() == ".jsonl":
        return "jsonl"
    if path.suffix.lower() in (".md", ".txt"):
        return "folder"
    data = read_json(path)
    if isinstance(data, list) and data and isinstance(data[0], dict):
        first = data[0]
        if "mapping" in first:
            return "chatgpt-export"
        if "chat_messages" in first:
            return "claude-export"
    raise SourceError(
        f"{path}: unknown format: expected a ChatGPT export (conversations with 'mapping'), "
        f"a Claude export (conversations with 'chat_messages'), a .jsonl file or a folder of .md/.txt"
    )


def file_digest(path: Path) -> str:
    """Content hash of a file or folder: the cache key for parsed sources."""
    digest = hashlib.sha256()
    paths = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for p in paths:
        digest.update(str(p.relative_to(path) if path.is_dir() else p.name).encode())
        digest.update(str(p.stat().st_size).encode())
        digest.update(hashlib.sha256(p.read_bytes()).digest())
    return digest.hexdigest()


# Formats added by other packages (e.g. evals registers the benchmark formats): name -> parser(path).
EXTRA_FORMATS: dict[str, Callable[[Path], list[SourceItem]]] = {}


def register_format(name: str, parser: Callable[[Path], list[SourceItem]]) -> None:
    """Make ``format=name`` available to ``pipeline.source``."""
    EXTRA_FORMATS[name] = parser


def load_source(path: str | Path, fmt: str = "auto") -> list[SourceItem]:
    """Parse a source file or folder (every call parses; ``ParsedSource`` keeps one parse)."""
    from synthex.importers import chatgpt, claude, folder, jsonl

    p = Path(path).expanduser()
    if not p.exists():
        raise SourceError(f"{p}: no such file or folder")
    if fmt == "auto":
        fmt = detect_format(p)
    parsers = {
        "chatgpt-export": chatgpt.parse,
        "claude-export": claude.parse,
        "folder": folder.parse,
        "jsonl": jsonl.parse,
        **EXTRA_FORMATS,
    }
    if fmt not in parsers:
        known = ", ".join([*FORMATS, *EXTRA_FORMATS])
        raise SourceError(f"{p}: unknown format {fmt!r}; expected one of {known} or 'auto'")
    items = parsers[fmt](p)
    keys = [i.key for i in items]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise SourceError(f"{p}: two items share the id {dup!r}")
    return items


RACY_SECONDS = 2.0  # a file modified this recently may change again within the same mtime tick


def stat_signature(path: Path) -> tuple | None:
    """(name, size, mtime, ctime, inode) of a file or of every file in a folder: the cheap "did it
    change?" test. None when a file was modified in the last seconds, where same-tick edits could go
    unseen (git's "racy" rule): then the content is hashed instead."""
    paths = sorted(q for q in path.rglob("*") if q.is_file()) if path.is_dir() else [path]
    stats = [(str(q), q.stat()) for q in paths]
    if any(time.time() - st.st_mtime < RACY_SECONDS for _, st in stats):
        return None
    return tuple((name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) for name, st in stats)


class ParsedSource:
    """One source's parse, kept while the file is unchanged.

    An unchanged stat (size, mtime, ctime, inode; not for files modified in the last 2 s) reuses the
    parse without reading the file; otherwise the content is hashed, and only a changed content hash
    re-parses (a ``touch`` costs a hash, not a parse).
    """

    def __init__(self) -> None:
        self._stat: tuple | None = None
        self._digest: str | None = None
        self._key: tuple[str, str] | None = None
        self._items: list[SourceItem] = []

    def items(self, path: str | Path, fmt: str = "auto") -> list[SourceItem]:
        p = Path(path).expanduser()
        if not p.exists():
            raise SourceError(f"{p}: no such file or folder")
        key = (str(p.resolve()), fmt)
        stat = stat_signature(p)
        if stat is not None and key == self._key and stat == self._stat:
            return self._items
        digest = file_digest(p)
        if key != self._key or digest != self._digest:
            self._items = load_source(p, fmt)
        self._key, self._stat, self._digest = key, stat, digest
        return self._items


def render_conversation(title: str, turns: list[tuple[str, str, str]]) -> str:
    """Text of a conversation: a title line, then ``role: text`` blocks (timestamps kept in metadata)."""
    lines = [f"# {title}"] if title else []
    for role, _ts, text in turns:
        lines.append(f"{role}: {text}")
    return "\n\n".join(lines)
