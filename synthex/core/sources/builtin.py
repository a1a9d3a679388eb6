"""The built-in source kinds, registered through the hook a plugin defines (``register_source_kinds``).

Their order is the order ``pipeline.source`` lists their keywords in its messages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synthex.core.errors import PipelineDefinitionError
from synthex.core.plugins import Registry
from synthex.core.sources.api import ApiOrigin
from synthex.core.sources.base import SourceOrigin
from synthex.core.sources.file import FileOrigin
from synthex.core.sources.kinds import SourceFields, SourceKind
from synthex.core.sources.stream import StreamOrigin


class ExportFile(SourceKind):
    """``file=`` an export (ChatGPT, Claude, JSONL...; ``format=`` or detected)."""

    keyword = "file"
    options = ("format",)

    def fields(self, source: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"file": str(args["file"]), "format": args.get("format", "auto")}

    def origin(self, step: SourceFields) -> SourceOrigin:
        return FileOrigin(step.path(), step.format, step.limits, bool(step.options.get("follow_links")), step.name,
                          step.formats)

    def toml_config(self, step: SourceFields) -> dict[str, Any]:
        return {"file": step.file, "format": step.format, **step.options}

    def local_paths(self, step: SourceFields) -> list[Path] | None:
        return [step.path()]


class NotesFolder(ExportFile):
    """``folder=`` a folder of notes, dated by front matter, file name, else mtime. Links that lead out of
    the folder are skipped with a warning unless ``follow_links=True``."""

    keyword = "folder"
    options = ("follow_links",)
    formats = ("folder",)

    def fields(self, source: str, args: dict[str, Any]) -> dict[str, Any]:
        follow = args.get("follow_links", False)
        if not isinstance(follow, bool):
            raise PipelineDefinitionError(f"source {source!r}: follow_links= takes True or False, not {follow!r}")
        # Only a True is kept: a folder without the option has the fields (and the TOML) it always had.
        return {"file": str(args["folder"]), "format": "folder", **({"options": {"follow_links": True}} if follow else {})}


class AppendOnlyStream(SourceKind):
    """``stream=`` an append-only JSONL file read from its last offset (``remember`` appends to it)."""

    keyword = "stream"
    formats = ("stream",)

    def fields(self, source: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"file": str(args["stream"]), "format": "stream"}

    def origin(self, step: SourceFields) -> SourceOrigin:
        return stream_origin(step, step.path())

    def toml_config(self, step: SourceFields) -> dict[str, Any]:
        return {"file": step.file, "format": step.format}

    def local_paths(self, step: SourceFields) -> list[Path] | None:
        return [step.path()]


def stream_origin(step: SourceFields, path: Path) -> StreamOrigin:
    """The reader of a stream file of ``step``: its quarantine and checkpoint live in the project's data
    dir (none for a step outside a project), bounded by the pipeline's limits."""
    limits = step.limits
    return StreamOrigin(path, source=step.name, data_dir=Path(step.base_dir) / ".synthex" if step.base_dir else None,
                        batch_lines=limits.stream_batch_lines, line_bytes=limits.stream_line_bytes)


class DatabaseTable(SourceKind):
    """``table=`` in ``dsn=`` (``duckdb:///x.duckdb`` / ``sqlite:///x.sqlite``) keyed by ``pk=``; changes
    found by the ``updated_at=`` watermark or else a per-row hash."""

    keyword = "table"
    options = ("dsn", "pk", "updated_at", "created_at", "text")

    def fields(self, source: str, args: dict[str, Any]) -> dict[str, Any]:
        from synthex.core.importers.tables import TableSpec

        if not args.get("dsn") or not args.get("pk"):
            raise PipelineDefinitionError(f"source {source!r}: a table= source needs dsn= and pk=")
        text = args.get("text")
        spec = TableSpec(dsn=args["dsn"], table=str(args["table"]), pk=args["pk"], updated_at=args.get("updated_at"),
                         created_at=args.get("created_at"), text=tuple(text) if text else None)
        return {"format": "table", "table": spec}

    def origin(self, step: SourceFields) -> SourceOrigin:
        from synthex.core.sources.table import TableOrigin

        return TableOrigin(step.table, Path(step.base_dir or "."))

    def local_paths(self, step: SourceFields) -> list[Path] | None:
        from synthex.core.errors import SourceError
        from synthex.core.importers.tables import table_path

        try:
            return [table_path(step.table, step.base_dir or ".")]
        except SourceError:
            return None  # a malformed dsn: nothing to place (reading it fails with its own line)

    def toml_config(self, step: SourceFields) -> dict[str, Any]:
        return step.reader().toml_config()


class ApiFeed(SourceKind):
    """``api=`` a callable ``fetch(cursor)`` yielding pages, landed in a local stream."""

    keyword = "api"

    def fields(self, source: str, args: dict[str, Any]) -> dict[str, Any]:
        if not callable(args["api"]):
            raise PipelineDefinitionError(f"source {source!r}: api= must be a callable fetch(cursor) yielding pages")
        return {"format": "api", "api": args["api"]}

    def origin(self, step: SourceFields) -> SourceOrigin:
        assert step.api is not None
        landing = Path(step.base_dir or ".") / ".synthex" / "sources" / f"{step.name}.jsonl"
        return ApiOrigin(step.api, landing, stream_origin(step, landing))

    def toml_config(self, step: SourceFields) -> dict[str, Any]:
        return step.reader().toml_config()


def register_source_kinds(registry: Registry[SourceKind]) -> None:
    registry.register("file", ExportFile())
    registry.register("folder", NotesFolder())
    registry.register("table", DatabaseTable())
    registry.register("stream", AppendOnlyStream())
    registry.register("api", ApiFeed())
