"""Fold: sequential N:1 with state. One state record per period, chained through the periods.

The state after period P is computed from the state after the latest earlier period (read from
the store) and P's inputs in time order. Its materialization key includes the previous state's
id, so inserting or changing an earlier period re-folds from that point on (design doc §10.1
option 1), and every period is a checkpoint: a failure at P keeps P-1's state.

``prompt(record, state)`` is sent to the model for each input; ``fn(record, state)`` is plain Python (no
model). ``state=`` bounds the state (``synthex.core.steps.fold_state``: the last N tokens, compressed by
the model every K inputs, or a window of the last N inputs); without it the state is what the prompt makes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from synthex.core.errors import PipelineDefinitionError
from synthex.core.hashing import input_print
from synthex.core.llm import (
    OUTPUT_CHARS_PER_CALL,
    Completion,
    estimate_call_tokens,
    estimate_unrendered_tokens,
)
from synthex.core.record import Record
from synthex.core.steps.base import (
    Audit,
    ModelStep,
    StepContext,
    Volume,
    WorkItem,
    call_prompt,
    callable_ref,
    describe_record,
)
from synthex.core.steps.fold_state import StateBound, state_bound, window_records


@dataclass
class FoldStep(ModelStep):
    """``prompt(record, state) -> str`` (or ``fn=``, no model), called once per input in order; returns the new
    state. ``state``: a ``StateBound`` (or its TOML dict) that keeps the state bounded."""

    prompt: Callable[[Record, str], str] | None = None
    fn: Callable[[Record, str], str] | None = None
    initial_state: str = ""
    state: StateBound | dict[str, Any] | None = None
    kind: ClassVar[str] = "fold"
    sequential_periods: ClassVar[bool] = True  # each period's state is made from the previous period's

    def __post_init__(self) -> None:
        if self.prompt is None and self.fn is None:
            self.require_prompt()
        if self.prompt is not None and self.fn is not None:
            raise PipelineDefinitionError(f"fold {self.name!r}: give exactly one of prompt= or fn=")
        self.state = state_bound(self.state, f"fold {self.name!r}")

    def config(self) -> dict[str, Any]:
        # A fold without fn= or state= keeps the config (so the version and ids) it always had.
        out = super().config() | {"initial_state": self.initial_state}
        if self.fn is not None:
            out["fn"] = callable_ref(self.fn)
        if isinstance(self.state, StateBound):
            out["state"] = self.state.config()
        return out

    def _code_hashes(self) -> dict[str, str | None]:
        return super()._code_hashes() | ({"fn": self.source_hashes.of(self.fn)} if self.fn is not None else {})

    def toml_config(self) -> dict[str, Any]:
        return super().toml_config() | ({"state": self.state.to_dict()} if isinstance(self.state, StateBound) else {})

    def uses_model(self) -> bool:
        return self.prompt is not None or isinstance(self.state, StateBound) and self.state.kind == "compress"

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
        out = []
        tokens = 0
        bound = self.state if isinstance(self.state, StateBound) else StateBound()
        for item in items:
            previous: Record | None = item.payload
            state = previous.content if previous else self.initial_state
            folded = previous.meta("step.inputs_folded", 0) if previous else 0
            inputs = item.inputs
            width = bound.window()
            if width is not None:  # the state is the fold of the chain's last `width` inputs, from the start
                inputs = (window_records(previous) + list(item.inputs))[-width:]
                state = self.initial_state
            calls = _Calls(self, ctx, getattr(bound, "prompt", None))
            for rec in inputs:  # sequential: each call sees the state the previous one produced
                if self.fn is not None:
                    state = call_prompt(self, self.fn, (rec, state), describe_record(rec))
                else:
                    assert self.prompt is not None
                    state = calls.complete(self.prompt, (rec, state), describe_record(rec))
                folded += 1
                state = bound.bound(state, folded, calls.compress)
            tokens += calls.tokens
            sequence = (previous.meta("step.sequence", 0) + 1) if previous else 1
            meta: dict[str, Any] = {
                "time": {"created_at": max((r.meta("time.created_at") or "") for r in item.inputs), "period": ctx.period},
                "step": {"sequence": sequence, "previous_state": previous.id if previous else None},
            }
            if isinstance(self.state, StateBound):
                meta["step"] |= {"inputs_folded": folded, "state_bound": self.state.kind}
            if width is not None:
                meta["step"]["window"] = [r.id for r in inputs]
                sources = [r.id for r in inputs]  # what the state was made from: the window, not the chain
            else:
                sources = [r.id for r in item.inputs] + ([previous.id] if previous else [])
            if calls.last is not None:
                audit = Audit.of_completion(calls.last_fn, calls.last_prompt, calls.last, self.temperature,
                                            self.source_hashes)
            else:
                assert self.fn is not None
                audit = Audit.of_python(self.fn, self.source_hashes)
            out.append(self.make_record(ctx, item, state, meta, audit, sources=sources))
            ctx.progress(1)
        return out, tokens

    def estimate_tokens(self, items: list[WorkItem]) -> int:
        if self.prompt is None:
            return 0
        # One call per input; each prompt is rendered with an empty state, the state it carries is
        # counted by the token model as one earlier output.
        prompts = (call_prompt(self, self.prompt, (rec, ""), describe_record(rec)) for item in items for rec in item.inputs)
        return estimate_call_tokens(prompts, carries_state=True)

    def estimate_outputs(self, inputs: Volume) -> Volume:
        return Volume(1 if inputs.records else 0, OUTPUT_CHARS_PER_CALL)

    def estimate_unstored_tokens(self, inputs: Volume, outputs: int) -> int:
        # One call per input (not per output), each carrying the state, as ``estimate_tokens`` counts once
        # the inputs exist.
        if self.prompt is None:
            return 0
        return estimate_unrendered_tokens(inputs.chars, inputs.records, carries_state=True)


class _Calls:
    """The model calls of one fold item: its tokens, and the last call (the state record's audit)."""

    def __init__(self, step: FoldStep, ctx: StepContext, compress_prompt: Callable[[str], str] | None) -> None:
        self.step, self.ctx = step, ctx
        self.compress_prompt = compress_prompt
        self.tokens = 0
        self.last: Completion | None = None
        self.last_prompt = ""
        self.last_fn: Callable[..., str] | None = None

    def complete(self, fn: Callable[..., str], args: tuple[Any, ...], about: str) -> str:
        assert self.ctx.completer is not None
        self.last_fn, self.last_prompt = fn, call_prompt(self.step, fn, args, about)
        self.last = self.ctx.completer.complete_many([self.last_prompt], self.step.model, self.step.temperature)[0]
        self.tokens += self.last.tokens_in + self.last.tokens_out
        return self.last.text

    def compress(self, state: str) -> str:
        """The state rewritten by the step's model (``CompressState``)."""
        from synthex.core.prompts import compress_state

        return self.complete(self.compress_prompt or compress_state, (state,), "the fold's state")
