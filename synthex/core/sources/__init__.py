"""Source kinds (design doc §3.1): export files and folders, DuckDB/SQLite tables, append-only
streams and API callables, and plugins' kinds (``synthex.core.sources.kinds``). Each reads its data through
the same questions (``SourceOrigin``)."""

from synthex.core.sources.api import ApiOrigin
from synthex.core.sources.base import SourceOrigin
from synthex.core.sources.file import FileOrigin
from synthex.core.sources.kinds import SourceKind, get_source_kind, source_kinds
from synthex.core.sources.stream import StreamOrigin, append_lines

__all__ = ["ApiOrigin", "FileOrigin", "SourceKind", "SourceOrigin", "StreamOrigin", "append_lines", "get_source_kind",
           "source_kinds"]
