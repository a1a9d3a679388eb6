"""Transform: strictly one record in, one record out (design doc §3.5, no batching in v1)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from synthex.core.errors import PipelineDefinitionError
from synthex.core.hashing import fingerprint
from synthex.core.llm import OUTPUT_CHARS_PER_CALL, estimate_call_tokens
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


@dataclass
class TransformStep(ModelStep):
    """``prompt(record) -> str`` is sent to the model; ``fn(record) -> str`` is plain Python, no model."""

    prompt: Callable[[Record], str] | None = None
    fn: Callable[[Record], str] | None = None
    kind: ClassVar[str] = "transform"

    def __post_init__(self) -> None:
        if (self.prompt is None) == (self.fn is None):
            raise PipelineDefinitionError(f"transform {self.name!r}: give exactly one of prompt= or fn=")
        if len(self.from_) != 1:
            raise PipelineDefinitionError(f"transform {self.name!r}: takes exactly one input step (from_)")

    def config(self) -> dict[str, Any]:
        return super().config() | {"fn": callable_ref(self.fn)}

    def _code_hashes(self) -> dict[str, str | None]:
        return super()._code_hashes() | {"fn": self.source_hashes.of(self.fn)}

    def work(self, ctx: StepContext) -> list[WorkItem]:
        inputs = ctx.upstream(self.from_[0])
        version = self.version_hash()
        return [self.item(ctx, [fingerprint(r.content)], r.id, version, inputs=[r]) for r in inputs]

    def _metadata(self, source: Record) -> dict[str, Any]:
        return {k: v for k, v in source.metadata.items() if k in ("time", "chat", "source", "custom")}

    def produce(self, items: list[WorkItem], ctx: StepContext) -> tuple[list[Record], int]:
        if self.fn is not None:
            out = []
            for item in items:
                content = call_prompt(self, self.fn, (item.inputs[0],), describe_record(item.inputs[0]))
                out.append(self.make_record(ctx, item, content, self._metadata(item.inputs[0]),
                                            Audit.of_python(self.fn, self.source_hashes)))
                ctx.progress(1)
            return out, 0
        assert self.prompt is not None and ctx.completer is not None
        rendered = [call_prompt(self, self.prompt, (i.inputs[0],), describe_record(i.inputs[0])) for i in items]
        completions = ctx.completer.complete_many(rendered, self.model, self.temperature)
        out, tokens = [], 0
        for item, prompt_text, completion in zip(items, rendered, completions, strict=True):
            audit = Audit.of_completion(self.prompt, prompt_text, completion, self.temperature, self.source_hashes)
            out.append(self.make_record(ctx, item, completion.text, self._metadata(item.inputs[0]), audit))
            tokens += completion.tokens_in + completion.tokens_out
            ctx.progress(1)
        return out, tokens

    def uses_model(self) -> bool:
        return self.prompt is not None

    def estimate_outputs(self, inputs: Volume) -> Volume:
        # fn=: about as long as its input plus a header line; prompt=: one model output per input.
        chars = inputs.chars + 60 * inputs.records if self.fn else OUTPUT_CHARS_PER_CALL * inputs.records
        return Volume(inputs.records, chars)

    def estimate_tokens(self, items: list[WorkItem]) -> int:
        if self.prompt is None:
            return 0
        return estimate_call_tokens(call_prompt(self, self.prompt, (i.inputs[0],), describe_record(i.inputs[0])) for i in items)
