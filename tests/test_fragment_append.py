"""Records written as Lance fragments by worker processes and committed once (synthex_resources/store/
fragment_append.py): the table two workers leave is the one a single process writes, row for row; a batch
that repeats an id, or holds one the table has, commits nothing."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest

from synthex_resources.store.fragment_append import append_in_workers

SCHEMA = pa.schema([("id", pa.string()), ("content", pa.string())])


def rows(shard: tuple[int, int]) -> pa.Table:
    """Module level: a spawned worker imports it."""
    first, last = shard
    return pa.table({"id": [f"r{i:04d}" for i in range(first, last)],
                     "content": [f"memory {i}" for i in range(first, last)]}, schema=SCHEMA)


def test_two_workers_leave_the_table_one_process_writes(tmp_path):
    shards = [(0, 40), (40, 90), (90, 100)]
    version = append_in_workers(str(tmp_path / "two.lance"), SCHEMA, rows, shards, workers=2)
    assert version == 2  # created (1), then one commit for the whole batch
    one = pa.concat_tables([rows(s) for s in shards])
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
