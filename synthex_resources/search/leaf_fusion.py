"""Leaf-sum fusion: search representation records, score their leaves (the turns).

A conversational architecture keeps each turn (a leaf) and write-time views of it, e.g. the turn
with the turn it answers. A question is answered by a turn, so this search ranks turns:

1. each leg scores the representation records: BM25 (normalized by its top score) and cosine
   (``(s - median) / (max - median)``, clipped at 0: only above-typical similarity counts);
2. a leaf takes the best score of its representations per leg, plus the dense score of its own text;
   the legs are summed with the recipe's weights (CombSUM; on LoCoMo it beat RRF, docs/benchmarks.md);
3. a turn receives a share of its better adjacent turn's score (same conversation and session),
   because the answer to a question is often the turn next to the one that matches it;
4. when the query names a date, turns written inside that window get a bonus (search/temporal.py);
5. the speakers' own names are dropped from the query first: in a two-person chat every turn is by
   one of them, so the names carry no signal and dominate a short question's embedding;
6. optional multi-hop strategies (search/multihop.py, off unless the recipe turns them on) rescore the
   turns after step 3 and may re-select the top k for coverage.

The per-scope bookkeeping (which leaf each record stands for, turn order, speakers, times) is cached
per table version, so it is built once per write, not per query (search/leaf_scope.py; a large scope is
extended after a write rather than rebuilt).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np

from synthex.core.scope import BranchScope
from synthex_resources.search import multihop
from synthex_resources.search.dense_index import dense_index
from synthex_resources.search.leaf_scope import Scope, leaf_rows, scope_for
from synthex_resources.search.temporal import time_window
from synthex_resources.search.tokenize import tokenize
from synthex_resources.search.types import Reranker, SearchBackend, SearchHit, SearchResults, SearchWarning

# Records scored per leg when the scope is past the dense index's ANN threshold (search/dense_index.py):
# the shortlist plus the lexical leg's hits. A record outside both would add a small dense score (below
# the 2,000th best of the scope) to a leaf that no other leg found.
DENSE_SHORTLIST = 2000


class LeafSumOptions(multihop.MultiHopOptions, Protocol):
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
    legs' hits) it missed: a record the lexical leg found keeps its dense score whatever the shortlist."""
    ids, sims, _ = short
    have = set(ids.tolist())
    vectors = index.vectors_of([c for c in dict.fromkeys(candidates) if c not in have])
    if not vectors:
        return ids.tolist(), sims
    extra = np.stack(list(vectors.values())) @ np.asarray(qvec, dtype=np.float32)
    return ids.tolist() + list(vectors), np.concatenate([sims, extra])


def _first_stage(engine: SearchBackend, scope: Scope, text: str, steps: list[str] | None, reads: BranchScope,
                 periods: list[str] | None, config: LeafSumOptions) -> np.ndarray:
    """Steps 1-3: the legs' scores per leaf, summed, with neighbour credit."""
    where = engine.where(steps, reads, periods)
    n = len(scope.leaf_ids)
    total = np.zeros(n)

    def lend(leaf_scores: np.ndarray, record_ids: Any, scores: np.ndarray) -> None:
        # A leaf keeps the best score among the records that stand for it (one batch lookup, not one per id).
        which, positions = scope.leaves_of.pairs(record_ids)
        if len(positions):
            values = np.asarray(scores, dtype=leaf_scores.dtype)[which]
            # NaN lends nothing (as the comparison did); maximum.at has numpy's fast path, fmax.at has not
            np.maximum.at(leaf_scores, positions, np.where(np.isnan(values), -np.inf, values))

    # The index query waits on I/O, the embedder on compute: overlap them.
    lexical_future = engine.lexical_future(text, where, config.lexical_pool) if config.lexical else None
    qvec = engine.store.embedder.embed([text])[0] if config.dense or config.leaf_dense_weight else None
    lexical_ids: list[str] = []
    if lexical_future is not None:
        pairs = lexical_future.result()
        lexical_ids = [p[0] for p in pairs]
        if pairs and pairs[0][1] > 0:
            lexical = np.zeros(n)
            lend(lexical, lexical_ids, np.array([p[1] for p in pairs]) / pairs[0][1])
            total += config.lexical_weight * lexical
    if qvec is not None:
        index = dense_index(engine.store)
        if config.dense:
            dense = np.zeros(n)
            short = index.approximate_scores(qvec, steps, reads, periods, DENSE_SHORTLIST)
            if short is not None:  # a scope too large to score every record (search/ann.py)
                ids, sims = _with_candidates(index, qvec, short, lexical_ids)
                lend(dense, ids, _normalized_dense(sims, short[2]))
            else:
                ids, sims, _ = index.scores(qvec, steps, reads, periods)
                rows, leaves, one_to_one = scope.leaf_pairs("searched", ids)
                if one_to_one:
                    dense[leaves] = _normalized_dense(sims)[rows]
                else:  # several records per leaf: the best one counts (ufunc.at is exact but ~10x slower)
                    np.maximum.at(dense, leaves, _normalized_dense(sims)[rows])
            total += config.dense_weight * dense
        if config.leaf_dense_weight and set(scope.leaf_steps) != set(steps or []):
            own = np.zeros(n)
            short = index.approximate_scores(qvec, scope.leaf_steps, reads, None, DENSE_SHORTLIST)
            if short is not None:
                ids, sims = _with_candidates(index, qvec, short, [scope.leaf_ids[i] for i in np.flatnonzero(total)])
                normalized = _normalized_dense(sims, short[2])
                at = scope.index_of.rows(ids)
                found = at >= 0
                own[at[found]] = normalized[found]
            else:
                ids, sims, _ = index.scores(qvec, scope.leaf_steps, reads, None)
                rows, leaves, _ = scope.leaf_pairs("own", ids, own=True)
                own[leaves] = _normalized_dense(sims)[rows]
            total += config.leaf_dense_weight * own
    if config.neighbour_weight:
        padded = np.append(total, 0.0)  # index -1 reads the 0 appended at the end
        total = total + config.neighbour_weight * np.maximum(padded[scope.prev], padded[scope.next])
    return total


