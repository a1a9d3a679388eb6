"""The code location `synthex ui` / `dagster dev` load: the project's pipeline.py, else the demo.

SYNTHEX_PROJECT names the project folder (default: the current directory). Installed plugins (the
evals plugin) add their definitions; the location is named after the pipeline in the workspace file
``synthex ui`` writes. A plugin that fails to import, or whose ``definitions`` hook raises, is left out
and reported: one warning line each in the code server's log, and listed in the location's
``Definitions.metadata`` under ``PLUGIN_FAILURES_KEY``; the other plugins still load.
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import Definitions, MetadataValue, get_dagster_logger

from synthex.core import hookspecs
from synthex.core.definition import PipelineDefinition
from synthex.core.plugins import discover
from synthex.core.project import PIPELINE_FILE, demo_pipeline, load_pipeline
from synthex_assets.definitions import build_definitions
from synthex_resources.search.threads import apply_search_threads

PLUGIN_FAILURES_KEY = "synthex/plugin_failures"


def project_pipeline() -> PipelineDefinition:
    project = Path(os.environ.get("SYNTHEX_PROJECT") or os.getcwd()).resolve()
    if (project / PIPELINE_FILE).exists():
        return load_pipeline(project)
    return demo_pipeline(project)


def location_definitions(pipeline: PipelineDefinition) -> Definitions:
    """The pipeline's definitions plus every plugin's (failures reported, see the module docstring)."""
    parts = [build_definitions(pipeline)]
    # a plugin whose hook raises is left out (a failure), the location loads
    extras, failures = discover().call(hookspecs.definitions, pipeline)
    parts += [extra for extra in extras if extra is not None]
    if failures:
        log = get_dagster_logger()
        for failure in failures:
            log.warning(f"synthex: {failure}")
        parts.append(Definitions(metadata={PLUGIN_FAILURES_KEY: MetadataValue.text(
            "\n".join(str(f) for f in failures))}))
    return Definitions.merge(*parts)


apply_search_threads()  # the code server's process is this location's: it chooses the BLAS threads (search/threads.py)
defs = location_definitions(project_pipeline())
