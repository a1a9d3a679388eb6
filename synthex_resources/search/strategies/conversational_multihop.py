"""Multi-hop strategies for leaf-sum search: questions whose evidence is spread over several turns.

A question like "What activities does Melanie partake in?" is answered by several turns, often in
different sessions, and the first stage (search/strategies/conversational_fusion.py) tends to fill the top k with the one
best-matching exchange and its neighbours. Four LLM-free strategies, each switched by a parameter of
the leaf-sum strategy (``LeafSum``, all off by default), each measured on LoCoMo in docs/benchmarks.md:

(a) ``decompose``: split the question on conjunctions and lists ("X and Y", "A, B or C") and, when it
    names several rare entities, into one sub-query per entity; score each part with the first stage and
    add the parts' normalized scores (``Decompose.SUM``, as their mean) or their best (``Decompose.MAX``),
    so every part gets coverage.
(b) ``entity_weight``: turns that share rare terms (capitalized entities and words few turns use) with
    the top first-stage hits get credit in proportion to the hit's score and the share of its rare terms.
(c) ``ppr_weight``: personalized PageRank over an LLM-free graph (turn - adjacent turn, turn - rare
    term - turn: HippoRAG's bipartite passage/phrase graph with a lexicon instead of OpenIE), seeded by
    the first-stage hits' scores (synaptic notes: graph expansion + PPR + MMR over a lexical graph).
(d) ``diversify``: ``Diversify.MMR`` re-orders the top candidates by maximal marginal relevance on the
    turns' own embeddings (Carbonell & Goldstein 1998); ``Diversify.SESSION`` discounts a turn by
    ``session_penalty`` for each turn of its session already selected.

The per-scope lexicon (rare terms per turn, sessions) is search/indexes/lexicon.py's, cached per (table
version, scope) in the store's search state, separately from conversational_fusion's bookkeeping; it reads only the
leaves' ids, order and adjacency, and their text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
from scipy import sparse

from synthex.core.enrich.words import STOPWORDS
from synthex_resources.search.indexes.dense_index import dense_index
from synthex_resources.search.indexes.lexicon import Lexicon, lexicon, sessions_of
from synthex_resources.search.tokenize import tokenize
from synthex_resources.search.types import Decompose, Diversify, SearchBackend

Scorer = Callable[[str], np.ndarray]  # sub-query text -> first-stage score per leaf


class MultiHopOptions(Protocol):
    """The leaf-sum strategy's parameters this module reads (``conversational.LeafSum``)."""

    decompose: Decompose
    decompose_weight: float
    entity_weight: float
    ppr_weight: float
    expand_seeds: int
    ppr_restart: float
    rare_df: int
    diversify: Diversify
    diversify_pool: int
    mmr_lambda: float
    session_penalty: float


_NAMED = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*)")  # "Grand Canyon": one entity
_SPLIT = re.compile(r"\s*(?:,|;|\band\b|\bor\b|\bas well as\b|\bboth\b)\s*", re.IGNORECASE)


# -- (a) decomposition -----------------------------------------------------------------------------
def sub_queries(text: str, rare_entities: set[str] | None = None) -> list[str]:
    """The parts of a question, without a model: split on conjunctions and list commas ("What did X
    learn, and Y?" -> "What did X learn", "Y"), else one part per named entity when it names several
    (a multi-word name kept whole; with ``rare_entities``, only names with a word among them count).
    Parts without a content word are dropped; fewer than two parts means no decomposition."""
    parts = [p.strip(" ?.!") for p in _SPLIT.split(text)]
    parts = [p for p in parts if any(t not in STOPWORDS for t in tokenize(p))]
    if len(parts) >= 2:
        return list(dict.fromkeys(parts))
    named = [m for m in dict.fromkeys(_NAMED.findall(text)) if m.lower() not in STOPWORDS
             and (rare_entities is None or any(t in rare_entities for t in tokenize(m)))]
    if len(named) >= 2:
        return [re.sub(r"\b(?:" + "|".join(re.escape(o) for o in named if o != keep) + r")\b", " ", text)
                for keep in named]
    return []


# How the parts' normalized scores (one row per part) are combined per leaf.
_COMBINE: dict[Decompose, Callable[[np.ndarray], np.ndarray]] = {
    Decompose.SUM: lambda stack: stack.mean(axis=0),  # the sum scaled by the number of parts
    Decompose.MAX: lambda stack: stack.max(axis=0),
}


