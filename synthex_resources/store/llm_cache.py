"""The LLM response cache (design doc §3.6 replay): responses keyed by the rendered prompt's hash, model
and temperature. Responses are encrypted at rest in an encrypted store."""

from __future__ import annotations

from typing import Any

from synthex_resources.store import filters
from synthex_resources.store.schemas import CACHE_SCHEMA, LLM_CACHE
from synthex_resources.store.tables import LanceTables

PURGE_CHUNK = 2000


class LLMCache:
    def __init__(self, tables: LanceTables) -> None:
        self._tables = tables

    def _readable(self, row: dict[str, Any]) -> dict[str, Any]:
        if self._tables.cipher is None:
            return row
        return {**row, "response": self._tables.decrypt(row.get("response")), "raw": self._tables.decrypt(row.get("raw"))}

    def get_many(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for chunk in filters.chunks(keys):
            for row in self._tables.read(LLM_CACHE, filters.key_where("key", chunk)):
                out[row["key"]] = self._readable(row)
        return out

    def put_many(self, rows: list[dict[str, Any]]) -> None:
        if self._tables.cipher is not None:
            rows = [{**r, "response": self._tables.encrypt(r.get("response")),
                     "raw": self._tables.encrypt(r.get("raw"))} for r in rows]
        self._tables.upsert_rows(LLM_CACHE, CACHE_SCHEMA, rows, key="key")

    def entries(self) -> list[dict[str, Any]]:
        """Every entry's key and readable response / raw text (what a purge searches)."""
        return [self._readable(r) for r in self._tables.read(LLM_CACHE, columns=["key", "response", "raw"])]

    def drop(self, keys: list[str]) -> int:
        for chunk in filters.chunks(keys, PURGE_CHUNK):
            self._tables.delete(LLM_CACHE, filters.key_where("key", chunk))
        return len(keys)
