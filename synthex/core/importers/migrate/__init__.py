"""Migration formats: what other memory systems keep (Mem0, Letta, Graphiti / Zep, LangGraph / LangMem,
the MCP reference memory server) and Synthex's own export, read as source formats.

Each format is a ``MigrationFormat`` in the registry ``migration_formats()``: a name (the ``format=`` of
``pipeline.source``), a ``sniff`` that recognises a file from its first bytes (``Sniff``), and a parser
with the built-in importers' signature. ``synthex.core.importers.formats`` asks the registry before its
own guesses (``detect_format``) and adds the parsers to its table, so ``synthex init NAME --from FILE``
and ``pipeline.source(..., format="auto")`` find them with no other change.

What every migration item keeps (``synthex.core.importers.migrate.items``): the source system, the
original id, the scope ids (user, agent, session/run, group, namespace), every time axis the source has,
the raw record, and the original ids of what it was derived from (``source.derived_from``: a Mem0 memory
from its history events, a Graphiti fact from its episodes). The ``migrated`` step kind
(``synthex.core.importers.migrate.step``) turns those ids into record ``sources``.
"""

from synthex.core.importers.migrate.catalogue import (
           detect_migration_format,
           migration_formats,
           migration_parsers,
)
from synthex.core.importers.migrate.registry import MigrationFormat, MigrationFormats, Sniff

__all__ = ["MigrationFormat", "MigrationFormats", "Sniff", "detect_migration_format", "migration_formats",
           "migration_parsers"]
