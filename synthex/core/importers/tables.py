"""Table sources: one item per row of a table in a DuckDB or SQLite file.

``TableSpec`` names the file (``dsn``), the table, its primary-key column and optionally a watermark
column (``updated_at``), a dating column (``created_at``) and the columns rendered into the text.

DSN: ``duckdb:///<path>`` or ``sqlite:///<path>``, SQLAlchemy's spelling: the path after the third slash
is relative to ``base_dir`` (``sqlite:///data/app.db``) unless it is absolute (``sqlite:////srv/app.db``,
i.e. ``f"sqlite:///{absolute_path}"``); ``~`` is expanded. The table is one identifier in the default
schema (``main``); identifiers are quoted (double quotes, doubled inside), and a column name that differs
only in case from one of the table's columns is taken as that column.

Items (``read_items``; ``read_changed`` returns the same items for the rows it reads):

- ``key``: ``str(pk value)``. A NULL or duplicate pk is a ``SourceError`` naming the table and value.
- ``content``: ``"{column}: {value}"`` lines for the text columns (by default every column except pk,
  ``updated_at`` and ``created_at``, in the table's order; an explicit ``text`` keeps its own order).
  Timestamps and dates are written in ISO-8601, booleans as true/false, lists and structs as JSON;
  NULLs are left out; binary values are left out with a warning on the item. A row with no text at all
  is still an item (its content is empty, with a warning), so every current pk has an item.
- ``created_at`` (ISO-8601 UTC, seconds): the ``created_at`` column, else ``updated_at``; a value is a
  timestamp, a date, epoch seconds or ISO-8601 text (``periods.to_timestamp``; anything else is an error
  naming the row and column). A NULL falls back to ``updated_at`` and then to 1970-01-01T00:00:00Z with
  a warning. Without either column every row is dated 1970-01-01T00:00:00Z: the whole table is one
  period (1970-01).
- ``metadata``: ``{"time": {"created_at"}, "source": {"type": "duckdb"|"sqlite", "table", "pk"},
  "row": {column: value}}`` with every column as JSON (ISO text for times, strings for decimals, UUIDs
  and intervals; binary values left out).

Change detection: ``read_token`` is a cheap string that changes when the rows change. With
``updated_at`` it is ``count(*)`` and ``max(updated_at)`` (one aggregate query); without, ``count(*)``
and an order-independent sum of per-row hashes of the pk, text and dating columns (DuckDB: ``hash()``
in SQL; SQLite: BLAKE2 in Python over a streamed cursor, the text undecoded). Both also hash the column
names and the spec, so a renamed column or a changed spec changes the token. ``read_changed`` is the
watermark mode: the rows with ``updated_at >= watermark`` (``>=``: rows sharing the last watermark are
read again; the caller compares ``row_hash``) plus rows whose ``updated_at`` is NULL, every current pk
(for delete detection) and the new watermark (``max(updated_at)`` as text: DuckDB's own cast to VARCHAR,
SQLite's stored value; the old watermark when the table has none).

Files are opened read-only and closed before each function returns: DuckDB with
``duckdb.connect(path, read_only=True)`` (a DuckDB file locked by a writer is retried for ~1.5 s, then a
one-line error; DuckDB's own extensions are never loaded: a SQLite file given as ``duckdb:///`` is
refused before connecting), SQLite with ``file:<path>?mode=ro``. SQLite text that is not UTF-8 is read
with U+FFFD in place of the bad bytes and a warning on the item. Every failure is a one-line
``SourceError`` naming the dsn, and the table and column where there is one.
"""

from __future__ import annotations

import hashlib
import json
import math
import time as _time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from datetime import time as dtime
from pathlib import Path
from typing import Any

from synthex.core.errors import SourceError
from synthex.core.importers.base import SourceItem, describe, label, repaired, show
from synthex.core.periods import iso, to_timestamp

