"""Issue 20, reviewed as a hostile user: the holes the first pass left, each with the probe that found it.

- a table source with one row dated past ``future_days`` (by ``updated_at``): its watermark jumped to that
  row's date, so no later insert or update was ever seen by a sync or a sensor again; a row held back
  for its ``created_at`` was never looked at again once its date came near;
- a project whose path holds a quote: the purge's CDC rebuild broke its SQL, and since every run and sync
  first finishes an unfinished purge, the project could not run any more;
- ``remember`` bounded the text only: megabytes rode along in its ``id`` or ``metadata``;
- ``synthex sql`` named a leading comment as the refused statement ("/* statements are refused");
- an oversized stdio MCP request whose string id was longer than 200 characters went unanswered.

Everything in process on tiny real files (SQLite, DuckDB, a stream): no run, no subprocess.
"""

from __future__ import annotations

import io
import json
import sqlite3
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from conftest import load

from synthex import Limits, Pipeline
from synthex.core.errors import BadInputError
from synthex.core.periods import iso
from synthex_resources.cdc_state import CdcState
from synthex_resources.source_sync import commit_changes, detect_changes

# -- a table source with a row from the future ---------------------------------------------------------


def tickets(path: Path, rows: list[tuple[int, str, str, str]]) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.execute("create table tickets(id integer primary key, body text, created_at text, updated_at text)")
    db.executemany("insert into tickets values (?, ?, ?, ?)", rows)
    db.commit()
    return db


def table_pipeline(path: Path, future_days: float = 1.0, created_at: str | None = "created_at") -> Pipeline:
    pipeline = Pipeline("tickets", agent="tester", limits=Limits(future_days=future_days))
    pipeline.source("tickets", table="tickets", dsn=f"sqlite:///{path}", pk="id", updated_at="updated_at",
                    created_at=created_at, text=["body"])
    return pipeline


def sync(pipeline: Pipeline, cdc: CdcState) -> tuple[list[str], list[str]]:
    """One CDC pass as ``synthex sync`` and the sensors make it: (new keys, changed keys)."""
    [change] = detect_changes(pipeline, cdc)
    commit_changes(pipeline, cdc, [change])
    return change.new, change.changed


def now_text(days: float = 0) -> str:
    return iso(datetime.now(UTC) + timedelta(days=days))


def test_a_row_dated_year_9999_by_updated_at_does_not_stop_a_table_syncing(tmp_path):
    db = tickets(tmp_path / "t.sqlite", [(1, "first ticket", None, "2024-01-01T00:00:00Z"),
                                          (2, "from the year 9999", None, "9999-12-31T00:00:00Z")])
    pipeline, cdc = table_pipeline(tmp_path / "t.sqlite", created_at=None), CdcState(duckdb.connect(":memory:"))
    assert sync(pipeline, cdc) == (["1"], [])  # the year-9999 row is held back (its warning names it)
    db.execute("insert into tickets values (3, 'written today', null, ?)", [now_text()])
    db.commit()
    assert sync(pipeline, cdc) == (["3"], [])  # was: nothing new, ever again (the watermark was 9999)
    db.execute("update tickets set body = 'first ticket, edited', updated_at = ? where id = 1", [now_text()])
    db.commit()
    assert sync(pipeline, cdc) == ([], ["1"])  # an update leaves count and max(updated_at) as they were
    assert sync(pipeline, cdc) == ([], [])


