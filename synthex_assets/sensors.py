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

A sensor's cursor (shown, and editable, in the UI) is JSON a user can read and act on: the source, where
it is (relative to the project), its item count, when it last changed (ISO), when it was last synced and
what the last change was (``SourceCursor``). It is a report, not the state: the CDC state in DuckDB is
what a tick compares with, so editing or clearing the cursor never loses or replays a change; a cursor
of an earlier version (the raw change token) is replaced by the JSON one at the next tick.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dagster import (
    AddDynamicPartitionsRequest,
    AssetSelection,
    AutomationConditionSensorDefinition,
    DagsterInstance,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    DeleteDynamicPartitionsRequest,
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
from synthex_assets.naming import DagsterNames
from synthex_assets.partitions import register
from synthex_assets.run_tags import (
    LAUNCHED_BY_AUTOMATION,
    LAUNCHED_BY_SCHEDULE,
    LAUNCHED_BY_SENSOR,
    LAUNCHED_BY_TAG,
    branch_tags,
    invented_keys,
    project_branches,
)
from synthex_assets.step_assets import WORKERS_TAG
from synthex_resources.cdc_state import CdcState, SourceChanges, SourceState
from synthex_resources.record_store import open_store
from synthex_resources.source_sync import (
    BranchWork,
    all_branches,
    commit_changes,
    detect_changes,
    held_back,
    pending_work,
)

RECONCILE_CRON = "0 3 * * *"  # nightly
TRIGGER_TAG = "synthex/trigger"


def sensor_name(source: str, names: DagsterNames | None = None) -> str:
    """The source sensor's name (in ``names``' namespace; None: an unnamespaced memory's)."""
    return (names or DagsterNames("")).source_sensor(source)


CURSOR_FORMAT = 1


@dataclass(frozen=True)
class LastChange:
    """What the last tick that found a change saw (counts of items, the periods they touch)."""

    new: int
    changed: int
    deleted: int
    periods: list[str]


@dataclass(frozen=True)
class SourceCursor:
    """A source sensor's cursor, as JSON in the UI: what the sensor last saw of its source."""

    source: str
    where: str  # the file, folder or stream relative to the project (absolute outside it); dsn#table; api:name
    items: int  # items the source held when it was last synced
    modified_at: str | None  # when the source last changed (the newest file's mtime; a table's newest updated_at)
    synced_at: str | None  # when its state was last committed (a sensor tick, `synthex run` / `sync`)
    last_change: LastChange | None = None  # None: no tick has seen a change since the cursor was written
    format: int = CURSOR_FORMAT

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=False)

    @classmethod
    def parse(cls, text: str | None) -> SourceCursor | None:
        """The cursor ``text`` holds; None when there is none or it is of an earlier version (the raw change
        token: a tuple's repr with absolute paths and nanoseconds, a stream's ``dev:inode:size:mtime``, a
        table's ``w:count:newest``), which the tick then replaces. Never raises: the cursor is editable."""
        if not text:
            return None
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("format") != CURSOR_FORMAT:
            return None
        try:
            last = data.get("last_change")
            return cls(source=str(data["source"]), where=str(data["where"]), items=int(data["items"]),
                       modified_at=data.get("modified_at"), synced_at=data.get("synced_at"),
                       last_change=LastChange(**last) if isinstance(last, dict) else None)
        except (KeyError, TypeError, ValueError):
            return None


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _where(origin: Any, project_dir: Path) -> str:
    path = getattr(origin, "path", None)  # files, folders, streams (a BoundedOrigin passes it through)
    if isinstance(path, Path):
        try:
            return str(path.resolve().relative_to(project_dir))
        except ValueError:
            return str(path)
    return origin.describe()


def _modified_at(origin: Any, watermark: str | None) -> str | None:
    """When the source last changed: a table's watermark, else the newest mtime of the files it reads."""
    if watermark:
        return watermark
    path = getattr(origin, "path", None)
    if not isinstance(path, Path):
        return None
    from synthex.core.importers.base import source_files

    try:
        files = source_files(path)
        return _iso(max(f.stat().st_mtime for f in files)) if files else None
    except (OSError, ValueError):
        return None


