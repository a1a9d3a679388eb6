"""Id lookups by binary search over persisted sort orders (search/indexes/id_lookup.py), issue 24's cold first query.

The leaf-sum bookkeeping's ``index_of`` / ``leaves_of`` and the dense matrix's id -> row were dicts rebuilt
from 1M entries in every new process; they are arrays now, their sort orders saved beside the table. Real
LanceDB stores in temp dirs, real offline embedder; a store object opened afresh stands for a new process.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from test_leaf_scope import context
from test_search_sidecar import fresh_copy, turns

from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.record_store import RecordStore
from synthex_resources.search import SearchEngine, load_search_strategies
from synthex_resources.search.indexes.dense_index import dense_index
from synthex_resources.search.indexes.id_lookup import (
    GroupLookup,
    IdLookup,
    as_text,
    merged_order,
    sort_order,
)
from synthex_resources.search.indexes.leaf_scope import scope_for
from synthex_resources.search.indexes.sidecar import FOLDER, sidecar
from synthex_resources.search.state import SearchSettings

QUERIES = ["Where did Ann go on her trip?", "What happened to the bicycle chain?", "quokka zoo"]


def test_lookups_answer_as_the_dicts_they_replace():
    rng = np.random.default_rng(7)
    ids = [f"r{x:x}" for x in rng.integers(0, 400, 600)]  # duplicates: the last row of an id wins, as in a dict
    live = rng.random(600) > 0.2
    text = as_text(ids)
    lookup = IdLookup(text, live=live)
    expected = dict(zip((ids[i] for i in np.flatnonzero(live)), np.flatnonzero(live).tolist(), strict=True))
    asked = list(expected) + ["absent", "r" + "f" * 40, ""]  # an id longer than every stored one is absent
    assert lookup.rows(asked).tolist() == [expected.get(k, -1) for k in asked]
    assert [lookup.get(k) for k in asked] == [expected.get(k) for k in asked]
    assert list(lookup) == list(expected) and len(lookup) == len(expected)
    large = IdLookup(text, live=live, dict_from=0)  # "large": a dict is built in the background after a search
    for _ in range(4):  # DICT_AFTER batch lookups by binary search, then the build starts
        assert large._dict_thread is None and large.rows(asked).tolist() == [expected.get(k, -1) for k in asked]
    large.wait_dict()
    assert large._dict is not None and large.rows(asked).tolist() == [expected.get(k, -1) for k in asked]
    assert np.array_equal(sort_order(text), np.argsort(text, kind="stable"))
    more = as_text([f"r{x:x}" for x in rng.integers(0, 800, 50)])
    both = np.concatenate([text, more])
    assert np.array_equal(merged_order(text, sort_order(text), more), np.argsort(both, kind="stable"))

    groups = {f"g{i}": list(range(i % 3 + 1)) for i in range(30)}
    flat = GroupLookup.of(groups)
    keys = ["g3", "nope", "g7", "g3"]
    which, values = flat.pairs(keys)
    assert list(zip(which.tolist(), values.tolist(), strict=True)) == \
        [(i, v) for i, k in enumerate(keys) for v in groups.get(k, [])]
    assert dict(flat.items()) == groups and list(flat.values()) == list(groups.values())
    grown = flat.appended({"h1": [5, 6]})
    assert grown["h1"] == [5, 6] and grown["g2"] == [0, 1, 2] and grown.index.sorts == 0


def searched(store: RecordStore) -> dict[str, list[tuple[str, float]]]:
    engine, conversational = SearchEngine(store), load_search_strategies().get("conversational")
    return {q: [(h.id, round(h.score, 9)) for h in engine.search(q, steps=["ctx"], k=6, strategy=conversational)]
            for q in QUERIES}


def sorted_here(store: RecordStore) -> int:
    """Sort orders this store object computed for its scope's and matrix's lookups (0: all persisted)."""
    engine = SearchEngine(store)
    scope = scope_for(engine, engine.where(["ctx"], BranchScope.own()))
    index = dense_index(store)
    assert index.vectors_of(["ctx-c1-s1-t0"])  # the matrix's lookup, used
    return scope.index_of.sorts + scope.leaves_of.index.sorts + index._current().row_of().sorts


@pytest.fixture(scope="module")
def persisted(tmp_path_factory):
    root = tmp_path_factory.mktemp("id-lookup-store") / "store"
    store = RecordStore(str(root))
    store.records.upsert(leaves := turns("c1", 1, 6, 1) + turns("c2", 1, 5, 2))
    store.records.upsert(context(leaves))
    SearchEngine(store).ensure_index()
    first = searched(store)
    sorted_here(store)
    sidecar(store).wait()
    return root, first


def test_a_new_store_object_reuses_the_persisted_sort_orders(persisted):
    root, first = persisted
    reopened = RecordStore(str(root))
    assert searched(reopened) == first and any(first.values())
    assert reopened.search_state.scopes.last == "load"
    assert sorted_here(reopened) == 0  # every lookup's order came from the sidecar, none was sorted again
    assert sidecar(reopened).saves == 0


def test_a_write_after_persisting_extends_the_lookups_and_finds_the_new_turn(persisted, tmp_path):
    root = fresh_copy(persisted[0], tmp_path / "store")
    shutil.copytree(persisted[0] / FOLDER, root / FOLDER)
    writer = RecordStore(str(root))
    new = turns("c1", 1, 2, 1, first=6) + [Record(
        id="c3-s1-t0", content="Ann: the quokka escaped from the zoo", step="turns", period="2023-05",
        materialization_key="c3-s1-t0", metadata={"chat": {"conversation_id": "c3", "session_id": "s1", "author": "Ann"},
                                                  "time": {"created_at": "2023-05-20T11:00:00Z"}})]
    writer.records.upsert(new)
    writer.records.upsert(context(new))
    SearchEngine(writer).ensure_index()
    reader = RecordStore(str(root), search=SearchSettings(scope_incremental_from=0))  # extend at any size
    got = searched(reader)
    assert reader.search_state.scopes.last == "extend"
    assert got["quokka zoo"][0][0] == "c3-s1-t0"  # the lookups know the written turn
    assert got == searched(RecordStore(str(fresh_copy(root, tmp_path / "exact"))))  # the exact path: built from rows
    assert sorted_here(reader) == 0  # the persisted orders merged with the new ids, not sorted again
    sidecar(reader).wait()
    again = RecordStore(str(root))
    assert searched(again) == got and again.search_state.scopes.last == "load"
