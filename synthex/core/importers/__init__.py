"""Importers: turn an export file (or folder) into source items, one per conversation/document."""

from synthex.core.importers.base import SourceItem
from synthex.core.importers.formats import (
    ParsedSource,
    detect_format,
    file_formats,
    load_source,
    register_format,
)

__all__ = ["ParsedSource", "SourceItem", "detect_format", "file_formats", "load_source", "register_format"]
