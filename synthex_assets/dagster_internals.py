"""Every Dagster name Synthex uses that is not Dagster's public API, in one module.

Written for the Dagster release ``DAGSTER_VERSION``. ``tests/test_dagster_internals.py`` pins it: it
fails on another version, and checks that each private name below still imports with the signature
or attributes used here, so an upgrade breaks loudly in this one place (revisit each comment then:
a public API may have appeared). Everything else in Synthex uses ``dagster``'s public exports.

These have no public API in Dagster 1.13:

- A run over a *range* of partitions. ``RunRequest`` takes one ``partition_key`` (no range argument)
  and ``JobDefinition.execute_in_process`` one ``partition_key`` too; a single-run backfill of a range
  is expressed by two system run tags, which Dagster exports only from ``dagster._core.storage.tags``.
- The order in which one run's partition materializations are recorded. A single-run backfill emits one
  materialization per partition in the order of the output's partitions subset, a ``set`` for a
  ``MultiPartitionsDefinition`` (hash order), so the asset's "latest materialization" was any period.
  ``PeriodOrderedPartitions`` makes that order chronological: the newest period is recorded last.
- A data version per partition of one run. ``MaterializeResult(data_version=...)`` is one version for the
  output, copied to every partition of the run's range (``_get_output_asset_events`` in
  ``dagster/_core/execution/plan/execute_step.py``); ``DataVersionsByPartition`` is honoured for observable
  source assets only. So the step op records each partition's materialization itself, with the provenance
  tags Dagster writes on its own (``partition_materialization_tags``), and tells Dagster not to record the
  output's (``NO_OUTPUT_MATERIALIZATIONS``).
- The backfill daemon's loop interval: it sleeps ``DEFAULT_DAEMON_INTERVAL_SECONDS - loop_duration``
  (``dagster/_daemon/backfill.py`` reads the constant of ``dagster/_daemon/controller.py`` each time its loop
  starts), 30 s, and no instance setting or environment variable changes it; a UI backfill waits one loop
  for its run and another for COMPLETED. ``run_daemon`` sets it inside a daemon process Synthex starts for
  that purpose (``python -m synthex_assets.daemon``), ``run_dev`` makes ``dagster dev`` start that daemon
  (``python -m synthex_assets.dev``); both are called from those entry points only, never from library code
  (tests/test_daemon_loop.py fails when a name used is gone).
- A ``synthex run`` recorded as a run of the project's code location (so the UI lists, times and
  re-executes it) but executed in this process with the CLI's live resources (its open store, LLM
  client and progress bar). ``execute_in_process`` records no code-location origin and always records
  the snapshot of the job it runs (live resources: the UI then warns the job changed);
  ``DagsterInstance.create_run`` and the plan/orchestration functions that take both are internal.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from dagster import (
    AssetKey,
    DagsterInstance,
    DagsterInvalidConfigError,
    DagsterRun,
    JobDefinition,
    MultiPartitionsDefinition,
)

# Why private: checking a dagster.yaml without opening the instance (which connects to its storage):
# Dagster validates instance config only inside ``DagsterInstance.from_config``; neither the instance
# schema's loader nor config validation is exported (synthex_assets/deployment.py, `synthex deploy init`).
from dagster._config import validate_config

# Why private: the tags a materialization's data version and provenance are read from (Dagster's staleness
# resolver, CachingStaleStatusResolver, reads them on each partition's latest materialization); Dagster writes
# them itself and exports only ``DataVersion``. See partition_materialization_tags.
from dagster._core.definitions.data_version import (
    CODE_VERSION_TAG,
    DATA_VERSION_IS_USER_PROVIDED_TAG,
    DATA_VERSION_TAG,
    DEFAULT_DATA_VERSION,
    NULL_EVENT_POINTER,
    get_input_data_version_tag,
    get_input_event_pointer_tag,
)

# Why private: executing a job definition under a run we created ourselves (with a code-location
# origin and the location's job snapshot) needs the job wrapped as an IJob; only InMemoryJob does that.
from dagster._core.definitions.job_base import InMemoryJob

# Why private: the partitions subset a multi-partitioned output iterates (in set order); subclassed below.
from dagster._core.definitions.partitions.subset import default as _default_subset

# Why private: the per-dimension tags (``dagster/partition/branch``, ``/period``) Dagster adds to a
# multi-partitioned materialization.
from dagster._core.definitions.partitions.utils.multi import get_tags_from_multi_partition_key

# Why private: the name Dagster gives the single repository a ``Definitions`` object becomes (part of
# the origin below).
from dagster._core.definitions.repository_definition.valid_definitions import SINGLETON_REPOSITORY_NAME

# Why private: the output metadata key under which Dagster records no materialization for an output
# (``_log_materialization_or_observation_events_for_asset`` returns early; made for source assets whose
# observe function logs its own events). The step op records its partitions' materializations itself
# (partition_materialization_tags); the output is still yielded, so checks and downstream steps run.
from dagster._core.definitions.source_asset import SYSTEM_METADATA_KEY_SOURCE_ASSET_OBSERVATION

# Why private: building the plan, and iterating the run's execution over it, is what
# execute_in_process does inside; the public function cannot take a run that already exists.
from dagster._core.execution.api import (
    ExecuteRunWithPlanIterable,
    create_execution_plan,
    job_execution_iterator,
)
from dagster._core.execution.context_creation_job import (
    PlanOrchestrationContextManager,
    orchestration_context_event_generator,
)

# Why private: see validate_config above (the instance schema's loader and checks).
from dagster._core.instance.config import dagster_instance_config

# Why private: a CLI process opens the project's instance with its own event log (synthex_assets/event_log.py)
# through ``InstanceRef.from_dir(overrides=...)``; no public API takes overrides or builds a ref.
from dagster._core.instance.ref import InstanceRef as InstanceRef

# Why private: a run launcher that reports its run workers' health to run monitoring (a deployment's
# launcher checks a `synthex run`'s process: synthex_assets/queued_runs.py); the result types are not exported.
from dagster._core.launcher import CheckRunHealthResult as CheckRunHealthResult
from dagster._core.launcher import WorkerStatus as WorkerStatus

# Why private: the origin of a run as the UI's code location knows it (location, repository, job);
# the public API never lets a caller set a run's origin.
from dagster._core.remote_origin import (
    ManagedGrpcPythonEnvCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)

# Why private: the execution-plan snapshot recorded with the run, against the location's job snapshot.
from dagster._core.snap import snapshot_from_execution_plan

# Why private: Dagster keeps a process-wide "current defs-state storage" (a ContextVar) that entering any
# instance sets; it holds a weak reference to that instance, so once that instance is collected every later
# Definitions load in the process fails ("Attempted to resolve undefined DagsterInstance weakref"). A
# long-lived process (the MCP server, a notebook, the test suite) opens and closes many instances: a run
# resolves its definitions with its own instance's storage set, whatever an earlier instance left.
from dagster._core.storage.defs_state.base import set_defs_state_storage as set_defs_state_storage

# Why private: a new event-log file is set up as Dagster's own ``SqliteEventLogStorage._initdb`` does (its
# tables, WAL, the alembic revision stamped) with the alembic scripts read once per storage, not once per file
# and check (synthex_assets/event_log.py); Dagster exports neither the tables' metadata nor the alembic config.
from dagster._core.storage.event_log.schema import SqlEventLogStorageMetadata as SqlEventLogStorageMetadata

# Why private: synthex_assets/event_log.py is Dagster's own SQLite event storage with its connections kept
# open; Dagster exports neither the class nor the timeout it opens its files with.
from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    SqliteEventLogStorage as SqliteEventLogStorage,
)

# Why private: the run and schedule storages' files are opened likewise (synthex_assets/sqlite_storage.py); their
# classes, tables and the ``instance_info`` table are not exported, nor how Dagster names a SQLite file.
from dagster._core.storage.runs.schema import InstanceInfo as InstanceInfo
from dagster._core.storage.runs.schema import RunStorageSqlMetadata as RunStorageSqlMetadata
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage as SqliteRunStorage
from dagster._core.storage.schedules.schema import ScheduleStorageSqlMetadata as ScheduleStorageSqlMetadata
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import (
    SqliteScheduleStorage as SqliteScheduleStorage,
)
from dagster._core.storage.sql import get_alembic_config as get_alembic_config
from dagster._core.storage.sqlite import (
    LAST_KNOWN_STAMPED_SQLITE_ALEMBIC_REVISION as LAST_KNOWN_STAMPED_SQLITE_ALEMBIC_REVISION,
)
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS as SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._core.storage.sqlite import create_db_conn_string as create_db_conn_string

# Why private: no public module exports the names of the partition-range run tags (RunRequest and
# execute_in_process take one partition_key, no range).
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

# Why private: how a code location is loaded (``python -m <module>`` in a working directory), the target
# part of its origin.
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

# Why private: whether the queue's daemon is alive (its heartbeat's type name), to tell a `synthex run`
# waiting in the queue that nothing will dequeue it.
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import (
    QueuedRunCoordinatorDaemon as QueuedRunCoordinatorDaemon,
)

# Why private: what a configurable storage class is built from (its constructor's second argument).
from dagster._serdes import ConfigurableClassData as ConfigurableClassData

DAGSTER_VERSION = "1.13.27"

# The metadata a step's MaterializeResult carries so Dagster records no materialization of its own for it.
NO_OUTPUT_MATERIALIZATIONS = {SYSTEM_METADATA_KEY_SOURCE_ASSET_OBSERVATION: True}


# Why private: Dagster's own modules a run process imports before its first event (the instance's SQLite
# storages with SQLAlchemy and Alembic, the run-execution entry points), by name: the warm run launcher's
# forkserver imports them once (synthex_assets.run_launcher.PRELOAD); a name that moved is skipped there
# (a slower start, nothing else).
RUN_WORKER_MODULES = [
    "dagster._core.storage.sqlite_storage", "dagster._core.storage.event_log.sqlite",
    "dagster._core.storage.runs.sqlite", "dagster._core.storage.schedules.sqlite",
    "dagster._core.storage.local_compute_log_manager", "dagster._core.execution.api", "dagster._grpc.impl",
    "dagster._cli.api", "dagster._daemon", "sqlalchemy", "alembic", "structlog",
]


def event_log_alembic_config() -> Any:
    """The alembic config Dagster's SQLite event log sets its files up with (cached by Dagster per file)."""
    return get_alembic_config(sys.modules[SqliteEventLogStorage.__module__].__file__)


