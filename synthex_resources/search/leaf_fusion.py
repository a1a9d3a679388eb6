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
per table version, so it is built once per write, not per query.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from synthex.periods import parse_timestamp
from synthex_resources.record_store import LIGHT_COLUMNS
from synthex_resources.search import multihop
from synthex_resources.search.dense_index import dense_index
from synthex_resources.search.recipes import SearchConfig
from synthex_resources.search.temporal import time_window
from synthex_resources.search.tokenize import tokenize

if TYPE_CHECKING:
    from synthex_resources.search.engine import SearchEngine, SearchHit



@dataclass
class _Scope:
    leaf_ids: list[str]
    index_of: dict[str, int]  # leaf id -> position
    leaves_of: dict[str, list[int]]  # searched record id -> positions of its leaves
    leaf_steps: list[str]
    prev: np.ndarray  # position of the previous turn in the same session, -1 if none
    next: np.ndarray
    times: np.ndarray  # epoch seconds of time.created_at (NaN when unknown)
    participants: set[str]  # lower-cased name tokens of the speakers
    tiebreak: np.ndarray  # rank of each leaf by (time, id): equal scores order the same whatever the ingest
    pairs: dict[str, tuple[np.ndarray, np.ndarray, bool]]  # dense scope -> (rows, leaf positions, 1:1?)

    def leaf_pairs(self, key: str, ids: np.ndarray, own: bool = False) -> tuple[np.ndarray, np.ndarray, bool]:
        """For a dense scope's ids (the same order every query at one table version): the leaf each row
        lends to, and whether every leaf gets at most one row (then plain assignment is exact)."""
        if key not in self.pairs:
            if own:
                found = [(i, self.index_of[rid]) for i, rid in enumerate(ids) if rid in self.index_of]
            else:
                found = [(i, pos) for i, rid in enumerate(ids) for pos in self.leaves_of.get(rid, ())]
            rows, leaves = zip(*found, strict=True) if found else ((), ())
            positions = np.asarray(leaves, dtype=np.int64)
            self.pairs[key] = (np.asarray(rows, dtype=np.int64), positions,
                               len(np.unique(positions)) == len(positions))
        return self.pairs[key]


class _ScopeCache:
    """Leaf-sum bookkeeping per (table version, scope); owned by a store, so it dies with it."""

    def __init__(self) -> None:
        self.scopes: dict[tuple[int, str], _Scope] = {}
        self.lock = threading.Lock()


def _natural(text: str) -> tuple:
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text) if part)


def _build_scope(engine: SearchEngine, where: str) -> _Scope:
    columns = ["id", "sources", "step", "metadata", "created_at"]
    rows = {r["id"]: r for r in engine.store._rows(where, columns)}
    searched = list(rows)
    # Walk down the sources until records without sources: those are the leaves.
    frontier = {s for r in rows.values() for s in r.get("sources") or [] if s not in rows}
    while frontier:
        fetched = engine.store.rows_by_id(sorted(frontier), columns)  # any row of an id: same content
        rows |= fetched
        frontier = {s for r in fetched.values() for s in r.get("sources") or [] if s not in rows}

    def leaves(rid: str, seen: set[str]) -> list[str]:
        srcs = [s for s in rows[rid].get("sources") or [] if s in rows and s not in seen]
        if not srcs:
            return [rid]
        seen.add(rid)
        return [leaf for s in srcs for leaf in leaves(s, seen)]

    leaf_sets = {rid: list(dict.fromkeys(leaves(rid, set()))) for rid in searched}
    leaf_rows = [rows[x] for x in sorted({x for v in leaf_sets.values() for x in v})]
    info = []
    for row in leaf_rows:
        meta = json.loads(row.get("metadata") or "{}")
        chat = meta.get("chat") or {}
        when = parse_timestamp((meta.get("time") or {}).get("created_at") or row.get("created_at"))
        info.append((row["id"], row["step"], chat, when))
    # Turn order: by conversation and session, then time, then id with its numbers compared as numbers
    # (turns of one session often share a timestamp: "s_2" before "s_10"). Independent of ingest order.
    info.sort(key=lambda x: (str(x[2].get("conversation_id", "")), str(x[2].get("session_id", "")),
                             x[3].timestamp() if x[3] else 0.0, _natural(x[0])))
    n = len(info)
    prev, nxt = np.full(n, -1), np.full(n, -1)
    for i in range(1, n):
        a, b = info[i - 1][2], info[i][2]
        if a.get("conversation_id") and a.get("conversation_id") == b.get("conversation_id") \
                and a.get("session_id") == b.get("session_id"):
            prev[i], nxt[i - 1] = i - 1, i
    index_of = {x[0]: i for i, x in enumerate(info)}
    participants = {t for x in info for t in tokenize(str(x[2].get("author", "")))}
    by_time = sorted(range(n), key=lambda i: (info[i][3].timestamp() if info[i][3] else 0.0, _natural(info[i][0])))
    tiebreak = np.empty(n, dtype=np.int64)
    tiebreak[by_time] = np.arange(n)
    return _Scope(
        leaf_ids=[x[0] for x in info], index_of=index_of,
        leaves_of={rid: [index_of[x] for x in ls if x in index_of] for rid, ls in leaf_sets.items()},
        leaf_steps=sorted({x[1] for x in info}), prev=prev, next=nxt,
        times=np.array([x[3].timestamp() if x[3] else np.nan for x in info], dtype=np.float64),
        participants=participants, tiebreak=tiebreak, pairs={})


