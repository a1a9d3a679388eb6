"""The code location `synthex ui` / `dagster dev` load: the project's pipeline.py, else the demo.

SYNTHEX_PROJECT names the project folder (default: the current directory). Installed plugins (the
evals plugin) add their definitions; the location is named after the pipeline in the workspace file
``synthex ui`` writes.
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import Definitions

from synthex.core.definition import PipelineDefinition
from synthex.core.plugins import load_plugins
from synthex.core.project import PIPELINE_FILE, demo_pipeline, load_pipeline
from synthex_assets.definitions import build_definitions


def project_pipeline() -> PipelineDefinition:
    project = Path(os.environ.get("SYNTHEX_PROJECT") or os.getcwd()).resolve()
    if (project / PIPELINE_FILE).exists():
        return load_pipeline(project)
    return demo_pipeline(project)


def location_definitions(pipeline: PipelineDefinition) -> Definitions:
    """The pipeline's definitions plus every plugin's."""
    parts = [build_definitions(pipeline)]
    for plugin in load_plugins():
        hook = getattr(plugin, "definitions", None)
        extra = hook(pipeline) if callable(hook) else None
        if extra is not None:
            parts.append(extra)
    return Definitions.merge(*parts)


defs = location_definitions(project_pipeline())