SCHEMES = ("duckdb", "sqlite")
EPOCH = "1970-01-01T00:00:00Z"  # the date of every row of a table without a dating column
LOCK_RETRIES = (0.05, 0.1, 0.2, 0.4, 0.8)  # seconds slept between attempts on a locked DuckDB file
SQLITE_MAGIC = b"SQLite format 3\x00"
DUCKDB_MAGIC = b"DUCK"  # at byte 8 of a DuckDB file
BATCH = 10_000  # rows fetched at a time when streaming


@dataclass(frozen=True)
class TableSpec:
    dsn: str  # "duckdb:///path/to/file.duckdb" or "sqlite:///path/to/file.sqlite"; relative to base_dir
    table: str
    pk: str  # primary-key column
    updated_at: str | None = None  # watermark column (timestamp, ISO text or epoch numbers)
    created_at: str | None = None  # dating column; default: updated_at; neither: every row dated EPOCH
    text: tuple[str, ...] | None = None  # rendered columns; default: every column but pk/updated_at/created_at

    def __post_init__(self) -> None:
        text = self.text
        if isinstance(text, str):  # text="body" means one column, not four letters
            text = (text,)
        if text is not None:
            text = tuple(text)
            object.__setattr__(self, "text", text)
        for name in ("dsn", "table", "pk"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise SourceError(f"table source: '{name}' is {describe(value)}; expected a non-empty string")
        for name in ("updated_at", "created_at"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise SourceError(f"table source {label(self.dsn)}: '{name}' is {describe(value)}; "
                                  "expected a column name or None")
        if text is not None and not all(isinstance(c, str) and c for c in text):
            raise SourceError(f"table source {label(self.dsn)}: 'text' is {describe(list(text))}; "
                              "expected column names")


def _scheme(spec: TableSpec) -> tuple[str, str]:
    scheme, sep, rest = spec.dsn.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        known = " or ".join(f"{s}:///path" for s in SCHEMES)
        raise SourceError(f"table source {label(spec.dsn)}: unknown database scheme {show(scheme if sep else '')}; "
                          f"expected {known}")
    if not rest.startswith("/") or rest == "/" or rest.startswith("/:memory:"):
        raise SourceError(f"table source {label(spec.dsn)}: malformed dsn; expected {scheme}:///relative/path "
                          f"or {scheme}:////absolute/path (a database file)")
    return scheme.lower(), rest[1:]


def table_path(spec: TableSpec, base_dir: str | Path) -> Path:
    """The database file a spec names (not checked for existence); a SourceError when the dsn is
    malformed or its scheme unknown."""
    _, raw = _scheme(spec)
    path = Path(raw).expanduser()
    return path if path.is_absolute() else Path(base_dir).expanduser() / path


# -- values -------------------------------------------------------------------------------------------------

_BINARY = (bytes, bytearray, memoryview)


def _json_safe(value: Any) -> Any:
    """A column value as JSON (None for binary values inside lists and structs)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, datetime | date | dtime):
        return value.isoformat()
    if isinstance(value, _BINARY):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return str(value)  # Decimal, UUID, timedelta...


def _text(value: Any) -> str:
    """A (non-NULL, non-binary) column value as it appears in the record text."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime | date | dtime):
        return value.isoformat()
    if isinstance(value, dict | list | tuple):
        return json.dumps(_json_safe(value), ensure_ascii=False)
    return str(value)


def _timestamp(value: Any) -> datetime | None:
    """A dating value as UTC, None when blank; ValueError (from ``to_timestamp``) when it is not one."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if not isinstance(value, bool | int | float | str | datetime) and hasattr(value, "as_integer_ratio"):
        value = float(value)  # Decimal
    return to_timestamp(value)


def row_hash(item: SourceItem) -> str:
    """What the per-row hash mode compares: sha256 of the item's content and created_at."""
    data = f"{item.content}\x00{item.created_at}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


# -- connections ----------------------------------------------------------------------------------------------


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


class _Table:
    """An open read-only connection to a spec's table, with its columns resolved."""

    def __init__(self, spec: TableSpec, kind: str, conn: Any, path: Path) -> None:
        self.spec, self.kind, self.conn, self.path = spec, kind, conn, path
        self.where = f"{label(spec.dsn)} table {show(spec.table)}"
        self.columns: list[str] = []
        self.types: list[str] = []
        self.lenient = False  # SQLite text that is not UTF-8 was decoded with surrogate escapes
        self.source = {"type": kind, "table": spec.table, "pk": spec.pk}

    def fail(self, exc: BaseException, what: str = "") -> SourceError:
        return SourceError(f"{self.where}: {what}{_first_line(exc)}")

    def query(self, sql: str, params: Iterable[Any] = ()) -> Any:
        """Execute ``sql``; a database error is a one-line SourceError naming the table."""
        try:
            return self.conn.execute(sql, list(params))
        except self.errors as exc:
            raise self._error(exc) from None

    def rows(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        cursor = self.query(sql, params)
        try:
            return cursor.fetchall()
        except self.errors as exc:
            raise self._error(exc) from None

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        if self.kind == "duckdb":
            import duckdb

            return (duckdb.Error,)
        import sqlite3

        return (sqlite3.Error,)

    def _error(self, exc: BaseException) -> SourceError:
        message = _first_line(exc)
        if "file is not a database" in message:
            return SourceError(f"{label(self.spec.dsn)}: {self.path} is not a SQLite database file")
        return self.fail(exc)

    def fetch(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        """All rows of ``sql``. SQLite text that is not UTF-8 is decoded with surrogate escapes (made
        U+FFFD with a warning by ``repaired``) on a second attempt."""
        try:
            return self.rows(sql, params)
        except SourceError as exc:
            if self.kind != "sqlite" or "decode to UTF-8" not in str(exc):
                raise
        self.conn.text_factory = lambda raw: raw.decode("utf-8", "surrogateescape")
        self.lenient = True
        try:
            return self.rows(sql, params)
        finally:
            self.conn.text_factory = str

    def stream(self, sql: str, params: Iterable[Any] = ()) -> Iterator[tuple]:
        cursor = self.query(sql, params)
        while True:
            try:
                rows = cursor.fetchmany(BATCH)
            except self.errors as exc:
                raise self._error(exc) from None
            if not rows:
                return
            yield from rows

    def tables(self) -> list[str]:
        sql = ("SELECT table_name FROM information_schema.tables ORDER BY 1" if self.kind == "duckdb"
               else "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY 1")
        return [row[0] for row in self.rows(sql)]

    def load_columns(self) -> None:
        try:
            cursor = self.conn.execute(f"SELECT * FROM {_quote(self.spec.table)} LIMIT 0")
        except self.errors as exc:
            message = _first_line(exc)
            if "file is not a database" in message:
                raise self._error(exc) from None
            tables = self.tables()
            if self.spec.table not in tables and not any(t.lower() == self.spec.table.lower() for t in tables):
                raise SourceError(f"{label(self.spec.dsn)}: no table {show(self.spec.table)} "
                                  f"(tables: {_names(tables) or 'none'})") from None
            raise self.fail(exc) from None
        self.columns = [d[0] for d in cursor.description]
        self.types = [str(d[1]) for d in cursor.description]

    def column(self, name: str, role: str) -> str:
        """The table's spelling of column ``name``; a SourceError listing the columns when it has none."""
        if name in self.columns:
            return name
        folded = [c for c in self.columns if c.lower() == name.lower()]
        if len(folded) == 1:
            return folded[0]
        raise SourceError(f"{self.where}: no column {show(name)} (the {role} column; "
                          f"columns: {_names(self.columns)})")

    def type_of(self, column: str) -> str:
        return self.types[self.columns.index(column)]


def _names(names: list[str], limit: int = 30) -> str:
    shown = ", ".join(label(n) for n in names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def _connect_duckdb(spec: TableSpec, path: Path) -> Any:
    import duckdb

    for attempt, pause in enumerate((*LOCK_RETRIES, None)):
        try:
            return duckdb.connect(str(path), read_only=True)
        except duckdb.Error as exc:
            message = _first_line(exc)
            locked = "conflicting lock" in message.lower() or "could not set lock" in message.lower()
            if locked and pause is not None:
                _time.sleep(pause)
                continue
            if locked:
                raise SourceError(f"{label(spec.dsn)}: {path} is locked by another process "
                                  f"({attempt + 1} attempts): {message}") from None
            if "different configuration" in message:
                raise SourceError(f"{label(spec.dsn)}: {path} is already open read-write in this process; "
                                  f"close that connection first ({message})") from None
            raise SourceError(f"{label(spec.dsn)}: cannot open {path}: {message}") from None
    raise AssertionError("unreachable")


def _connect_sqlite(path: Path) -> Any:
    import sqlite3
    from urllib.parse import quote

    try:
        return sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error as exc:  # pragma: no cover - the file exists and is readable
        raise SourceError(f"{path}: cannot open: {_first_line(exc)}") from None


@contextmanager
def _open(spec: TableSpec, base_dir: str | Path) -> Iterator[_Table]:
    kind, _ = _scheme(spec)
    path = table_path(spec, base_dir)
    try:
        with path.open("rb") as handle:
            head = handle.read(16)
    except IsADirectoryError:
        raise SourceError(f"{label(spec.dsn)}: {path} is a folder, not a database file") from None
    except FileNotFoundError:
        raise SourceError(f"{label(spec.dsn)}: no such file {path}") from None
    except OSError as exc:
        raise SourceError(f"{label(spec.dsn)}: cannot read {path}: {exc.strerror or exc}") from None
    if kind == "duckdb" and head[8:12] != DUCKDB_MAGIC:
        hint = "; it is a SQLite file: use sqlite:///" if head.startswith(SQLITE_MAGIC) else ""
        raise SourceError(f"{label(spec.dsn)}: {path} is not a DuckDB database file{hint}")
    if kind == "sqlite" and head[8:12] == DUCKDB_MAGIC:
        raise SourceError(f"{label(spec.dsn)}: {path} is not a SQLite database file; it is a DuckDB file: "
                          "use duckdb:///")
    conn = _connect_duckdb(spec, path) if kind == "duckdb" else _connect_sqlite(path)
    try:
        table = _Table(spec, kind, conn, path)
        table.load_columns()
        yield table
    finally:
        conn.close()


# -- rows to items -------------------------------------------------------------------------------------------


@dataclass
class _Layout:
    """Where the pk, dating and text columns are in a row of ``SELECT *``."""

    pk: int
    dating: list[tuple[str, int]]  # (column, index): created_at, then updated_at
    text: list[tuple[str, int]]  # ("column: ", index)


def _layout(table: _Table) -> _Layout:
    spec = table.spec
    index = {name: i for i, name in enumerate(table.columns)}
    pk = table.column(spec.pk, "primary-key")
    dating: list[str] = []
    if spec.created_at:
        dating.append(table.column(spec.created_at, "created_at"))
    if spec.updated_at:
        updated = table.column(spec.updated_at, "updated_at")
        if updated not in dating:
            dating.append(updated)
    if spec.text is not None:
        text = [table.column(name, "text") for name in spec.text]
    else:
        text = [c for c in table.columns if c != pk and c not in dating]
    return _Layout(index[pk], [(c, index[c]) for c in dating], [(f"{c}: ", index[c]) for c in text])


def _key(table: _Table, value: Any, seen: set[str]) -> str:
    if value is None:
        raise SourceError(f"{table.where}: a row has NULL in the primary-key column {show(table.spec.pk)}")
    key = str(value)
    if key in seen:
        raise SourceError(f"{table.where}: two rows share the primary key {show(table.spec.pk)} = {show(key)}")
    seen.add(key)
    return key


def _where(table: _Table, key: str) -> str:
    return f"{table.where} row {label(table.spec.pk)}={label(key)}"


_PLAIN = (str, int, type(None))  # JSON as they are (exact types: a bool is an int but stays a bool anyway)


def _created(table: _Table, layout: _Layout, row: tuple, key: str) -> str | None:
    """``created_at`` of a row: the first dating column that is not null or blank; None when none is."""
    for column, i in layout.dating:
        value = row[i]
        if value is None:
            continue
        parsed = value
        if type(value) is str and len(value) >= 10 and value[4] == "-":  # ISO text (fast path; not a number)
            try:
                parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                pass  # to_timestamp says why
        if type(parsed) is datetime and parsed.tzinfo is None and 1000 <= parsed.year <= 9999:
            return parsed.isoformat(timespec="seconds") + "Z"  # naive means UTC (a TIMESTAMP column)
        try:
            ts = _timestamp(value)
        except ValueError as exc:
            raise SourceError(f"{_where(table, key)}: {show(column)} is {describe(value)}, "
                              f"not a timestamp ({exc})") from None
        if ts is not None:
            return iso(ts)
    return None


def _item(table: _Table, layout: _Layout, row: tuple, key: str) -> SourceItem:
    warnings: list[str] = []
    created = _created(table, layout, row, key)
    if created is None:
        created = EPOCH
        if layout.dating:
            nulls = " and ".join(show(c) for c, _ in layout.dating)
            verb = "is" if len(layout.dating) == 1 else "are"
            warnings.append(f"{_where(table, key)}: {nulls} {verb} null; dated {EPOCH}")
    lines = []
    for prefix, i in layout.text:
        value = row[i]
        if type(value) is str:
            lines.append(prefix + value)
        elif value is None:
            continue
        elif isinstance(value, _BINARY):
            warnings.append(f"{_where(table, key)}: column {show(prefix[:-2])} is binary ({len(value)} bytes); "
                            "left out of the text")
        else:
            lines.append(prefix + _text(value))
    if not lines:
        names = _names([prefix[:-2] for prefix, _ in layout.text]) or "(none)"
        warnings.append(f"{_where(table, key)}: no text in the columns {names}")
    values: dict[str, Any] = {}
    for column, value in zip(table.columns, row, strict=True):
        if type(value) in _PLAIN:
            values[column] = value
        elif not isinstance(value, _BINARY):
            values[column] = _json_safe(value)
    item = SourceItem(
        key=key,
        content="\n".join(lines),
        created_at=created,
        metadata={"time": {"created_at": created}, "source": dict(table.source), "row": values},
        warnings=warnings,
    )
    return repaired(item, _where(table, key)) if table.lenient else item


def _items(table: _Table, layout: _Layout, rows: Iterable[tuple], seen: set[str] | None = None) -> list[SourceItem]:
    seen = set() if seen is None else seen
    return [_item(table, layout, row, _key(table, row[layout.pk], seen)) for row in rows]


def _select(table: _Table, where: str = "") -> str:
    return f"SELECT * FROM {_quote(table.spec.table)}{where} ORDER BY {_quote(table.column(table.spec.pk, 'pk'))}"


# -- the API ----------------------------------------------------------------------------------------------------


def read_items(spec: TableSpec, base_dir: str | Path) -> list[SourceItem]:
    """Every row of the table as an item, ordered by pk (see the module docstring)."""
    with _open(spec, base_dir) as table:
        layout = _layout(table)
        return _items(table, layout, table.fetch(_select(table)))


def _schema_digest(table: _Table, layout: _Layout) -> str:
    spec = table.spec
    parts = [table.columns, table.types, spec.table, spec.pk, spec.updated_at, spec.created_at,
             [p[:-2] for p, _ in layout.text]]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def read_token(spec: TableSpec, base_dir: str | Path) -> str:
    """A cheap string that changes when the table's rows change (see the module docstring)."""
    with _open(spec, base_dir) as table:
        layout = _layout(table)
        schema = _schema_digest(table, layout)
        name = _quote(spec.table)
        if spec.updated_at:
            updated = _quote(table.column(spec.updated_at, "updated_at"))
            cast = f"CAST(max({updated}) AS VARCHAR)" if table.kind == "duckdb" else f"max({updated})"
            count, newest = table.rows(f"SELECT count(*), {cast} FROM {name}")[0]
            return f"w:{count}:{newest}:{schema}"
        columns = [table.columns[layout.pk], *(c for c, _ in layout.dating), *(p[:-2] for p, _ in layout.text)]
        quoted = ", ".join(_quote(c) for c in dict.fromkeys(columns))
        if table.kind == "duckdb":
            sql = f"SELECT count(*), sum(h::HUGEINT), bit_xor(h) FROM (SELECT hash({quoted}) AS h FROM {name})"
            count, total, xor = table.rows(sql)[0]
            return f"h:{count}:{total or 0}:{xor or 0}:{schema}"
        return f"h:{_sqlite_hash(table, f'SELECT {quoted} FROM {name}')}:{schema}"


def _sqlite_hash(table: _Table, sql: str) -> str:
    """count and sum (mod 2**128) of per-row BLAKE2 hashes, the text left undecoded (bytes)."""
    table.conn.text_factory = bytes
    try:
        count, total = 0, 0
        blake = hashlib.blake2b
        for row in table.stream(sql):
            total += int.from_bytes(blake(repr(row).encode(), digest_size=16).digest(), "big")
            count += 1
        return f"{count}:{total % (1 << 128):x}"
    finally:
        table.conn.text_factory = str


def _sqlite_watermark(watermark: str, newest_type: str | None) -> Any:
    """The stored watermark with the type of the column's values (SQLite compares 5 < '4' otherwise)."""
    cast: Callable[[str], Any] | None = {"integer": int, "real": float}.get(newest_type or "")
    if cast is None:
        return watermark
    try:
        return cast(watermark)
    except ValueError:
        try:
            return float(watermark)
        except ValueError:
            return watermark


def read_changed(
    spec: TableSpec, base_dir: str | Path, watermark: str | None
) -> tuple[list[SourceItem], list[str], str | None]:
    """Watermark mode: (items of the rows with ``updated_at >= watermark`` or NULL ``updated_at``, all rows
    when ``watermark`` is None; every current pk; the new watermark, or the old one when the table has no
    ``updated_at`` value)."""
    if not spec.updated_at:
        raise SourceError(f"{label(spec.dsn)} table {show(spec.table)}: reading changes needs a watermark column "
                          "(updated_at); without one, compare read_token and row_hash")
    with _open(spec, base_dir) as table:
        layout = _layout(table)
        name, pk = _quote(spec.table), _quote(table.columns[layout.pk])
        column = table.column(spec.updated_at, "updated_at")
        updated = _quote(column)
        if table.kind == "sqlite":
            table.query("BEGIN")  # one snapshot for the three queries (a writer may commit in between)
            newest, newest_type = table.rows(f"SELECT max({updated}), typeof(max({updated})) FROM {name}")[0]
        else:
            newest = table.rows(f"SELECT CAST(max({updated}) AS VARCHAR) FROM {name}")[0][0]
        seen: set[str] = set()
        pks = [_key(table, row[0], seen) for row in table.stream(f"SELECT {pk} FROM {name} ORDER BY {pk}")]
        if watermark is None:
            rows = table.fetch(_select(table))
        elif table.kind == "duckdb":
            condition = f" WHERE {updated} >= CAST(? AS {table.type_of(column)}) OR {updated} IS NULL"
            rows = table.fetch(_select(table, condition), [watermark])
        else:
            condition = f" WHERE {updated} >= ? OR {updated} IS NULL"
            rows = table.fetch(_select(table, condition), [_sqlite_watermark(watermark, newest_type)])
        items = _items(table, layout, rows)
        return items, pks, (str(newest) if newest is not None else watermark)
