"""Drill-down fusion: score records at a higher altitude, drill down to their leaf turns, and fuse that
with the turns' own scores (the ``hierarchical`` strategy; design §2.4, issue 22).

The searched steps split in two by what their records stand for (search/indexes/leaf_scope.py walks the
provenance): a step whose records each stand for one leaf is turn level (a turn, a turn in context);
a step with a record that stands for several leaves is an altitude (a key aggregate by speaker,
session, entity or topic; a monthly reflection). Then:

1. the turn leg is a leaf-sum recipe (search/strategies/conversational_fusion.py, e.g. ``conversational``) over the turn
   level steps: every leaf's score;
2. each altitude step's records are scored for the query: ``key_weight`` when the question names the
   record's key (every token of a key aggregate's ``group.key``: "Melanie", "pottery class"), plus BM25
   (normalized by the top score) and cosine (``(s - median) / (max - median)``, clipped at 0), divided
   by the step's best, so the best-matching aggregate of each altitude scores 1;
3. drill down: a leaf takes the best score among the aggregates of a step that contain it, summed
   over the altitude steps;
4. fusion: ``turn score x (1 + altitude_weight x altitude score)``. Multiplicative on purpose: an
   aggregate lifts its members that the question also matches, so evidence that is spread over sessions
   but gathered in one aggregate (everything one speaker said about camping) rises together; it does
   not bring in members that match nothing (a speaker's aggregate holds half the conversation);
5. named speaker (``speaker_weight``, off in ``hierarchical``, on in ``hierarchical-speaker``): when the
   question names exactly one speaker (the key of one speaker aggregate, ``group.by == "speaker"``), that
   speaker's turns take ``x (1 + speaker_weight)``. Multi-hop evidence is mostly one speaker's turns over
   several sessions (157 of dev7's 192 multi-hop questions), and the turn leg drops the speakers' names
   from the query, so without it the other speaker's matching turns take the slots. It costs on LoCoMo's
   adversarial questions, which name the speaker who did not say it (docs/benchmarks.md);
6. word neighbours (``expansion_weight``, on in ``hierarchical-expanded``): ``x (1 + weight x e / max e)``
   where ``e`` scores a turn by the words it shares with the query or that are the query words' nearest
   neighbours in the memory's vocabulary (search/strategies/hierarchical_expanded.py): "activities" reaches "camping".

Leaves with no text never rank (their zero vector, store/vectors.py). Without altitude steps the
strategy is its turn leg.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from synthex.core.scope import BranchScope
from synthex_resources.embedder import embed_queries
from synthex_resources.search.indexes.dense_index import dense_index
from synthex_resources.search.indexes.id_lookup import IdLookup
from synthex_resources.search.indexes.leaf_scope import Scope, scope_for
from synthex_resources.search.strategies.conversational_fusion import (
    LeafSumOptions,
    leaf_scores,
    ranked_leaves,
)
from synthex_resources.search.tokenize import tokenize
from synthex_resources.search.types import SearchBackend, SearchRequest, SearchResults


class DrillDownOptions(Protocol):
    """The hierarchical strategy's parameters this module reads (``strategies.DrillDown``)."""

    turns: LeafSumOptions
    altitude_weight: float
    altitude_lexical_pool: int
    altitude_dense_weight: float
    key_weight: float
    speaker_weight: float
    expansion_weight: float
    expansion_similarity: float


def split_steps(engine: SearchBackend, steps: list[str], reads: BranchScope,
                periods: list[str] | None) -> tuple[list[str], list[str]]:
    """(turn level steps, altitude steps): a step is an altitude when one of its records in scope stands
    for several leaves, or is a key aggregate's (``group.key``: a group may have one member). The per-step
    bookkeeping is cached per table version (search/indexes/leaf_scope.py)."""
    turn_level, altitude = [], []
    for step in steps:
        where = engine.where([step], reads, periods)
        records = scope_for(engine, where).leaves_of
        if not records:
            continue  # nothing in scope (a key aggregate whose key function found no key): no part in it
        several = bool((records.sizes > 1).any())  # no per-record lists: a turn-level step may hold 1M
        (altitude if several or key_tokens(engine, where) else turn_level).append(step)
    return turn_level, altitude


def _normalized(scores: dict[str, float]) -> dict[str, float]:
    top = max(scores.values(), default=0.0)
    return {rid: s / top for rid, s in scores.items()} if top > 0 else {}


def key_tokens(engine: SearchBackend, where: str) -> dict[str, frozenset[str]]:
    """Record id -> the tokens of its key, for the records of ``where`` that have one."""
    return {rid: tokens for rid, (tokens, _by) in _keys(engine, where).items()}


def keys_by(engine: SearchBackend, where: str, by: str) -> dict[str, frozenset[str]]:
    """``key_tokens`` of the records of ``where`` made by the key function named ``by`` ("speaker")."""
    return {rid: tokens for rid, (tokens, made_by) in _keys(engine, where).items() if made_by == by}


def _keys(engine: SearchBackend, where: str) -> dict[str, tuple[frozenset[str], str]]:
    # through pylance: `synthex search` stays light (no lancedb)
    return engine.store.search_state.drill_down_keys.get(engine.store.read_dataset(), where)


