"""Stream lines and notes set aside (quarantined): a line that is not JSON, not an object, has a field of
the wrong type or cannot be dated is not a reason to stop a stream (issue 20). Its reader skips it, names
it (file, line number, reason) and reads on, so the lines after it still flow into memory with the
record ids they would have had without it. A notes folder does the same with a note it cannot take in
(not UTF-8, a link loop, a front-matter date that is not a date: issue 32): the note is named with its
reason and the other notes are read; fixed, it is read like any other note at the next sync. Its record,
if it had one, leaves memory meanwhile (the folder's current content is what memory holds, and the note's
current content cannot be read); the deletion guard judges that like any note removed.

A notes folder is read whole at every change, so what it sets aside is found again by every read (no
ledger). A stream is read from its checkpoint, so a line set aside before it would not be read again:

what a stream's reader set aside is kept in ``<data dir>/quarantine/<source>.json`` (rewritten
atomically by the reader whenever the set changes), so ``synthex status`` and every later process
show it until the line is fixed or removed. The ledger holds where and why, never the line's text:
the line may hold what an agent was told to forget (``synthex purge`` sweeps text, not line numbers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from synthex.core.atomic_file import write_file_atomic
from synthex.core.naming import path_segment

QUARANTINE_DIR = "quarantine"
QUARANTINE_KEPT = 100  # lines named per source; a file of garbage is counted, not listed line by line
REASON_CHARS = 240  # a reason quotes at most a short value of the line


class SetAsideUnit(StrEnum):
    """What a source's reader sets aside: a stream's lines, or a notes folder's notes (whole files)."""

    LINE = "line"
    NOTE = "note"


@dataclass(frozen=True)
class QuarantinedLine:
    """One line of a stream (or one note: ``line`` None, the whole file) that its reader set aside: where
    it is and why."""

    file: str
    line: int | None
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: {self.reason}" if self.line is None else f"{self.file}:{self.line}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "reason": self.reason}

    @classmethod
    def of_error(cls, file: str, line: int | None, message: str) -> QuarantinedLine:
        """From a reader's one-line error (``<file>:<line>: <problem>``, a note's ``<file>: <problem>``): the
        problem alone, clipped."""
        prefix = f"{file}: " if line is None else f"{file}:{line}: "
        reason = message[len(prefix):] if message.startswith(prefix) else message
        reason = " ".join(reason.split())
        return cls(file, line, reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 1] + "…")


@dataclass(frozen=True)
class Quarantine:
    """What one source's reader set aside: the first ``QUARANTINE_KEPT`` lines (or notes) and how many in all."""

    source: str
    file: str
    lines: tuple[QuarantinedLine, ...] = ()
    total: int = 0
    unit: SetAsideUnit = SetAsideUnit.LINE

    def __bool__(self) -> bool:
        return self.total > 0

    def summary(self) -> str:
        """One line: how many lines (notes) are set aside and the first of them."""
        if not self.total:
            return ""
        first = f" (first: {self.lines[0]})" if self.lines else ""
        return f"{self.total} {self.unit}(s) set aside (quarantined){first}"

    def headline(self) -> str:
        """What ``synthex status`` says above the lines (notes) it lists."""
        rest = "the other notes are read" if self.unit is SetAsideUnit.NOTE else "the lines after them are read"
        return f"source {self.source}: {self.total} {self.unit}(s) set aside (quarantined) until fixed or removed; {rest}:"

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "file": self.file, "total": self.total, "unit": str(self.unit),
                "lines": [q.to_dict() for q in self.lines]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Quarantine:
        lines = tuple(QuarantinedLine(str(q["file"]), None if q["line"] is None else int(q["line"]), str(q["reason"]))
                      for q in data["lines"])
        return cls(str(data["source"]), str(data["file"]), lines, int(data["total"]),
                   SetAsideUnit(data.get("unit", SetAsideUnit.LINE)))


class QuarantineLedger:
    """``<data dir>/quarantine/<source>.json``, one file per source (each reader rewrites only its own)."""

    def __init__(self, data_dir: str | Path) -> None:
        self.folder = Path(data_dir) / QUARANTINE_DIR

    def path(self, source: str) -> Path:
        return self.folder / f"{path_segment(source)}.json"

    def load(self, source: str, file: str | None = None) -> Quarantine:
        """The stored quarantine of ``source`` (of ``file``: only if it names that file; a source that now
        reads another file has set nothing of it aside yet). Unreadable or absent: nothing set aside."""
        try:
            stored = Quarantine.from_dict(json.loads(self.path(source).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return Quarantine(source, file or "")
        if file is not None and stored.file != file:
            return Quarantine(source, file)
        return stored

    def save(self, quarantine: Quarantine) -> None:
        """Write (tmp file + rename: a reader never sees half a ledger); nothing set aside: removed."""
        path = self.path(quarantine.source)
        if not quarantine:
            path.unlink(missing_ok=True)
            return
        write_file_atomic(path, json.dumps(quarantine.to_dict(), ensure_ascii=False))
