"""Retrieval strategies as named, composable configurations (not flags scattered through code)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

# A reranker takes (query, hits) and returns hits in a new order (e.g. a cross-encoder).
Reranker = Callable[[str, list[Any]], list[Any]]


@dataclass(frozen=True)
class SearchConfig:
    lexical: bool = True
    dense: bool = True
    lexical_pool: int = 50  # candidates taken from BM25 before fusion
    dense_pool: int = 50  # candidates taken from the vector index before fusion
    rrf_k: int = 60  # reciprocal rank fusion constant (Cormack et al. 2009)
    lexical_weight: float = 1.0
    dense_weight: float = 1.0
    dedup_cosine: float | None = 0.95  # collapse near-duplicates above this cosine (None: keep all)
    reranker: Reranker | None = None

    def with_(self, **changes: Any) -> SearchConfig:
        return replace(self, **changes)


BM25_ONLY = SearchConfig(lexical=True, dense=False, dedup_cosine=None)
DENSE_ONLY = SearchConfig(lexical=False, dense=True, dedup_cosine=None)
# Textbook RRF (k = 60, equal weights).
HYBRID_RRF_EQUAL = SearchConfig()
# The default hybrid: BM25 leads, dense adds recall. On conversational memory BM25 is the stronger leg
# (lethe notes: BM25-only 0.242 vs vector-only 0.138 NDCG@10 on LongMemEval); on LoCoMo turns here a
# sharper fusion (k = 10) with half-weight dense beat k = 60 / equal weights (docs/benchmarks.md).
HYBRID_RRF = SearchConfig(rrf_k=10, dense_weight=0.5)
RECIPES = {"bm25": BM25_ONLY, "dense": DENSE_ONLY, "hybrid": HYBRID_RRF, "hybrid-equal": HYBRID_RRF_EQUAL}
