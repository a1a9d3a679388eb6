"""Records written as Lance fragments by worker processes and committed once (synthex_resources/store/
fragment_append.py): the table two workers leave is the one a single process writes, row for row; a batch
that repeats an id, or holds one the table has, commits nothing."""

from __future__ import annotations

import multiprocessing
import os

import lance
import pyarrow as pa
import pytest

from synthex_resources.store.fragment_append import ShardWorker, append_in_workers

SCHEMA = pa.schema([("id", pa.string()), ("content", pa.string())])


def rows(shard: tuple[int, int], worker: ShardWorker) -> pa.Table:
    """Module level: a spawned worker imports it (these rows need nothing the worker keeps)."""
    first, last = shard
    return pa.table({"id": [f"r{i:04d}" for i in range(first, last)],
                     "content": [f"memory {i}" for i in range(first, last)]}, schema=SCHEMA)


def test_two_workers_leave_the_table_one_process_writes(tmp_path):
    shards = [(0, 40), (40, 90), (90, 100)]
    version = append_in_workers(str(tmp_path / "two.lance"), SCHEMA, rows, shards, workers=2)
    assert version == 2  # created (1), then one commit for the whole batch
    one = pa.concat_tables([rows(s, ShardWorker()) for s in shards])
    lance.write_dataset(one, str(tmp_path / "one.lance"), schema=SCHEMA)
    assert lance.dataset(str(tmp_path / "two.lance")).to_table().equals(lance.dataset(str(tmp_path / "one.lance")).to_table())


def test_a_batch_with_a_held_or_repeated_id_commits_nothing(tmp_path):
    uri = str(tmp_path / "t.lance")
    append_in_workers(uri, SCHEMA, rows, [(0, 10)], workers=1)
    with pytest.raises(ValueError, match=r"holds 2 id\(s\) the table has"):
        append_in_workers(uri, SCHEMA, rows, [(8, 20)], workers=1)
    with pytest.raises(ValueError, match="repeats a record id"):
        append_in_workers(uri, SCHEMA, rows, [(10, 15), (14, 16)], workers=1)
    table = lance.dataset(uri)
    assert table.version == 2 and table.count_rows() == 10


class TwoPartError(Exception):
    """An exception whose __init__ takes two arguments: it pickles, but loading it calls __init__ with one."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")


def rows_or_fail(shard: tuple[int, int, str], worker: ShardWorker) -> pa.Table:
    """``rows``, or a shard whose build raises ("raise", "two-part") or whose worker process dies ("die")."""
    first, last, fate = shard
    if fate == "raise":
        raise ValueError(f"shard {first}-{last}: a bad row")
    if fate == "two-part":
        raise TwoPartError("file.json", f"record {first} has no text")
    if fate == "die":
        os._exit(3)
    return rows((first, last), worker)


def test_a_shard_that_raises_or_a_worker_that_dies_commits_nothing_and_the_pool_starts_again(tmp_path):
    """The worker's exception is raised in the caller; a worker that died is one WorkerDiedError; either way
    the pool's processes are stopped and the next append starts a new pool."""
    from synthex_resources.store.fragment_append import IngestWorkers, WorkerDiedError

    uri = str(tmp_path / "t.lance")
    workers = IngestWorkers(2)
    try:
        with pytest.raises(ValueError, match="^shard 10-20: a bad row$"):
            append_in_workers(uri, SCHEMA, rows_or_fail, [(0, 10, ""), (10, 20, "raise")], workers=2,
                              pool=workers.pool())
        with pytest.raises(WorkerDiedError, match=r"^ingest worker \d+ ended \(exit code 3\) before it wrote its "
                                                  r"shard; nothing committed$"):
            append_in_workers(uri, SCHEMA, rows_or_fail, [(0, 10, "die"), (10, 20, "")], workers=2,
                              pool=workers.pool())
        # an exception that pickles but does not load back keeps its message (named, not a TypeError)
        with pytest.raises(RuntimeError, match=r"^TwoPartError: file\.json: record 10 has no text$"):
            append_in_workers(uri, SCHEMA, rows_or_fail, [(0, 10, ""), (10, 20, "two-part")], workers=2,
                              pool=workers.pool())
        assert lance.dataset(uri).count_rows() == 0
        # the killed pools' processes are gone (review finding: asserted, not only seen by hand)
        assert [p.name for p in multiprocessing.active_children() if p.name == "synthex-ingest"] == []
        append_in_workers(uri, SCHEMA, rows_or_fail, [(0, 10, ""), (10, 20, "")], workers=2, pool=workers.pool())
        assert lance.dataset(uri).to_table().equals(pa.concat_tables([rows((0, 20), ShardWorker())]))
    finally:
        workers.close()


