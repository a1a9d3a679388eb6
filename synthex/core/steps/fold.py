"""Fold: sequential N:1 with state. One state record per period, chained through the periods.

The state after period P is computed from the state after the latest earlier period (read from
the store) and P's inputs in time order. Its materialization key includes the previous state's
id, so inserting or changing an earlier period re-folds from that point on (design doc §10.1
option 1), and every period is a checkpoint: a failure at P keeps P-1's state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from synthex.core.hashing import input_print
from synthex.core.llm import OUTPUT_CHARS_PER_CALL, estimate_call_tokens, estimate_unrendered_tokens
from synthex.core.record import Record
from synthex.core.steps.base import (
    Audit,
    ModelStep,
    StepContext,
    Volume,
    WorkItem,
    call_prompt,
    describe_record,
)


@dataclass
class FoldStep(ModelStep):
    """``prompt(record, state) -> str``, called once per input in order; returns the new state."""

    prompt: Callable[[Record, str], str] | None = None
    initial_state: str = ""
    kind: ClassVar[str] = "fold"
    sequential_periods: ClassVar[bool] = True  # each period's state is made from the previous period's

    def __post_init__(self) -> None:
        self.require_prompt()

    def config(self) -> dict[str, Any]:
        return super().config() | {"initial_state": self.initial_state}

    def work(self, ctx: StepContext) -> list[WorkItem]:
        inputs = sorted(
            (r for name in self.from_ for r in ctx.upstream(name)),
            key=lambda r: (r.meta("time.created_at") or "", r.id),
        )
        if not inputs:
            return []
        previous = ctx.previous_state(self.name)
        prints = [input_print(r.id, r.content) for r in inputs] + [previous.id if previous else ""]
        return [self.item(ctx, prints, ctx.period, inputs=inputs, payload=previous)]

    def produce(self, items: list[WorkItem], ctx: StepContext) -> tuple[list[Record], int]:
        assert self.prompt is not None and ctx.completer is not None
        out, tokens = [], 0
        for item in items:
            previous: Record | None = item.payload
            state = previous.content if previous else self.initial_state
            last_prompt, last_completion = "", None
            for rec in item.inputs:  # sequential: each call sees the state the previous one produced
                last_prompt = call_prompt(self, self.prompt, (rec, state), describe_record(rec))
                last_completion = ctx.completer.complete_many([last_prompt], self.model, self.temperature)[0]
                state = last_completion.text
                tokens += last_completion.tokens_in + last_completion.tokens_out
            assert last_completion is not None
            sequence = (previous.meta("step.sequence", 0) + 1) if previous else 1
            meta = {
                "time": {"created_at": max((r.meta("time.created_at") or "") for r in item.inputs), "period": ctx.period},
                "step": {"sequence": sequence, "previous_state": previous.id if previous else None},
            }
            sources = [r.id for r in item.inputs] + ([previous.id] if previous else [])
            audit = Audit.of_completion(self.prompt, last_prompt, last_completion, self.temperature)
            out.append(self.make_record(ctx, item, state, meta, audit, sources=sources))
            ctx.progress(1)
        return out, tokens

    def estimate_tokens(self, items: list[WorkItem]) -> int:
        assert self.prompt is not None
        # One call per input; each prompt is rendered with an empty state, the state it carries is
        # counted by the token model as one earlier output.
        prompts = (call_prompt(self, self.prompt, (rec, ""), describe_record(rec)) for item in items for rec in item.inputs)
        return estimate_call_tokens(prompts, carries_state=True)

    def estimate_outputs(self, inputs: Volume) -> Volume:
        return Volume(1 if inputs.records else 0, OUTPUT_CHARS_PER_CALL)

    def estimate_unstored_tokens(self, inputs: Volume, outputs: int) -> int:
        # One call per input (not per output), each carrying the state, as ``estimate_tokens`` counts once
        # the inputs exist.
        return estimate_unrendered_tokens(inputs.chars, inputs.records, carries_state=True)
