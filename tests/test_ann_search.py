"""Approximate dense search (search/indexes/ann.py, the IVF path of DenseIndex's ``auto`` mode) and what came with it:
leaf-sum search over the IVF shortlist, the Bitmap scope indexes, the pinned table version, and the faster
multi-hop ``_seeds`` / ``entity_credit`` (checked against their old implementations).

Real LanceDB stores in tmp dirs, real faiss; the ANN threshold is lowered (``DenseIndex(store, ann_from=...)``)
so that the IVF path engages on a few thousand records with clustered vectors.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.encryption import generate_key
from synthex_resources.record_store import RecordStore
from synthex_resources.search.engine import SearchEngine, top_with_ties
from synthex_resources.search.indexes import ann, lexicon
from synthex_resources.search.indexes.dense_index import ANN_FROM as DEFAULT_ANN_FROM
from synthex_resources.search.indexes.dense_index import DenseIndex, dense_index
from synthex_resources.search.state import SearchSettings
from synthex_resources.search.strategies import conversational_fusion, conversational_multihop
from synthex_resources.search.strategies.builtin import BM25, CONVERSATIONAL, DENSE

MAIN_SCOPE = BranchScope.own()

DIM = 384  # the offline embedder's: the records table is created with it
N_ALPHA, N_BETA = 3000, 1000
ANN_FROM = 500
CENTERS = 40


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _clustered(rng: np.random.Generator, n: int, centers: np.ndarray, spread: float = 0.05) -> np.ndarray:
    """Noisy copies of random ``centers`` (cosine ~0.7 to their center, ~0.5 within a cluster, ~0 across)."""
    which = rng.integers(0, len(centers), size=n)
    return _unit(centers[which] + spread * rng.standard_normal((n, centers.shape[1])))


def _records(vectors: np.ndarray, prefix: str, step: str, offset: int = 0) -> list[Record]:
    return [Record(id=f"{prefix}{offset + i:05d}", content=f"record {prefix} {offset + i}", step=step, branch="main",
                   period=f"2024-{(i % 3) + 1:02d}", materialization_key=f"{prefix}{offset + i:05d}",
                   embedding=v.tolist()) for i, v in enumerate(vectors)]


class Corpus:
    """A store of ``N_ALPHA`` records of step alpha and ``N_BETA`` of step beta around shared centers."""

    def __init__(self, root: Path) -> None:
        rng = np.random.default_rng(11)
        self.centers = _unit(rng.standard_normal((CENTERS, DIM)))
        self.alpha = _clustered(rng, N_ALPHA, self.centers)
        self.beta = _clustered(rng, N_BETA, self.centers)
        self.root = root
        store = RecordStore(str(root))
        store.records.upsert(_records(self.alpha, "a", "alpha"))
        store.records.upsert(_records(self.beta, "b", "beta"))
        store.close()

    def vector(self, rid: str) -> np.ndarray:
        return (self.alpha if rid[0] == "a" else self.beta)[int(rid[1:])]

    def queries(self, seed: int, n: int = 30, source: str = "alpha") -> np.ndarray:
        """Noisy copies of stored vectors (cosine ~0.9 to their source)."""
        rng = np.random.default_rng(seed)
        base = self.alpha if source == "alpha" else self.beta
        picked = base[rng.choice(len(base), size=n, replace=False)]
        return _unit(picked + 0.025 * rng.standard_normal(picked.shape))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    return Corpus(tmp_path_factory.mktemp("ann-corpus") / "store")


@pytest.fixture()
def store(corpus: Corpus, tmp_path: Path) -> RecordStore:
    """A private copy of the corpus store (tests write to it)."""
    shutil.copytree(corpus.root, tmp_path / "store")
    s = RecordStore(str(tmp_path / "store"))
    yield s
    s.close()


@pytest.fixture()
def ivf_calls(monkeypatch) -> list[int]:
    """Records every ``IvfIndex.search`` call (the number of rows it returned): proof the IVF path ran."""
    calls: list[int] = []
    original = ann.IvfIndex.search

    def spy(self, *args, **kwargs):
        found = original(self, *args, **kwargs)
        calls.append(len(found))
        return found

    monkeypatch.setattr(ann.IvfIndex, "search", spy)
    return calls


def _registered(store: RecordStore, ann_from: int = ANN_FROM) -> DenseIndex:
    """The dense index whose IVF path starts at ``ann_from`` rows: ``store``'s own when it was created so,
    else that of a second store object on its folder, created with that setting."""
    if dense_index(store).ann_from != ann_from:
        store = RecordStore(str(store.uri), search=SearchSettings(dense_ann_from=ann_from))
    index = dense_index(store)
    assert index.ann_from == ann_from  # the setting the store was created with, not the default
    return index


def _ready(index: DenseIndex, q: np.ndarray, steps: list[str] | None = None) -> None:
    """Start the IVF build with one search and wait for it."""
    index.search(q, steps, MAIN_SCOPE, None, 10)
    assert index.wait_for_ann(60)
    assert index._ann is not None


def _ids(hits) -> list[str]:
    return [rid for rid, _, _ in hits]


def _pairs(hits) -> list[tuple[str, float]]:
    return [(rid, sim) for rid, sim, _ in hits]


# -- IvfIndex on its own ----------------------------------------------------------------------------
def test_ivf_index_finds_near_neighbours_probing_few_cells_and_honours_the_mask():
    rng = np.random.default_rng(1)
    dim = 64
    centers = _unit(rng.standard_normal((50, dim)))
    vectors = _clustered(rng, 5000, centers, spread=0.08)
    index = ann.IvfIndex(vectors, nprobe=4)
    assert index.rows == 5000 and index.nlist == 70 and index.nprobe < index.nlist  # really approximate
    queries = _unit(vectors[rng.choice(5000, 30, replace=False)] + 0.03 * rng.standard_normal((30, dim)))
    recall = []
    for q in queries:
        shortlist = index.search(q, 200)
        # Up to 200 (the 4 cells probed may hold fewer), distinct, all real rows.
        assert 10 <= len(shortlist) <= 200 and len(set(shortlist.tolist())) == len(shortlist)
        assert shortlist.min() >= 0 and shortlist.max() < 5000
        exact_top = set(np.argsort(-(vectors @ q))[:10].tolist())
        recall.append(len(exact_top & set(shortlist.tolist())) / 10)
    assert np.mean(recall) >= 0.95

    # A mask: only allowed rows come back, even when the best match is excluded.
    allowed = rng.random(5000) < 0.3
    q = vectors[int(np.flatnonzero(~allowed)[0])]
    found = index.search(q, 50, allowed, share=float(allowed.mean()))
    assert len(found) == 50 and allowed[found].all()
    best_allowed = int(np.flatnonzero(allowed)[np.argmax(vectors[allowed] @ q)])
    assert best_allowed in set(found.tolist())

    # extend(): rows appended to the matrix since the build (earlier rows are never re-added).
    grown = np.vstack([vectors, _unit(rng.standard_normal((3, dim)))])
    index.extend(grown)
    index.extend(grown)
    assert index.rows == 5003
    assert index._index.ntotal == 5003
    for row in (5000, 5001, 5002):
        assert index.search(grown[row], 5)[0] == row


# -- DenseIndex: the IVF path -----------------------------------------------------------------------
def test_ivf_search_agrees_with_the_exact_scan_and_scores_are_exact(store, corpus, ivf_calls):
    index = _registered(store)
    queries = corpus.queries(seed=2)
    # Before the build: the first search that reaches the threshold starts it and scans exactly.
    first = index.search(queries[0], ["alpha"], MAIN_SCOPE, None, 10)
    assert _pairs(first) == _pairs(index.search(queries[0], ["alpha"], MAIN_SCOPE, None, 10, exact=True))
    assert ivf_calls == []
    assert index.wait_for_ann(60)
    ivf = index._ann[1]
    overlap = []
    for q in queries:
        got = index.search(q, ["alpha"], MAIN_SCOPE, None, 10)
        want = index.search(q, ["alpha"], MAIN_SCOPE, None, 10, exact=True)
        assert len(got) == 10
        overlap.append(len(set(_ids(got)) & set(_ids(want))) / 10)
        for rid, sim, vec in got:
            assert rid.startswith("a")
            assert sim == pytest.approx(float(corpus.vector(rid) @ q), abs=1e-5)  # exact cosine
            np.testing.assert_array_equal(vec, corpus.vector(rid))
        assert [s for _, s, _ in got] == sorted((s for _, s, _ in got), reverse=True)
    assert len(ivf_calls) == len(queries)  # every one of these searches went through the IVF index
    assert all(n >= 200 for n in ivf_calls)  # a shortlist of max(200, 8n) rows, re-scored exactly
    assert np.mean(overlap) >= 0.95
    assert index._ann[1] is ivf  # no rebuild

    short = index.approximate_scores(queries[0], ["alpha"], MAIN_SCOPE, None, 300)
    assert short is not None
    ids, sims, median = short
    assert len(ids) == 300 and all(i.startswith("a") for i in ids)
    np.testing.assert_allclose(sims, np.stack([corpus.vector(i) for i in ids]) @ queries[0], atol=1e-5)
    all_sims = corpus.alpha @ queries[0]
    assert median == pytest.approx(float(np.median(all_sims)), abs=0.02)  # sampled estimate
    assert float(sims.max()) == pytest.approx(float(all_sims.max()), abs=1e-5)


def test_partial_probing_finds_the_exact_top_10_in_and_out_of_a_scope(store, corpus, ivf_calls, monkeypatch):
    """At this size the default nprobe (64) covers every cell (nlist = sqrt(4,000) = 63), so the test above
    cannot tell an IVF index from an exhaustive SQ8 scan. Here the index probes 4 cells (widened to 16 for a
    scope of a quarter of the rows): the shortlist really is approximate."""
    monkeypatch.setattr(ann.IvfIndex.__init__, "__defaults__", (4, 0))
    index = _registered(store)
    _ready(index, corpus.queries(seed=16, n=1)[0], ["alpha"])
    ivf = index._ann[1]
    assert (ivf.nprobe, ivf.nlist) == (4, 63)
    ivf_calls.clear()
    for steps, source in ((["alpha"], "alpha"), (["beta"], "beta"), (None, "alpha")):
        overlap = []
        for q in corpus.queries(seed=17, n=20, source=source):
            got = index.search(q, steps, MAIN_SCOPE, None, 10)
            want = index.search(q, steps, MAIN_SCOPE, None, 10, exact=True)
            overlap.append(len(set(_ids(got)) & set(_ids(want))) / 10)
            assert steps is None or all(rid[0] == steps[0][0] for rid in _ids(got))
        assert np.mean(overlap) >= 0.9, (steps, overlap)
    assert len(ivf_calls) == 60


def test_ivf_scope_filter_never_returns_other_steps(store, corpus, ivf_calls):
    index = _registered(store)
    _ready(index, corpus.queries(seed=3, n=1)[0], ["alpha"])
    ivf_calls.clear()
    for q in corpus.queries(seed=4, n=15, source="beta"):  # nearest records are of step beta
        got = index.search(q, ["alpha"], MAIN_SCOPE, None, 20)
        assert len(got) == 20 and all(rid.startswith("a") for rid in _ids(got))
        assert index.search(q, None, MAIN_SCOPE, None, 1)[0][0].startswith("b")  # control: beta wins unscoped
    for q in corpus.queries(seed=5, n=15, source="alpha"):
        got = index.search(q, ["beta"], MAIN_SCOPE, None, 20)  # 1,000 rows: past ann_from too
        assert all(rid.startswith("b") for rid in _ids(got))
        periods = index.search(q, ["alpha"], MAIN_SCOPE, ["2024-02"], 20)  # a period filter: 1,000 rows
        assert periods and all(rid.startswith("a") and int(rid[1:]) % 3 == 1 for rid in _ids(periods))
    assert len(ivf_calls) == 15 * 2 + 15 * 2
    # An empty branch and an unknown step: nothing, whichever path.
    assert index.search(corpus.queries(seed=6, n=1)[0], ["gamma"], MAIN_SCOPE, None, 5) == []
    assert index.search(corpus.queries(seed=6, n=1)[0], ["alpha"], BranchScope.own("dev"), None, 5) == []


def test_scope_below_the_threshold_is_scanned_exactly(store, corpus, ivf_calls):
    index = _registered(store, ann_from=2000)  # alpha (3,000) uses the IVF index, beta (1,000) does not
    _ready(index, corpus.queries(seed=7, n=1)[0], ["alpha"])
    ivf_calls.clear()
    for q in corpus.queries(seed=8, n=5, source="beta"):
        assert index.approximate_scores(q, ["beta"], MAIN_SCOPE, None, 100) is None
        got = index.search(q, ["beta"], MAIN_SCOPE, None, 10)
        assert _pairs(got) == _pairs(index.search(q, ["beta"], MAIN_SCOPE, None, 10, exact=True))
    assert ivf_calls == []
    assert index.approximate_scores(corpus.queries(seed=8, n=1)[0], ["alpha"], MAIN_SCOPE, None, 100) is not None


def test_ann_from_above_the_scope_never_builds_an_index(store, corpus, ivf_calls):
    index = _registered(store, ann_from=10_000)
    for q in corpus.queries(seed=9, n=5):
        got = index.search(q, None, MAIN_SCOPE, None, 10)
        sims = np.vstack([corpus.alpha, corpus.beta]) @ q
        order = np.argsort(-sims, kind="stable")[:10]
        want = [f"a{i:05d}" if i < N_ALPHA else f"b{i - N_ALPHA:05d}" for i in order]
        assert _ids(got) == want
        assert index.approximate_scores(q, None, MAIN_SCOPE, None, 100) is None
    assert index._ann is None and index._ann_thread is None and not index.wait_for_ann(0)
    assert ivf_calls == []


def test_records_appended_after_the_build_are_found_without_a_rebuild(store, corpus, ivf_calls):
    index = _registered(store)
    _ready(index, corpus.queries(seed=10, n=1)[0], ["alpha"])
    ivf = index._ann[1]
    rows = ivf.rows
    assert rows == N_ALPHA + N_BETA
    rng = np.random.default_rng(12)
    fresh = _clustered(rng, 5, corpus.centers)
    store.records.upsert(_records(fresh[:4], "a", "alpha", offset=N_ALPHA))
    store.records.upsert(_records(fresh[4:], "b", "beta", offset=N_BETA))
    ivf_calls.clear()
    for i, q in enumerate(fresh[:4]):
        got = index.search(q, ["alpha"], MAIN_SCOPE, None, 10)
        assert got[0][0] == f"a{N_ALPHA + i:05d}" and got[0][1] == pytest.approx(1.0, abs=1e-5)
    assert index.last_update == "append"
    assert index._ann[1] is ivf and ivf.rows == rows + 5  # extended, not rebuilt
    # The beta record is in the IVF index but outside the alpha scope.
    assert f"b{N_BETA:05d}" not in _ids(index.search(fresh[4], ["alpha"], MAIN_SCOPE, None, 50))
    assert index.search(fresh[4], ["beta"], MAIN_SCOPE, None, 1)[0][0] == f"b{N_BETA:05d}"
    assert len(ivf_calls) == 6
    assert f"a{N_ALPHA + 3:05d}" in set(index.approximate_scores(fresh[3], ["alpha"], MAIN_SCOPE, None, 10)[0].tolist())


def test_deleted_records_are_never_returned(store, corpus, ivf_calls):
    index = _registered(store)
    queries = corpus.queries(seed=13, n=10)
    _ready(index, queries[0], ["alpha"])
    # Delete each query's exact best matches, including the stored vector it was copied from.
    doomed: set[str] = set()
    for q in queries:
        doomed |= set(_ids(index.search(q, ["alpha"], MAIN_SCOPE, None, 5, exact=True)))
    doomed |= {"a00000", "b00000"}
    store.records.delete_ids(sorted(doomed))
    ivf_calls.clear()
    for q in list(queries) + [corpus.alpha[0], corpus.beta[0]]:
        for steps in (["alpha"], None):
            got = index.search(q, steps, MAIN_SCOPE, None, 20)
            assert not doomed & set(_ids(got))
            want = index.search(q, steps, MAIN_SCOPE, None, 20, exact=True)
            assert _ids(got)[:5] == _ids(want)[:5]
        short = index.approximate_scores(q, None, MAIN_SCOPE, None, 500)
        assert short is not None and not doomed & set(short[0].tolist())
    assert index.last_update == "append" and len(ivf_calls) == 12 * 3
    # A query identical to a deleted record: its twin is in the IVF index, excluded by the mask.
    assert index.search(corpus.alpha[0], ["alpha"], MAIN_SCOPE, None, 1)[0][1] < 0.999


def test_compaction_reloads_the_matrix_and_rebuilds_the_index(store, corpus, ivf_calls):
    index = _registered(store)
    queries = corpus.queries(seed=14, n=8)
    _ready(index, queries[0], ["alpha"])
    old = index._ann[1]
    rng = np.random.default_rng(15)
    fresh = _clustered(rng, 3, corpus.centers)
    store.records.upsert(_records(fresh, "a", "alpha", offset=N_ALPHA))
    store.records.delete_ids(["a00001", "a00002"])
    index.search(queries[0], ["alpha"], MAIN_SCOPE, None, 10)
    assert index.last_update == "append" and index._ann[1] is old
    store.records_table().optimize()  # compaction: fragments rewritten, row numbers change
    ivf_calls.clear()
    got = index.search(queries[1], ["alpha"], MAIN_SCOPE, None, 10)  # reload; the rebuild starts, this scans
    assert index.last_update == "load" and ivf_calls == []
    assert _ids(got) == _ids(index.search(queries[1], ["alpha"], MAIN_SCOPE, None, 10, exact=True))
    assert index.wait_for_ann(60)
    new = index._ann[1]
    assert new is not old and new.rows == N_ALPHA + N_BETA + 3 - 2
    for q in list(queries) + list(fresh):
        got = index.search(q, ["alpha"], MAIN_SCOPE, None, 10)
        for rid, sim, _ in got:  # a stale index would pair ids with other rows' vectors
            vec = fresh[int(rid[1:]) - N_ALPHA] if int(rid[1:]) >= N_ALPHA else corpus.vector(rid)
            assert sim == pytest.approx(float(vec @ q), abs=1e-5)
        assert not {"a00001", "a00002"} & set(_ids(got))
    assert len(ivf_calls) == len(queries) + len(fresh)
    assert index.search(fresh[2], ["alpha"], MAIN_SCOPE, None, 1)[0][0] == f"a{N_ALPHA + 2:05d}"


# -- engine: Bitmap scope indexes, top_with_ties ----------------------------------------------------
WORDS = ["apple", "river", "stone", "cloud", "lantern", "copper", "meadow", "falcon", "harbor", "violet"]


def _text_records(rng: np.random.Generator) -> list[Record]:
    out = []
    for i in range(120):
        step = ("notes", "chats", "mails")[i % 3]
        branch = "main" if i % 4 else "dev"
        text = " ".join(rng.choice(WORDS, size=int(rng.integers(3, 9))))
        out.append(Record(id=f"t{i:04d}", content=text, step=step, branch=branch, period=f"2024-0{i % 2 + 1}",
                          materialization_key=f"t{i:04d}", embedding=_unit(rng.standard_normal(DIM)).tolist()))
    return out


def test_bitmap_scope_indexes_exist_and_do_not_change_lexical_results(tmp_path):
    with_bitmaps, without = RecordStore(str(tmp_path / "a")), RecordStore(str(tmp_path / "b"))
    for s in (with_bitmaps, without):
        s.records.upsert(_text_records(np.random.default_rng(21)))
    SearchEngine(with_bitmaps).ensure_index()
    SearchEngine(without).ensure_index()
    names = {i.name for i in with_bitmaps.records_table().list_indices()}
    assert {"step_idx", "branch_idx", "content_idx", "id_idx"} <= names
    tbl = without.records_table()
    tbl.drop_index("step_idx")
    tbl.drop_index("branch_idx")
    assert not {"step_idx", "branch_idx"} & {i.name for i in tbl.list_indices()}
    details = {i.name: i for i in with_bitmaps.records_table().list_indices()}
    assert "bitmap" in str(details["step_idx"].index_type).lower()
    a, b = SearchEngine(with_bitmaps), SearchEngine(without)
    compared = 0
    for query in ["apple river", "violet copper meadow", "stone cloud lantern harbor"]:
        for steps in (None, ["notes"], ["chats", "mails"]):
            for branch in ("main", "dev"):
                for periods in (None, ["2024-01"]):
                    where = a.where(steps, BranchScope.own(branch), periods)
                    got = a.lexical(query, where, 15)
                    assert got == b.lexical(query, where, 15)
                    compared += bool(got)
        hits_a = a.search(query, ["notes", "mails"], BranchScope.own("dev"), 10, strategy=BM25)
        hits_b = b.search(query, ["notes", "mails"], BranchScope.own("dev"), 10, strategy=BM25)
        assert hits_a and [(h.id, h.score) for h in hits_a] == [(h.id, h.score) for h in hits_b]
        assert all(h.branch == "dev" and h.step in ("notes", "mails") for h in hits_a)
    assert compared >= 30  # most combinations found something
    SearchEngine(without).ensure_index()  # missing bitmaps are created again; present ones are kept
    assert {"step_idx", "branch_idx"} <= {i.name for i in without.records_table().list_indices()}
    SearchEngine(with_bitmaps).ensure_index()
    assert {i.name for i in with_bitmaps.records_table().list_indices()} == names


def test_bitmap_scope_indexes_on_an_encrypted_store(tmp_path):
    key = generate_key()
    store = RecordStore(str(tmp_path / "enc"), encryption_key=key)
    store.records.upsert(_text_records(np.random.default_rng(22)))
    stats = SearchEngine(store).ensure_index()
    assert stats["lexical"] == "in-memory (encrypted)"
    names = {i.name for i in store.records_table().list_indices()}
    assert {"step_idx", "branch_idx", "id_idx"} <= names and "content_idx" not in names
    hits = SearchEngine(store).search("falcon", ["notes"], MAIN_SCOPE, 5, strategy=BM25)
    assert hits and all("falcon" in h.content and h.step == "notes" for h in hits)


def test_top_with_ties_fetches_twice_the_wanted_number_first():
    scores = [(f"x{i:03d}", float(100 - i)) for i in range(100)]
    limits: list[int] = []

    def fetch(limit: int) -> list[tuple[str, float]]:
        limits.append(limit)
        return scores[:limit]

    assert top_with_ties(fetch, 10) == scores[:10]
    assert limits == [30]
    # A tie group across the first limit: fetched further until the group ends, then ids decide (the index
    # hands the group out in reverse id order here, so the first fetch alone would keep the wrong ones).
    tied = sorted([(f"z{i:03d}", 1.0) for i in range(60)], reverse=True) + [("y", 0.5)]
    limits.clear()

    def fetch_tied(limit: int) -> list[tuple[str, float]]:
        limits.append(limit)
        return tied[:limit]

    assert top_with_ties(fetch_tied, 5) == [(f"z{i:03d}", 1.0) for i in range(5)]
    assert limits == [20, 40, 80]


# -- pinned table version ---------------------------------------------------------------------------
def test_pinned_version_hides_other_writers_until_the_block_ends(tmp_path):
    rng = np.random.default_rng(31)
    mine, other = RecordStore(str(tmp_path / "s")), RecordStore(str(tmp_path / "s"))
    mine.records.upsert(_records(_unit(rng.standard_normal((5, DIM))), "p", "alpha"))
    tbl = mine.records_table()
    v0 = tbl.version
    assert mine.records_version(tbl) == v0  # unpinned: asked afresh
    with mine.pinned_version():
        assert mine.records_version(tbl) == v0
        other.records.upsert(_records(_unit(rng.standard_normal((2, DIM))), "p", "alpha", offset=5))
        assert tbl.version > v0  # the write is visible to a fresh ask...
        assert mine.records_version(tbl) == v0  # ...but not inside the block
        with mine.pinned_version():  # nested: still the same pin
            assert mine.records_version(tbl) == v0
        assert mine.records_version(tbl) == v0  # the inner block's end does not unpin
        mine.records.upsert(_records(_unit(rng.standard_normal((1, DIM))), "p", "alpha", offset=7))  # own write: unpins
        v1 = mine.records_version(tbl)
        assert v1 == tbl.version and v1 > v0 + 1
        other.records.delete_ids(["p00000"])
        assert mine.records_version(tbl) == v1  # pinned again at the version after the own write
        mine.records.delete_ids(["p00001"])
        v2 = mine.records_version(tbl)
        assert v2 == tbl.version > v1
    other.records.upsert(_records(_unit(rng.standard_normal((1, DIM))), "p", "alpha", offset=8))
    assert mine.records_version(tbl) == tbl.version > v2  # after the block: fresh again
    assert mine.current_pin() is None


def test_pin_is_released_when_the_block_raises(tmp_path):
    store = RecordStore(str(tmp_path / "s"))
    store.records.upsert(_records(_unit(np.random.default_rng(32).standard_normal((2, DIM))), "p", "alpha"))
    with pytest.raises(RuntimeError), store.pinned_version():
        store.records_version(store.records_table())
        raise RuntimeError("boom")
    assert store.current_pin() is None


def test_a_new_search_sees_a_commit_while_another_threads_search_is_pinned(tmp_path):
    """The pin belongs to one search (its thread and the pool threads it submits to), not to the store:
    a search on another thread that starts after a commit sees it (the UI serving queries while a CLI
    run writes)."""
    rng = np.random.default_rng(34)
    server, cli = RecordStore(str(tmp_path / "s")), RecordStore(str(tmp_path / "s"))
    server.records.upsert(_records(_unit(rng.standard_normal((20, DIM))), "p", "alpha"))
    engine = SearchEngine(server)
    q = _unit(rng.standard_normal(DIM))
    config = DENSE
    assert engine.search("", ["alpha"], k=1, strategy=config, query_vector=q)[0].id != "p00020"
    inside, done = threading.Event(), threading.Event()

    def slow_search() -> None:
        with server.pinned_version():
            server.records_version(server.records_table())
            inside.set()
            done.wait(30)

    thread = threading.Thread(target=slow_search)
    thread.start()
    assert inside.wait(30)
    try:
        cli.records.upsert(_records(q[None, :], "p", "alpha", offset=20))
        assert engine.search("", ["alpha"], k=1, strategy=config, query_vector=q)[0].id == "p00020"
    finally:
        done.set()
        thread.join()


def test_an_older_matrix_never_gets_rows_of_an_index_a_newer_search_extended(tmp_path):
    """Two searches share the IVF index: one extends it with rows appended since, while the other still
    works on the matrix it started with. The older one must get only rows its matrix has."""
    rng = np.random.default_rng(35)
    store = RecordStore(str(tmp_path / "s"))
    store.records.upsert(_records(_unit(rng.standard_normal((2000, DIM))), "p", "alpha"))
    index = DenseIndex(store, ann_from=100)
    q = _unit(rng.standard_normal(DIM))
    index.search(q, ["alpha"], MAIN_SCOPE, None, 10)
    assert index.wait_for_ann(60)
    old = index._current()
    fresh = _unit(rng.standard_normal((50, DIM)))
    fresh[0] = q
    store.records.upsert(_records(fresh, "p", "alpha", offset=2000))
    assert index.search(q, ["alpha"], MAIN_SCOPE, None, 1)[0][0] == "p02000"  # extends the shared index
    assert index._ann[1].rows == 2050
    for everything in (True, False):
        rows, _, whole = index._scope(old, ["alpha"], MAIN_SCOPE, None)
        found = index._approximate_rows(old, rows, whole and everything, q, 200)
        assert found is not None and len(found) and found.max() < len(old.ids) == 2000


def test_a_search_after_another_writers_commit_sees_it(tmp_path):
    rng = np.random.default_rng(33)
    base = _unit(rng.standard_normal((50, DIM)))
    mine, other = RecordStore(str(tmp_path / "s")), RecordStore(str(tmp_path / "s"))
    mine.records.upsert(_records(base, "p", "alpha"))
    engine = SearchEngine(mine)
    q = _unit(rng.standard_normal(DIM))
    config = DENSE
    assert engine.search("", ["alpha"], k=1, strategy=config, query_vector=q)[0].id != "p00050"
    other.records.upsert(_records(q[None, :], "p", "alpha", offset=50))
    assert engine.search("", ["alpha"], k=1, strategy=config, query_vector=q)[0].id == "p00050"


# -- leaf-sum search over the IVF shortlist ---------------------------------------------------------
FILLER = [
    "I spent the afternoon repainting the fence in the back garden.", "We drove to the coast and ate fish and chips.",
    "The new project at work is taking up all my evenings.", "My sister is moving to another city next month.",
    "I finally finished reading that long history book.", "The football match last night went into extra time.",
    "We are planning a small party for my father's birthday.", "I have started running before breakfast every day.",
    "The car needed new brakes, which cost a fortune.", "Our neighbours adopted a big friendly dog.",
    "I tried baking sourdough bread but it came out flat.", "The concert tickets sold out in ten minutes.",
    "I am learning to play chess with an online coach.", "We went camping in the mountains over the weekend.",
    "My phone screen cracked when I dropped it on the stairs.", "The museum had an exhibition about ancient Egypt.",
    "I volunteered at the food bank on Saturday morning.", "Our team won the quiz night at the local pub.",
    "I bought a second-hand bicycle to ride to the office.", "The kids built a snowman in the front yard.",
    "I have been watching a documentary series about oceans.", "We repainted the kitchen a pale yellow colour.",
    "My grandmother taught me her recipe for apple pie.", "The train was delayed for two hours because of the storm.",
]
TARGET = "Bob: My zebra finch learned a brand new song this week."
TURNS_PER_SESSION, SESSIONS, CONVERSATIONS = 10, 10, 8  # 800 turns, 800 context records


def _chat_store(root: Path, embedder) -> None:
    """Turns (leaves) with chat metadata and "turns-in-context" records (each turn with the one before it,
    sources = [turn]) like the locomo-turns source and ``with_previous_turn``. Vectors: the filler sentences'
    embeddings with a little noise (so the IVF index has clusters), the target's embedded for real."""
    store = RecordStore(str(root), embedder=embedder)
    texts = [f"Ann: {s}" for s in FILLER] + [TARGET]
    emb = embedder.embed(texts)
    rng = np.random.default_rng(41)
    turns: list[Record] = []
    contexts: list[Record] = []
    target_at = (3, 4, 5)
    for c in range(CONVERSATIONS):
        for s in range(SESSIONS):
            previous: tuple[str, np.ndarray] | None = None
            for t in range(TURNS_PER_SESSION):
                rid = f"turn-{c}-{s}-{t}"
                if (c, s, t) == target_at:
                    text, vec = TARGET, emb[-1]
                else:
                    f = int(rng.integers(len(FILLER)))
                    speaker = "Ann" if t % 2 == 0 else "Bob"
                    text = f"{speaker}: {FILLER[f]}"
                    vec = _unit(emb[f] + 0.01 * rng.standard_normal(DIM))
                meta = {"time": {"created_at": f"2023-{s + 1:02d}-{c + 1:02d}T10:{t:02d}:00+00:00"},
                        "chat": {"conversation_id": f"conv-{c}", "session_id": f"conv-{c}-s{s}",
                                 "message_id": f"D{s + 1}:{t + 1}", "author": text.split(":")[0],
                                 "previous": previous[0] if previous else ""}}
                turns.append(Record(id=rid, content=text, step="turns", branch="main", metadata=meta,
                                    created_at=meta["time"]["created_at"], materialization_key=rid,
                                    embedding=vec.tolist()))
                ctx_text = f"{previous[0]}\n{text}" if previous else text
                ctx_vec = _unit(vec + previous[1]) if previous else vec
                contexts.append(Record(id=f"ctx-{rid}", content=ctx_text, step="turns-in-context", branch="main",
                                       source_ids=[rid], metadata=meta, created_at=meta["time"]["created_at"],
                                       materialization_key=f"ctx-{rid}", embedding=np.asarray(ctx_vec).tolist()))
                previous = (text, vec)
    store.records.upsert(turns)
    store.records.upsert(contexts)
    SearchEngine(store).ensure_index()
    store.close()