def decompose(text: str, total: np.ndarray, score: Scorer, mode: Decompose, weight: float,
              vocab: dict[str, int]) -> np.ndarray:
    parts = sub_queries(text, set(vocab))
    if not parts or total.max() <= 0:
        return total
    scored = []
    for part in parts:
        s = score(part)
        scored.append(s / s.max() if s.max() > 0 else s)
    stack = np.vstack(scored)
    combined = _COMBINE[mode](stack)
    return total + weight * total.max() * combined


# -- (b) shared-entity expansion and (c) personalized PageRank --------------------------------------
def _seeds(total: np.ndarray, m: int, support: np.ndarray | None = None) -> np.ndarray:
    """The ``m`` best leaves, best first, equal scores by position (what a stable argsort gives), found
    without sorting every leaf. ``support``: ascending positions outside which every score is 0 (only they
    are read)."""
    positive = np.flatnonzero(total > 0) if support is None else support[total[support] > 0]
    m = min(m, len(positive))
    if not m:
        return np.zeros(0, dtype=np.int64)
    kth = np.partition(total[positive], len(positive) - m)[len(positive) - m]
    cand = positive[total[positive] >= kth]  # ascending positions, ties at the cut included
    return cand[np.argsort(-total[cand], kind="stable")][:m]


def entity_credit(lex: Lexicon, total: np.ndarray, seeds: int) -> np.ndarray:
    """Per leaf: max over the top ``seeds`` hits of (hit score / top score) x (idf share of the hit's rare
    terms the leaf shares). The hits themselves get no credit from themselves."""
    credit = np.zeros(len(total))
    leaves, values = entity_credit_pairs(lex, total, seeds)
    credit[leaves] = values
    return credit


