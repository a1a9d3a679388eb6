"""Multi-hop strategies for leaf-sum search: questions whose evidence is spread over several turns.

A question like "What activities does Melanie partake in?" is answered by several turns, often in
different sessions, and the first stage (search/leaf_fusion.py) tends to fill the top k with the one
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

The per-scope lexicon (rare terms per turn, sessions) is cached per (table version, scope) on the
store, separately from leaf_fusion's bookkeeping; it reads only the leaves' ids, order and adjacency.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import sparse

from synthex.core.enrich.words import STOPWORDS
from synthex_resources.encryption import StoreCipher
from synthex_resources.record_store import RecordStore
from synthex_resources.search.indexes.dense_index import dense_index
from synthex_resources.search.indexes.sidecar import Entry, Sidecar
from synthex_resources.search.indexes.versioned import EXTEND, LOAD, VersionedStructure
from synthex_resources.search.tokenize import tokenize
from synthex_resources.search.types import Decompose, Diversify, SearchBackend
from synthex_resources.store import filters
from synthex_resources.store.filters import RecordFilter
from synthex_resources.store.pinned import PinnedDataset

Scorer = Callable[[str], np.ndarray]  # sub-query text -> first-stage score per leaf


class MultiHopOptions(Protocol):
    """The leaf-sum strategy's parameters this module reads (``leaf_fusion.LeafSum``)."""

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


IDS_READ_BY_ID = 1_000  # leaf_texts filters by id up to this many ids (a scan of the steps above)
_CAPITALIZED = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-zA-Z]+)")
_NAMED = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*)")  # "Grand Canyon": one entity
_SPLIT = re.compile(r"\s*(?:,|;|\band\b|\bor\b|\bas well as\b|\bboth\b)\s*", re.IGNORECASE)


@dataclass
class Lexicon:
    terms: sparse.csr_matrix  # leaves x rare terms, idf weights
    postings: sparse.csc_matrix  # the same, by term (column): which leaves have each rare term
    seed_norm: np.ndarray  # per leaf: sum of the idf of its rare terms
    vocab: dict[str, int]
    session: np.ndarray  # per leaf: session number (runs of adjacent turns)
    adjacency: sparse.csr_matrix  # leaves x leaves: previous/next turn
    leaf_ids: list[str] | None = None  # the scope's leaf list it was made for (an extension checks it)


def _adjacency(nxt: np.ndarray) -> sparse.csr_matrix:
    n = len(nxt)
    a = np.flatnonzero(nxt >= 0)
    b = nxt[a]
    return sparse.csr_matrix((np.ones(2 * len(a)), (np.concatenate([a, b]), np.concatenate([b, a]))), shape=(n, n))


def _padded(old: Lexicon, leaf_ids: list[str], prev: np.ndarray, nxt: np.ndarray) -> Lexicon:
    """``old`` for a scope that appended leaves to its own (search/indexes/leaf_scope.py): the new leaves have no
    rare terms until the next full build (they neither give nor get expansion credit), and the turn
    adjacency and sessions are recomputed from the extended scope. Linear in leaves, no text read."""
    n, t = len(leaf_ids), old.terms.shape[1]
    added = n - old.terms.shape[0]
    indptr = np.concatenate([old.terms.indptr, np.full(added, old.terms.indptr[-1])])
    terms = sparse.csr_matrix((old.terms.data, old.terms.indices, indptr), shape=(n, t))
    postings = sparse.csc_matrix((old.postings.data, old.postings.indices, old.postings.indptr), shape=(n, t))
    return Lexicon(terms=terms, postings=postings, seed_norm=np.concatenate([old.seed_norm, np.zeros(added)]),
                   vocab=old.vocab, session=_sessions(prev), adjacency=_adjacency(nxt), leaf_ids=leaf_ids)


def _sessions(prev: np.ndarray) -> np.ndarray:
    return np.cumsum(prev < 0) - 1


