"""Writers on different branches share one ``records`` table; Lance refuses some concurrent commits
("Retryable commit conflict": a compaction preempted by an update or delete). The store retries
them, so every writer finishes and nothing is lost or duplicated."""

from __future__ import annotations

import multiprocessing
from collections import Counter

import numpy as np
import pytest

from synthex.core.record import Record
from synthex_resources.commits import is_commit_conflict, with_commit_retry
from synthex_resources.record_store import open_store
from synthex_resources.search.engine import SearchEngine

ROUNDS = 12  # without the retry, 25 rounds made 2 of 3 writers fail here; 12 keep the suite short


class TinyEmbedder:
    dim = 4

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), self.dim), dtype=np.float32)


def record(branch: str, n: int, content: str) -> Record:
    return Record(id=f"{branch}-{n}", content=content, step="notes", branch=branch, source_ids=[],
                  period="2024-01")


def write_rounds(uri: str, branch: str, errors) -> None:
    """Upsert, update, delete and compact, as a run's step ops do, many times over."""
    store = open_store(uri, TinyEmbedder())
    try:
        for n in range(ROUNDS):
            store.records.upsert([record(branch, n, f"note {n}"), record(branch, n + 1000, "to delete")])
            store.records.upsert([record(branch, n, f"note {n} revised")])
            store.records.delete_ids([f"{branch}-{n + 1000}"])
            SearchEngine(store).ensure_index(optimize=True)
    except Exception as error:  # reported to the parent: a raw conflict here is the failure under test
        errors.put(f"{branch}: {type(error).__name__}: {error}")
    finally:
        store.close()


def test_concurrent_writers_on_other_branches_all_commit(tmp_path):
    uri = str(tmp_path / "store")
    store = open_store(uri, TinyEmbedder())
    store.records.upsert([record("seed", 0, "seed row")])
    SearchEngine(store).ensure_index()
    ctx = multiprocessing.get_context("spawn")  # Lance is not fork-safe
    errors = ctx.Queue()
    branches = ["main", "exp-a", "exp-b"]
    workers = [ctx.Process(target=write_rounds, args=(uri, b, errors)) for b in branches]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=240)
    reported = []
    while not errors.empty():
        reported.append(errors.get())
    assert reported == [] and all(w.exitcode == 0 for w in workers), reported
    rows = store.tables.read("records", columns=["id", "content"])
    ids = Counter(r["id"] for r in rows)
    assert max(ids.values()) == 1
    expected = {f"{b}-{n}" for b in branches for n in range(ROUNDS)} | {"seed-0"}
    assert set(ids) == expected
    assert all(r["content"].endswith("revised") for r in rows if r["id"] != "seed-0")
    store.close()


def test_retry_runs_the_write_again_only_on_a_conflict():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("lance error: Retryable commit conflict for version 40: ... Please retry.")
        return "committed"

    assert with_commit_retry(flaky, sleep=lambda _: None) == "committed" and len(calls) == 3
    with pytest.raises(ValueError, match="bad filter"):
        with_commit_retry(lambda: (_ for _ in ()).throw(ValueError("bad filter")), sleep=lambda _: None)
    assert not is_commit_conflict(OSError("No such file"))


def test_retry_gives_up_after_its_attempts():
    calls = []

    def always_conflicts():
        calls.append(1)
        raise OSError("Retryable commit conflict for version 7")

    with pytest.raises(OSError, match="commit conflict"):
        with_commit_retry(always_conflicts, attempts=4, sleep=lambda _: None)
    assert len(calls) == 4
