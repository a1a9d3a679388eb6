"""Issue 21 "Speed", the lexical leg: the persisted postings (search/indexes/postings.py) answer stemmed and small stores,
with the FTS index's own terms (search/tokenize.py ``IndexAnalyzer``: LanceDB's analyzer, Snowball stemmer
included) and LanceDB's float32 BM25 (search/indexes/bm25.py), so they rank as LanceDB's FTS query to the float.

Real LanceDB stores in temp dirs; LanceDB's ranking is the reference (the same store opened with its postings
told to stay out). The eval test counts the queries the postings answered, never times them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import go_offline, write_json
from test_evalloop import locomo_small

from evals.architectures import resolve
from evals.benchmarks import evaluate
from evals.benchmarks.locomo.benchmark import LoCoMo
from evals.shared_embedder import MemoEmbedder
from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.record_store import RecordStore
from synthex_resources.search import SearchEngine
from synthex_resources.search.indexes.postings import PostingsBM25, postings_bm25
from synthex_resources.search.indexes.sidecar import FOLDER, sidecar
from synthex_resources.search.state import SearchSettings
from synthex_resources.search.tokenize import PROJECT_INDEX, IndexAnalyzer

LONG = "x" * 39  # kept by the index; one more character and it is dropped
TEXTS = [
    "She runs every morning before work.",
    "Running a marathon was his goal; he ran it in 2022.",
    "The runner talked about generous sponsors and generosity.",
    "We talked and talked about the talks.",
    "Their cats were chasing the dog, then the dogs chased the cat.",
    "A café in Zürich, a naïve idea, Straße names.",
    "He walks; she walked; they are walking together.",
    f"Codes {LONG} and {LONG}y appear here.",
    "Nothing about any of those words.",
    "Studies of the studying student: she studied.",
    "run run run runs",
    "The generously sized portions.",
]
QUERIES = ["running", "runs", "talking talks", "generosity", "cats dog", "cafe", "café", "zurich", "walked walking",
           "studies", "run running runs", LONG, f"{LONG}y", "generous generously sponsors", "naive", "strasse",
           "nothing matches zzzz"]


class SeededEmbedder:
    """Deterministic unit vectors (the dense leg is not what is tested)."""

    name, dim = "seeded-test", 8

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.stack([np.random.default_rng(sum(map(ord, t))).normal(size=self.dim) for t in texts])
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def write_store(root: Path, stem: bool) -> Path:
    store = RecordStore(str(root), embedder=SeededEmbedder())
    store.records.upsert([Record(id=f"t{i:02d}", step="turns", branch="main", period="2024-01", content=text,
                                 materialization_key=f"t{i}") for i, text in enumerate(TEXTS)], embed=False)
    SearchEngine(store).ensure_index(stem=stem)
    return root


def lexical(root: Path, query: str, postings: bool) -> tuple[list[tuple[str, float]], RecordStore]:
    store = RecordStore(str(root), embedder=SeededEmbedder(), search=SearchSettings(postings_enabled=postings))
    engine = SearchEngine(store)
    return engine.lexical(query, engine.where(["turns"], BranchScope.own()), 20), store


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[bool, Path]:
    base = tmp_path_factory.mktemp("stem")
    return {stem: write_store(base / ("stemmed" if stem else "plain"), stem) for stem in (True, False)}


@pytest.mark.parametrize("stem", [True, False])
def test_postings_rank_as_lancedb_fts_to_the_float(stores, stem):
    root = stores[stem]
    found_any = 0
    for query in QUERIES:
        got, store = lexical(root, query, postings=True)
        want, _ = lexical(root, query, postings=False)
        assert got == want, query  # the same ids, order and float32 scores
        found_any += bool(got)
        index = postings_bm25(store)
        assert index.searches == 1 and index.analyzer.stem == stem  # the postings answered, with the stemmer
    assert found_any >= len(QUERIES) - 3  # never vacuous


def test_the_stemmer_is_on_in_a_stemmed_store_only(stores):
    def ids(root: Path, query: str) -> set[str]:
        hits, store = lexical(root, query, postings=True)
        index = postings_bm25(store)  # the postings answered, with the stemmer of that store's index only
        assert index.searches == 1 and index.analyzer.stem == (root == stores[True])
        return {i for i, _ in hits}

    # "running" finds "runs" (t00) and "ran"-free "run run run runs" (t10) only through the stemmer
    assert {"t00", "t01", "t10"} <= ids(stores[True], "running")
    assert ids(stores[False], "running") == {"t01"}
    assert {"t03"} <= ids(stores[True], "talking") and ids(stores[False], "talking") == set()
    # LanceDB's own analyzer: accents folded in the index, tokens of 40 characters dropped
    assert ids(stores[True], "cafe") == {"t05"} and ids(stores[True], "caf") == set()
    assert ids(stores[False], LONG) == {"t07"} and ids(stores[False], f"{LONG}y") == set()


def test_the_analyzer_is_lancedbs_own():
    analyzer = IndexAnalyzer.of_index({**PROJECT_INDEX, "stem": True})
    assert analyzer.terms(["running", "runs", "generosity", LONG, LONG + "y", "0"]) == [
        "run", "run", "generos", LONG, None, "0"]
    assert analyzer.text_terms("Café naïve") == ["cafe", "naiv"]
    assert IndexAnalyzer.of_index({**PROJECT_INDEX, "remove_stop_words": True}) is None  # not reproduced here


def test_the_second_eval_searches_the_postings(tmp_path, monkeypatch):
    """The first eval of a workspace searches LanceDB's FTS (its first search rewrote the leaf rows, so the index
    lags) and rebuilds the index after its questions; the next eval's lexical leg is the postings, with the
    same figures and per-question hits."""
    go_offline(monkeypatch)
    data = write_json(tmp_path / "locomo.json", locomo_small()[:1])
    answered: list[int] = []
    real_search = PostingsBM25.search

    def counting_search(self, *args, **kwargs):
        answered.append(1)
        return real_search(self, *args, **kwargs)

    monkeypatch.setattr(PostingsBM25, "search", counting_search)
    memo = MemoEmbedder(SeededEmbedder())  # the model's vectors are not what is tested
    results, counts = [], []
    for _ in range(2):
        answered.clear()
        results.append(evaluate(LoCoMo(), data, resolve(["conversational"], None), tmp_path / "work",
                                log=lambda _line: None, embedder=memo))
        counts.append(len(answered))
    questions = results[1][0]["n_questions"]
    assert questions > 0 and counts[1] >= questions  # every question's lexical leg (multi-hop parts too)
    assert counts[0] < counts[1]
    first, second = ({k: r[0][k] for k in ("metrics", "by_category", "questions")} for r in results)
    assert first == second and first["questions"]  # the same figures and per-question rows


def test_an_update_saves_the_delta_not_the_base(tmp_path):
    """The postings' sidecar: a build writes the base (the bulk), a later write only the small delta; the next
    process loads both ("persisted") and ranks as a full build of the same table."""
    root = write_store(tmp_path / "store", stem=True)

    def opened() -> RecordStore:
        # served though the index lags
        store = RecordStore(str(root), embedder=SeededEmbedder(), search=SearchSettings(postings_rows_from=0))
        return store

    def search(store: RecordStore, query: str) -> list[tuple[str, float]]:
        engine = SearchEngine(store)
        return engine.lexical(query, engine.where(["turns"], BranchScope.own()), 20)

    writer = opened()
    search(writer, "running")
    sidecar(writer).wait()
    base_file, _ = sidecar(writer)._paths("lexical", "postings-base")
    delta_file, _ = sidecar(writer)._paths("lexical", "postings-delta")
    written = (base_file.stat().st_mtime_ns, base_file.read_bytes())
    assert not delta_file.exists()
    writer.records.upsert([Record(id="late", step="turns", branch="main", period="2024-01",
                                  content="late runners were running", materialization_key="late")], embed=False)
    got = search(writer, "running")
    sidecar(writer).wait()
    assert postings_bm25(writer).last_update == "delta" and "late" in {i for i, _ in got}
    assert (base_file.stat().st_mtime_ns, base_file.read_bytes()) == written and delta_file.exists()
    again = opened()
    assert search(again, "running") == got
    assert (postings_bm25(again).builds, postings_bm25(again).last_update) == (0, "persisted")
    shutil.rmtree(root / FOLDER)  # the same table, its postings built whole
    full = opened()
    assert search(full, "running") == got and postings_bm25(full).builds == 1


def test_a_search_holding_older_postings_maps_its_words_with_their_own_numbering(tmp_path):
    """A search takes the postings of its version, then maps its words to term ids; if another thread's full
    build (after a compaction) lands in between, the words must still be numbered as those postings were
    built (a newer numbering would score other words' rows)."""
    from synthex_resources.search.tokenize import tokenize

    root = write_store(tmp_path / "s", stem=False)
    store = RecordStore(str(root), embedder=SeededEmbedder())
    engine = SearchEngine(store)
    where = engine.where(["turns"], BranchScope.own())
    post = postings_bm25(store)
    engine.lexical("zebra", where, 5)
    store.records.upsert([Record(id="z1", step="turns", branch="main", period="2024-01",
                                 content="zebra zebra stripes", materialization_key="z1")], embed=False)
    engine.ensure_index()
    want = engine.lexical("zebra", where, 5)
    held = post.current()  # what a search on this version holds before it maps its words
    store.records.delete_ids(["t00", "t01", "t02"])
    store.records_table().optimize()
    engine.ensure_index()
    engine.lexical("stripes", where, 5)  # another search: a full build, its own numbering
    assert post.last_update == "build" and post.current() is not held
    post.current = lambda: held  # the first search goes on with the postings it held
    assert want and want[0][0] == "z1"
    assert post.search(tokenize("zebra"), where, 5) == want


def test_the_analyzer_remembers_words_up_to_its_bound(monkeypatch):
    import synthex_resources.search.tokenize as tokenize_module

    monkeypatch.setattr(tokenize_module, "WORDS_KEPT", 3)
    analyzer = IndexAnalyzer({**PROJECT_INDEX, "stem": True})
    assert analyzer.terms(["running", "cats", "runs"]) == ["run", "cat", "run"]
    assert analyzer.terms(["jumping", "running", "flies"]) == ["jump", "run", "fli"]  # past the bound: still right
    assert analyzer.analyzed == 5 and len(analyzer._terms) == 3
    assert analyzer.terms(["jumping"]) == ["jump"] and analyzer.analyzed == 6  # not kept: analyzed again
