"""LangGraph / LangMem store items come in whole (issue 37), from the JSON (and JSONL) of ``Item.dict()``,
the SqliteStore's ``store`` table and the PostgresStore's ``store`` table as ``COPY ... (FORMAT csv,
HEADER)`` writes it: namespace, key, value and both times kept; re-imports incremental. The fixture
tests/data/langgraph is a real SqliteStore and a real PostgresStore on a real PostgreSQL
(tests/langgraph_store.py); ``SYNTHEX_SLOW_TESTS=1`` also repeats the SQLite run here, and the PostgreSQL
one runs wherever langgraph-checkpoint-postgres and PostgreSQL's binaries are installed (a few seconds)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import cli, load

from synthex.core.errors import SourceError
from synthex.core.importers import detect_format, load_source
from synthex.core.periods import iso, to_timestamp

FIXTURE = Path(__file__).parent / "data" / "langgraph"


def check_arrived(items_json: Path, got: dict[str, tuple[str, dict]]) -> None:
    """Every item LangGraph's own search returned arrived (``got``: original id -> text and metadata), with
    its namespace, key, value and times."""
    expected = json.loads(items_json.read_text())
    assert set(got) == {json.dumps([*i["namespace"], i["key"]], separators=(",", ":")) for i in expected}
    for item in expected:
        content, meta = got[json.dumps([*item["namespace"], item["key"]], separators=(",", ":"))]
        assert meta["source"]["raw"]["value"] == item["value"]
        assert meta["source"]["scope"] == {"namespace": item["namespace"]} and meta["source"]["store_key"] == item["key"]
        assert {k: meta["time"][k] for k in ("created_at", "updated_at")} == {
            k: iso(to_timestamp(item[k])) for k in ("created_at", "updated_at")}  # naive (SQLite's): UTC
        value = item["value"].get("content")
        text = value if isinstance(value, str) else value.get("content") if isinstance(value, dict) else None
        assert content == (text or json.dumps(item["value"], sort_keys=True))


def check_store(items_json: Path, root: Path) -> dict:
    """The project at ``root`` run: every item arrived as a record (``check_arrived``)."""
    pipe = load(root)
    try:
        stats = pipe.run().step_stats
        got = {r.meta("source.original_id"): r for r in pipe.records("langgraph_items")}
        found = [h.content for h in pipe.search("Bob", k=5)]
    finally:
        pipe.close()
    check_arrived(items_json, {k: (r.content, r.metadata) for k, r in got.items()})
    return {"stats": stats, "found": found, "ids": {k: r.id for k, r in got.items()}}


def init_from(tmp_path: Path, name: str, fmt: str) -> Path:
    """A project made by `synthex init --from` a copy of fixture file ``name`` (detected as ``fmt``)."""
    copied = tmp_path / name
    shutil.copy(FIXTURE / name, copied)
    assert detect_format(copied) == fmt
    cli("init", "from-langgraph", "--from", str(copied), "--dir", str(tmp_path / "proj"))
    return copied


def test_a_sqlite_store_arrives_whole_and_a_grown_one_adds_only_what_is_new(tmp_path):
    db = init_from(tmp_path, "store.db", "langgraph-sqlite")
    before = check_store(FIXTURE / "items.json", tmp_path / "proj")
    assert "Bob lives in Lisbon" in before["found"]
    shutil.copy(FIXTURE / "grown.db", db)  # the store went on: one put, one update, one delete
    after = check_store(FIXTURE / "grown.json", tmp_path / "proj")
    assert after["stats"]["langgraph_store"].output == 2  # Cid's new item and Bob's updated one, nothing else
    unchanged = set(before["ids"]) & set(after["ids"]) - {'["memories","bob","m3"]'}
    assert unchanged and all(before["ids"][k] == after["ids"][k] for k in unchanged)
    assert "Bob moved to Porto" in after["found"] and "Bob lives in Lisbon" not in after["found"]


def test_store_items_as_json_are_the_same_items(tmp_path):
    items = tmp_path / "items.json"
    shutil.copy(FIXTURE / "items.json", items)
    assert detect_format(items) == "langgraph-store"
    from_json, from_db = load_source(items), load_source(FIXTURE / "store.db")
    assert [(i.key, i.content, i.created_at) for i in from_json] == [(i.key, i.content, i.created_at) for i in from_db]
    server = tmp_path / "search_items.json"  # the LangGraph server's client.store.search_items()
    server.write_text(json.dumps({"items": json.loads(items.read_text())}))
    assert [i.key for i in load_source(server, "auto")] == [i.key for i in from_json]


def test_store_items_as_jsonl_are_the_same_items(tmp_path):
    lines = tmp_path / "items.jsonl"
    shutil.copy(FIXTURE / "items.jsonl", lines)
    assert detect_format(lines) == "langgraph-jsonl"
    from_json = load_source(FIXTURE / "items.json")
    assert [(i.key, i.content, i.created_at, i.metadata["time"]) for i in load_source(lines)] == [
        (i.key, i.content, i.created_at, i.metadata["time"]) for i in from_json]
    assert len(from_json) == 4


def test_a_postgres_store_table_arrives_whole(tmp_path):
    table = init_from(tmp_path, "store.csv", "langgraph-postgres-csv")
    got = check_store(FIXTURE / "postgres_items.json", tmp_path / "proj")
    assert len(got["ids"]) == 4 and "Bob lives in Lisbon" in got["found"]
    raw = next(i for i in load_source(table) if i.metadata["source"]["store_key"] == "m1").metadata["source"]["raw"]
    assert set(raw) == {"prefix", "key", "value", "created_at", "updated_at", "expires_at", "ttl_minutes"}
    assert raw["expires_at"] is None and raw["value"] == {"content": "Ann prefers aisle seats"}


def test_hostile_langgraph_files_are_one_line(tmp_path):
    db = tmp_path / "store.db"
    shutil.copy(FIXTURE / "store.db", db)
    with sqlite3.connect(db) as conn:
        conn.execute("update store set value = 'not json' where key = 'm2'")
    with pytest.raises(SourceError) as caught:
        load_source(db, "auto")
    assert str(caught.value) == f"{db}: store row #1 (memories.ann / m2): 'value' is not JSON"
    bad = tmp_path / "items.json"
    items = json.loads((FIXTURE / "items.json").read_text())
    items[2]["namespace"] = "memories.bob"
    bad.write_text(json.dumps(items))
    with pytest.raises(SourceError) as caught:
        load_source(bad, "langgraph-store")
    assert str(caught.value) == (f"{bad}: item #2 (? / m3): 'namespace' is a string 'memories.bob'; "
                                 "expected a list of strings")
    lines = (FIXTURE / "items.jsonl").read_text().splitlines()
    bad = tmp_path / "items.jsonl"
    bad.write_text("\n".join([lines[0], lines[1].replace('"value": {', '"value": [{').replace('}, "created_at"', '}], "created_at"')]))
    with pytest.raises(SourceError) as caught:
        load_source(bad, "auto")
    assert str(caught.value) == f"{bad}:2 (memories.ann / m2): 'value' is a list [{{'content': 'Ann is allergic to peanuts'}}]; expected an object"
    table = tmp_path / "store.csv"
    text = (FIXTURE / "store.csv").read_text()
    table.write_text(text.replace('"{""content"": ""Ann is allergic to peanuts""}"', "not json"))
    with pytest.raises(SourceError) as caught:
        load_source(table, "auto")
    assert str(caught.value) == f"{table}: store row #0 (memories.ann / m2): 'value' is not JSON"
    table.write_text(text.replace(",2026-12-02 07:19:40.322882+00,,", ",2026-12-02 07:19:40.322882+00,,,5"))
    with pytest.raises(SourceError) as caught:
        load_source(table, "auto")
    assert str(caught.value) == f"{table}: line 3: 7 columns expected"
    table.write_text(text.replace("prefix,key,", "prefix,name,"))
    with pytest.raises(SourceError) as caught:
        load_source(table, "langgraph-postgres-csv")
    assert str(caught.value).startswith(f"{table}: no 'key' column; expected the CSV of LangGraph's Postgres")


@pytest.mark.skipif(os.environ.get("SYNTHEX_SLOW_TESTS") != "1", reason="a real LangGraph SqliteStore: SYNTHEX_SLOW_TESTS=1")
def test_a_real_langgraph_store_round_trip(tmp_path):
    pytest.importorskip("langgraph.store.sqlite")
    import langgraph_store

    langgraph_store.write_fixture(tmp_path / "langgraph")
    cli("init", "from-langgraph", "--from", str(tmp_path / "langgraph" / "store.db"), "--dir", str(tmp_path / "proj"))
    check_store(tmp_path / "langgraph" / "items.json", tmp_path / "proj")


def test_a_real_postgres_store_round_trip(tmp_path):
    """LangGraph's own PostgresStore on a real PostgreSQL: its table, dumped as psql's \\copy does, arrives whole
    (read by the importer; the project's run over such a file is test_a_postgres_store_table_arrives_whole)."""
    pytest.importorskip("langgraph.store.postgres")
    from evals.postgres_server import find_bin

    if not find_bin("initdb"):
        pytest.skip("PostgreSQL's binaries are not installed (Debian: apt-get install postgresql)")
    import langgraph_store

    items = langgraph_store.write_postgres_store(tmp_path)
    (tmp_path / "items.json").write_text(json.dumps(items))
    table = tmp_path / "store.csv"
    assert detect_format(table) == "langgraph-postgres-csv"
    read = load_source(table)
    check_arrived(tmp_path / "items.json", {i.metadata["source"]["original_id"]: (i.content, i.metadata) for i in read})
    assert len(read) == len(items) == 4