def data_files(uri: str) -> set[str]:
    return set(os.listdir(os.path.join(uri, "data")))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_refused_batch_leaves_no_data_file_behind(tmp_path, workers):
    """The workers wrote their fragments before the ids were checked: a refused batch's files are removed
    (no version references them), so the table's folder holds only what its versions use."""
    uri = str(tmp_path / "t.lance")
    append_in_workers(uri, SCHEMA, rows, [(0, 10)], workers=1)
    committed = data_files(uri)
    assert len(committed) == 1
    with pytest.raises(ValueError, match=r"holds 2 id\(s\) the table has"):
        append_in_workers(uri, SCHEMA, rows, [(8, 14), (14, 20)], workers=workers)
    with pytest.raises(ValueError, match="repeats a record id"):
        append_in_workers(uri, SCHEMA, rows, [(10, 15), (14, 16)], workers=workers)
    assert data_files(uri) == committed
    tracked = {p.rsplit("/", 1)[-1] for p in lance.dataset(uri).tracked_files().read_all().column("path").to_pylist()}
    assert committed <= tracked
    append_in_workers(uri, SCHEMA, rows, [(10, 15), (15, 20)], workers=workers)
    assert lance.dataset(uri).count_rows() == 20 and len(data_files(uri)) == 3


@pytest.mark.parametrize("fate", ["raise", "die"])
def test_a_failed_batch_removes_the_shards_written_before_the_failure(tmp_path, fate):
    """One worker writes 10-20, then its next shard raises or the worker dies: the batch commits nothing
    and the first shard's files are removed too."""
    from synthex_resources.store.fragment_append import ShardPool

    uri = str(tmp_path / "t.lance")
    append_in_workers(uri, SCHEMA, rows, [(0, 10)], workers=1)
    committed = data_files(uri)
    with ShardPool(1) as pool, pytest.raises(Exception, match="bad row" if fate == "raise" else "ended"):
        append_in_workers(uri, SCHEMA, rows_or_fail, [(10, 20, ""), (20, 30, fate)], workers=1, pool=pool)
    assert data_files(uri) == committed and lance.dataset(uri).count_rows() == 10
    with pytest.raises(ValueError, match="bad row"):  # in this process alike
        append_in_workers(uri, SCHEMA, rows_or_fail, [(10, 20, ""), (20, 30, "raise")], workers=1)
    assert data_files(uri) == committed


def test_what_a_killed_batch_leaves_the_store_optimize_removes_once_a_week_old(tmp_path):
    """What no one is left to remove (a run killed while its workers wrote): fragments written, never
    committed. The store's ``optimize`` (lance's cleanup without ``delete_unverified``) keeps them while
    younger than 7 days (they may be a writer's in flight) and removes them after; the table's rows stay."""
    import time

    from lance.fragment import write_fragments

    from synthex_resources.store.tables import LanceTable, LanceTables

    tables = LanceTables(str(tmp_path))
    uri = tables.dataset_path("t")
    append_in_workers(uri, SCHEMA, rows, [(0, 10)], workers=1)
    committed = data_files(uri)
    write_fragments(rows((10, 20), ShardWorker()), uri, schema=SCHEMA)  # a killed worker's shard, as it wrote it
    left = data_files(uri) - committed
    assert len(left) == 1 and lance.dataset(uri).count_rows() == 10
    table = LanceTable(tables, "t")
    table.optimize()
    assert data_files(uri) - committed == left  # young: kept
    week_ago = time.time() - 8 * 86400
    for name in left:
        os.utime(os.path.join(uri, "data", name), (week_ago, week_ago))
    table.optimize()
    assert not data_files(uri) & left
    assert lance.dataset(uri).to_table().equals(rows((0, 10), ShardWorker()))
