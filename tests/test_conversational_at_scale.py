"""Conversational (leaf-sum) search at scale without whole-scope work per query (issue 24, slice conv60).

At 1M leaves each leg used to be a 1M-entry array (zeros, max-lend, add), neighbour credit gathered two
1M arrays, the entity expansion looped in Python, and the hits' rows were read by a filtered scan. Now the
legs are added where they fall (a few thousand leaves), neighbour and entity credit touch only the leaves
next to / sharing terms with scored ones, and the hits' rows are taken by row address. Checked here:
the scores equal the whole-array algorithm's bit for bit (kept below as the reference), and the counts:
one lexical query, one IVF query per dense leg, one take and no filtered read for the hits.

Real LanceDB store in a tmp dir, real faiss; the test's own bag-of-words embedder (hashed word vectors)
instead of the MiniLM model, so the module needs no model load; the ANN threshold is lowered
(``DenseIndex(store, ann_from=...)``) so the IVF path runs on 1,200 records.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.record_store import LIGHT_COLUMNS, RecordStore
from synthex_resources.search.engine import SearchEngine
from synthex_resources.search.indexes import ann, leaf_scope, lexicon
from synthex_resources.search.indexes.dense_index import dense_index
from synthex_resources.search.state import SearchSettings
from synthex_resources.search.strategies import conversational_fusion, conversational_multihop
from synthex_resources.search.strategies.builtin import CONVERSATIONAL

MAIN = BranchScope.own()
STEPS = ["ctx"]
WORDS = ("bicycle chain garden tomato finch song museum egypt snow yard chess coach storm train pie recipe "
         "camping mountain phone stairs quiz pub ocean kitchen paint yellow volunteer bank office weekend").split()
QUERIES = ["What happened to the bicycle chain?", "Which song did the finch learn?", "pie recipe from grandmother",
           "camping in the mountains", "storm train delayed", "yellow kitchen paint"]
CONVERSATIONS, SESSIONS, TURNS = 4, 10, 15  # 600 turns, 600 context records


class BagEmbedder:
    """Each word a fixed random vector (seeded by its hash), a text the normalized sum of its words': texts
    sharing words are near, so dense rankings mean something."""

    name, dim = "bag-test", 32

    def embed(self, texts: list[str]) -> np.ndarray:
        return bag_vectors(texts, self.dim)


def bag_vectors(texts: list[str], dim: int) -> np.ndarray:
    """Each word a fixed random vector seeded by its hash; a text the normalized sum of its words'."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in text.lower().replace("?", " ").replace(":", " ").split():
            seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "little")
            out[i] += np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


def _corpus() -> tuple[list[Record], list[Record]]:
    rng = np.random.default_rng(7)
    turns, contexts = [], []
    for c in range(CONVERSATIONS):
        for s in range(SESSIONS):
            previous = ""
            for t in range(TURNS):
                rid = f"turn-{c}-{s}-{t:02d}"
                speaker = "Ann" if t % 2 == 0 else "Bob"
                text = f"{speaker}: " + " ".join(rng.choice(WORDS, size=4).tolist())
                meta = {"time": {"created_at": f"2023-{s + 1:02d}-{c + 1:02d}T10:{t:02d}:00+00:00"},
                        "chat": {"conversation_id": f"conv-{c}", "session_id": f"conv-{c}-s{s}", "author": speaker}}
                turns.append(Record(id=rid, content=text, step="turns", metadata=meta, period=f"2023-{s + 1:02d}",
                                    created_at=meta["time"]["created_at"], materialization_key=rid))
                contexts.append(Record(id=f"ctx-{rid}", content=f"{previous}\n{text}".strip(), step="ctx",
                                       source_ids=[rid], metadata=meta, period=f"2023-{s + 1:02d}",
                                       created_at=meta["time"]["created_at"], materialization_key=f"ctx-{rid}"))
                previous = text
    return turns, contexts


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("conversation-store") / "store"
    store = RecordStore(str(path), embedder=BagEmbedder())
    turns, contexts = _corpus()
    store.records.upsert(turns)
    store.records.upsert(contexts)
    SearchEngine(store).ensure_index()
    store.close()
    return path


@pytest.fixture(scope="module")
def ann_store(root: Path) -> RecordStore:
    """The store with the IVF path engaged (the dense legs take a shortlist, as at 1M), index ready."""
    store = RecordStore(str(root), embedder=BagEmbedder(), search=SearchSettings(dense_ann_from=100))
    index = dense_index(store)
    SearchEngine(store).search(QUERIES[0], STEPS, MAIN, 10, strategy=CONVERSATIONAL)
    assert index.wait_for_ann(60)
    yield store
    store.close()


