"""Which importer reads a file: format detection, the format table (built-ins and ``register_format``),
and ``ParsedSource``, one source's parse kept while its file is unchanged.

Apart from ``synthex.core.importers.base`` so that the importers, which import ``base``, are imported by
this module only (no cycle between ``base`` and the importers).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from synthex.core.errors import SourceError
from synthex.core.importers import base, chatgpt, claude, folder, jsonl
from synthex.core.importers.base import SourceItem, file_digest, read_json, show

FORMATS = ("chatgpt-export", "claude-export", "folder", "jsonl")


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


# Formats added by other packages (e.g. evals registers the benchmark formats): name -> parser(path).
EXTRA_FORMATS: dict[str, Callable[[Path], list[SourceItem]]] = {}


def register_format(name: str, parser: Callable[[Path], list[SourceItem]]) -> None:
    """Make ``format=name`` available to ``pipeline.source``."""
    EXTRA_FORMATS[name] = parser


def load_source(path: str | Path, fmt: str = "auto") -> list[SourceItem]:
    """Parse a source file or folder (every call parses; ``ParsedSource`` keeps one parse)."""
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
    seen: set[str] = set()
    for item in items:  # a set, not list.count: an export of 100k items stays linear
        if item.key in seen:
            raise SourceError(f"{p}: two items share the id {show(item.key)}")
        seen.add(item.key)
    return items


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
        try:  # the cache check reads the file too: an unreadable one is the same one-line error
            stat = base.stat_signature(p)
            if stat is not None and key == self._key and stat == self._stat:
                return self._items
            digest = file_digest(p)
        except OSError as exc:
            raise SourceError(f"{exc.filename or p}: cannot read file: {exc.strerror or exc}") from exc
        if key != self._key or digest != self._digest:
            self._items = load_source(p, fmt)
        self._key, self._stat, self._digest = key, stat, digest
        return self._items

    @property
    def warnings(self) -> list[str]:
        """The one-line warnings of the current items (e.g. turns left out for having no text), in order."""
        return [w for item in self._items for w in item.warnings]
