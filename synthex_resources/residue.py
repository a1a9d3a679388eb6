"""Purged text in the files of a project's data directory outside LanceDB: find it, and scrub it.

What writes content there besides the record store: Dagster's SQLite event log (materialization
previews name each record by the first 8 characters of its id, with its text), compute logs, the CDC
state and eval results in DuckDB, API landing files. SQLite and DuckDB keep deleted or overwritten
bytes in free pages, so a scrubbed database is rebuilt (``VACUUM`` / a copy into a new file), not only
updated.

``scan`` is the check a purge ends with, and it decodes what it reads (LanceDB compresses its pages,
DuckDB and JSON escape text): every file's raw bytes, and besides, for a file whose format it knows,
its decoded text: each Lance file's string columns (every data file of a table holds the rows of every
version that kept it, deleted rows included, and the FTS index's token files are Lance files too),
every cell of a SQLite database, every string of a JSON document. A file counts the larger of the two.

The pieces looked for are known by their prints (``synthex.core.needle_prints``), never by their text:
the purge journal keeps no purged text.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from synthex.core.atomic_file import write_file_atomic
from synthex.core.errors import SynthexError
from synthex.core.needle_prints import PRINT_BASE, PRINT_BITS, NeedlePrint, prints_of

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


class Needles:
    """Finds purged pieces in bytes and text by their prints (``synthex.core.needle_prints``), and the
    purged records' 8-character id prefixes (Dagster's previews name records by them, in backticks)."""

    CHUNK = 1 << 20  # bytes searched at once: memory stays bounded whatever the file's size

    def __init__(self, prints: list[NeedlePrint], id_prefixes: set[str] | None = None) -> None:
        self.prints = list(prints)
        self.id_prefixes = set(id_prefixes or ())
        self._by_anchor: dict[int, dict[int, list[NeedlePrint]]] = {}
        for needle in self.prints:
            self._by_anchor.setdefault(needle.anchor, {}).setdefault(needle.print, []).append(needle)
        self._masks = {}
        for anchor, by_print in self._by_anchor.items():
            mask = np.zeros(1 << PRINT_BITS, dtype=bool)
            mask[list(by_print)] = True
            self._masks[anchor] = mask
        self._power_table: tuple[np.ndarray, np.ndarray] | None = None
        self._longest = max((n.length for n in self.prints), default=0)
        self._shortest = min((n.length for n in self.prints), default=0)

    @classmethod
    def of_texts(cls, texts: list[str], id_prefixes: set[str] | None = None) -> Needles:
        return cls(prints_of(texts), id_prefixes)

    def __bool__(self) -> bool:
        return bool(self.prints or self.id_prefixes)

    # -- bytes --------------------------------------------------------------------------------------
    def spans(self, data: bytes | memoryview) -> list[tuple[int, int]]:
        """(start, end) of every occurrence of a piece in ``data``, sorted."""
        if not self.prints or len(data) < self._shortest:
            return []
        found: set[tuple[int, int]] = set()
        step = self.CHUNK
        for start in range(0, len(data), step):
            # Each chunk also reads the next one's first bytes: a piece that crosses the cut is found once.
            chunk = bytes(data[start:start + step + self._longest - 1])
            found.update((start + i, start + j) for i, j in self._spans_in(chunk) if start + i < start + step)
            if start + step >= len(data):
                break
        return sorted(found)

    def _spans_in(self, chunk: bytes) -> list[tuple[int, int]]:
        # The window hash sum(byte[i + k] * BASE**k) for every i at once, from one prefix sum:
        # prefix[i] = sum(byte[j] * BASE**j, j < i), window(i) = (prefix[i + a] - prefix[i]) * BASE**-i.
        n = len(chunk)
        powers, inverses = self._powers(n)
        prefix = np.zeros(n + 1, dtype=np.uint64)
        np.cumsum(np.frombuffer(chunk, dtype=np.uint8) * powers[:n], out=prefix[1:])
        out = []
        for anchor, by_print in self._by_anchor.items():
            windows = n - anchor + 1
            if windows <= 0:
                continue
            prints = (prefix[anchor:anchor + windows] - prefix[:windows]) * inverses[:windows]
            prints >>= np.uint64(64 - PRINT_BITS)
            for i in np.flatnonzero(self._masks[anchor][prints]).tolist():
                for needle in by_print[int(prints[i])]:
                    j = i + needle.length
                    if j <= n and hashlib.sha256(chunk[i:j]).hexdigest() == needle.digest:
                        out.append((i, j))
        return out

    def _powers(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """BASE**i and BASE**-i mod 2**64 for i < n (kept for the largest n asked: at most a chunk)."""
        if self._power_table is None or len(self._power_table[0]) < n:
            size = max(n, 4096)
            base, inverse = np.full(size, PRINT_BASE, dtype=np.uint64), np.full(size, pow(PRINT_BASE, -1, 1 << 64),
                                                                                 dtype=np.uint64)
            base[0] = inverse[0] = 1
            self._power_table = (np.cumprod(base), np.cumprod(inverse))
        return self._power_table

    def count(self, data: bytes | memoryview) -> int:
        return len(self.spans(data))

    def count_in_values(self, data: bytes | memoryview, offsets: np.ndarray) -> int:
        """Occurrences inside the values of a packed string column (``data[offsets[i]:offsets[i+1]]`` is
        value i): a piece that would span two values is not one."""
        return len(self._holders(data, offsets))

    def _holders(self, data: bytes | memoryview, offsets: np.ndarray) -> list[int]:
        """For each occurrence inside one value of a packed column: that value's index."""
        spans = self.spans(data)
        if not spans:
            return []
        starts = np.array([a for a, _ in spans], dtype=np.int64)
        ends = np.array([b for _, b in spans], dtype=np.int64)
        which = np.searchsorted(offsets, starts, side="right") - 1
        inside = (which >= 0) & (which < len(offsets) - 1)
        inside &= ends <= offsets[np.minimum(which + 1, len(offsets) - 1)]
        return which[inside].tolist()

    def holding(self, values: list[Any]) -> set[int]:
        """Indices of the values (text, bytes; others are skipped) that hold a piece or name a purged
        record: one search over all of them, not one per value."""
        packed = [v.encode("utf-8", "surrogatepass") if isinstance(v, str) else v if isinstance(v, bytes) else b""
                  for v in values]
        offsets = np.cumsum([0, *(len(v) for v in packed)], dtype=np.int64)
        found = set(self._holders(b"".join(packed), offsets))
        if self.id_prefixes:
            for i, value in enumerate(values):
                text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
                if i not in found and isinstance(text, str) and any(
                        m in self.id_prefixes for m in _PREVIEW_ID.findall(text)):
                    found.add(i)
        return found

    # -- text ---------------------------------------------------------------------------------------
    def hit(self, value: str) -> bool:
        if self.prints and self.spans(value.encode("utf-8", "surrogatepass")):
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
        data = value.encode("utf-8", "surrogatepass")
        pieces, last = [], 0
        for start, end in self.spans(data):  # overlapping occurrences become one [purged]
            if end <= last:
                continue
            if start >= last:
                pieces.append(data[last:start])
                pieces.append(PURGED_TEXT.encode())
            last = end
        pieces.append(data[last:])
        value = b"".join(pieces).decode("utf-8", "surrogatepass")
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
            width = len(cols)
            holding = needles.holding([v for row in rows for v in row[1:]])
            for r, row in enumerate(rows):
                updates = {}
                for c, (col, value) in enumerate(zip(cols, row[1:], strict=True)):
                    if r * width + c not in holding:
                        continue
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
            width = len(cols)
            holding = needles.holding([v for row in rows for v in row[1:]])
            doomed = [row[0] for r, row in enumerate(rows) if any(r * width + c in holding for c in range(width))]
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


