"""LangGraph / LangMem store items come in whole (issue 37), from the JSON of ``Item.dict()`` and from
the SqliteStore's ``store`` table: namespace, key, value and both times kept; re-imports incremental. The
fixture tests/data/langgraph is a real SqliteStore (tests/langgraph_store.py); ``SYNTHEX_SLOW_TESTS=1``
also repeats that run here."""

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

FIXTURE = Path(__file__).parent / "data" / "langgraph"


def check_store(items_json: Path, root: Path) -> dict:
    """Every item LangGraph's own search returned arrived, with its namespace, key, value and times."""
    pipe = load(root)
    try:
        stats = pipe.run().step_stats
        got = {r.meta("source.original_id"): r for r in pipe.records("langgraph_items")}
        found = [h.content for h in pipe.search("Bob", k=5)]
    finally:
        pipe.close()
    expected = json.loads(items_json.read_text())
    assert set(got) == {json.dumps([*i["namespace"], i["key"]], separators=(",", ":")) for i in expected}
    for item in expected:
        rec = got[json.dumps([*item["namespace"], item["key"]], separators=(",", ":"))]
        assert rec.meta("source.raw")["value"] == item["value"]
        assert rec.meta("source.scope") == {"namespace": item["namespace"]} and rec.meta("source.store_key") == item["key"]
        assert {k: rec.meta(f"time.{k}") for k in ("created_at", "updated_at")} == {
            k: item[k] + "Z" for k in ("created_at", "updated_at")}
        content = item["value"].get("content")
        text = content if isinstance(content, str) else content.get("content") if isinstance(content, dict) else None
        assert rec.content == (text or json.dumps(item["value"], sort_keys=True))
    return {"stats": stats, "found": found, "ids": {k: r.id for k, r in got.items()}}


def test_a_sqlite_store_arrives_whole_and_a_grown_one_adds_only_what_is_new(tmp_path):
    db = tmp_path / "store.db"
    shutil.copy(FIXTURE / "store.db", db)
    assert detect_format(db) == "langgraph-sqlite"
    cli("init", "from-langgraph", "--from", str(db), "--dir", str(tmp_path / "proj"))
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


@pytest.mark.skipif(os.environ.get("SYNTHEX_SLOW_TESTS") != "1", reason="a real LangGraph SqliteStore: SYNTHEX_SLOW_TESTS=1")
def test_a_real_langgraph_store_round_trip(tmp_path):
    pytest.importorskip("langgraph.store.sqlite")
    import langgraph_store

    langgraph_store.write_fixture(tmp_path / "langgraph")
    cli("init", "from-langgraph", "--from", str(tmp_path / "langgraph" / "store.db"), "--dir", str(tmp_path / "proj"))
    check_store(tmp_path / "langgraph" / "items.json", tmp_path / "proj")
