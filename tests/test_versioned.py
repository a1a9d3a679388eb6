"""The one lifecycle of the search structures (search/indexes/versioned.py ``VersionedStructure``), through a toy
structure a strategy could keep: the sorted ids of one step's rows per table version.

Real LanceDB store in a temp dir, real sidecar. What the base owns is checked here once for every
structure on it: the key (version, key) of the version read, one entry per key (other versions dropped),
an older entry extended by the appended rows, an earlier process's save loaded as it is (not saved again),
the save made with the state of the version the rows came from, a purge during a build dropping the
save, and one instance per store through ``SearchState.structure``.
"""

from typing import Any

import numpy as np
from test_leaf_scope import turns, write

from synthex_resources.record_store import RecordStore
from synthex_resources.search.indexes.sidecar import Entry
from synthex_resources.search.indexes.versioned import EXTEND, LOAD, VersionedStructure
from synthex_resources.store.pinned import PinnedDataset, TableState


class StepIds(VersionedStructure[str, list[str]]):
    """Sorted ids of the rows of step ``key``; appended rows extend it, as ``LeafScopes`` does."""

    kind = "toy_step_ids"
    during_build: Any = None  # called in the middle of a build (a purge landing there)

    def build(self, read: PinnedDataset | None, key: str, context: Any) -> list[str]:
        rows = read.rows(f"step = '{key}'", ["id"]) if read is not None else []
        if self.during_build is not None:
            self.during_build()
        return sorted(r["id"] for r in rows)

    def extend(self, read: PinnedDataset | None, key: str, previous: list[str],
               context: Any) -> tuple[list[str], str] | None:
        if read is None:
            return None
        return sorted({*previous, *(r["id"] for r in read.rows(f"step = '{key}'", ["id"]))}), EXTEND

    def from_entry(self, read: PinnedDataset, key: str, entry: Entry, context: Any) -> tuple[list[str], str] | None:
        return (entry.arrays["ids"].tolist(), LOAD) if entry.state.same_rows(read.state) else None

    def to_entry(self, value: list[str], context: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        return {}, {"ids": np.asarray(value, dtype=str)}


def test_entries_are_keyed_by_the_version_read_extended_saved_and_loaded(tmp_path):
    store = RecordStore(str(tmp_path / "store"))
    write(store, turns("c1", 1, 3, 1))
    ids = store.search_state.structure(StepIds)
    assert store.search_state.structure(StepIds) is ids  # one per store object
    sidecar = store.search_state.sidecar
    first = store.read_dataset()
    got = ids.get(first, "turns")
    assert got == sorted(f"c1-s1-t{i}" for i in range(3)) and ids.last == "build"
    assert ids.get(first, "turns") is got and ids.builds == 1  # cached: not built again
    sidecar.wait()
    saved = sidecar.load("toy_step_ids", "turns")
    assert saved is not None and saved.state == TableState.of(first.dataset)  # the state of the rows read

    write(store, turns("c1", 2, 2, 3))
    second = store.read_dataset()
    assert second.version > first.version
    grown = ids.get(second, "turns")
    assert len(grown) == 5 and ids.last == "extend" and ids.extensions == 1
    assert list(ids.entries) == [(second.version, "turns")]  # the older version dropped
    sidecar.wait()
    saved = sidecar.load("toy_step_ids", "turns")
    assert saved is not None and saved.state == TableState.of(second.dataset)

    later = RecordStore(str(tmp_path / "store"))  # a new process
    loaded = later.search_state.structure(StepIds)
    assert loaded.get(later.read_dataset(), "turns") == grown and loaded.last == "load" and loaded.builds == 0
    later.search_state.sidecar.wait()
    assert later.search_state.sidecar.saves == 0  # loaded as saved: not saved again
    store.close()
    assert store.search_state.structure(StepIds) is not ids  # close drops the structures


def test_a_purge_during_a_build_drops_its_save(tmp_path):
    store = RecordStore(str(tmp_path / "store"))
    write(store, turns("c1", 1, 3, 1))
    ids = store.search_state.structure(StepIds)
    ids.during_build = store.search_state.sidecar.clear  # the purge lands after the rows were read
    assert len(ids.get(store.read_dataset(), "turns")) == 3
    store.search_state.sidecar.wait()
    assert store.search_state.sidecar.load("toy_step_ids", "turns") is None
    ids.during_build = None
    write(store, turns("c2", 1, 2, 5))
    ids.entries.clear()
    assert len(ids.get(store.read_dataset(), "turns")) == 5
    store.search_state.sidecar.wait()
    assert store.search_state.sidecar.load("toy_step_ids", "turns") is not None  # no purge: saved


def test_closing_the_state_drops_its_structures_and_word_vectors(tmp_path):
    store = RecordStore(str(tmp_path / "store"))
    write(store, turns("c1", 1, 3, 1))
    state = store.search_state
    ids = state.structure(StepIds)
    assert len(ids.get(store.read_dataset(), "turns")) == 3
    loads = []
    state.word_vectors("toy-embedder", lambda: loads.append(1) or object())
    state.close()
    assert state.built() == {}
    assert state.structure(StepIds) is not ids  # a new instance: the closed one's entries are gone
    state.word_vectors("toy-embedder", lambda: loads.append(1) or object())
    assert loads == [1, 1]  # loaded again after close
    state.close()
