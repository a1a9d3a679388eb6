"""Issue 32 item 4: a structure a search keeps per table version is made of that version's rows and is saved
with that version's state, while another thread's search reads a newer version (the MCP server's sync
worker writes while its tools search). Real LanceDB in a temp dir, the real offline embedder, one store
object shared by the two threads as the server shares it. The write and the other search land at a known
point of the first search's build (a hook around the leaf bookkeeping's build, the embedder asked for
the word index's vocabulary), on their own thread, joined before the first search goes on.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from test_leaf_scope import turns, write
from test_word_neighbours import CountingEmbedder

from synthex.core.scope import BranchScope
from synthex_resources.record_store import RECORDS, RecordStore
from synthex_resources.search import SearchEngine
from synthex_resources.search.indexes import leaf_scope
from synthex_resources.search.indexes.leaf_scope import scope_for
from synthex_resources.search.indexes.sidecar import TableState, sidecar
from synthex_resources.search.indexes.word_index import word_index
from synthex_resources.search.strategies.builtin import CONVERSATIONAL

MAIN = BranchScope.own()
QUERY = "the chess tournament at the lake"


def turn_ids_at(store: RecordStore, version: int) -> list[str]:
    """The leaves (turns) the table holds at ``version``, read through pylance, not through the store's pin."""
    import lance

    ds = lance.dataset(store.tables.dataset_path(RECORDS), version=version)
    return sorted(ds.to_table(columns=["id"], filter="step = 'turns'").column("id").to_pylist())


def state_at(store: RecordStore, version: int) -> TableState:
    import lance

    return TableState.of(lance.dataset(store.tables.dataset_path(RECORDS), version=version))


def joined(target) -> None:
    """Run ``target`` on a thread of its own and wait for it; what it raised is raised here."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if raised:
        raise raised[0]


def on_another_thread(store: RecordStore, engine: SearchEngine) -> None:
    """A writer's commit, then a search that pins the new version (and opens it), on a thread of their own;
    returns when both are done."""
    def other() -> None:
        write(store, turns("c3", 1, 4, 9, said="yesterday we planned"))
        assert engine.search("planned", ["turns"], MAIN, 3)[0].id.startswith("c3-")  # a new version, read

    joined(other)


def test_every_read_of_a_pinned_search_is_of_its_version_after_another_threads_search_opened_a_newer(tmp_path):
    """The store's reads inside one search (a dataset, filtered rows, the version) stay at its pin after a
    write and another thread's search at the newer version; the write door opens the latest."""
    store = RecordStore(str(tmp_path / "store"))
    write(store, turns("c1", 1, 3, 1))
    where = "step = 'turns'"
    pinned, newer = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def first_search() -> None:
        with store.pinned_version():
            seen["version"] = store.records_read_version()
            pinned.set()
            assert newer.wait(60)
            seen["dataset"] = store.dataset(RECORDS).version
            seen["again"] = store.records_read_version()
            seen["rows"] = sorted(r["id"] for r in store.tables.read(RECORDS, where, ["id"]))
            seen["write door"] = store.records_table().version

    def second_search() -> None:
        with store.pinned_version():
            seen["newer"] = store.records_read_version()  # opens the newer version

    raised: list[BaseException] = []

    def first_thread() -> None:
        try:
            first_search()
        except BaseException as exc:  # noqa: BLE001 - raised in the test's thread below
            raised.append(exc)

    first = threading.Thread(target=first_thread)
    first.start()
    try:
        assert pinned.wait(60)
        write(store, turns("c3", 1, 2, 9))
        joined(second_search)
    finally:
        newer.set()
        first.join()
    if raised:
        raise raised[0]
    version = seen["version"]
    assert seen["newer"] > version
    assert seen["dataset"] == seen["again"] == version
    assert seen["rows"] == turn_ids_at(store, version) == [f"c1-s1-t{i}" for i in range(3)]
    assert seen["write door"] == seen["newer"]