def leaf_texts(cipher: StoreCipher | None, read: PinnedDataset | None, leaf_ids: list[str],
               leaf_steps: list[str]) -> list[tuple[str, str]]:
    """(content, metadata JSON) of each leaf at ``read``'s version, in ``leaf_ids`` order ("" for a leaf not
    found; an encrypted store's content decrypted, so neither the lexicon nor the word index is made of
    ciphertext): one scan of the leaf steps' rows, matched to the leaves by id in Arrow (any row of an id:
    the same content). The ids looked up in chunks took most of a 1M-leaf build (a filtered query per
    1,000 ids)."""
    if read is None or not leaf_ids:
        return [("", "")] * len(leaf_ids)
    ds = read.dataset
    # A few leaves (an extension's appended ones) are read by id; many, by one scan of their steps.
    by_id = leaf_ids if len(leaf_ids) <= IDS_READ_BY_ID else None
    table = ds.to_table(columns=["id", "content", "metadata"],
                        filter=filters.where(RecordFilter.of(steps=leaf_steps or None, ids=by_id))
                        if leaf_steps or by_id else None)
    at = pc.index_in(pa.array(leaf_ids, type=pa.string()), value_set=table.column("id").combine_chunks())
    picked = table.take(pc.fill_null(at, 0)) if len(table) else None
    found = at.is_valid().to_pylist()
    contents = picked.column("content").to_pylist() if picked is not None else []
    if cipher is not None:  # an encrypted store's text is read in plaintext (in memory only)
        contents = [cipher.decrypt(c) if c else c for c in contents]
    metas = picked.column("metadata").to_pylist() if picked is not None else []
    return [(c or "", m or "") if ok else ("", "") for ok, c, m in zip(found, contents or [None] * len(found),
                                                                   metas or [None] * len(found), strict=True)]


def _build(cipher: StoreCipher | None, read: PinnedDataset | None, leaf_ids: list[str], prev: np.ndarray,
           nxt: np.ndarray, participants: set[str], rare_df: int, leaf_steps: list[str] | None = None) -> Lexicon:
    n = len(leaf_ids)
    per_leaf: list[set[str]] = []
    entities: list[set[str]] = []
    for content, metadata in leaf_texts(cipher, read, leaf_ids, list(leaf_steps or [])):
        text = str(content)
        meta = json.loads(metadata or "{}")
        for name in tokenize(str((meta.get("chat") or {}).get("author", ""))):
            participants.add(name)
        per_leaf.append({t for t in tokenize(text) if len(t) > 2 and not t.isdigit() and t not in STOPWORDS})
        entities.append({m.lower() for m in _CAPITALIZED.findall(text)} - STOPWORDS)
    df: dict[str, int] = {}
    for terms in per_leaf:
        for t in terms:
            df[t] = df.get(t, 0) + 1
    # Rare: a word few turns use (but more than one: a term only one turn has links nothing), or a
    # capitalized entity (a name, a place, a title) that is not among the most common words.
    def key(t: str, ents: set[str]) -> bool:
        if t in participants or df[t] < 2:
            return False
        return df[t] <= rare_df or (t in ents and df[t] <= 4 * rare_df)

    vocab: dict[str, int] = {}
    r_idx, c_idx, vals = [], [], []
    for i, (terms, ents) in enumerate(zip(per_leaf, entities, strict=True)):
        for t in terms:
            if key(t, ents):
                j = vocab.setdefault(t, len(vocab))
                r_idx.append(i)
                c_idx.append(j)
                vals.append(float(np.log(n / df[t])))
    terms = sparse.csr_matrix((vals, (r_idx, c_idx)), shape=(n, max(len(vocab), 1)))
    return Lexicon(terms=terms, postings=terms.tocsc(), seed_norm=np.asarray(terms.sum(axis=1)).ravel(), vocab=vocab,
                   session=_sessions(prev), adjacency=_adjacency(nxt), leaf_ids=leaf_ids)


