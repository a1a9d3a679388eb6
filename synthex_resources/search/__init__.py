"""DAG-aware search: lexical (BM25), dense, hybrid (RRF) at any step; leaf-sum over conversation turns;
exact leaf search. Strategies are named in one registry (``load_search_strategies``)."""

from synthex_resources.search.builtin_strategies import BM25, CONVERSATIONAL, DENSE, HYBRID, HYBRID_EQUAL
from synthex_resources.search.engine import SearchEngine
from synthex_resources.search.strategies import SearchStrategy, load_search_strategies
from synthex_resources.search.types import SearchHit, SearchResults, SearchWarning

__all__ = ["BM25", "CONVERSATIONAL", "DENSE", "HYBRID", "HYBRID_EQUAL", "SearchEngine", "SearchHit", "SearchResults",
           "SearchStrategy", "SearchWarning", "load_search_strategies"]
