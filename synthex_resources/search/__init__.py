"""DAG-aware search: lexical (BM25), dense, hybrid (RRF) at any step; exact leaf search."""

from synthex_resources.search.engine import SearchEngine, SearchHit
from synthex_resources.search.recipes import BM25_ONLY, DENSE_ONLY, HYBRID_RRF, RECIPES, SearchConfig

__all__ = ["BM25_ONLY", "DENSE_ONLY", "HYBRID_RRF", "RECIPES", "SearchConfig", "SearchEngine", "SearchHit"]
