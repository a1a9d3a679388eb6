"""An append-only JSONL stream (an agent's inbox, a log): read from the last offset, never re-parsed.

Each line is a JSON object as in the ``jsonl`` importer, with a required ``created_at`` (or
``timestamp``): it dates the line, and a stream must not date its lines by when they were read (the
same lines read in another order or on another day must give the same records). Identity is the
``id`` field, else a hash of the text and date, so a line appended twice is one item. A later line
with the same id replaces the earlier one (an update); ``{"id": ..., "deleted": true}`` removes it.
Only complete lines count: a writer's half-written last line is read once its newline arrives.

A line that cannot become an item (not JSON, not an object, a field of the wrong type, no date, longer
than ``Limits.stream_line_bytes``) never stops the stream: it is set aside (``quarantine``: file, line
number, reason; kept in the data dir) and the lines after it are read. Skipping a line changes no other
line's record id (ids never depend on line numbers).

One read takes at most ``Limits.stream_batch_lines`` lines beyond the stream's checkpoint (the lines the
last sync, or the last completed run, took: ``<data dir>/streams/<source>.json``); the rest wait for the
next sync. The checkpoint only moves forward over lines already read, and a read never takes fewer
lines than it names, so a cap can never make a stored record look deleted.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from synthex.core.atomic_file import write_file_atomic
from synthex.core.deletions import DeletionReporting
from synthex.core.errors import SourceError
from synthex.core.importers import SourceItem
from synthex.core.importers.jsonl import item_from_row, row_of
from synthex.core.naming import path_segment
from synthex.core.sources.base import SourceOrigin
from synthex.core.sources.quarantine import QUARANTINE_KEPT, Quarantine, QuarantinedLine, QuarantineLedger

HEAD_BYTES = 4096  # the prefix whose hash tells an append from a rewrite of the file
CHUNK_BYTES = 1 << 20  # how much of an over-long line is read at a time while skipping it
TAIL_SCAN_BYTES = 1 << 16  # how far back `append_lines` looks for the start of a half line
CHECKPOINT_DIR = "streams"


def content_key(item: SourceItem) -> str:
    """The identity of a line without an id: its text and date (order-independent, deterministic)."""
    return "sha-" + hashlib.sha256(f"{item.created_at}\n{item.content}".encode()).hexdigest()[:20]


def encode_line(row: dict[str, Any]) -> bytes:
    """One stream line as ``append_lines`` writes it (with its newline)."""
    return (json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n").encode()


class StreamCheckpoint:
    """``<data dir>/streams/<source>.json``: how many lines of the stream file the last sync (or completed
    run) took. A checkpoint of another file (the source now reads another path) counts as none."""

    def __init__(self, data_dir: str | Path, source: str) -> None:
        self.path = Path(data_dir) / CHECKPOINT_DIR / f"{path_segment(source)}.json"

    def lines(self, file: str) -> int:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return int(data["lines"]) if data.get("file") == file else 0
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return 0

    def save(self, file: str, lines: int) -> None:
        write_file_atomic(self.path, json.dumps({"file": file, "lines": lines}))


class StreamOrigin(SourceOrigin):
    kind = "stream"
    deletions = DeletionReporting.EXPLICIT  # a `{"id": ..., "deleted": true}` line

    def __init__(self, path: Path, *, source: str = "", data_dir: str | Path | None = None,
                 batch_lines: int | None = None, line_bytes: int | None = None) -> None:
        """``source`` and ``data_dir``: where the quarantine ledger and the checkpoint are kept (none
        without them); ``batch_lines``: lines one read takes beyond the checkpoint (with a data dir);
        ``line_bytes``: a longer line is set aside unread."""
        self.path = path
        self.source = source or path.name
        self.batch_lines = batch_lines if data_dir is not None else None
        self.line_bytes = line_bytes
        self._ledger = QuarantineLedger(data_dir) if data_dir is not None else None
        self._checkpoint = StreamCheckpoint(data_dir, self.source) if data_dir is not None else None
        self._saved: Quarantine | None = None  # what the ledger holds (loaded on first use)
        self._reset()

    def _reset(self) -> None:
        self._offset = 0
        self._lineno = 0
        self._ident: tuple[int, int] | None = None
        self._head = b""
        self._by_key: dict[str, SourceItem] = {}
        self._items: list[SourceItem] | None = None
        self._set_aside: list[QuarantinedLine] = []  # the first QUARANTINE_KEPT lines set aside
        self._set_aside_total = 0
        self._waiting = False  # whole lines beyond this read's cap wait for the next sync

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

    def quarantine(self) -> Quarantine:
        self._read_new()
        return Quarantine(self.source, str(self.path), tuple(self._set_aside), self._set_aside_total)

    def warnings(self) -> list[str]:
        out = super().warnings()
        out += [f"{q}: line set aside (quarantined); the lines after it are read" for q in self._set_aside]
        if self._set_aside_total > len(self._set_aside):
            out.append(f"{self.path}: {self._set_aside_total - len(self._set_aside)} more line(s) set aside")
        return out

    def waiting(self) -> bool:
        self._read_new()
        return self._waiting

    def read_position(self) -> int:
        """The lines read so far (what ``commit_position`` records)."""
        self._read_new()
        return self._lineno

    def commit_position(self, position: int) -> None:
        if self._checkpoint is not None:
            self._checkpoint.save(str(self.path), position)

    def _cap(self) -> int | None:
        """The most lines a read takes now: the checkpoint's and one batch more (None: no cap)."""
        if self.batch_lines is None or self._checkpoint is None:
            return None
        return self._checkpoint.lines(str(self.path)) + self.batch_lines

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
        cap = self._cap()
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO in its place must not block us
        except FileNotFoundError:
            self._reset()  # no stream yet: nothing was said
            self._keep_ledger()
            return
        except OSError as exc:
            raise SourceError(f"{self.path}: cannot read file: {exc.strerror or exc}") from exc
        try:
            with os.fdopen(fd, "rb") as handle:
                st = os.fstat(handle.fileno())
                if not stat.S_ISREG(st.st_mode):
                    raise SourceError(f"{self.path}: not a regular file (a stream is an append-only JSONL file)")
                head = handle.read(min(HEAD_BYTES, self._offset)) if self._offset else b""
                if (st.st_dev, st.st_ino) != self._ident or st.st_size < self._offset or head != self._head:
                    self._reset()  # replaced, truncated or rewritten: read it all again
                    self._ident = (st.st_dev, st.st_ino)
                handle.seek(self._offset)
                read = self._scan(handle, cap)
                if len(self._head) < HEAD_BYTES and read[0]:
                    handle.seek(0)
                    self._head = handle.read(min(HEAD_BYTES, self._offset + read[0]))
        except OSError as exc:
            raise SourceError(f"{self.path}: cannot read file: {exc.strerror or exc}") from exc
        self._apply(*read)
        self._keep_ledger()

    def _scan(self, handle: BinaryIO, cap: int | None
              ) -> tuple[int, int, list[tuple[str, SourceItem | None]], list[QuarantinedLine], bool]:
        """Read whole lines from the handle's position (at most up to line ``cap``). Returns the bytes and
        lines consumed, the items (key, item or None for a deletion) in order, the lines set aside, and
        whether whole lines wait beyond the cap. Nothing is applied: an I/O error leaves the state as it was."""
        consumed, lineno = 0, self._lineno
        changes: list[tuple[str, SourceItem | None]] = []
        set_aside: list[QuarantinedLine] = []
        limit = self.line_bytes
        while cap is None or lineno < cap:
            line = handle.readline(limit + 1) if limit else handle.readline()
            if not line.endswith(b"\n"):
                if not limit or len(line) <= limit:
                    return consumed, lineno, changes, set_aside, False  # end of file, or a half-written line
                length = self._skip_line(handle, len(line))
                if length is None:  # the long line is not finished yet: looked at again next time
                    return consumed, lineno, changes, set_aside, False
                lineno, consumed = lineno + 1, consumed + length
                set_aside.append(QuarantinedLine(str(self.path), lineno, f"the line is {length} bytes, over the "
                                                 f"limit of {limit} (Limits.stream_line_bytes)"))
                continue
            lineno, consumed = lineno + 1, consumed + len(line)
            try:
                change = self._parse(line[:-1], f"{self.path}:{lineno}")
            except SourceError as exc:  # set aside, named; the lines after it are read
                set_aside.append(QuarantinedLine.of_error(str(self.path), lineno, str(exc)))
                continue
            if change is not None:
                changes.append(change)
        return consumed, lineno, changes, set_aside, self._whole_line_follows(handle)

    @staticmethod
    def _skip_line(handle: BinaryIO, seen: int) -> int | None:
        """Read past the rest of an over-long line without keeping it; its length, or None if it has no
        newline yet."""
        length = seen
        while True:
            chunk = handle.readline(CHUNK_BYTES)
            length += len(chunk)
            if chunk.endswith(b"\n"):
                return length
            if not chunk:
                return None

    @staticmethod
    def _whole_line_follows(handle: BinaryIO) -> bool:
        while chunk := handle.read(TAIL_SCAN_BYTES):
            if b"\n" in chunk:
                return True
        return False

    def _apply(self, consumed: int, lineno: int, changes: list[tuple[str, SourceItem | None]],
               set_aside: list[QuarantinedLine], waiting: bool) -> None:
        self._waiting = waiting
        if not consumed:
            return
        self._items = None
        for key, item in changes:
            self._by_key.pop(key, None)  # an update moves the item to its newest place; a deletion removes it
            if item is not None:
                self._by_key[key] = item
        self._set_aside += set_aside[: max(0, QUARANTINE_KEPT - len(self._set_aside))]
        self._set_aside_total += len(set_aside)
        self._offset += consumed
        self._lineno = lineno

    def _keep_ledger(self) -> None:
        """Write the quarantine ledger when what is set aside changed (every reader keeps it current)."""
        if self._ledger is None:
            return
        now = Quarantine(self.source, str(self.path), tuple(self._set_aside), self._set_aside_total)
        if self._saved is None:
            self._saved = self._ledger.load(self.source, str(self.path))
        if now != self._saved:
            try:
                self._ledger.save(now)
            except OSError:  # a read-only data dir: the lines are still named in every warning
                return
            self._saved = now

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


