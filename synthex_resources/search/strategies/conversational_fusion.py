"""Leaf-sum fusion: search representation records, score their leaves (the turns).

A conversational architecture keeps each turn (a leaf) and write-time views of it, e.g. the turn
with the turn it answers. A question is answered by a turn, so this search ranks turns:

1. each leg scores the representation records: BM25 (normalized by its top score) and cosine
   (``(s - median) / (max - median)``, clipped at 0: only above-typical similarity counts);
2. a leaf takes the best score of its representations per leg, plus the dense score of its own text;
   the legs are summed with the recipe's weights (CombSUM; on LoCoMo it beat RRF, docs/benchmarks.md);
3. a turn receives a share of its better adjacent turn's score (same conversation and session),
   because the answer to a question is often the turn next to the one that matches it;
4. when the query names a date, turns written inside that window get a bonus (search/strategies/conversational_temporal.py);
5. the speakers' own names are dropped from the query first: in a two-person chat every turn is by
   one of them, so the names carry no signal and dominate a short question's embedding;
6. optional multi-hop strategies (search/strategies/conversational_multihop.py, off unless the recipe turns them on) rescore the
   turns after step 3 and may re-select the top k for coverage.

The per-scope bookkeeping (which leaf each record stands for, turn order, speakers, times) is cached
per table version, so it is built once per write, not per query (search/indexes/leaf_scope.py; a large scope is
extended after a write rather than rebuilt).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np

from synthex.core.scope import BranchScope
from synthex_resources.embedder import embed_queries
from synthex_resources.search.indexes.dense_index import dense_index
from synthex_resources.search.indexes.leaf_scope import Scope, leaf_rows, scope_for
from synthex_resources.search.strategies import conversational_multihop
from synthex_resources.search.strategies.conversational_temporal import time_window
from synthex_resources.search.tokenize import tokenize
from synthex_resources.search.types import Reranker, SearchBackend, SearchHit, SearchResults, SearchWarning

# Records scored per leg when the scope is past the dense index's ANN threshold (search/indexes/dense_index.py):
# the shortlist plus the lexical leg's hits. A record outside both would add a small dense score (below
# the 2,000th best of the scope) to a leaf that no other leg found.
DENSE_SHORTLIST = 2000


class LeafSumOptions(conversational_multihop.MultiHopOptions, Protocol):
    """The leaf-sum strategy's parameters this module reads (``strategies.LeafSum``, which calls it)."""

    lexical: bool
    dense: bool
    lexical_pool: int
    lexical_weight: float
    dense_weight: float
    leaf_dense_weight: float
    neighbour_weight: float
    date_weight: float
    drop_participants: bool
    relative_dates: bool
    reranker: Reranker | None

    def rerank(self, query: str, hits: list[SearchHit]) -> tuple[list[SearchHit], list[SearchWarning]]: ...


def without_names(query: str, names: set[str]) -> str:
    """The query with the given name tokens (and their possessive 's) removed; unchanged if that empties it."""
    if not names:
        return query
    pattern = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")(?:'s)?\b",
                         re.IGNORECASE)
    stripped = " ".join(pattern.sub(" ", query).split())
    return stripped if tokenize(stripped) else query


def _normalized_dense(sims: np.ndarray, median: float | None = None) -> np.ndarray:
    """``(s - median) / (max - median)`` clipped at 0; ``median`` of ``sims`` unless given (a shortlist's
    scores come with their scope's median)."""
    if not len(sims):
        return sims
    median = float(np.median(sims)) if median is None else median
    top = float(sims.max())
    return np.clip((sims - median) / (top - median + 1e-9), 0.0, None)


def _with_candidates(index: Any, qvec: np.ndarray, short: tuple[np.ndarray, np.ndarray, float],
                     candidates: list[str]) -> tuple[list[str], np.ndarray]:
    """A dense shortlist's (ids, similarities) plus the exact similarities of ``candidates`` (the other
    legs' hits) it missed: a record the lexical leg found keeps its dense score whatever the shortlist.
    The missed ones are scored in one gather and one product (``similarities_of``), not one vector each."""
    ids, sims, _ = short
    have = set(ids.tolist())
    extra_ids, extra = index.similarities_of([c for c in dict.fromkeys(candidates) if c not in have], qvec)
    if not extra_ids:
        return ids.tolist(), sims
    return ids.tolist() + extra_ids, np.concatenate([sims, extra])


