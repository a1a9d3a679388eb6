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
    # "rrf": fuse the records' ranks. "leaf-sum": score the *leaves* (turns): every searched record
    # lends its normalized lexical and dense scores to its leaves, summed (search/leaf_fusion.py).
    fusion: str = "rrf"
    leaf_dense_weight: float = 0.0  # leaf-sum: weight of the dense score of the leaves' own text
    neighbour_weight: float = 0.0  # leaf-sum: share of the better adjacent turn's score a turn receives
    date_weight: float = 0.0  # leaf-sum: bonus (x the top score) for turns inside a date the query names
    drop_participants: bool = False  # leaf-sum: drop the conversation's speakers' names from the query
    # leaf-sum: resolve relative dates in the query ("last week") against the search's ``as_of`` date,
    # and season/span forms ("the summer of 2022") without one (synthex/core/enrich/dates.py)
    relative_dates: bool = True
    # Multi-hop strategies (search/multihop.py), all off by default; measured in docs/benchmarks.md.
    decompose: str = ""  # "sum" | "max": score the question's parts (conjunctions, entities) and combine
    decompose_weight: float = 0.5  # x the top score, for the combined parts' normalized scores
    entity_weight: float = 0.0  # credit for turns sharing rare terms/entities with the top hits
    ppr_weight: float = 0.0  # personalized PageRank over turns + rare terms, seeded by the top hits
    expand_seeds: int = 5  # how many first-stage hits seed the entity expansion and PageRank
    ppr_restart: float = 0.5  # PageRank restart probability (to the seeds)
    rare_df: int = 5  # a term is rare when at most this many turns use it (entities: 4x)
    diversify: str = ""  # "mmr" | "session": re-select the top k for coverage
    diversify_pool: int = 3  # diversify among the top (pool x k) candidates
    mmr_lambda: float = 0.7  # MMR: weight of relevance against redundancy (cosine of the turns)
    session_penalty: float = 0.3  # "session": score x (1 - penalty) per turn of its session already taken

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
# Conversational memory, no model at query time: turns scored through their context-window records
# (BM25 + dense) and their own text (dense), summed on max-normalized scores, smoothed over adjacent
# turns, with a date prior and the speakers' names dropped from the query (in a two-person chat every
# turn is by one of them, and the names dominate a short question's embedding). Tuned on LoCoMo
# (docs/benchmarks.md); the lexical leg wants a stemmed index (``Pipeline(lexical_stem=True)``).
# Of the multi-hop strategies (search/multihop.py) only the shared-entity expansion is on: on LoCoMo
# dev7 it lifted recall_all@10 without costing a category; decomposition, PageRank, MMR and session
# diversification did not help there and stay options (docs/benchmarks.md, issue 13).
CONVERSATIONAL = SearchConfig(fusion="leaf-sum", lexical_pool=200, dense_pool=200, dense_weight=0.5,
                              leaf_dense_weight=0.5, neighbour_weight=0.4, date_weight=1.0,
                              drop_participants=True, dedup_cosine=None, entity_weight=0.15)
RECIPES = {"bm25": BM25_ONLY, "dense": DENSE_ONLY, "hybrid": HYBRID_RRF, "hybrid-equal": HYBRID_RRF_EQUAL,
           "conversational": CONVERSATIONAL}
