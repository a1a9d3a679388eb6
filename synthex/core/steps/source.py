"""Source: brings data into the pipeline, one record per conversation, document, row or stream line.

Where the data comes from is the step's ``origin`` (``synthex.core.sources``): an export file or folder
(the default, from ``file`` and ``format``), a DuckDB/SQLite table, an append-only stream or an API.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from synthex.core.hashing import fingerprint
from synthex.core.importers import SourceItem
from synthex.core.periods import month_of
from synthex.core.record import Record
from synthex.core.sources import ApiOrigin, FileOrigin, SourceOrigin, StreamOrigin
from synthex.core.sources.file import IMPORTER_VERSION
from synthex.core.steps.base import Audit, Step, StepContext, WorkItem


@dataclass
class SourceStep(Step):
    file: str = ""
    format: str = "auto"
    base_dir: str = ""  # relative ``file`` paths resolve against the pipeline's folder
    table: Any = None  # a synthex.core.importers.tables.TableSpec: a DuckDB / SQLite table source
    api: Callable[[Any], Any] | None = field(default=None, repr=False)  # fetch(cursor) yielding pages
    kind: ClassVar[str] = "source"
    _origin: SourceOrigin | None = field(default=None, init=False, repr=False, compare=False)
    _origin_key: tuple = field(default=(), init=False, repr=False, compare=False)
    _by_period: tuple[object, dict[str, list[SourceItem]]] = field(default=(None, {}), init=False, repr=False,
                                                                   compare=False)

    def path(self) -> Path:
        p = Path(self.file).expanduser()
        return p if p.is_absolute() or not self.base_dir else Path(self.base_dir) / p

    def reader(self) -> SourceOrigin:
        """The origin, built from the step's fields and kept (with its parse, offsets and caches) while
        they are unchanged: paths resolve against the project folder, known only once it is loaded."""
        key = (self.file, self.format, self.base_dir, self.table, id(self.api))
        if self._origin is None or key != self._origin_key:
            self._origin, self._origin_key = self._build_origin(), key
        return self._origin

    def _build_origin(self) -> SourceOrigin:
        base = Path(self.base_dir or ".")
        if self.table is not None:
            from synthex.core.sources.table import TableOrigin

            return TableOrigin(self.table, base)
        if self.api is not None:
            return ApiOrigin(self.api, base / ".synthex" / "sources" / f"{self.name}.jsonl")
        if self.format == "stream":
            return StreamOrigin(self.path())
        return FileOrigin(self.path(), self.format)

    def describe(self) -> str:
        """Where the data is (a path; a dsn and table; a stream file; an API callable)."""
        return self.reader().describe()

    def config(self) -> dict[str, Any]:
        return self.reader().config()

    def toml_config(self) -> dict[str, Any]:
        if self.table is not None or self.api is not None:
            return self.reader().toml_config()
        return {"file": self.file, "format": self.format}

    def items(self) -> list[SourceItem]:
        """The source's current items (each origin keeps one parse while its data is unchanged)."""
        return self.reader().items()

    def warnings(self) -> list[str]:
        """One line per thing the importer left out or repaired (e.g. a message without text)."""
        return self.reader().warnings()

    def items_by_period(self) -> dict[str, list[SourceItem]]:
        """The items grouped by period, grouped once per parse (origins return the same list while
        their data is unchanged): planning asks for every period of a 100k-row table."""
        items = self.items()
        if self._by_period[0] is not items:
            grouped: dict[str, list[SourceItem]] = {}
            for item in items:
                grouped.setdefault(month_of(item.created_at), []).append(item)
            self._by_period = (items, grouped)
        return self._by_period[1]

    def periods(self) -> list[str]:
        return sorted(self.items_by_period())

    def work(self, ctx: StepContext) -> list[WorkItem]:
        items = self.items_by_period().get(ctx.period, [])
        version = self.version_hash()
        return [self.item(ctx, [fingerprint(i.content)], i.key, version, payload=i) for i in items]

    def produce(self, items: list[WorkItem], ctx: StepContext) -> tuple[list[Record], int]:
        out = []
        for item in items:
            src: SourceItem = item.payload
            audit = Audit(model=f"importer:{IMPORTER_VERSION}")
            out.append(self.make_record(ctx, item, src.content, src.metadata, audit, sources=[]))
            ctx.progress(1)
        return out, 0
