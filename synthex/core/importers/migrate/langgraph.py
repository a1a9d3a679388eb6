"""LangGraph / LangMem long-term memory: store items, as JSON or in the SQLite store's ``store`` table.

- ``langgraph-store``: a JSON list of ``Item.dict()`` (langgraph ``langgraph/store/base``: ``namespace``,
  ``key``, ``value``, ``created_at``, ``updated_at``; a search result's ``score`` too), or the LangGraph
  server's ``{"items": [...]}`` (``client.store.search_items``).
- ``langgraph-sqlite``: the SQLite file of ``langgraph.store.sqlite.SqliteStore`` (langgraph-checkpoint-
  sqlite): its ``store`` table (``prefix`` the namespace joined with dots, ``key``, ``value`` JSON text,
  ``created_at``, ``updated_at``, and after its migrations ``expires_at`` and ``ttl_minutes``). The
  checkpointer's own tables in the same file (``checkpoints``, ``writes``) are not read.
- ``langgraph-jsonl``: the same items as JSONL, one ``Item.dict()`` a line.
- ``langgraph-postgres-csv``: the ``store`` table of ``langgraph.store.postgres.PostgresStore``
  (langgraph-checkpoint-postgres: the same columns, ``value`` JSONB, times ``timestamptz``) as
  ``COPY store TO STDOUT WITH (FORMAT csv, HEADER)`` writes it (``psql -c "\\copy store TO 'store.csv'
  WITH (FORMAT csv, HEADER)"``): a file, so the import needs no database driver and no access to the server.

Each item is one item of kind ``item``: its original id the JSON list ``[*namespace, key]`` (a namespace
and a key together name an item; either may hold any character), ``scope.namespace`` the namespace, both
times (and ``expires_at``), the value in ``source.raw`` (with every other field of the row or object).
Its text is the value's ``content`` when that is text (LangMem's ``manage_memory`` tool writes
``{"content": text}``), the ``content`` of a LangMem memory manager's ``{"kind", "content": {...}}``
when that is text, else the value as JSON. The store keeps no history: an item deleted since the last
import leaves the searched items, and an updated one is its new value.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synthex.core.errors import SourceError
from synthex.core.importers.base import (
    Intake,
    SourceItem,
    describe,
    expect_object,
    label,
    not_text,
    read_capped,
    read_json,
)
from synthex.core.importers.jsonl import jsonl_rows
from synthex.core.importers.migrate.items import migration_item, times
from synthex.core.importers.migrate.registry import MigrationFormat, Sniff, unwrap_json_string
from synthex.core.importers.migrate.sqlite_files import holds_table_columns, read_sqlite

if TYPE_CHECKING:
    import sqlite3

SYSTEM = "langgraph"
FORMAT_JSON, FORMAT_SQLITE = "langgraph-store", "langgraph-sqlite"
FORMAT_JSONL, FORMAT_POSTGRES_CSV = "langgraph-jsonl", "langgraph-postgres-csv"
ITEM_FIELDS = ("namespace", "key", "value")
TIMES = ("created_at", "updated_at", "expires_at")
STORE_COLUMNS = ("prefix", "key", "value", "created_at", "updated_at")


def item_text(value: dict[str, Any]) -> str:
    content = value.get("content")
    if isinstance(content, dict) and isinstance(content.get("content"), str):
        content = content["content"]  # a LangMem memory manager's {"kind": "Memory", "content": {...}}
    if isinstance(content, str) and content:
        return content
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def store_item(path: Path, fmt: str, namespace: Any, key: Any, value: Any, row: dict[str, Any],
               where: str) -> SourceItem:
    """One store item (``row``: the whole object or table row, kept as ``source.raw``)."""
    if not isinstance(namespace, list) or not all(isinstance(n, str) for n in namespace):
        raise SourceError(f"{where}: 'namespace' is {describe(namespace)}; expected a list of strings")
    if not isinstance(key, str) or not key:
        raise SourceError(f"{where}: 'key' is {describe(key)}; expected a non-empty string")
    if not isinstance(value, dict):
        raise SourceError(f"{where}: 'value' is {describe(value)}; expected an object")
    axes = times(row, TIMES, where)
    created = axes.get("created_at") or axes.get("updated_at")
    if created is None:
        raise SourceError(f"{where}: no 'created_at' or 'updated_at': nothing dates the item")
    return migration_item(
        path=path, fmt=fmt, system=SYSTEM, kind="item", original_id=json.dumps([*namespace, key], ensure_ascii=False, separators=(",", ":")),
        content=item_text(value), created_at=created, time_axes=axes, scope={"namespace": list(namespace)},
        raw=row, where=where, extra={"namespace": list(namespace), "store_key": key})


def _where(at: str, namespace: Any, key: Any) -> str:
    """``at`` (file and item) with the item's namespace and key, as far as they are readable."""
    shown = f"{'.'.join(namespace) if isinstance(namespace, list) and all(isinstance(n, str) for n in namespace) else '?'}"
    return f"{at} ({label(shown)} / {label(key) if isinstance(key, str) else 'no key'})"