@pytest.fixture(scope="module")
def embedder():
    from synthex_resources.embedder import EmbedderConfig

    return EmbedderConfig().create()  # the offline MiniLM: one model load for the module


@pytest.fixture(scope="module")
def chat_root(tmp_path_factory, embedder) -> Path:
    root = tmp_path_factory.mktemp("ann-chat") / "store"
    _chat_store(root, embedder)
    return root


def test_leaf_sum_search_over_the_ivf_shortlist_matches_the_exact_path(chat_root, embedder, ivf_calls, monkeypatch):
    config = CONVERSATIONAL
    query = "What song did the zebra finch learn?"
    steps = ["turns-in-context"]
    exact_store = RecordStore(str(chat_root), embedder=embedder)
    ann_store = RecordStore(str(chat_root), embedder=embedder, search=SearchSettings(dense_ann_from=300))
    index = _registered(ann_store, ann_from=300)  # scopes: 800 context records, 800 turns
    want = SearchEngine(exact_store).search(query, steps, MAIN_SCOPE, 10, strategy=config)
    assert want[0].id == "turn-3-4-5" and want[0].step == "turns"
    assert SearchEngine(ann_store).search(query, steps, MAIN_SCOPE, 10, strategy=config)[0].id == "turn-3-4-5"
    assert index.wait_for_ann(60)
    ivf_calls.clear()
    got = SearchEngine(ann_store).search(query, steps, MAIN_SCOPE, 10, strategy=config)
    assert len(ivf_calls) == 2  # both dense legs (searched records, the leaves' own text) took the shortlist
    assert dense_index(exact_store).ann_from == DEFAULT_ANN_FROM and dense_index(exact_store)._ann is None
    assert [h.id for h in got] == [h.id for h in want]
    assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-6)
    qvec = ann_store.embedder.embed([query])[0]
    assert index.approximate_scores(qvec, steps, MAIN_SCOPE, None, conversational_fusion.DENSE_SHORTLIST) is not None

    # A shortlist much smaller than the scope: only its records (and the lexical hits) get a dense score.
    monkeypatch.setattr(conversational_fusion, "DENSE_SHORTLIST", 20)
    ivf_calls.clear()
    small = SearchEngine(ann_store).search(query, steps, MAIN_SCOPE, 10, strategy=config)
    assert ivf_calls and max(ivf_calls) <= 20
    assert small[0].id == "turn-3-4-5"
    assert small[0].score == pytest.approx(want[0].score, rel=0.05)


