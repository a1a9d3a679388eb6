"""The hierarchical family: the modes ``hierarchical``, ``hierarchical-speaker`` and ``hierarchical-expanded``
(search/strategies/builtin.py), ``DrillDown``'s parameters; ``hierarchical-fresh`` wraps it
(search/strategies/hierarchical_fresh.py).

``DrillDown`` scores records at a higher altitude (key aggregates) and drills down to their leaf turns,
fused with a ``LeafSum`` turn leg. This module holds its parameters only, so that the registry loads
without numpy or scipy; the algorithm is in the family's parts, imported at the first search:

- search/strategies/hierarchical_drill_down.py: the drill-down fusion (altitude scores, named speaker);
- search/strategies/hierarchical_expanded.py: the word-neighbour expansion (``expansion_weight``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from synthex_resources.search.strategies.base import SearchStrategy, param
from synthex_resources.search.strategies.conversational import LeafSum
from synthex_resources.search.types import Fusion, SearchBackend, SearchRequest, SearchResults


@dataclass(frozen=True, kw_only=True)
class DrillDown(SearchStrategy):
    """Scores records at a higher altitude (key aggregates, sessions: records standing for several
    leaves) and drills down to their leaf turns, fused with the turns' own scores from a leaf-sum recipe
    (search/strategies/hierarchical_drill_down.py, its algorithm): the ``hierarchical`` strategy. Takes step, branch and period
    filters, not metadata filters."""

    fusion: ClassVar[Fusion] = Fusion.DRILL_DOWN
    kind: ClassVar[str] = "drill-down"
    takes_metadata_filter: ClassVar[bool] = False
    ranks_searched_records: ClassVar[bool] = False

    turns: LeafSum = param(LeafSum(), doc="the turn leg: a leaf-sum recipe over the turn-level steps")
    altitude_weight: float = param(0.25, low=0.0, doc="x a turn's score per unit of its aggregates' scores")
    altitude_lexical_pool: int = param(50, low=1, doc="aggregates taken from BM25 per altitude step")
    altitude_dense_weight: float = param(1.0, low=0.0, doc="weight of the aggregates' cosine against BM25")
    key_weight: float = param(0.0, low=0.0, doc="score of an aggregate whose key the question names (off: "
                                                "it lifted the wrong speaker on LoCoMo's adversarial questions)")
    speaker_weight: float = param(0.0, low=0.0, doc="x (1 + this) for the turns of the one speaker the question "
                                                    "names (a speaker aggregate's key; off: none or several named)")
    expansion_weight: float = param(0.0, low=0.0, doc="x (1 + this x share of the best) for turns holding the query's "
                                                      "words or their nearest words in the memory's vocabulary")
    expansion_similarity: float = param(0.4, low=0.0, high=1.0, doc="cosine from which a vocabulary word counts as "
                                                                   "a query word's neighbour")

    def search(self, engine: SearchBackend, request: SearchRequest) -> SearchResults:
        if request.metadata:
            raise ValueError("drill-down search (the hierarchical recipe) takes step, branch and period "
                             "filters, not metadata filters")
        # Imported here: drill-down search needs numpy and scipy, the registry (loaded by `--help`) does not.
        from synthex_resources.search.strategies.hierarchical_drill_down import drill_down_search

        config = self if self.reranker is None else replace(self, turns=self.turns.with_(reranker=self.reranker))
        return drill_down_search(engine, request, config)

