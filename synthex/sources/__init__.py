"""Source kinds (design doc §3.1): export files and folders, DuckDB/SQLite tables, append-only
streams and API callables, and plugins' kinds (``synthex.sources.kinds``). Each reads its data through
the same questions (``SourceOrigin``)."""

from synthex.sources.api import ApiOrigin
from synthex.sources.base import SourceOrigin
from synthex.sources.file import FileOrigin
from synthex.sources.kinds import SourceKind, get_source_kind, source_kinds
from synthex.sources.stream import StreamOrigin, append_lines

__all__ = ["ApiOrigin", "FileOrigin", "SourceKind", "SourceOrigin", "StreamOrigin", "append_lines", "get_source_kind",
           "source_kinds"]
