"""Search at a million records: the persisted postings of the lexical leg (search/indexes/postings.py) and the
IVF index saved beside the table (search/indexes/ann.py, search/indexes/dense_index.py).

Real LanceDB stores in temp dirs, written with the bench's synthetic corpus (evals/bench/search.py: the
rows ``records.upsert`` writes, checked here too). The size thresholds are lowered so that a few thousand
rows take the paths a million do. A store object opened afresh on the same folder stands for a new
process: it must load what the first one saved (counted, not timed).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from evals.bench.search import Vectors, append_rows, corpus, corpus_arrow
from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.record_store import RecordStore
from synthex_resources.search import SearchEngine, load_search_strategies
from synthex_resources.search.indexes.dense_index import dense_index
from synthex_resources.search.indexes.memory_lexical import MemoryBM25
from synthex_resources.search.indexes.postings import postings_bm25
from synthex_resources.search.indexes.sidecar import FOLDER, sidecar
from synthex_resources.search.state import SearchSettings
from synthex_resources.search.tokenize import tokenize

ROWS = 3000
QUERIES = [" ".join(f"w{int(r)}" for r in np.random.default_rng(5).integers(0, 300, size=3)) for _ in range(12)]
QUERIES += ["w0 w0 w1", "w2 nothinglikethis", "W3, w4!"]


class SeededEmbedder:
    """Deterministic unit vectors of the bench's dimension (the model's load is not what is tested)."""

    name, dim = "seeded-test", 384

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.stack([np.random.default_rng(sum(map(ord, t))).normal(size=self.dim) for t in texts])
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def new_store(root: Path, search: SearchSettings | None = None) -> RecordStore:
    return RecordStore(str(root), embedder=SeededEmbedder(), search=search)


def open_store(root: Path, ann_from: int = 10**9) -> RecordStore:
    """A store object on ``root`` whose lexical leg always takes the postings (and whose dense leg the IVF
    index from ``ann_from`` rows): the paths of a large store, on a small one."""
    return new_store(root, SearchSettings(postings_rows_from=0, dense_mode="auto", dense_ann_from=ann_from))


def lexical(store: RecordStore, query: str, steps: list[str] | None = None, n: int = 20) -> list[tuple[str, float]]:
    engine = SearchEngine(store)
    return engine.lexical(query, engine.where(steps, BranchScope.own()), n)


def fts(store: RecordStore, query: str, n: int = 20) -> list[tuple[str, float]]:
    """LanceDB's FTS ranking of the same store (the postings object told to stay out of it)."""
    return lexical(new_store(store.uri, SearchSettings(postings_enabled=False)), query, n=n)


