"""Table sources (synthex.core.importers.tables): rows of a DuckDB or SQLite table as source items, change
tokens, the watermark mode and one-line errors, on real database files."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from synthex.core.errors import SourceError
from synthex.core.importers import tables
from synthex.core.importers.tables import (
    TableSpec,
    read_changed,
    read_items,
    read_token,
    row_hash,
    table_path,
)

KINDS = ("duckdb", "sqlite")
ROWS = [
    (1, "First", "hello world", "2024-01-05 10:00:00", "2023-12-31 23:00:00"),
    (2, "Second", None, "2024-02-01 00:00:00", "2024-01-15 08:30:00"),
    (3, "Third", "multi\nline", "2024-03-01 12:00:00", "2024-03-01 09:00:00"),
]


def make(tmp_path: Path, kind: str, rows=ROWS, name: str = "db", table: str = "notes",
         schema: str = "id INTEGER, title VARCHAR, body VARCHAR, updated TIMESTAMP, created TIMESTAMP") -> str:
    """A database file with one table; returns its dsn (relative to tmp_path)."""
    path = tmp_path / f"{name}.{kind}"
    q = '"' + table.replace('"', '""') + '"'
    if kind == "duckdb":
        conn = duckdb.connect(str(path))
    else:
        conn = sqlite3.connect(path)
        schema = schema.replace("VARCHAR", "TEXT")  # keep SQLite's affinities plain
    conn.execute(f"CREATE TABLE IF NOT EXISTS {q} ({schema})")
    if rows:
        marks = ", ".join("?" * len(rows[0]))
        conn.executemany(f"INSERT INTO {q} VALUES ({marks})", rows)
    if kind == "sqlite":
        conn.commit()
    conn.close()
    return f"{kind}:///{name}.{kind}"


def execute(tmp_path: Path, kind: str, sql: str, params=(), name: str = "db") -> None:
    path = tmp_path / f"{name}.{kind}"
    conn = duckdb.connect(str(path)) if kind == "duckdb" else sqlite3.connect(path)
    conn.execute(sql, list(params))
    if kind == "sqlite":
        conn.commit()
    conn.close()


def one_line(call, *args) -> str:
    with pytest.raises(SourceError) as info:
        call(*args)
    message = str(info.value)
    assert "\n" not in message and message.strip() == message, message
    return message


# -- the dsn --------------------------------------------------------------------------------------------------


def test_table_path_resolves_relative_and_absolute_paths(tmp_path):
    assert table_path(TableSpec("duckdb:///data/app.duckdb", "t", "id"), tmp_path) == tmp_path / "data/app.duckdb"
    assert table_path(TableSpec(f"sqlite:///{tmp_path}/app.db", "t", "id"), "/elsewhere") == tmp_path / "app.db"
    assert table_path(TableSpec("SQLITE:///a.db", "t", "id"), tmp_path) == tmp_path / "a.db"
    assert table_path(TableSpec("sqlite:///~/a.db", "t", "id"), tmp_path) == Path.home() / "a.db"


@pytest.mark.parametrize("dsn,expected", [
    ("postgres:///x.db", "unknown database scheme 'postgres'"),
    ("app.duckdb", "unknown database scheme ''"),
    ("duckdb:app.duckdb", "unknown database scheme ''"),
    ("duckdb://host/app.duckdb", "malformed dsn"),
    ("sqlite:///", "malformed dsn"),
    ("duckdb:///:memory:", "malformed dsn"),
])
def test_a_malformed_dsn_is_one_line(tmp_path, dsn, expected):
    message = one_line(table_path, TableSpec(dsn, "t", "id"), tmp_path)
    assert expected in message and dsn in message
    assert one_line(read_items, TableSpec(dsn, "t", "id"), tmp_path) == message


def test_a_spec_with_wrong_types_is_one_line():
    assert "'pk' is missing" in one_line(TableSpec, "duckdb:///a.duckdb", "t", None)
    assert "'table' is a number 3" in one_line(TableSpec, "duckdb:///a.duckdb", 3, "id")
    assert "'updated_at' is a string ''" in one_line(lambda: TableSpec("duckdb:///a", "t", "id", updated_at=""))
    assert "'text' is a list" in one_line(lambda: TableSpec("duckdb:///a", "t", "id", text=["a", 1]))
    assert TableSpec("duckdb:///a", "t", "id", text="body").text == ("body",)
    assert TableSpec("duckdb:///a", "t", "id", text=["a", "b"]).text == ("a", "b")
    hash(TableSpec("duckdb:///a", "t", "id", text=["a", "b"]))  # frozen and hashable


# -- items ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_read_items_renders_rows_and_dates_them(tmp_path, kind):
    dsn = make(tmp_path, kind)
    items = read_items(TableSpec(dsn, "notes", "id", updated_at="updated", created_at="created"), tmp_path)
    assert [i.key for i in items] == ["1", "2", "3"]
    first = items[0]
    assert first.content == "title: First\nbody: hello world"  # pk and dating columns are not text
    assert items[1].content == "title: Second"  # NULL left out
    assert items[2].content == "title: Third\nbody: multi\nline"
    assert [i.created_at for i in items] == ["2023-12-31T23:00:00Z", "2024-01-15T08:30:00Z", "2024-03-01T09:00:00Z"]
    assert first.metadata["time"] == {"created_at": "2023-12-31T23:00:00Z"}
    assert first.metadata["source"] == {"type": kind, "table": "notes", "pk": "id"}
    row = first.metadata["row"]
    assert row["id"] == 1 and row["title"] == "First" and row["body"] == "hello world"
    assert row["updated"] in ("2024-01-05T10:00:00", "2024-01-05 10:00:00")  # DuckDB: a timestamp; SQLite: text
    assert all(i.warnings == [] for i in items)


@pytest.mark.parametrize("kind", KINDS)
def test_dating_rules(tmp_path, kind):
    dsn = make(tmp_path, kind)
    by_updated = read_items(TableSpec(dsn, "notes", "id", updated_at="updated"), tmp_path)
    assert [i.created_at for i in by_updated] == ["2024-01-05T10:00:00Z", "2024-02-01T00:00:00Z", "2024-03-01T12:00:00Z"]
    assert "created: 2023-12-31" in by_updated[0].content  # not a dating column here: rendered as text
    undated = read_items(TableSpec(dsn, "notes", "id"), tmp_path)
    assert {i.created_at for i in undated} == {"1970-01-01T00:00:00Z"}  # one period: 1970-01
    assert all(i.warnings == [] for i in undated)
    # a NULL created_at falls back to updated_at; both NULL: 1970 with a warning
    execute(tmp_path, kind, "UPDATE notes SET created = NULL WHERE id = 2")
    execute(tmp_path, kind, "UPDATE notes SET created = NULL, updated = NULL WHERE id = 3")
    items = read_items(TableSpec(dsn, "notes", "id", updated_at="updated", created_at="created"), tmp_path)
    assert [i.created_at for i in items][1:] == ["2024-02-01T00:00:00Z", "1970-01-01T00:00:00Z"]
    assert items[1].warnings == []
    assert items[2].warnings == [f"{dsn} table 'notes' row id=3: 'created' and 'updated' are null; "
                                 "dated 1970-01-01T00:00:00Z"]


@pytest.mark.parametrize("kind", KINDS)
def test_epoch_numbers_iso_text_and_dates_all_date_a_row(tmp_path, kind):
    rows = [(1, "a", 1709294400, "2024-03-01T12:00:00+02:00"), (2, "b", 1709294400.5, "2024-03-01")]
    dsn = make(tmp_path, kind, rows, schema="id INTEGER, body VARCHAR, epoch DOUBLE, iso VARCHAR")
    by_epoch = read_items(TableSpec(dsn, "notes", "id", created_at="epoch"), tmp_path)
    assert [i.created_at for i in by_epoch] == ["2024-03-01T12:00:00Z", "2024-03-01T12:00:00Z"]
    by_iso = read_items(TableSpec(dsn, "notes", "id", created_at="iso"), tmp_path)
    assert [i.created_at for i in by_iso] == ["2024-03-01T10:00:00Z", "2024-03-01T00:00:00Z"]


def test_duckdb_types_render_as_text_and_json(tmp_path):
    path = tmp_path / "types.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("""CREATE TABLE t AS SELECT 'k1' AS key, DATE '2024-05-06' AS day, TIMESTAMPTZ '2024-05-06 10:00:00+02'
                    AS at, 1.50::DECIMAL(5,2) AS price, true AS done, [1, 2] AS nums, {'a': 'x'} AS obj,
                    'ab'::BLOB AS raw, 'cafe'::VARCHAR AS "Note" """)
    conn.close()
    [item] = read_items(TableSpec("duckdb:///types.duckdb", "t", "KEY", created_at="day"), tmp_path)
    assert item.key == "k1" and item.created_at == "2024-05-06T00:00:00Z"
    assert item.content.splitlines() == ["at: 2024-05-06T08:00:00+00:00", "price: 1.50", "done: true",
                                         "nums: [1, 2]", 'obj: {"a": "x"}', "Note: cafe"]
    assert item.warnings == ["duckdb:///types.duckdb table 't' row KEY=k1: column 'raw' is binary (2 bytes); "
                             "left out of the text"]
    row = item.metadata["row"]
    assert row["price"] == "1.50" and row["day"] == "2024-05-06" and row["obj"] == {"a": "x"} and "raw" not in row
    # an explicit text tuple keeps its own order; names match case-insensitively
    [item] = read_items(TableSpec("duckdb:///types.duckdb", "t", "key", text=("note", "done")), tmp_path)
    assert item.content == "Note: cafe\ndone: true"


def test_sqlite_text_that_is_not_utf8_is_repaired_with_a_warning(tmp_path):
    dsn = make(tmp_path, "sqlite", rows=None, schema="id INTEGER, body TEXT")
    execute(tmp_path, "sqlite", "INSERT INTO notes VALUES (1, CAST(X'41FF42' AS TEXT)), (2, 'fine')")
    items = read_items(TableSpec(dsn, "notes", "id"), tmp_path)
    assert [i.content for i in items] == ["body: A\ufffdB", "body: fine"]
    assert items[0].warnings and "U+FFFD" in items[0].warnings[-1] and items[1].warnings == []


@pytest.mark.parametrize("kind", KINDS)
def test_identifiers_are_quoted(tmp_path, kind):
    dsn = make(tmp_path, kind, rows=[(1, "x")], table='we"ird table', schema='"the id" INTEGER, "bo""dy" VARCHAR')
    [item] = read_items(TableSpec(dsn, 'we"ird table', "the id"), tmp_path)
    assert item.content == 'bo"dy: x'
    message = one_line(read_items, TableSpec(dsn, 'we"ird table; DROP TABLE "we""ird table"', "the id"), tmp_path)
    assert "no table" in message
    assert read_items(TableSpec(dsn, 'we"ird table', "the id"), tmp_path) == [item]


def test_row_hash_is_sha256_of_content_and_created_at(tmp_path):
    dsn = make(tmp_path, "sqlite")
    first = read_items(TableSpec(dsn, "notes", "id", updated_at="updated"), tmp_path)[0]
    assert row_hash(first) == hashlib.sha256(f"{first.content}\x00{first.created_at}".encode()).hexdigest()
    execute(tmp_path, "sqlite", "UPDATE notes SET updated = '2024-01-06' WHERE id = 1")
    moved = read_items(TableSpec(dsn, "notes", "id", updated_at="updated"), tmp_path)[0]
    assert moved.content == first.content and row_hash(moved) != row_hash(first)


# -- change tokens ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["watermark", "hash"])
def test_read_token_changes_with_the_rows(tmp_path, kind, mode):
    dsn = make(tmp_path, kind)
    spec = TableSpec(dsn, "notes", "id", updated_at="updated" if mode == "watermark" else None)
    tokens = [read_token(spec, tmp_path)]
    assert read_token(spec, tmp_path) == tokens[0]  # nothing changed
    execute(tmp_path, kind, "INSERT INTO notes VALUES (4, 'Fourth', 'new', '2024-04-01 00:00:00', NULL)")
    tokens.append(read_token(spec, tmp_path))
    execute(tmp_path, kind, "UPDATE notes SET body = 'edited', updated = '2024-04-02 00:00:00' WHERE id = 2")
    tokens.append(read_token(spec, tmp_path))
    execute(tmp_path, kind, "DELETE FROM notes WHERE id = 1")
    tokens.append(read_token(spec, tmp_path))
    assert len(set(tokens)) == 4, tokens
    assert read_token(spec, tmp_path) == tokens[-1]
    other = TableSpec(dsn, "notes", "id", updated_at=spec.updated_at, text=("body",))
    assert read_token(other, tmp_path) != tokens[-1]  # another spec is another token


@pytest.mark.parametrize("kind", KINDS)
def test_the_hash_token_ignores_row_order_and_sees_an_edit_without_a_new_timestamp(tmp_path, kind):
    spec_a = TableSpec(make(tmp_path, kind, ROWS, name="a"), "notes", "id")
    spec_b = TableSpec(make(tmp_path, kind, ROWS[::-1], name="b"), "notes", "id")
    assert read_token(spec_a, tmp_path) == read_token(spec_b, tmp_path)
    execute(tmp_path, kind, "UPDATE notes SET body = 'hello World' WHERE id = 1", name="b")
    assert read_token(spec_a, tmp_path) != read_token(spec_b, tmp_path)
    # a swap of two rows' texts keeps the multiset of texts but not the rows: the token sees it
    execute(tmp_path, kind, "UPDATE notes SET body = 'hello world' WHERE id = 1", name="b")
    execute(tmp_path, kind, "UPDATE notes SET title = CASE id WHEN 1 THEN 'Third' WHEN 3 THEN 'First' END "
                            "WHERE id IN (1, 3)", name="b")
    assert read_token(spec_a, tmp_path) != read_token(spec_b, tmp_path)


# -- the watermark mode -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_read_changed_watermark_semantics(tmp_path, kind):
    dsn = make(tmp_path, kind)
    spec = TableSpec(dsn, "notes", "id", updated_at="updated")
    items, pks, mark = read_changed(spec, tmp_path, None)
    assert [i.key for i in items] == pks == ["1", "2", "3"]
    assert mark is not None and mark.startswith("2024-03-01") and "12:00:00" in mark
    assert items == read_items(spec, tmp_path)
    # nothing changed: the rows at the watermark itself (>=) come back, the caller's row_hash drops them
    items, pks, again = read_changed(spec, tmp_path, mark)
    assert [i.key for i in items] == ["3"] and pks == ["1", "2", "3"] and again == mark
    # an update and an insert move the watermark; a delete shows in pks
    execute(tmp_path, kind, "UPDATE notes SET body = 'edited', updated = '2024-04-01 00:00:00' WHERE id = 1")
    execute(tmp_path, kind, "INSERT INTO notes VALUES (7, 'Seventh', 'x', '2024-03-15 00:00:00', NULL)")
    execute(tmp_path, kind, "DELETE FROM notes WHERE id = 2")
    items, pks, newer = read_changed(spec, tmp_path, mark)
    assert [i.key for i in items] == ["1", "3", "7"] and pks == ["1", "3", "7"]
    assert newer.startswith("2024-04-01") and items[0].content.startswith("title: First\nbody: edited\n")
    # a row without updated_at is read on every call (it could never be seen otherwise)
    execute(tmp_path, kind, "INSERT INTO notes VALUES (8, 'Eighth', 'y', NULL, NULL)")
    items, pks, _ = read_changed(spec, tmp_path, newer)
    assert [i.key for i in items] == ["1", "8"] and pks == ["1", "3", "7", "8"]
    # an empty table keeps the old watermark
    execute(tmp_path, kind, "DELETE FROM notes")
    assert read_changed(spec, tmp_path, newer) == ([], [], newer)
    assert read_changed(spec, tmp_path, None) == ([], [], None)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("column_type", ["BIGINT", "VARCHAR", ""])  # "": SQLite without affinity
def test_read_changed_on_epoch_and_text_watermarks(tmp_path, kind, column_type):
    if kind == "duckdb" and not column_type:
        pytest.skip("DuckDB columns always have a type")
    values = [1700000000, 1700000100, 999999999] if column_type != "VARCHAR" else ["2023-11-14T22:13:20Z",
                                                                                   "2023-11-14T22:15:00Z",
                                                                                   "2001-09-09T01:46:39Z"]
    rows = [(i + 1, f"text {i}", v) for i, v in enumerate(values)]
    dsn = make(tmp_path, kind, rows, schema=f"id INTEGER, body VARCHAR, stamp {column_type}".rstrip())
    spec = TableSpec(dsn, "notes", "id", updated_at="stamp")
    _, _, mark = read_changed(spec, tmp_path, None)
    assert mark == str(values[1])
    items, pks, same = read_changed(spec, tmp_path, mark)
    assert [i.key for i in items] == ["2"] and pks == ["1", "2", "3"] and same == mark
    assert items[0].created_at.startswith("2023-11-14T22:1")


def test_read_changed_needs_a_watermark_column(tmp_path):
    dsn = make(tmp_path, "duckdb")
    message = one_line(read_changed, TableSpec(dsn, "notes", "id"), tmp_path, None)
    assert "table 'notes'" in message and "updated_at" in message


# -- errors: one line naming the dsn, the table and the column ----------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_missing_table_and_columns_are_one_line(tmp_path, kind):
    dsn = make(tmp_path, kind)
    message = one_line(read_items, TableSpec(dsn, "note", "id"), tmp_path)
    assert message == f"{dsn}: no table 'note' (tables: notes)"
    columns = "columns: id, title, body, updated, created"
    for spec, column, role in [
        (TableSpec(dsn, "notes", "uid"), "uid", "primary-key"),
        (TableSpec(dsn, "notes", "id", updated_at="changed"), "changed", "updated_at"),
        (TableSpec(dsn, "notes", "id", created_at="born"), "born", "created_at"),
        (TableSpec(dsn, "notes", "id", text=("title", "summary")), "summary", "text"),
    ]:
        for call in (read_items, read_token):
            message = one_line(call, spec, tmp_path)
            assert message == f"{dsn} table 'notes': no column '{column}' (the {role} column; {columns})"
    message = one_line(read_changed, TableSpec(dsn, "notes", "id", updated_at="changed"), tmp_path, None)
    assert "no column 'changed'" in message


@pytest.mark.parametrize("kind", KINDS)
def test_null_and_duplicate_primary_keys_are_one_line(tmp_path, kind):
    dsn = make(tmp_path, kind)
    spec = TableSpec(dsn, "notes", "id", updated_at="updated")
    execute(tmp_path, kind, "INSERT INTO notes VALUES (2, 'again', NULL, '2024-05-01 00:00:00', NULL)")
    message = one_line(read_items, spec, tmp_path)
    assert message == f"{dsn} table 'notes': two rows share the primary key 'id' = '2'"
    assert one_line(read_changed, spec, tmp_path, "2024-04-01 00:00:00") == message  # all pks are checked
    execute(tmp_path, kind, "DELETE FROM notes WHERE title = 'again'")
    execute(tmp_path, kind, "INSERT INTO notes VALUES (NULL, 'nobody', NULL, NULL, NULL)")
    message = one_line(read_items, spec, tmp_path)
    assert message == f"{dsn} table 'notes': a row has NULL in the primary-key column 'id'"


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_dating_value_is_one_line(tmp_path, kind):
    dsn = make(tmp_path, kind, [(1, "a", "yesterday\nmorning"), (2, "b", "-1")],
               schema="id INTEGER, body VARCHAR, stamp VARCHAR")
    message = one_line(read_items, TableSpec(dsn, "notes", "id", created_at="stamp"), tmp_path)
    assert message.startswith(f"{dsn} table 'notes' row id=1: 'stamp' is a string 'yesterday\\nmorning', "
                              "not a timestamp")
    execute(tmp_path, kind, "DELETE FROM notes WHERE id = 1")
    assert "negative epoch" in one_line(read_items, TableSpec(dsn, "notes", "id", updated_at="stamp"), tmp_path)


@pytest.mark.parametrize("kind", KINDS)
def test_files_that_are_not_databases_are_one_line(tmp_path, kind):
    other = "sqlite" if kind == "duckdb" else "duckdb"
    assert one_line(read_items, TableSpec(f"{kind}:///absent.db", "t", "id"), tmp_path) == \
        f"{kind}:///absent.db: no such file {tmp_path / 'absent.db'}"
    (tmp_path / "junk.db").write_bytes(b"this is not a database file at all" * 10)
    message = one_line(read_items, TableSpec(f"{kind}:///junk.db", "t", "id"), tmp_path)
    assert message == f"{kind}:///junk.db: {tmp_path / 'junk.db'} is not a {'DuckDB' if kind == 'duckdb' else 'SQLite'} database file"
    make(tmp_path, other, name="wrong")
    message = one_line(read_token, TableSpec(f"{kind}:///wrong.{other}", "notes", "id"), tmp_path)
    assert f"is not a {'DuckDB' if kind == 'duckdb' else 'SQLite'} database file; it is a" in message
    (tmp_path / "folder.db").mkdir()
    assert "is a folder" in one_line(read_items, TableSpec(f"{kind}:///folder.db", "t", "id"), tmp_path)


HOLD_LOCK = """
import sys, time, duckdb
conn = duckdb.connect(sys.argv[1])
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.close()
print("released", flush=True)
time.sleep(5)
"""


def hold_lock(path: Path, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path), str(seconds)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_locked_duckdb_file_is_retried_then_one_line(tmp_path, monkeypatch):
    dsn = make(tmp_path, "duckdb")
    spec = TableSpec(dsn, "notes", "id", updated_at="updated")
    proc = hold_lock(tmp_path / "db.duckdb", 0.3)  # a writer that finishes within the retries
    try:
        assert len(read_items(spec, tmp_path)) == 3
    finally:
        proc.kill()
        proc.wait()
    monkeypatch.setattr(tables, "LOCK_RETRIES", (0.01, 0.01))
    proc = hold_lock(tmp_path / "db.duckdb", 30)
    try:
        message = one_line(read_token, spec, tmp_path)
    finally:
        proc.kill()
        proc.wait()
    assert message.startswith(f"{dsn}: {tmp_path / 'db.duckdb'} is locked by another process (3 attempts)")


def test_a_duckdb_file_open_read_write_in_this_process_is_one_line(tmp_path):
    dsn = make(tmp_path, "duckdb")
    conn = duckdb.connect(str(tmp_path / "db.duckdb"))
    try:
        assert "already open read-write in this process" in one_line(read_items, TableSpec(dsn, "notes", "id"),
                                                                     tmp_path)
    finally:
        conn.close()
    assert len(read_items(TableSpec(dsn, "notes", "id"), tmp_path)) == 3


@pytest.mark.parametrize("kind", KINDS)
def test_connections_are_closed(tmp_path, kind):
    """After each call the file is free for a writer (DuckDB allows one read-write process)."""
    dsn = make(tmp_path, kind)
    spec = TableSpec(dsn, "notes", "id", updated_at="updated")
    read_items(spec, tmp_path), read_token(spec, tmp_path), read_changed(spec, tmp_path, None)
    with pytest.raises(SourceError):
        read_items(TableSpec(dsn, "notes", "nope"), tmp_path)
    execute(tmp_path, kind, "INSERT INTO notes VALUES (9, 'w', 'w', NULL, NULL)")  # would fail on a lock


def test_importing_the_module_stays_cheap():
    probe = ("import sys; import synthex.core.importers.tables, synthex.core.importers.folder; "
             "print(sorted(m for m in ('duckdb', 'sqlite3', 'pyarrow', 'lancedb', 'dagster') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
