"""The one function that turns a Pipeline into dagster.Definitions."""

from __future__ import annotations

from dagster import AssetSelection, Definitions, define_asset_job

from synthex.pipeline import Pipeline
from synthex_assets.naming import asset_name
from synthex_assets.partitions import STEP_PARTITIONS
from synthex_assets.resources import build_resources
from synthex_assets.step_assets import build_step_assets


def build_definitions(pipeline: Pipeline) -> Definitions:
    assets = build_step_assets(pipeline)
    job = define_asset_job(
        f"{asset_name(pipeline.name)}_all_steps",
        selection=AssetSelection.assets(*assets),
        partitions_def=STEP_PARTITIONS,
        description=f"Materialize every step of pipeline `{pipeline.name}` for one branch|period.",
    )
    return Definitions(assets=assets, resources=build_resources(pipeline), jobs=[job])
