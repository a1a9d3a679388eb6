"""Per (output, branch): the record an ``on_update`` hook last delivered (``hook_deliveries`` table)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from synthex_resources.store.schemas import HOOK_DELIVERIES
from synthex_resources.store.tables import LanceTables

HOOK_SCHEMA = pa.schema([("id", pa.string()), ("output", pa.string()), ("branch", pa.string()),
                         ("delivered_record", pa.string()), ("pending_record", pa.string()),
                         ("attempts", pa.int64()), ("last_error", pa.string()), ("updated_at", pa.string())])


class HookCursors:
    def __init__(self, tables: LanceTables) -> None:
        self._tables = tables

    def all(self) -> dict[str, dict[str, Any]]:
        """id (``output@branch``) -> the stored state's fields."""
        return {r["id"]: {k: v for k, v in r.items() if k != "id"} for r in self._tables.read(HOOK_DELIVERIES)}

    def save(self, row: dict[str, Any]) -> None:
        self._tables.upsert_rows(HOOK_DELIVERIES, HOOK_SCHEMA, [row])