@pytest.mark.parametrize("lands", ["before-rows", "after-rows"])
def test_a_search_keys_and_saves_its_structures_by_the_version_it_read_while_another_thread_reads_a_newer(
        tmp_path, monkeypatch, lands):
    """``before-rows``: the write and the other search land before the first search's leaf bookkeeping reads
    its rows: the bookkeeping (and the multi-hop lexicon made from it) cached under the pinned version holds
    that version's leaves, not the newer version's. ``after-rows``: they land after the rows were read and
    before the save: the saved entry carries the state of the version its rows came from, so a new process
    sees the newer version's turns (an entry claiming the newer fragments would be loaded as it is, without
    them, until a compaction)."""
    store = RecordStore(str(tmp_path / "store"))
    write(store, turns("c1", 1, 6, 1) + turns("c2", 1, 5, 2))
    engine = SearchEngine(store)
    where = engine.where(["ctx"], MAIN)
    real_build = leaf_scope.build_scope
    pinned: list[int] = []

    def build_with_a_write_landing(*args, **kwargs):
        if not pinned:
            pinned.append(store.records_read_version())  # the version this search pinned
            if lands == "before-rows":
                on_another_thread(store, engine)
            built = real_build(*args, **kwargs)
            if lands == "after-rows":
                on_another_thread(store, engine)
            return built
        return real_build(*args, **kwargs)

    monkeypatch.setattr(leaf_scope, "build_scope", build_with_a_write_landing)
    hits = engine.search(QUERY, ["ctx"], MAIN, 5, strategy=CONVERSATIONAL)
    monkeypatch.undo()
    assert pinned and hits
    version = pinned[0]
    latest = store.dataset(RECORDS).version
    assert latest > version  # the write landed during the search
    at_pin = turn_ids_at(store, version)
    assert len(at_pin) == 11 and len(turn_ids_at(store, latest)) == 15
    assert not {h.id for h in hits} - set(at_pin)  # the search's hits are rows of the version it pinned

    scopes = store.search_state.scopes.entries
    assert list(scopes) == [(version, where)]
    assert sorted(scopes[(version, where)].leaf_ids) == at_pin
    lexicons = store.search_state.lexicons.entries
    assert [k[0] for k in lexicons] == [version]
    assert sorted(next(iter(lexicons.values())).leaf_ids) == at_pin

    saved = sidecar(store)
    saved.wait()
    entry = saved.load("leaf_scope", where)
    assert entry is not None and entry.state == state_at(store, version)
    assert sorted(entry.arrays["leaf_ids"].tolist()) == at_pin
    lexicon_entry = next(saved.load("lexicon", k[1]) for k in lexicons)
    assert lexicon_entry is not None and lexicon_entry.state == state_at(store, version)

    # A new process (a fresh store object): the newer version's turns are there, searched and found.
    later = RecordStore(str(tmp_path / "store"))
    fresh = SearchEngine(later)
    assert sorted(scope_for(fresh, where).leaf_ids) == turn_ids_at(store, latest)
    found = fresh.search("yesterday we planned", ["ctx"], MAIN, 4, strategy=CONVERSATIONAL)
    assert {h.id for h in found} == {f"c3-s1-t{i}" for i in range(4)}
    later.close()
    store.close()


def test_the_word_index_is_saved_with_the_state_of_the_version_its_texts_came_from(tmp_path):
    """The embedder, asked for the word index's vocabulary (the texts were read), lets a write and another
    thread's search land: the index cached under the pinned version and the two entries saved beside the
    table (the index, the word vectors) carry that version's state, not the newer one's."""
    landed: list[int] = []

    class WriteLandingEmbedder(CountingEmbedder):
        def embed(self, texts: list[str]) -> np.ndarray:
            if not landed and "lisbon" in texts:  # the vocabulary of the leaves' texts
                landed.append(store.records_read_version())
                on_another_thread(store, engine)
            return super().embed(texts)

    store = RecordStore(str(tmp_path / "store"), embedder=WriteLandingEmbedder())
    write(store, turns("c1", 1, 6, 1) + turns("c2", 1, 5, 2))
    engine = SearchEngine(store)
    where = engine.where(["ctx"], MAIN)
    with store.pinned_version():
        version = store.records_read_version()
        scope = scope_for(engine, where)
        index = word_index(engine, where, scope)
    assert landed == [version] and store.dataset(RECORDS).version > version
    assert list(store.search_state.word_indexes.entries) == [(version, where)]
    assert sorted(index.leaf_ids) == turn_ids_at(store, version) and "planned" not in index.words
    saved = sidecar(store)
    saved.wait()
    for kind, key in (("words", where), ("word-vectors", store.embedder.name)):
        entry = saved.load(kind, key)
        assert entry is not None and entry.state == state_at(store, version), kind
    store.close()
