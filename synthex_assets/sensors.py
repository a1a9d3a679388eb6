"""Sensors and the reconcile schedule that keep memory in sync with its sources.

One sensor per source step: each tick asks the source for its change token (a stat, a row count and
watermark, a stream's size) and stops there when it is unchanged, so an idle tick costs no run and no
store access. When it changed, the CDC state (``synthex_resources.cdc_state``, in DuckDB through
dagster-duckdb's ``DuckDBResource``) says what is new, changed or deleted, the planner says which
(branch, period) partitions of which steps that makes dirty (downstream steps included), and the
sensor registers new period partitions and requests one run per branch over only those partitions.
The nightly reconcile schedule does the same for every source without the token shortcut.

Both apply the deletion guard (``synthex.core.deletions``) before requesting anything: a source whose
deletions are held back (an export emptied, a snapshot shrunk by more than 20 %) gets no run and its
change is not committed, so every tick says the guard's line again (the tick log, the SkipReason) until
the source is restored or a run with ``--allow-deletions`` applies it; ``synthex status`` lists it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dagster import (
    AddDynamicPartitionsRequest,
    AssetKey,
    DagsterInstance,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunRequest,
    ScheduleDefinition,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    schedule,
    sensor,
)
from dagster_duckdb import DuckDBResource

from synthex.core.definition import PipelineDefinition
from synthex.core.deletions import DeletionVerdict, refusal_line
from synthex_assets.dagster_internals import partition_range_tags
from synthex_assets.naming import asset_name, job_name
from synthex_assets.partitions import register
from synthex_resources.cdc_state import CdcState, SourceChanges
from synthex_resources.record_store import open_store
from synthex_resources.source_sync import (
    BranchWork,
    all_branches,
    commit_changes,
    detect_changes,
    held_back,
    pending_work,
)

SENSOR_INTERVAL_S = 30  # how often Dagster's daemon ticks each source sensor
RECONCILE_CRON = "0 3 * * *"  # nightly
TRIGGER_TAG = "synthex/trigger"


def sensor_name(source: str) -> str:
    return f"{asset_name(source)}_changes"


def run_requests(pipeline: PipelineDefinition, work: list[BranchWork], known_periods: list[str],
                 trigger: str) -> tuple[list[RunRequest], list[str], list[str]]:
    """One run request per branch over its dirty steps and the partition range holding its dirty
    periods; the periods and branches to register first (dynamic partitions keep insertion order, so
    new periods come after the known ones)."""
    new_periods = sorted({p for w in work for p in w.all_periods} - set(known_periods))
    order = {p: i for i, p in enumerate([*known_periods, *new_periods])}
    requests = []
    for w in work:
        ranked = sorted(w.periods, key=lambda p: order[p])
        requests.append(RunRequest(
            asset_selection=[AssetKey(asset_name(s)) for s in w.steps],
            tags={**partition_range_tags(f"{w.branch}|{ranked[0]}", f"{w.branch}|{ranked[-1]}"),
                  TRIGGER_TAG: trigger}))
    return requests, new_periods, sorted({w.branch for w in work} | {"main"})


@dataclass
class TickPlan:
    requests: list[RunRequest]
    new_periods: list[str]  # to register before the runs name them
    branches: list[str]
    held_back: list[DeletionVerdict]  # sources whose deletions the guard holds back (their branch gets no run)

    @property
    def held_sources(self) -> set[str]:
        return {v.source for v in self.held_back}


def plan_requests(pipeline: PipelineDefinition, instance: DagsterInstance, trigger: str,
                  from_: str | None) -> TickPlan:
    """The runs that bring every branch up to date (``from_``: this source and what is downstream),
    except on a branch where a source's deletions are held back."""
    store = open_store(pipeline.store_uri)
    try:
        held = held_back(pipeline, store, [from_] if from_ else None)
        blocked = {v.branch for v in held}
        work = pending_work(pipeline, store, [b for b in all_branches(pipeline) if b not in blocked], from_=from_)
    finally:
        store.close()
    return TickPlan(*run_requests(pipeline, work, instance.get_dynamic_partitions("period"), trigger), held)


def _detect(cdc: DuckDBResource, pipeline: PipelineDefinition, sources: list[str] | None) -> list[SourceChanges]:
    Path(cdc.database).parent.mkdir(parents=True, exist_ok=True)
    with cdc.get_connection() as conn:  # held for the comparison only, never while planning
        return detect_changes(pipeline, CdcState(conn), sources)


def _commit(cdc: DuckDBResource, pipeline: PipelineDefinition, changes: list[SourceChanges]) -> None:
    with cdc.get_connection() as conn:
        commit_changes(pipeline, CdcState(conn), changes)


def build_source_sensor(pipeline: PipelineDefinition, source: str) -> SensorDefinition:
    @sensor(name=sensor_name(source), job_name=job_name(pipeline.name), minimum_interval_seconds=SENSOR_INTERVAL_S,
            default_status=DefaultSensorStatus.RUNNING,
            description=f"Syncs source `{source}` of pipeline `{pipeline.name}`: requests runs of the partitions "
                        f"its changes make dirty (downstream steps included).")
    def _source_sensor(context: SensorEvaluationContext, cdc: DuckDBResource) -> SensorResult | SkipReason:
        (change,) = _detect(cdc, pipeline, [source])
        for note in change.notes():  # lines set aside, lines left for the next tick: in the tick's log too
            context.log.warning(f"{source}: {note}")
        if not change.any:
            if not change.token_unchanged:
                _commit(cdc, pipeline, [change])  # a new token for the same items (a touch): remember it
            return SkipReason(change.summary())
        plan = plan_requests(pipeline, context.instance, f"sensor:{source}", source)
        if plan.held_back:  # not committed: the next tick judges again (and says so again)
            line = refusal_line(plan.held_back)
            context.log.warning(line)
            return SkipReason(line)
        _commit(cdc, pipeline, [change])  # the runs are requested; a failed run is repaired by the next reconcile
        context.log.info(change.summary())
        return SensorResult(
            run_requests=plan.requests, cursor=change.token,
            dynamic_partitions_requests=[AddDynamicPartitionsRequest("period", plan.new_periods),
                                         AddDynamicPartitionsRequest("branch", plan.branches)])

    return _source_sensor


def build_reconcile_schedule(pipeline: PipelineDefinition) -> ScheduleDefinition:
    @schedule(name=f"{job_name(pipeline.name)}_reconcile", job_name=job_name(pipeline.name),
              cron_schedule=RECONCILE_CRON, default_status=DefaultScheduleStatus.RUNNING,
              description="Nightly: every source compared in full and every branch planned; runs whatever is "
                          "dirty (repairs a run that failed after its sensor tick).")
    def _reconcile(context, cdc: DuckDBResource) -> list[RunRequest] | SkipReason:
        changes = _detect(cdc, pipeline, None)
        plan = plan_requests(pipeline, context.instance, "reconcile", None)
        for branch in plan.branches:  # the runs below name these partitions: they must exist first
            register(context.instance, branch, plan.new_periods)
        _commit(cdc, pipeline, [c for c in changes if c.source not in plan.held_sources])
        if plan.held_back:
            context.log.warning(refusal_line(plan.held_back))
        return plan.requests or SkipReason(refusal_line(plan.held_back) if plan.held_back
                                           else "every branch is up to date")

    return _reconcile


def build_live_definitions(pipeline: PipelineDefinition) -> tuple[list[SensorDefinition], list[ScheduleDefinition]]:
    sensors = [build_source_sensor(pipeline, s) for s in pipeline.source_steps()]
    return sensors, [build_reconcile_schedule(pipeline)]


