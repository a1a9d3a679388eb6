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
from typing import Any

from dagster import AssetKey, DagsterInstance, DagsterUserCodeExecutionError, Definitions, Failure
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
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from synthex.definition import PipelineDefinition
from synthex.errors import SynthexError
from synthex_assets.naming import CODE_LOCATION_MODULE, asset_name, job_name, location_name
from synthex_assets.partitions import period_range, register
from synthex_assets.step_assets import FULL_TAG

LAUNCHED_BY_TAG = "synthex/launched_by"
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
REPOSITORY = "__repository__"  # the name Dagster gives the repository of a Definitions object


def remote_job_origin(pipeline: PipelineDefinition) -> RemoteJobOrigin:
    """The origin the UI's code location has for this pipeline's job (matched by location name)."""
    target = LoadableTargetOrigin(executable_path=sys.executable, module_name=CODE_LOCATION_MODULE,
                                  working_directory=str(pipeline.project_dir))
    location = ManagedGrpcPythonEnvCodeLocationOrigin(target, location_name=location_name(pipeline.name))
    return RemoteJobOrigin(RemoteRepositoryOrigin(location, REPOSITORY), job_name(pipeline.name))


def launch_pipeline_run(defs: Definitions, pipeline: PipelineDefinition, instance: DagsterInstance, *,
                        run_id: str, branch: str, partitions: Mapping[str, list[str]], periods: list[str],
                        full: bool = False, tags: Mapping[str, str] | None = None) -> None:
    """Run the steps in ``partitions`` (step -> dirty periods) as one Dagster run with id ``run_id``.

    ``periods`` is every period the data has (registered as partitions first). Raises the user's own
    error (a SynthexError naming the step, record and problem) when a step fails.
    """
    register(instance, branch, periods)
    dirty = sorted({p for ps in partitions.values() for p in ps})
    start, end = period_range(instance, branch, dirty)
    selection = frozenset(AssetKey(asset_name(s)) for s in pipeline.order() if partitions.get(s))
    job = defs.resolve_job_def(job_name(pipeline.name))
    run_tags = {**job.run_tags, ASSET_PARTITION_RANGE_START_TAG: start, ASSET_PARTITION_RANGE_END_TAG: end,
                FULL_TAG: "1" if full else "0", LAUNCHED_BY_TAG: "synthex", **(tags or {})}
    ephemeral = job.as_ephemeral_job(resource_defs={}, input_values={}, asset_selection=list(selection))
    try:
        _execute(InMemoryJob(ephemeral), instance, run_id, run_tags, selection, remote_job_origin(pipeline))
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


def _execute(job: InMemoryJob, instance: DagsterInstance, run_id: str, tags: Mapping[str, str],
             selection: frozenset[AssetKey], origin: RemoteJobOrigin) -> None:
    # What JobDefinition.execute_in_process does, plus the remote origin it cannot take: without it
    # the UI shows the run as launched outside any code location and cannot re-execute it.
    job_def = job.get_definition()
    plan = create_execution_plan(job, run_config=QUIET, instance_ref=instance.get_ref())
    run = instance.create_run_for_job(job_def=job_def, run_config=QUIET, tags=dict(tags), run_id=run_id,
                                      asset_selection=selection, execution_plan=plan, remote_job_origin=origin)
    events: list[Any] = list(ExecuteRunWithPlanIterable(
        execution_plan=plan,
        iterator=job_execution_iterator,
        execution_context_manager=PlanOrchestrationContextManager(
            context_event_generator=orchestration_context_event_generator, job=job, execution_plan=plan,
            dagster_run=run, instance=instance, run_config=QUIET, executor_defs=None, output_capture=None,
            raise_on_error=True),
    ))
    del events
