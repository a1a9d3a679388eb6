"""The plan: which (step, period) partitions have work, computed without calling any model.

A partition is dirty when a selected step's expected outputs (materialization keys from the
current upstream records) are not all stored, when it holds stale rows (an old step version, a
half-finished write), when an upstream partition of the same period is dirty, or, for a fold,
when an earlier period is dirty. What depends on the step's kind (a model's tokens, the size of outputs
not computed yet, a source's periods, a fold's chain) the step answers itself (``synthex.core.steps.base``).
``synthex run`` launches Dagster runs only for dirty partitions,
which is what makes a no-change run cheap; ``synthex plan`` shows the same computation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from synthex.core.definition import PipelineDefinition, Plan
from synthex.core.llm import OUTPUT_TOKENS_PER_CALL
from synthex.core.naming import check_branch_name
from synthex.core.purges import PurgeLedger
from synthex.core.steps import Step, Volume
from synthex.core.steps.base import visible_work
from synthex_resources.llm import PRICES, LLMConfig
from synthex_resources.record_store import RecordStore
from synthex_resources.step_context import SnapshotContext


class PlanReason(StrEnum):
    """Why a partition has work; the value is how plans and check details say it."""

    FULL = "full"  # a full run recomputes everything
    NEW_INPUTS = "new or changed inputs"  # expected outputs not stored yet
    STALE = "stale records"  # stored outputs no longer expected (an old version, a deleted input)
    UPSTREAM_CHANGED = "upstream changed"  # an input partition (or a fold's earlier period) has work


@dataclass
class PartitionWork:
    step: str
    period: str
    records: int  # outputs to (re)compute
    tokens: int
    stale: int = 0
    reason: PlanReason = PlanReason.NEW_INPUTS


@dataclass
class PartitionPlan:
    periods: list[str]
    work: dict[tuple[str, str], PartitionWork] = field(default_factory=dict)
    records_read: int = 0  # stored records the plan loaded (what a plan of some periods keeps small)


def periods_plannable_alone(pipeline: PipelineDefinition, steps: list[str]) -> bool:
    """Whether the work of a period of ``steps`` (and of what they read) depends only on that period: no
    step among them reads its own earlier periods (a fold) or the inputs of every period (a key
    aggregate). Then a plan of some periods is exactly the full plan's work in those periods."""
    return not any(pipeline.steps[s].sequential_periods or pipeline.steps[s].single_partition_period() is not None
                   for s in steps)


