"""The one function that turns a pipeline definition into ``dagster.Definitions``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagster import AssetSelection, Definitions, define_asset_job, in_process_executor

from synthex.core.definition import PipelineDefinition
from synthex_assets.naming import DagsterNames
from synthex_assets.resources import build_resources
from synthex_assets.sensors import build_live_definitions
from synthex_assets.step_assets import build_step_assets


def build_definitions(pipeline: PipelineDefinition, resources: Mapping[str, Any] | None = None) -> Definitions:
    """Step assets, the pipeline's own job (named after the pipeline), the source sensors and the
    reconcile schedule (synthex_assets.sensors), and resources.

    ``resources`` replaces the configured ones by key: a CLI run passes its live store, LLM client and
    progress bar; tests pass theirs, the way Dagster's example projects swap resources per environment.
    """
    assets = build_step_assets(pipeline)
    names = DagsterNames.of(pipeline)
    job = define_asset_job(
        names.job,
        selection=AssetSelection.assets(*assets),  # partitioned by step_partitions(names), inferred from the assets
        description=f"Every step of pipeline `{pipeline.name}`: pick a branch and a range of periods; "
                    f"each step runs its periods in order in one run.",
        # One process, one writer, as for a CLI run: the steps form a chain, each step's periods already
        # share one op, and parallel ops would only add LanceDB commit conflicts (docs/architecture.md).
        executor_def=in_process_executor,
        run_tags=names.run_tags or None,  # a namespaced memory's runs say so (the run launcher reads its partitions)
    )
    sensors, schedules = build_live_definitions(pipeline)
    # The location's default executor too: an asset backfill from the UI (and an automation run) runs
    # Dagster's implicit asset job, not the pipeline's, and its default (multiprocess) executor started each
    # step in a new Python, importing LanceDB, pyarrow and the code location again: 10-20 s of a 22-32 s
    # backfill run at load ~22 (docs/benchmarks.md, issue 36 item 7).
    return Definitions(assets=assets, resources={**build_resources(pipeline), **(resources or {})}, jobs=[job],
                       sensors=sensors, schedules=schedules, executor=in_process_executor)