# -- the whole-array algorithm these replace (conversational_fusion._first_stage, conversational_multihop.rescore before) ---------
def _reference_scores(engine: SearchEngine, query: str, config=CONVERSATIONAL) -> np.ndarray:
    where = engine.where(STEPS, MAIN, None)
    scope = leaf_scope.scope_for(engine, where)
    text = conversational_fusion.without_names(query, scope.participants)
    n = len(scope.leaf_ids)
    total = np.zeros(n)

    def lend(leaf_scores, record_ids, scores):
        which, positions = scope.leaves_of.pairs(record_ids)
        if len(positions):
            values = np.asarray(scores, dtype=leaf_scores.dtype)[which]
            np.maximum.at(leaf_scores, positions, np.where(np.isnan(values), -np.inf, values))

    pairs = engine.lexical(text, where, config.lexical_pool)
    ids_lex = [p[0] for p in pairs]
    if pairs and pairs[0][1] > 0:
        lexical = np.zeros(n)
        lend(lexical, ids_lex, np.array([p[1] for p in pairs]) / pairs[0][1])
        total += config.lexical_weight * lexical
    qvec = engine.store.embedder.embed([text])[0]
    index = dense_index(engine.store)

    def with_candidates(short, candidates):
        ids, sims, _ = short
        have = set(ids.tolist())
        vectors = index.vectors_of([c for c in dict.fromkeys(candidates) if c not in have])
        if not vectors:
            return ids.tolist(), sims
        extra = np.stack(list(vectors.values())) @ np.asarray(qvec, dtype=np.float32)
        return ids.tolist() + list(vectors), np.concatenate([sims, extra])

    dense = np.zeros(n)
    short = index.approximate_scores(qvec, STEPS, MAIN, None, conversational_fusion.DENSE_SHORTLIST)
    assert short is not None  # the IVF path: what this module is about
    ids, sims = with_candidates(short, ids_lex)
    lend(dense, ids, conversational_fusion._normalized_dense(sims, short[2]))
    total += config.dense_weight * dense
    own = np.zeros(n)
    short = index.approximate_scores(qvec, scope.leaf_steps, MAIN, None, conversational_fusion.DENSE_SHORTLIST)
    ids, sims = with_candidates(short, [scope.leaf_ids[i] for i in np.flatnonzero(total)])
    normalized = conversational_fusion._normalized_dense(sims, short[2])
    at = scope.index_of.rows(ids)
    found = at >= 0
    own[at[found]] = normalized[found]
    total += config.leaf_dense_weight * own
    padded = np.append(total, 0.0)
    total = total + config.neighbour_weight * np.maximum(padded[scope.prev], padded[scope.next])
    # the entity expansion (conversational_multihop.entity_credit as a Python loop, before it was vectorised)
    lex = lexicon.lexicon(engine, where, scope, config.rare_df)
    first = total
    credit = np.zeros(n)
    top = conversational_multihop._seeds(first, config.expand_seeds)
    for seed in top:
        row = lex.terms[int(seed)]
        overlap: dict[int, float] = {}
        for term, idf in zip(row.indices, row.data, strict=True):
            for leaf in lex.postings.indices[lex.postings.indptr[term]:lex.postings.indptr[term + 1]]:
                overlap[int(leaf)] = overlap.get(int(leaf), 0.0) + float(idf)
        overlap.pop(int(seed), None)
        if overlap:
            values = np.fromiter(overlap.values(), dtype=np.float64) / (float(lex.seed_norm[seed]) or 1.0) \
                * (first[seed] / float(first[top[0]]))
            np.maximum.at(credit, np.fromiter(overlap, dtype=np.int64), values)
    return total + config.entity_weight * first.max() * credit


def test_leaf_scores_equal_the_whole_array_algorithm_bit_for_bit(ann_store):
    engine = SearchEngine(ann_store)
    checked = 0
    for query in QUERIES:
        with ann_store.pinned_version():
            scope, total, support = conversational_fusion._scored(engine, query, STEPS, MAIN, CONVERSATIONAL)
            want = _reference_scores(engine, query)
        assert support is not None  # the legs' positions were kept: nothing was scanned whole
        assert np.array_equal(total, want)  # every leaf, not only the top 10
        outside = np.ones(len(total), dtype=bool)
        outside[support] = False
        assert not total[outside].any()
        checked += int((want > 0).sum() > 10)
    assert checked == len(QUERIES)  # each query scored more leaves than it returns


def test_rankings_equal_the_exact_path(root, ann_store):
    """The IVF store (sparse path) against a store object on the same folder scanning exactly (whole arrays)."""
    exact = RecordStore(str(root), embedder=BagEmbedder())
    try:
        for query in QUERIES:
            want = SearchEngine(exact).search(query, STEPS, MAIN, 10, strategy=CONVERSATIONAL)
            got = SearchEngine(ann_store).search(query, STEPS, MAIN, 10, strategy=CONVERSATIONAL)
            assert len(want) == 10
            assert [h.id for h in got] == [h.id for h in want]
            assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-6)
        assert dense_index(exact)._ann is None  # it really took the exact path
    finally:
        exact.close()