def source_cursor(pipeline: PipelineDefinition, state: SourceState | None, change: SourceChanges | None,
                  previous: SourceCursor | None) -> SourceCursor | None:
    """The cursor for a source's committed ``state``; ``change``: what this tick found (else the last
    change the ``previous`` cursor recorded is kept)."""
    if state is None:
        return None
    root = pipeline.root()
    origin = root.steps[state.source].reader()  # type: ignore[attr-defined]
    last = previous.last_change if previous and previous.source == state.source else None
    if change is not None and change.any:
        last = LastChange(len(change.new), len(change.changed), len(change.deleted), list(change.periods))
    return SourceCursor(source=state.source, where=_where(origin, root.project_dir), items=state.items,
                        modified_at=_modified_at(origin, state.watermark), synced_at=state.synced_at,
                        last_change=last)


def run_requests(pipeline: PipelineDefinition, work: list[BranchWork], known_periods: list[str],
                 trigger: str, door: str = LAUNCHED_BY_SENSOR) -> tuple[list[RunRequest], list[str], list[str]]:
    """One run request per branch over its dirty steps and the partition range holding its dirty
    periods, tagged with its branch and ``door`` (synthex_assets.run_tags) and the pipeline's ingest workers
    (``synthex/workers``, when above 1); the periods
    and branches to register first (dynamic partitions keep insertion order, so new periods come after
    the known ones)."""
    new_periods = sorted({p for w in work for p in w.all_periods} - set(known_periods))
    order = {p: i for i, p in enumerate([*known_periods, *new_periods])}
    requests = []
    names = DagsterNames.of(pipeline)
    # the pipeline's declared ingest processes, said on the request (seen in the UI's run tags)
    workers_tags = {WORKERS_TAG: str(pipeline.ingest_workers)} if pipeline.ingest_workers > 1 else {}
    for w in work:
        ranked = sorted(w.periods, key=lambda p: order[p])
        requests.append(RunRequest(
            asset_selection=[names.asset_key(s) for s in w.steps],
            tags={**partition_range_tags(f"{w.branch}|{ranked[0]}", f"{w.branch}|{ranked[-1]}"),
                  TRIGGER_TAG: trigger, **branch_tags(w.branch, door, names.memory), **names.run_tags,
                  **workers_tags}))
    return requests, new_periods, sorted({w.branch for w in work} | {"main"})


@dataclass
class TickPlan:
    requests: list[RunRequest]
    new_periods: list[str]  # to register before the runs name them
    branches: list[str]
    held_back: list[DeletionVerdict]  # sources whose deletions the guard holds back (their branch gets no run)
    records_read: int = 0  # stored records the plans loaded (a tick's: the changed periods' only)

    @property
    def held_sources(self) -> set[str]:
        return {v.source for v in self.held_back}


def plan_requests(pipeline: PipelineDefinition, instance: DagsterInstance, trigger: str,
                  from_: str | None, periods: list[str] | None = None, door: str = LAUNCHED_BY_SENSOR) -> TickPlan:
    """The runs that bring every branch up to date (``from_``: this source and what is downstream;
    ``periods``: in these periods only), except on a branch where a source's deletions are held back."""
    store = open_store(pipeline.store_uri)
    try:
        held = held_back(pipeline, store, [from_] if from_ else None)
        blocked = {v.branch for v in held}
        work = pending_work(pipeline, store, [b for b in all_branches(pipeline) if b not in blocked], from_=from_,
                            periods=periods)
    finally:
        store.close()
    known = instance.get_dynamic_partitions(DagsterNames.of(pipeline).period_partitions)
    return TickPlan(*run_requests(pipeline, work, known, trigger, door), held,
                    records_read=sum(w.records_read for w in work))


def _detect(cdc: DuckDBResource, pipeline: PipelineDefinition, sources: list[str] | None) -> list[SourceChanges]:
    Path(cdc.database).parent.mkdir(parents=True, exist_ok=True)
    with cdc.get_connection() as conn:  # held for the comparison only, never while planning
        return detect_changes(pipeline, CdcState(conn), sources)


def _detect_source(cdc: DuckDBResource, pipeline: PipelineDefinition,
                   source: str) -> tuple[SourceChanges, SourceState | None]:
    """What changed in ``source``, and its committed state (for the cursor), over one connection."""
    Path(cdc.database).parent.mkdir(parents=True, exist_ok=True)
    with cdc.get_connection() as conn:
        cdc_state = CdcState(conn)
        (change,) = detect_changes(pipeline, cdc_state, [source])
        return change, cdc_state.source_state(source, change.origin)


