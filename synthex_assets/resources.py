"""The resources a pipeline's assets need, configured for its project (the code location's defaults)."""

from __future__ import annotations

from typing import Any

from dagster import ResourceDefinition
from dagster_duckdb import DuckDBResource

from synthex.core.definition import PipelineDefinition
from synthex.core.progress import NullProgress
from synthex_resources.cdc_state import CDC_FILE
from synthex_resources.llm import OFFLINE_STAND_IN, LLMConfig
from synthex_resources.resources import LLMResource, RecordStoreResource, SearchResource


def build_resources(pipeline: PipelineDefinition) -> dict[str, Any]:
    return {
        # The sources' CDC state (cursors, watermarks, per-item hashes): sensors and `synthex sync` share it.
        "cdc": DuckDBResource(database=str(pipeline.data_dir / CDC_FILE)),
        "store": RecordStoreResource(uri=pipeline.store_uri),
        # Offline where the location loads: the UI's resource config says so, not "model: None" (the
        # label is never sent as a model name, synthex_resources.llm).
        "llm": LLMResource(model=OFFLINE_STAND_IN) if LLMConfig().is_offline() else LLMResource(),
        "search": SearchResource(project_dir=str(pipeline.project_dir)),
        # Nobody watches a run launched from the UI; the CLI passes its progress bar instead.
        "progress": ResourceDefinition.hardcoded_resource(NullProgress(), "progress reporter (none)"),
    }