def execute_run_by_id(run_id: str, instance: DagsterInstance) -> None:
    """Execute the run ``run_id`` (created and launched already) in this process: what the process Dagster's
    DefaultRunLauncher spawns does (``dagster api execute_run``); failures are recorded on the run."""
    # Why private: that command's body is the only function that executes an existing run by id with its
    # code origin; the warm run launcher (synthex_assets.run_launcher) calls it in a process forked from
    # one with the run's libraries already imported. Imported here, not at the top: only run workers need it.
    from dagster._cli.api import _execute_run_command_body

    _execute_run_command_body(run_id, instance, lambda _event: None, set_exit_code_on_failure=False)


def _chronological(key: str) -> tuple[str, str]:
    """A ``branch|period`` key as (period, branch): periods sort chronologically ("YYYY-MM")."""
    branch, _, period = str(key).partition("|")
    return period, branch


class DefaultPartitionsSubset(_default_subset.DefaultPartitionsSubset):
    """Dagster's set of partition keys, iterated in period order (then branch).

    Why the same class name: Dagster's serdes writes an object under its class name, so this subclass is
    stored as (and read back anywhere, e.g. by the webserver, which never imports Synthex, as) Dagster's
    own ``DefaultPartitionsSubset``; only the iteration order differs, and only in this process."""

    def get_partition_keys(self) -> list[str]:
        return sorted(self.subset, key=_chronological)

    def with_partition_keys(self, partition_keys: Collection[str]) -> DefaultPartitionsSubset:
        return DefaultPartitionsSubset(self.subset | set(partition_keys))

    @classmethod
    def create_empty_subset(cls, partitions_def: object = None) -> DefaultPartitionsSubset:
        return cls()


