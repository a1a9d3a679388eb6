"""Readers never see a half-written partition: ``RecordStore.write_partitions`` makes a chunk of
partitions visible in one commit (new records in, rows no longer expected out), so every committed
version of the ``records`` table holds each partition either as it was or as it is now."""

from __future__ import annotations

import hashlib

import lance
import numpy as np

from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.record_store import RECORDS, open_store
from synthex_resources.search.engine import SearchEngine

MAIN_SCOPE = BranchScope.own()


class HashEmbedder:
    """Distinct texts get distinct (deterministic) vectors, so a dense search can tell rows apart."""

    dim = 8

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.array([[b / 255 + 0.01 for b in hashlib.sha256(t.encode()).digest()[:self.dim]] for t in texts],
                       dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def rec(rid: str, content: str, period: str = "2024-01", branch: str = "main", step: str = "summaries",
        run_id: str = "run-1") -> Record:
    return Record(id=rid, content=content, step=step, branch=branch, source_ids=[], period=period,
                  run_id=run_id)


def partition_states(uri: str, since: int, step: str = "summaries", branch: str = "main") -> list[dict]:
    """{period: {id: content}} of ``step`` on ``branch`` at every table version after ``since``."""
    path = f"{uri}/{RECORDS}.lance"
    states = []
    for version in sorted(v["version"] for v in lance.dataset(path).versions()):
        if version <= since:
            continue
        rows = lance.dataset(path, version=version).to_table(
            columns=["id", "content", "period"], filter=f"step = '{step}' AND branch = '{branch}'").to_pylist()
        state: dict[str, dict[str, str]] = {}
        for row in rows:
            state.setdefault(row["period"], {})[row["id"]] = row["content"]
        states.append(state)
    return states


def branch_rows(store, branch: str) -> dict[str, str]:
    return {r["id"]: r["content"] for r in store.tables.read(RECORDS, f"branch = '{branch}'", ["id", "content"])}


def test_every_committed_version_shows_a_partition_chunk_old_or_new(tmp_path):
    uri = str(tmp_path / "store")
    store = open_store(uri, HashEmbedder())
    # Another step's row in the same period and another branch's copy of A: never touched.
    store.records.upsert([rec("N", "other step", step="notes"), rec("A", "exp copy of A", branch="exp")])
    store.records.write_partitions(MAIN_SCOPE, "summaries", {
        "2024-01": ([rec("A", "old summary a"), rec("B", "old summary b")], {"A", "B"}),
        "2024-02": ([rec("E", "summary e", "2024-02")], {"E"}),
    })
    old = {"2024-01": {"A": "old summary a", "B": "old summary b"}, "2024-02": {"E": "summary e"}}
    assert partition_states(uri, since=0)[-1] == old
    before = store.records_table().version

    # A prompt change: 2024-01's summaries are replaced; 2024-02 keeps E (re-sent unchanged) and gains F.
    removed = store.records.write_partitions(MAIN_SCOPE, "summaries", {
        "2024-01": ([rec("C", "new summary c", run_id="run-2"), rec("D", "new summary d", run_id="run-2")],
                    {"C", "D"}),
        "2024-02": ([rec("E", "summary e", "2024-02", run_id="run-2"), rec("F", "summary f", "2024-02", run_id="run-2")],
                    {"E", "F"}),
    })
    new = {"2024-01": {"C": "new summary c", "D": "new summary d"}, "2024-02": {"E": "summary e", "F": "summary f"}}

    assert removed == {"2024-01": 2, "2024-02": 0}
    states = partition_states(uri, since=before)
    assert states, "the rewrite committed nothing"
    for state in states:  # a reader at any version sees the whole chunk old or the whole chunk new
        assert state in (old, new), f"a half-written partition was visible: {state}"
    assert states[-1] == new
    assert len(states) == 1  # one commit for the chunk
    # Rows outside the partitions are untouched; an unchanged row is not rewritten.
    assert branch_rows(store, "exp") == {"A": "exp copy of A"}
    assert [r.content for r in store.records.list(MAIN_SCOPE, step="notes")] == ["other step"]
    assert store.records.get("E").run_id == "run-1"
    assert store.records.get("C", with_embedding=True).embedding is not None  # embedded at write time (embed=True)


def test_stale_rows_only_and_serving_branch(tmp_path):
    uri = str(tmp_path / "store")
    store = open_store(uri, HashEmbedder())
    store.records.write_partitions(MAIN_SCOPE, "summaries", {"2024-01": ([rec("A", "a"), rec("B", "b")], {"A", "B"})})
    store.records.upsert([rec("B", "b on exp", branch="exp")])
    before = store.records_table().version
    # Nothing new, one row no longer expected: one commit, and only main's row of B goes.
    assert store.records.write_partitions(MAIN_SCOPE, "summaries", {"2024-01": ([], {"A"})}) == {"2024-01": 1}
    assert partition_states(uri, since=before) == [{"2024-01": {"A": "a"}}]
    assert branch_rows(store, "exp") == {"B": "b on exp"}

    # A branch whose step is served by main (copy-on-write view): stale rows are found and removed on
    # the serving branch, as before; new rows land on the records' own branch, in the same commit.
    exp = BranchScope.of("exp", {"summaries": "main"})
    before = store.records_table().version
    removed = store.records.write_partitions(exp, "summaries", {"2024-01": ([rec("G", "g", branch="exp")], {"G"})},
                                     embed=False)
    assert removed == {"2024-01": 1}
    assert store.records_table().version == before + 1
    assert branch_rows(store, "main") == {}
    assert branch_rows(store, "exp") == {"B": "b on exp", "G": "g"}
    assert store.records.rows_by_id(["G"], ["id", "vector"])["G"]["vector"] is None  # embed=False leaves it empty


def test_search_sees_the_rewrite(tmp_path):
    uri = str(tmp_path / "store")
    store = open_store(uri, HashEmbedder())
    store.records.write_partitions(MAIN_SCOPE, "summaries", {"2024-01": ([rec("A", "apples orchard"), rec("B", "bananas")],
                                                             {"A", "B"})})
    engine = SearchEngine(store)
    engine.ensure_index()
    where = engine.where(["summaries"], MAIN_SCOPE)
    rows = engine.record_filter(["summaries"], MAIN_SCOPE)
    assert [i for i, _ in engine.lexical("apples", where, 5)] == ["A"]
    assert {i for i, _ in engine.dense("apples orchard", rows, 5, steps=["summaries"])} == {"A", "B"}  # dense matrix now cached

    store.records.write_partitions(MAIN_SCOPE, "summaries", {"2024-01": ([rec("C", "apples cider")], {"B", "C"})})
    assert [i for i, _ in engine.lexical("apples", where, 5)] == ["C"]
    assert {i for i, _ in engine.dense("apples cider", rows, 5, steps=["summaries"])} == {"B", "C"}