def altitude_scores(engine: SearchBackend, query: str, step: str, reads: BranchScope, periods: list[str] | None,
                    config: DrillDownOptions, qvec: np.ndarray | None) -> dict[str, float]:
    """Step 2: each record of an altitude step scored for ``query``, the best 1 (records scoring 0 left out)."""
    where = engine.where([step], reads, periods)
    scores: dict[str, float] = {}
    if config.key_weight:  # an aggregate the question names by its key ("Melanie", "pottery class")
        asked = set(tokenize(query))
        for rid, tokens in key_tokens(engine, where).items():
            if tokens <= asked:
                scores[rid] = config.key_weight
    pairs = engine.lexical(query, where, config.altitude_lexical_pool)
    if pairs and pairs[0][1] > 0:
        for rid, s in pairs:
            scores[rid] = scores.get(rid, 0.0) + s / pairs[0][1]
    if qvec is not None and config.altitude_dense_weight:
        ids, sims, _ = dense_index(engine.store).scores(qvec, [step], reads, periods)
        if len(sims):
            median = float(np.median(sims))
            dense = np.clip((sims - median) / (float(sims.max()) - median + 1e-9), 0.0, None)
            for rid, s in zip(ids.tolist(), dense.tolist(), strict=True):
                if s > 0:
                    scores[rid] = scores.get(rid, 0.0) + config.altitude_dense_weight * s
    return _normalized(scores)


def named_speaker(engine: SearchBackend, query: str, altitude: list[str], reads: BranchScope,
                  periods: list[str] | None, index_of: IdLookup, n: int) -> np.ndarray:
    """Step 5: 1 for the leaves of the one speaker aggregate whose key the question names, else 0 (all 0
    when it names none, or several: "What do Ann and Bob both like?" favours neither)."""
    asked = set(tokenize(query))
    named = [(step, rid) for step in altitude
             for rid, tokens in keys_by(engine, engine.where([step], reads, periods), "speaker").items()
             if tokens <= asked]
    mask = np.zeros(n)
    if len(named) == 1:
        step, rid = named[0]
        step_scope = scope_for(engine, engine.where([step], reads, periods))
        leaves = leaf_rows(index_of, step_scope, rid)
        mask[leaves] = 1.0
    return mask


def leaf_rows(index_of: IdLookup, step_scope: Scope, rid: str) -> np.ndarray:
    """The positions in ``index_of`` of the leaves record ``rid`` of ``step_scope`` stands for (one batched
    lookup, not one per leaf: a speaker's aggregate may stand for half a conversation)."""
    ids = [step_scope.leaf_ids[pos] for pos in step_scope.leaves_of.get(rid, ())]
    found = index_of.rows(ids) if ids else np.zeros(0, dtype=np.int64)
    return found[found >= 0]


def drill_down_search(engine: SearchBackend, request: SearchRequest, config: DrillDownOptions) -> SearchResults:
    reads, periods = request.scope, request.periods
    turn_level, altitude = split_steps(engine, list(request.steps or []), reads, periods)
    if not turn_level and not altitude:
        return SearchResults()
    if not turn_level:  # only altitudes searched: the turn leg scores their leaves' own records
        turn_level = sorted({s for step in altitude
                             for s in scope_for(engine, engine.where([step], reads, periods)).leaf_steps})
    scored = leaf_scores(engine, request.query, turn_level, reads, config.turns, periods, request.as_of)
    if scored is None:
        return SearchResults()
    scope, total = scored
    if altitude and config.altitude_weight:
        qvec = embed_queries(engine.store.embedder, [request.query])[0] if config.altitude_dense_weight else None
        lift = np.zeros(len(scope.leaf_ids))
        for step in altitude:
            step_scope = scope_for(engine, engine.where([step], reads, periods))
            best = np.zeros(len(scope.leaf_ids))
            for rid, score in altitude_scores(engine, request.query, step, reads, periods, config, qvec).items():
                leaves = leaf_rows(scope.index_of, step_scope, rid)
                best[leaves] = np.maximum(best[leaves], score)
            lift += best
        total = total * (1.0 + config.altitude_weight * lift)
    if altitude and config.speaker_weight:
        total = total * (1.0 + config.speaker_weight * named_speaker(engine, request.query, altitude, reads, periods,
                                                                     scope.index_of, len(scope.leaf_ids)))
    if config.expansion_weight:
        total = total * (1.0 + config.expansion_weight * _expansion(engine, request.query, turn_level, reads, periods,
                                                                    scope, config.expansion_similarity))
    return ranked_leaves(engine, scope, total, request.query, reads, request.k, config.turns)


def _expansion(engine: SearchBackend, query: str, turn_level: list[str], reads: BranchScope,
               periods: list[str] | None, scope: Scope, similarity: float) -> np.ndarray:
    """Step 6: word-neighbour scores of the scope's leaves, divided by their best (all 0 when none)."""
    from synthex_resources.search.indexes.word_index import word_index, word_vectors
    from synthex_resources.search.strategies.hierarchical_expanded import expansion_scores, query_words

    words = query_words(query, scope.participants)
    if not words:
        return np.zeros(len(scope.leaf_ids))
    index = word_index(engine, engine.where(turn_level, reads, periods), scope)
    scores = expansion_scores(index, word_vectors(engine).of(words, engine.store.embedder.embed, asked=True),
                              similarity)
    top = float(scores.max()) if len(scores) else 0.0
    return scores / top if top > 0 else scores