def _commit(cdc: DuckDBResource, pipeline: PipelineDefinition, changes: list[SourceChanges]) -> list[SourceState]:
    """Commit ``changes``; the sources' committed states."""
    with cdc.get_connection() as conn:
        cdc_state = CdcState(conn)
        commit_changes(pipeline, cdc_state, changes)
        return [s for c in changes if (s := cdc_state.source_state(c.source, c.origin)) is not None]


def _update_cursor(context: SensorEvaluationContext, pipeline: PipelineDefinition, state: SourceState | None,
                   change: SourceChanges, committed: bool) -> None:
    """Write the readable cursor when this tick committed a change, or the cursor is missing, of an earlier
    version or behind the committed state (a `synthex run` or `sync` committed since). An idle tick whose
    cursor is current writes nothing."""
    previous = SourceCursor.parse(context.cursor)
    if state is None:
        return
    if (previous is not None and not committed and previous.source == state.source
            and previous.synced_at == state.synced_at and previous.items == state.items):
        return
    cursor = source_cursor(pipeline, state, change if committed else None, previous)
    if cursor is not None:
        context.update_cursor(cursor.to_json())


# Dagster's sensor daemon evaluates sensors on a 5 s loop (dagster/_daemon/sensor.py, MIN_INTERVAL_LOOP_TIME)
# and skips a sensor whose last tick began less than its minimum interval ago. A tick begins a little later or
# earlier in its loop as the sensors evaluated before it take more or less time, so an interval equal to the
# loop skipped every other loop about half the time (a demo daemon's ticks: 56 gaps of 5 s, 56 of 10 s).
# Asking Dagster for one second less keeps the configured period: every loop for 5 s, every 2nd for 10 s.
def daemon_minimum_interval(sensor_interval_s: int) -> int:
    """The ``minimum_interval_seconds`` a sensor configured for ``sensor_interval_s`` is given."""
    return max(1, sensor_interval_s - 1)


def build_source_sensor(pipeline: PipelineDefinition, source: str) -> SensorDefinition:
    names = DagsterNames.of(pipeline)

    @sensor(name=names.source_sensor(source), job_name=names.job,
            minimum_interval_seconds=daemon_minimum_interval(pipeline.sensor_interval_s),
            default_status=DefaultSensorStatus.RUNNING,
            description=f"Syncs source `{source}` of pipeline `{pipeline.name}`: requests runs of the partitions "
                        f"its changes make dirty (downstream steps included).")
    def _source_sensor(context: SensorEvaluationContext, cdc: DuckDBResource) -> SensorResult | SkipReason:
        change, state = _detect_source(cdc, pipeline, source)
        for note in change.notes():  # lines set aside, lines left for the next tick: in the tick's log too
            context.log.warning(f"{source}: {note}")
        if not change.any:
            if not change.token_unchanged:
                # A new token for the same items (a touch): remember it.
                state = next(iter(_commit(cdc, pipeline, [change])), state)
            _update_cursor(context, pipeline, state, change, committed=not change.token_unchanged)
            return SkipReason(change.summary())
        # Only the periods the change touched are planned (and their records read): a tick's cost follows
        # the change, not the store. Partitions dirty for another reason (a failed run, or a pipeline.py edit
        # that made every period stale) are left to the nightly reconcile, `synthex run` or `synthex sync`,
        # which plan every period; a tick never does less than they would in the periods it touched.
        plan = plan_requests(pipeline, context.instance, f"sensor:{source}", source, periods=change.periods)
        if plan.held_back:  # not committed: the next tick judges again (and says so again)
            line = refusal_line(plan.held_back)
            context.log.warning(line)
            return SkipReason(line)
        # The runs are requested; a failed run is repaired by the next reconcile.
        state = next(iter(_commit(cdc, pipeline, [change])), state)
        _update_cursor(context, pipeline, state, change, committed=True)
        context.log.info(change.summary())
        return SensorResult(
            run_requests=plan.requests,
            dynamic_partitions_requests=[AddDynamicPartitionsRequest(names.period_partitions, plan.new_periods),
                                         AddDynamicPartitionsRequest(names.branch_partitions, plan.branches)])

    return _source_sensor


