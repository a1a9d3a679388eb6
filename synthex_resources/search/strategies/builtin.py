"""The built-in search strategies, registered through the hook a plugin defines
(``register_search_strategies``; ``strategies.load_search_strategies`` names this module as a built-in).

The instances are frozen (immutable), so they are module constants: code that needs one directly (the
engine's default, tests, evals' ablations) imports it; every door lists the registry instead.
"""

from __future__ import annotations

from synthex_resources.search.strategies.base import SearchStrategy
from synthex_resources.search.strategies.conversational import LeafSum
from synthex_resources.search.strategies.hierarchical import DrillDown
from synthex_resources.search.strategies.hierarchical_fresh import FreshFirst
from synthex_resources.search.strategies.hybrid import DenseOnly, LexicalOnly, RRFHybrid
from synthex_resources.search.strategies.registry import StrategyRegistry

BM25 = LexicalOnly(name="bm25", description="keywords only (BM25)", dedup_cosine=None)
DENSE = DenseOnly(name="dense", description="meaning only (embeddings)", dedup_cosine=None)
# The default hybrid: BM25 leads, dense adds recall. On conversational memory BM25 is the stronger leg
# (lethe notes: BM25-only 0.242 vs vector-only 0.138 NDCG@10 on LongMemEval); on LoCoMo turns here a
# sharper fusion (k = 10) with half-weight dense beat k = 60 / equal weights (docs/benchmarks.md).
HYBRID = RRFHybrid(name="hybrid", description="BM25 + embeddings fused by RRF (k = 10, dense at half weight; the default when a search output names no mode, and at a "
                                 "named step when that mode drills down)",
                   rrf_k=10, dense_weight=0.5)
# Textbook RRF (k = 60, equal weights).
HYBRID_EQUAL = RRFHybrid(name="hybrid-equal", description="BM25 + embeddings fused by textbook RRF (k = 60, equal weights)")
# Conversational memory, no model at query time: turns scored through their context-window records
# (BM25 + dense) and their own text (dense), summed on max-normalized scores, smoothed over adjacent
# turns, with a date prior and the speakers' names dropped from the query (in a two-person chat every
# turn is by one of them, and the names dominate a short question's embedding). Tuned on LoCoMo
# (docs/benchmarks.md); the lexical leg wants a stemmed index (``Pipeline(lexical_stem=True)``).
# Of the multi-hop strategies (search/strategies/conversational_multihop.py) only the shared-entity expansion is on: on LoCoMo
# dev7 it lifted recall_all@10 without costing a category; decomposition, PageRank, MMR and session
# diversification did not help there and stay options (docs/benchmarks.md, issue 13).
CONVERSATIONAL = LeafSum(name="conversational",
                         description="ranks conversation turns (leaf records) through their context records",
                         lexical_pool=200, dense_weight=0.5, leaf_dense_weight=0.5, neighbour_weight=0.4,
                         date_weight=1.0, drop_participants=True, entity_weight=0.15)

# Hierarchical memory (issue 22): the conversational recipe is the turn leg; key aggregates (by speaker,
# session, entity, topic: ``pipeline.aggregate(by=...)``) searched with it lift the turns they gather
# (search/strategies/hierarchical_drill_down.py). Measured on LoCoMo in docs/benchmarks.md.
HIERARCHICAL = DrillDown(name="hierarchical",
                         description="scores aggregates (by speaker, session, entity, topic) and drills down "
                                     "to their turns, fused with the conversational turn scores",
                         turns=CONVERSATIONAL)

# The same, plus the named speaker's turns x 1.15 (search/strategies/hierarchical_drill_down.py, step 5): multi-hop evidence is
# mostly one speaker's turns over several sessions. The weight was chosen on dev7 conversations 1-4 and
# checked on 5-7 (docs/benchmarks.md); it costs on questions that name the wrong speaker (adversarial).
HIERARCHICAL_SPEAKER = HIERARCHICAL.with_(
    name="hierarchical-speaker", speaker_weight=0.15,
    description="hierarchical, plus the turns of the speaker the question names ranked higher (x 1.15)")

# The same, plus word-neighbour expansion (search/strategies/hierarchical_expanded.py, drill-down step 6): a turn naming an instance of what
# the question asks for ("camping" for "activities") is lifted. Similarity 0.4 and weight 0.5 were chosen
# on dev7 conversations 1-4 and checked on 5-7 (docs/benchmarks.md).
HIERARCHICAL_EXPANDED = HIERARCHICAL_SPEAKER.with_(
    name="hierarchical-expanded", expansion_weight=0.5, expansion_similarity=0.4,
    description="hierarchical-speaker, plus turns holding the question's words or their nearest words in the "
                "memory's vocabulary ranked higher")

# The same ranking with newer statements of one fact first (search/strategies/hierarchical_fresh.py), for a question asking for
# the present state (current, now, since...): knowledge updates. Within the top 5 (so recall@5 and @10 do not
# move), cosine 0.3, with the question gate: chosen on the 25 LongMemEval dev knowledge-update questions and
# checked on LoCoMo dev7 1-2 (docs/benchmarks.md: without the gate LoCoMo's recall_any@1 fell 19 points); not a
# default: LoCoMo still loses one question at rank 1.
HIERARCHICAL_FRESH = FreshFirst(
    name="hierarchical-fresh", inner=HIERARCHICAL_EXPANDED, window=5, same_cosine=0.3, present_only=True,
    description="hierarchical-expanded, then for a question about the present state (current, now, since...) "
                "of two top hits that say the same thing the newer first")


# The same, with the gate also open for a question in which the asker asks about their own present state
# without a cue word ("How many bikes do I own?": a first-person word and a present-tense auxiliary, no past
# one; hierarchical_fresh.asks_about_own_present). Measured on LongMemEval dev and LoCoMo dev7
# (docs/benchmarks.md, "The asker's own present").
HIERARCHICAL_FRESH_ASKER = HIERARCHICAL_FRESH.with_(
    name="hierarchical-fresh-asker", own_present=True, median_other_times=True,
    description="hierarchical-fresh, its gate also open for a question about the asker's own present state "
                "(\"how many bikes do I own?\")")


BUILTIN_STRATEGIES: dict[str, SearchStrategy] = {
    s.name: s for s in (BM25, DENSE, HYBRID, HYBRID_EQUAL, CONVERSATIONAL, HIERARCHICAL, HIERARCHICAL_SPEAKER,
                        HIERARCHICAL_EXPANDED, HIERARCHICAL_FRESH, HIERARCHICAL_FRESH_ASKER)}


def register_search_strategies(registry: StrategyRegistry) -> None:
    for name, strategy in BUILTIN_STRATEGIES.items():
        registry.register(name, strategy)