class PeriodOrderedPartitions(MultiPartitionsDefinition):
    """A ``MultiPartitionsDefinition`` whose subsets iterate in period order: the per-partition
    materializations of one run are recorded oldest period first, so the newest is the latest. Shown and
    stored exactly as a MultiPartitionsDefinition (Dagster snapshots it by ``isinstance``)."""

    @property
    def partitions_subset_class(self) -> type[DefaultPartitionsSubset]:
        return DefaultPartitionsSubset


# The branch a run writes, a tag of its own (a filter in the UI's Runs list); the range tags hold it only
# inside ``branch|period`` keys.
BRANCH_TAG = "synthex/branch"
# The writer a run is: "<memory>|<branch>", the memory being the pipeline's name, or its namespace when it has
# one (either way its code location's name: synthex_assets.naming.DagsterNames.memory). A shared instance's
# run queue allows one run in progress per value of it (synthex_assets/deployment.py): one writer per branch
# of one memory, while the branches of different memories go on side by side. Two memories given one name are one writer: they wait on each
# other, never write at once.
WRITER_TAG = "synthex/writer"


def writer_key(memory: str, branch: str) -> str:
    """The ``WRITER_TAG`` value of a run of ``memory``'s ``branch``."""
    return f"{memory}|{branch}"


def partition_materialization_tags(partition: str, *, data_version: str | None, code_version: str,
                                   inputs: Mapping[AssetKey, tuple[str | None, int | None]]) -> dict[str, str]:
    """The tags Dagster 1.13 writes on an asset partition's materialization (``_build_data_version_tags`` and
    the multi-partition dimension tags in ``execute_step.py``), for one ``branch|period`` partition: its own
    ``data_version`` (user-provided; None: Dagster's default version), the asset's ``code_version``, and per
    input asset (data version, storage id) of the input partition it was made from (None: none recorded)."""
    from dagster import MultiPartitionKey

    branch, _, period = partition.partition("|")
    tags = {CODE_VERSION_TAG: code_version,
            **get_tags_from_multi_partition_key(MultiPartitionKey({"branch": branch, "period": period}))}
    for key, (version, storage_id) in inputs.items():
        tags[get_input_data_version_tag(key)] = version or DEFAULT_DATA_VERSION.value
        tags[get_input_event_pointer_tag(key)] = str(storage_id) if storage_id else NULL_EVENT_POINTER
    if data_version is not None:
        tags[DATA_VERSION_TAG] = data_version
        tags[DATA_VERSION_IS_USER_PROVIDED_TAG] = "true"
    return tags


