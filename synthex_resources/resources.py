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

from synthex.core.definition import PipelineDefinition
from synthex.core.naming import MAIN
from synthex.core.project import project_pipeline
from synthex_resources.embedder import EmbedderConfig
from synthex_resources.llm import LLMConfig
from synthex_resources.record_store import RecordStore, open_store
from synthex_resources.search.memory_search import search_memory
from synthex_resources.search.rerankers import Rerankers
from synthex_resources.search.strategies.registry import StrategyRegistry, load_search_strategies
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
    """DAG-aware search for assets and agents: ``search(query, step=, branch=, k=, mode=)``, the same
    search as ``synthex search`` and ``Pipeline.search`` (``search_memory``), over the project in
    ``project_dir``: each call resolves the branch's scope from the project's definitions, so a branch
    reads the steps it inherits through its parent's records, as every other door does.

    Keeps one store (and so its dense matrix and bookkeeping) for the resource's lifetime.
    """

    project_dir: str
    # A name of the search strategies' registry, as ``synthex search --mode``: this resource's default in
    # place of the pipeline's search output's ``mode=`` (None: that, else hybrid), under the same rule: a
    # search that names a step but no mode is surface search there (``StrategyRegistry.resolve``).
    mode: str | None = None
    k: int = 10
    # A second stage, as ``synthex search --rerank`` (search/rerankers.py); None: none.
    rerank: str | None = None
    _store: RecordStore | None = PrivateAttr(default=None)
    _rerankers: Rerankers = PrivateAttr(default_factory=Rerankers)
    _pipeline: PipelineDefinition | None = PrivateAttr(default=None)
    _strategies: StrategyRegistry | None = PrivateAttr(default=None)

    def strategies(self) -> StrategyRegistry:
        if self._strategies is None:
            self._strategies = load_search_strategies()
        return self._strategies

    def pipeline(self) -> PipelineDefinition:
        """The project's definition, loaded again only when pipeline.py changed (an edit, a promote): an
        agent's searches do not each re-run pipeline.py. Branch files are read by ``scope`` on each call."""
        loaded = self._pipeline
        source = getattr(loaded, "source_file", None)
        if loaded is None or source is None or not source[0].exists() or source[0].stat().st_mtime_ns != source[1]:
            self._pipeline = loaded = project_pipeline(self.project_dir)
        return loaded

    def store(self, pipeline: PipelineDefinition) -> RecordStore:
        if self._store is None:
            self._store = open_store(pipeline.store_uri)
        return self._store

    def search(self, query: str, step: str | list[str] | None = None, branch: str = MAIN, k: int | None = None,
               mode: str | None = None, exact: bool = False, periods: list[str] | None = None,
               metadata: dict[str, Any] | None = None, as_of: str | None = None, rerank: str | None = None,
               rerank_top_n: int | None = None) -> SearchResults:
        pipeline = self.pipeline()
        return search_memory(pipeline, self.store(pipeline), pipeline.scope(branch), self.strategies(), query,
                             step=step,
                             exact=exact, k=k or self.k, mode=mode, periods=periods,
                             metadata=metadata, as_of=as_of, default_mode=self.mode, rerank=rerank or self.rerank,
                             rerank_top_n=rerank_top_n, rerankers=self._rerankers)

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._store is not None:
            self._store.close()
