"""A table in a DuckDB or SQLite file: one record per row, keyed by its primary key."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from synthex.core.deletions import DeletionReporting
from synthex.core.importers import SourceItem
from synthex.core.importers.tables import TableSpec, read_changed, read_items, read_token
from synthex.core.sources.base import SourceOrigin

TOKEN_TTL_S = 5.0


class TableOrigin(SourceOrigin):
    kind = "table"
    deletions = DeletionReporting.EXPLICIT  # a row deleted is its primary key gone

    def __init__(self, spec: TableSpec, base_dir: Path) -> None:
        self.spec, self.base_dir = spec, base_dir
        self._token: str | None = None
        self._checked = float("-inf")
        self._items: list[SourceItem] = []

    def items(self) -> list[SourceItem]:
        """Every row; read again only when the table's token changed. The token is a query (a per-row
        hash over a SQLite table without ``updated_at``), and one plan asks for the items of every
        period: calls within ``TOKEN_TTL_S`` of a check share it (a direct ``token()`` call that sees a
        change, as every sensor tick and sync makes first, ends that at once)."""
        if time.monotonic() - self._checked < TOKEN_TTL_S and self._token is not None:
            return self._items
        token = self.token()
        if token != self._token:  # one read per change of the table, however many callers ask
            self._items, self._token = read_items(self.spec, self.base_dir), token
        self._checked = time.monotonic()
        return self._items

    def token(self) -> str:
        token = read_token(self.spec, self.base_dir)
        if token != self._token:
            self._checked = float("-inf")  # the table changed: the next items() reads it, however soon
        return token

    @property
    def watermarked(self) -> bool:
        return self.spec.updated_at is not None

    def changed_since(self, watermark: str | None) -> tuple[list[SourceItem], list[str], str | None]:
        """Rows with ``updated_at`` at or after ``watermark``, every current primary key, the new watermark."""
        return read_changed(self.spec, self.base_dir, watermark)

    def describe(self) -> str:
        return f"{self.spec.dsn}#{self.spec.table}"

    def config(self) -> dict[str, Any]:
        # Which columns make the text and the date is part of the version; where the file is is not.
        return {"kind": self.kind, "pk": self.spec.pk, "updated_at": self.spec.updated_at,
                "created_at": self.spec.created_at, "text": list(self.spec.text or ())}

    def toml_config(self) -> dict[str, Any]:
        spec = self.spec
        out: dict[str, Any] = {"dsn": spec.dsn, "table": spec.table, "pk": spec.pk}
        out.update({k: v for k, v in (("updated_at", spec.updated_at), ("created_at", spec.created_at)) if v})
        if spec.text:
            out["text"] = list(spec.text)
        return out
