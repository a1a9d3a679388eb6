"""Public alias of ``synthex.core.importers``: what a project's pipeline.py uses to read its own formats."""

from synthex.core.importers import (
    ParsedSource,
    SourceItem,
    detect_format,
    file_formats,
    load_source,
    register_format,
)

__all__ = ["ParsedSource", "SourceItem", "detect_format", "file_formats", "load_source", "register_format"]
