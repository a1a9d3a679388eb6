"""Reading another system's SQLite file (Mem0's ``history.db``, LangGraph's ``SqliteStore``): read-only, the
file size bounded first, the connection always closed, a SQLite error one line naming the file. sqlite3 is
imported here, when a file is read: importing the importers stays cheap (tests/test_table_reader.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from synthex.core.errors import SourceError
from synthex.core.importers.base import Intake, TooLarge

if TYPE_CHECKING:
    import sqlite3

T = TypeVar("T")


def connect_read_only(path: Path) -> sqlite3.Connection:
    import sqlite3

    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def read_sqlite(path: Path, intake: Intake | None, read: Callable[[sqlite3.Connection], T]) -> T:
    """``read(connection)`` on ``path`` opened read-only, after the file-size bound of ``intake``'s limits."""
    import sqlite3

    limits = (intake or Intake()).limits
    size = path.stat().st_size
    if size > limits.source_file_bytes:
        raise TooLarge(limits.over("source_file_bytes", f"{path}: skipped: the file", size))
    try:
        db = connect_read_only(path)
        try:
            return read(db)
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise SourceError(f"{path}: cannot read the SQLite file: {exc}") from exc


def holds_table_columns(path: Path, table: str, columns: set[str]) -> bool:
    """Whether ``path`` is a SQLite file whose ``table`` has at least ``columns`` (a sniffer: never raises)."""
    import sqlite3

    try:
        db = connect_read_only(path)
        try:
            found = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
        finally:
            db.close()
    except sqlite3.Error:
        return False
    return columns <= found
