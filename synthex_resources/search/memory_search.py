"""One search, as every door asks it: the CLI, ``Pipeline.search``, the MCP server and the Dagster
``SearchResource`` all call ``search_memory`` with the scope they resolved (``PipelineDefinition.scope``),
so the same request gets the same answer whichever door it came through.
"""

from __future__ import annotations

from typing import Any

from synthex.core.definition import PipelineDefinition
from synthex.core.errors import BadInputError, PipelineDefinitionError
from synthex.core.scope import BranchScope
from synthex_resources.record_store import RecordStore
from synthex_resources.search.engine import SearchEngine
from synthex_resources.search.rerankers import Rerankers
from synthex_resources.search.strategies.registry import StrategyRegistry
from synthex_resources.search.types import SearchResults


def search_memory(pipeline: PipelineDefinition, store: RecordStore, scope: BranchScope, strategies: StrategyRegistry,
                  query: str, *, step: str | list[str] | None = None, exact: bool = False, k: int = 10,
                  mode: str | None = None, periods: list[str] | None = None, metadata: dict[str, Any] | None = None,
                  rerank: str | None = None, rerank_top_n: int | None = None, as_of: str | None = None,
                  default_mode: str | None = None, rerankers: Rerankers | None = None) -> SearchResults:
    """Surface search at a step (altitude); ``exact=True`` is verbatim search in leaf steps by default.
    ``mode``: a name of ``strategies`` (the registry every door lists). None: ``default_mode`` (a door's
    own default, e.g. ``SearchResource(mode=)``), else the pipeline's search output's ``mode``, else
    hybrid; but a search that names a step is surface search there: a default that does not rank the
    searched records (a drill-down) gives way to hybrid (``StrategyRegistry.resolve``, the rule in one
    place). The hits come with the search's warnings (``SearchResults.warnings``: a reranker that could
    not rank) and the mode that answered (``SearchResults.mode``).

    ``as_of``: when the question is asked; the conversational strategy resolves relative dates in the
    query ("last week") against it. ``rerank``: a name of ``rerankers`` (search/rerankers.py:
    ``cross-encoder``, offline; ``llm``, a real model) reorders the strategy's top ``rerank_top_n`` hits
    (None: the reranker's own default). ``rerankers``: the caller's, kept for its lifetime (a model loads
    once); None builds what is named for this search."""
    if step is None:
        steps = pipeline.leaf_steps() if exact else pipeline.search_steps()
    else:
        steps = [step] if isinstance(step, str) else list(step)
    for s in steps:
        if s not in pipeline.steps:
            raise PipelineDefinitionError(f"unknown step {s!r}; steps: {', '.join(pipeline.steps)}")
    strategy = strategies.resolve(mode, default_mode or pipeline.search_mode(), at_named_step=step is not None)
    mode = strategy.name
    if k < 1:
        raise BadInputError(f"k must be at least 1 (got {k})")
    if metadata and not strategy.takes_metadata_filter:
        raise PipelineDefinitionError(f"search mode {mode!r} ranks turns and takes no metadata filter "
                                      f"(it would silently cut the top k); use step, branch and period filters, "
                                      f"or a mode that ranks records (e.g. hybrid)")
    if rerank and exact:
        raise BadInputError("exact (verbatim) search is not reranked; drop --rerank or --exact")
    if rerank is not None:
        # The strategy applies its reranker to its own candidate pool (record fusions: every fused
        # candidate; leaf-sum: the top ``top_n`` turns), so every caller of the engine gets the same ranking.
        strategy = strategy.with_(reranker=(rerankers or Rerankers()).get(rerank, store, rerank_top_n))
    found = SearchEngine(store).search(query, steps=steps, scope=scope, k=k, strategy=strategy,
                                       periods=periods, metadata=metadata, exact=exact, as_of=as_of)
    return SearchResults(found, found.warnings, mode="exact" if exact else mode)
