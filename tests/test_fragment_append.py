"""Records written as Lance fragments by worker processes and committed once (synthex_resources/store/
fragment_append.py): the table two workers leave is the one a single process writes, row for row; a batch
that repeats an id, or holds one the table has, commits nothing."""

from __future__ import annotations

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


def rows_or_fail(shard: tuple[int, int, str], worker: ShardWorker) -> pa.Table:
    """``rows``, or a shard whose build raises ("raise") or whose worker process dies ("die")."""
    first, last, fate = shard
    if fate == "raise":
        raise ValueError(f"shard {first}-{last}: a bad row")
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
        assert lance.dataset(uri).count_rows() == 0
        append_in_workers(uri, SCHEMA, rows_or_fail, [(0, 10, ""), (10, 20, "")], workers=2, pool=workers.pool())
        assert lance.dataset(uri).to_table().equals(pa.concat_tables([rows((0, 20), ShardWorker())]))
    finally:
        workers.close()