def build_reconcile_schedule(pipeline: PipelineDefinition) -> ScheduleDefinition:
    names = DagsterNames.of(pipeline)

    @schedule(name=f"{names.job}_reconcile", job_name=names.job,
              cron_schedule=RECONCILE_CRON, default_status=DefaultScheduleStatus.RUNNING,
              description="Nightly: every source compared in full and every branch planned; runs whatever is "
                          "dirty (repairs a run that failed after its sensor tick).")
    def _reconcile(context, cdc: DuckDBResource) -> list[RunRequest] | SkipReason:
        changes = _detect(cdc, pipeline, None)
        plan = plan_requests(pipeline, context.instance, "reconcile", None, door=LAUNCHED_BY_SCHEDULE)
        for branch in plan.branches:  # the runs below name these partitions: they must exist first
            register(context.instance, branch, plan.new_periods, names)
        _commit(cdc, pipeline, [c for c in changes if c.source not in plan.held_sources])
        if plan.held_back:
            context.log.warning(refusal_line(plan.held_back))
        return plan.requests or SkipReason(refusal_line(plan.held_back) if plan.held_back
                                           else "every branch is up to date")

    return _reconcile


PARTITION_KEYS_INTERVAL_S = 30


def partition_keys_sensor_name(pipeline: PipelineDefinition) -> str:
    return f"{DagsterNames.of(pipeline).job}_partition_keys"


def build_partition_keys_sensor(pipeline: PipelineDefinition) -> SensorDefinition:
    """Removes dynamic partition keys that are neither a period nor a branch of the project (added by hand in
    the UI or through GraphQL), so a junk key does not sit on every asset; a run over one is refused by the
    run launcher meanwhile (synthex_assets.run_tags)."""
    names = DagsterNames.of(pipeline)

    @sensor(name=partition_keys_sensor_name(pipeline), minimum_interval_seconds=PARTITION_KEYS_INTERVAL_S,
            default_status=DefaultSensorStatus.RUNNING,
            description=f"Removes partition keys of pipeline `{pipeline.name}` that are not a period (a calendar "
                        f"month YYYY-MM, or `all`) or a branch (`main`, `synthex branch create NAME`).")
    def _partition_keys(context: SensorEvaluationContext) -> SensorResult | SkipReason:
        instance = context.instance
        periods, branches = invented_keys(instance.get_dynamic_partitions(names.period_partitions),
                                          instance.get_dynamic_partitions(names.branch_partitions),
                                          project_branches(pipeline.root().project_dir))
        if not periods and not branches:
            return SkipReason("every partition key is a period or a branch of the project")
        context.log.warning(f"removing partition keys added by hand: periods {periods or 'none'}, "
                            f"branches {branches or 'none'}")
        return SensorResult(dynamic_partitions_requests=[
            *([DeleteDynamicPartitionsRequest(names.period_partitions, periods)] if periods else []),
            *([DeleteDynamicPartitionsRequest(names.branch_partitions, branches)] if branches else [])])

    return _partition_keys


AUTOMATION_INTERVAL_S = 10


def automation_sensor_name(pipeline: PipelineDefinition) -> str:
    return f"{DagsterNames.of(pipeline).job}_automation"


def build_automation_sensor(pipeline: PipelineDefinition) -> SensorDefinition | None:
    """Evaluates the ``AutomationCondition`` of the steps that asked for one (``automation="eager"``), running
    by default (Dagster's own default automation sensor starts stopped); None when no step asks. Its runs
    ask for each step's partitions as runs, not backfills (a backfill waits on the daemon's backfill loop
    twice: 2 s each with Synthex's daemon, 30 s with Dagster's own), and say their door; the run launcher adds their branch (synthex_assets.run_tags)."""
    names = DagsterNames.of(pipeline)
    automated = [names.asset_key(s) for s in pipeline.order() if pipeline.steps[s].automation]
    if not automated:
        return None
    return AutomationConditionSensorDefinition(
        automation_sensor_name(pipeline), target=AssetSelection.assets(*automated),
        default_status=DefaultSensorStatus.RUNNING, minimum_interval_seconds=AUTOMATION_INTERVAL_S,
        run_tags={LAUNCHED_BY_TAG: LAUNCHED_BY_AUTOMATION, **names.run_tags}, emit_backfills=False,
        description=f"Declarative automation of pipeline `{pipeline.name}`: materializes "
                    f"{', '.join(k.to_user_string() for k in automated)} when their inputs update (each step's "
                    f"automation=).")


def build_live_definitions(pipeline: PipelineDefinition) -> tuple[list[SensorDefinition], list[ScheduleDefinition]]:
    sensors = [build_source_sensor(pipeline, s) for s in pipeline.source_steps()]
    automation = build_automation_sensor(pipeline)
    return ([*sensors, build_partition_keys_sensor(pipeline), *([automation] if automation else [])],
            [build_reconcile_schedule(pipeline)])


