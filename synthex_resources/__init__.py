"""Storage and search: the LanceDB record store, embedders, the LLM client, search, planning.

Plain Python, no Dagster. ``synthex_resources.resources`` (the Dagster resource wrappers) belongs to
the Dagster adapter layer and is never imported from here. Names load on first use, so importing
one light module of this package (``llm``, ``planner`` inputs) does not pull in LanceDB.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "EmbedderConfig": "synthex_resources.embedder",
    "MiniLMOnnxEmbedder": "synthex_resources.embedder",
    "LLMConfig": "synthex_resources.llm",
    "OpenAICompleter": "synthex_resources.llm",
    "RecordStore": "synthex_resources.record_store",
    "open_store": "synthex_resources.record_store",
    "SearchEngine": "synthex_resources.search.engine",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'synthex_resources' has no attribute {name!r}")
