"""An export file or a folder of notes, parsed once while unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synthex.core.errors import SourceError
from synthex.core.importers import ParsedSource, SourceItem
from synthex.core.importers.base import file_digest, stat_signature
from synthex.core.sources.base import SourceOrigin

IMPORTER_VERSION = "importers/v1"


class FileOrigin(SourceOrigin):
    kind = "file"

    def __init__(self, path: Path, fmt: str = "auto") -> None:
        self.path, self.format = path, fmt
        self._parsed = ParsedSource()

    def items(self) -> list[SourceItem]:
        return self._parsed.items(self.path, self.format)

    def warnings(self) -> list[str]:
        self.items()
        return self._parsed.warnings

    def token(self) -> str:
        """The stat signature, or the content hash for a file modified in the last seconds."""
        if not self.path.exists():
            raise SourceError(f"{self.path}: no such file or folder")
        try:
            stat = stat_signature(self.path)
            return repr(stat) if stat is not None else "sha256:" + file_digest(self.path)
        except OSError as exc:
            raise SourceError(f"{exc.filename or self.path}: cannot read file: {exc.strerror or exc}") from exc

    def describe(self) -> str:
        return str(self.path)

    def config(self) -> dict[str, Any]:
        # The file path is not part of the version: moving an export must not reprocess it.
        return {"format": self.format, "importer": IMPORTER_VERSION}
