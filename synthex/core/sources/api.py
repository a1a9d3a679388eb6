"""An API source: a callable that yields pages from a cursor; pages land in a local stream.

``fetch(cursor)`` gets the cursor it returned last (None the first time) and yields pages, each
``(rows, next_cursor)`` or ``{"items": rows, "cursor": next_cursor}``; rows are stream lines (a
text, a ``created_at``, an optional ``id``). Each page is appended to the landing stream, then its
cursor is saved: a crash in between fetches that page again, and the repeated lines are the same
items (same id or same text and date), so pulling is at-least-once and idempotent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from synthex.core.atomic_file import write_file_atomic
from synthex.core.deletions import DeletionReporting
from synthex.core.errors import SourceError
from synthex.core.importers import SourceItem
from synthex.core.importers.jsonl import item_from_row
from synthex.core.sources.base import SourceOrigin
from synthex.core.sources.quarantine import Quarantine
from synthex.core.sources.stream import StreamOrigin, append_lines

Fetch = Callable[[Any], Iterable[Any]]


def callable_name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


class ApiOrigin(SourceOrigin):
    kind = "api"
    deletions = DeletionReporting.EXPLICIT  # a page row {"id": ..., "deleted": true}, kept in the landing stream

    def __init__(self, fetch: Fetch, landing: Path, stream: StreamOrigin | None = None) -> None:
        """``stream``: the landing stream's reader (default: one without quarantine ledger or batches)."""
        if not callable(fetch):
            raise SourceError(f"api source: {fetch!r} is not callable; expected fetch(cursor) yielding pages")
        self.fetch, self.landing = fetch, landing
        self.stream = stream if stream is not None else StreamOrigin(landing)

    @property
    def cursor_path(self) -> Path:
        return self.landing.with_suffix(".cursor.json")

    def cursor(self) -> Any:
        try:
            return json.loads(self.cursor_path.read_text(encoding="utf-8"))["cursor"]
        except FileNotFoundError:
            return None

    def _save_cursor(self, cursor: Any) -> None:
        write_file_atomic(self.cursor_path, json.dumps({"cursor": cursor}))

    def pull(self) -> int:
        name = callable_name(self.fetch)
        fetched = 0
        try:
            pages = self.fetch(self.cursor())
            for number, page in enumerate(pages, start=1):
                rows, next_cursor = self._page(page, f"api {name} page {number}")
                append_lines(self.landing, rows)
                self._save_cursor(next_cursor)
                fetched += len(rows)
        except SourceError:
            raise
        except Exception as exc:  # the user's fetch failed: one line; pages landed so far are kept
            raise SourceError(f"api {name}: {type(exc).__name__}: {exc} (after {fetched} new item(s))") from exc
        return fetched

    @staticmethod
    def _page(page: Any, where: str) -> tuple[list[dict[str, Any]], Any]:
        if isinstance(page, dict) and "items" in page:
            rows, cursor = page["items"], page.get("cursor")
        elif isinstance(page, tuple) and len(page) == 2:
            rows, cursor = page
        else:
            raise SourceError(f"{where}: expected (rows, next_cursor) or {{'items': rows, 'cursor': ...}}")
        if not isinstance(rows, list):
            raise SourceError(f"{where}: rows must be a list of objects")
        for index, row in enumerate(rows):  # checked before anything of the page is written
            if not isinstance(row, dict):
                raise SourceError(f"{where} row #{index}: expected an object")
            if row.get("deleted") is not True:
                item_from_row(row, f"{where} row #{index}", None, {})
        try:
            json.dumps(cursor)
        except TypeError as exc:
            raise SourceError(f"{where}: the cursor must be JSON-serializable ({exc})") from exc
        return rows, cursor

    def items(self) -> list[SourceItem]:
        return self.stream.items()

    def is_empty(self) -> bool:
        return self.stream.is_empty()

    def warnings(self) -> list[str]:
        return self.stream.warnings()

    def quarantine(self) -> Quarantine:
        return self.stream.quarantine()

    def waiting(self) -> bool:
        return self.stream.waiting()

    def read_position(self) -> int:
        return self.stream.read_position()

    def commit_position(self, position: int) -> None:
        self.stream.commit_position(position)

    def token(self) -> str:
        return self.stream.token()

    def describe(self) -> str:
        return f"api:{callable_name(self.fetch)}"

    def config(self) -> dict[str, Any]:
        return {"kind": self.kind, "reader": "stream/v1"}

    def toml_config(self) -> dict[str, Any]:
        return {"api": callable_name(self.fetch)}
