"""Merge: combine several steps' records of a period, dropping exact duplicates by content fingerprint."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import ClassVar

from synthex.core.errors import PipelineDefinitionError
from synthex.core.hashing import fingerprint, input_print
from synthex.core.record import Record
from synthex.core.steps.base import Audit, Step, StepContext, WorkItem


@dataclass
class MergeStep(Step):
    kind: ClassVar[str] = "merge"

    def __post_init__(self) -> None:
        if not self.from_:
            raise PipelineDefinitionError(f"merge {self.name!r}: from_ must name at least one step")

    def work(self, ctx: StepContext) -> list[WorkItem]:
        by_print: dict[str, list[Record]] = defaultdict(list)
        for name in self.from_:
            for rec in ctx.upstream(name):
                by_print[fingerprint(rec.content)].append(rec)
        items = []
        version = self.version_hash()
        for fp in sorted(by_print):
            members = sorted(by_print[fp], key=lambda r: (r.meta("time.created_at") or "", r.id))
            items.append(self.item(ctx, [input_print(r.id, r.content) for r in members], fp, version,
                                   inputs=members))
        return items

    def produce(self, items: list[WorkItem], ctx: StepContext) -> tuple[list[Record], int]:
        out = []
        for item in items:
            first = item.inputs[0]
            meta = {k: v for k, v in first.metadata.items() if k in ("time", "chat", "source", "custom")}
            meta["custom"] = {**meta.get("custom", {}), "merged_from_steps": sorted({r.step for r in item.inputs})}
            out.append(self.make_record(ctx, item, first.content, meta, Audit(model="merge:exact-fingerprint")))
            ctx.progress(1)
        return out, 0
