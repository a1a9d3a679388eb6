"""Rows appended to a saved dense matrix go to the tail of its mapped file (search/indexes/dense_index.py, issue 24).

Real LanceDB stores in temp dirs. A store object opened afresh on the same folder stands for a new process:
after a write it must map the saved base and the tail a writer appended to it, without rebuilding the
matrix or copying the base into memory (counted: ``base_copies``, ``tail_rows_written``, the sidecar's
saves), and rank exactly as a full load of the table does.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.record_store import RecordStore
from synthex_resources.search.indexes.dense_index import dense_index
from synthex_resources.search.indexes.sidecar import FOLDER, sidecar

SCOPE = BranchScope.own()
DIM = 384


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def records(vectors: np.ndarray, offset: int) -> list[Record]:
    return [Record(id=f"r{offset + i:05d}", content=f"record {offset + i}", step="turns", branch="main",
                   period="2024-01", materialization_key=f"r{offset + i:05d}", embedding=v.tolist())
            for i, v in enumerate(vectors)]


def search(store: RecordStore, q: np.ndarray) -> list[tuple[str, float]]:
    return [(rid, s) for rid, s, _ in dense_index(store).search(q, ["turns"], SCOPE, None, 15)]


def exact(root: Path, tmp: Path, q: np.ndarray) -> list[tuple[str, float]]:
    """The exact path: the table alone (nothing persisted beside it), its matrix loaded from the rows."""
    copy = tmp / f"exact-{len(list(tmp.glob('exact-*')))}"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(FOLDER))
    store = RecordStore(str(copy))
    got = search(store, q)
    assert dense_index(store).last_update == "load"
    return got


def saved_rows(root: Path) -> int:
    """Rows the saved matrix's vector file holds by its header (base + committed tail)."""
    (path,) = list(root.glob(f"{FOLDER}/dense-*.vectors.npy"))
    return int(np.load(path, mmap_mode="r").shape[0])


@pytest.fixture()
def saved(tmp_path) -> tuple[Path, np.random.Generator]:
    """A store of 400 records whose matrix was loaded once and saved beside the table."""
    rng = np.random.default_rng(11)
    root = tmp_path / "store"
    first = RecordStore(str(root))
    first.records.upsert(records(unit(rng.standard_normal((400, DIM))), 0))
    search(first, unit(rng.standard_normal(DIM)))
    assert dense_index(first).last_update == "load"
    sidecar(first).wait()
    assert saved_rows(root) == 400
    return root, rng


def test_a_new_store_object_maps_the_saved_base_and_tail_without_copying(saved, tmp_path) -> None:
    root, rng = saved
    q = unit(rng.standard_normal(DIM))
    fresh = unit(rng.standard_normal((50, DIM)))
    fresh[7] = q  # the best match is a tail row
    RecordStore(str(root)).records.upsert(records(fresh, 400))

    writer = RecordStore(str(root))  # the first process after the write: appends the tail to the saved file
    got = search(writer, q)
    index = dense_index(writer)
    assert (index.last_update, index.tail_rows_written, index.base_copies) == ("persisted+append", 50, 0)
    assert saved_rows(root) == 450 and sidecar(writer).saves == 0  # extended in place, not saved again

    reader = RecordStore(str(root))  # the next process: the tail is already there, nothing written or copied
    assert search(reader, q) == got
    index = dense_index(reader)
    assert (index.last_update, index.tail_rows_written, index.base_copies) == ("persisted+append", 0, 0)
    assert sidecar(reader).saves == 0 and saved_rows(root) == 450
    assert got[0][0] == "r00407" and got == exact(root, tmp_path, q)
    ids, sims, _ = index.scores(q, ["turns"], SCOPE, None)
    assert len(ids) == 450 and dict(zip(ids.tolist(), sims.tolist(), strict=True))["r00407"] == pytest.approx(1.0)

    # a write in this process: appended to the file's tail too (the in-memory tail of a mapped matrix)
    more = unit(rng.standard_normal((30, DIM)))
    more[3] = q
    reader.records.upsert(records(more, 450))
    got = search(reader, q)
    assert (index.last_update, index.tail_rows_written, index.base_copies) == ("append", 30, 0)
    assert saved_rows(root) == 480 and got == exact(root, tmp_path, q) and got[0][0] in {"r00407", "r00453"}
    again = RecordStore(str(root))
    assert search(again, q) == got and dense_index(again).base_copies == 0


