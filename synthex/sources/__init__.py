"""Source kinds (design doc §3.1): export files and folders, DuckDB/SQLite tables, append-only
streams and API callables. Each answers the same questions (``SourceOrigin``)."""

from synthex.sources.api import ApiOrigin
from synthex.sources.base import SourceOrigin
from synthex.sources.file import FileOrigin
from synthex.sources.stream import StreamOrigin, append_lines

__all__ = ["ApiOrigin", "FileOrigin", "SourceOrigin", "StreamOrigin", "append_lines"]
