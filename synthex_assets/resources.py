"""The resources a pipeline's assets need, configured for its project."""

from __future__ import annotations

from typing import Any

from synthex.pipeline import Pipeline
from synthex_resources.llm import LLMResource
from synthex_resources.record_store import RecordStoreResource
from synthex_resources.search import SearchResource


def build_resources(pipeline: Pipeline) -> dict[str, Any]:
    return {
        "store": RecordStoreResource(uri=pipeline.store_uri),
        "llm": LLMResource(),
        "search": SearchResource(uri=pipeline.store_uri, default_steps=pipeline.search_steps()),
    }
