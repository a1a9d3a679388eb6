"""The shape every migration item has, and the checks the migration readers share.

An item's metadata (design doc §3.4 namespaces):

- ``time``: ``created_at`` (the record's date) and every other time axis the source has, kept apart
  (``updated_at``; Graphiti's ``valid_at``, ``invalid_at``, ``expired_at``...), each ISO-8601 UTC or absent.
- ``source``: ``type`` (the format), ``system`` (mem0, letta...), ``path``, ``kind`` (memory, event,
  message, block...), ``original_id``, ``key`` (the item's key: ``<kind>:<original id>``), ``scope`` (the
  source's scope ids: user, agent, run/session, actor, group, namespace, as it names them),
  ``derived_from`` (keys of the items this one came from, where the source says so), ``current``
  (False: a deletion, a superseded version, history), and ``raw`` (the record as the file has it).
- ``chat``: for messages, the conversation / role / message id the steps and search recipes read.
- ``custom``: the source's own user metadata (Mem0's ``metadata``...).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from synthex.core.errors import SourceError
from synthex.core.importers.base import SourceItem, describe, get_time, label, repaired
from synthex.core.importers.jsonl import MAX_METADATA_DEPTH, _too_deep
from synthex.core.periods import iso


def item_key(kind: str, original_id: str) -> str:
    return f"{kind}:{original_id}"


def times(obj: dict[str, Any], names: tuple[str, ...], where: str) -> dict[str, str]:
    """The time axes ``names`` of ``obj`` that are present, as ISO-8601 UTC (a bad one: one line)."""
    out: dict[str, str] = {}
    for name in names:
        ts = get_time(obj, name, where)
        if ts is not None:
            out[name] = iso(ts)
    return out


def text_of(obj: dict[str, Any], name: str, where: str, required: bool = True) -> str:
    value = obj.get(name)
    if value is None:
        if required:
            raise SourceError(f"{where}: missing required field '{name}'")
        return ""
    if not isinstance(value, str):
        raise SourceError(f"{where}: '{name}' is {describe(value)}; expected a string")
    return value


def id_of(obj: dict[str, Any], name: str, where: str, required: bool = True) -> str:
    value = obj.get(name)
    if value is None or value == "":
        if required:
            raise SourceError(f"{where}: missing required field '{name}'")
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise SourceError(f"{where}: '{name}' is {describe(value)}; expected a string or an integer")
    return str(value)


def scope_of(obj: dict[str, Any], names: tuple[str, ...], where: str) -> dict[str, Any]:
    """The scope ids ``names`` present in ``obj`` (strings or integers; a namespace may be a list)."""
    out: dict[str, Any] = {}
    for name in names:
        value = obj.get(name)
        if value is None or value == "":
            continue
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            out[name] = list(value)
        elif isinstance(value, (str, int)) and not isinstance(value, bool):
            out[name] = str(value)
        else:
            raise SourceError(f"{where}: '{name}' is {describe(value)}; expected a string id")
    return out


def where_of(path: Path, what: str, index: int, original_id: Any) -> str:
    shown = label(original_id) if isinstance(original_id, (str, int)) and original_id != "" else "no id"
    return f"{path}: {what} #{index} ({shown})"


def migration_item(*, path: Path, fmt: str, system: str, kind: str, original_id: str, content: str,
                   created_at: str, where: str, time_axes: dict[str, str] | None = None,
                   scope: dict[str, Any] | None = None, raw: Any = None, derived_from: list[str] | None = None,
                   current: bool = True, chat: dict[str, Any] | None = None,
                   custom: dict[str, Any] | None = None, extra: dict[str, Any] | None = None,
                   warnings: list[str] | None = None) -> SourceItem:
    """One migration item (the metadata above); ``created_at`` dates it (ISO-8601). ``extra``: more
    ``source`` fields of the format's own (a Letta message's tool calls...)."""
    key = item_key(kind, original_id)
    if _too_deep([raw, custom, extra], MAX_METADATA_DEPTH):
        raise SourceError(f"{where}: nested deeper than {MAX_METADATA_DEPTH} levels")
    source: dict[str, Any] = {
        "type": fmt, "system": system, "path": str(path), "kind": kind, "original_id": original_id, "key": key,
        "scope": scope or {}, "derived_from": list(derived_from or []), "current": current, "raw": raw,
        **(extra or {}),
    }
    metadata: dict[str, Any] = {"time": {"created_at": created_at, **(time_axes or {})}, "source": source}
    if chat:
        metadata["chat"] = chat
    if custom:
        metadata["custom"] = custom
    item = SourceItem(key=key, content=content, created_at=created_at, metadata=metadata, warnings=warnings or [])
    return repaired(item, where)


def iso_or(value: datetime | None, fallback: str) -> str:
    return iso(value) if value is not None else fallback
