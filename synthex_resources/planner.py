"""The plan: which (step, period) partitions have work, computed without calling any model.

A partition is dirty when a selected step's expected outputs (materialization keys from the
current upstream records) are not all stored, when it holds stale rows (an old step version, a
half-finished write), when an upstream partition of the same period is dirty, or, for a fold,
when an earlier period is dirty. ``synthex run`` launches Dagster runs only for dirty partitions,
which is what makes a no-change run cheap; ``synthex plan`` shows the same computation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from synthex.core.definition import PipelineDefinition, Plan
from synthex.core.llm import OUTPUT_CHARS_PER_CALL, OUTPUT_TOKENS_PER_CALL, estimate_unrendered_tokens
from synthex.core.naming import check_branch_name
from synthex.core.purges import PurgeLedger
from synthex.core.steps import AggregateStep, FoldStep, MergeStep, SourceStep, Step, TransformStep
from synthex.core.steps.base import visible_work
from synthex_resources.llm import PRICES, LLMConfig
from synthex_resources.record_store import RecordStore
from synthex_resources.step_context import SnapshotContext


@dataclass
class PartitionWork:
    step: str
    period: str
    records: int  # outputs to (re)compute
    tokens: int
    stale: int = 0
    reason: str = ""


@dataclass
class PartitionPlan:
    periods: list[str]
    work: dict[tuple[str, str], PartitionWork] = field(default_factory=dict)



def _uses_llm(step: Step) -> bool:
    return isinstance(step, AggregateStep | FoldStep) or (isinstance(step, TransformStep) and step.prompt is not None)


def compute_partition_plan(pipeline: PipelineDefinition, store: RecordStore, branch: str, selected: list[str],
                           full: bool = False) -> PartitionPlan:
    """Work on ``branch``, run by its own definition (``pipeline.for_branch``). Steps the branch
    inherits (copy-on-write) are read through its parent and never planned here."""
    pipeline = pipeline.for_branch(branch)
    scope = pipeline.scope()
    owned = {s for s in pipeline.steps if scope.owns(s)}
    selected = [s for s in selected if s in owned]
    # Only the selected steps and what they read are loaded: a sensor planning one source of a large
    # project does not read the other sources' records or items.
    needed = {u for s in selected for u in pipeline.upstream(s)}
    snapshot = SnapshotContext.of(store.records.list(scope, steps=sorted(needed)) if needed else [], branch)
    periods = set(snapshot.periods())
    for name in needed:
        step = pipeline.steps[name]
        if isinstance(step, SourceStep):
            periods.update(step.periods())
    plan = PartitionPlan(periods=sorted(periods))
    purged = PurgeLedger(pipeline.data_dir).load()
    expected: dict[tuple[str, str], int] = {}
    chars: dict[tuple[str, str], int] = {}
    for period in plan.periods:
        ctx = snapshot.at(period)
        for name in pipeline.order():
            step = pipeline.steps[name]
            existing = snapshot.ids(name, period)
            up_dirty = any((u, period) in plan.work for u in step.from_)
            prev_dirty = isinstance(step, FoldStep) and any(
                (name, p) in plan.work for p in plan.periods if p < period)
            if name not in selected:
                expected[(name, period)] = len(existing)
                chars[(name, period)] = sum(len(r.content) for r in ctx.upstream(name))
                continue
            if up_dirty or prev_dirty:
                count, size = _estimate_outputs(step, period, expected, chars)
                expected[(name, period)], chars[(name, period)] = count, size
                tokens = _estimate_tokens(step, period, count, expected, chars) if _uses_llm(step) else 0
                if count or existing:
                    plan.work[(name, period)] = PartitionWork(name, period, count, tokens, reason="upstream changed")
                continue
            items = visible_work(step, ctx, purged)
            expected[(name, period)] = len(items)
            if isinstance(step, SourceStep):
                chars[(name, period)] = sum(len(i.payload.content) for i in items)
            else:
                chars[(name, period)] = sum(len(r.content) for r in ctx.upstream(name)) or _estimate_outputs(
                    step, period, expected, chars)[1]
            todo = items if full else [i for i in items if i.id not in existing]
            stale = existing - {i.id for i in items}
            if todo or stale:
                tokens = step.estimate_tokens(todo) if _uses_llm(step) else 0
                reason = "full" if full else ("new or changed inputs" if todo else "stale records")
                plan.work[(name, period)] = PartitionWork(name, period, len(todo), tokens, len(stale), reason)
    return plan


def _estimate_outputs(step: Step, period: str, expected: dict, chars: dict) -> tuple[int, int]:
    """Outputs and their size for a partition whose inputs do not exist yet (a model call's output is
    assumed to be ``OUTPUT_CHARS_PER_CALL`` long, from the shared token model in ``synthex.core.llm``)."""
    up_count = sum(expected.get((u, period), 0) for u in step.from_)
    up_chars = sum(chars.get((u, period), 0) for u in step.from_)
    if isinstance(step, TransformStep):
        return up_count, (up_chars + 60 * up_count) if step.fn else OUTPUT_CHARS_PER_CALL * up_count
    if isinstance(step, MergeStep):
        return up_count, up_chars
    if isinstance(step, AggregateStep):
        groups = 0 if up_count == 0 else {"month": 1, "week": min(up_count, 5), "day": min(up_count, 31)}[step.period]
        return groups, OUTPUT_CHARS_PER_CALL * groups
    if isinstance(step, FoldStep):
        return (1 if up_count else 0), OUTPUT_CHARS_PER_CALL
    return up_count, up_chars


def _estimate_tokens(step: Step, period: str, count: int, expected: dict, chars: dict) -> int:
    """Tokens for a model step whose inputs are not stored yet (the shared token model, unrendered).

    A transform or aggregate makes one call per output; a fold one call per input, each carrying
    the state, as ``FoldStep.estimate_tokens`` counts once the inputs exist.
    """
    up_chars = sum(chars.get((u, period), 0) for u in step.from_)
    if isinstance(step, FoldStep):
        calls = sum(expected.get((u, period), 0) for u in step.from_)
        return estimate_unrendered_tokens(up_chars, calls, carries_state=True)
    return estimate_unrendered_tokens(up_chars, count)


def plan_pipeline(pipeline: PipelineDefinition, branch: str = "main", step: str | None = None, from_: str | None = None,
                  full: bool = False, *, store: RecordStore) -> Plan:
    check_branch_name(branch)
    pipeline = pipeline.for_branch(branch)
    selected = pipeline.select(step, from_)
    pplan = compute_partition_plan(pipeline, store, branch, selected, full)
    llm = LLMConfig()
    offline = llm.is_offline()
    default_model = llm.resolved()["model"]
    per_step: dict[str, dict] = {}
    total_records = total_tokens = 0
    total_cost = 0.0
    for name in pipeline.order():
        works = [w for (s, _), w in sorted(pplan.work.items()) if s == name]
        if not works:
            continue
        st = pipeline.steps[name]
        model = getattr(st, "model", None) or default_model
        records = sum(w.records for w in works)
        tokens = sum(w.tokens for w in works)
        price_in, price_out = (0.0, 0.0) if offline or not _uses_llm(st) else PRICES.get(model, (0.0, 0.0))
        out_tokens = records * OUTPUT_TOKENS_PER_CALL if _uses_llm(st) else 0
        cost = (max(tokens - out_tokens, 0) * price_in + out_tokens * price_out) / 1e6
        per_step[name] = {"kind": st.kind, "periods": [w.period for w in works], "records": records,
                          "stale": sum(w.stale for w in works), "tokens": tokens, "cost": round(cost, 6),
                          "model": (f"offline stand-in (configured: {model})" if offline else model)
                          if _uses_llm(st) else None}
        total_records += records
        total_tokens += tokens
        total_cost += cost
    return Plan(
        branch=branch,
        steps=list(per_step),
        partitions={k: v["periods"] for k, v in per_step.items()},
        estimates={"records": total_records, "tokens": total_tokens, "cost": round(total_cost, 4),
                   "offline": offline},
        per_step=per_step,
        periods=pplan.periods,
    )
