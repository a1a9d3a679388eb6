"""Launch one Dagster run of the pipeline's own job for a whole ``synthex run``.

The run selects the step assets that have work and one partition range on the branch that covers
every dirty period; each step's op then processes its periods in order (single-run backfill
policy). The run is created with the remote origin of the project's code location (the one
``synthex ui`` serves), so the UI lists it under the pipeline's job, in the timeline, and can
re-execute it. It executes in this process with the run's live store, LLM client and progress bar.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping

from dagster import (
    DagsterEventType,
    DagsterInstance,
    DagsterUserCodeExecutionError,
    Definitions,
    Failure,
)

from synthex.core.definition import PipelineDefinition
from synthex.core.deletions import DELETIONS_TAG, DeletionConsent, consent_tag
from synthex.core.errors import SynthexError
from synthex.core.record import CheckOutcome
from synthex_assets.dagster_internals import (
    RemoteJobOrigin,
    code_location_job_origin,
    execute_as_location_run,
    partition_range_tags,
    set_defs_state_storage,
)
from synthex_assets.definitions import build_definitions
from synthex_assets.event_log import dynamic_partitions_held
from synthex_assets.naming import CODE_LOCATION_MODULE, DagsterNames
from synthex_assets.partitions import period_range, register
from synthex_assets.run_tags import LAUNCHED_BY_CLI, LAUNCHED_BY_TAG, branch_tags
from synthex_assets.step_assets import FULL_TAG, WORKERS_TAG

__all__ = ["LAUNCHED_BY_TAG", "launch_pipeline_run", "check_outcomes"]

def console_config(verbose: bool) -> dict:
    """Dagster's console logger: silent unless ``verbose`` (the user sees Synthex's one-line error; every
    event, tracebacks included, is still in the run's log in the UI)."""
    return {"loggers": {"console": {"config": {"log_level": "INFO" if verbose else "CRITICAL"}}}}


def remote_job_origin(pipeline: PipelineDefinition) -> RemoteJobOrigin:
    """The origin the UI's code location has for this pipeline's job (matched by location name)."""
    names = DagsterNames.of(pipeline)
    return code_location_job_origin(module=CODE_LOCATION_MODULE, working_directory=str(pipeline.project_dir),
                                    location=names.location, job=names.job)


def launch_pipeline_run(defs: Definitions, pipeline: PipelineDefinition, instance: DagsterInstance, *,
                        deletions: DeletionConsent | None = None,
                        run_id: str, branch: str, partitions: Mapping[str, list[str]], periods: list[str],
                        full: bool = False, verbose: bool = False, workers: int = 1,
                        on_wait: Callable[[str], None] | None = None) -> list[CheckOutcome]:
    """Run the steps in ``partitions`` (step -> dirty periods) as one Dagster run with id ``run_id``.

    ``periods`` is every period the data has (registered as partitions first). Raises the user's own
    error (a SynthexError naming the step, record and problem) when a step fails; returns the outcome of
    every asset check the run evaluated (a failed one: e.g. an ``on_update`` hook that was not delivered).
    ``deletions``: the caller judged the sources' deletions (or the user allowed them); None: each
    source step's op judges (synthex.core.deletions). On a deployment's instance the run first waits its
    turn in Dagster's run queue (synthex_assets.queued_runs; ``on_wait`` is told why it waits).
    """
    names = DagsterNames.of(pipeline)
    register(instance, branch, periods, names)
    dirty = sorted({p for ps in partitions.values() for p in ps})
    start, end = period_range(instance, branch, dirty, names)
    with set_defs_state_storage(instance.defs_state_storage):
        return _launch(defs, pipeline, instance, deletions=deletions, run_id=run_id, branch=branch,
                       partitions=partitions, start=start, end=end, full=full, verbose=verbose, workers=workers,
                       on_wait=on_wait)


def _launch(defs: Definitions, pipeline: PipelineDefinition, instance: DagsterInstance, *,
            deletions: DeletionConsent | None, run_id: str, branch: str, partitions: Mapping[str, list[str]],
            start: str, end: str, full: bool, verbose: bool, workers: int,
            on_wait: Callable[[str], None] | None) -> list[CheckOutcome]:
    from synthex_assets.queued_runs import runs_through_queue, wait_for_queue

    names = DagsterNames.of(pipeline)
    selection = frozenset(names.asset_key(s) for s in pipeline.order() if partitions.get(s))
    job = defs.resolve_job_def(names.job)
    run_tags = {**partition_range_tags(start, end), FULL_TAG: "1" if full else "0",
                # said whenever it is not 1 or the pipeline declares more (a run without the tag takes the
                # pipeline's ingest_workers: synthex_assets.step_assets.ingest_workers)
                **({WORKERS_TAG: str(workers)} if max(workers, pipeline.ingest_workers) > 1 else {}),
                **branch_tags(branch, LAUNCHED_BY_CLI, names.memory),
                **({DELETIONS_TAG: consent_tag(deletions, run_id)} if deletions else {})}
    # Recorded against the job as the UI's code location defines it (configured resources), so the UI
    # sees the run as a run of its own job version; executed with the live resources of ``defs``.
    location_job = build_definitions(pipeline).resolve_job_def(names.job)
    try:
        with dynamic_partitions_held(instance):  # registered above: one read for the run (event_log.py)
            execute_as_location_run(job, location_job, instance, run_id=run_id, tags=run_tags,
                                    selection=selection, origin=remote_job_origin(pipeline),
                                    run_config=console_config(verbose),
                                    admit=wait_for_queue(instance, on_wait) if runs_through_queue(instance) else None)
    except (Failure, DagsterUserCodeExecutionError) as exc:
        if verbose:
            _write_step_failures(instance, run_id)
        _raise_user_error(exc)
    return check_outcomes(instance, run_id)


def _raise_user_error(exc: Failure | DagsterUserCodeExecutionError) -> None:
    """The step's own error back to the caller (the op reports a step's one-line error as a Failure: a clean
    message in the UI)."""
    if isinstance(exc, Failure):
        if isinstance(exc.__cause__, SynthexError):
            raise exc.__cause__ from None
        raise SynthexError(exc.description or str(exc)) from exc
    cause = exc.user_exception
    raise (cause if isinstance(cause, SynthexError) else SynthexError(f"{type(cause).__name__}: {cause}")) from cause


def _write_step_failures(instance: DagsterInstance, run_id: str) -> None:
    """``--verbose``: the run's step failures as Dagster recorded them, written to stderr once the run is
    over. Dagster mirrors a step's log to stderr through a ``tail`` process it stops when the step ends,
    which drops the last lines on a busy machine (dagster-io/dagster#23336): the failure is read back
    from the run's event log, where it is always complete."""
    for entry in instance.all_logs(run_id, of_type=DagsterEventType.STEP_FAILURE):
        error = entry.dagster_event.step_failure_data.error if entry.dagster_event else None
        detail = f" {error.cls_name}: {error.message.strip()}" if error is not None else ""
        sys.stderr.write(f"run log: {entry.step_key} STEP_FAILURE - {entry.user_message}{detail}\n")
    sys.stderr.flush()


def check_outcomes(instance: DagsterInstance, run_id: str) -> list[CheckOutcome]:
    """The asset checks run ``run_id`` evaluated, as Dagster recorded them."""
    events = instance.all_logs(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
    return [CheckOutcome(e.check_name, e.passed, e.metadata["detail"].value if "detail" in e.metadata else "",
                         asset=e.asset_key.to_user_string())
            for e in (log.dagster_event.event_specific_data for log in events)]
