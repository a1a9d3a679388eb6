"""DAG-aware search: lexical (BM25), dense, hybrid (RRF) at any step; leaf-sum over conversation turns;
exact leaf search. Strategies are named in one registry (``load_search_strategies``).

Names load on first use, so loading the registry (``strategies``) does not pull in the engine, LanceDB,
numpy or scipy (``synthex search --help`` lists the modes from it)."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BM25": "synthex_resources.search.strategies.builtin",
    "CONVERSATIONAL": "synthex_resources.search.strategies.builtin",
    "DENSE": "synthex_resources.search.strategies.builtin",
    "HYBRID": "synthex_resources.search.strategies.builtin",
    "HYBRID_EQUAL": "synthex_resources.search.strategies.builtin",
    "HIERARCHICAL": "synthex_resources.search.strategies.builtin",
    "SearchEngine": "synthex_resources.search.engine",
    "SearchStrategy": "synthex_resources.search.strategies.base",
    "load_search_strategies": "synthex_resources.search.strategies.registry",
    "SearchHit": "synthex_resources.search.types",
    "SearchResults": "synthex_resources.search.types",
    "SearchWarning": "synthex_resources.search.types",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'synthex_resources.search' has no attribute {name!r}")