def _best_per_position(positions: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``positions`` (ascending) and each one's largest value, floored at 0: what
    ``np.maximum.at(np.zeros(n), positions, values)`` leaves there (a NaN lends nothing), without
    touching the other ``n`` entries."""
    if not len(positions):
        return positions.astype(np.int64), values.astype(np.float64)
    values = np.where(np.isnan(values), -np.inf, values)
    order = np.argsort(positions, kind="stable")
    positions, values = positions[order], values[order]
    starts = np.flatnonzero(np.concatenate([[True], positions[1:] != positions[:-1]]))
    return positions[starts], np.maximum(np.maximum.reduceat(values, starts), 0.0)


def _last_per_position(positions: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``positions`` (ascending) and each one's last value: what ``a[positions] = values``
    leaves there."""
    unique, first_from_end = np.unique(positions[::-1], return_index=True)
    return unique, values[::-1][first_from_end]


def _neighbour_credit(scope: Scope, total: np.ndarray, support: np.ndarray | None, weight: float) -> tuple[np.ndarray, np.ndarray | None]:
    """Step 3: each turn plus ``weight`` x the better score of its adjacent turns. With ``support`` (the
    positions outside which every score is 0) only the turns next to a scored one change, the same
    sums as the whole-array form; the new support includes them."""
    if support is None or not scope.links_symmetric():
        padded = np.append(total, 0.0)  # index -1 reads the 0 appended at the end
        return total + weight * np.maximum(padded[scope.prev], padded[scope.next]), None
    scored = support[total[support] > 0]
    near = np.concatenate([scope.prev[scored], scope.next[scored]])
    near = np.unique(near[near >= 0])  # every turn with a scored neighbour (the links go both ways)
    if not len(near):
        return total, support
    before, after = scope.prev[near], scope.next[near]
    left = np.where(before >= 0, total[np.maximum(before, 0)], 0.0)
    right = np.where(after >= 0, total[np.maximum(after, 0)], 0.0)
    total[near] = total[near] + weight * np.maximum(left, right)
    return total, np.union1d(support, near)


def _first_stage(engine: SearchBackend, scope: Scope, text: str, steps: list[str] | None, reads: BranchScope,
                 periods: list[str] | None, config: LeafSumOptions) -> tuple[np.ndarray, np.ndarray | None]:
    """Steps 1-3: the legs' scores per leaf, summed, with neighbour credit; and the positions outside which
    every score is 0 (None: any may be nonzero). A large scope's legs each score a few thousand leaves
    (the lexical hits, the dense shortlist): they are added where they fall, not as whole-scope arrays
    (at 1M leaves each whole-array step cost milliseconds, docs/benchmarks.md); the sums are the same."""
    where = engine.where(steps, reads, periods)
    n = len(scope.leaf_ids)
    total = np.zeros(n)
    touched: list[np.ndarray] | None = []  # positions each leg scored; None once a leg scored every leaf

    def add(positions: np.ndarray, values: np.ndarray, weight: float) -> None:
        # ``total += weight * leg`` where the leg is 0 but at ``positions``: the same sum at every leaf
        total[positions] = total[positions] + weight * values
        if touched is not None:
            touched.append(positions)

    def lend(record_ids: Any, scores: np.ndarray, weight: float) -> None:
        # A leaf keeps the best score among the records that stand for it (one batch lookup, not one per id).
        which, positions = scope.leaves_of.pairs(record_ids)
        if len(positions):
            add(*_best_per_position(positions, np.asarray(scores, dtype=total.dtype)[which]), weight)

    # The lexical leg runs beside the embedder and the dense shortlist, overlapped. The persisted postings answer
    # it on this thread (search/engine.py lexical_future), so the query's embedding (which needs no lexical
    # result, and ONNX runs without the GIL) is handed to the pool first: at 1M records the two took ~13 and
    # ~6 ms one after the other (docs/benchmarks.md). The legs are still added in the same order (lexical
    # first), so the sums do not depend on which ends first.
    wants_vector = bool(config.dense or config.leaf_dense_weight)
    vector_future = engine.query_vector_future(text) if wants_vector and config.lexical else None
    lexical_future = engine.lexical_future(text, where, config.lexical_pool) if config.lexical else None
    if vector_future is not None:
        qvec = vector_future.result()
    else:
        qvec = embed_queries(engine.store.embedder, [text])[0] if wants_vector else None
    index = dense_index(engine.store) if qvec is not None else None
    short = index.approximate_scores(qvec, steps, reads, periods, DENSE_SHORTLIST) \
        if index is not None and config.dense else None
    lexical_ids: list[str] = []
    if lexical_future is not None:
        pairs = lexical_future.result()
        lexical_ids = [p[0] for p in pairs]
        if pairs and pairs[0][1] > 0:
            lend(lexical_ids, np.array([p[1] for p in pairs]) / pairs[0][1], config.lexical_weight)
    if index is not None:
        if config.dense:
            if short is not None:  # a scope too large to score every record (search/indexes/ann.py)
                ids, sims = _with_candidates(index, qvec, short, lexical_ids)
                lend(ids, _normalized_dense(sims, short[2]), config.dense_weight)
            else:
                dense = np.zeros(n)
                ids, sims, _ = index.scores(qvec, steps, reads, periods)
                rows, leaves, one_to_one = scope.leaf_pairs("searched", ids)
                if one_to_one:
                    dense[leaves] = _normalized_dense(sims)[rows]
                else:  # several records per leaf: the best one counts (ufunc.at is exact but ~10x slower)
                    np.maximum.at(dense, leaves, _normalized_dense(sims)[rows])
                total += config.dense_weight * dense
                touched = None
        if config.leaf_dense_weight and set(scope.leaf_steps) != set(steps or []):
            short = index.approximate_scores(qvec, scope.leaf_steps, reads, None, DENSE_SHORTLIST)
            if short is not None:
                scored = np.flatnonzero(total) if touched is None else _support(touched, total)
                ids, sims = _with_candidates(index, qvec, short, [scope.leaf_ids[i] for i in scored])
                normalized = _normalized_dense(sims, short[2])
                at = scope.index_of.rows(ids)
                found = at >= 0
                add(*_last_per_position(at[found], np.asarray(normalized[found], dtype=total.dtype)),
                    config.leaf_dense_weight)
            else:
                own = np.zeros(n)
                ids, sims, _ = index.scores(qvec, scope.leaf_steps, reads, None)
                rows, leaves, _ = scope.leaf_pairs("own", ids, own=True)
                own[leaves] = _normalized_dense(sims)[rows]
                total += config.leaf_dense_weight * own
                touched = None
    support = None if touched is None else _support(touched, total)
    if config.neighbour_weight:
        total, support = _neighbour_credit(scope, total, support, config.neighbour_weight)
    return total, support


def _support(touched: list[np.ndarray], total: np.ndarray) -> np.ndarray:
    """The positions the legs scored that hold a nonzero score, ascending."""
    every = np.unique(np.concatenate(touched)) if touched else np.zeros(0, dtype=np.int64)
    return every[total[every] != 0]


def _top(total: np.ndarray, support: np.ndarray | None) -> float:
    """``total.max()``, read only at ``support`` when it is known (every other score is 0)."""
    if support is None:
        return float(total.max())
    return max(float(total[support].max()), 0.0) if len(support) else 0.0


def leaf_sum_search(engine: SearchBackend, query: str, steps: list[str] | None, reads: BranchScope, k: int,
                    config: LeafSumOptions, periods: list[str] | None = None,
                    as_of: datetime | str | None = None) -> SearchResults:
    scored = _scored(engine, query, steps, reads, config, periods, as_of)
    if scored is None:
        return SearchResults()
    scope, total, support = scored
    return ranked_leaves(engine, scope, total, query, reads, k, config, support)


def leaf_scores(engine: SearchBackend, query: str, steps: list[str] | None, reads: BranchScope,
                config: LeafSumOptions, periods: list[str] | None = None,
                as_of: datetime | str | None = None) -> tuple[Scope, np.ndarray] | None:
    """Every leaf's score (steps 1-6 but the final selection), with the scope it indexes; None when
    ``steps`` hold no leaves. The hierarchical strategy (search/strategies/hierarchical_drill_down.py) fuses it with altitude."""
    scored = _scored(engine, query, steps, reads, config, periods, as_of)
    return None if scored is None else scored[:2]


def _scored(engine: SearchBackend, query: str, steps: list[str] | None, reads: BranchScope,
            config: LeafSumOptions, periods: list[str] | None = None,
            as_of: datetime | str | None = None) -> tuple[Scope, np.ndarray, np.ndarray | None] | None:
    """``leaf_scores`` plus the positions outside which every score is 0 (None: not known)."""
    where = engine.where(steps, reads, periods)
    scope = scope_for(engine, where)
    n = len(scope.leaf_ids)
    if not n:
        return None
    text = without_names(query, scope.participants) if config.drop_participants else query
    total, support = _first_stage(engine, scope, text, steps, reads, periods, config)
    total, support = conversational_multihop.rescore(  # multi-hop strategies (the entity expansion is on in ``conversational``)
        engine, scope, where, text, total, config,
        lambda part: _first_stage(engine, scope, part, steps, reads, periods, config)[0], support)
    window = time_window(query, as_of, config.relative_dates) if config.date_weight else None
    if window is not None and _top(total, support) > 0:
        known = ~np.isnan(scope.times)
        years = []
        if known.any():
            first, last = (datetime.fromtimestamp(float(f(scope.times[known])), UTC).year for f in (np.min, np.max))
            years = list(range(first, last + 1))
        inside = np.zeros(n, dtype=bool)
        for start, end in window.intervals(years):
            inside |= (scope.times >= start.timestamp()) & (scope.times < end.timestamp())
        if inside.any() and not inside[known].all():  # a window that covers everything says nothing
            total = total + config.date_weight * _top(total, support) * inside
            support = None
    return scope, total, support


def ranked_leaves(engine: SearchBackend, scope: Scope, total: np.ndarray, query: str, reads: BranchScope, k: int,
                  config: LeafSumOptions, support: np.ndarray | None = None) -> SearchResults:
    """The top ``k`` leaves by ``total`` (ties by time, then id), diversified and reranked as configured.
    ``support``: the positions outside which every score is 0, when known (only they are looked at)."""
    blank = dense_index(engine.store).without_text()
    silent = scope.index_of.rows(sorted(blank)) if blank else np.zeros(0, dtype=np.int64)
    silent = silent[silent >= 0]
    if len(silent):  # a turn with no text answers nothing, whatever its neighbours or context records score
        total[silent] = 0.0
    candidates = np.flatnonzero(total > 0) if support is None else support[total[support] > 0]
    # An extended scope may still hold leaves deleted since its build (search/indexes/leaf_scope.py): a few more
    # candidates are taken, and the deleted ones are skipped when the hits are read back.
    want = k + 10 if scope.extended_from is not None else k
    if config.reranker is not None:  # the reranker sees its own pool (its top_n), then the top k is cut
        want = max(want, config.reranker.top_n)
    pool = want * config.diversify_pool if config.diversify else want
    if len(candidates) > pool:  # keep the top pool and everything tied with its last, then order exactly
        kth = np.partition(total[candidates], -pool)[-pool]
        candidates = candidates[total[candidates] >= kth]
    order = candidates[np.lexsort((scope.tiebreak[candidates], -total[candidates]))]
    order = conversational_multihop.diversify(engine, scope, total, order, want, config)  # the first ones unless diversifying
    # Without a reranker only the first k readable hits are kept: their rows are read first, and the spare
    # candidates' (an extended scope's k + 10) only when some of those turned out deleted or blank. A take
    # costs per row and column (~0.6 ms per row at 1M records, docs/benchmarks.md); the hits are the same.
    first = len(order) if config.reranker is not None else k
    hits = _hits_of(engine, scope, total, order[:first], reads)
    if len(hits) < k and len(order) > first:
        hits += _hits_of(engine, scope, total, order[first:], reads)
    hits, warnings = config.rerank(query, hits)
    return SearchResults(hits[:k], warnings)


def _hits_of(engine: SearchBackend, scope: Scope, total: np.ndarray, positions: np.ndarray,
             reads: BranchScope) -> list[SearchHit]:
    """The hits of the leaves at ``positions`` (in that order) whose rows ``reads`` reads and that hold text."""
    ids = [scope.leaf_ids[i] for i in positions]
    rows = leaf_rows(engine, scope, ids, reads)
    hits = [engine.hit(rows[rid], float(total[i]), {}) for rid, i in zip(ids, positions, strict=True) if rid in rows]
    return [h for h in hits if h.content.strip()]  # a leaf never embedded has no zero vector to tell