def same(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> bool:
    """The same ids in the same order, scores equal to float32 precision (LanceDB scores in float32)."""
    return [i for i, _ in got] == [i for i, _ in want] and np.allclose([s for _, s in got], [s for _, s in want],
                                                                       rtol=1e-5)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("million") / "store"
    store = open_store(root)
    append_rows(store, corpus_arrow(store, ROWS, seed=1, vectors=Vectors("random")))
    append_rows(store, corpus_arrow(store, 1000, seed=2, offset=ROWS, vectors=Vectors("random")))
    SearchEngine(store).ensure_index()  # FTS, bitmaps, and the postings (built and saved)
    sidecar(store).wait()
    assert postings_bm25(store).builds == 1
    return root


def test_the_bench_corpus_rows_are_the_rows_upsert_writes(tmp_path):
    a, b = new_store(tmp_path / "a"), new_store(tmp_path / "b")
    a.records.upsert(corpus(50, seed=3, offset=7, vectors=Vectors("random")), embed=False)
    append_rows(b, corpus_arrow(b, 50, seed=3, offset=7, vectors=Vectors("random")))
    want, got = (s.records_table().to_arrow().sort_by("id") for s in (a, b))
    assert want.num_rows == 50 and got.equals(want)


def test_postings_rank_like_lancedb_fts_and_the_in_memory_bm25(built):
    store = open_store(built)
    memory = MemoryBM25(store)
    where = SearchEngine(store).where(["turns"], BranchScope.own())
    for query in QUERIES:
        ours = lexical(store, query, ["turns"])
        reference = fts(store, query)
        assert ours, query  # never vacuous
        assert [i for i, _ in ours] == [i for i, _ in reference], query
        assert np.allclose([s for _, s in ours], [s for _, s in reference], rtol=1e-4), query
        assert [i for i, _ in ours] == [i for i, _ in memory.search(tokenize(query), where, 20)], query
    assert lexical(store, "w1", ["other"]) == []  # the filter applies


def test_postings_are_loaded_by_a_fresh_store_object_not_rebuilt(built):
    store = open_store(built)
    got = lexical(store, QUERIES[0])
    index = postings_bm25(store)
    assert (index.builds, index.last_update) == (0, "persisted")
    assert sidecar(store).loads == 1 and same(got, fts(store, QUERIES[0]))


def test_a_write_updates_the_postings_incrementally(built, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(built, root)
    store = open_store(root)
    lexical(store, "w1")  # loaded as saved
    token = "zqxjkv"
    store.records.upsert([Record(id="new-one", step="turns", branch="main", period="2024-01",
                                 content=f"{token} w1 w1 arrives late", materialization_key="new-one")], embed=False)
    # an upsert that changes a stored text: LanceDB deletes the old row and appends the new one
    old = store.records.get(f"{5:012d}")
    store.records.upsert([Record(**{**{f: getattr(old, f) for f in ("id", "step", "branch", "period",
                                                                    "materialization_key", "metadata")},
                                    "content": "replaced text zqxjkv"})], embed=False)
    assert {i for i, _ in lexical(store, token)} == {"new-one", f"{5:012d}"}
    index = postings_bm25(store)
    assert (index.builds, index.last_update) == (0, "delta")  # not rebuilt
    SearchEngine(store).ensure_index()  # LanceDB's index holds the new rows too
    sidecar(store).wait()
    rebuilt = tmp_path / "rebuilt"  # the same table, its postings built whole
    shutil.copytree(root, rebuilt, ignore=shutil.ignore_patterns(FOLDER))
    full = open_store(rebuilt)
    for query in QUERIES[:5] + ["w1 zqxjkv"]:
        got = lexical(store, query)
        assert got == lexical(full, query), query  # the delta scores as a full build: the same floats
        # LanceDB's order; its statistics still count the deleted row (ours count live rows: 1e-4 apart)
        assert [i for i, _ in got] == [i for i, _ in fts(store, query)], query
    assert postings_bm25(store).builds == 0 and postings_bm25(full).builds == 1
    again = open_store(root)  # the next process: the saved delta, no build
    assert lexical(again, token) == lexical(store, token)
    assert (postings_bm25(again).builds, postings_bm25(again).last_update) == (0, "persisted")


def test_a_small_store_whose_fts_index_lags_keeps_lancedb_fts(built, tmp_path):
    """Below the threshold the postings answer only while LanceDB's index holds exactly the live rows (then
    both rank alike); a stemmed index is served with its stemmer (tests/test_stem.py)."""
    root = tmp_path / "lagging"
    shutil.copytree(built, root)
    store = new_store(root)  # default threshold: 4,000 rows are far below it
    assert postings_bm25(store).usable(store.dataset("records"))  # indexed whole: the postings
    store.records.upsert([Record(id="late", step="turns", branch="main", period="2024-01", content="w1 late",
                                 materialization_key="late")], embed=False)
    lagging = new_store(root)  # a row outside the index: LanceDB's FTS, whose statistics the postings lack
    assert not postings_bm25(lagging).usable(lagging.dataset("records"))
    stemmed = open_store(root)
    SearchEngine(stemmed).ensure_index(stem=True)
    assert postings_bm25(stemmed).usable(stemmed.dataset("records")) and postings_bm25(stemmed).analyzer.stem


def test_the_saved_ivf_index_is_loaded_extended_and_dropped_after_a_rewrite(built, tmp_path):
    root = tmp_path / "ivf"
    shutil.copytree(built, root)
    query = np.asarray(new_store(root).records.get(f"{0:012d}", with_embedding=True).embedding, np.float32)

    def first_hit(store: RecordStore) -> tuple[str, str]:
        index = dense_index(store)
        index.search(query, ["turns"], BranchScope.own(), None, 5)  # starts the IVF (exact until it is ready)
        assert index.wait_for_ann()
        found = index.search(query, ["turns"], BranchScope.own(), None, 5)
        return found[0][0], index.ivf_source

    first = open_store(root, ann_from=1000)
    assert first_hit(first) == (f"{0:012d}", "built")
    sidecar(first).wait()
    assert first_hit(open_store(root, ann_from=1000)) == (f"{0:012d}", "loaded")
    # an append: the saved index still holds the saved rows and is extended by the new ones
    writer = open_store(root, ann_from=1000)
    twin = Record(id="twin", step="turns", branch="main", period="2024-01", content="twin", materialization_key="twin",
                  embedding=(query * 1.0).tolist())
    writer.records.upsert([twin], embed=False)
    appended = open_store(root, ann_from=1000)
    hits = dense_index(appended)
    hits.search(query, ["turns"], BranchScope.own(), None, 5)
    assert hits.wait_for_ann() and hits.ivf_source == "loaded"
    assert {i for i, _, _ in hits.search(query, ["turns"], BranchScope.own(), None, 2)} == {f"{0:012d}", "twin"}
    # a compaction rewrites the fragments: the saved matrix and its IVF index no longer fit, both are rebuilt
    writer.records_table().optimize()
    sidecar(appended).wait()
    assert first_hit(open_store(root, ann_from=1000))[1] == "built"


def test_search_modes_agree_with_and_without_the_postings(built):
    """hybrid and conversational through the postings rank as through LanceDB's FTS."""
    registry = load_search_strategies()
    plain = new_store(built)  # below the threshold: LanceDB FTS
    ours = open_store(built)
    for mode in ("bm25", "hybrid"):
        for query in QUERIES[:4]:
            want = [h.id for h in SearchEngine(plain).search(query, steps=["turns"], k=10, strategy=registry.get(mode))]
            got = [h.id for h in SearchEngine(ours).search(query, steps=["turns"], k=10, strategy=registry.get(mode))]
            assert got == want and got, (mode, query)