def partition_range_tags(start: str, end: str) -> dict[str, str]:
    """Run tags selecting the partitions ``start`` .. ``end`` (in the partitions definition's order), and
    the branch they are on (``BRANCH_TAG``: both keys are ``branch|period`` on one branch)."""
    return {ASSET_PARTITION_RANGE_START_TAG: start, ASSET_PARTITION_RANGE_END_TAG: end,
            BRANCH_TAG: start.partition("|")[0]}


def partition_range(tags: Mapping[str, str]) -> tuple[str, str] | None:
    """The (start, end) partition range a run's tags select, None when they select no range."""
    if ASSET_PARTITION_RANGE_START_TAG in tags and ASSET_PARTITION_RANGE_END_TAG in tags:
        return tags[ASSET_PARTITION_RANGE_START_TAG], tags[ASSET_PARTITION_RANGE_END_TAG]
    return None


def code_location_job_origin(*, module: str, working_directory: str, location: str, job: str) -> RemoteJobOrigin:
    """The origin a code location loaded as ``python -m module`` (the one ``synthex ui`` serves, named
    ``location``) has for its job ``job``."""
    target = LoadableTargetOrigin(executable_path=sys.executable, module_name=module,
                                  working_directory=working_directory)
    code_location = ManagedGrpcPythonEnvCodeLocationOrigin(target, location_name=location)
    return RemoteJobOrigin(RemoteRepositoryOrigin(code_location, SINGLETON_REPOSITORY_NAME), job)


def execute_as_location_run(job: JobDefinition, location_job: JobDefinition, instance: DagsterInstance, *,
                            run_id: str, tags: Mapping[str, str], selection: Collection[AssetKey],
                            origin: RemoteJobOrigin, run_config: dict,
                            admit: Callable[[DagsterRun], DagsterRun] | None = None) -> None:
    """Execute the assets ``selection`` of ``job`` (its live resources) in this process as run ``run_id``,
    recorded with ``origin`` and against ``location_job`` (the code location's job, configured
    resources): what ``JobDefinition.execute_in_process`` does, plus what it cannot take. Raises what
    the run raises. ``admit``: given the run as created (NOT_STARTED), returns it once it may execute (e.g.
    after a shared instance's run queue handed it back: synthex_assets.queued_runs) or raises."""
    selected = frozenset(selection)
    ephemeral = InMemoryJob(job.as_ephemeral_job(resource_defs={}, input_values={}, asset_selection=list(selected)))
    job_def = ephemeral.get_definition()
    plan = create_execution_plan(ephemeral, run_config=run_config, instance_ref=instance.get_ref())
    recorded = location_job.get_subset(asset_selection=selected)
    run = instance.create_run(
        job_name=job_def.name, run_id=run_id, run_config=run_config, status=None, tags={**job.run_tags, **tags},
        root_run_id=None, parent_run_id=None, step_keys_to_execute=plan.step_keys_to_execute,
        execution_plan_snapshot=snapshot_from_execution_plan(plan, recorded.get_job_snapshot_id()),
        job_snapshot=recorded.get_job_snapshot(), parent_job_snapshot=location_job.get_job_snapshot(),
        asset_selection=selected, asset_check_selection=None, resolved_op_selection=None, op_selection=None,
        remote_job_origin=origin, job_code_origin=None,
        asset_graph=job_def.get_subset(asset_selection=selected).asset_layer.asset_graph)
    if admit is not None:
        run = admit(run)
    for _event in ExecuteRunWithPlanIterable(
        execution_plan=plan,
        iterator=job_execution_iterator,
        execution_context_manager=PlanOrchestrationContextManager(
            context_event_generator=orchestration_context_event_generator, job=ephemeral, execution_plan=plan,
            dagster_run=run, instance=instance, run_config=run_config, executor_defs=None, output_capture=None,
            raise_on_error=True),
    ):
        pass