def leaf_sum_search(engine: SearchBackend, query: str, steps: list[str] | None, reads: BranchScope, k: int,
                    config: LeafSumOptions, periods: list[str] | None = None,
                    as_of: datetime | str | None = None) -> SearchResults:
    scored = leaf_scores(engine, query, steps, reads, config, periods, as_of)
    if scored is None:
        return SearchResults()
    scope, total = scored
    return ranked_leaves(engine, scope, total, query, reads, k, config)


def leaf_scores(engine: SearchBackend, query: str, steps: list[str] | None, reads: BranchScope,
                config: LeafSumOptions, periods: list[str] | None = None,
                as_of: datetime | str | None = None) -> tuple[Scope, np.ndarray] | None:
    """Every leaf's score (steps 1-6 but the final selection), with the scope it indexes; None when
    ``steps`` hold no leaves. The hierarchical strategy (search/drill_down.py) fuses it with altitude."""
    where = engine.where(steps, reads, periods)
    scope = scope_for(engine, where)
    n = len(scope.leaf_ids)
    if not n:
        return None
    text = without_names(query, scope.participants) if config.drop_participants else query
    total = _first_stage(engine, scope, text, steps, reads, periods, config)
    total = multihop.rescore(engine, scope, where, text, total, config,  # multi-hop strategies, off by default
                             lambda part: _first_stage(engine, scope, part, steps, reads, periods, config))
    window = time_window(query, as_of, config.relative_dates) if config.date_weight else None
    if window is not None and total.max() > 0:
        known = ~np.isnan(scope.times)
        years = []
        if known.any():
            first, last = (datetime.fromtimestamp(float(f(scope.times[known])), UTC).year for f in (np.min, np.max))
            years = list(range(first, last + 1))
        inside = np.zeros(n, dtype=bool)
        for start, end in window.intervals(years):
            inside |= (scope.times >= start.timestamp()) & (scope.times < end.timestamp())
        if inside.any() and not inside[known].all():  # a window that covers everything says nothing
            total = total + config.date_weight * total.max() * inside
    return scope, total


def ranked_leaves(engine: SearchBackend, scope: Scope, total: np.ndarray, query: str, reads: BranchScope, k: int,
                  config: LeafSumOptions) -> SearchResults:
    """The top ``k`` leaves by ``total`` (ties by time, then id), diversified and reranked as configured."""
    blank = dense_index(engine.store).without_text()
    silent = scope.index_of.rows(sorted(blank)) if blank else np.zeros(0, dtype=np.int64)
    silent = silent[silent >= 0]
    if len(silent):  # a turn with no text answers nothing, whatever its neighbours or context records score
        total[silent] = 0.0
    candidates = np.flatnonzero(total > 0)
    # An extended scope may still hold leaves deleted since its build (search/leaf_scope.py): a few more
    # candidates are taken, and the deleted ones are skipped when the hits are read back.
    want = k + 10 if scope.extended_from is not None else k
    if config.reranker is not None:  # the reranker sees its own pool (its top_n), then the top k is cut
        want = max(want, config.reranker.top_n)
    pool = want * config.diversify_pool if config.diversify else want
    if len(candidates) > pool:  # keep the top pool and everything tied with its last, then order exactly
        kth = np.partition(total[candidates], -pool)[-pool]
        candidates = candidates[total[candidates] >= kth]
    order = candidates[np.lexsort((scope.tiebreak[candidates], -total[candidates]))]
    order = multihop.diversify(engine, scope, total, order, want, config)  # the first ones unless diversifying
    rows = leaf_rows(engine, scope, [scope.leaf_ids[i] for i in order], reads)
    hits = [engine._hit(rows[scope.leaf_ids[i]], float(total[i]), {}) for i in order if scope.leaf_ids[i] in rows]
    hits = [h for h in hits if h.content.strip()]  # a leaf never embedded has no zero vector to tell
    hits, warnings = config.rerank(query, hits)
    return SearchResults(hits[:k], warnings)