# -- multi-hop: the faster _seeds / entity_credit equal the old ones -------------------------------
def _seeds_old(total, m):
    m = min(m, int((total > 0).sum()))
    return np.argsort(-total, kind="stable")[:m] if m else np.zeros(0, dtype=np.int64)


def entity_credit_old(lex, total, seeds):
    top = _seeds_old(total, seeds)
    if not len(top) or total.max() <= 0:
        return np.zeros(len(total))
    has = lex.terms.copy()
    has.data[:] = 1.0
    overlap = (has @ lex.terms[top].T).toarray()
    norm = np.where(lex.seed_norm[top] > 0, lex.seed_norm[top], 1.0)
    share = overlap / norm * (total[top] / total.max())
    share[top, np.arange(len(top))] = 0.0
    return share.max(axis=1)


SCORES = st.sampled_from([-1.0, -0.0, 0.0, 0.0, 0.25, 0.5, 0.5, 1.0, 2.0, 3.5]) | st.floats(-5, 5, allow_nan=False)


@settings(max_examples=100, deadline=None)
@given(total=st.lists(SCORES, min_size=1, max_size=60), m=st.integers(0, 70))
def test_seeds_equal_the_stable_argsort(total, m):
    t = np.asarray(total, dtype=np.float64)
    got, want = conversational_multihop._seeds(t, m), _seeds_old(t, m)
    assert got.tolist() == want.tolist()
    assert np.issubdtype(got.dtype, np.integer)


