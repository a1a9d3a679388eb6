"""A benchmark's conversation turns as another system's items: how ``synthex eval`` scores an imported project.

An imported project's steps select by what the other system kept: a ``migrated`` view keeps the items of
its ``kinds`` (``source.kind``) that are current, an aggregate groups the source's turns. Fed a benchmark's
turns as they are (no ``source.kind``), every view is empty and the eval measures nothing. So in an eval
each source that read another system's file reads the benchmark's turns *as that system's turns*: each
turn an item of the format's ``turn_kind`` (``MigrationFormat.turn_kind``: a Letta ``message``, a Mem0
``memory``, a Graphiti ``episode``, a LangGraph store ``item``), current, of the format's system, its
original id the turn's key; its text, date and every other namespace of its metadata (``chat``: the turn
id the benchmark scores, the conversation, the speaker) as the benchmark's reader made them, the
benchmark's own ``source`` metadata kept as ``source.raw``. The project's views and branches then run
over the benchmark's conversations exactly as over the imported ones.

One source per system takes the turns (``turns_plan``): the first, in the pipeline's order, whose format
has a turn kind. The system's other sources read nothing (Letta's archival passages, Mem0's
``history.db`` beside its ``get_all`` file): they hold no turns of their own, and the same turn read twice
would be two records of one memory.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from synthex.core.errors import BadInputError
from synthex.core.importers.base import SourceItem
from synthex.core.importers.migrate.items import item_key


@dataclass(frozen=True)
class TurnsAs:
    """How one source reads a benchmark's turns: as items of ``kind`` of ``system``, format ``fmt`` (the
    format it reads in the project); ``kind`` None: it reads none of them (another source of the system does)."""

    fmt: str
    system: str
    kind: str | None

    def config(self) -> dict[str, Any]:
        """Part of the step's version (the records differ from the benchmark's turns read plain)."""
        return {"turns_as": {"format": self.fmt, "system": self.system, "kind": self.kind}}

    def items(self, turns: list[SourceItem]) -> list[SourceItem]:
        if self.kind is None:
            return []
        return [self.item(turn) for turn in turns]

    def item(self, turn: SourceItem) -> SourceItem:
        assert self.kind is not None
        key = item_key(self.kind, turn.key)
        source = {"type": self.fmt, "system": self.system, "kind": self.kind, "original_id": turn.key, "key": key,
                  "scope": {}, "derived_from": [], "current": True, "raw": turn.metadata.get("source")}
        return replace(turn, key=key, metadata={**turn.metadata, "source": source})


def turns_plan(formats: list[str]) -> list[TurnsAs | None]:
    """For the sources reading ``formats`` (in the pipeline's order): how each reads a benchmark's turns
    (None: not a migration format, it reads them plain). Every source of a migration format and none
    taking turns (only an MCP entity graph, only passages): one line, nothing to score."""
    from synthex.core.importers.migrate.catalogue import migration_formats

    registry = migration_formats()
    takers: dict[str, str] = {}  # system -> the format whose source takes its turns
    plan: list[TurnsAs | None] = []
    for name in formats:
        fmt = registry.get(name)
        if fmt is None:
            plan.append(None)
            continue
        takes = fmt.turn_kind is not None and fmt.system not in takers
        if takes:
            takers[fmt.system] = fmt.name
        plan.append(TurnsAs(fmt.name, fmt.system, fmt.turn_kind if takes else None))
    if plan and all(p is not None and p.kind is None for p in plan):
        raise BadInputError(f"no source of this pipeline holds conversation turns (formats: {', '.join(formats)}): "
                            "a benchmark's conversations cannot be fed through it")
    return plan