def append_lines(path: Path, rows: list[dict[str, Any]]) -> int:
    """Append ``rows`` as JSON lines in one write, under an exclusive lock, flushed to disk: concurrent
    writers (several agents, the MCP server) never interleave half lines. A half line a dead writer left
    (the file does not end with a newline) is ended first, so it stands alone (and is set aside when it is
    not a whole line) and ours stay whole; returns its length in bytes (0: there was none). A failed
    write is undone: nothing is left half-written. One line on error (``SourceError``)."""
    if not rows:
        return 0
    payload = b"".join(encode_line(r) for r in rows)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        raise SourceError(f"{path}: cannot append to the stream: {exc.strerror or exc}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SourceError(f"{path}: not a regular file (a stream is an append-only JSONL file)")
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        partial = _half_line_bytes(fd, size)
        if partial:
            payload = b"\n" + payload
        _write_whole(fd, path, payload, size)
    finally:
        os.close(fd)
    return partial


def _half_line_bytes(fd: int, size: int) -> int:
    """The length of the file's last line when it has no newline (0 when the file ends with one)."""
    if not size or os.pread(fd, 1, size - 1) == b"\n":
        return 0
    tail = os.pread(fd, min(TAIL_SCAN_BYTES, size), max(0, size - TAIL_SCAN_BYTES))
    return len(tail) - 1 - tail.rfind(b"\n") if b"\n" in tail else size


def _write_whole(fd: int, path: Path, payload: bytes, size: int) -> None:
    """Write all of ``payload`` and fsync it; on failure cut the file back to ``size`` (we hold the lock)."""
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except OSError as exc:
        try:
            os.ftruncate(fd, size)
        except OSError:
            pass
        raise SourceError(f"{path}: cannot append to the stream: {exc.strerror or exc}; nothing was written") from exc