def compute_partition_plan(pipeline: PipelineDefinition, store: RecordStore, branch: str, selected: list[str],
                           full: bool = False, periods: list[str] | None = None) -> PartitionPlan:
    """Work on ``branch``, run by its own definition (``pipeline.for_branch``). Steps the branch
    inherits (copy-on-write) are read through its parent and never planned here.

    ``periods``: plan only these (the periods a source change touched, the periods a run wrote), reading
    only their records, so the plan's cost follows the change, not the store; exact when the steps'
    periods are independent (``periods_plannable_alone``), otherwise every period is planned. A plan of
    some periods lists only those in ``PartitionPlan.periods``."""
    pipeline = pipeline.for_branch(branch)
    scope = pipeline.scope()
    owned = {s for s in pipeline.steps if scope.owns(s)}
    selected = [s for s in selected if s in owned]
    # Only the selected steps and what they read are loaded: a sensor planning one source of a large
    # project does not read the other sources' records or items.
    needed = {u for s in selected for u in pipeline.upstream(s)}
    only = set(periods) if periods is not None and periods_plannable_alone(pipeline, sorted(needed)) else None
    if not needed or only == set():
        stored = []
    elif only is None:
        stored = store.records.list(scope, steps=sorted(needed))
    else:
        stored = store.records.list_periods(scope, sorted(needed), sorted(only))
    snapshot = SnapshotContext.of(stored, branch)
    periods = set(snapshot.periods())
    spans = set()  # the partitions of steps whose records span every period (key aggregates): planned last
    for name in needed:
        periods.update(pipeline.steps[name].periods())  # a source's items' periods; other steps have none
        span = pipeline.steps[name].single_partition_period()
        if span is not None:
            spans.add(span)
    if only is not None:
        periods &= only
    plan = PartitionPlan(periods=sorted(periods | spans, key=lambda p: (p in spans, p)), records_read=len(stored))
    purged = PurgeLedger(pipeline.data_dir).load()
    expected: dict[tuple[str, str], int] = {}
    chars: dict[tuple[str, str], int] = {}
    for period in plan.periods:
        ctx = snapshot.at(period)
        for name in pipeline.order():
            step = pipeline.steps[name]
            existing = snapshot.ids(name, period)
            span = step.single_partition_period()
            if span is not None and period != span:
                # Its records live in the one partition ``span``; any left here (it was a time aggregate) go.
                expected[(name, period)], chars[(name, period)] = 0, 0
                if name in selected and existing:
                    plan.work[(name, period)] = PartitionWork(name, period, 0, 0, len(existing), PlanReason.STALE)
                continue
            # What the step reads: its inputs of this period, or of every period for a spanning step.
            reads = plan.periods if span is not None else [period]
            up_dirty = any((u, p) in plan.work for u in step.from_ for p in reads)
            prev_dirty = step.sequential_periods and any(
                (name, p) in plan.work for p in plan.periods if p < period)
            if name not in selected:
                expected[(name, period)] = len(existing)
                chars[(name, period)] = sum(len(r.content) for r in ctx.upstream(name))
                continue
            if up_dirty or prev_dirty:
                inputs = _input_volume(step, reads, expected, chars)
                out = step.estimate_outputs(inputs)
                expected[(name, period)], chars[(name, period)] = out.records, out.chars
                tokens = step.estimate_unstored_tokens(inputs, out.records)
                if out.records or existing:
                    plan.work[(name, period)] = PartitionWork(name, period, out.records, tokens,
                                                              reason=PlanReason.UPSTREAM_CHANGED)
                continue
            items = visible_work(step, snapshot.spanning(period) if span is not None else ctx, purged)
            expected[(name, period)] = len(items)
            known = step.output_chars(items)
            chars[(name, period)] = known if known is not None else (
                sum(len(r.content) for r in ctx.upstream(name))
                or step.estimate_outputs(_input_volume(step, reads, expected, chars)).chars)
            todo = items if full else [i for i in items if i.id not in existing]
            stale = existing - {i.id for i in items}
            if todo or stale:
                tokens = step.estimate_tokens(todo) if step.uses_model() else 0
                reason = PlanReason.FULL if full else (PlanReason.NEW_INPUTS if todo else PlanReason.STALE)
                plan.work[(name, period)] = PartitionWork(name, period, len(todo), tokens, len(stale), reason)
    return plan


def _input_volume(step: Step, periods: list[str], expected: dict, chars: dict) -> Volume:
    """What a step reads in ``periods``: its inputs' expected records and characters (stored or estimated)."""
    return Volume(sum(expected.get((u, p), 0) for u in step.from_ for p in periods),
                  sum(chars.get((u, p), 0) for u in step.from_ for p in periods))


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
        uses_model = st.uses_model()
        price_in, price_out = (0.0, 0.0) if offline or not uses_model else PRICES.get(model, (0.0, 0.0))
        out_tokens = records * OUTPUT_TOKENS_PER_CALL if uses_model else 0
        cost = (max(tokens - out_tokens, 0) * price_in + out_tokens * price_out) / 1e6
        per_step[name] = {"kind": st.kind, "periods": [w.period for w in works], "records": records,
                          "stale": sum(w.stale for w in works), "tokens": tokens, "cost": round(cost, 6),
                          "model": (f"offline stand-in (configured: {model})" if offline else model)
                          if uses_model else None}
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