def scan(root: Path, needles: Needles, skip: list[Path] | None = None) -> dict[str, int]:
    """Occurrences of the purged pieces in every file under ``root``: relative path -> count (the larger
    of its raw bytes' and its decoded text's, ``occurrences``). ``skip``: folders left out."""
    found: dict[str, int] = {}
    if not needles.prints:
        return found
    skipped = [p.resolve() for p in skip or []]
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if any(path.resolve().is_relative_to(s) for s in skipped):
            continue
        if count := occurrences(path, needles):
            found[str(path.relative_to(root))] = count
    return found


def occurrences(path: Path, needles: Needles) -> int:
    """How often the pieces occur in one file: its raw bytes, and its text decoded when its format is
    known (a Lance file's string columns, a SQLite database's cells, a JSON document's strings), the
    larger of the two. 0 when the file is gone (a SQLite ``-shm`` removed as its database closed)."""
    try:
        data = path.read_bytes()
    except OSError:
        return 0
    raw = needles.count(data)
    decode = _decoders_for(path, data)
    if decode is None:
        return raw
    try:
        return max(raw, decode(path, data, needles))
    except FileNotFoundError:
        return raw
    except Exception as exc:  # a file its format's reader refuses: it is a finding, not a pass
        raise PurgeFileError(f"{path}: cannot decode it to look for purged text ({type(exc).__name__}: "
                             f"{exc})") from exc


