"""Mem0 (mem0ai): what ``Memory.get_all()`` returns, and its ``history.db``.

- ``mem0``: a JSON file of ``get_all`` output: the OSS ``{"results": [...]}``, the platform's paged
  ``{"count", "next", "previous", "results": [...]}``, or a bare list of memories. Each memory is an
  item of kind ``memory``: its text (``memory``), its id, both times (``created_at``, ``updated_at``), its
  scope (``user_id``, ``agent_id``, ``run_id``, ``actor_id``, ``app_id``, ``role``), its ``metadata``
  (``custom``), ``hash``, ``categories`` and the rest of the raw object in ``source.raw``.
- ``mem0-history``: Mem0's SQLite ``history.db`` (the ``history`` table Mem0's ``SQLiteManager``
  creates: ADD / UPDATE / DELETE events with the old and new text, ``actor_id``, ``role``, ``is_deleted``,
  both times; and its ``messages`` table), the only copy of deleted memories. Each event is an item of
  kind ``event``, history (``source.current`` False), ``source.about`` naming its memory; each message an
  item of kind ``message``; and each memory the events leave standing (last event not a DELETE) an item
  of kind ``history-memory`` (the current text, for a store whose ``get_all`` output is not at hand).

The ``memories`` view (``migrated``, kinds ``memory`` then ``history-memory``: one record per memory id,
the ``get_all`` one when both are there) is searched; its records' sources are the memory's events.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from synthex.core.errors import SourceError
from synthex.core.importers.base import (
    Intake,
    SourceItem,
    describe,
    expect_object,
    get_time,
    read_json,
)
from synthex.core.importers.migrate.items import (
    id_of,
    item_key,
    migration_item,
    scope_of,
    text_of,
    times,
    where_of,
)
from synthex.core.importers.migrate.registry import MigrationFormat, Sniff, unwrap_json_string
from synthex.core.importers.migrate.sqlite_files import holds_table_columns, read_sqlite
from synthex.core.periods import iso

if TYPE_CHECKING:
    import sqlite3

SYSTEM = "mem0"
SCOPE = ("user_id", "agent_id", "run_id", "actor_id", "app_id", "org_id", "project_id", "role")
MEMORY_TIMES = ("created_at", "updated_at", "expiration_date")
EVENTS = ("ADD", "UPDATE", "DELETE", "NONE")
HISTORY_COLUMNS = ("id", "memory_id", "old_memory", "new_memory", "event", "created_at", "updated_at")


def _memories(data: Any, path: Path) -> list[Any]:
    if isinstance(data, dict) and "results" in data:
        results = data["results"]
        if not isinstance(results, list):
            raise SourceError(f"{path}: 'results' is {describe(results)}; expected a list of memories")
        return results
    if isinstance(data, list):
        return data
    raise SourceError(f"{path}: expected Mem0 get_all() output ({{'results': [...]}} or a list), found "
                      f"{describe(data)}")


def parse_get_all(path: Path, intake: Intake | None = None) -> list[SourceItem]:
    data = unwrap_json_string(read_json(path, (intake or Intake()).limits.source_file_bytes))
    items = []
    for index, memory in enumerate(_memories(data, path)):
        where = where_of(path, "memory", index, memory.get("id") if isinstance(memory, dict) else None)
        memory = expect_object(memory, where)
        original = id_of(memory, "id", where)
        axes = times(memory, MEMORY_TIMES, where)
        created = axes.get("created_at") or axes.get("updated_at")
        if created is None:
            raise SourceError(f"{where}: no 'created_at' or 'updated_at': nothing dates the memory")
        custom = memory.get("metadata")
        if custom is not None and not isinstance(custom, dict):
            raise SourceError(f"{where}: 'metadata' is {describe(custom)}; expected an object")
        extra = {name: memory[name] for name in ("hash", "categories", "immutable") if memory.get(name) is not None}
        items.append(migration_item(
            path=path, fmt="mem0", system=SYSTEM, kind="memory", original_id=original,
            content=text_of(memory, "memory", where), created_at=created, time_axes=axes,
            scope=scope_of(memory, SCOPE, where), raw=memory, custom=custom, where=where, extra=extra))
    return items


def _history_rows(db: sqlite3.Connection, path: Path, table: str) -> list[dict[str, Any]]:
    cursor = db.execute(f"SELECT * FROM {table} ORDER BY rowid")  # noqa: S608 - a fixed table name
    names = [c[0] for c in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _history_tables(path: Path, db: sqlite3.Connection) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    tables = _tables(db)
    if "history" not in tables:
        raise SourceError(f"{path}: a SQLite file without Mem0's 'history' table; not a Mem0 history.db")
    return _history_rows(db, path, "history"), _history_rows(db, path, "messages") if "messages" in tables else []


def parse_history(path: Path, intake: Intake | None = None) -> list[SourceItem]:
    events, messages = read_sqlite(path, intake, lambda db: _history_tables(path, db))
    items: list[SourceItem] = []
    standing: dict[str, dict[str, Any]] = {}  # memory id -> its text, first and last times, its events
    for index, row in enumerate(events):
        where = where_of(path, "history row", index, row.get("id"))
        for column in HISTORY_COLUMNS:
            if column not in row:
                raise SourceError(f"{where}: the history table has no '{column}' column")
        event = row.get("event")
        if event not in EVENTS:
            raise SourceError(f"{where}: 'event' is {describe(event)}; expected one of {', '.join(EVENTS)}")
        original, memory_id = id_of(row, "id", where), id_of(row, "memory_id", where)
        old, new = text_of(row, "old_memory", where, False), text_of(row, "new_memory", where, False)
        axes = times(row, ("created_at", "updated_at"), where)
        # An event happened at its updated_at (Mem0 keeps the memory's creation in created_at).
        happened = axes.get("updated_at") or axes.get("created_at")
        if happened is None:
            raise SourceError(f"{where}: no 'created_at' or 'updated_at': nothing dates the event")
        about = item_key("memory", memory_id)
        items.append(migration_item(
            path=path, fmt="mem0-history", system=SYSTEM, kind="event", original_id=original,
            content=f"{event}: {old + ' -> ' if old and new else ''}{new or old}", created_at=happened,
            time_axes=axes, scope=scope_of(row, ("actor_id", "role"), where), raw=row, current=False, where=where,
            extra={"about": about, "event": event, "memory_id": memory_id, "old_memory": old or None,
                   "new_memory": new or None, "is_deleted": bool(row.get("is_deleted"))}))
        state = standing.setdefault(memory_id, {"first": axes.get("created_at") or happened, "events": []})
        state["events"].append(item_key("event", original))
        state["last"], state["event"], state["text"] = happened, event, new or state.get("text") or old
        state["scope"] = scope_of(row, ("actor_id", "role"), where)
    for memory_id, state in standing.items():
        if state["event"] == "DELETE" or not state.get("text"):
            continue
        items.append(migration_item(
            path=path, fmt="mem0-history", system=SYSTEM, kind="history-memory", original_id=memory_id,
            content=state["text"], created_at=state["first"], where=f"{path}: memory {memory_id}",
            time_axes={"updated_at": state["last"]}, scope=state["scope"], derived_from=state["events"],
            raw={"memory_id": memory_id, "events": len(state["events"])}, extra={"about": item_key("memory", memory_id)}))
    for index, row in enumerate(messages):
        where = where_of(path, "messages row", index, row.get("id"))
        created = get_time(row, "created_at", where)
        if created is None:
            raise SourceError(f"{where}: missing required field 'created_at'")
        session = text_of(row, "session_scope", where, False)
        items.append(migration_item(
            path=path, fmt="mem0-history", system=SYSTEM, kind="message", original_id=id_of(row, "id", where),
            content=text_of(row, "content", where), created_at=iso(created), where=where, raw=row,
            scope={"session_scope": session} if session else {},
            chat={"conversation_id": session or "mem0", "author": text_of(row, "role", where, False) or "user",
                  "message_id": str(row["id"])}))
    return items


def _is_get_all(found: Sniff) -> bool:
    data = found.json() if found.head.lstrip()[:1] in (b"{", b"[", b'"') else None
    memories = data.get("results") if isinstance(data, dict) else data if isinstance(data, list) else None
    return (isinstance(memories, list) and bool(memories) and isinstance(memories[0], dict)
            and "memory" in memories[0] and "id" in memories[0])


def _is_history_db(found: Sniff) -> bool:
    return found.is_sqlite and holds_table_columns(found.path, "history", {"memory_id", "event", "old_memory",
                                                                           "new_memory"})


def register(registry: Any) -> None:
    memories = ("memories", ("memory", "history-memory"), True)
    registry.register(MigrationFormat(
        name="mem0", system=SYSTEM, description="Mem0 Memory.get_all() output (OSS or platform, paged)",
        sniff=_is_get_all, parse=parse_get_all, step="mem0", views=(memories,), turn_kind="memory"))
    registry.register(MigrationFormat(
        name="mem0-history", system=SYSTEM, description="Mem0's history.db (ADD/UPDATE/DELETE events, messages)",
        sniff=_is_history_db, parse=parse_history, step="mem0_history",
        views=(memories, ("messages", ("message",), True)), turn_kind="message"))
