"""The built-in migration formats, and the questions ``synthex.core.importers.formats`` asks of them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from synthex.core.importers.base import Intake, SourceItem
from synthex.core.importers.migrate import archive, graphiti, langgraph, letta, mcp_memory, mem0
from synthex.core.importers.migrate.registry import MigrationFormats


@functools.cache
def migration_formats() -> MigrationFormats:
    """The built-in migration formats (a read-only catalogue, built once per process)."""
    registry = MigrationFormats()
    for module in (archive, mcp_memory, mem0, letta, graphiti, langgraph):
        module.register(registry)
    return registry


def detect_migration_format(path: Path, max_bytes: int) -> str | None:
    """The name of the migration format of ``path``, or None (the built-in importers' guesses follow)."""
    found = migration_formats().detect(path, max_bytes)
    return found.name if found is not None else None


def migration_parsers() -> dict[str, Callable[[Path, Intake], list[SourceItem]]]:
    return {f.name: f.parse for f in migration_formats()}