def validated_instance_config(home: Any) -> dict:
    """``home``'s dagster.yaml validated as ``DagsterInstance`` validates it when it opens (the instance
    schema), plus the config of each configurable class it names (the run coordinator and run launcher
    check theirs only when the instance builds them, i.e. after connecting to its storage). Raises
    DagsterInvalidConfigError; connects to nothing."""
    import importlib

    config, _ = dagster_instance_config(str(home))
    for key in ("run_coordinator", "run_launcher", "compute_logs"):
        entry = config.get(key)
        if entry is None:
            continue
        cls = getattr(importlib.import_module(entry["module"]), entry["class"])
        result = validate_config(cls.config_type(), entry.get("config") or {})
        if not result.success:
            raise DagsterInvalidConfigError(f"Errors in the config of {key} {entry['class']}.", result.errors,
                                            entry.get("config"))
    return dict(config)


def stale_statuses(instance: Any, asset_graph: Any, asset_key: AssetKey, partitions: list[str]) -> dict[str, str]:
    """Dagster's own staleness of ``asset_key``'s ``partitions`` (FRESH, STALE, MISSING), as the UI computes it,
    without a webserver: for probes on a project (tests read it through the webserver's GraphQL instead).
    ``CachingStaleStatusResolver`` and the loading context it needs have no public export in Dagster 1.13."""
    from dagster._core.definitions.data_version import CachingStaleStatusResolver
    from dagster._core.loader import LoadingContextForTest

    resolver = CachingStaleStatusResolver(instance, asset_graph, LoadingContextForTest(instance))
    return {p: resolver.get_status(asset_key, p).value for p in partitions}



# Synthex's daemon (synthex_assets/daemon.py, dev.py; the docstring's backfill-loop item). Dagster is imported
# inside the functions: only those two entry points' processes load its daemon and dev CLIs.

DAEMON_INTERVAL_NAME = "DEFAULT_DAEMON_INTERVAL_SECONDS"
DAGSTER_DAEMON_MODULE = "dagster._daemon"  # what `dagster dev` runs as its daemon: python -m dagster._daemon run ...
DEV_SPAWN_NAME = "open_ipc_subprocess"  # how `dagster dev` starts the webserver and the daemon


def daemon_loop_interval() -> float:
    """The interval Dagster's backfill loop (and the asset daemon's default) waits between iterations."""
    import dagster._daemon.controller as daemon_controller

    return getattr(daemon_controller, DAEMON_INTERVAL_NAME)


def run_daemon(loop_interval_s: float, argv: Sequence[str]) -> None:
    """``dagster-daemon`` with ``argv`` (e.g. ``run -w workspace.yaml``) in this process, its loops every
    ``loop_interval_s`` instead of 30 s. Call only from a process's entry point."""
    import sys

    import dagster._daemon.controller as daemon_controller
    from dagster._daemon.cli import main as dagster_daemon_main

    setattr(daemon_controller, DAEMON_INTERVAL_NAME, loop_interval_s)
    sys.argv = ["dagster-daemon", *argv]
    dagster_daemon_main()


def spawner_with_daemon(spawn: Callable[..., Any], daemon_module: str) -> Callable[..., Any]:
    """``spawn`` (Dagster's ``open_ipc_subprocess``) that starts ``python -m daemon_module`` where
    ``dagster dev`` asks for ``python -m dagster._daemon`` (same arguments); every other command as it is."""

    def spawn_with_our_daemon(args: list[str], **kwargs: Any) -> Any:
        if list(args[1:3]) == ["-m", DAGSTER_DAEMON_MODULE]:
            args = [args[0], "-m", daemon_module, *args[3:]]
        return spawn(args, **kwargs)

    return spawn_with_our_daemon


def run_dev(daemon_module: str, argv: Sequence[str]) -> None:
    """``dagster dev`` with ``argv`` in this process, its daemon started as ``python -m daemon_module``
    (same arguments) instead of Dagster's. Call only from a process's entry point."""
    import dagster._cli.dev as dagster_dev

    setattr(dagster_dev, DEV_SPAWN_NAME, spawner_with_daemon(getattr(dagster_dev, DEV_SPAWN_NAME), daemon_module))
    dagster_dev.dev_command.main(args=list(argv), prog_name="dagster dev", auto_envvar_prefix="DAGSTER")
