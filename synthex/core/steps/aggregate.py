"""Aggregate: group a month partition's records by month/week/day, reduce each group to one record."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from synthex.core.errors import PipelineDefinitionError
from synthex.core.hashing import input_print
from synthex.core.llm import OUTPUT_CHARS_PER_CALL, estimate_call_tokens
from synthex.core.periods import PERIOD_KINDS, group_label
from synthex.core.record import Record
from synthex.core.steps.base import Audit, ModelStep, StepContext, Volume, WorkItem, call_prompt


@dataclass
class AggregateStep(ModelStep):
    """``prompt(records, period) -> str``; one output per period group."""

    prompt: Callable[[list[Record], str], str] | None = None
    period: str = "month"
    kind: ClassVar[str] = "aggregate"

    def __post_init__(self) -> None:
        self.require_prompt()
        if self.period not in PERIOD_KINDS:
            raise PipelineDefinitionError(
                f"aggregate {self.name!r}: period={self.period!r}; expected one of {', '.join(PERIOD_KINDS)}"
            )

    def config(self) -> dict[str, Any]:
        return super().config() | {"period": self.period}

    def work(self, ctx: StepContext) -> list[WorkItem]:
        groups: dict[str, list[Record]] = defaultdict(list)
        for name in self.from_:
            for rec in ctx.upstream(name):
                groups[group_label(rec.meta("time.created_at") or rec.created_at, self.period)].append(rec)
        items = []
        for label in sorted(groups):
            members = sorted(groups[label], key=lambda r: (r.meta("time.created_at") or "", r.id))
            items.append(self.item(ctx, [input_print(r.id, r.content) for r in members], label, inputs=members))
        return items

    def produce(self, items: list[WorkItem], ctx: StepContext) -> tuple[list[Record], int]:
        assert self.prompt is not None and ctx.completer is not None
        rendered = [call_prompt(self, self.prompt, (i.inputs, i.group_key), f"period {i.group_key}") for i in items]
        completions = ctx.completer.complete_many(rendered, self.model, self.temperature)
        out, tokens = [], 0
        for item, text, completion in zip(items, rendered, completions, strict=True):
            latest = max((r.meta("time.created_at") or "") for r in item.inputs)
            meta = {"time": {"created_at": latest, "period": item.group_key}, "custom": {"inputs": len(item.inputs)}}
            audit = Audit.of_completion(self.prompt, text, completion, self.temperature)
            out.append(self.make_record(ctx, item, completion.text, meta, audit))
            tokens += completion.tokens_in + completion.tokens_out
            ctx.progress(1)
        return out, tokens

    def estimate_tokens(self, items: list[WorkItem]) -> int:
        assert self.prompt is not None
        return estimate_call_tokens(
            call_prompt(self, self.prompt, (i.inputs, i.group_key), f"period {i.group_key}") for i in items)

    def estimate_outputs(self, inputs: Volume) -> Volume:
        # One output per group of a month partition: 1 month, at most 5 weeks, at most 31 days.
        n = inputs.records
        groups = 0 if n == 0 else {"month": 1, "week": min(n, 5), "day": min(n, 31)}[self.period]
        return Volume(groups, OUTPUT_CHARS_PER_CALL * groups)