def _items_of(data: Any, path: Path) -> list[Any]:
    if isinstance(data, dict) and "items" in data:
        data = data["items"]
    if not isinstance(data, list):
        raise SourceError(f"{path}: expected LangGraph store items (a JSON list of items or {{'items': [...]}}), found "
                          f"{describe(data)}")
    return data


def parse_json(path: Path, intake: Intake | None = None) -> list[SourceItem]:
    data = unwrap_json_string(read_json(path, (intake or Intake()).limits.source_file_bytes))
    out = []
    for index, obj in enumerate(_items_of(data, path)):
        where = _where(f"{path}: item #{index}", obj.get("namespace") if isinstance(obj, dict) else None,
                       obj.get("key") if isinstance(obj, dict) else None)
        obj = expect_object(obj, where)
        for name in ITEM_FIELDS:
            if name not in obj:
                raise SourceError(f"{where}: missing required field '{name}'")
        out.append(store_item(path, FORMAT_JSON, obj["namespace"], obj["key"], obj["value"], obj, where))
    return out


def _store_rows(path: Path, db: sqlite3.Connection) -> list[dict[str, Any]]:
    columns = [r[1] for r in db.execute("PRAGMA table_info(store)")]
    missing = [c for c in STORE_COLUMNS if c not in columns]
    if missing:
        raise SourceError(f"{path}: no LangGraph 'store' table with a '{missing[0]}' column; not a SqliteStore file")
    cursor = db.execute("SELECT * FROM store ORDER BY prefix, key")
    names = [c[0] for c in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def table_items(path: Path, fmt: str, rows: list[dict[str, Any]]) -> list[SourceItem]:
    """The items of the ``store`` table's rows (SQLite's, or Postgres's as ``COPY`` wrote them)."""
    out = []
    for index, row in enumerate(rows):
        prefix, key = row.get("prefix"), row.get("key")
        namespace = prefix.split(".") if isinstance(prefix, str) else prefix
        where = _where(f"{path}: store row #{index}", namespace, key)
        if not isinstance(prefix, str):
            raise SourceError(f"{where}: 'prefix' is {describe(prefix)}; expected the namespace as text")
        text = row.get("value")
        try:
            value = json.loads(text) if isinstance(text, (str, bytes)) else text
        except (ValueError, UnicodeDecodeError):
            raise SourceError(f"{where}: 'value' is not JSON") from None
        raw = {**row, "value": value}  # the JSON text decoded: what the store's get returns as the value
        out.append(store_item(path, fmt, namespace, key, value, raw, where))
    return out


def parse_sqlite(path: Path, intake: Intake | None = None) -> list[SourceItem]:
    return table_items(path, FORMAT_SQLITE, read_sqlite(path, intake, lambda db: _store_rows(path, db)))


def parse_jsonl(path: Path, intake: Intake | None = None) -> list[SourceItem]:
    rows, _ = jsonl_rows(path, (intake or Intake()).limits)
    out = []
    for lineno, obj in rows:
        where = _where(f"{path}:{lineno}", obj.get("namespace"), obj.get("key"))
        for name in ITEM_FIELDS:
            if name not in obj:
                raise SourceError(f"{where}: missing required field '{name}'")
        out.append(store_item(path, FORMAT_JSONL, obj["namespace"], obj["key"], obj["value"], obj, where))
    return out


def parse_postgres_csv(path: Path, intake: Intake | None = None) -> list[SourceItem]:
    """``COPY store TO ... WITH (FORMAT csv, HEADER)`` (``psql``'s ``\\copy``): a NULL is an empty field."""
    limits = (intake or Intake()).limits
    data, _ = read_capped(path, limits.source_file_bytes, limits=limits)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise not_text(path, data[:8], exc) from exc
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
        columns = reader.fieldnames or []
        missing = [c for c in STORE_COLUMNS if c not in columns]
        if missing:
            raise SourceError(f"{path}: no '{missing[0]}' column; expected the CSV of LangGraph's Postgres 'store' "
                              "table with its header (COPY store TO STDOUT WITH (FORMAT csv, HEADER))")
        rows = []
        for row in reader:
            if None in row or None in row.values():
                raise SourceError(f"{path}: line {reader.line_num}: {len(columns)} columns expected")
            rows.append({k: (v if v != "" else None) for k, v in row.items()})
    except csv.Error as exc:
        raise SourceError(f"{path}: line {reader.line_num}: not CSV ({exc})") from None
    return table_items(path, FORMAT_POSTGRES_CSV, rows)


def _is_store_json(found: Sniff) -> bool:
    if found.head.lstrip()[:1] not in (b"{", b"[", b'"'):
        return False
    data = found.json()
    items = data.get("items") if isinstance(data, dict) else data
    return (isinstance(items, list) and bool(items) and isinstance(items[0], dict)
            and all(k in items[0] for k in ITEM_FIELDS))


def _is_store_db(found: Sniff) -> bool:
    return found.is_sqlite and holds_table_columns(found.path, "store", set(STORE_COLUMNS))


def _is_store_jsonl(found: Sniff) -> bool:
    line = found.first_line()
    return isinstance(line, dict) and all(k in line for k in ITEM_FIELDS) and isinstance(line.get("namespace"), list)


def _is_store_csv(found: Sniff) -> bool:
    header = found.head.split(b"\n", 1)[0].decode("utf-8-sig", "replace").strip().split(",")
    return all(c in header for c in STORE_COLUMNS)


def register(registry: Any) -> None:
    items = ("items", ("item",), True)
    registry.register(MigrationFormat(
        name=FORMAT_JSON, system=SYSTEM, description="LangGraph / LangMem store items as JSON (Item.dict(), {'items'})",
        sniff=_is_store_json, parse=parse_json, step="langgraph_store", views=(items,), turn_kind="item"))
    registry.register(MigrationFormat(
        name=FORMAT_SQLITE, system=SYSTEM, description="LangGraph SqliteStore's 'store' table (SQLite)",
        sniff=_is_store_db, parse=parse_sqlite, step="langgraph_store", views=(items,), turn_kind="item"))
    registry.register(MigrationFormat(
        name=FORMAT_JSONL, system=SYSTEM, description="LangGraph / LangMem store items as JSONL (one Item.dict() a line)",
        sniff=_is_store_jsonl, parse=parse_jsonl, step="langgraph_store", views=(items,), turn_kind="item"))
    registry.register(MigrationFormat(
        name=FORMAT_POSTGRES_CSV, system=SYSTEM,
        description="LangGraph PostgresStore's 'store' table as COPY ... (FORMAT csv, HEADER) writes it",
        sniff=_is_store_csv, parse=parse_postgres_csv, step="langgraph_store", views=(items,), turn_kind="item"))