@st.composite
def lexicons(draw):
    n = draw(st.integers(1, 40))
    t = draw(st.integers(1, 25))
    cells = draw(st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, t - 1)), max_size=n * 4))
    weights = draw(st.lists(st.sampled_from([0.0, 0.3, 1.0, 1.7]) | st.floats(0.0, 4.0),
                            min_size=len(cells), max_size=len(cells)))
    rows = [r for r, _ in cells]
    cols = [c for _, c in cells]
    terms = sparse.csr_matrix((weights, (rows, cols)), shape=(n, t))
    lex = lexicon.Lexicon(terms=terms, postings=terms.tocsc(), seed_norm=np.asarray(terms.sum(axis=1)).ravel(),
                           vocab={f"w{j}": j for j in range(t)}, session=np.zeros(n, dtype=np.int64),
                           adjacency=sparse.csr_matrix((n, n)))
    total = np.asarray(draw(st.lists(SCORES, min_size=n, max_size=n)), dtype=np.float64)
    return lex, total


@settings(max_examples=100, deadline=None)
@given(case=lexicons(), seeds=st.integers(0, 12))
def test_entity_credit_equals_the_sparse_product(case, seeds):
    lex, total = case
    got = conversational_multihop.entity_credit(lex, total, seeds)
    want = entity_credit_old(lex, total, seeds)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
