"""The conversational family: the mode ``conversational`` (search/strategies/builtin.py), ``LeafSum``'s parameters.

``LeafSum`` ranks leaves (conversation turns) through the records that stand for them. This module holds
its parameters only, so that the registry (``synthex search --help``) loads without numpy or scipy; the
algorithm is in the family's parts, imported at the first search:

- search/strategies/conversational_fusion.py: the leaf-sum fusion (legs, neighbour credit, date prior,
  the speakers' names dropped);
- search/strategies/conversational_multihop.py: the multi-hop options (decomposition, shared-entity
  expansion, PageRank, diversification);
- search/strategies/conversational_temporal.py: dates a query names, as a time window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from synthex_resources.search.strategies.base import SearchStrategy, param
from synthex_resources.search.types import (
    Decompose,
    Diversify,
    Fusion,
    SearchBackend,
    SearchRequest,
    SearchResults,
)


@dataclass(frozen=True, kw_only=True)
class LeafSum(SearchStrategy):
    """Ranks leaves (turns) through the records that stand for them (search/strategies/conversational_fusion.py, its
    algorithm): the ``conversational`` strategy. Takes step, branch and period filters, not metadata
    filters (they would silently cut the top k)."""

    fusion: ClassVar[Fusion] = Fusion.LEAF_SUM
    kind: ClassVar[str] = "leaf-sum"
    takes_metadata_filter: ClassVar[bool] = False
    ranks_searched_records: ClassVar[bool] = False

    lexical: bool = param(True, doc="score the searched records with BM25")
    dense: bool = param(True, doc="score the searched records by cosine")
    lexical_pool: int = param(50, low=1, doc="records taken from BM25 (the dense leg scores every record in scope)")
    lexical_weight: float = param(1.0, low=0.0, doc="weight of the records' normalized BM25 scores")
    dense_weight: float = param(1.0, low=0.0, doc="weight of the records' normalized cosine")
    leaf_dense_weight: float = param(0.0, low=0.0, doc="weight of the cosine of the leaves' own text")
    neighbour_weight: float = param(0.0, low=0.0, doc="share of the better adjacent turn's score a turn receives")
    date_weight: float = param(0.0, low=0.0, doc="bonus (x the top score) for turns inside a date the query names")
    drop_participants: bool = param(False, doc="drop the conversation's speakers' names from the query")
    relative_dates: bool = param(True, doc="resolve relative dates ('last week') against the search's as_of, "
                                           "and season/span forms ('the summer of 2022') without one")
    # Multi-hop strategies (search/strategies/conversational_multihop.py), all off by default; measured in docs/benchmarks.md.
    decompose: Decompose = param(Decompose.NONE, doc="score the question's parts and combine them")
    decompose_weight: float = param(0.5, low=0.0, doc="x the top score, for the combined parts' normalized scores")
    entity_weight: float = param(0.0, low=0.0, doc="credit for turns sharing rare terms/entities with the top hits")
    ppr_weight: float = param(0.0, low=0.0, doc="personalized PageRank over turns + rare terms, seeded by the top hits")
    expand_seeds: int = param(5, low=1, doc="how many first-stage hits seed the entity expansion and PageRank")
    ppr_restart: float = param(0.5, low=0.0, high=1.0, doc="PageRank restart probability (to the seeds)")
    rare_df: int = param(5, low=1, doc="a term is rare when at most this many turns use it (entities: 4x)")
    diversify: Diversify = param(Diversify.NONE, doc="re-select the top k for coverage")
    diversify_pool: int = param(3, low=1, doc="diversify among the top (pool x k) candidates")
    mmr_lambda: float = param(0.7, low=0.0, high=1.0, doc="MMR: weight of relevance against redundancy")
    session_penalty: float = param(0.3, low=0.0, high=1.0,
                                   doc="session: score x (1 - penalty) per turn of its session already taken")

    def search(self, engine: SearchBackend, request: SearchRequest) -> SearchResults:
        if request.metadata:
            raise ValueError("leaf-sum search (the conversational recipe) takes step, branch and period "
                             "filters, not metadata filters")
        # Imported here: leaf-sum search needs numpy and scipy, the registry (loaded by `--help`) does not.
        from synthex_resources.search.strategies.conversational_fusion import leaf_sum_search

        return leaf_sum_search(engine, request.query, request.steps, request.scope, request.k, self,
                               request.periods, request.as_of)

