"""Source: brings an export file into the pipeline, one record per conversation/document."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from synthex.hashing import fingerprint
from synthex.importers import ParsedSource, SourceItem
from synthex.periods import month_of
from synthex.record import Record
from synthex.steps.base import Audit, Step, StepContext, WorkItem

IMPORTER_VERSION = "importers/v1"


@dataclass
class SourceStep(Step):
    file: str = ""
    format: str = "auto"
    base_dir: str = ""  # relative ``file`` paths resolve against the pipeline's folder
    kind: ClassVar[str] = "source"
    _parsed: ParsedSource = field(default_factory=ParsedSource, init=False, repr=False, compare=False)

    def path(self) -> Path:
        p = Path(self.file).expanduser()
        return p if p.is_absolute() or not self.base_dir else Path(self.base_dir) / p

    def config(self) -> dict[str, Any]:
        # The file path is not part of the version: moving an export must not reprocess it.
        return {"format": self.format, "importer": IMPORTER_VERSION}

    def toml_config(self) -> dict[str, Any]:
        return {"file": self.file, "format": self.format}

    def items(self) -> list[SourceItem]:
        """The parsed export: parsed once while the file is unchanged (planner and run share it)."""
        return self._parsed.items(self.path(), self.format)

    def warnings(self) -> list[str]:
        """One line per thing the importer left out or repaired (e.g. a message without text)."""
        self.items()
        return self._parsed.warnings

    def periods(self) -> list[str]:
        return sorted({month_of(i.created_at) for i in self.items()})

    def work(self, ctx: StepContext) -> list[WorkItem]:
        items = [i for i in self.items() if month_of(i.created_at) == ctx.period]
        return [self.item(ctx, [fingerprint(i.content)], i.key, payload=i) for i in items]

    def produce(self, items: list[WorkItem], ctx: StepContext) -> tuple[list[Record], int]:
        out = []
        for item in items:
            src: SourceItem = item.payload
            audit = Audit(model=f"importer:{IMPORTER_VERSION}")
            out.append(self.make_record(ctx, item, src.content, src.metadata, audit, sources=[]))
            ctx.progress(1)
        return out, 0
