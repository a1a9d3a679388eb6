"""Launch one Dagster run of the pipeline's own job for a whole ``synthex run``.

The run selects the step assets that have work and one partition range on the branch that covers
every dirty period; each step's op then processes its periods in order (single-run backfill
policy). The run is created with the remote origin of the project's code location (the one
``synthex ui`` serves), so the UI lists it under the pipeline's job, in the timeline, and can
re-execute it. It executes in this process with the run's live store, LLM client and progress bar.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from dagster import (
    AssetKey,
    DagsterEventType,
    DagsterInstance,
    DagsterUserCodeExecutionError,
    Definitions,
    Failure,
    JobDefinition,
)
from dagster._core.definitions.job_base import InMemoryJob
from dagster._core.execution.api import (
    ExecuteRunWithPlanIterable,
    create_execution_plan,
    job_execution_iterator,
)
from dagster._core.execution.context_creation_job import (
    PlanOrchestrationContextManager,
    orchestration_context_event_generator,
)
from dagster._core.remote_origin import (
    ManagedGrpcPythonEnvCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.snap import snapshot_from_execution_plan
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from synthex.core.definition import PipelineDefinition
from synthex.core.errors import SynthexError
from synthex_assets.definitions import build_definitions
from synthex_assets.naming import CODE_LOCATION_MODULE, asset_name, job_name, location_name
from synthex_assets.partitions import period_range, register
from synthex_assets.step_assets import FULL_TAG

LAUNCHED_BY_TAG = "synthex/launched_by"
def console_config(verbose: bool) -> dict:
    """Dagster's console logger: silent unless ``verbose`` (the user sees Synthex's one-line error; every
    event, tracebacks included, is still in the run's log in the UI)."""
    return {"loggers": {"console": {"config": {"log_level": "INFO" if verbose else "CRITICAL"}}}}
REPOSITORY = "__repository__"  # the name Dagster gives the repository of a Definitions object


def remote_job_origin(pipeline: PipelineDefinition) -> RemoteJobOrigin:
    """The origin the UI's code location has for this pipeline's job (matched by location name)."""
    target = LoadableTargetOrigin(executable_path=sys.executable, module_name=CODE_LOCATION_MODULE,
                                  working_directory=str(pipeline.project_dir))
    location = ManagedGrpcPythonEnvCodeLocationOrigin(target, location_name=location_name(pipeline.name))
    return RemoteJobOrigin(RemoteRepositoryOrigin(location, REPOSITORY), job_name(pipeline.name))


def launch_pipeline_run(defs: Definitions, pipeline: PipelineDefinition, instance: DagsterInstance, *,
                        run_id: str, branch: str, partitions: Mapping[str, list[str]], periods: list[str],
                        full: bool = False, verbose: bool = False) -> list[str]:
    """Run the steps in ``partitions`` (step -> dirty periods) as one Dagster run with id ``run_id``.

    ``periods`` is every period the data has (registered as partitions first). Raises the user's own
    error (a SynthexError naming the step, record and problem) when a step fails; returns the asset
    checks that failed (``asset:check: detail``), e.g. an ``on_update`` hook that could not be delivered.
    """
    register(instance, branch, periods)
    dirty = sorted({p for ps in partitions.values() for p in ps})
    start, end = period_range(instance, branch, dirty)
    selection = frozenset(AssetKey(asset_name(s)) for s in pipeline.order() if partitions.get(s))
    job = defs.resolve_job_def(job_name(pipeline.name))
    run_tags = {**job.run_tags, ASSET_PARTITION_RANGE_START_TAG: start, ASSET_PARTITION_RANGE_END_TAG: end,
                FULL_TAG: "1" if full else "0", LAUNCHED_BY_TAG: "synthex"}
    ephemeral = job.as_ephemeral_job(resource_defs={}, input_values={}, asset_selection=list(selection))
    # Recorded against the job as the UI's code location defines it (configured resources), so the UI
    # sees the run as a run of its own job version; executed with the live resources of ``defs``.
    location_job = build_definitions(pipeline).resolve_job_def(job_name(pipeline.name))
    try:
        _execute(InMemoryJob(ephemeral), location_job, instance, run_id, run_tags, selection,
                 remote_job_origin(pipeline), console_config(verbose))
    except Failure as exc:
        # The op reports a step's one-line error as a Failure (a clean message in the UI); give the
        # caller the step's own error back.
        if isinstance(exc.__cause__, SynthexError):
            raise exc.__cause__ from None
        raise SynthexError(exc.description or str(exc)) from exc
    except DagsterUserCodeExecutionError as exc:
        cause = exc.user_exception
        raise (cause if isinstance(cause, SynthexError) else SynthexError(
            f"{type(cause).__name__}: {cause}")) from cause
    return failed_checks(instance, run_id)


def failed_checks(instance: DagsterInstance, run_id: str) -> list[str]:
    events = instance.all_logs(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
    return [f"{e.asset_key.to_user_string()}:{e.check_name}: {e.metadata['detail'].value}"
            for e in (log.dagster_event.event_specific_data for log in events) if not e.passed]


def _execute(job: InMemoryJob, location_job: JobDefinition, instance: DagsterInstance, run_id: str,
             tags: Mapping[str, str], selection: frozenset[AssetKey], origin: RemoteJobOrigin,
             run_config: dict) -> None:
    # What JobDefinition.execute_in_process does, plus what it cannot take: the remote origin (without
    # it the UI shows the run outside any code location and cannot re-execute it) and the location's
    # job snapshot (with the live resources' snapshot the UI warns the job may have changed).
    job_def = job.get_definition()
    plan = create_execution_plan(job, run_config=run_config, instance_ref=instance.get_ref())
    recorded = location_job.get_subset(asset_selection=selection)
    run = instance.create_run(
        job_name=job_def.name, run_id=run_id, run_config=run_config, status=None, tags=dict(tags),
        root_run_id=None, parent_run_id=None, step_keys_to_execute=plan.step_keys_to_execute,
        execution_plan_snapshot=snapshot_from_execution_plan(plan, recorded.get_job_snapshot_id()),
        job_snapshot=recorded.get_job_snapshot(), parent_job_snapshot=location_job.get_job_snapshot(),
        asset_selection=selection, asset_check_selection=None, resolved_op_selection=None, op_selection=None,
        remote_job_origin=origin, job_code_origin=None,
        asset_graph=job_def.get_subset(asset_selection=selection).asset_layer.asset_graph)
    for _event in ExecuteRunWithPlanIterable(
        execution_plan=plan,
        iterator=job_execution_iterator,
        execution_context_manager=PlanOrchestrationContextManager(
            context_event_generator=orchestration_context_event_generator, job=job, execution_plan=plan,
            dagster_run=run, instance=instance, run_config=run_config, executor_defs=None, output_capture=None,
            raise_on_error=True),
    ):
        pass
