"""The full code location (`synthex ui`, workspace.yaml): the project's steps plus its eval assets."""

from __future__ import annotations

from dagster import Definitions

from evals.dagster_evals import eval_definitions
from synthex_assets.code_location import project_pipeline
from synthex_assets.definitions import build_definitions

_pipeline = project_pipeline()
defs = Definitions.merge(build_definitions(_pipeline), eval_definitions(_pipeline))
