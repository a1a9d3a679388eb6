"""Purged text in the files of a project's data directory outside LanceDB: find it, and scrub it.

What writes content there besides the record store: Dagster's SQLite event log (materialization
previews name each record by the first 8 characters of its id, with its text), compute logs, the CDC
state and eval results in DuckDB, API landing files. SQLite and DuckDB keep deleted or overwritten
bytes in free pages, so a scrubbed database is rebuilt (``VACUUM`` / a copy into a new file), not only
updated. ``scan`` reads every file as raw bytes: the check a purge ends with.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synthex.core.atomic_file import write_file_atomic
from synthex.core.errors import SynthexError

PURGED_TEXT = "[purged]"
MIN_NEEDLE = 12  # shorter lines ("user: ok") are not evidence of anything
_PREVIEW_ID = re.compile(r"`([0-9a-f]{8})`")
SQLITE_MAGIC = b"SQLite format 3\x00"
DUCKDB_MAGIC = b"DUCK"  # at offset 8


class PurgeFileError(SynthexError):
    """A file under the data directory the sweep could not read or rewrite: one line naming it."""


def needles_of(texts: list[str], limit: int = 400) -> list[str]:
    """Distinctive pieces of purged texts to look for: each line of at least ``MIN_NEEDLE`` characters
    (cut to 80), and the whole text when it is one short line."""
    found: dict[str, None] = {}
    for text in texts:
        for line in text.splitlines() or [text]:
            line = line.strip()
            if len(line) >= MIN_NEEDLE:
                found[line[:80]] = None
        if len(found) >= limit:
            break
    return list(found)[:limit]


def byte_forms(needles: list[str]) -> list[bytes]:
    """Each needle as stored: UTF-8, and JSON-escaped (ASCII escapes and raw) where that differs."""
    forms: dict[bytes, None] = {}
    for n in needles:
        forms[n.encode()] = None
        for ascii_only in (True, False):
            forms[json.dumps(n, ensure_ascii=ascii_only)[1:-1].encode()] = None
    return list(forms)


@dataclass
class Needles:
    texts: list[str]  # purged text pieces (``needles_of``)
    id_prefixes: set[str] = field(default_factory=set)  # purged record ids' first 8 characters

    def __post_init__(self) -> None:
        # How each piece reads inside a JSON document (Dagster's events, run records).
        self._pieces = list(dict.fromkeys(
            [*self.texts, *(json.dumps(t, ensure_ascii=a)[1:-1] for t in self.texts for a in (True, False))]))

    def forms(self) -> list[bytes]:
        return byte_forms(self.texts)

    def hit(self, value: str) -> bool:
        if any(p in value for p in self._pieces):
            return True
        return bool(self.id_prefixes) and any(m in self.id_prefixes for m in _PREVIEW_ID.findall(value))

    def scrub(self, value: str) -> str:
        """``value`` without purged text: a JSON document has each string that mentions a purged record
        replaced whole (a preview table, an error); plain text has the pieces replaced."""
        if not self.hit(value):
            return value
        try:
            doc = json.loads(value)
        except ValueError:
            doc = None
        if isinstance(doc, dict | list):
            return json.dumps(self._walk(doc))
        for piece in sorted(self._pieces, key=len, reverse=True):
            value = value.replace(piece, PURGED_TEXT)
        for prefix in self.id_prefixes:
            value = value.replace(f"`{prefix}`", f"`{PURGED_TEXT}`")
        return value

    def _walk(self, node: Any) -> Any:
        if isinstance(node, dict):
            return {k: self._walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [self._walk(v) for v in node]
        if isinstance(node, str) and self.hit(node):
            return PURGED_TEXT
        return node


def file_kind(path: Path) -> str:
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head.startswith(SQLITE_MAGIC):
        return "sqlite"
    if head[8:12] == DUCKDB_MAGIC:
        return "duckdb"
    return "sqlite-side" if path.name.endswith(("-wal", "-shm", "-journal")) else "file"


def scrub_sqlite(path: Path, needles: Needles) -> int:
    """Rewrite cells that mention purged text or records, then VACUUM (free pages hold old bytes)."""
    # mode=rw: a database that vanished since the listing is an error here, never a new empty file.
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=rw", uri=True, timeout=30)
    try:
        conn.execute("PRAGMA secure_delete = ON")
        changed = 0
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                             "AND name NOT LIKE 'sqlite_%'")]
        for table in tables:
            cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')
                    if (r[2] or "").upper() in ("TEXT", "BLOB", "") or "CHAR" in (r[2] or "").upper()]
            if not cols:
                continue
            try:
                rows = conn.execute(f'SELECT rowid, {", ".join(f"{chr(34)}{c}{chr(34)}" for c in cols)} '
                                    f'FROM "{table}"').fetchall()
            except sqlite3.OperationalError:  # a WITHOUT ROWID table: none in Dagster's schema
                continue
            for row in rows:
                updates = {}
                for col, value in zip(cols, row[1:], strict=True):
                    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
                    if isinstance(text, str) and needles.hit(text):
                        updates[col] = needles.scrub(text)
                if updates:
                    sets = ", ".join(f'"{c}" = ?' for c in updates)
                    conn.execute(f'UPDATE "{table}" SET {sets} WHERE rowid = ?', [*updates.values(), row[0]])
                    changed += 1
        conn.commit()
        if changed:
            _retry_busy(lambda: conn.execute("VACUUM"))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return changed
    finally:
        conn.close()


def _retry_busy(fn: Any, attempts: int = 20) -> Any:
    for attempt in range(attempts):
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.25)
    return None


def scrub_duckdb(path: Path, needles: Needles) -> int:
    """Delete rows that mention purged text or records, then copy the database into a new file (DuckDB
    reuses freed blocks but does not clear them)."""
    import duckdb

    conn = duckdb.connect(str(path))
    deleted = 0
    try:
        tables = conn.execute("SELECT table_schema, table_name FROM information_schema.tables "
                              "WHERE table_type = 'BASE TABLE'").fetchall()
        for schema, table in tables:
            cols = [r[0] for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = ? AND table_name = ? "
                "AND data_type = 'VARCHAR'", [schema, table]).fetchall()]
            if not cols:
                continue
            rows = conn.execute(f'SELECT rowid, {", ".join(chr(34) + c + chr(34) for c in cols)} '
                                f'FROM "{schema}"."{table}"').fetchall()
            doomed = [r[0] for r in rows if any(isinstance(v, str) and needles.hit(v) for v in r[1:])]
            for start in range(0, len(doomed), 1000):
                ids = ",".join(str(i) for i in doomed[start:start + 1000])
                conn.execute(f'DELETE FROM "{schema}"."{table}" WHERE rowid IN ({ids})')
            deleted += len(doomed)
    finally:
        conn.close()
    if deleted:
        rebuild_duckdb(path)
    return deleted


def rebuild_duckdb(path: Path) -> None:
    """Copy ``path`` into a fresh file and swap it in: only live rows survive."""
    import duckdb

    fresh = path.with_name(path.name + ".rebuild")
    for leftover in (fresh, fresh.with_name(fresh.name + ".wal")):
        leftover.unlink(missing_ok=True)
    conn = duckdb.connect(str(fresh))
    try:
        # A SQL string literal: a quote in the project's path must not end it (ATTACH takes no parameter).
        literal = "'" + str(path).replace("'", "''") + "'"
        conn.execute(f"ATTACH {literal} AS purge_source (READ_ONLY)")
        target = conn.execute("SELECT current_database()").fetchone()[0]
        conn.execute(f'COPY FROM DATABASE purge_source TO "{target}"')
        conn.execute("DETACH purge_source")
        conn.execute("CHECKPOINT")
    finally:
        conn.close()
    os.replace(fresh, path)
    Path(str(path) + ".wal").unlink(missing_ok=True)


def scrub_text_file(path: Path, needles: Needles) -> int:
    """Replace purged pieces in a text file (compute logs, landing files); 1 when it was rewritten."""
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return 0
    if not needles.hit(text):
        return 0
    lines = [needles.scrub(line) if needles.hit(line) else line for line in text.splitlines(keepends=True)]
    write_file_atomic(path, "".join(lines))
    return 1


def scrub_files(data_dir: Path, needles: Needles, skip: list[Path],
                on_file: Callable[[str], None] | None = None) -> dict[str, int]:
    """Scrub every SQLite, DuckDB and text file under ``data_dir`` except under ``skip`` (LanceDB's
    folder, handled by ``synthex_resources.purge``). Returns relative path -> rows/cells/files changed.
    ``on_file``: told each file's relative path once it is done (a purge reports it; tests kill there).

    A file listed that is gone when its turn comes is not an error: closing a SQLite database in WAL
    mode removes its ``-wal`` and ``-shm`` files (a process killed with the database open leaves them
    behind, the sweep's own close of that database removes them). Any other failure is one line naming
    the file (``PurgeFileError``)."""
    changed: dict[str, int] = {}
    skip = [p.resolve() for p in skip]
    scrubbers: dict[str, Callable[[Path, Needles], int]] = {
        "sqlite": scrub_sqlite, "duckdb": scrub_duckdb, "file": scrub_text_file}
    for path in sorted(p for p in data_dir.rglob("*") if p.is_file()):
        if any(path.resolve().is_relative_to(s) for s in skip) or any(
                part.endswith(".lance") for part in path.parts):
            continue  # LanceDB datasets (the store, eval workspaces) are rewritten by compaction, not by text edits
        rel = str(path.relative_to(data_dir))
        try:
            scrubber = scrubbers.get(file_kind(path))
            n = scrubber(path, needles) if scrubber is not None else 0
        except FileNotFoundError:
            continue  # vanished since the listing: nothing left in it to scrub
        except (OSError, sqlite3.Error) as exc:
            if not path.exists():
                continue  # removed while it was being opened (sqlite3 says "unable to open database file")
            raise PurgeFileError(f"{data_dir / rel}: {type(exc).__name__}: {exc}") from exc
        except Exception as exc:  # duckdb.Error and kin: still one line naming the file
            raise PurgeFileError(f"{data_dir / rel}: {type(exc).__name__}: {exc}") from exc
        if n:
            changed[rel] = n
        if on_file is not None:
            on_file(rel)
    return changed


def scan(root: Path, forms: list[bytes], skip: list[Path] | None = None) -> dict[str, int]:
    """Occurrences of each byte form in every file under ``root``, raw bytes: relative path -> count.
    ``skip``: folders left out (an unfinished purge's journal, which holds the text until it is removed)."""
    found: dict[str, int] = {}
    if not forms:
        return found
    skipped = [p.resolve() for p in skip or []]
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if any(path.resolve().is_relative_to(s) for s in skipped):
            continue
        if count := occurrences(path, forms):
            found[str(path.relative_to(root))] = count
    return found


def occurrences(path: Path, forms: list[bytes]) -> int:
    """How often the byte forms occur in one file (0 when it cannot be read)."""
    try:
        data = path.read_bytes()
    except OSError:
        return 0
    return sum(data.count(f) for f in forms)
