"""An export file or a folder of notes, parsed once while unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synthex.core.errors import SourceError
from synthex.core.importers import ParsedSource, SourceItem
from synthex.core.importers.formats import FormatParser, change_token, parser_version
from synthex.core.limits import Limits
from synthex.core.plugins import Registry
from synthex.core.sources.base import SourceOrigin
from synthex.core.sources.quarantine import QUARANTINE_KEPT, Quarantine, QuarantinedLine, SetAsideUnit

IMPORTER_VERSION = "importers/v1"


class FileOrigin(SourceOrigin):
    kind = "file"

    def __init__(self, path: Path, fmt: str = "auto", limits: Limits | None = None, follow_links: bool = False,
                 source: str = "", formats: Registry[FormatParser] | None = None) -> None:
        """``source``: the step's name, for what it sets aside (default: the file's name); ``formats``: the
        pipeline's own (``pipeline.format``), looked up after the built-ins and before the plugins'."""
        self.path, self.format = path, fmt
        self.source = source or path.name
        self.limits = limits or Limits()
        # A notes folder's links may lead out of it only when the source says so (issue 20).
        self.follow_links = follow_links
        self.formats = formats
        self._parsed = ParsedSource()

    def items(self) -> list[SourceItem]:
        return self._parsed.items(self.path, self.format, self.limits, self.follow_links, self.formats)

    def warnings(self) -> list[str]:
        self.items()
        return self._parsed.warnings

    def why_empty(self) -> str | None:
        self.items()
        return self._parsed.nothing

    def quarantine(self) -> Quarantine:
        """The notes the current parse set aside (``synthex.core.importers.folder``): an export is read
        whole or not at all, so it sets nothing aside."""
        self.items()
        notes = self._parsed.set_aside
        kept = tuple(QuarantinedLine(note.file, None, note.reason) for note in notes[:QUARANTINE_KEPT])
        return Quarantine(self.source, str(self.path), kept, len(notes), SetAsideUnit.NOTE)

    def token(self) -> str:
        """The stat signature, or the content hash for a file modified in the last seconds."""
        if not self.path.exists():
            raise SourceError(f"{self.path}: no such file or folder")
        try:
            return change_token(self.path, self.format, self.limits, self.follow_links)
        except OSError as exc:
            raise SourceError(f"{exc.filename or self.path}: cannot read file: {exc.strerror or exc}") from exc

    def describe(self) -> str:
        return str(self.path)

    def config(self) -> dict[str, Any]:
        # The file path is not part of the version: moving an export must not reprocess it. Nor are the
        # bounds or follow_links: they decide which items exist, not what any item's record is. A format
        # whose parser has a version (a plugin's, ``pipeline.format(..., version=)``) adds it: records made
        # by another parser are other records (an unversioned one keeps the version it always had).
        version = parser_version(self.format, self.formats)
        return {"format": self.format, "importer": IMPORTER_VERSION} | ({"parser": version} if version else {})
