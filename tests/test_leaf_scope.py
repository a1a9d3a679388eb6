"""Leaf-sum bookkeeping extended after a write (search/indexes/leaf_scope.py) against a full build.

Real LanceDB store in a temp dir, real offline embedder. Turns are leaves with chat metadata; a
"context" step stands for each turn (sources = [turn]), as the conversational architecture does.
"""

import numpy as np
import pytest

from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.record_store import RecordStore
from synthex_resources.search import SearchEngine
from synthex_resources.search.indexes.leaf_scope import build_scope, scope_for
from synthex_resources.search.state import SearchSettings
from synthex_resources.search.strategies.builtin import CONVERSATIONAL

TOPICS = ["hiking at the lake", "a zebra finch that sings", "sourdough bread baking", "a broken bicycle chain",
          "the chess tournament", "painting the kitchen", "a trip to Lisbon", "the new puppy"]


def turns(conv: str, session: int, count: int, start_day: int, first: int = 0,
          said: str = "today we talked about") -> list[Record]:
    """Turns of a made-up chat, ``<author>: <said> <topic> (<id>)``; test_search_sidecar says it another way."""
    out = []
    for i in range(first, first + count):
        rid = f"{conv}-s{session}-t{i}"
        topic = TOPICS[(session * 3 + i) % len(TOPICS)]
        author = "Ann" if i % 2 == 0 else "Bob"
        out.append(Record(id=rid, content=f"{author}: {said} {topic} ({rid})", step="turns",
                          period="2023-05", materialization_key=rid,
                          metadata={"chat": {"conversation_id": conv, "session_id": f"s{session}", "author": author},
                                    "time": {"created_at": f"2023-05-{start_day:02d}T10:{i:02d}:00Z"}}))
    return out


def context(leaves: list[Record]) -> list[Record]:
    return [Record(id=f"ctx-{t.id}", content=f"context: {t.content}", step="ctx", period=t.period,
                   materialization_key=f"ctx-{t.id}", source_ids=[t.id], metadata=t.metadata) for t in leaves]


def write(store: RecordStore, leaves: list[Record]) -> None:
    store.records.upsert(leaves)
    store.records.upsert(context(leaves))


def by_ids(scope) -> dict:
    """The scope in terms of ids (positions differ between an extension and a build)."""
    ids = scope.leaf_ids

    def link(a: np.ndarray, i: int) -> str | None:
        return ids[a[i]] if a[i] >= 0 else None

    return {"leaves": sorted(ids),
            "prev": {ids[i]: link(scope.prev, i) for i in range(len(ids))},
            "next": {ids[i]: link(scope.next, i) for i in range(len(ids))},
            "leaves_of": {r: sorted(ids[p] for p in ps) for r, ps in scope.leaves_of.items()},
            "participants": scope.participants, "steps": scope.leaf_steps,
            "times": {ids[i]: scope.times[i] for i in range(len(ids))}}


@pytest.fixture
def store(tmp_path):
    store = RecordStore(str(tmp_path / "store"), search=SearchSettings(scope_incremental_from=0))  # extend at any size
    write(store, turns("c1", 1, 6, 1) + turns("c1", 2, 6, 3) + turns("c2", 1, 5, 2))
    return store


def test_an_extension_after_appends_equals_a_full_build(store):
    engine = SearchEngine(store)
    where = engine.where(["ctx"], BranchScope.own())
    first = scope_for(engine, where)
    cache = store.search_state.scopes
    assert cache.last == "build" and len(first.leaf_ids) == 17
    # a session continued (later turns), a new session, a new conversation; two commits
    write(store, turns("c1", 2, 3, 3, first=6) + turns("c1", 3, 4, 9))
    write(store, turns("c3", 1, 2, 12))
    extended = scope_for(engine, where)
    assert cache.last == "extend" and extended.extended_from is first.leaf_ids
    assert len(extended.leaf_ids) == 17 + 9
    assert by_ids(extended) == by_ids(build_scope(engine.store.read_dataset(), where))
    assert extended.prev[extended.index_of["c1-s2-t6"]] == extended.index_of["c1-s2-t5"]  # linked to the old tail


def test_search_over_an_extended_scope_finds_the_new_turns_as_a_fresh_build_does(store, tmp_path):
    engine = SearchEngine(store)
    query = "what about the Lisbon trip and the puppy"
    engine.search(query, steps=["ctx"], k=5, strategy=CONVERSATIONAL)
    write(store, turns("c1", 3, 6, 9))
    got = engine.search(query, steps=["ctx"], k=5, strategy=CONVERSATIONAL)
    assert store.search_state.scopes.last == "extend"
    fresh = SearchEngine(RecordStore(str(tmp_path / "store"))).search(query, steps=["ctx"], k=5, strategy=CONVERSATIONAL)
    assert [h.id for h in got] == [h.id for h in fresh]
    top = engine.search("today c1 s3 t2", steps=["ctx"], k=1, strategy=CONVERSATIONAL)
    assert top[0].id == "c1-s3-t2"  # a turn written after the bookkeeping was built


def test_deleted_turns_are_never_returned_and_k_hits_still_come_back(store):
    engine = SearchEngine(store)
    query = "today we talked about hiking at the lake"
    before = engine.search(query, steps=["ctx"], k=5, strategy=CONVERSATIONAL)
    assert len(before) == 5
    gone = before[0].id
    store.records.delete_ids([gone, f"ctx-{gone}"])
    after = engine.search(query, steps=["ctx"], k=5, strategy=CONVERSATIONAL)
    assert store.search_state.scopes.last == "extend"
    assert gone not in [h.id for h in after] and len(after) == 5


def test_a_compaction_brings_a_full_build(store):
    engine = SearchEngine(store)
    where = engine.where(["ctx"], BranchScope.own())
    scope_for(engine, where)
    write(store, turns("c1", 3, 2, 9))
    store.records_table().optimize()  # rewrites the fragments
    scope = scope_for(engine, where)
    assert store.search_state.scopes.last == "build" and scope.extended_from is None
    assert "c1-s3-t1" in scope.index_of


def test_small_scopes_are_rebuilt_not_extended(tmp_path):
    store = RecordStore(str(tmp_path / "small"))  # default threshold: thousands of leaves
    write(store, turns("c1", 1, 4, 1))
    engine = SearchEngine(store)
    where = engine.where(["ctx"], BranchScope.own())
    scope_for(engine, where)
    write(store, turns("c1", 1, 2, 1, first=4))
    scope = scope_for(engine, where)
    assert store.search_state.scopes.last == "build" and len(scope.leaf_ids) == 6