def test_a_watermark_past_the_horizon_is_not_kept_even_when_the_row_is_dated_by_created_at(tmp_path):
    db = tickets(tmp_path / "t.sqlite", [(1, "first ticket", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z"),
                                          (2, "clock gone wrong", "2024-01-02T00:00:00Z", "9999-12-31T00:00:00Z")])
    pipeline, cdc = table_pipeline(tmp_path / "t.sqlite"), CdcState(duckdb.connect(":memory:"))
    assert sync(pipeline, cdc) == (["1", "2"], [])
    db.execute("insert into tickets values (3, 'written today', ?, ?)", [now_text(), now_text()])
    db.commit()
    assert sync(pipeline, cdc) == (["3"], [])


def test_a_row_held_back_for_its_created_at_enters_once_its_date_is_near(tmp_path):
    # The held row was updated before the newest row: a watermark that moved on would pass it for good.
    tickets(tmp_path / "t.sqlite", [(1, "in three days", now_text(3), "2024-01-01T00:00:00Z"),
                                    (2, "an old ticket", "2024-05-01T00:00:00Z", "2024-06-01T00:00:00Z")])
    cdc = CdcState(duckdb.connect(":memory:"))
    assert sync(table_pipeline(tmp_path / "t.sqlite"), cdc) == (["2"], [])
    # Three days later, as far as the bound is concerned (nothing in the table changed meanwhile).
    assert sync(table_pipeline(tmp_path / "t.sqlite", future_days=5), cdc) == (["1"], [])
    assert sync(table_pipeline(tmp_path / "t.sqlite", future_days=5), cdc) == ([], [])


# -- the purge's CDC rebuild in a path with a quote ------------------------------------------------------


def test_the_cdc_rebuild_works_in_a_folder_whose_name_holds_a_quote(tmp_path):
    from synthex_resources.residue import rebuild_duckdb

    folder = tmp_path / "it's memory"
    folder.mkdir()
    path = folder / "cdc.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("create table cdc_items(key varchar); insert into cdc_items values ('kept')")
    rebuild_duckdb(path)
    with duckdb.connect(str(path), read_only=True) as conn:
        assert conn.execute("select key from cdc_items").fetchall() == [("kept",)]
    assert sorted(p.name for p in folder.iterdir()) == ["cdc.duckdb"]


# -- remember: the id and metadata are bounded too ------------------------------------------------------


def test_remember_bounds_its_id_and_metadata_like_its_text(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "pipeline.py").write_text(textwrap.dedent('''
        from synthex import Limits, Pipeline

        pipeline = Pipeline("inbox", agent="tester", limits=Limits(remember_bytes=1000))
        pipeline.source("inbox", stream="inbox.jsonl")
    '''))
    pipe = load(root)
    try:
        with pytest.raises(BadInputError) as refused:
            pipe.remember("short", metadata={"blob": "A" * 2000})
        assert str(refused.value).startswith("remember: refused: its id and metadata (as JSON) are 2,")
        assert "over the remember_bytes bound of 1,000 bytes" in str(refused.value)
        with pytest.raises(BadInputError, match="its id and metadata"):
            pipe.remember("short", id="I" * 2000)
        assert not (root / "inbox.jsonl").exists()
        pipe.remember("short", id="mine", metadata={"topic": "ok"})
        [line] = (root / "inbox.jsonl").read_text().splitlines()
        assert json.loads(line)["metadata"] == {"topic": "ok"}
    finally:
        pipe.close()


# -- synthex sql: the refused statement is named, not the comment before it ------------------------------


def test_a_refusal_names_the_statement_behind_a_leading_comment(tmp_path):
    from synthex_resources.sql import SANDBOX_REASON, SqlConsole

    with SqlConsole(str(tmp_path / "store")) as console:
        for sql, word in [("/* hi */ attach 'x.db'", "ATTACH"), ("-- a note\ninstall httpfs", "INSTALL"),
                          ("  /* a */ -- b\n load httpfs", "LOAD")]:
            with pytest.raises(BadInputError) as refused:
                console.query(sql)
            assert str(refused.value) == (f"synthex sql is read-only: {word} statements are refused "
                                          f"({SANDBOX_REASON})"), sql
    assert not (tmp_path / "x.db").exists()


# -- MCP over stdio: an oversized request with a long string id is answered ------------------------------


@pytest.mark.parametrize("id_first", [True, False])
def test_an_oversized_stdio_request_with_a_long_string_id_is_answered(id_first):
    from synthex.surfaces.mcp_server import BoundedStdin

    said: list[str] = []
    pump = BoundedStdin(limit=1000, log=said.append)
    request_id = 'a"' + "x" * 300  # a quote inside, and longer than the 200 characters once looked for
    params = {"name": "remember", "arguments": {"text": "y" * 5000, "id": 99}}
    fields = [("id", request_id), ("jsonrpc", "2.0"), ("method", "tools/call"), ("params", params)]
    line = (json.dumps(dict(fields if id_first else fields[1:] + fields[:1])) + "\n").encode()
    answer = pump._refusal(line[:1001], io.BytesIO(line[1001:]))
    request = json.loads(answer)
    assert request["id"] == request_id and "mcp_request_bytes" in request["method"]
    assert pump.refused == 1 and len(said) == 1
