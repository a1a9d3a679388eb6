"""Run a pipeline through Dagster: plan first, then one in-process run per dirty period.

Runs go to the project's persistent instance, so every CLI/Python run shows in the UI. Periods run
in chronological order so a fold always finds the previous period's state.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from dagster import DagsterUserCodeExecutionError, materialize

from synthex import progress as progress_mod
from synthex.errors import SynthexError
from synthex.pipeline import Pipeline
from synthex.record import Run, RunStats
from synthex_assets.instance import project_instance
from synthex_assets.naming import asset_name, branch_key
from synthex_assets.partitions import partition_key, register
from synthex_assets.planner import plan_pipeline
from synthex_assets.projections import fire_changed, snapshot
from synthex_assets.resources import build_resources
from synthex_assets.step_assets import FULL_TAG, RUN_ID_TAG, build_step_assets
from synthex_resources.record_store import open_store
from synthex_resources.search import SearchEngine

QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def run_pipeline(pipeline: Pipeline, branch: str = "main", step: str | None = None, from_: str | None = None,
                 full: bool = False, progress: Any = None) -> Run:
    branch_key(branch)
    store = open_store(pipeline.store_uri)
    run = Run(id=str(uuid.uuid4()), pipeline=pipeline.name, branch=branch,
              steps=pipeline.select(step, from_), status="running", started_at=_now())
    store.save_run(run)
    progress_mod.set_reporter(progress)
    try:
        plan = plan_pipeline(pipeline, branch=branch, step=step, from_=from_, full=full, store=store)
        run.steps = plan.steps
        if progress is not None:
            progress.start({s: plan.per_step.get(s, {}).get("records", 0) for s in pipeline.select(step, from_)})
        periods = sorted({p for ps in plan.partitions.values() for p in ps})
        projections_before = snapshot(pipeline, branch)
        if periods:
            instance = project_instance(pipeline)
            register(instance, branch, plan.periods)
            assets = build_step_assets(pipeline)
            resources = build_resources(pipeline)
            for period in periods:
                selection = [asset_name(s) for s in pipeline.order() if period in plan.partitions.get(s, [])]
                try:
                    result = materialize(
                        assets, selection=selection, partition_key=str(partition_key(branch, period)),
                        instance=instance, resources=resources, run_config=QUIET,
                        tags={RUN_ID_TAG: run.id, FULL_TAG: "1" if full else "0"})
                except DagsterUserCodeExecutionError as exc:
                    # Surface the user's own error (it names the step, record and problem).
                    cause = exc.user_exception
                    raise (cause if isinstance(cause, SynthexError) else SynthexError(
                        f"period {period}: {type(cause).__name__}: {cause}")) from cause
                run.dagster_run_ids.append(result.run_id)
        if periods:
            engine = SearchEngine(store)
            engine.ensure_index(stem=pipeline.lexical_stem)  # fold the new rows into the FTS index once per run
        run.status = "completed"
        fire_changed(pipeline, branch, projections_before)
    except BaseException as exc:
        run.status = "failed"
        run.error = str(exc) or type(exc).__name__
        raise
    finally:
        progress_mod.set_reporter(None)
        if progress is not None:
            progress.finish()
        run.step_stats = store.step_stats(run.id)
        run.stats = RunStats()
        for stats in run.step_stats.values():
            run.stats.add(stats)
        run.completed_at = _now()
        store.save_run(run)
    return run