def _decoders_for(path: Path, data: bytes) -> Callable[[Path, bytes, Needles], int] | None:
    if path.suffix == ".lance":
        return _lance_occurrences
    if data.startswith(SQLITE_MAGIC):
        return _sqlite_occurrences
    if path.suffix == ".json":
        return _json_occurrences
    return None


def _lance_occurrences(path: Path, data: bytes, needles: Needles) -> int:
    """Every string of every text column (nested ones too) of one Lance file, read with Lance's file
    reader: the pages are compressed (FSST, dictionaries), so their bytes need not show the text."""
    import pyarrow as pa
    from lance.file import LanceFileReader

    schema = LanceFileReader(str(path)).metadata().schema
    columns = [f.name for f in schema if _holds_text(f.type)]
    if not columns:
        return 0
    table = LanceFileReader(str(path), columns=columns).read_all().to_table()
    total = 0
    for column in table.columns:
        for chunk in column.chunks:
            total += _array_occurrences(chunk, needles, pa)
    return total


def _holds_text(kind: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) \
            or pa.types.is_large_binary(kind) or pa.types.is_string_view(kind) or pa.types.is_binary_view(kind):
        return True
    if pa.types.is_dictionary(kind):
        return _holds_text(kind.value_type)
    if pa.types.is_map(kind):
        return _holds_text(kind.key_type) or _holds_text(kind.item_type)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _holds_text(kind.value_type)
    if pa.types.is_struct(kind):
        return any(_holds_text(kind.field(i).type) for i in range(kind.num_fields))
    return False


def _array_occurrences(array: Any, needles: Needles, pa: Any) -> int:
    kind = array.type
    if not _holds_text(kind):
        return 0
    if pa.types.is_dictionary(kind):
        return _array_occurrences(array.dictionary, needles, pa)
    if pa.types.is_map(kind):
        return _array_occurrences(array.keys, needles, pa) + _array_occurrences(array.items, needles, pa)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _array_occurrences(array.flatten(), needles, pa)
    if pa.types.is_struct(kind):
        return sum(_array_occurrences(child, needles, pa) for child in array.flatten())
    packed = array.cast(pa.large_binary())
    if len(packed) == 0:
        return 0
    offsets = np.frombuffer(packed.buffers()[1], dtype=np.int64)[packed.offset:packed.offset + len(packed) + 1]
    values = packed.buffers()[2]
    return needles.count_in_values(memoryview(values) if values is not None else b"", offsets)


def _sqlite_occurrences(path: Path, data: bytes, needles: Needles) -> int:
    """Every cell of every table, as text (a cell can be a JSON document: Dagster's events)."""
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=30)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        cells: list[bytes] = []
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                cells.extend(v if isinstance(v, bytes) else v.encode("utf-8", "surrogatepass")
                             for v in row if isinstance(v, str | bytes))
    finally:
        conn.close()
    offsets = np.cumsum([0, *(len(c) for c in cells)], dtype=np.int64)
    return needles.count_in_values(b"".join(cells), offsets)


def _json_occurrences(path: Path, data: bytes, needles: Needles) -> int:
    """Every string (keys too) of a JSON document, unescaped; a file that is not JSON counts as bytes."""
    try:
        doc = json.loads(data)
    except ValueError:
        return 0
    strings: list[bytes] = []
    todo = [doc]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            strings.extend(str(k).encode("utf-8", "surrogatepass") for k in node)
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
        elif isinstance(node, str):
            strings.append(node.encode("utf-8", "surrogatepass"))
    offsets = np.cumsum([0, *(len(c) for c in strings)], dtype=np.int64)
    return needles.count_in_values(b"".join(strings), offsets)
