"""The dense index: the binary shortlist finds the exact top k when it stands out, and a write updates the
matrix in place (append / deleted rows) with the same results as a full reload."""

from __future__ import annotations

import numpy as np
import pytest

from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.record_store import RecordStore
from synthex_resources.search.indexes.dense_index import DenseIndex

MAIN_SCOPE = BranchScope.own()

DIM = 384


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _records(vectors: np.ndarray, offset: int = 0, step: str = "turns", tag: str = "") -> list[Record]:
    return [Record(id=f"r{offset + i:06d}", content=f"record {offset + i} {tag}", step=step, branch="main",
                   period=f"2024-{(i % 3) + 1:02d}", materialization_key=f"r{offset + i:06d}",
                   embedding=v.tolist()) for i, v in enumerate(vectors)]


@pytest.fixture()
def store(tmp_path) -> RecordStore:
    return RecordStore(str(tmp_path / "store"))


def test_binary_shortlist_finds_the_exact_top_k(store: RecordStore) -> None:
    rng = np.random.default_rng(7)
    n, k = 3000, 10
    vectors = _unit(rng.standard_normal((n, DIM)))
    queries = _unit(rng.standard_normal((20, DIM)))
    # Each query has k planted neighbours at cosine ~0.9 .. 0.45 (random pairs sit near 0 +- 0.05).
    planted = rng.choice(n, size=(len(queries), k), replace=False)
    for q, rows in zip(queries, planted, strict=True):
        for j, row in enumerate(rows):
            cos = 0.9 - 0.05 * j
            r = rng.standard_normal(DIM)
            noise = _unit(r - q * (q @ r))  # orthogonal to the query
            vectors[row] = _unit(cos * q + np.sqrt(1 - cos**2) * noise)
    store.records.upsert(_records(vectors))
    binary = DenseIndex(store, mode="binary", shortlist=400)
    for q, rows in zip(queries, planted, strict=True):
        got = binary.search(q, ["turns"], MAIN_SCOPE, None, k)
        want = binary.search(q, ["turns"], MAIN_SCOPE, None, k, exact=True)
        assert [rid for rid, _, _ in got] == [rid for rid, _, _ in want]
        assert [rid for rid, _, _ in want] == [f"r{r:06d}" for r in rows]
        assert [s for _, s, _ in got] == [s for _, s, _ in want]  # re-scored exactly


def test_exact_search_and_scores_match_brute_force(store: RecordStore) -> None:
    rng = np.random.default_rng(3)
    vectors = _unit(rng.standard_normal((1500, DIM)))
    store.records.upsert(_records(vectors[:1000]) + _records(vectors[1000:], offset=1000, step="notes"))
    index = DenseIndex(store)
    q = _unit(rng.standard_normal(DIM))
    sims = vectors[:1000] @ q
    got = index.search(q, ["turns"], MAIN_SCOPE, None, 20)
    assert [rid for rid, _, _ in got] == [f"r{i:06d}" for i in np.argsort(-sims)[:20]]
    ids, scores, _ = index.scores(q, ["turns"], MAIN_SCOPE, ["2024-01"])
    expect = {f"r{i:06d}": sims[i] for i in range(0, 1000, 3)}
    assert dict(zip(ids.tolist(), scores.tolist(), strict=True)) == pytest.approx(expect, abs=1e-5)
    assert index.scores(q, ["turns"], MAIN_SCOPE, ["2024-01"])[0] is ids  # the scope's ids are cached


def test_write_updates_the_matrix_like_a_reload(store: RecordStore) -> None:
    rng = np.random.default_rng(5)
    vectors = _unit(rng.standard_normal((2000, DIM)))
    store.records.upsert(_records(vectors))
    index = DenseIndex(store, mode="binary", shortlist=300)
    q = _unit(rng.standard_normal(DIM))
    index.search(q, ["turns"], MAIN_SCOPE, None, 10)
    assert index.last_update == "load"
    # New records, and rewritten ones (new content and vector: the old rows are deleted by the upsert).
    fresh = _unit(rng.standard_normal((300, DIM)))
    fresh[0] = q  # the new best match
    store.records.upsert(_records(fresh, offset=2000))
    store.records.upsert(_records(_unit(rng.standard_normal((100, DIM))), offset=500, tag="v2"))
    store.records.delete_ids([f"r{i:06d}" for i in range(10)])
    for exact in (True, False):
        got = index.search(q, ["turns"], MAIN_SCOPE, None, 30, exact=exact)
        assert index.last_update == "append"
        want = DenseIndex(store, mode="binary", shortlist=300).search(q, ["turns"], MAIN_SCOPE, None, 30, exact=exact)
        assert [(rid, s) for rid, s, _ in got] == [(rid, s) for rid, s, _ in want]
        assert got[0][0] == "r002000"
    store.records.delete_ids(["r002000"])  # deletions only: no new fragment
    got = index.search(q, ["turns"], MAIN_SCOPE, None, 30)
    assert index.last_update == "append" and got[0][0] != "r002000"
    ids, _, _ = index.scores(q, ["turns"], MAIN_SCOPE, None)
    assert len(ids) == len(set(ids.tolist())) == 2289
    assert "r000003" not in set(ids.tolist())
    vec = index.vectors_of(["r000500"])["r000500"]
    assert not np.allclose(vec, vectors[500])  # the rewritten vector