def _scope(engine: SearchEngine, where: str) -> _Scope:
    tbl = engine.store.records_table()
    key = (tbl.version if tbl is not None else -1, where)
    cache: _ScopeCache = engine.store.derived("leaf_sum_scopes", _ScopeCache)
    with cache.lock:
        if key not in cache.scopes:
            for old in [k for k in cache.scopes if k[1] == where]:
                del cache.scopes[old]  # an older table version of the same scope
            cache.scopes[key] = _build_scope(engine, where)
        return cache.scopes[key]


def without_names(query: str, names: set[str]) -> str:
    """The query with the given name tokens (and their possessive 's) removed; unchanged if that empties it."""
    if not names:
        return query
    pattern = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")(?:'s)?\b",
                         re.IGNORECASE)
    stripped = " ".join(pattern.sub(" ", query).split())
    return stripped if tokenize(stripped) else query


def _normalized_dense(sims: np.ndarray) -> np.ndarray:
    if not len(sims):
        return sims
    median, top = float(np.median(sims)), float(sims.max())
    return np.clip((sims - median) / (top - median + 1e-9), 0.0, None)


def _first_stage(engine: SearchEngine, scope: _Scope, text: str, steps: list[str] | None, branch: str,
                 periods: list[str] | None, config: SearchConfig) -> np.ndarray:
    """Steps 1-3: the legs' scores per leaf, summed, with neighbour credit."""
    where = engine.where(steps, branch, periods)
    n = len(scope.leaf_ids)
    total = np.zeros(n)

    def lend(leaf_scores: np.ndarray, record_ids: Any, scores: np.ndarray) -> None:
        # A leaf keeps the best score among the records that stand for it.
        for rid, value in zip(record_ids, scores, strict=True):
            for pos in scope.leaves_of.get(rid, ()):
                if value > leaf_scores[pos]:
                    leaf_scores[pos] = value

    # The index query waits on I/O, the embedder on compute: overlap them.
    lexical_future = engine.pool().submit(engine.lexical, text, where, config.lexical_pool) if config.lexical else None
    qvec = engine.store.embedder.embed([text])[0] if config.dense or config.leaf_dense_weight else None
    if lexical_future is not None:
        pairs = lexical_future.result()
        if pairs and pairs[0][1] > 0:
            lexical = np.zeros(n)
            lend(lexical, [p[0] for p in pairs], np.array([p[1] for p in pairs]) / pairs[0][1])
            total += config.lexical_weight * lexical
    if qvec is not None:
        index = dense_index(engine.store)
        if config.dense:
            ids, sims, _ = index.scores(qvec, steps, branch, periods)
            rows, leaves, one_to_one = scope.leaf_pairs("searched", ids)
            dense = np.zeros(n)
            if one_to_one:
                dense[leaves] = _normalized_dense(sims)[rows]
            else:  # several records per leaf: the best one counts (ufunc.at is exact but ~10x slower)
                np.maximum.at(dense, leaves, _normalized_dense(sims)[rows])
            total += config.dense_weight * dense
        if config.leaf_dense_weight and set(scope.leaf_steps) != set(steps or []):
            ids, sims, _ = index.scores(qvec, scope.leaf_steps, branch, None)
            rows, leaves, _ = scope.leaf_pairs("own", ids, own=True)
            own = np.zeros(n)
            own[leaves] = _normalized_dense(sims)[rows]
            total += config.leaf_dense_weight * own
    if config.neighbour_weight:
        padded = np.append(total, 0.0)  # index -1 reads the 0 appended at the end
        total = total + config.neighbour_weight * np.maximum(padded[scope.prev], padded[scope.next])
    return total


def leaf_sum_search(engine: SearchEngine, query: str, steps: list[str] | None, branch: str, k: int,
                    config: SearchConfig, periods: list[str] | None = None,
                    as_of: datetime | str | None = None) -> list[SearchHit]:
    where = engine.where(steps, branch, periods)
    scope = _scope(engine, where)
    n = len(scope.leaf_ids)
    if not n:
        return []
    text = without_names(query, scope.participants) if config.drop_participants else query
    total = _first_stage(engine, scope, text, steps, branch, periods, config)
    total = multihop.rescore(engine, scope, where, text, total, config,  # multi-hop strategies, off by default
                             lambda part: _first_stage(engine, scope, part, steps, branch, periods, config))
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
    candidates = np.flatnonzero(total > 0)
    pool = k * config.diversify_pool if config.diversify else k
    if len(candidates) > pool:  # keep the top pool and everything tied with its last, then order exactly
        kth = np.partition(total[candidates], -pool)[-pool]
        candidates = candidates[total[candidates] >= kth]
    order = candidates[np.lexsort((scope.tiebreak[candidates], -total[candidates]))]
    order = multihop.diversify(engine, scope, total, order, k, config)  # the first k unless diversifying
    rows = engine.store.rows_by_id([scope.leaf_ids[i] for i in order], LIGHT_COLUMNS, branch=branch)
    return [engine._hit(rows[scope.leaf_ids[i]], float(total[i]), {}) for i in order if scope.leaf_ids[i] in rows]