def test_one_query_per_leg_and_the_hits_taken_by_address(ann_store, monkeypatch):
    """Counts per conversational query on a scope past ``ROWS_KEPT_LEAVES`` (as at 1M): one lexical query,
    one IVF query per dense leg, the hits' rows in one take by address and no filtered read."""
    monkeypatch.setattr(leaf_scope, "ROWS_KEPT_LEAVES", 100)  # 600 leaves: read per search, as at 1M
    engine = SearchEngine(ann_store)
    calls = {"lexical": 0, "ivf": 0, "rows_by_id": 0, "take": 0}

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(engine, "lexical", counted("lexical", engine.lexical))
    monkeypatch.setattr(ann.IvfIndex, "search", counted("ivf", ann.IvfIndex.search))
    monkeypatch.setattr(ann_store.records, "rows_by_id", counted("rows_by_id", ann_store.records.rows_by_id))
    ds_class = type(ann_store.dataset("records"))
    monkeypatch.setattr(ds_class, "_take_rows", counted("take", ds_class._take_rows))
    hits = engine.search(QUERIES[1], STEPS, MAIN, 10, strategy=CONVERSATIONAL)
    assert len(hits) == 10 and all(h.step == "turns" for h in hits)
    assert calls == {"lexical": 1, "ivf": 2, "rows_by_id": 0, "take": 1}
    monkeypatch.undo()
    read = ann_store.records.rows_by_id([h.id for h in hits], LIGHT_COLUMNS, scope=MAIN)
    # the same records, every field (``via`` is the search's annotation, added after the rows are read)
    assert [engine.hit(read[h.id], h.score, {}) for h in hits] == [replace(h, via=[]) for h in hits]


def test_rows_by_address_vouch_only_for_an_ids_one_row_in_scope(tmp_path):
    store = RecordStore(str(tmp_path / "s"), embedder=BagEmbedder())
    store.records.upsert([Record(id=f"r{i}", content=f"garden tomato {i}", step="turns", materialization_key=f"r{i}")
                          for i in range(5)])
    store.records.upsert([Record(id="r0", content="garden tomato 0", step="turns", branch="b", materialization_key="r0"),
                          Record(id="x9", content="only on b", step="turns", branch="b", materialization_key="x9")])
    engine = SearchEngine(store)
    ids = ["r0", "r1", "r3", "x9", "missing"]
    with store.pinned_version():
        version, addresses = dense_index(store).row_addresses(ids, MAIN)
        assert sorted(addresses) == ["r1", "r3"] and version == store.records_read_version()  # r0: two rows (main, b); x9: a row main does not read
        got = leaf_scope._rows_by_address(engine, ids, MAIN)
    assert got == store.records.rows_by_id(ids, LIGHT_COLUMNS, scope=MAIN)
    assert sorted(got) == ["r0", "r1", "r3"]
    with store.pinned_version():
        assert list(dense_index(store).row_addresses(ids, BranchScope.own("b"))[1]) == ["x9"]
    store.close()


def test_neighbour_credit_on_the_scored_leaves_equals_the_whole_array_form():
    rng = np.random.default_rng(3)
    n = 400
    nxt = np.full(n, -1)
    prev = np.full(n, -1)
    for i in range(n - 1):  # sessions of random length: links both ways
        if rng.random() < 0.8:
            nxt[i], prev[i + 1] = i + 1, i
    total = np.zeros(n)
    scored = rng.choice(n, 40, replace=False)
    total[scored] = rng.random(40)
    support = np.sort(np.concatenate([scored, rng.choice(n, 5)]))  # a superset: zeros among it are fine
    scope = leaf_scope.Scope(leaf_ids=[str(i) for i in range(n)], index_of=None, leaves_of=None, leaf_steps=[],
                             prev=prev, next=nxt, times=np.zeros(n), participants=set(), tiebreak=np.arange(n), pairs={})
    padded = np.append(total, 0.0)
    want = total + 0.4 * np.maximum(padded[prev], padded[nxt])
    got, new_support = conversational_fusion._neighbour_credit(scope, total.copy(), np.unique(support), 0.4)
    assert np.array_equal(got, want)
    assert set(np.flatnonzero(want)) <= set(new_support.tolist())
    one_way = leaf_scope.Scope(leaf_ids=scope.leaf_ids, index_of=None, leaves_of=None, leaf_steps=[], prev=np.full(n, -1),
                               next=nxt, times=np.zeros(n), participants=set(), tiebreak=np.arange(n), pairs={})
    assert not one_way.links_symmetric()  # then the whole-array form runs, and says so (no support)
    got, new_support = conversational_fusion._neighbour_credit(one_way, total.copy(), np.unique(support), 0.4)
    assert new_support is None and np.array_equal(got, total + 0.4 * np.maximum(padded[np.full(n, -1)], padded[nxt]))
