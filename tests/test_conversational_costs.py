"""What a conversational search costs, counted on a small real store (issue 24, conversational search at 1M):

- the query's embedding runs on the search pool while the lexical leg is answered on the calling thread;
- only the first k leaves' rows are read when no reranker needs more, the spare candidates' only when some of
  those are unreadable; the hits equal those of reading every candidate at once.

Real LanceDB store in a tmp dir; the test's own bag-of-words embedder (no model load).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from test_conversational_at_scale import bag_vectors

from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.record_store import RecordStore
from synthex_resources.search.engine import SearchEngine
from synthex_resources.search.indexes import leaf_scope
from synthex_resources.search.indexes.postings import postings_bm25
from synthex_resources.search.strategies import conversational_fusion
from synthex_resources.search.strategies.builtin import CONVERSATIONAL
from synthex_resources.search.types import Reranked, Reranker

MAIN = BranchScope.own()
STEPS = ["ctx"]
WORDS = "bicycle chain garden tomato finch song museum egypt snow yard chess coach storm train pie recipe".split()
QUERIES = ["What happened to the bicycle chain?", "Which song did the finch learn?", "pie recipe from the museum"]


class BagEmbedder:
    """Each word a fixed random vector (seeded by its hash); ``started`` is set when an embedding begins."""

    name, dim = "bag-test", 16

    def __init__(self) -> None:
        self.started = threading.Event()
        self.threads: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.threads.append(threading.current_thread().name)
        self.started.set()
        return bag_vectors(texts, self.dim)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> RecordStore:
    path = tmp_path_factory.mktemp("conversational-store") / "store"
    embedder = BagEmbedder()
    store = RecordStore(str(path), embedder=embedder)
    rng = np.random.default_rng(5)
    turns, contexts = [], []
    for s in range(6):
        previous = ""
        for t in range(10):
            rid = f"turn-{s}-{t:02d}"
            speaker = "Ann" if t % 2 == 0 else "Bob"
            text = f"{speaker}: " + " ".join(rng.choice(WORDS, size=4).tolist())
            meta = {"time": {"created_at": f"2023-0{s + 1}-01T10:{t:02d}:00+00:00"},
                    "chat": {"conversation_id": "c", "session_id": f"c-s{s}", "author": speaker}}
            turns.append(Record(id=rid, content=text, step="turns", metadata=meta, period=f"2023-0{s + 1}",
                                created_at=meta["time"]["created_at"], materialization_key=rid))
            contexts.append(Record(id=f"ctx-{rid}", content=f"{previous}\n{text}".strip(), step="ctx", source_ids=[rid],
                                   metadata=meta, period=f"2023-0{s + 1}", created_at=meta["time"]["created_at"],
                                   materialization_key=f"ctx-{rid}"))
            previous = text
    store.records.upsert(turns)
    store.records.upsert(contexts)
    engine = SearchEngine(store)
    engine.ensure_index()
    engine.settle_lexical_index()  # the persisted postings answer the lexical leg (on the calling thread)
    yield store
    store.close()


def test_query_embedding_runs_beside_the_lexical_leg(store):
    """The lexical leg (answered on the calling thread) waits for the embedding to start: it only can when
    the embedding was handed to the pool before the lexical leg began."""
    engine = SearchEngine(store)
    ds = store.dataset("records")
    assert postings_bm25(store).usable(ds)
    embedder: BagEmbedder = store.embedder
    seen: dict[str, Any] = {}
    plain = engine.lexical

    def lexical(query: str, where: str, n: int) -> list[tuple[str, float]]:
        seen["thread"] = threading.current_thread().name
        seen["embedding_started"] = embedder.started.wait(10)  # False (after 10 s) if run one after the other
        return plain(query, where, n)

    engine.lexical = lexical  # type: ignore[method-assign]
    embedder.started.clear()
    embedder.threads.clear()
    hits = engine.search(QUERIES[1], STEPS, MAIN, 5, strategy=CONVERSATIONAL)
    assert len(hits) == 5
    assert seen == {"thread": threading.current_thread().name, "embedding_started": True}
    assert embedder.threads and all(name.startswith("synthex-search") for name in embedder.threads)


class KeepOrder(Reranker):
    """A reranker that keeps the order: the strategy then reads every candidate's row in one go."""

    name, top_n = "keep-order", 20

    def rerank(self, query: str, hits: Sequence[Any]) -> Reranked:
        return Reranked(list(hits), None)


def test_rows_read_for_the_top_k_first_and_the_hits_unchanged(store, monkeypatch):
    engine = SearchEngine(store)
    reads: list[list[str]] = []
    plain = conversational_fusion.leaf_rows
    missing: set[str] = set()

    def leaf_rows(engine: Any, scope: Any, ids: list[str], reads_scope: BranchScope) -> dict[str, dict[str, Any]]:
        reads.append(list(ids))
        return {i: r for i, r in plain(engine, scope, ids, reads_scope).items() if i not in missing}

    monkeypatch.setattr(conversational_fusion, "leaf_rows", leaf_rows)
    every = CONVERSATIONAL.with_(reranker=KeepOrder())
    for query in QUERIES:
        reads.clear()
        want = engine.search(query, STEPS, MAIN, 5, strategy=every)
        assert len(reads) == 1 and len(reads[0]) == 20  # the reranker's pool, one read
        reads.clear()
        got = engine.search(query, STEPS, MAIN, 5, strategy=CONVERSATIONAL)
        assert [len(r) for r in reads] == [5]
        assert [(h.id, h.score, h.content) for h in got] == [(h.id, h.score, h.content) for h in want]
    # a leaf among the first k that cannot be read (deleted since an extended scope's build, which takes k + 10
    # candidates): the spare candidates are read next, and the hits are what reading them all at once gives
    with store.pinned_version():
        scope = leaf_scope.scope_for(engine, engine.where(STEPS, MAIN))
    monkeypatch.setattr(scope, "extended_from", [])
    query = QUERIES[0]
    top = engine.search(query, STEPS, MAIN, 5, strategy=every)
    missing.add(top[1].id)
    want = engine.search(query, STEPS, MAIN, 5, strategy=every)
    reads.clear()
    got = engine.search(query, STEPS, MAIN, 5, strategy=CONVERSATIONAL)
    assert [len(r) for r in reads] == [5, 10]
    assert len(got) == 5 and [h.id for h in got] == [h.id for h in want] and top[1].id not in {h.id for h in got}


def test_searches_at_one_version_share_the_opened_dataset(tmp_path):
    """A search opens the records table to learn its latest version; at the version an earlier search read,
    that earlier (warm) dataset object serves the search's reads, and a write makes a new one."""
    store = RecordStore(str(tmp_path / "s"), embedder=BagEmbedder())
    store.records.upsert([Record(id=f"r{i}", content=f"garden tomato {i}", step="turns", materialization_key=f"r{i}")
                          for i in range(4)])
    engine = SearchEngine(store)
    engine.search("garden", ["turns"], MAIN, 2)
    first = store.tables._pinned_dataset
    engine.search("tomato", ["turns"], MAIN, 2)
    assert store.tables._pinned_dataset is first
    store.records.upsert([Record(id="r9", content="garden again", step="turns", materialization_key="r9")])
    hits = engine.search("again", ["turns"], MAIN, 2)
    assert hits[0].id == "r9"  # the write is seen
    assert store.tables._pinned_dataset is not first and store.tables._pinned_dataset.version > first.version
    store.close()
