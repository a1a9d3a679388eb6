"""Vectors: each distinct text is embedded once, and steps outside every search surface are embedded
only when a dense search first needs them (then written back, so once)."""

from __future__ import annotations

import numpy as np

from synthex.core.record import Record
from synthex_resources.embedder import MiniLMOnnxEmbedder
from synthex_resources.record_store import RecordStore
from synthex_resources.search.engine import SearchEngine
from synthex_resources.search.indexes.dense_index import dense_index
from synthex_resources.search.strategies.builtin import DENSE


class CountingEmbedder:
    """The real offline embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        self.inner = MiniLMOnnxEmbedder()
        self.name, self.dim = self.inner.name, self.inner.dim
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += texts
        return self.inner.embed(texts)


def record(rid: str, step: str, content: str) -> Record:
    return Record(id=rid, content=content, step=step, period="2024-01", metadata={"time": {"created_at": "2024-01-05"}})


def test_identical_text_is_embedded_once(tmp_path):
    embedder = CountingEmbedder()
    store = RecordStore(str(tmp_path / "db"), embedder=embedder)
    same = "We moved the billing service to Rust in March."
    store.records.upsert([record("a", "chatgpt", same), record("b", "transcripts", same), record("c", "summaries", "other")])
    assert sorted(embedder.texts) == sorted([same, "other"])
    store.records.upsert([record("d", "summaries-v2", same)])  # a later write of a known text reuses its stored vector
    assert len(embedder.texts) == 2
    rows = store.records.rows_by_id(["a", "d"], ["id", "vector"])
    assert np.allclose(rows["a"]["vector"], rows["d"]["vector"])


def test_unsearched_steps_get_vectors_on_first_dense_search(tmp_path):
    embedder = CountingEmbedder()
    store = RecordStore(str(tmp_path / "db"), embedder=embedder)
    store.records.upsert([record("t1", "transcripts", "the sourdough starter needs feeding twice a day"),
                  record("t2", "transcripts", "kubernetes pods restart after the config change")], embed=False)
    store.records.upsert([record("s1", "summaries", "a note about bread")])
    assert embedder.texts == ["a note about bread"]
    assert store.records.rows_by_id(["t1"], ["id", "vector"])["t1"]["vector"] is None
    engine = SearchEngine(store)
    hits = engine.search("feeding a sourdough starter", steps=["transcripts"], strategy=DENSE, k=1)
    assert [h.id for h in hits] == ["t1"]
    assert store.records.rows_by_id(["t1"], ["id", "vector"])["t1"]["vector"] is not None  # written back
    embedded = len(embedder.texts)
    engine.search("kubernetes restarts", steps=["transcripts"], strategy=DENSE, k=1)
    assert len(embedder.texts) == embedded + 1  # only the query: the records are not embedded again
    assert not dense_index(store)._current().unembedded
