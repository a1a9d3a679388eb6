"""The MCP reference memory server's ``memory.jsonl`` (modelcontextprotocol/servers, ``src/memory``): one
JSON object a line, ``{"type": "entity", "name", "entityType", "observations": [..]}`` or ``{"type":
"relation", "from", "to", "relationType"}``.

Read: each entity is an item of kind ``entity`` (its name is its id; the text is the name, the type and
one observation a line), each relation one of kind ``relation`` derived from its two entities. The file
has no dates: items are dated by the file's mtime. Written (``memory_lines``, ``synthex export --format
mcp-memory``): the entities and relations an import brought in, as they were, then one entity per key
aggregate record (name: its key; type: its ``by``; observations: its members' texts) and a
``co_occurs_with`` relation between two aggregates that share a member record (lineage gives it).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from synthex.core.errors import SourceError
from synthex.core.importers.base import Intake, SourceItem, describe
from synthex.core.importers.jsonl import jsonl_rows
from synthex.core.importers.migrate.items import item_key, migration_item, text_of
from synthex.core.periods import iso
from synthex.core.record import Record

FORMAT_NAME = "mcp-memory"
SYSTEM = "mcp-memory"
CO_OCCURS = "co_occurs_with"


def _observations(row: dict[str, Any], where: str) -> list[str]:
    value = row.get("observations")
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(o, str) for o in value):
        raise SourceError(f"{where}: 'observations' is {describe(value)}; expected a list of strings")
    return value


def entity_text(name: str, entity_type: str, observations: list[str]) -> str:
    return "\n".join([f"{name} ({entity_type})" if entity_type else name, *(f"- {o}" for o in observations)])


def parse(path: Path, intake: Intake | None = None) -> list[SourceItem]:
    rows, st = jsonl_rows(path, (intake or Intake()).limits)
    items: list[SourceItem] = []
    dated = iso(datetime.fromtimestamp(st.st_mtime, tz=UTC))
    for lineno, row in rows:
        where = f"{path}:{lineno}"
        kind = row.get("type")
        if kind == "entity":
            name = text_of(row, "name", where)
            entity_type = text_of(row, "entityType", where, required=False)
            observations = _observations(row, where)
            items.append(migration_item(
                path=path, fmt=FORMAT_NAME, system=SYSTEM, kind="entity", original_id=name,
                content=entity_text(name, entity_type, observations), created_at=dated, where=where, raw=row,
                chat={"title": name}, extra={"line": lineno}))
        elif kind == "relation":
            source, target = text_of(row, "from", where), text_of(row, "to", where)
            relation = text_of(row, "relationType", where)
            items.append(migration_item(
                path=path, fmt=FORMAT_NAME, system=SYSTEM, kind="relation",
                original_id=f"{source}|{relation}|{target}", content=f"{source} {relation} {target}",
                created_at=dated, where=where, raw=row, extra={"line": lineno},
                derived_from=[item_key("entity", source), item_key("entity", target)]))
        else:
            raise SourceError(f"{where}: 'type' is {describe(kind)}; expected 'entity' or 'relation'")
    return items


def sniff(found: Any) -> bool:
    line = found.first_line()
    return isinstance(line, dict) and line.get("type") in ("entity", "relation") and (
        "entityType" in line or "relationType" in line)


def memory_lines(records: list[Record]) -> tuple[list[str], int, int]:
    """(lines, entities, relations) of the MCP memory file for ``records`` (see the module docstring)."""
    entities: dict[str, dict[str, Any]] = {}
    relations: dict[tuple[str, str, str], dict[str, Any]] = {}
    imported = sorted((r for r in records if r.meta("source.type") == FORMAT_NAME),
                      key=lambda r: (str(r.meta("source.path")), r.meta("source.line") or 0))
    for rec in imported:  # what an import of such a file brought in, as it was and in its order
        raw = rec.meta("source.raw")
        if rec.meta("source.type") != FORMAT_NAME or not isinstance(raw, dict):
            continue
        if raw.get("type") == "entity":
            entities.setdefault(str(raw.get("name")), raw)
        elif raw.get("type") == "relation":
            relations.setdefault((str(raw.get("from")), str(raw.get("relationType")), str(raw.get("to"))), raw)
    by_id = {r.id: r for r in records}
    members: dict[str, list[str]] = {}
    for rec in records:  # key aggregates: an entity each, its members' texts its observations
        key = rec.meta("group.key")
        if not isinstance(key, str) or key in entities:
            continue
        observations = [by_id[s].content for s in rec.source_ids if s in by_id]
        entities[key] = {"type": "entity", "name": key, "entityType": str(rec.meta("group.by") or rec.step),
                         "observations": observations}
        for member in rec.source_ids:
            members.setdefault(member, []).append(key)
    for keys in members.values():
        unique = sorted(set(keys))
        for i, first in enumerate(unique):
            for second in unique[i + 1:]:
                relations.setdefault((first, CO_OCCURS, second),
                                     {"type": "relation", "from": first, "to": second, "relationType": CO_OCCURS})
    lines = [json.dumps(e, ensure_ascii=False) for e in entities.values()]
    lines += [json.dumps(r, ensure_ascii=False) for r in relations.values()]
    return lines, len(entities), len(relations)


def register(registry: Any) -> None:
    from synthex.core.importers.migrate.registry import MigrationFormat

    registry.register(MigrationFormat(
        name=FORMAT_NAME, system=SYSTEM, description="the MCP reference memory server's memory.jsonl",
        sniff=sniff, parse=parse, step="mcp_memory",
        views=(("entities", ("entity",), True), ("relations", ("relation",), True))))