def test_a_killed_append_and_another_versions_tail_leave_rankings_exact(saved, tmp_path) -> None:
    root, rng = saved
    (path,) = list((root / FOLDER).glob("dense-*.vectors.npy"))
    # what a kill between writing the rows and committing the header leaves: bytes past the header's count
    with open(path, "ab") as f:
        f.write(b"\x7f" * (DIM * 4 * 20))
    table = root / "records.lance"
    before = tmp_path / "table-before"
    shutil.copytree(table, before)
    q = unit(rng.standard_normal(DIM))
    RecordStore(str(root)).records.upsert(records(unit(rng.standard_normal((20, DIM))), 400))
    writer = RecordStore(str(root))
    search(writer, q)
    assert (dense_index(writer).tail_rows_written, dense_index(writer).base_copies) == (20, 0)  # over the garbage
    assert saved_rows(root) == 420

    # the table put back as it was and other rows appended: the file's tail holds another version's rows,
    # which are never rewritten (another process may map them); this process copies instead
    shutil.rmtree(table)
    shutil.copytree(before, table)
    other = unit(rng.standard_normal((20, DIM)))
    other[0] = q
    RecordStore(str(root)).records.upsert(records(other, 400))
    reader = RecordStore(str(root))
    got = search(reader, q)
    index = dense_index(reader)
    assert (index.last_update, index.tail_rows_written, index.base_copies) == ("persisted+append", 0, 1)
    assert saved_rows(root) == 420 and got[0][0] == "r00400" and got == exact(root, tmp_path, q)


def test_deletes_mark_rows_dead_and_a_compaction_rebuilds(saved, tmp_path) -> None:
    root, rng = saved
    q = unit(rng.standard_normal(DIM))
    fresh = unit(rng.standard_normal((40, DIM)))
    fresh[5] = q
    store = RecordStore(str(root))
    store.records.upsert(records(fresh, 400))
    search(RecordStore(str(root)), q)  # the tail written
    assert saved_rows(root) == 440  # appended to the saved file, not a copy
    store.records.delete_ids(["r00010", "r00020"])  # rows of the base: marked dead, the tail still mapped
    reader = RecordStore(str(root))
    got = search(reader, q)
    index = dense_index(reader)
    assert (index.last_update, index.tail_rows_written, index.base_copies) == ("persisted+append", 0, 0)
    assert "r00010" not in {rid for rid, _ in got} and got == exact(root, tmp_path, q)
    assert len(index.scores(q, ["turns"], SCOPE, None)[0]) == 438

    # a row of the tail deleted: the table's rows no longer match the file's tail, which is never rewritten,
    # so a new process copies the matrix as before (until a compaction saves a new file)
    store.records.delete_ids(["r00405"])
    reader = RecordStore(str(root))
    got = search(reader, q)
    index = dense_index(reader)
    assert (index.last_update, index.tail_rows_written, index.base_copies) == ("persisted+append", 0, 1)
    assert "r00405" not in {rid for rid, _ in got} and got == exact(root, tmp_path, q)

    store.records_table().optimize()  # compaction rewrites fragments: the matrix is loaded and saved again
    compacted = RecordStore(str(root))
    assert search(compacted, q) == got
    assert dense_index(compacted).last_update == "load"
    sidecar(compacted).wait()
    assert saved_rows(root) == 437  # a new file of the live rows
    after = RecordStore(str(root))
    assert search(after, q) == got and dense_index(after).last_update == "persisted"
