"""The ``migrated`` step kind: the current memory of an imported system, linked to where it came from.

``pipeline.step("migrated", "mem0_memories", from_="mem0", kinds=["memory"])`` makes one record per
upstream record whose ``source.kind`` is one of ``kinds`` and whose ``source.current`` is not False (a
deletion or a superseded version stays history: in the source's records, not searched), one per original
id (the first of ``kinds`` that has it). Its ``sources`` are the upstream record itself, then the records
of the items its ``source.derived_from`` names (a Graphiti fact's episodes, a relation's entities) and the
history items whose ``source.about`` names it (a Mem0 memory's events), so ``synthex lineage`` shows them. Derived items may sit in any period, so the step's records live in the one partition ``all``
(like a key aggregate without ``period=``); their dates stay in ``time``. No model is called.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from synthex.core.errors import PipelineDefinitionError
from synthex.core.hashing import input_print
from synthex.core.periods import ALL_PERIODS
from synthex.core.record import Record
from synthex.core.steps.base import Audit, Step, StepContext, WorkItem

MIGRATE_VERSION = "migrate/v1"


@dataclass
class MigratedStep(Step):
    kinds: list[str] = field(default_factory=list)
    kind: ClassVar[str] = "migrated"

    @classmethod
    def build(cls, name: str, *, base_dir: str = "", from_: str | list[str] = (), pii: str | None = None,
              **config: Any) -> Self:
        kinds = config.get("kinds")
        if isinstance(kinds, str):
            config["kinds"] = [kinds]
        elif not isinstance(kinds, (list, tuple)) or not kinds or not all(isinstance(k, str) for k in kinds):
            raise PipelineDefinitionError(f"migrated {name!r}: kinds= names the item kinds it keeps (e.g. ['memory'])")
        else:
            config["kinds"] = list(kinds)
        if not from_:
            raise PipelineDefinitionError(f"migrated {name!r}: from_= names the imported source(s)")
        return super().build(name, from_=from_, pii=pii, **config)

    def config(self) -> dict[str, Any]:
        return {"from": list(self.from_), "kinds": list(self.kinds), "version": MIGRATE_VERSION}

    def toml_config(self) -> dict[str, Any]:
        return {"from": list(self.from_), "kinds": list(self.kinds)}

    def single_partition_period(self) -> str | None:
        return ALL_PERIODS

    def work(self, ctx: StepContext) -> list[WorkItem]:
        upstream = [r for s in self.from_ for r in ctx.upstream(s)]
        by_key: dict[str, Record] = {}
        about: dict[str, list[Record]] = {}  # item key -> the history items about it (a Mem0 memory's events)
        for rec in upstream:
            key = rec.meta("source.key")
            if isinstance(key, str):
                by_key.setdefault(key, rec)
            subject = rec.meta("source.about")
            if isinstance(subject, str) and rec.meta("source.current") is False:
                about.setdefault(subject, []).append(rec)
        # One record per original id: the first of ``kinds`` that has it (Mem0's get_all memory over the
        # one rebuilt from history.db when both files are read).
        rank = {k: i for i, k in enumerate(self.kinds)}
        chosen: dict[str, Record] = {}
        for rec in upstream:
            kind = rec.meta("source.kind")
            if kind not in rank or rec.meta("source.current") is False:
                continue
            identity = f"{rec.meta('source.system')}:{rec.meta('source.original_id') or rec.id}"
            held = chosen.get(identity)
            if held is None or rank[kind] < rank[held.meta("source.kind")]:
                chosen[identity] = rec
        version = self.version_hash()
        items = []
        for rec in chosen.values():
            derived = [by_key[k] for k in rec.meta("source.derived_from") or [] if isinstance(k, str) and k in by_key]
            subject = rec.meta("source.about") or rec.meta("source.key")
            linked = list({r.id: r for r in [*derived, *about.get(subject, [])] if r.id != rec.id}.values())
            inputs = [rec, *linked]
            items.append(self.item(ctx, [input_print(r.id, r.content) for r in inputs], rec.meta("source.key") or rec.id,
                                   version, inputs=inputs))
        return items

    def output_chars(self, items: list[WorkItem]) -> int | None:
        return sum(len(i.inputs[0].content) for i in items)

    def produce(self, items: list[WorkItem], ctx: StepContext) -> tuple[list[Record], int]:
        out = []
        for item in items:
            origin = item.inputs[0]
            out.append(self.make_record(ctx, item, origin.content, origin.metadata,
                                        Audit(model=f"importer:{MIGRATE_VERSION}")))
            ctx.progress(1)
        return out, 0