def _to_entry(lex: Lexicon, scope_token: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    vocab = sorted(lex.vocab, key=lex.vocab.__getitem__)
    return ({"scope_token": scope_token, "shape": list(lex.terms.shape)},
            {"data": lex.terms.data, "indices": lex.terms.indices, "indptr": lex.terms.indptr,
             "vocab": np.asarray(vocab, dtype=str)})


def _from_entry(entry: Entry, leaf_ids: list[str], prev: np.ndarray, nxt: np.ndarray) -> Lexicon:
    a = entry.arrays
    terms = sparse.csr_matrix((a["data"], a["indices"], a["indptr"]), shape=tuple(entry.meta["shape"]))
    vocab = {t: i for i, t in enumerate(a["vocab"].tolist())}
    return Lexicon(terms=terms, postings=terms.tocsc(), seed_norm=np.asarray(terms.sum(axis=1)).ravel(), vocab=vocab,
                   session=_sessions(prev), adjacency=_adjacency(nxt), leaf_ids=leaf_ids)


class Lexicons(VersionedStructure[str, Lexicon]):
    """The multi-hop lexicon per (table version of the scope, scope filter and ``rare_df``); the store's
    ``search_state.lexicons``. The context of each ask is (the scope's bookkeeping, ``rare_df``)."""

    kind = "lexicon"

    def __init__(self, sidecar: Callable[[], Sidecar] | None, store: RecordStore) -> None:
        super().__init__(sidecar)
        self.store = store

    def build(self, read: PinnedDataset | None, key: str, context: Any) -> Lexicon:
        scope, rare_df = context
        return _build(self.store.cipher, read, scope.leaf_ids, scope.prev, scope.next, set(scope.participants),
                      rare_df, scope.leaf_steps)

    def extend(self, read: PinnedDataset | None, key: str, previous: Lexicon, context: Any) -> tuple[Lexicon, str] | None:
        """Padded when the scope only appended leaves to the one ``previous`` was made for."""
        scope, _ = context
        if scope.extended_from is not None and previous.leaf_ids is scope.extended_from:
            return _padded(previous, scope.leaf_ids, scope.prev, scope.next), EXTEND
        return None

    def from_entry(self, read: PinnedDataset, key: str, entry: Entry, context: Any) -> tuple[Lexicon, str] | None:
        """Saved for this very scope: as it is; for the scope this one extends: padded."""
        scope, _ = context
        owner = entry.meta.get("scope_token")
        if owner == scope.token and entry.meta["shape"][0] == len(scope.leaf_ids):
            return _from_entry(entry, scope.leaf_ids, scope.prev, scope.next), LOAD
        if owner is not None and owner == scope.base_token and entry.meta["shape"][0] <= len(scope.leaf_ids):
            base_n = entry.meta["shape"][0]
            # the base's own turns only: a link from its last turn of a session to an appended
            # turn points past it (an adjacency of base_n rows cannot hold it)
            base_next = np.where(scope.next[:base_n] < base_n, scope.next[:base_n], -1)
            return _padded(_from_entry(entry, scope.leaf_ids[:base_n], scope.prev[:base_n], base_next),
                           scope.leaf_ids, scope.prev, scope.next), EXTEND
        return None

    def to_entry(self, value: Lexicon, context: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        return _to_entry(value, context[0].token)


def lexicon(engine: SearchBackend, where: str, scope: Any, rare_df: int) -> Lexicon:
    """The scope's lexicon at the table version the scope was made of (``scope.read``: keyed by it, its
    leaves' text read from it, saved with its state): cached, padded when the scope only appended leaves
    to the one it was made for, else loaded from beside the table when an earlier process made it for this
    scope (or padded when for the scope this one extends: search/indexes/sidecar.py), else built from the leaves'
    text."""
    return engine.store.search_state.lexicons.get(scope.read, f"{where}|{rare_df}", (scope, rare_df))


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
    session = _sessions(scope.prev)[pool]
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
