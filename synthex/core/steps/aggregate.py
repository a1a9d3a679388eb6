"""Aggregate: reduce groups of records to one record each, groups made by time or by key (design doc §3.5).

- By time (``period=`` alone): a month partition's records grouped by month/week/day.
- By key (``by=``, a key function or the name of one, ``synthex.core.steps.group_keys``): one record per
  key, a record joining every group its key function names. Without ``period=`` a key group spans every
  period: the step's records all live in the one partition ``ALL_PERIODS`` ("all") of each branch, made
  from its inputs of every period. With ``period=`` too, one record per key and period group, inside the
  month partitions like a time aggregate.

Each group is one work item keyed by its members (id and content), so a new or changed member changes
only its groups' keys: the other groups keep their ids and are not recomputed. ``prompt(records, group)``
is sent to the model, or ``fn(records, group)`` is plain Python (no model); ``group`` is the period
label for a time aggregate, a ``KeyGroup`` (``str()`` is the key) for a key aggregate.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from synthex.core.errors import PipelineDefinitionError
from synthex.core.hashing import input_print
from synthex.core.limits import Limits
from synthex.core.llm import OUTPUT_CHARS_PER_CALL, estimate_call_tokens
from synthex.core.periods import ALL_PERIODS, PERIOD_KINDS, group_label
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
from synthex.core.steps.group_keys import KeyFunction, KeyGroup, keys_of, resolve_key_function

# The planner's guess of a key aggregate's groups when its inputs are not stored yet (one per this many).
ESTIMATED_MEMBERS_PER_KEY = 10


@dataclass
class AggregateStep(ModelStep):
    """``prompt(records, group) -> str`` (or ``fn=``, no model); one output per period or key group."""

    prompt: Callable[[list[Record], Any], str] | None = None
    fn: Callable[[list[Record], Any], str] | None = None
    period: str | None = None  # default "month" without by=; None with by=: the group spans every period
    by: str | KeyFunction | None = None
    kind: ClassVar[str] = "aggregate"
    _limits: Limits = field(default_factory=Limits, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.prompt is None and self.fn is None:
            self.require_prompt()
        if self.prompt is not None and self.fn is not None:
            raise PipelineDefinitionError(f"aggregate {self.name!r}: give exactly one of prompt= or fn=")
        if self.by is None and self.period is None:
            self.period = "month"
        if self.period is not None and self.period not in PERIOD_KINDS:
            raise PipelineDefinitionError(
                f"aggregate {self.name!r}: period={self.period!r}; expected one of {', '.join(PERIOD_KINDS)}"
            )
        self.by_name, self.key_fn = (resolve_key_function(self.by, f"aggregate {self.name!r}")
                                     if self.by is not None else ("", None))

    def use_limits(self, limits: Limits) -> None:
        self._limits = limits  # bounds the keys records are grouped by

    # -- identity -------------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        # A time aggregate with prompt= keeps the config (so the version and ids) it always had.
        out = super().config() | {"period": self.period}
        if self.fn is not None:
            out["fn"] = callable_ref(self.fn)
        if self.key_fn is not None:
            out["by"] = self.by_name
        return out

    def _code_hashes(self) -> dict[str, str | None]:
        out = super()._code_hashes()
        if self.fn is not None:
            out["fn"] = self.source_hashes.of(self.fn)
        if self.key_fn is not None and not isinstance(self.by, str):
            out["by"] = self.source_hashes.of(self.key_fn)  # editing the key function regroups
        return out

    def toml_config(self) -> dict[str, Any]:
        # A named key is written as its name, a key function as module:qualname (like prompt= and fn=).
        return super().toml_config() | ({"by": self.by_name} if self.key_fn is not None else {})

    def single_partition_period(self) -> str | None:
        return ALL_PERIODS if self.key_fn is not None and self.period is None else None

    def uses_model(self) -> bool:
        return self.prompt is not None

    # -- semantics -----------------------------------------------------------------------------
    def work(self, ctx: StepContext) -> list[WorkItem]:
        span = self.single_partition_period()
        if span is not None and ctx.period != span:
            return []  # a key group spanning periods lives in the one partition "all"
        groups: dict[str, list[Record]] = defaultdict(list)
        labels: dict[str, tuple[str, str | None]] = {}
        for name in self.from_:
            for rec in ctx.upstream(name):
                label = group_label(rec.meta("time.created_at") or rec.created_at, self.period) if self.period else None
                if self.key_fn is None:
                    assert label is not None
                    groups[label].append(rec)
                    continue
                about = f"step {self.name!r}: {describe_record(rec)}"
                for key in keys_of(rec, self.key_fn, self.by_name, self._limits, about):
                    group = key if label is None else f"{label}|{key}"
                    groups[group].append(rec)
                    labels[group] = (key, label)
        items = []
        version = self.version_hash()
        for group in sorted(groups):
            members = sorted(groups[group], key=lambda r: (r.meta("time.created_at") or "", r.id))
            payload = KeyGroup(labels[group][0], self.by_name, labels[group][1]) if self.key_fn else group
            items.append(self.item(ctx, [input_print(r.id, r.content) for r in members], group, version,
                                   inputs=members, payload=payload))
        return items

    def _render(self, fn: Callable[..., str], item: WorkItem) -> str:
        about = f"key {str(item.payload)!r}" if self.key_fn is not None else f"period {item.group_key}"
        return call_prompt(self, fn, (item.inputs, item.payload), about)

    def _metadata(self, item: WorkItem) -> dict[str, Any]:
        latest = max((r.meta("time.created_at") or "") for r in item.inputs)
        if self.key_fn is None:
            return {"time": {"created_at": latest, "period": item.group_key}, "custom": {"inputs": len(item.inputs)}}
        group: KeyGroup = item.payload
        meta: dict[str, Any] = {
            "time": {"created_at": latest, "period": group.period or ALL_PERIODS,
                     "first": min((r.meta("time.created_at") or "") for r in item.inputs)},
            "group": {"key": group.key, "by": group.by, "members": len(item.inputs)},
            "custom": {"inputs": len(item.inputs)},
        }
        # What every member shares of its conversation is the group's too (a search may filter by it).
        conversations = {r.meta("chat.conversation_id") for r in item.inputs}
        if len(conversations) == 1 and None not in conversations:
            meta["chat"] = {"conversation_id": conversations.pop()}
        return meta

    def produce(self, items: list[WorkItem], ctx: StepContext) -> tuple[list[Record], int]:
        out: list[Record] = []
        if self.fn is not None:
            for item in items:
                out.append(self.make_record(ctx, item, self._render(self.fn, item), self._metadata(item),
                                            Audit.of_python(self.fn, self.source_hashes)))
                ctx.progress(1)
            return out, 0
        assert self.prompt is not None and ctx.completer is not None
        rendered = [self._render(self.prompt, i) for i in items]
        completions = ctx.completer.complete_many(rendered, self.model, self.temperature)
        tokens = 0
        for item, text, completion in zip(items, rendered, completions, strict=True):
            audit = Audit.of_completion(self.prompt, text, completion, self.temperature, self.source_hashes)
            out.append(self.make_record(ctx, item, completion.text, self._metadata(item), audit))
            tokens += completion.tokens_in + completion.tokens_out
            ctx.progress(1)
        return out, tokens

    def estimate_tokens(self, items: list[WorkItem]) -> int:
        if self.prompt is None:
            return 0
        return estimate_call_tokens(self._render(self.prompt, i) for i in items)

    def estimate_outputs(self, inputs: Volume) -> Volume:
        n = inputs.records
        if self.key_fn is not None:
            # Keys are unknown until the inputs exist: a guess, corrected by the plan once they are stored.
            groups = 0 if n == 0 else max(1, n // ESTIMATED_MEMBERS_PER_KEY)
        else:
            # One output per group of a month partition: 1 month, at most 5 weeks, at most 31 days.
            groups = 0 if n == 0 else {"month": 1, "week": min(n, 5), "day": min(n, 31)}[self.period or "month"]
        chars = OUTPUT_CHARS_PER_CALL * groups if self.fn is None else inputs.chars
        return Volume(groups, chars)
