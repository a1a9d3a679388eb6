"""Dagster resources over the plain-Python storage layer (the Dagster adapter's half of this package).

Each is a thin wrapper, like dagster-duckdb's ``DuckDBResource``: the library underneath (record
store, LLM client, search engine) knows nothing of Dagster. Step assets ask for the plain objects
(``ResourceParam[RecordStore]``), so a CLI run can hand them its live store, and the code location
builds them from config here: ``create_resource`` returns the plain object, not the resource.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr

from synthex_resources.embedder import EmbedderConfig
from synthex_resources.llm import LLMConfig
from synthex_resources.record_store import RecordStore, open_store
from synthex_resources.search.engine import SearchEngine
from synthex_resources.search.strategies import SearchStrategy, StrategyRegistry, load_search_strategies
from synthex_resources.search.types import SearchResults


class RecordStoreResource(ConfigurableResource):
    """The record store: ``uri`` is a folder or any LanceDB URI (s3://...); the embedder that fills the
    ``vector`` column at write time is configured here too (default: from the environment)."""

    uri: str
    embedder_kind: str | None = None
    embedder_model: str | None = None
    embedder_base_url: str | None = None

    def create_resource(self, context: InitResourceContext) -> RecordStore:
        config = EmbedderConfig(kind=self.embedder_kind, model=self.embedder_model, base_url=self.embedder_base_url)
        return open_store(self.uri, config.create)


class LLMResource(ConfigurableResource):
    """Model, base URL and key from config, else from OPENAI_* env vars; offline stand-in otherwise."""

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    max_concurrency: int = 4
    max_retries: int = 5
    timeout: float = 60.0
    backoff_base: float = 0.5

    def create_resource(self, context: InitResourceContext) -> LLMConfig:
        # The fields mirror LLMConfig's (Dagster needs them declared here to show and validate config).
        return LLMConfig(**{f.name: getattr(self, f.name) for f in fields(LLMConfig)})


class SearchResource(ConfigurableResource):
    """DAG-aware search for assets and agents: ``search(query, step=, branch=, k=, mode=)``.

    Keeps one store (and so its dense matrix and bookkeeping) and one registry of search strategies
    (``mode``: one of its names, as ``synthex search --mode``) for the resource's lifetime.
    """

    uri: str
    default_steps: list[str] = []
    mode: str = "hybrid"
    k: int = 10
    _store: RecordStore | None = PrivateAttr(default=None)
    _strategies: StrategyRegistry | None = PrivateAttr(default=None)

    def strategies(self) -> StrategyRegistry:
        if self._strategies is None:
            self._strategies = load_search_strategies()
        return self._strategies

    def engine(self) -> SearchEngine:
        if self._store is None:
            self._store = open_store(self.uri)
        return SearchEngine(self._store)

    def search(self, query: str, step: str | list[str] | None = None, branch: str = "main", k: int | None = None,
               mode: str | None = None, exact: bool = False, periods: list[str] | None = None,
               metadata: dict[str, Any] | None = None, strategy: SearchStrategy | None = None) -> SearchResults:
        steps = [step] if isinstance(step, str) else (list(step) if step else list(self.default_steps) or None)
        chosen = strategy or self.strategies().get(mode or self.mode)  # an unknown name: one line listing them
        return self.engine().search(query, steps=steps, branch=branch, k=k or self.k, strategy=chosen,
                                    periods=periods, metadata=metadata, exact=exact)