def entity_credit_pairs(lex: Lexicon, total: np.ndarray, seeds: int,
                        support: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``entity_credit`` where it is not 0: (leaves ascending, credit). Only the leaves on the seeds' rare
    terms' postings are touched (a rare term is on few leaves), not every leaf, and each seed's overlap is
    summed in arrays (in term order, as a running sum per leaf would add them)."""
    top = _seeds(total, seeds, support)
    if not len(top):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    best = float(total[top[0]])
    indptr, indices = lex.postings.indptr, lex.postings.indices
    found_leaves, found_values = [], []
    for seed in top:
        start, end = lex.terms.indptr[seed], lex.terms.indptr[seed + 1]
        terms, idfs = lex.terms.indices[start:end], lex.terms.data[start:end]
        if not len(terms):
            continue
        firsts, lasts = indptr[terms], indptr[terms + 1]
        counts = (lasts - firsts).astype(np.int64)
        if not counts.sum():
            continue
        # every (leaf, idf) pair of the seed's terms, term by term: leaf = indices[first + 0 .. count - 1]
        offsets = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        leaves = indices[np.repeat(firsts, counts) + offsets]
        unique, where = np.unique(leaves, return_inverse=True)
        overlap = np.zeros(len(unique))
        np.add.at(overlap, where, np.repeat(np.asarray(idfs, dtype=np.float64), counts))  # in pair order
        keep = unique != seed
        if not keep.any():
            continue
        norm = float(lex.seed_norm[seed]) or 1.0
        found_leaves.append(unique[keep].astype(np.int64))
        found_values.append(overlap[keep] / norm * (total[seed] / best))
    if not found_leaves:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    leaves, values = np.concatenate(found_leaves), np.concatenate(found_values)
    order = np.argsort(leaves, kind="stable")
    leaves, values = leaves[order], values[order]
    starts = np.flatnonzero(np.concatenate([[True], leaves[1:] != leaves[:-1]]))
    # the best seed's share per leaf, floored at 0 (as ``np.maximum.at`` into zeros)
    return leaves[starts], np.maximum(np.maximum.reduceat(values, starts), 0.0)


def pagerank(lex: Lexicon, total: np.ndarray, seeds: int, restart: float, iterations: int = 25) -> np.ndarray:
    """Personalized PageRank over turns and rare terms (turn-turn adjacency, turn-term by idf), restarting
    at the top ``seeds`` hits in proportion to their scores. Returns the turns' mass, max 1."""
    n = len(total)
    top = _seeds(total, seeds)
    if not len(top):
        return np.zeros(n)
    t = lex.terms.shape[1]
    graph = sparse.bmat([[lex.adjacency, lex.terms], [lex.terms.T, None]], format="csr")
    out = np.asarray(graph.sum(axis=1)).ravel()
    out[out == 0] = 1.0
    walk = sparse.diags(1.0 / out) @ graph  # row-stochastic
    walk_t = walk.T.tocsr()
    p = np.zeros(n + t)
    p[top] = total[top]
    p /= p.sum()
    r = p.copy()
    for _ in range(iterations):
        r = restart * p + (1 - restart) * (walk_t @ r)
    mass = r[:n]
    return mass / mass.max() if mass.max() > 0 else mass


def rescore(engine: SearchBackend, scope: Any, where: str, text: str, total: np.ndarray, config: MultiHopOptions,
            score: Scorer, support: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Strategies (a)-(c) on the first-stage scores (before the date prior), and the positions outside
    which every new score is 0. ``support``: the same for ``total`` (None: not known). The entity credit
    keeps it (it reaches a few hundred leaves); decomposition and PageRank score every leaf. ``total`` may
    be changed in place."""
    if not (config.decompose or config.entity_weight or config.ppr_weight):
        return total, support
    top = float(total.max()) if support is None else (float(total[support].max()) if len(support) else 0.0)
    if top <= 0:
        return total, support
    lex = lexicon(engine, where, scope, config.rare_df)
    first, first_support = total, support
    walked = pagerank(lex, first, config.expand_seeds, config.ppr_restart) if config.ppr_weight else None
    if config.decompose:
        total, support = decompose(text, total, score, config.decompose, config.decompose_weight, lex.vocab), None
    if config.entity_weight:  # read from ``first`` before ``total`` (maybe the same array) changes
        leaves, credit = entity_credit_pairs(lex, first, config.expand_seeds, first_support)
        total[leaves] = total[leaves] + config.entity_weight * top * credit  # 0 elsewhere: those stay as they are
        if support is not None:
            support = np.union1d(support, leaves[credit != 0])
    if walked is not None:
        total, support = total + config.ppr_weight * top * walked, None
    return total, support


# -- (d) diversification ---------------------------------------------------------------------------
def _by_session(engine: SearchBackend, scope: Any, pool: np.ndarray, rel: np.ndarray, k: int,
                config: MultiHopOptions) -> list[int]:
    session = sessions_of(scope.prev)[pool]
    left = list(range(len(pool)))
    chosen: list[int] = []
    taken: dict[int, int] = {}
    while left and len(chosen) < k:
        adj = [rel[i] * (1 - config.session_penalty) ** taken.get(int(session[i]), 0) for i in left]
        best = left.pop(int(np.argmax(adj)))  # argmax: first of equals, i.e. the better first-stage rank
        chosen.append(best)
        taken[int(session[best])] = taken.get(int(session[best]), 0) + 1
    return chosen


def _mmr(engine: SearchBackend, scope: Any, pool: np.ndarray, rel: np.ndarray, k: int,
         config: MultiHopOptions) -> list[int]:
    vectors = dense_index(engine.store).vectors_of([scope.leaf_ids[i] for i in pool])
    dim = len(next(iter(vectors.values()))) if vectors else 1
    mat = np.stack([vectors.get(scope.leaf_ids[i], np.zeros(dim, np.float32)) for i in pool]).astype(np.float64)
    sims = mat @ mat.T
    best_sim = np.full(len(pool), -np.inf)
    lam = config.mmr_lambda
    left = list(range(len(pool)))
    chosen: list[int] = []
    while left and len(chosen) < k:
        cand = np.array(left)
        redundancy = np.where(np.isfinite(best_sim[cand]), best_sim[cand], 0.0)
        value = lam * rel[cand] - (1 - lam) * redundancy
        best = int(cand[int(np.argmax(value))])
        left.remove(best)
        chosen.append(best)
        best_sim = np.maximum(best_sim, sims[best])
    return chosen


# Each way of re-selecting: (engine, scope, pool, relevance in the pool, k, options) -> pool positions.
_DIVERSIFY: dict[Diversify, Callable[..., list[int]]] = {Diversify.SESSION: _by_session, Diversify.MMR: _mmr}


def diversify(engine: SearchBackend, scope: Any, total: np.ndarray, order: np.ndarray, k: int,
              config: MultiHopOptions) -> np.ndarray:
    """Re-select the top ``k`` from ``order`` (candidates best first, a pool of several k)."""
    if not config.diversify or len(order) <= 1:
        return order[:k]
    pool = order[: max(k * config.diversify_pool, k)]
    rel = total[pool] / (total[pool].max() or 1.0)
    chosen = _DIVERSIFY[config.diversify](engine, scope, pool, rel, k, config)
    return pool[np.array(chosen, dtype=np.int64)]
