"""Search structures persisted beside the records table, so a freshly opened store does not rebuild them.

A store's derived search structures (the leaf-sum bookkeeping, the multi-hop lexicon, the dense
matrix) are built from every row: at 1M records that took over a minute for the first conversational
query of each process (docs/benchmarks.md). They are saved here after a build or an extension and
loaded by the next process that opens the store.

Layout: ``<store>/_search/<kind>-<digest of the key>.npz`` (numpy arrays, written uncompressed) plus
the same name with ``.json`` (what the arrays were made from). Each save writes both files under
temporary names and renames them into place, the arrays first and the description last, so a reader
never pairs a description with other arrays and a kill leaves either the old pair, the new pair or an
orphan ``.tmp`` that the next save overwrites.

What makes an entry valid is the table it was read from (``TableState``, store/pinned.py: the state of the
same ``PinnedDataset`` the structure was keyed by and read from): the records table's version
and each fragment's data file (fragment ids restart when a table is recreated, its data file names do
not repeat) and deletion file. An entry at the current state is used as it is; one whose fragments are
all still there (rows were only appended or deleted since) is a base the caller may extend; anything
else (compaction, a recreated table) is ignored and overwritten by the next build.

Only local plaintext stores persist: an encrypted store's lexicon would put its words on disk in clear,
and an object store would need a write per build (a remote round trip in the query path). A store on a
read-only disk keeps its structures in memory only. ``clear`` removes the folder (a purge does: the
entries may name purged records) and bumps ``generation``: a builder reads it before reading rows and
passes it to ``save``, which drops an entry built from rows read before the clear.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from synthex_resources.store.pinned import TableState

FOLDER = "_search"
FORMAT = 2  # bumped when what an entry holds changes: older entries are then ignored


@dataclass
class Entry:
    """One persisted structure: what it was built from, its own description, its arrays."""

    state: TableState
    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]


class Sidecar:
    """The ``_search`` folder of one store (``sidecar(store)``); ``folder`` None: nothing persists."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.saves = 0  # entries written by this object (tests watch it)
        # Bumped by ``clear`` (a purge). A structure built from rows read before a purge must not be saved
        # after it (it would put purged words back beside the table): its builder reads the generation
        # when it starts reading rows and passes it to ``save``, which drops the entry if a clear came since.
        self.generation = 0
        self.loads = 0  # entries read by this object
        self._writers: list[threading.Thread] = []
        self._lock = threading.Lock()

    def _paths(self, kind: str, key: str) -> tuple[Path, Path]:
        assert self.folder is not None
        name = f"{kind}-{hashlib.sha256(key.encode()).hexdigest()[:20]}"
        return self.folder / f"{name}.npz", self.folder / f"{name}.json"

    @staticmethod
    def _mapped_path(arrays_path: Path, token: str, name: str) -> Path:
        return arrays_path.with_name(f"{arrays_path.stem}-{token}.{name}.npy")

    def load(self, kind: str, key: str) -> Entry | None:
        """The entry saved for ``key``, or None (none, unreadable, another format or key)."""
        if self.folder is None:
            return None
        arrays_path, meta_path = self._paths(kind, key)
        try:
            meta = json.loads(meta_path.read_text())
            if meta.get("format") != FORMAT or meta.get("key") != key:
                return None
            with np.load(arrays_path, allow_pickle=False) as data:
                if str(data["token"]) != meta["token"]:
                    return None  # the arrays of another save (a kill between the two renames)
                arrays = {name: data[name] for name in data.files}
            for name in meta.get("mapped", []):  # large arrays: mapped, read by the pages a search touches
                arrays[name] = np.load(self._mapped_path(arrays_path, meta["token"], name), mmap_mode="r",
                                       allow_pickle=False)
        except (OSError, ValueError, KeyError, json.JSONDecodeError):
            return None
        self.loads += 1
        return Entry(TableState.from_json(meta["state"]), meta["meta"], arrays)

    def save(self, kind: str, key: str, state: TableState,
             contents: Callable[[], tuple[dict[str, Any], dict[str, np.ndarray]]], background: bool = True,
             mapped: tuple[str, ...] = (), since: int | None = None) -> None:
        """Write the entry for ``key``: ``contents()`` gives its description and arrays (called in a background
        thread unless told otherwise, so the query that built the structure does not wait on its
        serialization; ``wait`` joins it). A failure to write (read-only disk, full disk) leaves the
        structure in memory only. ``mapped``: arrays written to their own ``.npy`` file (named by the save),
        which ``load`` maps instead of reading (the dense matrix: 1.5 GB at 1M records). ``since``: the
        ``generation`` read when the structure's rows were read; the entry is dropped if ``clear`` ran since."""
        if self.folder is None:
            return

        def write() -> None:
            arrays_path, meta_path = self._paths(kind, key)
            token = os.urandom(8).hex()
            meta, arrays = contents()
            try:
                self.folder.mkdir(exist_ok=True)
                for name in mapped:  # named by this save's token: never overwritten while mapped elsewhere
                    np.save(self._mapped_path(arrays_path, token, name), arrays[name], allow_pickle=False)
                small = {name: value for name, value in arrays.items() if name not in mapped}
                tmp_arrays = arrays_path.with_suffix(".npz.tmp")
                with open(tmp_arrays, "wb") as f:
                    np.savez(f, token=np.asarray(token), **small)
                tmp_meta = meta_path.with_suffix(".json.tmp")
                tmp_meta.write_text(json.dumps({"format": FORMAT, "key": key, "token": token, "mapped": list(mapped),
                                                "state": state.to_json(), "meta": meta}))
                with self._lock:  # two saves of one key: each pair renamed whole
                    if since is not None and since != self.generation:  # a purge cleared the folder since
                        for leftover in (tmp_arrays, tmp_meta, *(self._mapped_path(arrays_path, token, name)
                                                                 for name in mapped)):
                            leftover.unlink(missing_ok=True)
                        return
                    os.replace(tmp_arrays, arrays_path)
                    os.replace(tmp_meta, meta_path)
                    self.saves += 1
                    for stale in arrays_path.parent.glob(f"{arrays_path.stem}-*.npy"):
                        if f"-{token}." not in stale.name:  # an earlier save's (a reader's mapping survives)
                            stale.unlink(missing_ok=True)
            except OSError:
                return

        if not background:
            write()
            return
        # not a daemon: a one-off command (`synthex search`) finishes its save before the process exits
        thread = threading.Thread(target=write, name="synthex-search-sidecar", daemon=False)
        with self._lock:
            self._writers = [t for t in self._writers if t.is_alive()] + [thread]
        thread.start()

    def guard(self) -> SaveGuard:
        """This sidecar as a builder sees it before reading rows: saves through the guard are dropped if
        ``clear`` (a purge) runs in between, even when the store has replaced its sidecar since."""
        return SaveGuard(self, self.generation)

    def wait(self) -> None:
        """Join the background saves started so far (tests, benchmarks, a clean shutdown)."""
        with self._lock:
            writers, self._writers = self._writers, []
        for thread in writers:
            thread.join()

    def shutdown(self, wait: bool = False) -> None:  # store.close() calls it
        if wait:
            self.wait()

    def clear(self) -> None:
        """Remove every entry (after a purge: they may name purged records). Saves of structures whose
        rows were read before this call are dropped (``save(since=)``)."""
        with self._lock:
            self.generation += 1
        self.wait()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


@dataclass(frozen=True)
class SaveGuard:
    """``Sidecar.guard()``: the sidecar and its generation when a build started reading rows."""

    sidecar: Sidecar
    since: int

    def save(self, kind: str, key: str, state: TableState,
             contents: Callable[[], tuple[dict[str, Any], dict[str, np.ndarray]]], background: bool = True,
             mapped: tuple[str, ...] = ()) -> None:
        self.sidecar.save(kind, key, state, contents, background=background, mapped=mapped, since=self.since)


def folder_of(store: Any) -> Path | None:
    """Where ``store`` persists its search structures, or None when it should not (see the module doc)."""
    uri = str(store.uri)
    if "://" in uri and not uri.startswith("file://"):
        return None
    if store.cipher is not None:
        return None
    return Path(uri.removeprefix("file://")) / FOLDER


def sidecar(store: Any) -> Sidecar:
    """The store's sidecar (one per store object)."""
    return store.search_state.sidecar
