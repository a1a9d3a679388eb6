"""An append-only JSONL stream (an agent's inbox, a log): read from the last offset, never re-parsed.

Each line is a JSON object as in the ``jsonl`` importer, with a required ``created_at`` (or
``timestamp``): it dates the line, and a stream must not date its lines by when they were read (the
same lines read in another order or on another day must give the same records). Identity is the
``id`` field, else a hash of the text and date, so a line appended twice is one item. A later line
with the same id replaces the earlier one (an update); ``{"id": ..., "deleted": true}`` removes it.
Only complete lines count: a writer's half-written last line is read once its newline arrives.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from synthex.core.deletions import DeletionReporting
from synthex.core.errors import SourceError
from synthex.core.importers import SourceItem
from synthex.core.importers.jsonl import item_from_row, row_of
from synthex.core.sources.base import SourceOrigin

HEAD_BYTES = 4096  # the prefix whose hash tells an append from a rewrite of the file


def content_key(item: SourceItem) -> str:
    """The identity of a line without an id: its text and date (order-independent, deterministic)."""
    return "sha-" + hashlib.sha256(f"{item.created_at}\n{item.content}".encode()).hexdigest()[:20]


class StreamOrigin(SourceOrigin):
    kind = "stream"
    deletions = DeletionReporting.EXPLICIT  # a `{"id": ..., "deleted": true}` line

    def __init__(self, path: Path) -> None:
        self.path = path
        self._reset()

    def _reset(self) -> None:
        self._offset = 0
        self._lineno = 0
        self._ident: tuple[int, int] | None = None
        self._head = b""
        self._by_key: dict[str, SourceItem] = {}
        self._items: list[SourceItem] | None = None

    def items(self) -> list[SourceItem]:
        """The current items; the same list object while nothing new was read (callers cache on it)."""
        self._read_new()
        if self._items is None:
            self._items = list(self._by_key.values())
        return self._items

    def is_empty(self) -> bool:
        """No line at all (the file is gone or was truncated): a stream whose lines were all deleted by
        ``deleted`` lines still holds those lines, so it is not empty."""
        self._read_new()
        return self._lineno == 0

    def token(self) -> str:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return "absent"
        except OSError as exc:
            raise SourceError(f"{self.path}: cannot read file: {exc.strerror or exc}") from exc
        return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"

    def describe(self) -> str:
        return str(self.path)

    def config(self) -> dict[str, Any]:
        return {"kind": self.kind, "reader": "stream/v1"}

    def _read_new(self) -> None:
        try:
            with self.path.open("rb") as handle:
                st = os.fstat(handle.fileno())
                head = handle.read(min(HEAD_BYTES, self._offset)) if self._offset else b""
                if (st.st_dev, st.st_ino) != self._ident or st.st_size < self._offset or head != self._head:
                    self._reset()  # replaced, truncated or rewritten: read it all again
                    self._ident = (st.st_dev, st.st_ino)
                handle.seek(self._offset)
                data = handle.read(st.st_size - self._offset)
        except FileNotFoundError:
            self._reset()  # no stream yet: nothing was said
            return
        except OSError as exc:
            raise SourceError(f"{self.path}: cannot read file: {exc.strerror or exc}") from exc
        end = data.rfind(b"\n")
        if end < 0:
            return
        # Parse every new line before applying any: a bad line leaves the stream's state as it was.
        lineno, changes = self._lineno, []
        for line in data[: end + 1].split(b"\n")[:-1]:
            lineno += 1
            changes.append(self._parse(line, f"{self.path}:{lineno}"))
        self._items = None
        for key, item in (c for c in changes if c is not None):
            if item is None:
                self._by_key.pop(key, None)
            else:
                self._by_key.pop(key, None)  # an update moves the item to its newest place
                self._by_key[key] = item
        self._offset += end + 1
        self._lineno = lineno
        if len(self._head) < HEAD_BYTES:
            with self.path.open("rb") as handle:
                self._head = handle.read(min(HEAD_BYTES, self._offset))

    def _parse(self, line: bytes, where: str) -> tuple[str, SourceItem | None] | None:
        row = row_of(line, where)
        if row is None:
            return None
        if row.get("deleted") is True:
            key = row.get("id")
            if not isinstance(key, str | int) or isinstance(key, bool) or key == "":
                raise SourceError(f"{where}: a deletion needs the 'id' of the line it deletes")
            return str(key), None
        item = item_from_row(row, where, None, {"type": "stream", "path": str(self.path)})
        if not item.key:
            item.key = content_key(item)
        return item.key, item


def append_lines(path: Path, rows: list[dict[str, Any]]) -> None:
    """Append ``rows`` as JSON lines in one write, under an exclusive lock, flushed to disk: concurrent
    writers (several agents, the MCP server) never interleave half lines."""
    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows).encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size:  # a writer that died mid-line left no newline: end its line so ours stays whole
            with path.open("rb") as handle:
                handle.seek(size - 1)
                if handle.read(1) != b"\n":
                    payload = b"\n" + payload
        os.write(fd, payload)
        os.fsync(fd)
    finally:
        os.close(fd)
