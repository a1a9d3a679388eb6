"""Source kinds (design doc §3.1): export files and folders, DuckDB/SQLite tables, append-only
streams and API callables. Each answers the same questions (``SourceOrigin``)."""

from synthex.core.sources.api import ApiOrigin
from synthex.core.sources.base import SourceOrigin
from synthex.core.sources.file import FileOrigin
from synthex.core.sources.stream import StreamOrigin, append_lines

__all__ = ["ApiOrigin", "FileOrigin", "SourceOrigin", "StreamOrigin", "append_lines"]
